#!/usr/bin/env bash
# Peak RSS of kubewasm while a plugin provisions N ContentSites (default: the Python
# contentsite provisioner, 1,000 sites, --concurrency 16). Prints the host's peak RSS
# (VmHWM), its RSS at the end, its CPU time and the elapsed time; no thresholds.
#
# Two modes:
# - default: `kubewasm dev` (the embedded API server runs in the same process, so the
#   figures include the server);
# - KUBECONFIG=FILE: `kubewasm run` against that cluster (a real kube-apiserver, admin
#   credentials, `--no-impersonation`), in a fresh namespace deleted afterwards; the CRDs
#   of examples/crds are created if the cluster lacks them (existing ones are kept). The
#   figures are the host's alone.
#
#   bash plugins/build.sh                       # target/plugins/python/...
#   bash tests/bench/python-provisioning-rss.sh
#   KUBECONFIG=~/.kube/config bash tests/bench/python-provisioning-rss.sh
#
# Variables: PLUGIN (a .wasm), SETTINGS (its settings file; default the .yaml beside it,
# else plugins/rust/contentsite-provisioner/contentsite-provisioner.yaml), APPROVALS (the
# operator's approvals, default plugins/approvals.yaml, which approves the seed plugins in
# every language), SITES, CONCURRENCY, KUBEWASM (the binary; default
# target/release/kubewasm, built if missing), EXTRA (more host flags, e.g.
# "--max-instances 4"), BENCH_CACHE_DIR (code cache, default target/kubewasm-bench-cache),
# BENCH_CACHE_KEY_FILE (its key, default target/kubewasm-bench-cache.key, created if
# missing, so a second run does not recompile: run once to warm it, e.g. SITES=10).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
plugin="${PLUGIN:-$root/target/plugins/python/contentsite-provisioner.wasm}"
sites="${SITES:-1000}"
concurrency="${CONCURRENCY:-16}"
bin="${KUBEWASM:-$root/target/release/kubewasm}"
real="${KUBECONFIG:-}"
# A cache of its own: a process with another key rewrites a shared entry.
export KUBEWASM_CACHE_DIR="${BENCH_CACHE_DIR:-$root/target/kubewasm-bench-cache}"
export KUBEWASM_CACHE_KEY_FILE="${BENCH_CACHE_KEY_FILE:-$root/target/kubewasm-bench-cache.key}"
mkdir -p "$KUBEWASM_CACHE_DIR"
[ -s "$KUBEWASM_CACHE_KEY_FILE" ] || (umask 077 && head -c 32 /dev/urandom >"$KUBEWASM_CACHE_KEY_FILE")
[ -f "$plugin" ] || { echo "$plugin is missing: run plugins/build.sh" >&2; exit 1; }
settings="${SETTINGS:-${plugin%.wasm}.yaml}"
[ -f "$settings" ] || settings="$root/plugins/contentsite-provisioner/contentsite-provisioner.yaml"
approvals="${APPROVALS:-$root/plugins/approvals.yaml}"
if [ ! -x "$bin" ]; then
    cargo build --quiet --release -p kubewasm-cli --manifest-path "$root/Cargo.toml"
fi
work="$(mktemp -d)"
host_pid=""
ns=shop
cleanup() {
    [ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
    [ -n "$real" ] && kubectl --kubeconfig "$real" delete namespace "$ns" --wait=false >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/plugins"
name="$(basename "$plugin" .wasm)"
cp "$plugin" "$work/plugins/$name.wasm"
cp "$settings" "$work/plugins/$name.yaml"

if [ -n "$real" ]; then
    ns="rss-$(date +%s)"
    kc=(kubectl --kubeconfig "$real")
    for crd in "$root"/examples/crds/*.yaml; do
        "${kc[@]}" get crd "$(basename "$crd" .yaml)" >/dev/null 2>&1 || "${kc[@]}" create -f "$crd" >/dev/null
    done
    "${kc[@]}" create namespace "$ns" >/dev/null
    # shellcheck disable=SC2086
    "$bin" run --kubeconfig "$real" --no-impersonation --namespace "$ns" \
        --plugins "$work/plugins" --approvals "$approvals" --concurrency "$concurrency" ${EXTRA:-} \
        2>"$work/host.log" &
    host_pid=$!
else
    # shellcheck disable=SC2086
    "$bin" dev --plugins "$work/plugins" --approvals "$approvals" --apply "$root/examples/crds" \
        --kubeconfig-out "$work/kubeconfig" --concurrency "$concurrency" ${EXTRA:-} \
        2>"$work/host.log" &
    host_pid=$!
    kc=(kubectl --kubeconfig "$work/kubeconfig")
    for _ in $(seq 600); do
        [ -s "$work/kubeconfig" ] && "${kc[@]}" get --raw /readyz >/dev/null 2>&1 && break
        sleep 0.1
    done
    "${kc[@]}" create namespace "$ns" >/dev/null
fi
# Wait until the plugin is loaded (its start-up CPU is not counted; with no cache hit, the
# compiler's memory stays in the peak).
for _ in $(seq 1200); do
    grep -q "plugin loaded" "$work/host.log" && break
    kill -0 "$host_pid" 2>/dev/null || { echo "host exited" >&2; tail -20 "$work/host.log" >&2; exit 1; }
    sleep 0.1
done
grep -q "plugin loaded" "$work/host.log" || {
    echo "the plugin was not loaded within 120 s:" >&2
    tail -20 "$work/host.log" >&2
    exit 1
}
sleep 1
{
    for i in $(seq "$sites"); do
        cat <<YAML
---
apiVersion: sites.kubewasm.dev/v1alpha1
kind: ContentSite
metadata: {name: site-$i, namespace: $ns}
spec: {title: Site $i, hostname: site-$i.example.com, database: {members: 3, version: 7.0.12}}
YAML
    done
} >"$work/sites.yaml"
hwm() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$host_pid/status"; }
rss() { awk '/VmRSS/ {print int($2/1024)}' "/proc/$host_pid/status"; }
# utime + stime of the host, in seconds.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$host_pid/stat"; }
echo "host started: RSS $(rss) MiB, peak $(hwm) MiB, CPU $(cpu)s"
cpu0=$(cpu)
started=$(date +%s.%N)
"${kc[@]}" create -f "$work/sites.yaml" >/dev/null
while :; do
    n=$("${kc[@]}" get mongodb -n "$ns" --no-headers 2>/dev/null | wc -l)
    s=$("${kc[@]}" get services -n "$ns" --no-headers 2>/dev/null | wc -l)
    [ "$n" -ge "$sites" ] && [ "$s" -ge "$sites" ] && break
    kill -0 "$host_pid" 2>/dev/null || { echo "host exited" >&2; tail -20 "$work/host.log" >&2; exit 1; }
    sleep 0.5
done
elapsed=$(echo "$(date +%s.%N) - $started" | bc)
used=$(echo "$(cpu) - $cpu0" | bc)
mode="kubewasm dev, embedded API server included"
[ -n "$real" ] && mode="kubewasm run against $("${kc[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
grep -h "instance cap" "$work/host.log" || true
if grep -q "compiling" "$work/host.log"; then
    echo "note: the plugin was compiled in this process (no cache hit): the peak includes the compiler's"
fi
echo "plugin: $plugin"
echo "provisioned $sites ContentSites ($n MongoDB, $s Service) at --concurrency $concurrency in ${elapsed}s"
echo "host ($mode): peak RSS $(hwm) MiB, RSS at the end $(rss) MiB, CPU ${used}s during provisioning ($(cpu)s in all)"
