#!/usr/bin/env bash
# Builds every Rust plugin (a member of this workspace with a cdylib: plugins/rust/<name>/)
# for wasm32-wasip2 (release) into target/plugins/rust/<name>.wasm, with
# plugins/rust/<name>/<name>.yaml (its settings) beside it. Works from any directory.
# Installs the wasm32-wasip2 target when missing (plugins/toolchain.sh, shared with
# `kubewasm build`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target=wasm32-wasip2
build_dir="$root/target/plugins-build"
out_dir="$root/target/plugins/rust"
tools="$root/target/tools"
# shellcheck source=../toolchain.sh
source "$root/plugins/toolchain.sh"
ensure_rust_target

cargo build --release --target "$target" \
    --manifest-path "$here/Cargo.toml" \
    --target-dir "$build_dir"

mkdir -p "$out_dir"
# Every workspace member with a cdylib is a plugin; its folder name is its manifest name.
built=()
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    [ -f "$dir/Cargo.toml" ] || continue
    grep -q cdylib "$dir/Cargo.toml" || continue
    wasm="$build_dir/$target/release/${name//-/_}.wasm"
    if [ ! -f "$wasm" ]; then
        echo "error: $wasm was not built" >&2
        exit 1
    fi
    cp "$wasm" "$out_dir/$name.wasm"
    if [ -f "$dir/$name.yaml" ]; then
        cp "$dir/$name.yaml" "$out_dir/$name.yaml"
    fi
    built+=("$name")
done

echo "Rust plugins in ${out_dir#"$root"/}:"
for name in "${built[@]}"; do
    printf '  %-36s %8d bytes\n' "$name.wasm" "$(wc -c <"$out_dir/$name.wasm")"
done
