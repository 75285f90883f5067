//! Leader election on a coordination.k8s.io/v1 Lease against the embedded API server:
//! exactly one of two candidates leads, cancelling the leader hands over, a leader cut
//! off from the API server steps down before its lease expires, and a leader whose lease
//! is taken over steps down (ending its guarded work and reporting the loss). A sampler checks throughout that the two candidates never
//! lead at the same moment.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use kubewasm::replicas::leader::{self, LeaderConfig, LeaderMetrics, Leadership};
use kubewasm_apiserver::{ApiServer, Config};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "kubewasm-test";

/// Short durations: lease 3s, deadline 1.5s, retry 200ms.
fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaderConfig::new(LEASE, "default", identity)
    }
}

struct Candidate {
    leadership: Leadership,
    cancel: CancellationToken,
    task: JoinHandle<()>,
    /// Its terms, as `kubewasm_leader_changes_total` counts them.
    metrics: LeaderMetrics,
}

fn candidate(client: Client, identity: &str) -> Candidate {
    let cancel = CancellationToken::new();
    let metrics = LeaderMetrics::default();
    let (leadership, task) = leader::spawn_when(
        client,
        config(identity),
        std::future::ready(()),
        metrics.clone(),
        cancel.clone(),
    );
    Candidate {
        leadership,
        cancel,
        task,
        metrics,
    }
}

/// A candidate's terms: (acquired, lost, released).
fn terms(m: &LeaderMetrics) -> (u64, u64, u64) {
    (m.count("acquired"), m.count("lost"), m.count("released"))
}

impl Candidate {
    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("election task ends after cancel")
            .expect("election task");
        assert!(!self.leadership.is_leader());
    }
}

/// Samples two leaderships every few milliseconds and remembers whether both ever led
/// at once. A moment counts as double leadership only if one of them led at two
/// samples with the other leading in between (no false alarm from a hand-over between
/// two reads).
struct Sampler {
    both: Arc<AtomicBool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

fn sampler(a: Leadership, b: Leadership) -> Sampler {
    let both = Arc::new(AtomicBool::new(false));
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let both = both.clone();
        let stop = stop.clone();
        async move {
            while !stop.is_cancelled() {
                let a1 = a.is_leader();
                let b1 = b.is_leader();
                let a2 = a.is_leader();
                let b2 = b.is_leader();
                // (a1 && b1 && a2) || (b1 && a2 && b2)
                if b1 && a2 && (a1 || b2) {
                    both.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    Sampler { both, stop, task }
}

impl Sampler {
    async fn finish(self) -> bool {
        self.stop.cancel();
        self.task.await.expect("sampler");
        self.both.load(Ordering::SeqCst)
    }
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

async fn lease(client: &Client) -> Lease {
    Api::<Lease>::namespaced(client.clone(), "default")
        .get(LEASE)
        .await
        .expect("get lease")
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

fn transitions(l: &Lease) -> i32 {
    l.spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0)
}

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(Config::default())
        .await
        .expect("start API server");
    let client = Client::try_from(server.client_config()).expect("client");
    (server, client)
}

#[tokio::test]
async fn exactly_one_of_two_leads_and_cancel_hands_over() {
    let (_server, client) = server().await;
    let a = candidate(client.clone(), "replica-a");
    let b = candidate(client.clone(), "replica-b");
    let sampling = sampler(a.leadership.clone(), b.leadership.clone());

    wait_until("a leader", Duration::from_secs(15), || {
        a.leadership.is_leader() || b.leadership.is_leader()
    })
    .await;
    // Several renewals later the same one still leads, alone.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        a.leadership.is_leader() ^ b.leadership.is_leader(),
        "exactly one candidate leads"
    );
    let (leader, follower, leader_id, follower_id) = if a.leadership.is_leader() {
        (a, b, "replica-a", "replica-b")
    } else {
        (b, a, "replica-b", "replica-a")
    };
    let l = lease(&client).await;
    assert_eq!(holder(&l).as_deref(), Some(leader_id));
    assert_eq!(transitions(&l), 0, "created by the first leader");
    assert_eq!(
        l.spec.as_ref().and_then(|s| s.lease_duration_seconds),
        Some(3)
    );

    // Cancel the leader: it stops leading and releases; the follower takes over.
    let stopped = Instant::now();
    let leader_leadership = leader.leadership.clone();
    let leader_metrics = leader.metrics.clone();
    leader.stop().await;
    assert_eq!(terms(&leader_metrics), (1, 0, 1), "one term, released");
    let leader_lost = leader_leadership.is_lost();
    wait_until("the follower takes over", Duration::from_secs(15), || {
        follower.leadership.is_leader()
    })
    .await;
    eprintln!(
        "hand-over after cancel took {:?} (lease duration 3s)",
        stopped.elapsed()
    );
    let l = lease(&client).await;
    assert_eq!(holder(&l).as_deref(), Some(follower_id));
    assert_eq!(transitions(&l), 1, "one takeover");

    // The new leader releases on cancel too: the lease has no holder afterwards.
    let follower_leadership = follower.leadership.clone();
    let follower_metrics = follower.metrics.clone();
    assert_eq!(terms(&follower_metrics), (1, 0, 0), "the follower's term");
    follower.stop().await;
    assert_eq!(terms(&follower_metrics), (1, 0, 1), "released too");
    let follower_lost = follower_leadership.is_lost();
    let l = lease(&client).await;
    assert_eq!(holder(&l), None, "released on shutdown");
    assert!(
        !leader_lost && !follower_lost,
        "a release on shutdown is not a loss"
    );
    assert!(!sampling.finish().await, "two leaders at the same moment");
}

/// A TCP proxy in front of the API server that can cut one replica off.
struct Proxy {
    addr: SocketAddr,
    cut: CancellationToken,
}

async fn proxy(upstream: SocketAddr) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy addr");
    let cut = CancellationToken::new();
    let stop = cut.clone();
    tokio::spawn(async move {
        loop {
            let (mut inbound, _) = tokio::select! {
                _ = stop.cancelled() => return, // drops the listener: connection refused
                r = listener.accept() => match r { Ok(c) => c, Err(_) => return },
            };
            let stop = stop.clone();
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                    return;
                };
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                }
            });
        }
    });
    Proxy { addr, cut }
}

fn server_addr(server: &ApiServer) -> SocketAddr {
    let url = server.url();
    url.trim_start_matches("http://")
        .parse()
        .expect("server address")
}

#[tokio::test]
async fn leader_cut_off_from_the_api_server_steps_down_before_the_lease_expires() {
    let (server, client) = server().await;
    let proxy = proxy(server_addr(&server)).await;
    let mut via_proxy = server.client_config();
    via_proxy.cluster_url = format!("http://{}", proxy.addr).parse().expect("url");
    let a = candidate(Client::try_from(via_proxy).expect("client"), "replica-a");
    wait_until("replica-a leads", Duration::from_secs(15), || {
        a.leadership.is_leader()
    })
    .await;
    let b = candidate(client.clone(), "replica-b");
    let sampling = sampler(a.leadership.clone(), b.leadership.clone());
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(a.leadership.is_leader() && !b.leadership.is_leader());

    // Work in flight on replica-a, guarded by its term of leadership.
    assert!(
        a.leadership.deadline().is_some(),
        "a leader has a write deadline"
    );
    let in_flight = tokio::spawn({
        let l = a.leadership.clone();
        async move { l.guard(std::future::pending::<()>()).await }
    });

    // Partition replica-a: its renewals fail, replica-b still reaches the server.
    proxy.cut.cancel();
    let stepped_down = wait_until("replica-a steps down", Duration::from_secs(15), || {
        !a.leadership.is_leader()
    })
    .await;
    // The end of its term cancelled the work in flight, and it reports the loss.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), in_flight)
            .await
            .expect("guarded work ends with the term")
            .expect("task"),
        Err(leader::NotLeading)
    );
    tokio::time::timeout(Duration::from_secs(5), a.leadership.lost())
        .await
        .expect("lost() resolves when renewals fail until the deadline");
    assert_eq!(a.leadership.deadline(), None);
    let took_over = wait_until("replica-b takes over", Duration::from_secs(15), || {
        b.leadership.is_leader()
    })
    .await
        + stepped_down;
    eprintln!(
        "partitioned leader stepped down after {stepped_down:?} (renew deadline 1.5s), \
         follower took over after {took_over:?} (lease 3s)"
    );
    // The guarantee: the cut-off leader stopped before the lease could expire for anyone
    // else, so the two never led at once.
    assert!(!sampling.finish().await, "two leaders at the same moment");
    let l = lease(&client).await;
    assert_eq!(holder(&l).as_deref(), Some("replica-b"));
    assert_eq!(transitions(&l), 1);
    // replica-a, still cut off, stays a follower until stopped.
    assert!(!a.leadership.is_leader());
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn leader_steps_down_when_the_api_server_goes_away() {
    let (server, client) = server().await;
    let a = candidate(client, "replica-a");
    let mut changes = a.leadership.subscribe();
    wait_until("replica-a leads", Duration::from_secs(15), || {
        a.leadership.is_leader()
    })
    .await;
    let gone = Instant::now();
    server.shutdown().await;
    tokio::time::timeout(Duration::from_secs(15), changes.wait_for(|l| !*l))
        .await
        .expect("leader steps down after the API server went away")
        .expect("election still running");
    let took = gone.elapsed();
    eprintln!("stepped down {took:?} after the API server went away (renew deadline 1.5s)");
    // The guarantee: a leader that cannot renew stops within the lease duration.
    assert!(
        took < Duration::from_secs(3),
        "stepped down after {took:?}, beyond the 3s lease duration"
    );
    a.stop().await;
}

#[tokio::test]
async fn leader_steps_down_when_another_holder_takes_the_lease() {
    let (_server, client) = server().await;
    let a = candidate(client.clone(), "replica-a");
    wait_until("replica-a leads", Duration::from_secs(15), || {
        a.leadership.is_leader()
    })
    .await;
    let mut changes = a.leadership.subscribe();

    // Someone else writes itself into the lease (e.g. an operator, or a replica with a
    // skewed clock), with a fresh renewTime.
    let api = Api::<Lease>::namespaced(client.clone(), "default");
    let mut stolen = lease(&client).await;
    loop {
        let spec = stolen.spec.as_mut().expect("spec");
        spec.holder_identity = Some("intruder".into());
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_transitions = Some(1);
        match api.replace(LEASE, &PostParams::default(), &stolen).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => stolen = lease(&client).await,
            Err(e) => panic!("replace lease: {e}"),
        }
    }
    tokio::time::timeout(Duration::from_secs(15), changes.wait_for(|l| !*l))
        .await
        .expect("leader steps down when the lease has another holder")
        .expect("election still running");
    assert!(a.leadership.is_lost(), "a takeover is a loss");
    assert_eq!(terms(&a.metrics), (1, 1, 0), "the term lost is counted");
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("intruder"));

    // The intruder never renews: once its lease expires, replica-a takes it back.
    wait_until("replica-a leads again", Duration::from_secs(15), || {
        a.leadership.is_leader()
    })
    .await;
    let l = lease(&client).await;
    assert_eq!(holder(&l).as_deref(), Some("replica-a"));
    assert_eq!(transitions(&l), 2);
    assert_eq!(terms(&a.metrics), (2, 1, 0), "a second term");
    let metrics = a.metrics.clone();
    a.stop().await;
    assert_eq!(terms(&metrics), (2, 1, 1));
}
