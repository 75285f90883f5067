//! Two sharded hosts (`kubewasm run --shards S`) on the real cluster, as the suite's
//! ServiceAccount under the RBAC `kubewasm rbac --sharded` generates: the seed scenarios
//! pass with each object handled by the holder of its shard alone, and a host SIGKILLed
//! mid-run loses nothing (its shards move to the survivor once their Leases expire; objects
//! created and deleted meanwhile are handled, the deletions as `deleted`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::{Value, json};

use crate::common::{BoxFuture, CONVERGE, HostLog, Seed, api, apply, create, site};
use crate::support::{HostProcess, eventually, field, get};
use crate::{Suite, start_host_with};

/// Shards of the pair: few, so each host holds several and a kill moves several.
const SHARDS: u32 = 8;
/// Trackers created while the pair runs; one host is killed as it works through them.
const TRACKERS: usize = 160;
/// Short Leases, so the survivor takes over within seconds.
const LEASE: [&str; 6] = [
    "--lease-duration",
    "6s",
    "--renew-deadline",
    "4s",
    "--retry-period",
    "1s",
];
const LEASE_NAME: &str = "kubewasm-e2e";

/// The shard of a key: FNV-1a 64 of `namespace/name`, modulo S (deploy/README.md,
/// "Sharding").
fn shard_of(ns: &str, name: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{ns}/{name}").bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(SHARDS)) as u32
}

/// Both hosts' logs, for the seed scenarios (each object is handled by one of them).
struct Pair<'a> {
    hosts: &'a [&'a HostProcess],
}

impl HostLog for Pair<'_> {
    fn lines(&self) -> BoxFuture<'_, Vec<Value>> {
        let lines: Vec<Value> = self.hosts.iter().flat_map(|h| h.logs()).collect();
        Box::pin(async move { lines })
    }
}

/// Shard number → holder identity's prefix (`e2e-a`), from the shard Leases.
async fn holders(s: &Suite) -> BTreeMap<u32, String> {
    let leases = api(
        &s.admin,
        "coordination.k8s.io/v1",
        "Lease",
        "leases",
        Some(&s.host_ns),
    );
    let list = leases
        .list(&kube::api::ListParams::default().labels(&format!(
            "kubewasm.dev/lease-set={LEASE_NAME},kubewasm.dev/lease-role=shard"
        )))
        .await
        .expect("list shard Leases");
    list.items
        .iter()
        .filter_map(|l| {
            let shard = l.metadata.labels.as_ref()?.get("kubewasm.dev/shard")?;
            let holder = l.data["spec"]["holderIdentity"].as_str().unwrap_or("");
            let who = holder.split('_').next().unwrap_or("").to_string();
            Some((shard.parse().ok()?, who))
        })
        .collect()
}

/// Wait until the shard Leases are held by exactly `who`, each holding `per` of them.
async fn wait_assignment(s: &Suite, who: &[&str], per: usize) -> BTreeMap<u32, String> {
    eventually(
        &format!("{SHARDS} shards held by {who:?}, {per} each"),
        CONVERGE,
        || async {
            let h = holders(s).await;
            let mut count: BTreeMap<&str, usize> = BTreeMap::new();
            for w in h.values() {
                *count.entry(w.as_str()).or_default() += 1;
            }
            (h.len() == SHARDS as usize
                && count.len() == who.len()
                && who.iter().all(|w| count.get(w) == Some(&per)))
            .then_some(h)
        },
    )
    .await
}

/// The `event` lines of `host` for object `ns/name` (any plugin; the line's `object` is
/// `KIND ns/name`).
fn events_of(host: &HostProcess, ns: &str, name: &str) -> usize {
    let object = format!(" {ns}/{name}");
    host.matching(|l| field(l, "message") == "event" && field(l, "object").ends_with(&object))
        .len()
}

/// A sharded host as the suite's ServiceAccount, `--identity id`.
async fn start_sharded(s: &Suite, id: &str) -> HostProcess {
    let shards = SHARDS.to_string();
    let mut args: Vec<&str> = vec!["--shards", &shards, "--identity", id];
    args.extend(["--lease-name", LEASE_NAME, "--lease-namespace", &s.host_ns]);
    args.extend(LEASE);
    start_host_with(s, &args).await
}

/// A ConfigMap of the `tracker` testkit (run id `id`).
fn tracker(id: &str, ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns,
                        "labels": {"kubewasm.dev/e2e-tracker": id}},
           "data": {"action": "track-deletion", "value": name}})
}

pub async fn two_sharded_hosts(s: &'static Suite) {
    // The single host makes way.
    if let Some(host) = s.host.lock().await.take() {
        assert_eq!(host.stop(), Some(0), "the single host did not stop cleanly");
    }

    // The RBAC `kubewasm rbac --sharded` generates: the host's Role also lists and deletes
    // Leases. Only that Role is applied again (the rest is as `kubewasm rbac` printed it
    // at setup; scenario 7 narrowed a plugin's role on purpose).
    let (plugins, approvals) = (
        s.plugins.to_string_lossy().into_owned(),
        s.approvals.to_string_lossy().into_owned(),
    );
    let docs = crate::install_docs(
        s,
        &[
            "rbac",
            "--sharded",
            "--plugins",
            &plugins,
            "--approvals",
            &approvals,
        ],
    );
    let yaml = serde_json::to_string_pretty(&docs).unwrap_or_default();
    let roles: Vec<Value> = docs
        .into_iter()
        .filter(|v| v["kind"] == "Role" && v["metadata"]["namespace"] == json!(s.host_ns))
        .collect();
    let lease_rule = roles
        .iter()
        .flat_map(|r| r["rules"].as_array().into_iter().flatten())
        .find(|r| r["resources"] == json!(["leases"]))
        .unwrap_or_else(|| panic!("no Lease rule in:\n{yaml}"));
    assert_eq!(
        lease_rule["verbs"],
        json!(["get", "list", "create", "update", "delete"])
    );
    apply(&s.admin, roles).await;

    let ns = format!("{}-sharded", s.ns);
    apply(
        &s.admin,
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})],
    )
    .await;

    let a = start_sharded(s, "e2e-a").await;
    let mut b = start_sharded(s, "e2e-b").await;
    let assignment = wait_assignment(s, &["e2e-a", "e2e-b"], SHARDS as usize / 2).await;
    println!("  shards: {assignment:?}");

    // The seed scenarios against the pair.
    {
        let pair = Pair { hosts: &[&a, &b] };
        let seed = Seed {
            admin: &s.admin,
            ns: &ns,
            log: &pair,
        };
        seed.provision_on_demand("blog").await;
        seed.garbage_collection("blog").await;
        seed.foreign_mongodb().await;
        seed.seldon_available().await;
    }
    // Each object was handled by the holder of its shard, and only by it.
    for name in ["blog", "orders-db", "iris"] {
        let holder = &assignment[&shard_of(&ns, name)];
        let (by_a, by_b) = (events_of(&a, &ns, name), events_of(&b, &ns, name));
        let (mine, other) = if holder == "e2e-a" {
            (by_a, by_b)
        } else {
            (by_b, by_a)
        };
        assert!(
            mine > 0 && other == 0,
            "{ns}/{name} (shard {}, held by {holder}): {by_a} event(s) on e2e-a, {by_b} on e2e-b",
            shard_of(&ns, name)
        );
    }
    println!("  seed scenarios passed; each object handled by its shard's holder alone");

    // Mid-run: trackers (testkit `track-deletion`: `<name>-out` for each, `<name>-deleted`
    // once its deletion is handled) and sites, then e2e-b SIGKILLed as soon as it has
    // applied something of them.
    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&ns));
    let sites = api(
        &s.admin,
        "sites.kubewasm.dev/v1alpha1",
        "ContentSite",
        "contentsites",
        Some(&ns),
    );
    let before: Vec<String> = (0..TRACKERS).map(|i| format!("t-{i}")).collect();
    let b_shards: BTreeSet<u32> = assignment
        .iter()
        .filter(|(_, w)| *w == "e2e-b")
        .map(|(k, _)| *k)
        .collect();
    let in_b = |name: &String| b_shards.contains(&shard_of(&ns, name));
    // Created 16 at a time by a task of their own, while e2e-b works through them.
    let creating = {
        let (cms, sites, ns, id) = (cms.clone(), sites.clone(), ns.clone(), s.id.clone());
        let before = before.clone();
        tokio::spawn(async move {
            let trackers = futures::stream::iter(before.into_iter().map(|name| {
                let (cms, obj) = (cms.clone(), tracker(&id, &ns, &name));
                async move { create(&cms, obj).await }
            }))
            .buffer_unordered(16)
            .collect::<Vec<_>>();
            let sites = futures::future::join_all(
                (0..4).map(|i| create(&sites, site(&format!("site-{i}"), &ns))),
            );
            let (_, sites) = futures::join!(trackers, sites);
            sites
        })
    };
    let applied_by_b = |b: &HostProcess| {
        b.matching(|l| {
            field(l, "message").starts_with("applied create ConfigMap")
                && field(l, "message").contains(&format!("{ns}/t-"))
        })
        .len()
    };
    b.wait_log_for("e2e-b applies a tracker's output", CONVERGE, |l| {
        field(l, "message").starts_with("applied create ConfigMap")
            && field(l, "message").contains(&format!("{ns}/t-"))
    })
    .await;
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &b.pid().to_string()])
        .status();
    let killed = std::time::Instant::now();
    eventually("e2e-b gone", Duration::from_secs(10), || {
        let gone = b.exited().is_some();
        async move { gone.then_some(()) }
    })
    .await;
    let mut created_sites = creating.await.expect("creating the trackers and sites");
    let share = before.iter().filter(|n| in_b(n)).count();
    let done = applied_by_b(&b);
    println!(
        "  e2e-b SIGKILLed mid-run (held shards {b_shards:?}): it had applied {done} of its {share} trackers' outputs"
    );
    assert!(
        done < share,
        "e2e-b had finished its trackers before the kill: not a kill mid-run"
    );

    // While its shards are orphaned: deletions of trackers in them, and new objects there.
    // Two of the first created (most likely handled by e2e-b already) and two of the last.
    let ours: Vec<&String> = before.iter().filter(|n| in_b(n)).collect();
    assert!(ours.len() >= 4, "fewer than 4 trackers in e2e-b's shards");
    let deleted: Vec<String> = [0, 1, ours.len() - 2, ours.len() - 1]
        .iter()
        .map(|&i| ours[i].clone())
        .collect();
    for name in &deleted {
        cms.delete(name, &DeleteParams::default())
            .await
            .expect("delete tracker");
    }
    let late: Vec<String> = (0..)
        .map(|i| format!("late-{i}"))
        .filter(|n| in_b(n))
        .take(4)
        .collect();
    for name in &late {
        create(&cms, tracker(&s.id, &ns, name)).await;
    }
    let late_site = (0..)
        .map(|i| format!("late-site-{i}"))
        .find(|n| in_b(n))
        .expect("a site name in e2e-b's shards");
    created_sites.push(create(&sites, site(&late_site, &ns)).await);

    // The survivor takes every shard, and nothing is lost.
    wait_assignment(s, &["e2e-a"], SHARDS as usize).await;
    println!(
        "  e2e-a holds all {SHARDS} shards {:.1?} after the kill (Leases of 6 s)",
        killed.elapsed()
    );
    let pair = Pair { hosts: &[&a] };
    let seed = Seed {
        admin: &s.admin,
        ns: &ns,
        log: &pair,
    };
    for site in &created_sites {
        seed.provisioned(site).await;
    }
    let alive: Vec<&String> = before
        .iter()
        .filter(|n| !deleted.contains(n))
        .chain(late.iter())
        .collect();
    for name in alive {
        eventually(&format!("{name}-out"), CONVERGE, || {
            let (cms, out) = (cms.clone(), format!("{name}-out"));
            async move { get(&cms, &out).await }
        })
        .await;
    }
    for name in &deleted {
        let gone = eventually(&format!("{name}-deleted"), CONVERGE, || {
            let (cms, out) = (cms.clone(), format!("{name}-deleted"));
            async move { get(&cms, &out).await }
        })
        .await;
        assert_eq!(gone.data["data"]["deleted"], json!(name));
    }
    // The deletions reached e2e-a as `deleted` events.
    for name in &deleted {
        let object = format!("ConfigMap {ns}/{name}");
        assert!(
            !a.matching(|l| field(l, "message") == "event"
                && field(l, "object") == object
                && field(l, "event") == "deleted")
                .is_empty(),
            "e2e-a logged no deleted event of {object}"
        );
    }
    let acquired: BTreeSet<u32> = a
        .matching(|l| field(l, "message") == "shard acquired")
        .iter()
        .filter_map(|l| l["shard"].as_u64().map(|n| n as u32))
        .collect();
    assert!(
        b_shards.is_subset(&acquired),
        "e2e-a acquired {acquired:?}, e2e-b held {b_shards:?}"
    );
    // (The pair also handles the earlier scenarios' objects, whose 409 and 403 are theirs.)
    let mine = format!(" {ns}/");
    let failed =
        a.matching(|l| field(l, "message") == "event failed" && field(l, "object").contains(&mine));
    assert!(failed.is_empty(), "{failed:?}");
    println!(
        "  after the kill: {} sites provisioned, {} trackers handled ({} late), {} deletions delivered as `deleted`",
        created_sites.len(),
        before.len() - deleted.len() + late.len(),
        late.len(),
        deleted.len()
    );

    // A clean stop releases every shard and deletes the member Lease.
    assert_eq!(a.stop(), Some(0), "e2e-a did not stop cleanly");
    let leases: Api<DynamicObject> = api(
        &s.admin,
        "coordination.k8s.io/v1",
        "Lease",
        "leases",
        Some(&s.host_ns),
    );
    let released = holders(s).await;
    assert!(
        released.values().all(String::is_empty),
        "shards still held after a clean stop: {released:?}"
    );
    let members = leases
        .list(&kube::api::ListParams::default().labels(&format!(
            "kubewasm.dev/lease-set={LEASE_NAME},kubewasm.dev/lease-role=member"
        )))
        .await
        .expect("list member Leases");
    let names: Vec<String> = members
        .items
        .iter()
        .filter_map(|l| l.metadata.name.clone())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("e2e-a")),
        "e2e-a's member Lease is still there: {names:?}"
    );
}
