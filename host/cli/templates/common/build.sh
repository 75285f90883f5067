#!/usr/bin/env sh
# Builds this plugin into dist/{{name}}.wasm (+ dist/{{name}}.yaml) and runs its test cases
# under its approval (approvals/{{name}}.yaml), as the host would load it.
# `kubewasm build` installs the pinned {{lang_title}} toolchain the first time (in
# ~/.cache/kubewasm/tools, or $KUBEWASM_TOOLS_DIR).
set -eu
cd "$(dirname "$0")"
kubewasm build && kubewasm test --approvals approvals tests/
