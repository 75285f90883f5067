//! Dispatch: one queue per plugin, keyed by object (resource, namespace, name) as
//! client-go's workqueue is. One key is in flight at a time per plugin, whichever of the
//! plugin's watches selected the object; different objects run in parallel up to a bound;
//! a burst for one object is coalesced; failures are retried as their class says.
//!
//! When a key is taken, the object handed on is the latest the cache holds (a replayed or
//! queued older copy is never handed to a plugin), and `old` is the last object this
//! plugin handled for the key. The queue knows nothing about wasm or Kubernetes calls: it
//! hands each event to a [`Handler`], which the host implements, and reads the cache
//! through a [`Latest`] lookup.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinSet;

use kubewasm_core::event::EventType;

use crate::Error;
use crate::error::Retry;
use crate::watch::cache::{CachedObject, ObjectKey, ResourceKey};

/// One event bound for one plugin.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The plugin's watch that matched.
    pub watch_id: Arc<str>,
    /// What happened.
    pub event_type: EventType,
    /// The object now (last state for deletions).
    pub object: Arc<CachedObject>,
    /// The object before, for `Modified`.
    pub old: Option<Arc<CachedObject>>,
}

/// Events are ordered and coalesced per object: its resource and namespace/name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueKey {
    /// The object's resource.
    pub resource: ResourceKey,
    /// Namespace and name.
    pub object: ObjectKey,
}

/// The latest state of an object, read when its key is taken: `Some(object)` while the
/// cache holds it, `None` once it is gone.
pub trait Latest: Send + Sync + 'static {
    /// The cached object for `key`, if any. `None` from a lookup that cannot tell (no
    /// cache for the resource) must be reported as [`Lookup::Unknown`].
    fn latest(&self, key: &QueueKey) -> Lookup;
}

/// What a [`Latest`] lookup found.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// The cache holds this object now.
    Present(Arc<CachedObject>),
    /// The cache does not hold it (deleted since).
    Absent,
    /// No cache to ask (resource not watched any more): use the queued object as it is.
    Unknown,
}

/// Handles one delivery; an `Err` is retried as [`Error::retry`] says: with backoff, after
/// the server's `Retry-After`, or not hot at all.
pub trait Handler: Send + Sync + 'static {
    /// Handle one event.
    fn handle(&self, delivery: &Delivery) -> impl Future<Output = Result<(), Error>> + Send;

    /// Report a failed delivery (log, Warning Event). `first` is false when the key is
    /// already parked by a permanent failure with the same cause: a repeat, which should
    /// not be reported loudly again.
    fn report(
        &self,
        delivery: &Delivery,
        error: &Error,
        first: bool,
    ) -> impl Future<Output = ()> + Send {
        let _ = (delivery, error, first);
        async {}
    }
}

/// A key parked by a permanent failure: not retried until a new event arrives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The object's resource.
    pub resource: String,
    /// `namespace/name`.
    pub object: String,
    /// The error's class (`Error::kind`).
    pub reason: String,
    /// The error.
    pub message: String,
    /// When it first failed this way.
    pub since: std::time::SystemTime,
}

/// Queue settings.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// Objects handled in parallel.
    pub concurrency: usize,
    /// First retry delay.
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Retries per second across all of the plugin's keys (client-go's overall bucket
    /// limiter: a retry waits for the later of its key's backoff and a token).
    pub retry_rate: f64,
    /// Retries allowed at once before `retry_rate` applies.
    pub retry_burst: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            concurrency: 4,
            retry_base: Duration::from_millis(200),
            retry_max: Duration::from_secs(60),
            retry_rate: 10.0,
            retry_burst: 100,
        }
    }
}

/// A token bucket shared by every key of a queue, so many failing objects do not retry
/// faster than `rate` per second overall (the reservation semantics of Go's
/// `rate.Limiter`: a retry takes a token now and waits until the bucket had it).
struct RetryBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, tokio::time::Instant)>,
}

impl RetryBucket {
    fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RetryBucket {
            rate: if rate > 0.0 { rate } else { f64::INFINITY },
            burst,
            state: Mutex::new((burst, tokio::time::Instant::now())),
        }
    }

    /// Take a token; how long to wait until it is there.
    fn reserve(&self) -> Duration {
        let Ok(mut st) = self.state.lock() else {
            return Duration::ZERO;
        };
        let now = tokio::time::Instant::now();
        let (tokens, last) = *st;
        let refilled =
            (tokens + now.duration_since(last).as_secs_f64() * self.rate).min(self.burst);
        let left = refilled - 1.0;
        *st = (left, now);
        if left >= 0.0 || !self.rate.is_finite() {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.rate)
        }
    }
}

#[derive(Default)]
struct Entry {
    events: VecDeque<Delivery>,
    attempts: u32,
    in_flight: bool,
    queued: bool,
    /// A retry timer is pending; the key is not queued until it fires (or a new event arrives).
    backing_off: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<QueueKey, Entry>,
    ready: VecDeque<QueueKey>,
    closed: bool,
}

/// A plugin's event queue.
pub struct Queue {
    name: String,
    config: QueueConfig,
    state: Mutex<State>,
    notify: Notify,
    latest: Arc<dyn Latest>,
    /// The last object this plugin handled per key and watch (what `old` is, for the next
    /// modification); dropped once it handled the deletion.
    seen: Mutex<HashMap<SeenKey, Arc<CachedObject>>>,
    /// Keys parked by a permanent failure, with its cause.
    blocked: Mutex<HashMap<QueueKey, Blocked>>,
    retries: RetryBucket,
}

/// A key and the watch that saw it.
type SeenKey = (QueueKey, Arc<str>);

/// A [`Latest`] that never knows better than the queued event (no cache).
pub struct NoCache;

impl Latest for NoCache {
    fn latest(&self, _: &QueueKey) -> Lookup {
        Lookup::Unknown
    }
}

/// Merge `new` into the pending events of one object, keeping what each watch must see:
/// its first event's type (and `old`), its latest state, and a deletion followed by a
/// re-creation. Delete/re-create churn keeps at most a deletion and an addition per watch.
pub fn coalesce(events: &mut VecDeque<Delivery>, new: Delivery) {
    use EventType::*;
    let Some(pos) = events.iter().rposition(|d| d.watch_id == new.watch_id) else {
        events.push_back(new);
        return;
    };
    let last = &mut events[pos];
    match (last.event_type, new.event_type) {
        // The object was deleted and came back: the plugin must see both.
        (Deleted, Added | Modified | Resync) => events.insert(pos + 1, new),
        // Deleted again: the earlier deletion (of what the plugin last saw) stands.
        (Deleted, Deleted) => {}
        // Anything followed by a deletion: the deletion is what matters now; a deletion
        // already pending before it makes this one redundant.
        (_, Deleted) => {
            let earlier = events
                .iter()
                .take(pos)
                .rposition(|d| d.watch_id == new.watch_id);
            if earlier.is_some_and(|i| events[i].event_type == Deleted) {
                events.remove(pos);
            } else {
                events[pos] = new;
            }
        }
        // A resync or modification after a resync: take the newer event whole.
        (Resync, Modified | Added) => *last = new,
        // Otherwise keep the first event's type (and old object), take the newest state.
        (Added | Modified | Resync, _) => last.object = new.object,
    }
}

fn backoff(config: &QueueConfig, attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(20);
    let d = config
        .retry_base
        .saturating_mul(1u32 << exp)
        .min(config.retry_max);
    // ±10% jitter so many failing objects do not retry in lockstep.
    let jitter = rand::random_range(0.9..1.1);
    d.mul_f64(jitter)
}

impl Queue {
    /// A new queue for the plugin `name`, reading the latest objects through `latest`.
    pub fn new(name: impl Into<String>, config: QueueConfig, latest: Arc<dyn Latest>) -> Arc<Self> {
        Arc::new(Queue {
            name: name.into(),
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            latest,
            seen: Mutex::new(HashMap::new()),
            blocked: Mutex::new(HashMap::new()),
            retries: RetryBucket::new(config.retry_rate, config.retry_burst),
            config,
        })
    }

    /// Keys parked by a permanent failure (not retried until they change), oldest first.
    pub fn blocked(&self) -> Vec<Blocked> {
        let mut b: Vec<Blocked> = self
            .blocked
            .lock()
            .map(|b| b.values().cloned().collect())
            .unwrap_or_default();
        b.sort_by_key(|b| b.since);
        b
    }

    /// Note a failure; false when it repeats the permanent failure the key is parked with.
    fn note_failure(&self, key: &QueueKey, e: &Error) -> bool {
        let Ok(mut blocked) = self.blocked.lock() else {
            return true;
        };
        if e.retry() != Retry::Never {
            return true;
        }
        let message = e.to_string();
        if blocked.get(key).is_some_and(|b| b.message == message) {
            return false;
        }
        blocked.insert(
            key.clone(),
            Blocked {
                resource: key.resource.to_string(),
                object: key.object.to_string(),
                reason: e.kind().to_string(),
                message,
                since: std::time::SystemTime::now(),
            },
        );
        true
    }

    /// Bring a delivery up to date when its key is taken: the latest cached object, the
    /// last object this plugin handled as `old`. None: nothing to hand on (the object is
    /// gone and its deletion is what comes next).
    fn refresh(&self, key: &QueueKey, mut d: Delivery) -> Option<Delivery> {
        let seen = self
            .seen
            .lock()
            .ok()
            .and_then(|s| s.get(&(key.clone(), d.watch_id.clone())).cloned());
        match (d.event_type, self.latest.latest(key)) {
            // A deletion hands on its tombstone (the last known state) as it is.
            (EventType::Deleted, _) => {}
            (_, Lookup::Absent) => return None,
            (_, Lookup::Present(current)) => d.object = current,
            (_, Lookup::Unknown) => {}
        }
        if d.event_type == EventType::Modified {
            d.old = seen.or(d.old);
        }
        Some(d)
    }

    /// Remember what the plugin handled for the next event's `old`.
    fn handled(&self, key: &QueueKey, d: &Delivery) {
        if let Ok(mut seen) = self.seen.lock() {
            let k = (key.clone(), d.watch_id.clone());
            if d.event_type == EventType::Deleted {
                seen.remove(&k);
            } else {
                seen.insert(k, d.object.clone());
            }
        }
    }

    /// Add an event. Returns false when the queue is closed.
    pub fn push(&self, key: QueueKey, delivery: Delivery) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        if st.closed {
            return false;
        }
        let entry = st.entries.entry(key.clone()).or_default();
        coalesce(&mut entry.events, delivery);
        // A fresh event does not wait for a pending retry timer.
        entry.backing_off = false;
        if !entry.in_flight && !entry.queued {
            entry.queued = true;
            st.ready.push_back(key);
            drop(st);
            self.notify.notify_one();
        }
        true
    }

    /// Events waiting (not counting those being handled).
    pub fn depth(&self) -> usize {
        self.state
            .lock()
            .map(|s| s.entries.values().map(|e| e.events.len()).sum())
            .unwrap_or(0)
    }

    /// Stop handing out events; workers finish what they are doing and exit.
    pub fn close(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.closed = true;
        }
        self.notify.notify_waiters();
    }

    /// Start the workers. The returned set completes after [`Queue::close`].
    pub fn spawn<H: Handler>(self: &Arc<Self>, handler: Arc<H>) -> JoinSet<()> {
        let mut set = JoinSet::new();
        for _ in 0..self.config.concurrency.max(1) {
            let q = self.clone();
            let h = handler.clone();
            set.spawn(async move { q.work(h).await });
        }
        set
    }

    fn take(&self) -> Result<Option<(QueueKey, Delivery)>, ()> {
        let Ok(mut st) = self.state.lock() else {
            return Err(());
        };
        if st.closed {
            return Err(());
        }
        while let Some(key) = st.ready.pop_front() {
            let Some(entry) = st.entries.get_mut(&key) else {
                continue;
            };
            entry.queued = false;
            if let Some(d) = entry.events.pop_front() {
                entry.in_flight = true;
                return Ok(Some((key, d)));
            }
        }
        Ok(None)
    }

    async fn work<H: Handler>(self: Arc<Self>, handler: Arc<H>) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (key, delivery) = match self.take() {
                Err(()) => return,
                Ok(Some(job)) => job,
                Ok(None) => {
                    notified.await;
                    continue;
                }
            };
            let Some(current) = self.refresh(&key, delivery.clone()) else {
                self.finish(key, delivery, Ok(()));
                continue;
            };
            let result = handler.handle(&current).await;
            match &result {
                Ok(()) => {
                    self.handled(&key, &current);
                    if let Ok(mut b) = self.blocked.lock() {
                        b.remove(&key);
                    }
                }
                Err(e) => {
                    let first = self.note_failure(&key, e);
                    handler.report(&current, e, first).await;
                }
            }
            self.finish(key, delivery, result);
        }
    }

    fn finish(self: &Arc<Self>, key: QueueKey, delivery: Delivery, result: Result<(), Error>) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let Some(entry) = st.entries.get_mut(&key) else {
            return;
        };
        entry.in_flight = false;
        let retry = match &result {
            Ok(()) => None,
            Err(e) => Some(e.retry()),
        };
        match retry {
            None => entry.attempts = 0,
            Some(Retry::Never) => {
                // Permanent: the same event would fail the same way. The key is handled
                // again when a new event arrives (the object, its plugin or settings
                // changed, or the slow resync).
                entry.attempts = 0;
                tracing::info!(plugin = %self.name, object = %key.object,
                    "permanent failure: not retried until the object, the plugin or its settings change");
            }
            Some(how) => {
                entry.attempts += 1;
                // Put the failed event back in front; newer events merge into it.
                let newer = std::mem::take(&mut entry.events);
                entry.events.push_back(delivery);
                for d in newer {
                    coalesce(&mut entry.events, d);
                }
                let delay = match how {
                    Retry::After(after) => after,
                    _ => backoff(&self.config, entry.attempts),
                }
                .max(self.retries.reserve());
                tracing::debug!(plugin = %self.name, object = %key.object, attempts = entry.attempts, ?delay, "retry scheduled");
                entry.backing_off = true;
                let q = self.clone();
                let k = key.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    q.retry_due(k);
                });
                return;
            }
        }
        if entry.events.is_empty() {
            st.entries.remove(&key);
        } else if !entry.queued && !entry.backing_off {
            entry.queued = true;
            st.ready.push_back(key);
            drop(st);
            self.notify.notify_one();
        }
    }

    fn retry_due(&self, key: QueueKey) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let Some(entry) = st.entries.get_mut(&key) else {
            return;
        };
        if !entry.backing_off {
            return;
        }
        entry.backing_off = false;
        if !entry.in_flight && !entry.queued && !entry.events.is_empty() {
            entry.queued = true;
            st.ready.push_back(key);
            drop(st);
            self.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::CallError;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn obj(name: &str, rv: &str) -> Arc<CachedObject> {
        CachedObject::new(
            serde_json::from_value(json!({"apiVersion":"v1","kind":"ConfigMap",
                "metadata":{"name":name,"namespace":"a","resourceVersion":rv}}))
            .unwrap(),
        )
    }

    fn ev(t: EventType, name: &str, rv: &str) -> Delivery {
        Delivery {
            watch_id: "w".into(),
            event_type: t,
            object: obj(name, rv),
            old: (t == EventType::Modified).then(|| obj(name, "old")),
        }
    }

    fn key(name: &str) -> QueueKey {
        QueueKey {
            resource: ResourceKey {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
            },
            object: ObjectKey {
                namespace: Some("a".into()),
                name: name.into(),
            },
        }
    }

    fn rv(d: &Delivery) -> &str {
        d.object.resource_version().unwrap()
    }

    #[test]
    fn coalescing_keeps_latest_state_and_first_type() {
        use EventType::*;
        let mut q = VecDeque::new();
        coalesce(&mut q, ev(Added, "x", "1"));
        coalesce(&mut q, ev(Modified, "x", "2"));
        coalesce(&mut q, ev(Modified, "x", "3"));
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].event_type, rv(&q[0])), (Added, "3"));

        let mut q = VecDeque::new();
        coalesce(&mut q, ev(Modified, "x", "2"));
        coalesce(&mut q, ev(Modified, "x", "3"));
        assert_eq!((q[0].event_type, rv(&q[0])), (Modified, "3"));
        assert_eq!(q[0].old.as_ref().unwrap().resource_version(), Some("old"));

        coalesce(&mut q, ev(Deleted, "x", "4"));
        coalesce(&mut q, ev(Added, "x", "5"));
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].event_type, q[1].event_type), (Deleted, Added));

        let mut q = VecDeque::new();
        coalesce(&mut q, ev(Resync, "x", "1"));
        coalesce(&mut q, ev(Modified, "x", "2"));
        assert_eq!((q[0].event_type, rv(&q[0])), (Modified, "2"));
    }

    #[test]
    fn delete_recreate_churn_keeps_at_most_a_deletion_and_an_addition() {
        use EventType::*;
        let mut q = VecDeque::new();
        for (i, t) in [
            Deleted, Added, Deleted, Added, Deleted, Added, Deleted, Added,
        ]
        .into_iter()
        .enumerate()
        {
            coalesce(&mut q, ev(t, "x", &i.to_string()));
            assert!(
                q.len() <= 2,
                "{:?}",
                q.iter().map(|d| d.event_type).collect::<Vec<_>>()
            );
        }
        assert_eq!((q[0].event_type, q[1].event_type), (Deleted, Added));
        // The deletion kept is the first (of what the plugin last saw); the addition is the newest.
        assert_eq!((rv(&q[0]), rv(&q[1])), ("0", "7"));
    }

    #[test]
    fn watches_of_one_object_coalesce_separately() {
        use EventType::*;
        let mut q = VecDeque::new();
        let on = |w: &str, t, v: &str| Delivery {
            watch_id: w.into(),
            ..ev(t, "x", v)
        };
        coalesce(&mut q, on("a", Added, "1"));
        coalesce(&mut q, on("b", Added, "1"));
        coalesce(&mut q, on("a", Modified, "2"));
        coalesce(&mut q, on("b", Modified, "3"));
        let seen: Vec<(&str, EventType, &str)> = q
            .iter()
            .map(|d| (&*d.watch_id, d.event_type, rv(d)))
            .collect();
        assert_eq!(seen, [("a", Added, "2"), ("b", Added, "3")]);
    }

    /// A cache with one object per name; a test sets what it holds.
    #[derive(Default)]
    struct FakeCache(Mutex<HashMap<String, Arc<CachedObject>>>);

    impl Latest for FakeCache {
        fn latest(&self, key: &QueueKey) -> Lookup {
            match self.0.lock().unwrap().get(&key.object.name) {
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

    fn api_error(status: u16, retry_after: Option<u64>) -> Error {
        Error::Api {
            verb: "apply",
            target: "MongoDB a/db".into(),
            status,
            reason: "Reason".into(),
            message: "message".into(),
            retry_after: retry_after.map(Duration::from_secs),
            field_conflict: false,
            uid_rejected: false,
        }
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

    #[test]
    fn errors_are_classified_by_type() {
        assert_eq!(
            api_error(429, Some(2)).retry(),
            Retry::After(Duration::from_secs(2))
        );
        assert_eq!(
            api_error(503, Some(5)).retry(),
            Retry::After(Duration::from_secs(5))
        );
        assert_eq!(api_error(500, None).retry(), Retry::Backoff);
        assert_eq!(api_error(409, None).retry(), Retry::Backoff);
        for status in [400, 403, 404, 415, 422] {
            assert_eq!(api_error(status, None).retry(), Retry::Never, "{status}");
        }
        let conflict = Error::Api {
            verb: "apply",
            target: "ConfigMap a/shared".into(),
            status: 409,
            reason: "Conflict".into(),
            message: "conflict with kubewasm-other".into(),
            retry_after: None,
            field_conflict: true,
            uid_rejected: false,
        };
        assert_eq!(conflict.retry(), Retry::Never);
        let trap = Error::Call {
            plugin: "p".into(),
            kind: CallError::Trap("boom".into()),
        };
        assert_eq!(trap.retry(), Retry::Backoff);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let c = QueueConfig {
            concurrency: 1,
            retry_base: Duration::from_millis(100),
            retry_max: Duration::from_secs(1),
            ..QueueConfig::default()
        };
        let d1 = backoff(&c, 1);
        let d3 = backoff(&c, 3);
        let d30 = backoff(&c, 30);
        assert!(d1 >= Duration::from_millis(90) && d1 <= Duration::from_millis(110));
        assert!(d3 >= Duration::from_millis(360) && d3 <= Duration::from_millis(440));
        assert!(d30 <= Duration::from_millis(1100));
    }
}
