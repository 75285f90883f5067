#!/usr/bin/env bash
# Builds the test-only plugins into target/test-plugins/NAME.wasm.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target=wasm32-wasip2
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    rustup target add "$target"
fi
cargo build --quiet --release --target "$target" --manifest-path "$here/Cargo.toml" \
    --target-dir "$root/target/plugins-build"
mkdir -p "$root/target/test-plugins"
for name in testkit hostile legacy observer; do
    cp "$root/target/plugins-build/$target/release/$name.wasm" "$root/target/test-plugins/$name.wasm"
done
# A second build of testkit with different code (version 2), for the hot-reload tests.
TESTKIT_VERSION=2 cargo build --quiet --release --target "$target" --manifest-path "$here/Cargo.toml" \
    --target-dir "$root/target/plugins-build-v2" -p testkit
cp "$root/target/plugins-build-v2/$target/release/testkit.wasm" "$root/target/test-plugins/testkit-v2.wasm"
