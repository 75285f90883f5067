//! Dispatch: one queue per plugin. Events for the same object are handled in order, one
//! at a time; different objects run in parallel up to a bound; a burst for one object is
//! coalesced to its latest state; failures are retried with exponential backoff.
//!
//! The queue knows nothing about wasm or Kubernetes calls: it hands each event to a
//! [`Handler`], which the host implements.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinSet;

use kubewasm_core::event::EventType;

use crate::Error;
use crate::error::Retry;
use crate::watch::cache::{CachedObject, ObjectKey};

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

/// Events are ordered and coalesced per watch and object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueKey {
    /// Watch id.
    pub watch_id: Arc<str>,
    /// Object.
    pub object: ObjectKey,
}

/// Handles one delivery; an `Err` is retried as [`Error::retry`] says: with backoff, after
/// the server's `Retry-After`, or not hot at all.
pub trait Handler: Send + Sync + 'static {
    /// Handle one event.
    fn handle(&self, delivery: &Delivery) -> impl Future<Output = Result<(), Error>> + Send;
}

/// Queue settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Objects handled in parallel.
    pub concurrency: usize,
    /// First retry delay.
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            concurrency: 4,
            retry_base: Duration::from_millis(200),
            retry_max: Duration::from_secs(60),
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
}

/// Merge `new` into the pending events of one object, keeping what the plugin must see:
/// the latest state, the oldest `old` of a run of modifications, and deletions.
pub fn coalesce(events: &mut VecDeque<Delivery>, new: Delivery) {
    use EventType::*;
    let Some(last) = events.back_mut() else {
        events.push_back(new);
        return;
    };
    match (last.event_type, new.event_type) {
        // The object was deleted and came back: the plugin must see both.
        (Deleted, Added | Modified | Resync) => events.push_back(new),
        // Anything followed by a deletion: the deletion is what matters now.
        (_, Deleted) => *last = new,
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
    /// A new queue for the plugin `name`.
    pub fn new(name: impl Into<String>, config: QueueConfig) -> Arc<Self> {
        Arc::new(Queue {
            name: name.into(),
            config,
            state: Mutex::new(State::default()),
            notify: Notify::new(),
        })
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
            let result = handler.handle(&delivery).await;
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
                };
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
            watch_id: "w".into(),
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
            },
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
        let q = Queue::new("p", QueueConfig::default());
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
        }
    }

    /// Lets the workers run what is ready, without moving the (paused) clock.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    fn paused_queue() -> Arc<Queue> {
        Queue::new(
            "p",
            QueueConfig {
                concurrency: 1,
                retry_base: Duration::from_millis(10),
                retry_max: Duration::from_millis(50),
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_handled_once_then_not_retried_until_the_object_changes() {
        let refused = Error::Refused {
            plugin: "p".into(),
            index: 0,
            reason: kubewasm_core::grant::GrantError::NotGranted {
                verb: "create",
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: Some("a".into()),
            },
        };
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
        };
        let d1 = backoff(&c, 1);
        let d3 = backoff(&c, 3);
        let d30 = backoff(&c, 30);
        assert!(d1 >= Duration::from_millis(90) && d1 <= Duration::from_millis(110));
        assert!(d3 >= Duration::from_millis(360) && d3 <= Duration::from_millis(440));
        assert!(d30 <= Duration::from_millis(1100));
    }
}
