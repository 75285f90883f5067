//! The router: hands each watch event to every plugin whose watch selects the object, and
//! replays cached objects to plugins that are new, replaced, or gained leadership.
//!
//! Replays only enqueue keys; the queue hands on the latest cached object when a key is
//! taken. A follower routes nothing but remembers what was deleted (tombstones, kept for
//! at least the lease duration), so a replica that becomes leader delivers `deleted` for
//! objects removed while it followed (a handover window included) and `resync` for the
//! rest.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubewasm_core::event::EventType;
use kubewasm_core::resource::ResourceRef;
use tokio::time::Instant;

use crate::dispatch::{Delivery, QueueKey};
use crate::host::environment::{Active, Current, Environment};
use crate::ops::leader::Leadership;
use crate::watch::cache::{CachedObject, Caches, ResourceKey};
use crate::watch::{WatchEvent, WatchManager};

/// Deletions seen while following, oldest first.
#[derive(Default)]
pub(crate) struct Tombstones {
    entries: Mutex<VecDeque<(Instant, WatchEvent)>>,
}

impl Tombstones {
    /// Remember a deletion; forget those older than `retention`.
    fn record(&self, ev: &WatchEvent, retention: Duration) {
        let now = Instant::now();
        if let Ok(mut e) = self.entries.lock() {
            while e
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > retention)
            {
                e.pop_front();
            }
            e.push_back((now, ev.clone()));
        }
    }

    /// Every deletion still remembered, forgetting them.
    fn take(&self, retention: Duration) -> Vec<WatchEvent> {
        let now = Instant::now();
        self.entries
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
            .into_iter()
            .filter(|(at, _)| now.duration_since(*at) <= retention)
            .map(|(_, ev)| ev)
            .collect()
    }
}

/// Replays waiting for a watch target to resolve: plugin → (event type, targets).
type Pending = HashMap<String, (EventType, HashSet<ResourceRef>)>;

/// Why a plugin's objects are replayed.
pub(crate) enum Replay {
    /// A new plugin: every selected cached object, as `added`.
    Added(String),
    /// A new version of a plugin: every selected cached object, as `resync`.
    Replaced(String),
}

/// Routes events into plugin queues. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Router {
    pub(crate) current: Current,
    pub(crate) watches: Arc<WatchManager>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) leadership: Leadership,
    /// Deletions seen while following.
    pub(crate) tombstones: Arc<Tombstones>,
    /// How long a tombstone is kept (at least the lease duration).
    pub(crate) tombstone_retention: Duration,
    /// Replays of routes that did not resolve yet.
    pub(crate) pending: Arc<Mutex<Pending>>,
}

impl Router {
    /// Route one watch event to every plugin whose watch selects it. Followers route
    /// nothing but remember deletions: the leader handles events, and a new leader replays
    /// its caches and those tombstones.
    pub(crate) fn route(&self, ev: &WatchEvent) {
        if !self.leadership.is_leader() {
            if ev.event_type == EventType::Deleted {
                self.tombstones.record(ev, self.tombstone_retention);
            }
            return;
        }
        let env = self.current.get();
        for a in env.plugins.values() {
            for route in a.routes.iter() {
                let Some(res) = self.watches.resolved(route.resource()) else {
                    continue;
                };
                if res.key() != ev.resource {
                    continue;
                }
                let Some(event_type) = route.event_for(ev) else {
                    continue;
                };
                let old = (event_type == EventType::Modified)
                    .then(|| ev.old.clone())
                    .flatten();
                push(
                    a,
                    &ev.resource,
                    &route.id,
                    event_type,
                    ev.object.clone(),
                    old,
                );
            }
        }
    }

    /// New plugins see the objects already cached (as `added`); replaced ones get every
    /// object again (as `resync`) so the new version's output converges everywhere. Objects
    /// of kinds not cached yet arrive through their watcher's initial list.
    pub(crate) fn replay(&self, env: &Environment, replays: &[Replay]) {
        for replay in replays {
            let (name, event_type) = match replay {
                Replay::Added(n) => (n, EventType::Added),
                Replay::Replaced(n) => (n, EventType::Resync),
            };
            let Some(active) = env.plugins.get(name) else {
                continue;
            };
            if let Ok(mut p) = self.pending.lock() {
                p.remove(name);
            }
            for route in active.routes.iter() {
                let Some(res) = self.watches.resolved(route.resource()) else {
                    // Not resolved yet: replayed when it is (another spelling of the same
                    // resource may already be cached), see [`Router::resolved`].
                    if let Ok(mut p) = self.pending.lock() {
                        p.entry(name.clone())
                            .or_insert_with(|| (event_type, HashSet::new()))
                            .1
                            .insert(route.resource().clone());
                    }
                    continue;
                };
                let Some(cache) = self.caches.get(&res.type_ref()) else {
                    continue;
                };
                if !cache.is_synced() {
                    continue;
                }
                let resource = res.key();
                for obj in cache.snapshot() {
                    if route.selects(&obj) {
                        push(active, &resource, &route.id, event_type, obj, None);
                    }
                }
            }
        }
    }

    /// A watch target now resolves: replay the cached objects to the plugins whose replay
    /// skipped it. When its cache is not synced yet, the watcher's first list delivers them.
    pub(crate) fn resolved(&self, target: &ResourceRef) {
        let env = self.current.get();
        let waiting: Vec<(String, EventType)> = match self.pending.lock() {
            Ok(mut p) => p
                .iter_mut()
                .filter_map(|(name, (t, targets))| {
                    targets.remove(target).then(|| (name.clone(), *t))
                })
                .collect(),
            Err(_) => return,
        };
        if let Ok(mut p) = self.pending.lock() {
            p.retain(|_, (_, targets)| !targets.is_empty());
        }
        if !self.leadership.is_leader() {
            return;
        }
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
        for (name, event_type) in waiting {
            let Some(active) = env.plugins.get(&name) else {
                continue;
            };
            for route in active.routes.iter().filter(|r| r.resource() == target) {
                for obj in cache.snapshot() {
                    if route.selects(&obj) {
                        push(active, &resource, &route.id, event_type, obj, None);
                    }
                }
            }
        }
    }

    /// A replica that becomes leader delivers `deleted` for what was deleted while it
    /// followed, then re-delivers every cached object to every plugin, so whatever changed
    /// while it followed is handled.
    pub(crate) fn replay_all(&self) {
        let env = self.current.get();
        for ev in self.tombstones.take(self.tombstone_retention) {
            for a in env.plugins.values() {
                for route in a.routes.iter() {
                    let Some(res) = self.watches.resolved(route.resource()) else {
                        continue;
                    };
                    if res.key() == ev.resource && route.selects(&ev.object) {
                        push(
                            a,
                            &ev.resource,
                            &route.id,
                            EventType::Deleted,
                            ev.object.clone(),
                            None,
                        );
                    }
                }
            }
        }
        let replays: Vec<Replay> = env
            .plugins
            .keys()
            .map(|n| Replay::Replaced(n.clone()))
            .collect();
        self.replay(&env, &replays);
    }
}

fn push(
    a: &Active,
    resource: &ResourceKey,
    watch_id: &Arc<str>,
    event_type: EventType,
    object: Arc<CachedObject>,
    old: Option<Arc<CachedObject>>,
) {
    a.queue.push(
        QueueKey {
            resource: resource.clone(),
            object: object.key(),
        },
        Delivery {
            watch_id: watch_id.clone(),
            event_type,
            object,
            old,
        },
    );
}
