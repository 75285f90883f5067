//! The queue's behaviour: order per object, parallel objects, coalescing while in flight,
//! the latest object handed on (never a stale replay), and retries as each failure's class
//! says (backoff, `Retry-After`, parked until the object changes, an overall rate limit).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use kubewasm_runtime::CallError;

use super::*;
use crate::event::testing::{api_error, ev, key, obj, rv};

/// A [`Latest`] that never knows better than the queued event (no cache).
struct NoCache;

impl Latest for NoCache {
    fn latest(&self, _: &ResourceKey, _: &ObjectKey) -> Lookup {
        Lookup::Unknown
    }
}

/// A cache with one object per name; a test sets what it holds.
#[derive(Default)]
struct FakeCache(Mutex<HashMap<String, Arc<CachedObject>>>);

impl Latest for FakeCache {
    fn latest(&self, _: &ResourceKey, object: &ObjectKey) -> Lookup {
        match self.0.lock().unwrap().get(&object.name) {
            Some(o) => Lookup::Present(o.clone()),
            None => Lookup::Absent,
        }
    }
}

/// What a call was handed: watch, event type, resourceVersion, old resourceVersion.
type Handed = (String, EventType, String, Option<String>);

/// Blocks each call until released; records what it was handed.
struct Gate {
    open: tokio::sync::Semaphore,
    seen: Mutex<Vec<Handed>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
}

impl Handler for Gate {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        self.seen.lock().unwrap().push((
            d.watch_id.to_string(),
            d.event_type,
            rv(d).to_string(),
            d.old
                .as_ref()
                .and_then(|o| o.resource_version().map(str::to_string)),
        ));
        let permit = self.open.acquire().await;
        drop(permit);
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

fn gate() -> Arc<Gate> {
    Arc::new(Gate {
        open: tokio::sync::Semaphore::new(0),
        seen: Mutex::new(vec![]),
        running: AtomicUsize::new(0),
        max_running: AtomicUsize::new(0),
    })
}

#[tokio::test(start_paused = true)]
async fn a_stale_replay_never_reaches_the_plugin() {
    let cache = Arc::new(FakeCache::default());
    let q = paused_queue_with(cache.clone());
    let g = gate();
    let _workers = q.spawn(g.clone());
    // rv4 is being handled; meanwhile the object becomes rv6 (watch event), and a
    // replay (reload, new leader) queues the stale snapshot rv5 after it.
    cache.0.lock().unwrap().insert("x".into(), obj("x", "4"));
    q.push(key("x"), ev(EventType::Added, "x", "4"));
    settle().await;
    cache.0.lock().unwrap().insert("x".into(), obj("x", "6"));
    q.push(key("x"), ev(EventType::Modified, "x", "6"));
    q.push(key("x"), ev(EventType::Resync, "x", "5"));
    g.open.add_permits(10);
    settle().await;
    let seen = g.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            ("w".into(), EventType::Added, "4".into(), None),
            // The latest object, with `old` what the plugin handled last.
            (
                "w".into(),
                EventType::Modified,
                "6".into(),
                Some("4".into())
            ),
        ],
        "the plugin saw a stale object"
    );
    assert!(seen.iter().all(|(_, _, v, _)| v != "5"));
}

#[tokio::test(start_paused = true)]
async fn modified_carries_the_last_object_the_plugin_handled() {
    let cache = Arc::new(FakeCache::default());
    let q = paused_queue_with(cache.clone());
    let g = gate();
    g.open.add_permits(100);
    let _workers = q.spawn(g.clone());
    cache.0.lock().unwrap().insert("x".into(), obj("x", "1"));
    q.push(key("x"), ev(EventType::Added, "x", "1"));
    settle().await;
    cache.0.lock().unwrap().insert("x".into(), obj("x", "3"));
    // The watch says old = "old" (ev's default); the plugin last handled rv1.
    q.push(key("x"), ev(EventType::Modified, "x", "3"));
    settle().await;
    let seen = g.seen.lock().unwrap().clone();
    assert_eq!(
        seen[1],
        (
            "w".into(),
            EventType::Modified,
            "3".into(),
            Some("1".into())
        )
    );
    // Gone from the cache: a queued modification is dropped, the deletion is handed on.
    cache.0.lock().unwrap().remove("x");
    q.push(key("x"), ev(EventType::Modified, "x", "4"));
    q.push(key("x"), ev(EventType::Deleted, "x", "4"));
    settle().await;
    let seen = g.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[2].1, EventType::Deleted);
}

#[tokio::test(start_paused = true)]
async fn two_watches_of_one_object_never_run_concurrently() {
    let q = paused_queue(); // two workers
    let g = gate();
    let _workers = q.spawn(g.clone());
    for w in ["a", "b"] {
        q.push(
            key("x"),
            Delivery {
                watch_id: w.into(),
                ..ev(EventType::Added, "x", "1")
            },
        );
    }
    settle().await;
    assert_eq!(
        g.running.load(Ordering::SeqCst),
        1,
        "both watches ran at once"
    );
    g.open.add_permits(10);
    settle().await;
    assert_eq!(g.seen.lock().unwrap().len(), 2);
    assert_eq!(g.max_running.load(Ordering::SeqCst), 1);
}

/// Records calls; fails the first `fail` calls for object "bad".
struct Recorder {
    calls: Mutex<Vec<(String, String)>>,
    fail: AtomicUsize,
    running: AtomicUsize,
    max_running: AtomicUsize,
}

impl Handler for Recorder {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        let name = d.object.key().name;
        self.calls
            .lock()
            .unwrap()
            .push((name.clone(), rv(d).to_string()));
        if name == "bad" && self.fail.load(Ordering::SeqCst) > 0 {
            self.fail.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::Call {
                plugin: "p".into(),
                kind: CallError::Trap("boom".into()),
            });
        }
        Ok(())
    }
}

fn recorder(fail: usize) -> Arc<Recorder> {
    Arc::new(Recorder {
        calls: Mutex::new(vec![]),
        fail: AtomicUsize::new(fail),
        running: AtomicUsize::new(0),
        max_running: AtomicUsize::new(0),
    })
}

async fn wait_for(r: &Recorder, n: usize) {
    for _ in 0..500 {
        if r.calls.lock().unwrap().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("only {:?}", r.calls.lock().unwrap());
}

#[tokio::test]
async fn per_object_order_parallel_objects_and_retry() {
    let q = Queue::new(
        "p",
        QueueConfig {
            concurrency: 3,
            retry_base: Duration::from_millis(10),
            retry_max: Duration::from_millis(50),
            ..QueueConfig::default()
        },
        Arc::new(NoCache),
    );
    let r = recorder(2);
    let mut workers = q.spawn(r.clone());
    for name in ["a", "b", "c"] {
        q.push(key(name), ev(EventType::Added, name, "1"));
    }
    q.push(key("bad"), ev(EventType::Added, "bad", "1"));
    wait_for(&r, 6).await;
    // "bad" failed twice and then succeeded: three calls, all with its only event.
    let calls = r.calls.lock().unwrap().clone();
    let bad: Vec<_> = calls.iter().filter(|(n, _)| n == "bad").collect();
    assert_eq!(bad.len(), 3, "{calls:?}");
    assert!(
        r.max_running.load(Ordering::SeqCst) > 1,
        "objects ran one at a time"
    );
    assert!(r.max_running.load(Ordering::SeqCst) <= 3);
    q.close();
    while workers.join_next().await.is_some() {}
    assert!(!q.push(key("a"), ev(EventType::Added, "a", "9")));
}

#[tokio::test]
async fn a_burst_for_one_object_is_coalesced_while_in_flight() {
    let q = Queue::new("p", QueueConfig::default(), Arc::new(NoCache));
    let r = recorder(0);
    let _workers = q.spawn(r.clone());
    q.push(key("x"), ev(EventType::Added, "x", "1"));
    tokio::time::sleep(Duration::from_millis(5)).await;
    for rv in 2..=20 {
        q.push(key("x"), ev(EventType::Modified, "x", &rv.to_string()));
    }
    wait_for(&r, 2).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let calls = r.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            ("x".to_string(), "1".to_string()),
            ("x".to_string(), "20".to_string())
        ]
    );
}

/// Fails with the given errors, in order, then succeeds; counts calls.
struct Scripted {
    errors: Mutex<VecDeque<Error>>,
    calls: AtomicUsize,
}

impl Handler for Scripted {
    async fn handle(&self, _: &Delivery) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.errors.lock().unwrap().pop_front() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn scripted(errors: Vec<Error>) -> Arc<Scripted> {
    Arc::new(Scripted {
        errors: Mutex::new(errors.into()),
        calls: AtomicUsize::new(0),
    })
}

/// Lets the workers run what is ready, without moving the (paused) clock.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

fn paused_queue() -> Arc<Queue> {
    paused_queue_with(Arc::new(NoCache))
}

fn paused_queue_with(latest: Arc<dyn Latest>) -> Arc<Queue> {
    Queue::new(
        "p",
        QueueConfig {
            concurrency: 2,
            retry_base: Duration::from_millis(10),
            retry_max: Duration::from_millis(50),
            ..QueueConfig::default()
        },
        latest,
    )
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_are_handled_once_then_not_retried_until_the_object_changes() {
    let refused = Error::rejected(
        "p",
        kubewasm_core::admit::Rejection {
            index: 0,
            error: kubewasm_core::grant::GrantError::NotGranted {
                verb: "create",
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: Some("a".into()),
            }
            .into(),
        },
    );
    type MakeError = fn() -> Error;
    let cases: [(&str, MakeError); 3] = [
        ("422", || api_error(422, None)),
        ("403", || api_error(403, None)),
        ("refused", || Error::Call {
            plugin: "p".into(),
            kind: CallError::Plugin {
                message: "bad spec".into(),
                retry: false,
            },
        }),
    ];
    for (what, err) in cases {
        let q = paused_queue();
        let h = scripted(vec![err(), err()]);
        let _workers = q.spawn(h.clone());
        q.push(key("x"), ev(EventType::Added, "x", "1"));
        settle().await;
        assert_eq!(h.calls.load(Ordering::SeqCst), 1, "{what}");
        // Far past every backoff: still not retried.
        tokio::time::advance(Duration::from_secs(3600)).await;
        settle().await;
        assert_eq!(h.calls.load(Ordering::SeqCst), 1, "{what} was retried");
        // The object changes: handled again.
        q.push(key("x"), ev(EventType::Modified, "x", "2"));
        settle().await;
        assert_eq!(h.calls.load(Ordering::SeqCst), 2, "{what}");
        assert_eq!(q.depth(), 0);
    }
    assert_eq!(refused.retry(), Retry::Never);
}

#[tokio::test(start_paused = true)]
async fn a_429_is_retried_after_the_servers_retry_after() {
    let q = paused_queue();
    let h = scripted(vec![api_error(429, Some(2))]);
    let _workers = q.spawn(h.clone());
    q.push(key("x"), ev(EventType::Added, "x", "1"));
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 1);
    // The backoff would have retried after 10 ms; Retry-After says 2 s.
    tokio::time::advance(Duration::from_millis(1900)).await;
    settle().await;
    assert_eq!(
        h.calls.load(Ordering::SeqCst),
        1,
        "retried before Retry-After"
    );
    tokio::time::advance(Duration::from_millis(200)).await;
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 2);
    // Transient server errors without Retry-After back off exponentially.
    let q = paused_queue();
    let h = scripted(vec![api_error(503, None), api_error(503, None)]);
    let _workers = q.spawn(h.clone());
    q.push(key("y"), ev(EventType::Added, "y", "1"));
    settle().await;
    tokio::time::advance(Duration::from_millis(12)).await;
    settle().await;
    assert_eq!(
        h.calls.load(Ordering::SeqCst),
        2,
        "first retry after ~10 ms"
    );
    tokio::time::advance(Duration::from_millis(12)).await;
    settle().await;
    assert_eq!(
        h.calls.load(Ordering::SeqCst),
        2,
        "second retry waits ~20 ms"
    );
    tokio::time::advance(Duration::from_millis(12)).await;
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn an_earlier_retry_timer_does_not_cut_a_later_wait_short() {
    let q = paused_queue();
    let h = scripted(vec![api_error(503, None), api_error(503, None)]);
    let _workers = q.spawn(h.clone());
    q.push(key("x"), ev(EventType::Added, "x", "1"));
    settle().await;
    // Waiting ~10 ms to retry; the object changes, is handled at once and fails again:
    // now it waits ~20 ms, and the first wait's timer must not retry it at ~10 ms.
    q.push(key("x"), ev(EventType::Modified, "x", "2"));
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 2);
    tokio::time::advance(Duration::from_millis(12)).await;
    settle().await;
    assert_eq!(
        h.calls.load(Ordering::SeqCst),
        2,
        "retried by the earlier wait's timer"
    );
    tokio::time::advance(Duration::from_millis(12)).await;
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 3);
    assert_eq!(q.depth(), 0);
}

/// Counts calls and reports (and whether each report was a first).
#[derive(Default)]
struct Reporting {
    calls: AtomicUsize,
    firsts: AtomicUsize,
    repeats: AtomicUsize,
}

impl Handler for Reporting {
    async fn handle(&self, _: &Delivery) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(api_error(422, None))
    }

    async fn report(&self, _: &Delivery, _: &Error, first: bool) {
        if first {
            self.firsts.fetch_add(1, Ordering::SeqCst);
        } else {
            self.repeats.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_permanent_failure_is_reported_once_per_object_and_cause_and_listed() {
    let q = paused_queue();
    let h = Arc::new(Reporting::default());
    let _workers = q.spawn(h.clone());
    q.push(key("x"), ev(EventType::Added, "x", "1"));
    settle().await;
    // The slow resync and an unrelated change hand it over again: same cause, no report.
    q.push(key("x"), ev(EventType::Resync, "x", "1"));
    settle().await;
    q.push(key("x"), ev(EventType::Modified, "x", "2"));
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 3);
    assert_eq!(h.firsts.load(Ordering::SeqCst), 1);
    assert_eq!(h.repeats.load(Ordering::SeqCst), 2);
    let blocked = q.blocked();
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].object, "a/x");
    assert_eq!(blocked[0].reason, api_error(422, None).kind());
    // Another object failing is its own report.
    q.push(key("y"), ev(EventType::Added, "y", "1"));
    settle().await;
    assert_eq!(h.firsts.load(Ordering::SeqCst), 2);
    assert_eq!(q.blocked().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn retries_of_many_objects_share_an_overall_rate_limit() {
    // 30 objects failing transiently; 10 retries may go at once, then 5 per second.
    let q = Queue::new(
        "p",
        QueueConfig {
            concurrency: 30,
            retry_base: Duration::from_millis(10),
            retry_max: Duration::from_millis(10),
            retry_rate: 5.0,
            retry_burst: 10,
        },
        Arc::new(NoCache),
    );
    let h = scripted((0..30).map(|_| api_error(503, None)).collect());
    let _workers = q.spawn(h.clone());
    for i in 0..30 {
        q.push(
            key(&format!("o{i}")),
            ev(EventType::Added, &format!("o{i}"), "1"),
        );
    }
    settle().await;
    assert_eq!(
        h.calls.load(Ordering::SeqCst),
        30,
        "first attempts are not limited"
    );
    // Past every key's own 10 ms backoff: only the burst has been retried.
    tokio::time::advance(Duration::from_millis(20)).await;
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 40);
    // Then 5 per second.
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 45);
    tokio::time::advance(Duration::from_secs(3)).await;
    settle().await;
    assert_eq!(h.calls.load(Ordering::SeqCst), 60);
    assert_eq!(q.depth(), 0);
}

/// A queue keeps a key per object its plugin handled: the keys of one resource share one
/// copy of it, and a handled key keeps no room for events.
#[tokio::test]
async fn keys_share_their_resource_and_idle_keys_keep_no_event_room() {
    let q = Queue::new("p", QueueConfig::default(), Arc::new(NoCache));
    for name in ["x", "y"] {
        assert!(q.push(key(name), ev(EventType::Added, name, "1")));
    }
    {
        let st = q.state.lock().unwrap();
        assert_eq!(st.resources.len(), 1);
        let mut resources = st.keys.keys().map(|k| &k.resource);
        let (a, b) = (resources.next().unwrap(), resources.next().unwrap());
        assert!(Arc::ptr_eq(a, b));
    }
    let job = q.take().ok().flatten().expect("a job");
    let st = q.state.lock().unwrap();
    let ks = &st.keys[&job.key];
    assert_eq!((ks.pending.len(), ks.pending.capacity()), (0, 0));
}
