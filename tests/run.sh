#!/usr/bin/env bash
# The whole test suite, from a fresh clone: builds every plugin (installing the wasm
# target if needed), runs the plugin SDK's native tests, then every workspace test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

echo "== building plugins"
bash plugins/build.sh

echo "== building test-only plugins"
bash tests/plugins/build.sh

echo "== plugin SDK and plugins: native unit tests"
cargo test --manifest-path plugins/Cargo.toml --quiet

echo "== host, embedded API server, integration tests"
cargo test --workspace --quiet

echo "== conformance: every language's plugins against the reference cases"
kubewasm="$root/target/debug/kubewasm"
for dir in plugins/conformance/*/; do
    scenario="$(basename "$dir")"
    for wasm in target/plugins/"$scenario".wasm target/plugins-*/"$scenario".wasm; do
        [ -f "$wasm" ] || continue
        echo "-- $wasm"
        "$kubewasm" --log warn test --plugin "$wasm" "$dir"
    done
done
