#!/usr/bin/env bash
# Builds every C plugin (plugins/c/<name>/: any folder holding .c files but kubewasm/ and tests/) into
# target/plugins/c/<name>.wasm, with plugins/rust/<name>/<name>.yaml (its settings, shared
# with the Rust twin) beside it.
# Works from any directory.
#
# Installs what it needs, only when missing (plugins/toolchain.sh, the implementation
# `kubewasm build` uses too): the Debian packages clang, lld, wasi-libc,
# libclang-rt-dev-wasm32 (apt-get; runs as root). Nothing else: the kubewasm binary of this
# checkout (built first with cargo, or $KUBEWASM) carries the bindings of wit/plugin.wit
# (`kubewasm bindings c`, into target/c-bindings) and makes the components (`kubewasm
# componentize`, with the WASI preview1 adapter of the host's wasmtime), as it does for
# `kubewasm build`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$root/target/tools"
# shellcheck source=../toolchain.sh
source "$root/plugins/toolchain.sh"
bindings="$root/target/c-bindings"
build_dir="$root/target/plugins-c-build"
out_dir="$root/target/plugins/c"
mkdir -p "$tools" "$build_dir" "$out_dir"

ensure_c_toolchain
ensure_kubewasm "$root"

# ---- Bindings for wit/plugin.wit: the ones the kubewasm binary carries.
"$kubewasm" bindings c "$bindings"

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
