//! Shard Leases against the embedded API server, in process: replicas split S shards
//! within one of S/N, no shard is ever held by two replicas at once, a replica that stops
//! hands its shards over at once, and one that dies keeps nothing: its terms end at their
//! write deadlines, before any survivor takes its shards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams};
use kubewasm::replicas::leader::LeaderConfig;
use kubewasm::replicas::shards::{self, ShardConfig, ShardMetrics, ShardSet};
use kubewasm_apiserver::{ApiServer, Config};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const SHARDS: u32 = 16;
const RENEW_DEADLINE: Duration = Duration::from_millis(1500);
const LEASE_DURATION: Duration = Duration::from_secs(3);

fn config(identity: &str) -> ShardConfig {
    ShardConfig {
        lease: LeaderConfig {
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: Duration::from_millis(200),
            ..LeaderConfig::new("kubewasm-test", "default", identity)
        },
        shards: SHARDS,
    }
}

struct Replica {
    set: ShardSet,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

fn replica(client: &Client, identity: &str) -> Replica {
    let cancel = CancellationToken::new();
    let (set, task) = shards::spawn_when(
        client.clone(),
        config(identity),
        std::future::ready(()),
        ShardMetrics::default(),
        cancel.clone(),
    );
    Replica { set, cancel, task }
}

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(Config::default())
        .await
        .expect("start API server");
    let client = Client::try_from(server.client_config()).expect("client");
    (server, client)
}

/// A client of `server` sending `token`, so the server tells its requests apart.
async fn client_as(server: &ApiServer, token: &str) -> Client {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&server.kubeconfig_for(token)).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    Client::try_from(config).expect("client")
}

async fn wait_until(what: &str, timeout: Duration, f: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

/// Whether the replicas hold every shard between them, each within one of S/N.
fn balanced(sets: &[&ShardSet]) -> bool {
    let n = sets.len();
    let lo = SHARDS as usize / n;
    let hi = (SHARDS as usize).div_ceil(n);
    let all: BTreeSet<u32> = sets.iter().flat_map(|s| s.held()).collect();
    all.len() == SHARDS as usize && sets.iter().all(|s| (lo..=hi).contains(&s.held().len()))
}

/// Samples the sets every few milliseconds and remembers any shard two of them held at
/// one moment: read twice in a row with the other holding it in between, so a hand-over
/// between two reads is no false alarm.
struct Sampler {
    doubles: Arc<Mutex<BTreeSet<u32>>>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

fn sampler(sets: Vec<ShardSet>) -> Sampler {
    let doubles = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let doubles = doubles.clone();
        let stop = stop.clone();
        async move {
            while !stop.is_cancelled() {
                for shard in 0..SHARDS {
                    for a in &sets {
                        for b in &sets {
                            if std::ptr::eq(a, b) {
                                continue;
                            }
                            if a.holds(shard) && b.holds(shard) && a.holds(shard) {
                                doubles.lock().expect("lock").insert(shard);
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }
    });
    Sampler {
        doubles,
        stop,
        task,
    }
}

impl Sampler {
    async fn finish(self) -> BTreeSet<u32> {
        self.stop.cancel();
        self.task.await.expect("sampler");
        self.doubles.lock().expect("lock").clone()
    }
}

/// The shard Leases' holders, by shard number.
async fn holders(client: &Client) -> BTreeMap<u32, String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let list = leases
        .list(
            &ListParams::default()
                .labels("kubewasm.dev/lease-set=kubewasm-test,kubewasm.dev/lease-role=shard"),
        )
        .await
        .expect("list shard leases");
    list.items
        .iter()
        .filter_map(|l| {
            let shard = l.metadata.labels.as_ref()?.get("kubewasm.dev/shard")?;
            let holder = l.spec.as_ref()?.holder_identity.clone()?;
            Some((shard.parse().ok()?, holder))
        })
        .filter(|(_, h): &(u32, String)| !h.is_empty())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_split_the_shards_and_a_stopped_one_hands_over_at_once() {
    let (_server, client) = server().await;
    let a = replica(&client, "a");
    let b = replica(&client, "b");
    let c = replica(&client, "c");
    let sampling = sampler(vec![a.set.clone(), b.set.clone(), c.set.clone()]);
    wait_until("16 shards split 6/5/5", Duration::from_secs(30), || {
        balanced(&[&a.set, &b.set, &c.set])
    })
    .await;
    // What the Leases say is what each replica believes it holds.
    let leases = holders(&client).await;
    assert_eq!(leases.len(), SHARDS as usize, "{leases:?}");
    for (shard, holder) in &leases {
        let set = match holder.as_str() {
            "a" => &a.set,
            "b" => &b.set,
            "c" => &c.set,
            other => panic!("shard {shard} held by {other}"),
        };
        assert!(set.holds(*shard), "shard {shard}: Lease says {holder}");
    }
    assert_eq!(a.set.members(), 3);

    // c stops: it releases its shards, which a and b take without waiting for expiry.
    let released = c.set.held();
    c.cancel.cancel();
    c.task.await.expect("c stops");
    assert!(c.set.held().is_empty());
    let took = wait_until("a and b split 8/8", Duration::from_secs(10), || {
        balanced(&[&a.set, &b.set])
    })
    .await;
    assert!(
        took < LEASE_DURATION,
        "released shards {released:?} taken after {took:?}, not at once"
    );
    let doubles = sampling.finish().await;
    assert!(doubles.is_empty(), "shards held twice at once: {doubles:?}");
    // Its member Lease is gone: the others count two members again.
    wait_until("two members", Duration::from_secs(5), || {
        a.set.members() == 2 && b.set.members() == 2
    })
    .await;
    for r in [a, b] {
        r.cancel.cancel();
        r.task.await.expect("stops");
    }
    assert!(holders(&client).await.is_empty(), "every shard released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_terms_end_at_their_deadlines_before_anyone_takes_its_shards() {
    let (server, _) = server().await;
    let a = replica(&client_as(&server, "a").await, "a");
    let b = replica(&client_as(&server, "b").await, "b");
    wait_until("8/8", Duration::from_secs(30), || {
        balanced(&[&a.set, &b.set])
    })
    .await;
    let sampling = sampler(vec![a.set.clone(), b.set.clone()]);

    // Each of b's shards runs work under its guard; record when each term ends.
    let ended: Arc<Mutex<BTreeMap<u32, Instant>>> = Arc::default();
    let b_held = b.set.held();
    let mut guards = Vec::new();
    for shard in b_held.iter().copied() {
        let set = b.set.clone();
        let ended = ended.clone();
        guards.push(tokio::spawn(async move {
            let r = set.guard(shard, std::future::pending::<()>()).await;
            ended.lock().expect("lock").insert(shard, Instant::now());
            r
        }));
    }
    // b dies without a word: whatever it sent is held unanswered, and its task is gone.
    server.stall_client("b");
    let died = Instant::now();
    b.task.abort();
    let _ = b.task.await;

    // a takes every shard once b's Leases expire by a's clock.
    let took = wait_until("a holds all 16", Duration::from_secs(20), || {
        a.set.held().len() == SHARDS as usize
    })
    .await;
    for g in guards {
        assert!(
            g.await.expect("guard").is_err(),
            "the guarded work was dropped"
        );
    }
    let ended = ended.lock().expect("lock").clone();
    assert_eq!(ended.keys().copied().collect::<BTreeSet<_>>(), b_held);
    for (shard, at) in &ended {
        assert!(
            at.duration_since(died) <= RENEW_DEADLINE + Duration::from_millis(500),
            "shard {shard}: b's term outlived its write deadline"
        );
    }
    assert!(
        took >= RENEW_DEADLINE,
        "a took b's shards after {took:?}, before b's terms could end"
    );
    let doubles = sampling.finish().await;
    assert!(doubles.is_empty(), "shards held twice at once: {doubles:?}");
    a.cancel.cancel();
    a.task.await.expect("a stops");
}

#[test]
fn the_shard_of_a_key_is_stable_across_builds() {
    // Fixed values: a change of hash would move every object of every installation.
    let key = |ns: &str, name: &str| kubewasm::core::resource::ObjectKey {
        namespace: Some(ns.to_string()),
        name: name.to_string(),
    };
    assert_eq!(shards::shard_of(&key("default", "site-a"), 32), 26);
    assert_eq!(shards::shard_of(&key("team-b", "mongodb"), 32), 22);
}
