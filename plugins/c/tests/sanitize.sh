#!/usr/bin/env bash
# Builds each C plugin natively with ASan/LSan/UBSan and runs tests/abi_stress.c against it:
# catches leaks across calls, double frees and overflows in the layer and the glue.
# Needs the bindings from plugins/c/build.sh (target/c-bindings). Works from any directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
c="$(cd "$here/.." && pwd)"
root="$(cd "$c/../.." && pwd)"
bindings="$root/target/c-bindings"
out="$root/target/plugins-c-build/sanitize"
mkdir -p "$out"
[ -f "$bindings/plugin.h" ] || { echo "error: run plugins/c/build.sh first" >&2; exit 1; }
for dir in "$c"/*/; do
    name="$(basename "$dir")"
    case "$name" in kubewasm | tests) continue ;; esac
    compgen -G "$dir*.c" >/dev/null || continue
    clang -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
        -Wno-unknown-attributes -Wno-ignored-attributes -w \
        -I"$c/kubewasm" -I"$bindings" "$here/abi_stress.c" "$dir"*.c "$c"/kubewasm/*.c \
        "$bindings/plugin.c" -o "$out/$name"
    ASAN_OPTIONS=detect_leaks=1 "$out/$name" >/dev/null
    echo "ok   $name: 70000 calls, no leak or memory error"
done
