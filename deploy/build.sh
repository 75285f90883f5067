#!/usr/bin/env bash
# Builds the release `kubewasm` binary, statically linked, and copies it into OUT_DIR.
#
#   deploy/build.sh [--dry-run|--print] [--profile PROFILE] OUT_DIR
#
# The container build (deploy/Dockerfile) runs exactly this, and so does
# deploy/build-image.sh; it works the same outside a container, from any directory.
# CARGO_TARGET_DIR is honoured (default: <repo>/target); the binary is
# TARGET_DIR/x86_64-unknown-linux-gnu/release/kubewasm.
# --dry-run (alias --print) prints the commands it would run and runs none of them.
# --profile builds another Cargo profile than release (tests/image.rs: image-check).
#
# Static glibc (`-C target-feature=+crt-static`), not musl: see deploy/README.md, "Build
# the image without a daemon". The explicit --target keeps build scripts and proc-macros
# dynamic (they run on the build machine); only the kubewasm binary is static. Paths of
# the checkout and of CARGO_HOME are remapped so the binary does not depend on where the
# repository sits (/src in the container build): same sources, same toolchain, same
# glibc → the same bytes.
set -euo pipefail

usage() {
    echo "usage: $0 [--dry-run|--print] [--profile PROFILE] OUT_DIR" >&2
    exit 2
}

dry_run=0
out_dir=""
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run | --print) dry_run=1 ;;
        --profile)
            [ $# -ge 2 ] || usage
            profile="$2"
            shift
            ;;
        -h | --help) usage ;;
        -*) echo "error: unknown option $1" >&2; usage ;;
        *)
            [ -z "$out_dir" ] || usage
            out_dir="$1"
            ;;
    esac
    shift
done
[ -n "$out_dir" ] || usage

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
target=x86_64-unknown-linux-gnu
# Cargo's folder for a profile: dev builds into debug/, any other into its own name.
profile_dir="$profile"
[ "$profile" != dev ] || profile_dir=debug
binary="$target_dir/$target/$profile_dir/kubewasm"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rustflags="-C target-feature=+crt-static --remap-path-prefix=$root=/src --remap-path-prefix=$cargo_home=/cargo"

# Print a command (shell-quoted) and run it unless this is a dry run.
run() {
    local quoted
    printf -v quoted '%q ' "$@"
    echo "+ ${quoted% }"
    if [ "$dry_run" -eq 0 ]; then
        "$@"
    fi
}

# CARGO_ENCODED_RUSTFLAGS would win over RUSTFLAGS: unset, so the flags are exactly these.
run env -u CARGO_ENCODED_RUSTFLAGS RUSTFLAGS="$rustflags" \
    cargo build --profile "$profile" --locked -p kubewasm-cli --target "$target" \
    --manifest-path "$root/Cargo.toml" --target-dir "$target_dir"
run mkdir -p "$out_dir"
run install -m 0755 "$binary" "$out_dir/kubewasm"
if [ "$dry_run" -eq 0 ]; then
    "$out_dir/kubewasm" --version
fi
