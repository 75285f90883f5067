#!/usr/bin/env bash
# Builds the kubewasm image, or a plugin image, as a docker-archive tarball: no container
# daemon, no base image, nothing pulled.
#
#   deploy/build-image.sh [--tag REF] [--profile PROFILE] [--binary FILE] OUT.tar
#   deploy/build-image.sh --plugins DIR [--tag REF] [--binary FILE] OUT.tar
#
#   docker load -i OUT.tar | podman load -i OUT.tar | ctr -n k8s.io images import OUT.tar
#
# The host image is what deploy/Dockerfile builds (`FROM scratch`): the static binary
# (deploy/build.sh) at /usr/local/bin/kubewasm, deploy/image/rootfs/etc (passwd, group,
# nsswitch.conf), this machine's CA bundle (/etc/ssl/certs/ca-certificates.crt: registry
# TLS uses the system's roots), /var/cache/kubewasm and /plugins owned by 65532, user
# 65532:65532, the Dockerfile's ENV, ENTRYPOINT and CMD. One layer.
#
# --plugins DIR: a plugin image for the plugin-image route (deploy/kubernetes/components/
# plugin-image): the host image plus a layer with DIR's *.wasm and *.yaml in /plugins
# (0444), whose init container runs `kubewasm copy-plugins /plugins /target` (the images
# have no shell and no `cp`). Its first layer is the host image's, so a node that has the
# host image stores only the plugin layer. Default tag localhost/kubewasm-plugins:VERSION.
#
# --tag REF        default localhost/kubewasm:VERSION (VERSION from Cargo.toml)
# --profile NAME   the Cargo profile of the binary (default release; tests use image-check)
# --binary FILE    use this static binary instead of building one
# Reproducible: SOURCE_DATE_EPOCH (default 0) is every mtime; same inputs, same bytes.
# Prints the image ID, the layer and binary sizes. The writer is deploy/image/mkimage.py.
set -euo pipefail

usage() {
    sed -n '5,6p' "${BASH_SOURCE[0]}" | sed 's/^#   /usage: /' >&2
    exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag=""
profile=release
binary=""
plugins=""
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --tag | --profile | --binary | --plugins)
            [ $# -ge 2 ] || usage
            case "$1" in
                --tag) tag="$2" ;;
                --profile) profile="$2" ;;
                --binary) binary="$2" ;;
                --plugins) plugins="$2" ;;
            esac
            shift
            ;;
        -h | --help) usage ;;
        -*) echo "error: unknown option $1" >&2; usage ;;
        *)
            [ -z "$out" ] || usage
            out="$1"
            ;;
    esac
    shift
done
[ -n "$out" ] || usage

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")"
[ -n "$version" ] || { echo "error: no version in $root/Cargo.toml" >&2; exit 1; }
if [ -z "$tag" ]; then
    if [ -n "$plugins" ]; then tag="localhost/kubewasm-plugins:$version"; else tag="localhost/kubewasm:$version"; fi
fi
ca_file=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$ca_file" ]; then
    echo "error: $ca_file is missing (Debian: apt-get install ca-certificates)" >&2
    exit 1
fi
if [ -n "$plugins" ] && [ ! -d "$plugins" ]; then
    echo "error: --plugins $plugins is not a directory" >&2
    exit 1
fi

if [ -z "$binary" ]; then
    staging="$(mktemp -d)"
    trap 'rm -rf "$staging"' EXIT
    # build.sh's output goes to stderr: stdout is the image summary.
    bash "$root/deploy/build.sh" --profile "$profile" "$staging" >&2
    binary="$staging/kubewasm"
fi

args=(--tag "$tag" --binary "$binary" --ca-file "$ca_file")
[ -z "$plugins" ] || args+=(--plugins "$plugins")
python3 "$root/deploy/image/mkimage.py" "${args[@]}" "$out"
