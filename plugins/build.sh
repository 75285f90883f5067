#!/usr/bin/env bash
# Builds every example plugin of every language: the Rust ones for wasm32-wasip2 (release)
# into target/plugins/NAME.wasm with their settings NAME.yaml beside them, then the
# JavaScript, Python, C and Go versions into target/plugins/{js,python,c,go}/NAME.wasm (each
# language's build.sh installs its toolchain at pinned versions, only when missing).
# Works from any directory. KUBEWASM_LANGS="js python c go" chooses the other languages
# (empty: Rust only).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target=wasm32-wasip2
build_dir="$root/target/plugins-build"
out_dir="$root/target/plugins"

# Install the target if this toolchain lacks it (plugins/toolchain.sh, shared with
# `kubewasm build`).
tools="$root/target/tools"
# shellcheck source=toolchain.sh
source "$here/toolchain.sh"
ensure_rust_target

cargo build --release --target "$target" \
    --manifest-path "$here/Cargo.toml" \
    --target-dir "$build_dir"

mkdir -p "$out_dir"
# Every workspace member with a cdylib is a plugin; its folder name is its manifest name.
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
done

echo "plugins in ${out_dir#"$root"/}:"
for f in "$out_dir"/*.wasm; do
    printf '  %-36s %8d bytes\n' "$(basename "$f")" "$(wc -c <"$f")"
done

for lang in ${KUBEWASM_LANGS-js python c go}; do
    echo "== $lang plugins"
    bash "$here/$lang/build.sh"
done
