#!/usr/bin/env bash
# Peak RSS of `kubewasm dev` (embedded API server + host) while a plugin provisions N
# ContentSites (default: the Python contentsite provisioner, 1,000 sites, --concurrency 16).
# Prints the host's peak RSS (VmHWM), its RSS at the end, and the elapsed time; no
# thresholds. Reproduce the issue-14 figure with the defaults:
#
#   bash plugins/build.sh                       # target/plugins/python/...
#   bash tests/bench/python-provisioning-rss.sh
#
# Variables: PLUGIN (a .wasm; its .yaml beside it is used), SITES, CONCURRENCY, KUBEWASM
# (the binary; default target/release/kubewasm, built if missing), EXTRA (more host flags,
# e.g. "--pool-memory-mib 64"), KUBEWASM_CACHE_DIR (code cache, default
# target/kubewasm-cache).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
plugin="${PLUGIN:-$root/target/plugins/python/contentsite-provisioner.wasm}"
sites="${SITES:-1000}"
concurrency="${CONCURRENCY:-16}"
bin="${KUBEWASM:-$root/target/release/kubewasm}"
export KUBEWASM_CACHE_DIR="${KUBEWASM_CACHE_DIR:-$root/target/kubewasm-cache}"
[ -f "$plugin" ] || { echo "$plugin is missing: run plugins/build.sh" >&2; exit 1; }
if [ ! -x "$bin" ]; then
    cargo build --quiet --release -p kubewasm-cli --manifest-path "$root/Cargo.toml"
fi
work="$(mktemp -d)"
host_pid=""
cleanup() {
    [ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/plugins"
name="$(basename "$plugin" .wasm)"
cp "$plugin" "$work/plugins/$name.wasm"
[ -f "${plugin%.wasm}.yaml" ] && cp "${plugin%.wasm}.yaml" "$work/plugins/$name.yaml"

# shellcheck disable=SC2086
"$bin" dev --plugins "$work/plugins" --apply "$root/examples/crds" \
    --kubeconfig-out "$work/kubeconfig" --concurrency "$concurrency" ${EXTRA:-} \
    2>"$work/host.log" &
host_pid=$!
kc=(kubectl --kubeconfig "$work/kubeconfig")
for _ in $(seq 600); do
    [ -s "$work/kubeconfig" ] && "${kc[@]}" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.1
done
"${kc[@]}" create namespace shop >/dev/null
{
    for i in $(seq "$sites"); do
        cat <<YAML
---
apiVersion: sites.kubewasm.dev/v1alpha1
kind: ContentSite
metadata: {name: site-$i, namespace: shop}
spec: {title: Site $i, hostname: site-$i.example.com, database: {members: 3, version: 7.0.12}}
YAML
    done
} >"$work/sites.yaml"
hwm() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$host_pid/status"; }
rss() { awk '/VmRSS/ {print int($2/1024)}' "/proc/$host_pid/status"; }
echo "host started: RSS $(rss) MiB"
started=$(date +%s.%N)
"${kc[@]}" create -f "$work/sites.yaml" >/dev/null
while :; do
    n=$("${kc[@]}" get mongodb -n shop --no-headers 2>/dev/null | wc -l)
    [ "$n" -ge "$sites" ] && break
    kill -0 "$host_pid" 2>/dev/null || { echo "host exited" >&2; tail -20 "$work/host.log" >&2; exit 1; }
    sleep 0.5
done
elapsed=$(echo "$(date +%s.%N) - $started" | bc)
services=$("${kc[@]}" get services -n shop --no-headers 2>/dev/null | wc -l)
echo "plugin: $plugin"
echo "provisioned $sites ContentSites ($n MongoDB, $services Service) at --concurrency $concurrency in ${elapsed}s"
echo "host (kubewasm dev, embedded API server included): peak RSS $(hwm) MiB, RSS at the end $(rss) MiB"
