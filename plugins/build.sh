#!/usr/bin/env bash
# Builds every example plugin of every language into target/plugins/<lang>/<name>.wasm,
# each with its settings <name>.yaml beside it: Rust (plugins/rust/build.sh), then
# JavaScript, Python, C and Go (plugins/{js,python,c,go}/build.sh). Each language's build.sh
# installs its toolchain at pinned versions, only when missing. Works from any directory.
# KUBEWASM_LANGS="js python c go" chooses the languages built after Rust (empty: Rust only).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

for lang in rust ${KUBEWASM_LANGS-js python c go}; do
    echo "== $lang plugins"
    bash "$here/$lang/build.sh"
done
