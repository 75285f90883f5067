//! Sharding (issue 24) on the embedded API server: replicas started with `--shards 8`
//! split the shard Leases evenly (within one of S/N), each object is handled by the one
//! replica holding its shard, a replica killed (SIGKILL) mid-apply loses its shards to the
//! survivors once its leases expire (nothing written after the cut, deletions in the
//! window delivered as `deleted`, nothing lost), a replica joining a running pair takes its
//! share without any output being written twice, and a plugin reading its watched kind
//! across shards must declare it under `reads`; a team's NamespacedPlugin is sharded
//! like the others.
//!
//! Every replica sends its own bearer token (its identity), so the server's request
//! records and stalls tell the replicas apart. The tests run one at a time (a lock): each
//! starts two or three hosts whose renew deadline is 2 s, on a 2-core machine.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::SignedDuration;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::*;

/// S: small, so that balancing is visible with two and three replicas.
const SHARDS: u32 = 8;

/// Sharding with short leases: 3 s lease, 2 s renew deadline, 200 ms retry period.
const SHARDED: [&str; 10] = [
    "--shards",
    "8",
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "200ms",
    "--lease-namespace",
    "default",
];

/// The lease duration in [`SHARDED`].
const LEASE_DURATION: Duration = Duration::from_secs(3);

/// Balancing, takeovers and rebalancing take a few lease durations on a busy machine.
const SETTLE: Duration = Duration::from_secs(60);

/// The shard Leases, with the default `--lease-name` (`kubewasm`).
const SHARD_SELECTOR: &str = "kubewasm.dev/lease-set=kubewasm,kubewasm.dev/lease-role=shard";
/// The member Leases (one per replica process).
const MEMBER_SELECTOR: &str = "kubewasm.dev/lease-set=kubewasm,kubewasm.dev/lease-role=member";

/// One test at a time (see the module's comment).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `kubewasm run --shards 8` as replica `id` (its identity and its bearer token).
fn replica(env: &Env, id: &str) -> HostProcess {
    replica_with(env, id, &[], &[])
}

/// [`replica`] with more flags and environment variables.
fn replica_with(env: &Env, id: &str, extra: &[&str], vars: &[(&str, &str)]) -> HostProcess {
    let mut args: Vec<&str> = SHARDED.to_vec();
    args.extend(["--identity", id]);
    args.extend_from_slice(extra);
    env.start_host_as_with_env(id, &args, vars)
}

/// Replica ids `replica-a`, `replica-b`, ...
fn ids(n: usize) -> Vec<String> {
    (b'a'..)
        .take(n)
        .map(|c| format!("replica-{}", c as char))
        .collect()
}

/// An object's key in these tests: `name` for a ConfigMap in `default`, `ns/name` in
/// another namespace. Its namespace and name.
fn key_parts(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// The shard of the object a key names.
fn shard_of_key(key: &str) -> u32 {
    let (namespace, name) = key_parts(key);
    shard_of(namespace, name)
}

/// The shard of a namespaced object: FNV-1a 64 of `namespace/name`, mod S.
fn shard_of(namespace: &str, name: &str) -> u32 {
    let hash = fnv1a64(format!("{namespace}/{name}").as_bytes());
    u32::try_from(hash % u64::from(SHARDS)).expect("a shard fits u32")
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The first `count` names `PREFIX-i` whose shard is in `shards`.
fn names_in(prefix: &str, shards: &BTreeSet<u32>, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|n| shards.contains(&shard_of("default", n)))
        .take(count)
        .collect()
}

/// One name `PREFIX-i` per shard, in shard order.
fn one_per_shard(prefix: &str) -> Vec<String> {
    (0..SHARDS)
        .map(|s| {
            names_in(prefix, &BTreeSet::from([s]), 1)
                .pop()
                .expect("a name")
        })
        .collect()
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": data})
}

/// The replica a Lease holder belongs to: holders are `<identity>_<16 hex>`.
fn replica_of(holder: &str) -> Option<&str> {
    let (id, suffix) = holder.rsplit_once('_')?;
    (suffix.len() == 16 && suffix.chars().all(|c| c.is_ascii_hexdigit())).then_some(id)
}

/// What a test reads of one shard Lease.
#[derive(Debug, Clone, PartialEq)]
struct ShardLease {
    holder: String,
    acquired: Option<k8s_openapi::jiff::Timestamp>,
    renewed: Option<k8s_openapi::jiff::Timestamp>,
    duration: Option<i32>,
}

fn leases(env: &Env) -> Api<Lease> {
    Api::namespaced(env.client.clone(), "default")
}

/// The shard Leases by shard, read through the API (names and labels checked against
/// the spec on the way).
async fn shard_leases(api: &Api<Lease>) -> BTreeMap<u32, ShardLease> {
    let list = api
        .list(&ListParams::default().labels(SHARD_SELECTOR))
        .await
        .expect("list shard leases");
    let mut by_shard = BTreeMap::new();
    for l in list.items {
        let name = l.metadata.name.clone().unwrap_or_default();
        let labels = l.metadata.labels.clone().unwrap_or_default();
        let shard: u32 = labels
            .get("kubewasm.dev/shard")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("shard Lease {name} without a kubewasm.dev/shard label"));
        assert_eq!(name, format!("kubewasm-shard-{shard}"), "{labels:?}");
        assert!(shard < SHARDS, "{name}");
        let spec = l.spec.unwrap_or_default();
        by_shard.insert(
            shard,
            ShardLease {
                holder: spec.holder_identity.unwrap_or_default(),
                acquired: spec.acquire_time.map(|t| t.0),
                renewed: spec.renew_time.map(|t| t.0),
                duration: spec.lease_duration_seconds,
            },
        );
    }
    by_shard
}

/// Shard -> holder (the process identity), when every shard is held by one of `ids` and
/// each of them holds between floor(S/N) and ceil(S/N) shards.
async fn balanced(api: &Api<Lease>, ids: &[String]) -> Option<BTreeMap<u32, String>> {
    let leases = shard_leases(api).await;
    if leases.len() != SHARDS as usize {
        return None;
    }
    let holders: BTreeMap<u32, String> = leases.into_iter().map(|(s, l)| (s, l.holder)).collect();
    let n = ids.len() as u32;
    let (lo, hi) = (SHARDS / n, SHARDS.div_ceil(n));
    for id in ids {
        let held = holders
            .values()
            .filter(|h| replica_of(h) == Some(id.as_str()))
            .count() as u32;
        if held < lo || held > hi {
            return None;
        }
    }
    holders
        .values()
        .all(|h| replica_of(h).is_some_and(|r| ids.iter().any(|i| i == r)))
        .then_some(holders)
}

/// The shards each replica holds in `holders`.
fn by_replica(holders: &BTreeMap<u32, String>) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for (s, h) in holders {
        if let Some(r) = replica_of(h) {
            out.entry(r.to_string()).or_default().insert(*s);
        }
    }
    out
}

/// GET over plain HTTP/1.0: (status, body).
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read answer");
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A replica's ops address (/status, /metrics).
async fn ops_addr(host: &HostProcess) -> String {
    let line = host
        .wait_log("ops endpoint", |l| {
            field(l, "message").starts_with("serving /healthz")
        })
        .await;
    field(&line, "addr").to_string()
}

/// The sum of the `/metrics` samples named `name` whose line, lowercased, contains
/// `label` (all of them with `""`); None when there is none.
fn metric(addr: &str, name: &str, label: &str) -> Option<f64> {
    let (_, text) = http_get(addr, "/metrics");
    let values: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter(|l| l.to_lowercase().contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// One running replica: its id, process and ops address.
struct Replica {
    id: String,
    host: HostProcess,
    addr: String,
}

async fn start(env: &Env, id: &str) -> Replica {
    started(id, replica(env, id)).await
}

/// A replica once its ops endpoint serves.
async fn started(id: &str, host: HostProcess) -> Replica {
    let addr = ops_addr(&host).await;
    Replica {
        id: id.to_string(),
        host,
        addr,
    }
}

/// Every replica's own view (/status `shards`, the `kubewasm_shards_held` gauge) agrees
/// with the Leases in `holders`.
fn views_agree(replicas: &[&Replica], holders: &BTreeMap<u32, String>) -> Result<(), String> {
    for r in replicas {
        let (_, body) = http_get(&r.addr, "/status");
        let status: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        let shards = &status["shards"];
        let identity = shards["identity"].as_str().unwrap_or_default();
        if replica_of(identity) != Some(r.id.as_str()) {
            return Err(format!("{}: identity in /status: {shards}", r.id));
        }
        let expected: Vec<u32> = holders
            .iter()
            .filter(|(_, h)| h.as_str() == identity)
            .map(|(s, _)| *s)
            .collect();
        let mut held: Vec<u32> = shards["held"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .filter_map(|s| u32::try_from(s).ok())
            .collect();
        held.sort_unstable();
        let members = replicas.len() as u64;
        if shards["total"] != json!(SHARDS)
            || shards["members"] != json!(members)
            || held != expected
        {
            return Err(format!(
                "{}: /status shards {shards}, the Leases give it {expected:?} of {SHARDS} with {members} members",
                r.id
            ));
        }
        let gauge = metric(&r.addr, "kubewasm_shards_held", "");
        if gauge != Some(expected.len() as f64) {
            return Err(format!(
                "{}: kubewasm_shards_held {gauge:?}, holds {}",
                r.id,
                expected.len()
            ));
        }
    }
    Ok(())
}

/// Waits until the shards are balanced among `replicas`, every replica's own view agrees,
/// and the Leases still say the same after that: the assignment, settled.
async fn settled(env: &Env, replicas: &[&Replica]) -> BTreeMap<u32, String> {
    let api = leases(env);
    let ids: Vec<String> = replicas.iter().map(|r| r.id.clone()).collect();
    let mut last = String::new();
    let found = tokio::time::timeout(SETTLE, async {
        loop {
            if let Some(holders) = balanced(&api, &ids).await {
                match views_agree(replicas, &holders) {
                    Ok(()) if balanced(&api, &ids).await.as_ref() == Some(&holders) => {
                        return holders;
                    }
                    Ok(()) => last = "the Leases moved meanwhile".into(),
                    Err(e) => last = e,
                }
            } else {
                last = format!("not balanced: {:?}", shard_leases(&api).await);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    match found {
        Ok(holders) => holders,
        Err(_) => panic!(
            "shards not settled among {ids:?} within {SETTLE:?}: {last}\n{}",
            dump_all(replicas)
        ),
    }
}

fn dump_all(replicas: &[&Replica]) -> String {
    replicas
        .iter()
        .map(|r| format!("--- {} ---\n{}", r.id, r.host.dump()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The member Leases' names.
async fn members(api: &Api<Lease>) -> BTreeSet<String> {
    api.list(&ListParams::default().labels(MEMBER_SELECTOR))
        .await
        .expect("list member leases")
        .items
        .into_iter()
        .filter_map(|l| l.metadata.name)
        .collect()
}

/// The member Lease name of a process identity: `kubewasm-member-<identity, lowercase,
/// `_` as `-`>`.
fn member_name(identity: &str) -> String {
    format!(
        "kubewasm-member-{}",
        identity.to_lowercase().replace('_', "-")
    )
}

/// Log lines of `host` saying it applied the ConfigMap `out` (a key).
fn applied(host: &HostProcess, out: &str) -> Vec<Value> {
    let (namespace, name) = key_parts(out);
    let suffix = format!(" ConfigMap {namespace}/{name}");
    host.matching(|l| {
        let m = field(l, "message");
        m.starts_with("applied ") && m.ends_with(&suffix)
    })
}

/// Log lines of `host` handing an event of the ConfigMap `key` to a plugin.
fn events_of(host: &HostProcess, key: &str) -> Vec<Value> {
    let (namespace, name) = key_parts(key);
    let object = format!("ConfigMap {namespace}/{name}");
    host.matching(|l| field(l, "message") == "event" && field(l, "object") == object)
}

/// A log line's `shard` field (a number, or a number in a string).
fn shard_field(line: &Value) -> Option<u32> {
    match line.get("shard")? {
        Value::Number(n) => n.as_u64().and_then(|s| u32::try_from(s).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Every replica's shard moves (acquired, released, lost), with their times: for
/// failure messages.
fn moves(replicas: &[&Replica]) -> String {
    replicas
        .iter()
        .map(|r| {
            let lines: Vec<String> = r
                .host
                .matching(|l| field(l, "message").starts_with("shard "))
                .iter()
                .map(|l| {
                    format!(
                        "  {} {} {:?} members {}",
                        field(l, "timestamp"),
                        field(l, "message"),
                        shard_field(l),
                        l.get("members").unwrap_or(&Value::Null)
                    )
                })
                .collect();
            format!("{}:\n{}", r.id, lines.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The shards a log line says were gained: `shard acquired` (field `shard`), or the host's
/// `shards gained: ...` line (field `shards`, a set like `{1, 6}`), which precedes the
/// gained shards' replay in the task that runs it.
fn gained_by(line: &Value) -> BTreeSet<u32> {
    let m = field(line, "message");
    if m == "shard acquired" {
        return shard_field(line).into_iter().collect();
    }
    if m.starts_with("shards gained") {
        return field(line, "shards")
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
    }
    BTreeSet::new()
}

/// The key of the ConfigMap a log line is about when it hands an event to a plugin
/// (`event`, field `object`) or applies an intent (`applied ...`, field `trigger`).
fn handled_trigger(line: &Value) -> Option<&str> {
    let m = field(line, "message");
    let object = if m == "event" {
        field(line, "object")
    } else if m.starts_with("applied ") {
        field(line, "trigger")
    } else {
        return None;
    };
    let key = object.strip_prefix("ConfigMap ")?;
    Some(key.strip_prefix("default/").unwrap_or(key))
}

/// Asserts that each replica handed events to plugins and applied intents only for
/// triggers of shards it held at that point of its log: after gaining the shard and
/// before releasing or losing it.
fn assert_handled_only_while_held(replicas: &[&Replica]) {
    for r in replicas {
        let mut held = BTreeSet::new();
        for line in r.host.logs() {
            held.extend(gained_by(&line));
            let m = field(&line, "message");
            if (m == "shard released" || m == "shard lost")
                && let Some(s) = shard_field(&line)
            {
                held.remove(&s);
            }
            let Some(name) = handled_trigger(&line) else {
                continue;
            };
            let shard = shard_of_key(name);
            assert!(
                held.contains(&shard),
                "{} handled {name} of shard {shard} while holding {held:?}: {line}\nshard moves:\n{}",
                r.id,
                moves(replicas)
            );
        }
    }
}

/// Asserts that every apply of each output in `outs`, on any replica, answered the
/// output's version in the cluster now: it was written once, whoever applied it again.
async fn assert_written_once(
    replicas: &[&Replica],
    cms: &Api<kube::api::DynamicObject>,
    outs: &[String],
) {
    for out in outs {
        let now = get(cms, out)
            .await
            .unwrap_or_else(|| panic!("{out} is missing"));
        let version = now.metadata.resource_version.clone().unwrap_or_default();
        for r in replicas {
            for line in applied(&r.host, out) {
                assert_eq!(
                    field(&line, "resource_version"),
                    version,
                    "{} wrote {out} again: {line}\nshard moves:\n{}",
                    r.id,
                    moves(replicas)
                );
            }
        }
        assert_eq!(managers(&now), ["kubewasm-testkit"], "{out}");
    }
}

/// How many shards a replica has released so far.
fn releases(r: &Replica) -> usize {
    r.host
        .matching(|l| field(l, "message") == "shard released")
        .len()
}

/// Waits until every output in `outs` is logged as applied by some replica.
async fn wait_applied(replicas: &[&Replica], outs: &[String]) {
    eventually("every output's apply logged", CONVERGE, || async {
        outs.iter()
            .all(|o| replicas.iter().any(|r| !applied(&r.host, o).is_empty()))
            .then_some(())
    })
    .await;
}

/// Asserts that each trigger in `names` was handled by exactly one replica, the holder of
/// its shard in `holders`: exactly one `applied` line for `<name>-out` across `replicas`,
/// on that holder, and no event of the trigger handed to a plugin anywhere else.
fn assert_handled_once_by_holder(
    replicas: &[&Replica],
    holders: &BTreeMap<u32, String>,
    names: &[String],
) {
    for name in names {
        let shard = shard_of_key(name);
        let holder = holders
            .get(&shard)
            .and_then(|h| replica_of(h))
            .unwrap_or_else(|| panic!("shard {shard} of {name} held by nobody: {holders:?}"));
        let out = format!("{name}-out");
        let applies: Vec<(&str, Value)> = replicas
            .iter()
            .flat_map(|r| {
                applied(&r.host, &out)
                    .into_iter()
                    .map(move |l| (r.id.as_str(), l))
            })
            .collect();
        assert_eq!(
            applies.len(),
            1,
            "{out} (shard {shard}, held by {holder}) applied {} times: {applies:?}\nshard moves:\n{}",
            applies.len(),
            moves(replicas)
        );
        assert_eq!(
            applies[0].0, holder,
            "{out} (shard {shard}) applied by {} instead of the holder {holder}",
            applies[0].0
        );
        let handler = replicas
            .iter()
            .find(|r| r.id == holder)
            .expect("the holder");
        assert!(
            !events_of(&handler.host, name).is_empty(),
            "{holder} applied {out} without an event of {name} logged"
        );
        for r in replicas.iter().filter(|r| r.id != holder) {
            let events = events_of(&r.host, name);
            assert!(
                events.is_empty(),
                "{} handled {name} of shard {shard}, held by {holder}: {events:?}",
                r.id
            );
        }
    }
}

/// Output `<name>-out` with `data.value` == `value`, once it exists.
async fn output(cms: &Api<kube::api::DynamicObject>, name: &str) -> kube::api::DynamicObject {
    eventually(&format!("{name}-out"), CONVERGE, || async {
        get(cms, &format!("{name}-out")).await
    })
    .await
}

/// The number of labelled triggers in `names` per shard set of each replica.
fn count_in(names: &[String], shards: &BTreeSet<u32>) -> usize {
    names
        .iter()
        .filter(|n| shards.contains(&shard_of("default", n)))
        .count()
}

/// `kubewasm_cached_objects` for ConfigMaps.
fn cached_configmaps(addr: &str) -> Option<f64> {
    metric(addr, "kubewasm_cached_objects", "configmap")
}

#[test]
fn the_tests_shard_function_is_fnv1a_64() {
    // Reference vectors of FNV-1a 64.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

/// Two or three replicas from the start: the shards are balanced and every object is
/// handled exactly once, by the holder of its shard; each replica caches only its
/// shards' objects; a clean stop releases everything.
async fn replicas_split_the_shards_and_handle_each_object_once(n: usize) {
    let _serial = SERIAL.lock().await;
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let api = leases(&env);
    let mut replicas = Vec::new();
    for id in ids(n) {
        replicas.push(start(&env, &id).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    let holders = settled(&env, &all).await;
    let split = by_replica(&holders);
    let (lo, hi) = (SHARDS as usize / n, (SHARDS as usize).div_ceil(n));
    for r in &replicas {
        let held = split.get(&r.id).map_or(0, BTreeSet::len);
        assert!(
            (lo..=hi).contains(&held),
            "{} holds {held} of {SHARDS} shards with {n} replicas: {holders:?}",
            r.id
        );
        // Each acquisition is logged, with the process identity.
        let acquired: BTreeSet<u32> = r
            .host
            .matching(|l| field(l, "message") == "shard acquired")
            .iter()
            .filter_map(shard_field)
            .collect();
        assert!(
            split.get(&r.id).is_some_and(|s| s.is_subset(&acquired)),
            "{} holds {:?} but logged acquiring {acquired:?}",
            r.id,
            split.get(&r.id)
        );
        assert!(
            !r.host
                .matching(|l| field(l, "message").contains("standing for shards"))
                .is_empty(),
            "{}",
            r.host.dump()
        );
    }
    // One member Lease per replica process.
    let expected_members: BTreeSet<String> = holders.values().map(|h| member_name(h)).collect();
    assert_eq!(expected_members.len(), n);
    assert_eq!(members(&api).await, expected_members);

    // 40 objects over every shard.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let names: Vec<String> = (0..40).map(|i| format!("obj-{i:02}")).collect();
    let covered: BTreeSet<u32> = names.iter().map(|n| shard_of("default", n)).collect();
    assert_eq!(covered.len(), SHARDS as usize, "the objects miss shards");
    for (i, name) in names.iter().enumerate() {
        env.create(&cms, cm(name, json!({"value": i.to_string()})))
            .await;
    }
    let mut versions = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let out = output(&cms, name).await;
        assert_eq!(out.data["data"]["value"], json!(i.to_string()), "{name}");
        assert_eq!(managers(&out), ["kubewasm-testkit"], "{name}-out");
        versions.insert(
            format!("{name}-out"),
            out.metadata.resource_version.clone().unwrap_or_default(),
        );
    }
    let outs: Vec<String> = versions.keys().cloned().collect();
    wait_applied(&all, &outs).await;
    // Nothing moved meanwhile, so each object's shard had one holder all along.
    assert_eq!(
        balanced(&api, &ids(n)).await.as_ref(),
        Some(&holders),
        "the shards moved while the objects were handled:\n{}",
        dump_all(&all)
    );
    assert_handled_once_by_holder(&all, &holders, &names);
    assert_handled_only_while_held(&all);
    for r in &replicas {
        for line in r
            .host
            .matching(|l| field(l, "message").starts_with("applied "))
        {
            let out = field(&line, "message").rsplit('/').next().unwrap_or("");
            assert_eq!(
                versions.get(out).map(String::as_str),
                Some(field(&line, "resource_version")),
                "{}: {line}",
                r.id
            );
        }
    }
    // The caches follow the shards: each replica holds its shards' triggers only (the
    // plugin watches labelled ConfigMaps and declares no read).
    for r in &replicas {
        let mine = count_in(&names, &split[&r.id]) as f64;
        eventually(
            &format!("{}'s ConfigMap cache at its {mine} objects", r.id),
            CONVERGE,
            || {
                let cached = cached_configmaps(&r.addr);
                async move { (cached == Some(mine)).then_some(()) }
            },
        )
        .await;
    }
    for r in &replicas {
        r.host.assert_no_failed_events();
        r.host.assert_plain_values();
    }

    // A clean stop releases the shards and deletes the member Lease.
    for r in replicas {
        assert_eq!(r.host.stop(), Some(0), "{} did not stop cleanly", r.id);
    }
    let left = shard_leases(&api).await;
    assert!(
        left.values().all(|l| l.holder.is_empty()),
        "shards still held after every replica stopped: {left:?}"
    );
    assert_eq!(members(&api).await, BTreeSet::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_split_the_shards_and_handle_each_object_once() {
    replicas_split_the_shards_and_handle_each_object_once(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_split_the_shards_and_handle_each_object_once() {
    replicas_split_the_shards_and_handle_each_object_once(3).await;
}

/// A team's NamespacedPlugin (issue 35) is sharded like any plugin: both replicas load it
/// from the registry, each of its namespace's objects is handled once, by the holder of
/// the object's shard (the hash of `team-a/name`), and its status is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_plugins_objects_are_handled_once_by_their_shards_holder() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_crds(false).await;
    let registry = support::registry::Registry::start();
    for crd in ["crd-plugins.yaml", "crd-namespacedplugins.yaml"] {
        env.apply_path(&root().join("deploy/kubernetes/base").join(crd))
            .await;
    }
    let namespaces = env.api("v1", "Namespace", "namespaces", None);
    env.create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    )
    .await;
    let module = push_module(&registry, &test_plugin("testkit"), "testkit:v1");
    let plugins = env.api(
        "kubewasm.dev/v1alpha1",
        "NamespacedPlugin",
        "namespacedplugins",
        Some("team-a"),
    );
    env.apply(
        &plugins,
        "sharding-test",
        json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "NamespacedPlugin",
               "metadata": {"name": "testkit", "namespace": "team-a"},
               "spec": {"module": module, "permissions": {
                   "watches": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                   "grants": [{"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["create"]}]}}}),
    )
    .await;

    let registry_host = registry.host();
    let docker_config = empty_docker_config().display().to_string();
    let mut replicas = Vec::new();
    for id in ids(2) {
        let store = env
            .dir
            .path()
            .join(format!("modules-{id}"))
            .display()
            .to_string();
        let extra = [
            "--insecure-registry",
            &registry_host,
            "--tenant-registry",
            &registry_host,
            "--module-store",
            &store,
        ];
        let host = replica_with(&env, &id, &extra, &[("DOCKER_CONFIG", &docker_config)]);
        replicas.push(started(&id, host).await);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    for r in &all {
        r.host
            .wait_log("team-a/testkit loaded", |l| {
                field(l, "message") == "plugin loaded" && field(l, "plugin") == "team-a/testkit"
            })
            .await;
    }
    let holders = settled(&env, &all).await;

    // Its namespace's objects over every shard.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("team-a"));
    let keys: Vec<String> = (0..24).map(|i| format!("team-a/t-{i:02}")).collect();
    let covered: BTreeSet<u32> = keys.iter().map(|k| shard_of_key(k)).collect();
    assert_eq!(covered.len(), SHARDS as usize, "the objects miss shards");
    for key in &keys {
        let (_, name) = key_parts(key);
        env.create(
            &cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "labels": {"kubewasm.dev/testkit": "testkit"}},
                   "data": {"value": name}}),
        )
        .await;
    }
    for key in &keys {
        let (_, name) = key_parts(key);
        let out = output(&cms, name).await;
        assert_eq!(out.data["data"]["value"], json!(name), "{key}");
        assert_eq!(managers(&out), ["kubewasm-testkit"], "{key}-out");
    }
    let outs: Vec<String> = keys.iter().map(|k| format!("{k}-out")).collect();
    wait_applied(&all, &outs).await;
    assert_eq!(
        balanced(&leases(&env), &ids(2)).await.as_ref(),
        Some(&holders),
        "the shards moved while the objects were handled:\n{}",
        dump_all(&all)
    );
    assert_handled_once_by_holder(&all, &holders, &keys);
    assert_handled_only_while_held(&all);
    // Every event went to the team's plugin.
    for r in &all {
        for key in &keys {
            for line in events_of(&r.host, key) {
                assert_eq!(field(&line, "plugin"), "team-a/testkit", "{line}");
            }
        }
    }
    // The status: written once the plugin serves (by the holder of shard 0).
    eventually("team-a/testkit Ready", CONVERGE, || async {
        let o = get(&plugins, "testkit").await?;
        let conditions = o.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True" && c["reason"] == "Serving")
            .then_some(())
    })
    .await;
    for r in replicas {
        r.host.assert_no_failed_events();
        assert_eq!(r.host.stop(), Some(0), "{} did not stop cleanly", r.id);
    }
}

/// The shard Leases, sampled every 100 ms by a background task until dropped.
struct LeaseSampler {
    samples: Arc<Mutex<Vec<BTreeMap<u32, ShardLease>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseSampler {
    fn start(api: Api<Lease>) -> LeaseSampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        let task = tokio::spawn(async move {
            loop {
                let now = shard_leases(&api).await;
                sink.lock().expect("samples").push(now);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        LeaseSampler { samples, task }
    }

    fn samples(&self) -> Vec<BTreeMap<u32, ShardLease>> {
        self.samples.lock().expect("samples").clone()
    }
}

impl Drop for LeaseSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_apply_loses_its_shards_to_the_survivors_and_nothing_is_lost() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    env.server.record_requests();
    let api = leases(&env);
    let mut replicas = Vec::new();
    for id in ids(3) {
        replicas.push(start(&env, &id).await);
    }
    let mut victim_replica = replicas.remove(0);
    let survivors = replicas;
    let old_id = victim_replica.id.clone();
    let holders = {
        let all: Vec<&Replica> = std::iter::once(&victim_replica)
            .chain(survivors.iter())
            .collect();
        settled(&env, &all).await
    };
    let old_shards = by_replica(&holders)[&old_id].clone();
    let old_identity = holders[old_shards.first().expect("the victim holds shards")].clone();

    // The doomed replica handles `victim` (in one of its shards) while it holds it.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let victim = names_in("victim", &old_shards, 1).remove(0);
    env.create(&cms, cm(&victim, json!({"action": "track-deletion"})))
        .await;
    output(&cms, &victim).await;
    let victim_out = format!("{victim}-out");
    eventually(
        "the victim's output applied by its holder",
        CONVERGE,
        || async { (!applied(&victim_replica.host, &victim_out).is_empty()).then_some(()) },
    )
    .await;
    // The survivors watch ConfigMaps (so they see the deletion to come, and keep it).
    for s in &survivors {
        eventually(
            &format!("{} watching ConfigMaps", s.id),
            CONVERGE,
            || async {
                env.server
                    .requests()
                    .iter()
                    .any(|r| {
                        r.client == s.id
                            && r.path.contains("configmaps")
                            && r.path.contains("watch=true")
                            && r.executed.is_some()
                    })
                    .then_some(())
            },
        )
        .await;
    }

    // Cut the replica off: every request it sends from now on is held, unanswered (its
    // open watches keep flowing, so it sees the next trigger and starts its apply).
    let sampler = LeaseSampler::start(api.clone());
    let cut = Instant::now();
    env.server.stall_client(&old_id);
    let trigger = names_in("trigger", &old_shards, 1).remove(0);
    env.create(&cms, cm(&trigger, json!({"action": "copy"})))
        .await;
    let trigger_out = format!("{trigger}-out");
    eventually(
        "the doomed replica's apply of the trigger's output held mid-flight",
        CONVERGE,
        || {
            let found = env.server.requests().into_iter().any(|r| {
                r.client == old_id
                    && r.is_write()
                    && r.path.contains(&trigger_out)
                    && r.executed.is_none()
            });
            async move { found.then_some(()) }
        },
    )
    .await;
    // An object of its shards is deleted in the window, and the replica dies mid-apply.
    cms.delete(&victim, &Default::default())
        .await
        .expect("delete the victim");
    victim_replica.host.kill();
    let killed = Instant::now();
    let released_before: Vec<usize> = survivors.iter().map(releases).collect();
    // Objects created while the shards move, one in every shard.
    let during = one_per_shard("during");
    for (i, name) in during.iter().enumerate() {
        env.create(&cms, cm(name, json!({"value": i.to_string()})))
            .await;
    }

    // The survivors take every shard over, balanced between the two of them.
    let survivors_ref: Vec<&Replica> = survivors.iter().collect();
    let after = settled(&env, &survivors_ref).await;
    let settled_at = Instant::now();
    let mut samples = sampler.samples();
    drop(sampler);
    // The sampler may not have seen the settled state yet.
    samples.push(shard_leases(&api).await);

    // Each of its shards moved only after its lease expired: the new holder acquired it at
    // least a lease duration after the dead replica's last renewal.
    let mut waits = Vec::new();
    for shard in &old_shards {
        let last_renewal = samples
            .iter()
            .filter_map(|s| s.get(shard))
            .filter(|l| l.holder == old_identity)
            .filter_map(|l| l.renewed)
            .max()
            .unwrap_or_else(|| panic!("no renewal of shard {shard} by {old_identity} sampled"));
        let new = samples
            .iter()
            .filter_map(|s| s.get(shard))
            .find(|l| l.holder != old_identity && !l.holder.is_empty())
            .cloned()
            .unwrap_or_else(|| panic!("shard {shard} never seen moving: {:?}", after.get(shard)));
        let acquired = new
            .acquired
            .unwrap_or_else(|| panic!("shard {shard}: no acquireTime: {new:?}"));
        let waited = acquired.duration_since(last_renewal);
        waits.push(waited.as_secs_f64());
        assert!(
            waited
                >= SignedDuration::try_from(LEASE_DURATION).expect("duration")
                    - SignedDuration::from_millis(50),
            "shard {shard} taken over by {} {waited:?} after {old_identity}'s last renewal (lease {LEASE_DURATION:?})",
            new.holder
        );
        assert!(
            replica_of(&new.holder).is_some_and(|r| survivors.iter().any(|s| s.id == r)),
            "{new:?}"
        );
    }
    // Losing the dead replica's shards: acquisitions logged by the survivors.
    let taken: BTreeSet<u32> = survivors
        .iter()
        .flat_map(|s| {
            s.host
                .matching(|l| field(l, "message") == "shard acquired")
                .iter()
                .filter_map(shard_field)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        old_shards.is_subset(&taken),
        "{old_shards:?} not all logged as acquired by the survivors: {taken:?}"
    );

    // The trigger the dead replica could not finish is handled by its shard's new holder.
    let out = output(&cms, &trigger).await;
    assert_eq!(managers(&out), ["kubewasm-testkit"]);
    // The deletion in the window reaches the new holder as `deleted`.
    let deleted = eventually(
        "the new holder's plugin saw `deleted`",
        CONVERGE,
        || async { get(&cms, &format!("{victim}-deleted")).await },
    )
    .await;
    assert_eq!(deleted.data["data"]["deleted"], json!(victim));
    let deleted_out = format!("{victim}-deleted");
    eventually(
        "the apply of the deletion's record logged",
        CONVERGE,
        || async {
            survivors
                .iter()
                .any(|s| !applied(&s.host, &deleted_out).is_empty())
                .then_some(())
        },
    )
    .await;
    assert!(
        survivors.iter().any(|s| events_of(&s.host, &victim)
            .iter()
            .any(|l| field(l, "event") == "deleted")),
        "no survivor handed `deleted` of {victim} to the plugin:\n{}",
        dump_all(&survivors_ref)
    );
    // Nothing lost: every object created during the move got its output.
    for (i, name) in during.iter().enumerate() {
        let out = output(&cms, name).await;
        assert_eq!(out.data["data"]["value"], json!(i.to_string()), "{name}");
    }
    let mut outs: Vec<String> = during.iter().map(|n| format!("{n}-out")).collect();
    outs.push(trigger_out.clone());
    outs.push(deleted_out.clone());
    wait_applied(&survivors_ref, &outs).await;
    // Each trigger handled by a survivor only while it held the trigger's shard, and each
    // output written once (every later apply answered the same version).
    assert_handled_only_while_held(&survivors_ref);
    assert_handled_only_while_held(&[&victim_replica]);
    assert_written_once(&survivors_ref, &cms, &outs).await;
    // The survivors only gained shards (a dead member is not made room for), so each
    // object was handled by exactly one of them: its shard's final holder.
    let released_after: Vec<usize> = survivors.iter().map(releases).collect();
    assert_eq!(
        released_after,
        released_before,
        "survivors released shards after the kill (moves:\n{})",
        moves(&survivors_ref)
    );
    let mut handled = during.clone();
    handled.push(trigger.clone());
    assert_handled_once_by_holder(&survivors_ref, &after, &handled);
    let holder = replica_of(&after[&shard_of("default", &victim)]).expect("a holder");
    for s in &survivors {
        let n = applied(&s.host, &deleted_out).len();
        assert_eq!(
            n,
            usize::from(s.id == holder),
            "{} applied {deleted_out} {n} times (the holder: {holder})",
            s.id
        );
    }

    // Nothing the dead replica sent after the cut was executed: each held request was
    // given up when the process died, so releasing the stall lets nothing through.
    eventually(
        "the dead replica's held requests given up",
        CONVERGE,
        || async { (env.server.held_requests(&old_id) == 0).then_some(()) },
    )
    .await;
    env.server.release_client(&old_id);
    let from_old: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.client == old_id && r.arrived >= cut)
        .collect();
    assert!(
        from_old
            .iter()
            .any(|r| r.is_write() && r.path.contains(&trigger_out)),
        "not cut off mid-apply: {from_old:#?}"
    );
    for r in &from_old {
        assert!(
            r.abandoned && r.executed.is_none(),
            "executed after the cut: {r:#?}"
        );
    }
    assert!(
        applied(&victim_replica.host, &trigger_out).is_empty(),
        "{}",
        victim_replica.host.dump()
    );
    println!(
        "takeover: the dead replica's shards acquired {} s after its last renewals (lease {LEASE_DURATION:?}); every shard held, settled, {:.1} s after the kill ({:.1} s after the cut)",
        waits
            .iter()
            .map(|w| format!("{w:.2}"))
            .collect::<Vec<_>>()
            .join("/"),
        (settled_at - killed).as_secs_f64(),
        (settled_at - cut).as_secs_f64()
    );
    for s in &survivors {
        s.host.assert_no_failed_events();
    }
    for s in survivors {
        assert_eq!(s.host.stop(), Some(0), "{}", s.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_replica_joining_a_running_pair_takes_its_share_and_nothing_is_written_twice() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let api = leases(&env);
    let [a, b, c]: [String; 3] = ids(3).try_into().expect("three ids");
    let mut replicas = vec![start(&env, &a).await, start(&env, &b).await];
    let pair: Vec<&Replica> = replicas.iter().collect();
    let before = settled(&env, &pair).await;

    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let names: Vec<String> = (0..40).map(|i| format!("obj-{i:02}")).collect();
    for (i, name) in names.iter().enumerate() {
        env.create(&cms, cm(name, json!({"value": i.to_string()})))
            .await;
    }
    let mut versions = BTreeMap::new();
    for name in &names {
        let out = output(&cms, name).await;
        versions.insert(
            format!("{name}-out"),
            out.metadata.resource_version.clone().unwrap_or_default(),
        );
    }
    let outs: Vec<String> = versions.keys().cloned().collect();
    wait_applied(&pair, &outs).await;
    assert_handled_once_by_holder(&pair, &before, &names);

    // The newcomer joins: the pair releases its surplus, the newcomer takes its share.
    replicas.push(start(&env, &c).await);
    let all: Vec<&Replica> = replicas.iter().collect();
    let after = settled(&env, &all).await;
    let split = by_replica(&after);
    let theirs = &split[&c];
    assert!(
        (SHARDS as usize / 3..=(SHARDS as usize).div_ceil(3)).contains(&theirs.len()),
        "the newcomer holds {theirs:?}"
    );
    // Each shard the newcomer holds was released by the replica that held it before.
    for shard in theirs {
        let from = replica_of(&before[shard]).expect("a holder");
        let old = all.iter().find(|r| r.id == from).expect("a replica");
        let released = old.host.matching(|l| {
            field(l, "message") == "shard released" && shard_field(l) == Some(*shard)
        });
        assert!(
            !released.is_empty(),
            "{from} held shard {shard}, now {c}'s, without logging its release"
        );
    }
    // The newcomer replays its shards' objects (`resync`), and re-applies their outputs
    // unchanged: the API server answers without a write.
    let gained: Vec<String> = names
        .iter()
        .filter(|n| theirs.contains(&shard_of("default", n)))
        .cloned()
        .collect();
    assert!(!gained.is_empty(), "the newcomer's shards hold no object");
    let newcomer = &replicas[2];
    eventually(
        "the newcomer replayed its shards' objects",
        CONVERGE,
        || async {
            gained
                .iter()
                .all(|n| !applied(&newcomer.host, &format!("{n}-out")).is_empty())
                .then_some(())
        },
    )
    .await;
    for name in &names {
        let events = events_of(&newcomer.host, name);
        if gained.contains(name) {
            assert!(
                !events.is_empty() && events.iter().all(|l| field(l, "event") == "resync"),
                "{name}: {events:?}"
            );
        } else {
            assert!(
                events.is_empty(),
                "the newcomer handled {name} of a shard it does not hold: {events:?}"
            );
        }
    }
    // No output written twice: every apply of every output, on any replica, answered the
    // version written first, and that is still the version in the cluster.
    for r in &replicas {
        for line in r
            .host
            .matching(|l| field(l, "message").starts_with("applied "))
        {
            let out = field(&line, "message").rsplit('/').next().unwrap_or("");
            assert_eq!(
                versions.get(out).map(String::as_str),
                Some(field(&line, "resource_version")),
                "{} wrote {out} again: {line}",
                r.id
            );
        }
    }
    for (out, version) in &versions {
        let now = get(&cms, out).await.expect("the output");
        assert_eq!(
            now.metadata.resource_version.as_deref(),
            Some(version.as_str()),
            "{out} written twice"
        );
        assert_eq!(managers(&now), ["kubewasm-testkit"], "{out}");
    }
    // The pair handles nothing of a shard after releasing it, the newcomer nothing before
    // gaining it.
    assert_handled_only_while_held(&all);

    // New objects after the rebalancing: each handled once, by its shard's new holder.
    let more: Vec<String> = (0..16).map(|i| format!("new-{i:02}")).collect();
    for (i, name) in more.iter().enumerate() {
        env.create(&cms, cm(name, json!({"value": i.to_string()})))
            .await;
    }
    for name in &more {
        output(&cms, name).await;
    }
    let more_outs: Vec<String> = more.iter().map(|n| format!("{n}-out")).collect();
    wait_applied(&all, &more_outs).await;
    assert_eq!(
        balanced(&api, &ids(3)).await.as_ref(),
        Some(&after),
        "the shards moved again"
    );
    assert_handled_once_by_holder(&all, &after, &more);
    assert_handled_only_while_held(&all);
    for r in &replicas {
        r.host.assert_no_failed_events();
    }
    for r in replicas {
        assert_eq!(r.host.stop(), Some(0), "{}", r.id);
    }
}

/// The `read` action lists labelled ConfigMaps in `default` (testkit's `host.list`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_listing_its_watched_kind_without_declaring_a_read_is_told_to_declare_it() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let replicas = vec![
        start(&env, "replica-a").await,
        start(&env, "replica-b").await,
    ];
    let all: Vec<&Replica> = replicas.iter().collect();
    let holders = settled(&env, &all).await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for name in one_per_shard("peer") {
        env.create(&cms, cm(&name, json!({"value": "1"}))).await;
        output(&cms, &name).await;
    }
    let lister = "lister";
    env.create(&cms, cm(lister, json!({"action": "read"})))
        .await;
    let holder = replica_of(&holders[&shard_of("default", lister)])
        .expect("a holder")
        .to_string();
    let r = replicas.iter().find(|r| r.id == holder).expect("holder");
    let failed = r
        .host
        .wait_log("the list refused", |l| {
            field(l, "message") == "event failed" && field(l, "object").ends_with("/lister")
        })
        .await;
    let error = field(&failed, "error");
    assert!(
        error.contains("reads") && error.to_lowercase().contains("declare"),
        "not a clear ReadError: {failed}"
    );
    assert!(get(&cms, "lister-out").await.is_none());
    let other = replicas.iter().find(|r| r.id != holder).expect("other");
    assert!(events_of(&other.host, lister).is_empty());
    for r in replicas {
        assert_eq!(r.host.stop(), Some(0), "{}", r.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_declaring_its_kind_under_reads_lists_the_objects_of_every_shard() {
    let _serial = SERIAL.lock().await;
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", Some("readAll: true\n"));
    let replicas = vec![
        start(&env, "replica-a").await,
        start(&env, "replica-b").await,
    ];
    let all: Vec<&Replica> = replicas.iter().collect();
    let holders = settled(&env, &all).await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let peers = one_per_shard("peer");
    for name in &peers {
        env.create(&cms, cm(name, json!({"value": "1"}))).await;
    }
    for name in &peers {
        output(&cms, name).await;
    }
    // Created after the peers: once its event reaches its holder, that replica's cache
    // (the whole kind, declared under `reads`) holds every peer, whichever shard.
    let reader = "reader";
    env.create(&cms, cm(reader, json!({"action": "read"})))
        .await;
    let out = output(&cms, reader).await;
    let listed: BTreeSet<String> = out.data["data"]["listed"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .map(str::to_string)
        .collect();
    let mut expected: BTreeSet<String> = peers.iter().cloned().collect();
    expected.insert(reader.to_string());
    assert_eq!(listed, expected);
    let holder = replica_of(&holders[&shard_of("default", reader)]).expect("a holder");
    let elsewhere: Vec<&String> = peers
        .iter()
        .filter(|p| replica_of(&holders[&shard_of("default", p)]) != Some(holder))
        .collect();
    assert!(
        !elsewhere.is_empty(),
        "no peer in the other replica's shards"
    );
    // Both replicas cache every ConfigMap: the peers, the reader and the outputs.
    let total = (2 * peers.len() + 2) as f64;
    for r in &replicas {
        eventually(
            &format!("{}'s ConfigMap cache holds every ConfigMap", r.id),
            CONVERGE,
            || {
                let cached = cached_configmaps(&r.addr);
                async move { cached.is_some_and(|c| c >= total).then_some(()) }
            },
        )
        .await;
    }
    for r in &replicas {
        r.host.assert_no_failed_events();
    }
    for r in replicas {
        assert_eq!(r.host.stop(), Some(0), "{}", r.id);
    }
}
