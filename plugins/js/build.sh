#!/usr/bin/env bash
# Builds every JavaScript plugin (plugins/js/<name>/index.js) into
# target/plugins/js/<name>.wasm with componentize-js, and copies the settings file
# plugins/rust/<name>/<name>.yaml (or plugins/js/<name>/<name>.yaml) beside it.
# Works from any directory. Idempotent: `npm ci` only when node_modules is missing or the
# lockfile changed; a plugin is rebuilt only when its inputs changed.
#
#   plugins/js/build.sh                  # all plugins
#   plugins/js/build.sh mongodb-monitor  # just these
#   OUT_DIR=dist plugins/js/build.sh             # another output folder (relative to cwd)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
wit="$root/wit"
world="plugin"
out_dir="${OUT_DIR:-$root/target/plugins/js}"
case "$out_dir" in /*) ;; *) out_dir="$PWD/$out_dir" ;; esac  # relative to the caller's cwd
stage_root="$root/target/plugins-js-build"
tools="$root/target/tools" # the pre-initializer shim (plugins/toolchain.sh) is built there
# shellcheck source=../toolchain.sh
source "$root/plugins/toolchain.sh" # js_component: the same command `kubewasm build` runs

for tool in node npm sha256sum; do
    command -v "$tool" >/dev/null || { echo "error: $tool is required" >&2; exit 1; }
done

# 1. Toolchain: the pinned componentize-js from the committed lockfile.
lock_hash="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
stamp="$here/node_modules/.kubewasm-lock.sha256"
if [ ! -x "$here/node_modules/.bin/componentize-js" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$lock_hash" ]; then
    echo "installing JS toolchain (npm ci)"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock_hash" >"$stamp"
fi
componentize="$here/node_modules/.bin/componentize-js"
cjs_version="$(node -p "require('$here/node_modules/@bytecodealliance/componentize-js/package.json').version")"

# 2. Plugins: every folder with an index.js, except the layer and the tests.
names=()
if [ "$#" -gt 0 ]; then
    names=("$@")
else
    for dir in "$here"/*/; do
        name="$(basename "$dir")"
        case "$name" in kubewasm | node_modules | test) continue ;; esac
        [ -f "$dir/index.js" ] && names+=("$name")
    done
fi

mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
for name in "${names[@]}"; do
    src="$here/$name"
    [ -f "$src/index.js" ] || { echo "error: $src/index.js not found" >&2; exit 1; }

    # componentize-js loads modules only from the entry file's folder and below, so stage the
    # layer and the plugin side by side under one folder with a one-line entry module.
    stage="$stage_root/$name"
    rm -rf "$stage"
    mkdir -p "$stage"
    cp -R "$here/kubewasm" "$stage/kubewasm"
    cp -R "$src" "$stage/$name"
    echo "export { handler } from './$name/index.js';" >"$stage/entry.js"

    # Rebuild only when the staged sources, the WIT, the toolchain or how it runs changed.
    inputs_hash="$( { (cd "$stage" && find . -type f -name '*.js' | LC_ALL=C sort | xargs sha256sum)
                      find "$wit" -type f -name '*.wit' | LC_ALL=C sort | xargs sha256sum
                      echo "componentize-js $cjs_version $world"
                      # How it is built: the shared functions and the pre-initializer shim.
                      sha256sum "$root/plugins/toolchain.sh" "$root/plugins/preinit-shim.c"; } |
                    sha256sum | cut -d' ' -f1)"
    wasm="$out_dir/$name.wasm"
    hash_file="$stage_root/$name.inputs.sha256"
    if [ -f "$wasm" ] && [ "$(cat "$hash_file" 2>/dev/null)" = "$inputs_hash" ]; then
        echo "$name: up to date"
    else
        echo "$name: componentize-js $cjs_version"
        # One line naming the fix when the plugin exports no `handler` (check-entry.mjs;
        # `kubewasm build` can run the same check on a project's main module).
        node "$here/check-entry.mjs" "$stage/$name/index.js" || exit 1
        js_component "$componentize" "$wit" "$stage" entry.js "$wasm"
        echo "$inputs_hash" >"$hash_file"
    fi

    # Settings: the JS plugin's own, else the Rust twin's (same semantics).
    if [ -f "$src/$name.yaml" ]; then
        cp "$src/$name.yaml" "$out_dir/$name.yaml"
    elif [ -f "$root/plugins/rust/$name/$name.yaml" ]; then
        cp "$root/plugins/rust/$name/$name.yaml" "$out_dir/$name.yaml"
    fi
done

echo "JavaScript plugins in ${out_dir#"$root"/}:"
for name in "${names[@]}"; do
    f="$out_dir/$name.wasm"
    printf '  %-36s %10d bytes\n' "$(basename "$f")" "$(wc -c <"$f")"
done
