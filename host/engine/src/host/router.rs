//! The router: hands each watch event to every plugin whose watch selects the object, and
//! replays cached objects to plugins that are new, replaced, or gained leadership.

use std::sync::Arc;

use kubewasm_core::event::EventType;

use crate::dispatch::{Delivery, QueueKey};
use crate::host::environment::{Active, Current, Environment};
use crate::ops::leader::Leadership;
use crate::watch::cache::{CachedObject, Caches, ResourceKey};
use crate::watch::{WatchEvent, WatchManager};

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
}

impl Router {
    /// Route one watch event to every plugin whose watch selects it. Followers route
    /// nothing: the leader handles events, and a new leader replays its caches.
    pub(crate) fn route(&self, ev: &WatchEvent) {
        if !self.leadership.is_leader() {
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
            for route in active.routes.iter() {
                let Some(res) = self.watches.resolved(route.resource()) else {
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

    /// A replica that becomes leader re-delivers every cached object to every plugin, so
    /// whatever changed while it followed is handled.
    pub(crate) fn replay_all(&self) {
        let env = self.current.get();
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
