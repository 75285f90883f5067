#!/usr/bin/env bash
# Shadow overhead (issue 32): what a shadow candidate (a Plugin's spec.candidate) costs the
# serving version's event path. One run, one host: rounds without and with a candidate
# alternate, OBJECTS ConfigMaps each, and every figure is also printed as a ratio to the
# rounds without one. No thresholds.
#
# `kubewasm dev` (the embedded API server and the host in one process) follows Plugin
# objects; a registry on loopback (Debian's docker-registry, tests/tools/install-registry.sh)
# serves the modules, pushed with `kubewasm push`. The serving version is testkit (it
# watches ConfigMaps labelled kubewasm.dev/testkit=testkit and server-side applies
# `<name>-out` for each), delivered as the Plugin object `kubewasm approve` prints; the
# candidate is testkit-v2 (the same, writing data.version "2": it diverges on every object,
# so it does all its work: its call, a dry-run read and a dry-run apply per object). For
# each round:
#   1. without: spec.candidate removed, and status.preview.candidate gone; with:
#      spec.candidate set to testkit-v2's pinned reference, and status.preview.candidate
#      naming its component digest (the candidate loaded);
#   2. OBJECTS ConfigMaps are created (POSTs on CREATE_PARALLEL connections) and the clock
#      runs until the last `-out` is applied (the host's log line `applied create ...`);
#   3. from the host's log, per object: the serving version's `event` line to its `applied
#      create ConfigMap <name>-out` line (the plugin's call and its apply, queueing before
#      the call not included): p50 and p90; events per second = OBJECTS / (last apply -
#      first POST); from /metrics: the mean plugin call (kubewasm_plugin_call_seconds
#      sum/count, the serving version's calls), host CPU (utime+stime, embedded server
#      included), and the candidate's work: events it ran on, divergences, and events
#      skipped (kubewasm_shadow_skipped_total: its bound of calls at once was reached).
#
#   bash tests/plugins/build.sh                     # target/test-plugins/testkit{,-v2}.wasm
#   cargo build --release -p kubewasm-cli           # or KUBEWASM=target/debug/kubewasm
#   bash tests/bench/shadow-overhead.sh
#   OBJECTS=500 ROUNDS=4 bash tests/bench/shadow-overhead.sh
#
# Variables: OBJECTS (per round, 1000), ROUNDS (6: without, with, without, ...), MODES
# (the rounds in another order, e.g. "without without with without"), KUBEWASM
# (the binary; default target/release/kubewasm, else target/debug/kubewasm, which it
# says), PLUGIN (target/test-plugins/testkit.wasm), CANDIDATE
# (target/test-plugins/testkit-v2.wasm), CREATE_PARALLEL (4), EXTRA (more host flags),
# KEEP (1: keep the logs' folder), BENCH_CACHE_DIR / BENCH_CACHE_KEY_FILE (the code cache,
# as python-provisioning-rss.sh). Needs kubectl, curl, jq, python3, /usr/bin/docker-registry.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
objects="${OBJECTS:-1000}"
rounds="${ROUNDS:-6}"
plugin="${PLUGIN:-$root/target/test-plugins/testkit.wasm}"
candidate="${CANDIDATE:-$root/target/test-plugins/testkit-v2.wasm}"
parallel="${CREATE_PARALLEL:-4}"
registry_bin=/usr/bin/docker-registry
ns=bench
bin="${KUBEWASM:-}"
if [ -z "$bin" ]; then
    bin="$root/target/release/kubewasm"
    if [ ! -x "$bin" ]; then
        bin="$root/target/debug/kubewasm"
        echo "note: no release build; using $bin (absolute figures are a debug build's; the ratios still compare)"
    fi
fi
[ -x "$bin" ] || { echo "$bin is missing: cargo build --release -p kubewasm-cli" >&2; exit 1; }
for f in "$plugin" "$candidate"; do
    [ -f "$f" ] || { echo "$f is missing: bash tests/plugins/build.sh" >&2; exit 1; }
done
[ -x "$registry_bin" ] || { echo "$registry_bin is missing: bash tests/tools/install-registry.sh" >&2; exit 1; }
for tool in kubectl curl jq python3; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done
export KUBEWASM_CACHE_DIR="${BENCH_CACHE_DIR:-$root/target/kubewasm-bench-cache}"
export KUBEWASM_CACHE_KEY_FILE="${BENCH_CACHE_KEY_FILE:-$root/target/kubewasm-bench-cache.key}"
mkdir -p "$KUBEWASM_CACHE_DIR"
[ -s "$KUBEWASM_CACHE_KEY_FILE" ] || (umask 077 && head -c 32 /dev/urandom >"$KUBEWASM_CACHE_KEY_FILE")

work="$(mktemp -d)"
host_pid=""
registry_pid=""
cleanup() {
    for p in $host_pid $registry_pid; do
        kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
# No credentials of this machine's user reach the registry.
export DOCKER_CONFIG="$work/docker-config"
mkdir -p "$DOCKER_CONFIG"

now() { date +%s.%N; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 == 0 || a == "-") print "-"; else printf "%.2f", a / b}'; }
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# metric_sum NAME [TEXT...]: the sum of metric NAME's samples in the Prometheus text on
# stdin, over the label sets whose line holds every TEXT (as sharding.sh).
metric_sum() {
    local m=$1
    shift
    awk -v m="$m" -v want="$*" 'BEGIN { n = split(want, w, " ") }
        index($0, m) == 1 && substr($0, length(m) + 1) ~ /^[{ ]/ {
            for (i = 1; i <= n; i++) if (index($0, w[i]) == 0) next
            s += $NF
        }
        END { printf "%.6g\n", s + 0 }'
}
alive() {
    kill -0 "$host_pid" 2>/dev/null && return 0
    echo "the host exited:" >&2
    tail -20 "$work/host.log" >&2
    exit 1
}

# A registry on a free loopback port.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
reg="127.0.0.1:$port"
mkdir -p "$work/registry"
cat >"$work/registry/config.yml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/registry/storage}}
http: {addr: $reg, secret: kubewasm-bench}
YAML
"$registry_bin" serve "$work/registry/config.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 200); do
    curl -sf "http://$reg/v2/" >/dev/null && break
    sleep 0.1
done
curl -sf "http://$reg/v2/" >/dev/null || { echo "the registry did not start" >&2; cat "$work/registry.log" >&2; exit 1; }
push() { "$bin" --log warn push "$1" "oci://$reg/bench/testkit:$2" --insecure-registry "$reg" | tail -1; }
serving=$(push "$plugin" v1)
cand=$(push "$candidate" v2)

# The embedded API server and the host, following Plugin objects.
# shellcheck disable=SC2086
"$bin" --log-format json --log info dev --kubeconfig-out "$work/kubeconfig" \
    --metrics-addr 127.0.0.1:0 --insecure-registry "$reg" --module-store "$work/modules" \
    ${EXTRA:-} 2>"$work/host.log" &
host_pid=$!
kc() { kubectl --kubeconfig "$work/kubeconfig" "$@"; }
for _ in $(seq 600); do
    [ -s "$work/kubeconfig" ] && kc get --raw /readyz >/dev/null 2>&1 && break
    alive
    sleep 0.1
done
addr=""
for _ in $(seq 600); do
    # (dev also prints plain lines: its kubeconfig and how to stop it)
    addr=$(grep '^{' "$work/host.log" \
        | jq -r 'select(.message | startswith("serving /healthz")) | .addr' 2>/dev/null \
        | head -1 || true)
    [ -n "$addr" ] && break
    alive
    sleep 0.1
done
[ -n "$addr" ] || { echo "the host logged no metrics address" >&2; exit 1; }
metrics() { curl -sf "http://$addr/metrics"; }
kc create namespace "$ns" >/dev/null
kc create namespace kubewasm >/dev/null 2>&1 || true

# The Plugin object and its RBAC, as `kubewasm approve` prints them.
"$bin" --log warn approve "$plugin" --module "$serving" >"$work/approve.yaml"
kc apply -f "$work/approve.yaml" >/dev/null
plugin_status() { kc get plugin testkit -o json | jq -c '.status // {}'; }
# wait_status JQ WHAT: until the Plugin's status satisfies JQ (120 s).
wait_status() {
    local deadline=$(( $(date +%s) + 120 ))
    until plugin_status | jq -e "$1" >/dev/null; do
        alive
        [ "$(date +%s)" -lt "$deadline" ] || { echo "not $2 after 120 s: $(plugin_status)" >&2; exit 1; }
        sleep 0.2
    done
}
wait_status '.conditions // [] | any(.type == "Ready" and .status == "True")' "Ready"

# Create OBJECTS ConfigMaps PREFIX-0 … (POSTs to the embedded server's plain-HTTP port on
# CREATE_PARALLEL keep-alive connections; kubectl would be the bottleneck).
create_objects() {
    python3 "$root/tests/bench/create-configmaps.py" "$objects" "$parallel" "$ns" \
        "$(kc config view -o jsonpath='{.clusters[0].cluster.server}')" "$1"
}

# latency LOG FROM_LINE PREFIX STARTED: "events/s p50_ms p90_ms handled" of the round's
# objects, from the host's log lines after FROM_LINE (the serving version's `event` line
# to its `applied create ConfigMap NS/<name>-out` line; STARTED: the first POST, epoch s).
latency() {
    python3 - "$@" "$ns" "$objects" <<'PY'
import datetime, json, sys
log, start, prefix, started, ns, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5], int(sys.argv[6])
def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
events, applied = {}, {}
with open(log) as f:
    for i, line in enumerate(f):
        if i < start or not line.startswith("{"):
            continue
        l = json.loads(line)
        msg, obj = l.get("message", ""), l.get("object", "") or l.get("trigger", "")
        if not obj.startswith(f"ConfigMap {ns}/{prefix}-") or obj.endswith("-out"):
            continue
        if msg == "event":
            events.setdefault(obj, ts(l["timestamp"]))
        elif msg.startswith("applied create ConfigMap ") and msg.endswith("-out"):
            applied.setdefault(obj, ts(l["timestamp"]))
lat = sorted(applied[o] - events[o] for o in applied if o in events)
if len(applied) < n or not lat:
    sys.exit(f"{len(applied)} of {n} applies in the log")
q = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))] * 1000
print(f"{n / (max(applied.values()) - started):.1f} {q(0.5):.2f} {q(0.9):.2f} {len(lat)}")
PY
}

rows=()   # per round: "round|mode|events/s|p50|p90|mean call ms|cpu s|shadowed|divergences|skipped"
# MODES: the rounds' order, e.g. "without without with without" (default: alternating).
read -ra modes <<<"${MODES:-$(for r in $(seq "$rounds"); do [ $(( r % 2 )) = 1 ] && echo without || echo with; done | tr '\n' ' ')}"
rounds=${#modes[@]}
echo "kubewasm: $bin"
echo "serving: $serving"
echo "candidate: $cand"
echo "$objects objects per round, $rounds rounds: ${modes[*]}"
for r in $(seq "$rounds"); do
    if [ "${modes[r - 1]}" = without ]; then
        mode=without
        if kc get plugin testkit -o json | jq -e '.spec.candidate' >/dev/null; then
            kc patch plugin testkit --type json -p '[{"op": "remove", "path": "/spec/candidate"}]' >/dev/null
        fi
        wait_status '(.preview.candidate // null) == null' "without a candidate"
    else
        mode=with
        kc patch plugin testkit --type merge -p "{\"spec\": {\"candidate\": {\"module\": \"$cand\"}}}" >/dev/null
        wait_status ".preview.candidate.digest != null" "with the candidate loaded"
    fi
    sleep 1
    from=$(wc -l <"$work/host.log")
    m0=$(metrics)
    cpu0=$(proc_cpu "$host_pid")
    started=$(now)
    create_objects "r$r-obj"
    deadline=$(( $(date +%s) + 900 ))
    until [ "$(grep -c "\"applied create ConfigMap $ns/r$r-obj-" "$work/host.log" || true)" -ge "$objects" ]; do
        alive
        [ "$(date +%s)" -lt "$deadline" ] || { echo "round $r: not provisioned after 900 s" >&2; exit 1; }
        sleep 0.2
    done
    # Let the candidate's last comparisons finish before reading its counters.
    sleep 2
    cpu=$(awk -v a="$(proc_cpu "$host_pid")" -v b="$cpu0" 'BEGIN {printf "%.1f", a - b}')
    m1=$(metrics)
    read -r eps p50 p90 handled < <(latency "$work/host.log" "$from" "r$r-obj" "$started")
    delta() { awk -v a="$(metric_sum "$@" <<<"$m1")" -v b="$(metric_sum "$@" <<<"$m0")" 'BEGIN {printf "%.6g", a - b}'; }
    calls=$(delta kubewasm_plugin_call_seconds_count 'plugin="testkit"')
    call_ms=$(awk -v s="$(delta kubewasm_plugin_call_seconds_sum 'plugin="testkit"')" -v c="$calls" \
        'BEGIN {if (c + 0 == 0) print "-"; else printf "%.3f", s / c * 1000}')
    div=$(delta kubewasm_shadow_divergences_total 'plugin="testkit"')
    skipped=$(delta kubewasm_shadow_skipped_total 'plugin="testkit"')
    shadowed=0
    [ "$mode" = with ] && shadowed=$(awk -v n="$objects" -v k="$skipped" 'BEGIN {print n - k}')
    echo "   round $r ($mode candidate): $handled applies, $eps events/s, p50 $p50 ms, p90 $p90 ms, mean call $call_ms ms ($calls calls), CPU ${cpu}s; candidate: ran on $shadowed events (skipped $skipped), divergences +$div"
    rows+=("$r|$mode|$eps|$p50|$p90|$call_ms|$cpu|$shadowed|$div|$skipped")
done

# Medians per mode; the rounds without a candidate are the baseline.
median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
col() {
    local mode=$1 i=$2 row f
    for row in "${rows[@]}"; do
        IFS='|' read -ra f <<<"$row"
        if [ "${f[1]}" = "$mode" ]; then echo "${f[$i]}"; fi
    done | median
}
echo
echo "Per round:"
printf '| %-5s | %-9s | %-8s | %-10s | %-10s | %-12s | %-10s | %-24s | %-16s | %-14s |\n' \
    round candidate events/s "p50 ms" "p90 ms" "mean call ms" "host CPU s" "events shadowed" "divergences" "events skipped"
printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' --- --- --- --- --- --- --- --- --- ---
for row in "${rows[@]}"; do
    IFS='|' read -r r mode eps p50 p90 call cpu shadowed div skipped <<<"$row"
    printf '| %-5s | %-9s | %-8s | %-10s | %-10s | %-12s | %-10s | %-24s | %-16s | %-14s |\n' \
        "$r" "$mode" "$eps" "$p50" "$p90" "$call" "$cpu" "$shadowed" "$div" "$skipped"
done
echo
echo "Medians per mode (× = ratio to the rounds without a candidate, same run):"
printf '| %-9s | %-16s | %-16s | %-16s | %-18s | %-16s |\n' candidate "events/s (×)" "p50 ms (×)" "p90 ms (×)" "mean call ms (×)" "host CPU s (×)"
printf '| %s | %s | %s | %s | %s | %s |\n' --- --- --- --- --- ---
for mode in without with; do
    line="| $(printf '%-9s' "$mode")"
    for i in 2 3 4 5 6; do
        v=$(col "$mode" "$i")
        b=$(col without "$i")
        line+=" | $(printf '%-16s' "$v ($(ratio "$v" "$b"))")"
    done
    echo "$line |"
done
