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
//!
//! Everything the queue knows about one key (its pending events, where it is in its cycle,
//! its failures, what the plugin last handled, why it is parked) is one [`KeyState`],
//! under the queue's one lock. How long a failed key waits is the [`RateLimiter`]'s
//! business; how a new event merges into the pending ones is [`coalesce`]'s.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use kubewasm_core::event::EventType;

use super::coalesce::coalesce;
use super::rate_limit::RateLimiter;
use crate::Error;
use crate::error::Retry;
use crate::watch::cache::{CachedObject, ObjectKey, ResourceKey};

/// One event bound for one plugin.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// The plugin's watch that matched.
    pub(crate) watch_id: Arc<str>,
    /// What happened.
    pub(crate) event_type: EventType,
    /// The object now (last state for deletions).
    pub(crate) object: Arc<CachedObject>,
    /// The object before, for `Modified`.
    pub(crate) old: Option<Arc<CachedObject>>,
    /// When the queue got it, or when its last attempt failed (the queue wait a trace
    /// shows); `None` for a delivery that never went through a queue.
    pub(crate) queued: Option<Instant>,
}

/// Events are ordered and coalesced per object: its resource and namespace/name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct QueueKey {
    /// The object's resource.
    pub(crate) resource: ResourceKey,
    /// Namespace and name.
    pub(crate) object: ObjectKey,
}

/// The latest state of an object, read when its key is taken: `Some(object)` while the
/// cache holds it, `None` once it is gone.
pub(crate) trait Latest: Send + Sync + 'static {
    /// The cached object of `resource` at `object`, if any. `None` from a lookup that
    /// cannot tell (no cache for the resource) must be reported as [`Lookup::Unknown`].
    fn latest(&self, resource: &ResourceKey, object: &ObjectKey) -> Lookup;
}

/// What a [`Latest`] lookup found.
#[derive(Debug, Clone)]
pub(crate) enum Lookup {
    /// The cache holds this object now.
    Present(Arc<CachedObject>),
    /// The cache does not hold it (deleted since).
    Absent,
    /// No cache to ask (resource not watched any more): use the queued object as it is.
    Unknown,
}

// The watch caches answer for the queue here, so the watch never names the queue: the
// dependency points from events to the watch only.
impl Latest for crate::watch::cache::Caches {
    fn latest(&self, resource: &ResourceKey, object: &ObjectKey) -> Lookup {
        match self.for_resource(resource) {
            Some(cache) if cache.is_synced() => match cache.get(object) {
                Some(o) => Lookup::Present(o),
                None => Lookup::Absent,
            },
            // Not synced yet, or not cached any more: the queued event is all there is.
            _ => Lookup::Unknown,
        }
    }
}

/// Handles one delivery; an `Err` is retried as [`Error::retry`] says: with backoff, after
/// the server's `Retry-After`, or not hot at all.
pub(crate) trait Handler: Send + Sync + 'static {
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
pub(crate) struct Blocked {
    /// The object's resource.
    pub(crate) resource: String,
    /// `namespace/name`.
    pub(crate) object: String,
    /// The error's class (`Error::kind`).
    pub(crate) reason: String,
    /// The error.
    pub(crate) message: String,
    /// When it first failed this way.
    pub(crate) since: SystemTime,
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

/// Where a key is in its cycle. The ready list holds a key exactly while it is `Queued`,
/// and only `Processing` and `Retrying` keys have events a worker is not about to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    /// Nothing to hand on.
    #[default]
    Idle,
    /// In the ready list, waiting for a worker.
    Queued,
    /// A worker is handling one of its events. Events that arrive meanwhile wait in
    /// `pending` (client-go's dirty set); the key is queued again when the worker is done.
    Processing,
    /// A failed event waits in `pending` until this time; a new event queues the key at
    /// once (the object changed: no point waiting to retry the old state).
    Retrying(Instant),
}

/// Everything the queue knows about one key. A queue keeps one per object its plugin
/// handled (for `seen`), so it is kept small: no capacity kept for events once none is
/// pending, `seen` a list (a plugin has one watch per kind, or a few), the rare parking
/// cause boxed.
#[derive(Debug, Default)]
struct KeyState {
    /// Events to hand on, coalesced per watch ([`coalesce`]).
    pending: VecDeque<Delivery>,
    phase: Phase,
    /// Transient failures in a row (the backoff grows with them).
    attempts: u32,
    /// The last object this plugin handled per watch (by watch id): `old` for the next
    /// modification. Dropped once it handled the deletion.
    seen: Vec<(Arc<str>, Arc<CachedObject>)>,
    /// Set while parked by a permanent failure, with its cause.
    parked: Option<Box<Blocked>>,
}

impl KeyState {
    /// Nothing to do and nothing to remember: the entry can go.
    fn forgettable(&self) -> bool {
        self.phase == Phase::Idle
            && self.pending.is_empty()
            && self.seen.is_empty()
            && self.parked.is_none()
    }

    /// Remember what the plugin handled, for the next event's `old`.
    fn handled(&mut self, d: &Delivery) {
        let at = self.seen.iter().position(|(w, _)| *w == d.watch_id);
        match (d.event_type, at) {
            (EventType::Deleted, Some(i)) => {
                self.seen.swap_remove(i);
            }
            (EventType::Deleted, None) => {}
            (_, Some(i)) => self.seen[i].1 = d.object.clone(),
            (_, None) => {
                self.seen.push((d.watch_id.clone(), d.object.clone()));
                // A `Vec` grows by four: most keys only ever hold one.
                self.seen.shrink_to_fit();
            }
        }
    }

    /// The last object the plugin handled for the watch `watch_id`.
    fn seen(&self, watch_id: &str) -> Option<Arc<CachedObject>> {
        self.seen
            .iter()
            .find(|(w, _)| **w == *watch_id)
            .map(|(_, o)| o.clone())
    }
}

/// A [`QueueKey`] as the queue keeps it: the resource shared by its keys (a queue keeps a
/// key per object its plugin handled).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    resource: Arc<ResourceKey>,
    object: ObjectKey,
}

#[derive(Default)]
struct State {
    keys: HashMap<Key, KeyState>,
    /// The resources of the keys, one copy each.
    resources: Vec<Arc<ResourceKey>>,
    /// Keys waiting for a worker, in order.
    ready: VecDeque<Key>,
    closed: bool,
}

impl State {
    /// Put an `Idle` or `Retrying` key with pending events in the ready list. True when it
    /// was put there (a worker should wake).
    fn enqueue(&mut self, key: &Key) -> bool {
        let Some(ks) = self.keys.get_mut(key) else {
            return false;
        };
        match ks.phase {
            Phase::Idle | Phase::Retrying(_) if !ks.pending.is_empty() => {
                ks.phase = Phase::Queued;
                self.ready.push_back(key.clone());
                true
            }
            _ => false,
        }
    }

    /// `key` as the queue keeps it.
    fn key(&mut self, key: QueueKey) -> Key {
        let resource = match self.resources.iter().find(|r| ***r == key.resource) {
            Some(r) => r.clone(),
            None => {
                let r = Arc::new(key.resource);
                self.resources.push(r.clone());
                r
            }
        };
        Key {
            resource,
            object: key.object,
        }
    }

    /// Drop the entry of a key that has nothing left to do or remember.
    fn forget_if_done(&mut self, key: &Key) {
        if self.keys.get(key).is_some_and(KeyState::forgettable) {
            self.keys.remove(key);
        }
    }
}

/// Room for ready keys kept once none is ready.
const READY_KEPT: usize = 64;

/// One event taken by a worker.
struct Job {
    key: Key,
    delivery: Delivery,
    /// The last object the plugin handled for the key and the event's watch.
    seen: Option<Arc<CachedObject>>,
}

/// How handing on a taken event ended.
enum Outcome {
    /// Nothing to hand on: the object is gone and its deletion comes next.
    Skipped,
    /// The plugin handled this (refreshed) delivery.
    Handled(Delivery),
    /// The plugin or its intents failed; retried as this says.
    Failed(Retry),
}

/// A plugin's event queue.
pub(crate) struct Queue {
    name: String,
    concurrency: usize,
    state: Mutex<State>,
    notify: Notify,
    latest: Arc<dyn Latest>,
    limiter: RateLimiter,
}

impl Queue {
    /// A new queue for the plugin `name`, reading the latest objects through `latest`.
    pub(crate) fn new(
        name: impl Into<String>,
        config: QueueConfig,
        latest: Arc<dyn Latest>,
    ) -> Arc<Self> {
        Arc::new(Queue {
            name: name.into(),
            concurrency: config.concurrency.max(1),
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            latest,
            limiter: RateLimiter::new(&config),
        })
    }

    /// Keys parked by a permanent failure (not retried until they change), oldest first.
    pub(crate) fn blocked(&self) -> Vec<Blocked> {
        let mut b: Vec<Blocked> = kubewasm_core::sync::lock(&self.state)
            .keys
            .values()
            .filter_map(|k| k.parked.as_deref().cloned())
            .collect();
        b.sort_by_key(|b| b.since);
        b
    }

    /// Add an event. Returns false when the queue is closed.
    pub(crate) fn push(&self, key: QueueKey, mut delivery: Delivery) -> bool {
        delivery.queued = Some(Instant::now());
        let mut st = kubewasm_core::sync::lock(&self.state);
        if st.closed {
            return false;
        }
        let key = st.key(key);
        coalesce(
            &mut st.keys.entry(key.clone()).or_default().pending,
            delivery,
        );
        // A fresh event does not wait for a pending retry; a key being handled is queued
        // again when its worker is done.
        if st.enqueue(&key) {
            drop(st);
            self.notify.notify_one();
        }
        true
    }

    /// Events waiting (not counting those being handled).
    pub(crate) fn depth(&self) -> usize {
        kubewasm_core::sync::lock(&self.state)
            .keys
            .values()
            .map(|k| k.pending.len())
            .sum()
    }

    /// Stop handing out events; workers finish what they are doing and exit.
    pub(crate) fn close(&self) {
        {
            let mut st = kubewasm_core::sync::lock(&self.state);
            st.closed = true;
        }
        self.notify.notify_waiters();
    }

    /// Start the workers. The returned set completes after [`Queue::close`].
    pub(crate) fn spawn<H: Handler>(self: &Arc<Self>, handler: Arc<H>) -> JoinSet<()> {
        let mut set = JoinSet::new();
        for _ in 0..self.concurrency {
            let q = self.clone();
            let h = handler.clone();
            set.spawn(async move { q.work(h).await });
        }
        set
    }

    async fn work<H: Handler>(self: Arc<Self>, handler: Arc<H>) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let job = match self.take() {
                Err(Closed) => return,
                Ok(Some(job)) => job,
                Ok(None) => {
                    notified.await;
                    continue;
                }
            };
            let Job {
                key,
                delivery,
                seen,
            } = job;
            let Some(current) = self.refresh(&key, delivery.clone(), seen) else {
                self.finish(key, delivery, Outcome::Skipped);
                continue;
            };
            match handler.handle(&current).await {
                Ok(()) => self.finish(key, delivery, Outcome::Handled(current)),
                Err(e) => {
                    let first = self.park(&key, &e);
                    handler.report(&current, &e, first).await;
                    self.finish(key, delivery, Outcome::Failed(e.retry()));
                }
            }
        }
    }

    /// The next ready key's first event; the key is `Processing` until [`Queue::finish`].
    fn take(&self) -> Result<Option<Job>, Closed> {
        let mut st = kubewasm_core::sync::lock(&self.state);
        if st.closed {
            return Err(Closed);
        }
        while let Some(key) = st.ready.pop_front() {
            if st.ready.is_empty() {
                // An initial sync queues every object at once; its room is not kept.
                st.ready.shrink_to(READY_KEPT);
            }
            let Some(ks) = st.keys.get_mut(&key) else {
                continue;
            };
            let Some(delivery) = ks.pending.pop_front() else {
                // Not expected (a queued key has events); nothing to do for it.
                ks.phase = Phase::Idle;
                st.forget_if_done(&key);
                continue;
            };
            ks.phase = Phase::Processing;
            if ks.pending.is_empty() {
                // The key stays while it remembers `seen`: not its events' room too.
                ks.pending = VecDeque::new();
            }
            let seen = ks.seen(&delivery.watch_id);
            return Ok(Some(Job {
                key,
                delivery,
                seen,
            }));
        }
        Ok(None)
    }

    /// Bring a delivery up to date when its key is taken: the latest cached object, the
    /// last object this plugin handled as `old`. None: nothing to hand on (the object is
    /// gone and its deletion is what comes next).
    fn refresh(
        &self,
        key: &Key,
        mut d: Delivery,
        seen: Option<Arc<CachedObject>>,
    ) -> Option<Delivery> {
        match (d.event_type, self.latest.latest(&key.resource, &key.object)) {
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

    /// Park the key if `e` is permanent. False when it repeats the permanent failure the
    /// key is already parked with (not to be reported loudly again).
    fn park(&self, key: &Key, e: &Error) -> bool {
        if e.retry() != Retry::Never {
            return true;
        }
        let mut st = kubewasm_core::sync::lock(&self.state);
        let Some(ks) = st.keys.get_mut(key) else {
            return true;
        };
        let message = e.to_string();
        if ks.parked.as_ref().is_some_and(|b| b.message == message) {
            return false;
        }
        ks.parked = Some(Box::new(Blocked {
            resource: key.resource.to_string(),
            object: key.object.to_string(),
            reason: e.kind().to_string(),
            message,
            since: SystemTime::now(),
        }));
        true
    }

    /// The worker is done with `delivery` (the event as it was queued): record the
    /// outcome, and queue the key again if it has more events, or schedule its retry.
    fn finish(self: &Arc<Self>, key: Key, mut delivery: Delivery, outcome: Outcome) {
        let mut st = kubewasm_core::sync::lock(&self.state);
        let Some(ks) = st.keys.get_mut(&key) else {
            return;
        };
        ks.phase = Phase::Idle;
        match outcome {
            Outcome::Skipped => ks.attempts = 0,
            Outcome::Handled(current) => {
                ks.attempts = 0;
                ks.parked = None;
                ks.handled(&current);
            }
            Outcome::Failed(Retry::Never) => {
                // Permanent: the same event would fail the same way. The key is handled
                // again when a new event arrives (the object, its plugin or settings
                // changed, or the slow resync).
                ks.attempts = 0;
                tracing::info!(plugin = %self.name, object = %key.object,
                    "permanent failure: not retried until the object, the plugin or its settings change");
            }
            Outcome::Failed(how) => {
                ks.attempts += 1;
                // Put the failed event back in front; newer events merge into it.
                let newer = std::mem::take(&mut ks.pending);
                delivery.queued = Some(Instant::now());
                ks.pending.push_back(delivery);
                for d in newer {
                    coalesce(&mut ks.pending, d);
                }
                let delay = self.limiter.when(ks.attempts, how);
                tracing::debug!(plugin = %self.name, object = %key.object, attempts = ks.attempts, delay_ms = crate::millis(delay), "retry scheduled");
                let at = Instant::now() + delay;
                ks.phase = Phase::Retrying(at);
                drop(st);
                self.retry_at(key, at);
                return;
            }
        }
        if st.enqueue(&key) {
            drop(st);
            self.notify.notify_one();
        } else {
            st.forget_if_done(&key);
        }
    }

    /// The delayed requeue: queue `key` again at `at`, unless its wait has ended since (a
    /// new event queued it, or it failed again and waits for a later time).
    fn retry_at(self: &Arc<Self>, key: Key, at: Instant) {
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut st = kubewasm_core::sync::lock(&q.state);
            let waiting = st
                .keys
                .get(&key)
                .is_some_and(|ks| ks.phase == Phase::Retrying(at));
            if waiting && st.enqueue(&key) {
                drop(st);
                q.notify.notify_one();
            }
        });
    }
}

/// The queue was closed: the worker exits.
struct Closed;

#[cfg(test)]
mod tests;
