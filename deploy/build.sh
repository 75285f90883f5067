#!/usr/bin/env bash
# Builds the release `kubewasm` binary and copies it into OUT_DIR.
#
#   deploy/build.sh [--dry-run|--print] OUT_DIR
#
# The container build (deploy/Dockerfile) runs exactly this; it works the same outside a
# container, from any directory. CARGO_TARGET_DIR is honoured (default: <repo>/target).
# --dry-run (alias --print) prints the commands it would run and runs none of them.
set -euo pipefail

usage() {
    echo "usage: $0 [--dry-run|--print] OUT_DIR" >&2
    exit 2
}

dry_run=0
out_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run | --print) dry_run=1 ;;
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
binary="$target_dir/release/kubewasm"

# Print a command (shell-quoted) and run it unless this is a dry run.
run() {
    local quoted
    printf -v quoted '%q ' "$@"
    echo "+ ${quoted% }"
    if [ "$dry_run" -eq 0 ]; then
        "$@"
    fi
}

run cargo build --release --locked -p kubewasm-cli \
    --manifest-path "$root/Cargo.toml" --target-dir "$target_dir"
run mkdir -p "$out_dir"
run install -m 0755 "$binary" "$out_dir/kubewasm"
if [ "$dry_run" -eq 0 ]; then
    "$out_dir/kubewasm" --version
fi
