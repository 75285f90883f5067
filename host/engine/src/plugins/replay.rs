//! Replays: cached objects handed to plugins again, outside the watch stream.
//!
//! - A new plugin gets every selected cached object as `added`; a new version of a plugin
//!   gets them as `resync`, so its output converges everywhere. Objects of kinds not
//!   cached yet arrive through their watcher's first list.
//! - A route whose target did not resolve yet is replayed when it does (another spelling
//!   of the same resource may already be cached).
//! - A follower remembers deletions (tombstones, kept at least the lease duration); a
//!   replica that becomes leader delivers `deleted` for those and `resync` for the rest.
//!   With shards, a replica remembers the deletions of keys in shards it does not hold,
//!   and on gaining shards delivers `deleted` for theirs and `resync` for their objects
//!   (those of caches kept whole from here; the watchers relist the others).
//!
//! Replays only enqueue keys; the queue hands on the latest cached object when a key is
//! taken.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubewasm_core::event::EventType;
use kubewasm_core::resource::ResourceRef;
use tokio::time::Instant;

use crate::plugins::environment::{Active, Current, Environment};
use crate::replicas::ownership::Ownership;
use crate::watch::cache::Caches;
use crate::watch::{WatchEvent, WatchManager};
use kubewasm_core::sync::lock;

/// Why a plugin's objects are replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Replay {
    /// A new plugin: every selected cached object, as `added`.
    Added(String),
    /// A new version of a plugin: every selected cached object, as `resync`.
    Replaced(String),
}

/// At most this many deletions are remembered while following. Each holds the deleted
/// object (what a plugin's `deleted` event carries), so a follower watching a resource
/// whose objects are deleted in bulk would otherwise hold all of them for the whole
/// retention: time alone does not bound it. Past the cap the oldest are forgotten and
/// counted; a takeover still re-delivers every cached object as `resync`.
pub(crate) const MAX_TOMBSTONES: usize = 5_000;

/// Deletions seen while following, oldest first, bounded by time and by count.
struct Tombstones {
    entries: Mutex<VecDeque<(Instant, WatchEvent)>>,
    cap: usize,
    /// Forgotten for the cap since the last takeover.
    dropped: AtomicU64,
}

impl Default for Tombstones {
    fn default() -> Self {
        Tombstones::with_cap(MAX_TOMBSTONES)
    }
}

impl Tombstones {
    fn with_cap(cap: usize) -> Self {
        Tombstones {
            entries: Mutex::new(VecDeque::new()),
            cap,
            dropped: AtomicU64::new(0),
        }
    }

    /// Remember a deletion; forget those older than `retention`, and the oldest past the
    /// cap (said once per takeover, when the first is forgotten).
    fn record(&self, ev: &WatchEvent, retention: Duration) {
        let now = Instant::now();
        let mut e = lock(&self.entries);
        while e
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > retention)
        {
            e.pop_front();
        }
        e.push_back((now, ev.clone()));
        while e.len() > self.cap {
            e.pop_front();
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    cap = self.cap,
                    "more deletions seen while following than are remembered: the oldest are forgotten, so a takeover will not deliver `deleted` for them (it re-delivers every cached object as `resync`)"
                );
            }
        }
    }

    /// Every deletion still remembered that `pick` picks, forgetting them.
    fn take(&self, retention: Duration, pick: impl Fn(&WatchEvent) -> bool) -> Vec<WatchEvent> {
        let now = Instant::now();
        let mut e = lock(&self.entries);
        e.retain(|(at, _)| now.duration_since(*at) <= retention);
        let (picked, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut *e)
            .into_iter()
            .partition(|(_, ev)| pick(ev));
        *e = kept;
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                cap = self.cap,
                "deletions seen while following were forgotten for the tombstone cap; their `deleted` events are not delivered"
            );
        }
        picked.into_iter().map(|(_, ev)| ev).collect()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

/// Replays of routes that did not resolve yet: plugin → (event type, targets).
type Pending = HashMap<String, (EventType, HashSet<ResourceRef>)>;

/// Replays cached objects into plugin queues.
pub(crate) struct Replayer {
    pub(crate) current: Current,
    pub(crate) watches: Arc<WatchManager>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) ownership: Ownership,
    /// How long a tombstone is kept (at least the lease duration).
    pub(crate) retention: Duration,
    tombstones: Tombstones,
    pending: Mutex<Pending>,
}

impl Replayer {
    pub(crate) fn new(
        current: Current,
        watches: Arc<WatchManager>,
        caches: Arc<Caches>,
        ownership: Ownership,
        retention: Duration,
    ) -> Self {
        Replayer {
            current,
            watches,
            caches,
            ownership,
            retention,
            tombstones: Tombstones::default(),
            pending: Mutex::new(Pending::new()),
        }
    }

    /// See a watch event: a follower remembers deletions, for when it leads (with shards:
    /// the deletions of keys in shards it does not hold, for when it gains them).
    pub(crate) fn observe(&self, ev: &WatchEvent) {
        if ev.event_type == EventType::Deleted && !self.ownership.owns(&ev.object.key()) {
            self.tombstones.record(ev, self.retention);
        }
    }

    /// Replay the objects of new and replaced plugins.
    pub(crate) fn replay(&self, env: &Environment, replays: &[Replay]) {
        for replay in replays {
            let (name, event_type) = match replay {
                Replay::Added(n) => (n, EventType::Added),
                Replay::Replaced(n) => (n, EventType::Resync),
            };
            let Some(active) = env.plugins.get(name) else {
                continue;
            };
            lock(&self.pending).remove(name);
            let mut targets: Vec<&ResourceRef> = Vec::new();
            for route in active.routes.iter() {
                if !targets.contains(&route.resource()) {
                    targets.push(route.resource());
                }
            }
            for target in targets {
                if self.watches.resolved(target).is_none() {
                    // Replayed when it resolves: see [`Replayer::resolved`].
                    lock(&self.pending)
                        .entry(name.clone())
                        .or_insert_with(|| (event_type, HashSet::new()))
                        .1
                        .insert(target.clone());
                    continue;
                }
                self.push_cached(active, target, event_type);
            }
        }
    }

    /// A watch target now resolves: replay the cached objects to the plugins whose replay
    /// skipped it. When its cache is not synced yet, the watcher's first list delivers them.
    pub(crate) fn resolved(&self, target: &ResourceRef) {
        let waiting: Vec<(String, EventType)> = {
            let mut p = lock(&self.pending);
            let waiting = p
                .iter_mut()
                .filter_map(|(name, (t, targets))| {
                    targets.remove(target).then(|| (name.clone(), *t))
                })
                .collect();
            p.retain(|_, (_, targets)| !targets.is_empty());
            waiting
        };
        if let Ownership::Leader(l) = &self.ownership
            && !l.is_leader()
        {
            return;
        }
        let env = self.current.get();
        for (name, event_type) in waiting {
            if let Some(active) = env.plugins.get(&name) {
                self.push_cached(active, target, event_type);
            }
        }
    }

    /// This replica now leads: deliver `deleted` for what was deleted while it followed,
    /// then every cached object to every plugin, so whatever changed meanwhile is handled.
    pub(crate) fn lead(&self) {
        self.deliver_tombstones(|_| true);
        let env = self.current.get();
        let replays: Vec<Replay> = env.plugins.keys().cloned().map(Replay::Replaced).collect();
        self.replay(&env, &replays);
    }

    /// This replica gained `shards`: deliver `deleted` for their keys deleted while
    /// another replica held them, then their cached objects as `resync` (those of caches
    /// kept whole; the watchers of the caches by shard relist theirs as `resync`).
    pub(crate) fn gain(&self, shards: &BTreeSet<u32>) {
        let Some(set) = self.ownership.shards() else {
            return;
        };
        let in_gained =
            |key: &kubewasm_core::resource::ObjectKey| shards.contains(&set.shard_of(key));
        self.deliver_tombstones(|ev| in_gained(&ev.object.key()));
        let env = self.current.get();
        for active in env.plugins.values() {
            let mut targets: Vec<&ResourceRef> = Vec::new();
            for route in active.routes.iter() {
                if !targets.contains(&route.resource()) {
                    targets.push(route.resource());
                }
            }
            for target in targets {
                self.push_cached_if(active, target, EventType::Resync, |o| in_gained(&o.key()));
            }
        }
    }

    /// `deleted` for every tombstone `pick` picks, to the plugins whose routes select it.
    fn deliver_tombstones(&self, pick: impl Fn(&WatchEvent) -> bool) {
        let env = self.current.get();
        for ev in self.tombstones.take(self.retention, pick) {
            for (active, route) in env.routes(&ev.resource) {
                if route.selects(&ev.object) {
                    active.push(
                        &ev.resource,
                        route,
                        EventType::Deleted,
                        ev.object.clone(),
                        None,
                    );
                }
            }
        }
    }

    /// Every cached object of `target` that a route of `active` naming it selects (with
    /// shards: of the shards held).
    fn push_cached(&self, active: &Active, target: &ResourceRef, event_type: EventType) {
        let set = self.ownership.shards();
        self.push_cached_if(active, target, event_type, |o| {
            set.is_none_or(|s| s.owns(&o.key()))
        });
    }

    /// [`Replayer::push_cached`], of the objects `pick` picks.
    fn push_cached_if(
        &self,
        active: &Active,
        target: &ResourceRef,
        event_type: EventType,
        pick: impl Fn(&crate::watch::cache::CachedObject) -> bool,
    ) {
        let Some(res) = self.watches.resolved(target) else {
            return;
        };
        let Some(cache) = self.caches.get(&res.type_ref()) else {
            return;
        };
        if !cache.is_synced() {
            return;
        }
        let resource = res.key();
        let objects = cache.snapshot();
        for route in active.routes.iter().filter(|r| r.resource() == target) {
            for obj in &objects {
                if pick(obj) && route.selects(obj) {
                    active.push(&resource, route, event_type, obj.clone(), None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::cache::{CachedObject, ResourceKey};

    fn deleted(name: &str) -> WatchEvent {
        let o: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "a", "name": name, "resourceVersion": "1"}
        }))
        .unwrap();
        WatchEvent {
            resource: ResourceKey {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
            },
            event_type: EventType::Deleted,
            object: CachedObject::new(o),
            old: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn tombstones_are_bounded_by_count_as_well_as_time() {
        let t = Tombstones::with_cap(3);
        let retention = Duration::from_secs(60);
        for i in 0..5 {
            t.record(&deleted(&format!("cm{i}")), retention);
        }
        assert_eq!(t.len(), 3);
        assert_eq!(t.dropped.load(Ordering::Relaxed), 2);
        let names: Vec<String> = t
            .take(retention, |_| true)
            .iter()
            .map(|e| e.object.key().name.clone())
            .collect();
        // The newest are kept.
        assert_eq!(names, ["cm2", "cm3", "cm4"]);
        assert_eq!(t.dropped.load(Ordering::Relaxed), 0);
        // And time still bounds them.
        t.record(&deleted("old"), retention);
        tokio::time::advance(Duration::from_secs(61)).await;
        t.record(&deleted("new"), retention);
        assert_eq!(t.len(), 1);
    }
}
