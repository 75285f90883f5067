#!/usr/bin/env bash
# The cross-language conformance suite: every scenario of the table below, in every language
# of the table, through `kubewasm test --approvals plugins/approvals.yaml --plugin
# target/plugins/<lang>/<scenario>.wasm plugins/conformance/<scenario>/` (one approval
# file for every language: each build must ask for exactly what the demo approves). The table is explicit: a missing build fails the run
# (naming it) instead of being skipped, and so does a scenario folder the table leaves out.
# Works from any directory; tests/run.sh runs it after building the plugins and the host.
#
#   plugins/conformance/run.sh [KUBEWASM]   # default: target/debug/kubewasm
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
kubewasm="${1:-$root/target/debug/kubewasm}"

scenarios=(contentsite-provisioner mongodb-monitor seldon-endpoint)
langs=(rust go js python c)

# Every scenario folder is in the table.
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    if [[ " ${scenarios[*]} " != *" $name "* ]]; then
        echo "error: conformance: plugins/conformance/$name/ is not in the table of $0" >&2
        exit 1
    fi
done

# Every entry is built, before running any (one message lists them all).
missing=()
for scenario in "${scenarios[@]}"; do
    for lang in "${langs[@]}"; do
        wasm="target/plugins/$lang/$scenario.wasm"
        [ -f "$root/$wasm" ] || missing+=("$lang $scenario: $wasm (plugins/$lang/build.sh)")
    done
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "error: conformance: ${#missing[@]} of $((${#scenarios[@]} * ${#langs[@]})) builds are missing:" >&2
    printf '  %s\n' "${missing[@]}" >&2
    echo "run plugins/build.sh (every language) first" >&2
    exit 1
fi

if [ ! -x "$kubewasm" ]; then
    echo "error: conformance: $kubewasm is missing (cargo build -p kubewasm-cli)" >&2
    exit 1
fi

failed=()
for scenario in "${scenarios[@]}"; do
    for lang in "${langs[@]}"; do
        wasm="target/plugins/$lang/$scenario.wasm"
        echo "-- $wasm"
        if ! "$kubewasm" --log warn test --approvals "$root/plugins/approvals.yaml" \
            --crds "$root/examples/crds" --plugin "$root/$wasm" "$here/$scenario/"; then
            failed+=("$lang $scenario")
        fi
    done
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "error: conformance: ${#failed[@]} failed:" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "conformance: ${#scenarios[@]} scenarios x ${#langs[@]} languages passed"
