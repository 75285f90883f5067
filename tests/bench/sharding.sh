#!/usr/bin/env bash
# Sharding (issue 24): OBJECTS ConfigMaps (default 10,000) handled by one replica of
# `kubewasm run` without shards, then by one, two and four replicas of `kubewasm run
# --shards 32`. One sharded replica is the baseline: every figure is also printed as a
# ratio to it, from the same run. No thresholds.
#
# Each configuration gets a fresh embedded API server (`kubewasm dev` serving the API
# only, in a process of its own: its memory and CPU are not counted) and the test plugin
# testkit, which watches ConfigMaps labelled kubewasm.dev/testkit=testkit and creates
# `<name>-out` for each (one server-side apply per object; nothing declared under `reads`,
# so with --shards its ConfigMaps are cached per shard). For each configuration:
#   1. the replicas start; once every one is ready and the shards are balanced (all S
#      held, each replica floor(S/N) or ceil(S/N)), each replica's RSS is read (idle);
#   2. the OBJECTS ConfigMaps are created (POSTs on CREATE_PARALLEL connections) and the
#      clock runs until every `-out` ConfigMap exists (the replicas' applied creates, then
#      one list to confirm): "provision s";
#   3. per replica: keys cached (kubewasm_cached_objects, summed over resources), RSS and
#      peak RSS (VmRSS, VmHWM of /proc/PID/status), RSS growth over idle, CPU of the
#      process during provisioning (utime+stime of /proc/PID/stat) and the plugin's call
#      time (the kubewasm_plugin_call_seconds histogram's sum), events handled;
#   4. with two or more replicas: one is SIGKILLed; right after, a ConfigMap whose key
#      falls in one of its shards is created; "takeover s" runs until every shard Lease is
#      held by a survivor, "handled s" until that ConfigMap's output exists (written by a
#      survivor: the victim is dead).
#
#   bash tests/plugins/build.sh                     # target/test-plugins/testkit.wasm
#   cargo build --release -p kubewasm-cli           # or KUBEWASM=target/debug/kubewasm
#   bash tests/bench/sharding.sh
#   OBJECTS=2000 REPLICAS="2 4" bash tests/bench/sharding.sh
#
# Variables: OBJECTS (10000), SHARDS (32), REPLICAS (sharded replica counts, "1 2 4"; the
# first is the baseline), PLAIN (1: also one replica without --shards; 0: not),
# KUBEWASM (the binary; default target/release/kubewasm, else target/debug/kubewasm, which
# it says), PLUGIN (target/test-plugins/testkit.wasm), LEASE_FLAGS (default the host's
# defaults, "--lease-duration 15s --renew-deadline 10s --retry-period 2s"),
# CREATE_PARALLEL (4), EXTRA (more host flags), KEEP (1: keep the logs' folder),
# BENCH_CACHE_DIR / BENCH_CACHE_KEY_FILE (the code cache, as python-provisioning-rss.sh).
# Needs kubectl, curl, jq, python3.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
objects="${OBJECTS:-10000}"
shards="${SHARDS:-32}"
replica_counts="${REPLICAS:-1 2 4}"
plain="${PLAIN:-1}"
plugin="${PLUGIN:-$root/target/test-plugins/testkit.wasm}"
lease_flags="${LEASE_FLAGS:---lease-duration 15s --renew-deadline 10s --retry-period 2s}"
parallel="${CREATE_PARALLEL:-4}"
ns=bench
lease_ns=kubewasm-system
lease_name=bench
bin="${KUBEWASM:-}"
if [ -z "$bin" ]; then
    bin="$root/target/release/kubewasm"
    if [ ! -x "$bin" ]; then
        bin="$root/target/debug/kubewasm"
        echo "note: no release build; using $bin (absolute figures are a debug build's; the ratios still compare)"
    fi
fi
[ -x "$bin" ] || { echo "$bin is missing: cargo build --release -p kubewasm-cli" >&2; exit 1; }
[ -f "$plugin" ] || { echo "$plugin is missing: bash tests/plugins/build.sh" >&2; exit 1; }
for tool in kubectl curl jq python3; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done
export KUBEWASM_CACHE_DIR="${BENCH_CACHE_DIR:-$root/target/kubewasm-bench-cache}"
export KUBEWASM_CACHE_KEY_FILE="${BENCH_CACHE_KEY_FILE:-$root/target/kubewasm-bench-cache.key}"
mkdir -p "$KUBEWASM_CACHE_DIR"
[ -s "$KUBEWASM_CACHE_KEY_FILE" ] || (umask 077 && head -c 32 /dev/urandom >"$KUBEWASM_CACHE_KEY_FILE")

work="$(mktemp -d)"
server_pid=""
pids=()
cleanup() {
    for p in "${pids[@]}" $server_pid; do
        kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
mkdir -p "$work/plugins"
cp "$plugin" "$work/plugins/testkit.wasm"
# The operator's approval of exactly what testkit asks for.
"$bin" --log warn inspect --approval "$work/plugins/testkit.wasm" >"$work/approvals.yaml"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 == 0 || a == "-") print "-"; else printf "%.2f", a / b}'; }
kib_to_mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
proc_kib() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
# utime + stime of a process, in seconds.
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# metric_sum NAME [TEXT...]: the sum of metric NAME's samples in the Prometheus text on
# stdin, over the label sets whose line holds every TEXT (e.g. 'verb="create"').
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
metric_present() { grep -q "^$1[{ ]"; }
# FNV-1a 64 of namespace/name, modulo S: the shard of a key, as the host hashes it.
shard_of() {
    python3 -c 'import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode():
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
print(h % int(sys.argv[2]))' "$1" "$2"
}

kc() { kubectl --kubeconfig "$work/run/kubeconfig" "$@"; }

start_server() {
    rm -rf "$work/run" && mkdir -p "$work/run"
    "$bin" --log-format json dev --no-plugin-objects --kubeconfig-out "$work/run/kubeconfig" \
        2>"$work/run/server.log" &
    server_pid=$!
    for _ in $(seq 600); do
        [ -s "$work/run/kubeconfig" ] && kc get --raw /readyz >/dev/null 2>&1 && break
        sleep 0.1
    done
    kc create namespace "$ns" >/dev/null
    kc create namespace "$lease_ns" >/dev/null
}

stop_all() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    pids=()
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

addrs=()
# start_replica I [HOST FLAGS...]
start_replica() {
    local i=$1
    shift
    # shellcheck disable=SC2086
    "$bin" --log-format json run --kubeconfig "$work/run/kubeconfig" \
        --plugins "$work/plugins" --approvals "$work/approvals.yaml" \
        --metrics-addr 127.0.0.1:0 --identity "bench-$i" \
        --lease-namespace "$lease_ns" --lease-name "$lease_name" "$@" ${EXTRA:-} \
        2>"$work/run/replica-$i.log" &
    pids[i]=$!
}

# The metrics address replica I logged.
replica_addr() {
    local i=$1 addr=""
    for _ in $(seq 600); do
        addr=$(jq -r 'select(.message // "" | startswith("serving /healthz, /readyz, /status, /metrics")) | .addr' \
            "$work/run/replica-$i.log" 2>/dev/null | head -1)
        [ -n "$addr" ] && break
        alive "$i"
        sleep 0.1
    done
    [ -n "$addr" ] || { echo "replica $i logged no metrics address" >&2; exit 1; }
    echo "$addr"
}

alive() {
    kill -0 "${pids[$1]}" 2>/dev/null && return 0
    echo "replica $1 exited:" >&2
    tail -20 "$work/run/replica-$1.log" >&2
    exit 1
}

held() { curl -sf "http://${addrs[$1]}/status" | jq -r '.shards.held | length'; }

# Every replica ready; with shards, every shard held and each replica holding lo..hi.
wait_ready() {
    local n=$1 sharded=$2 deadline
    deadline=$(( $(date +%s) + 300 ))
    while :; do
        local ok=1 total=0 lo=$(( shards / n )) hi=$(( (shards + n - 1) / n ))
        for i in $(seq 0 $(( n - 1 ))); do
            alive "$i"
            curl -sf "http://${addrs[i]}/readyz" >/dev/null || { ok=0; break; }
            if [ "$sharded" = 1 ]; then
                local h
                h=$(held "$i" || echo -1)
                if [ "$h" -lt "$lo" ] || [ "$h" -gt "$hi" ]; then ok=0; fi
                total=$(( total + h ))
            fi
        done
        if [ "$ok" = 1 ] && { [ "$sharded" = 0 ] || [ "$total" = "$shards" ]; }; then
            return 0
        fi
        [ "$(date +%s)" -lt "$deadline" ] || { echo "not ready/balanced after 300 s" >&2; exit 1; }
        sleep 0.5
    done
}

# Create OBJECTS ConfigMaps obj-0 … through CREATE_PARALLEL keep-alive connections (POSTs
# to the embedded server's plain-HTTP port: kubectl, one process creating one object at a
# time, would be the bottleneck and the figure its own).
create_objects() {
    python3 "$root/tests/bench/create-configmaps.py" "$objects" "$parallel" "$ns" \
        "$(kc config view -o jsonpath='{.clusters[0].cluster.server}')" obj
}

results=()     # per replica: "run|replica|held|cached|idle|rss|hwm|cpu|call|events"
summaries=()   # per run: "run|replicas|provision|takeover|handled"

# bench NAME N SHARDED
bench() {
    local name=$1 n=$2 sharded=$3 i
    echo "== $name: $n replica(s)$([ "$sharded" = 1 ] && echo ", --shards $shards")"
    start_server
    addrs=()
    for i in $(seq 0 $(( n - 1 ))); do
        if [ "$sharded" = 1 ]; then
            # shellcheck disable=SC2086
            start_replica "$i" --shards "$shards" $lease_flags
        else
            start_replica "$i"
        fi
    done
    for i in $(seq 0 $(( n - 1 ))); do
        addrs[i]=$(replica_addr "$i")
    done
    local t_ready
    t_ready=$(now)
    wait_ready "$n" "$sharded"
    echo "   ready$([ "$sharded" = 1 ] && echo " and balanced") in $(since "$t_ready") s"
    local idle=() cpu0=()
    for i in $(seq 0 $(( n - 1 ))); do
        idle[i]=$(proc_kib "${pids[i]}" VmRSS)
        cpu0[i]=$(proc_cpu "${pids[i]}")
    done
    local started
    started=$(now)
    create_objects
    local created_s
    created_s=$(since "$started")
    local deadline=$(( $(date +%s) + 1800 ))
    while :; do
        local applied=0
        for i in $(seq 0 $(( n - 1 ))); do
            alive "$i"
            local a
            a=$(curl -sf "http://${addrs[i]}/metrics" \
                | metric_sum kubewasm_intents_total 'verb="create"' 'result="applied"')
            applied=$(awk -v x="$applied" -v y="$a" 'BEGIN {print x + y}')
        done
        if awk -v a="$applied" -v n="$objects" 'BEGIN {exit !(a >= n)}'; then
            local outs
            outs=$(kc get configmaps -n "$ns" -o name | grep -c -- '-out$' || true)
            [ "$outs" -ge "$objects" ] && break
        fi
        [ "$(date +%s)" -lt "$deadline" ] || { echo "not provisioned after 30 min" >&2; exit 1; }
        sleep 0.5
    done
    local provision
    provision=$(since "$started")
    echo "   $objects objects created in $created_s s, all provisioned in $provision s"
    for i in $(seq 0 $(( n - 1 ))); do
        local m cached h="-"
        m=$(curl -sf "http://${addrs[i]}/metrics")
        if metric_present kubewasm_cached_objects <<<"$m"; then
            cached=$(metric_sum kubewasm_cached_objects <<<"$m")
        else
            cached="-"
        fi
        [ "$sharded" = 1 ] && h=$(held "$i")
        results+=("$name|$i|$h|$cached|$(kib_to_mib "${idle[i]}")|$(kib_to_mib "$(proc_kib "${pids[i]}" VmRSS)")|$(kib_to_mib "$(proc_kib "${pids[i]}" VmHWM)")|$(awk -v a="$(proc_cpu "${pids[i]}")" -v b="${cpu0[i]}" 'BEGIN {printf "%.1f", a - b}')|$(metric_sum kubewasm_plugin_call_seconds_sum <<<"$m" | awk '{printf "%.1f", $1}')|$(metric_sum kubewasm_events_total <<<"$m")")
    done
    local takeover="-" handled="-"
    if [ "$sharded" = 1 ] && [ "$n" -ge 2 ]; then
        local victim=$(( n - 1 )) victim_shards survivors
        victim_shards=$(curl -sf "http://${addrs[victim]}/status" | jq -r '.shards.held | map(tostring) | join(" ")')
        survivors=$(for i in $(seq 0 $(( victim - 1 ))); do
            curl -sf "http://${addrs[i]}/status" | jq -r '.shards.identity'; done | jq -R . | jq -sc .)
        # A key in one of the victim's shards.
        local k=0 probe
        while :; do
            probe="late-$k"
            case " $victim_shards " in *" $(shard_of "$ns/$probe" "$shards") "*) break ;; esac
            k=$(( k + 1 ))
        done
        kill -KILL "${pids[victim]}"
        local killed
        killed=$(now)
        wait "${pids[victim]}" 2>/dev/null || true
        unset 'pids[victim]'
        kc create -f - >/dev/null <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: $probe, namespace: $ns, labels: {kubewasm.dev/testkit: testkit}}
data: {value: late}
YAML
        local deadline=$(( $(date +%s) + 600 ))
        while [ "$takeover" = "-" ] || [ "$handled" = "-" ]; do
            if [ "$takeover" = "-" ]; then
                local by_survivors
                by_survivors=$(kc get leases -n "$lease_ns" \
                    -l "kubewasm.dev/lease-set=$lease_name,kubewasm.dev/lease-role=shard" -o json \
                    | jq --argjson s "$survivors" '[.items[] | select(.spec.holderIdentity as $h | $s | index($h))] | length')
                [ "$by_survivors" = "$shards" ] && takeover=$(since "$killed")
            fi
            if [ "$handled" = "-" ] && kc get configmap "$probe-out" -n "$ns" >/dev/null 2>&1; then
                handled=$(since "$killed")
            fi
            [ "$(date +%s)" -lt "$deadline" ] || { echo "no takeover after 600 s" >&2; exit 1; }
            sleep 0.2
        done
        echo "   replica $victim (shards $victim_shards) SIGKILLed: its shards held by survivors after $takeover s, $probe (shard $(shard_of "$ns/$probe" "$shards")) handled after $handled s"
    fi
    summaries+=("$name|$n|$provision|$takeover|$handled")
    stop_all
}

runs=()
[ "$plain" = 1 ] && runs+=("plain:1:0")
for n in $replica_counts; do
    runs+=("shards-x$n:$n:1")
done
baseline="shards-x${replica_counts%% *}"
echo "kubewasm: $bin"
echo "plugin: $plugin; $objects objects; --shards $shards; $lease_flags"
for r in "${runs[@]}"; do
    IFS=: read -r name n sharded <<<"$r"
    bench "$name" "$n" "$sharded"
done

# Baseline figures: the first sharded configuration (one replica by default).
base_line=""
for row in "${results[@]}"; do
    [ "${row%%|*}" = "$baseline" ] && { base_line=$row; break; }
done
IFS='|' read -r _ _ _ b_cached b_idle b_rss _ b_cpu b_call _ <<<"$base_line"
b_growth=$(awk -v a="$b_rss" -v b="$b_idle" 'BEGIN {printf "%.1f", a - b}')
echo
echo "Per replica (× = ratio to $baseline, the baseline):"
printf '| %-10s | %-7s | %-6s | %-18s | %-12s | %-14s | %-12s | %-8s | %-14s | %-16s | %-6s |\n' \
    run replica shards "keys cached (×)" "idle RSS MiB" "RSS MiB (×)" "RSS growth (×)" "peak MiB" "host CPU s (×)" "plugin call s (×)" events
printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' --- --- --- --- --- --- --- --- --- --- ---
for row in "${results[@]}"; do
    IFS='|' read -r run rep h cached idle rss hwm cpu call events <<<"$row"
    growth=$(awk -v a="$rss" -v b="$idle" 'BEGIN {printf "%.1f", a - b}')
    printf '| %-10s | %-7s | %-6s | %-18s | %-12s | %-14s | %-12s | %-8s | %-14s | %-16s | %-6s |\n' \
        "$run" "$rep" "$h" "$cached ($(ratio "$cached" "$b_cached"))" "$idle" "$rss ($(ratio "$rss" "$b_rss"))" \
        "$growth ($(ratio "$growth" "$b_growth"))" "$hwm" "$cpu ($(ratio "$cpu" "$b_cpu"))" "$call ($(ratio "$call" "$b_call"))" "$events"
done
b_prov=""
for s in "${summaries[@]}"; do
    IFS='|' read -r run _ prov _ _ <<<"$s"
    [ "$run" = "$baseline" ] && b_prov=$prov
done
echo
echo "Per run:"
printf '| %-10s | %-8s | %-20s | %-36s | %-34s |\n' run replicas "provision s (×)" "takeover: shards held by survivors s" "takeover: late object handled s"
printf '| %s | %s | %s | %s | %s |\n' --- --- --- --- ---
for s in "${summaries[@]}"; do
    IFS='|' read -r run n prov take handled <<<"$s"
    printf '| %-10s | %-8s | %-20s | %-36s | %-34s |\n' "$run" "$n" "$prov ($(ratio "$prov" "$b_prov"))" "$take" "$handled"
done
echo
echo "RSS growth: RSS after provisioning minus RSS once ready and balanced (caches, plugin instances, queues)."
echo "Takeover: from the SIGKILL of the last replica; lease duration: $lease_flags."
