#!/usr/bin/env bash
# Builds every Python plugin (plugins/python/<name>/app.py) into
# target/plugins/python/<name>.wasm with componentize-py, and copies the settings file
# plugins/rust/<name>/<name>.yaml beside it when there is one. Works from any directory.
#
# Idempotent: the venv target/tools/python-venv is (re)created only when it is missing or
# requirements.txt changed (plugins/toolchain.sh, shared with `kubewasm build`); a plugin
# is rebuilt only when its sources, the kubewasm layer, the WIT or the toolchain changed
# (FORCE=1 rebuilds anyway).
#
# Environment: PYTHON (default python3, >= 3.10) creates the venv.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
wit="$root/wit"
world="kubewasm:plugin/plugin"
tools="$root/target/tools"
# shellcheck source=../toolchain.sh
source "$root/plugins/toolchain.sh"
out_dir="$root/target/plugins/python"
stage_root="$out_dir/.build"
bindings_dir="$root/target/python-bindings"

# A content hash of files and directories (paths and bytes), ignoring caches.
hash_tree() {
    find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z |
        while IFS= read -r -d '' f; do
            printf '%s\n' "${f#"$root"/}"
            cat "$f"
        done | hash_stdin
}

# 1. The toolchain: componentize-py as pinned by requirements.txt, in target/tools/python-venv
#    (plugins/toolchain.sh: the same install `kubewasm build` makes).
ensure_componentize_py "$here/requirements.txt"
want="$(hash_stdin <"$here/requirements.txt")"

# 2. Bindings for editors and type checkers (componentize-py generates its own when it
#    builds; these are only for reading). Regenerated when the WIT changes.
wit_hash="$(hash_tree "$wit")-$want"
if [ "$(cat "$bindings_dir/.wit.sha256" 2>/dev/null)" != "$wit_hash" ]; then
    rm -rf "$bindings_dir"
    "$cpy" -q -d "$wit" -w "$world" bindings "$bindings_dir"
    echo "$wit_hash" >"$bindings_dir/.wit.sha256"
fi

# 3. The plugins.
mkdir -p "$out_dir" "$stage_root"
built=0
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    [ -f "$dir/app.py" ] || continue
    stage="$stage_root/$name"
    # Stage exactly what goes into the component: the plugin's modules and the layer.
    rm -rf "$stage"
    mkdir -p "$stage"
    find "$dir" -maxdepth 1 -name '*.py' -exec cp {} "$stage/" \;
    cp -r "$here/kubewasm" "$stage/kubewasm"
    find "$stage" -name __pycache__ -prune -exec rm -rf {} +

    # The toolchain functions and the pre-initializer shim: how the component is made.
    key="$(hash_tree "$stage" "$wit" "$root/plugins/toolchain.sh" "$root/plugins/preinit-shim.c")-$want"
    wasm="$out_dir/$name.wasm"
    if [ "${FORCE:-0}" = 1 ] || [ ! -f "$wasm" ] || [ "$(cat "$stage_root/$name.sha256" 2>/dev/null)" != "$key" ]; then
        echo "python: building $name"
        # One line naming the fix instead of componentize-py's backtrace when app.py
        # exports no Handler (check_app.py; `kubewasm build` can run the same check).
        "${PYTHON:-python3}" "$here/check_app.py" "$stage" || exit 1
        python_component "$wit" "$stage" "$wasm"
        echo "$key" >"$stage_root/$name.sha256"
        built=$((built + 1))
    fi
    settings="$root/plugins/rust/$name/$name.yaml"
    if [ -f "$settings" ]; then
        cp "$settings" "$out_dir/$name.yaml"
    fi
done

echo "python plugins in ${out_dir#"$root"/} ($built rebuilt):"
for f in "$out_dir"/*.wasm; do
    [ -e "$f" ] || continue
    printf '  %-36s %10d bytes (%s)\n' "$(basename "$f")" "$(wc -c <"$f")" "$(du -h "$f" | cut -f1)"
done
