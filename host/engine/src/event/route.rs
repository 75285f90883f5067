//! The router: hands each watch event to every plugin whose watch selects the object, by
//! the routes the current environment resolved. It only routes: replays are
//! [`crate::plugins::replay`]'s, and whether this replica may act on an event is the
//! handler's gate's. With shards it leaves out the keys of shards this replica does not
//! hold (their holder routes them), so its queues hold only its own keys.

use kubewasm_core::event::EventType;

use crate::plugins::environment::Current;
use crate::replicas::ownership::Ownership;
use crate::watch::WatchEvent;

/// Routes events into plugin queues. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Router {
    pub(crate) current: Current,
    pub(crate) ownership: Ownership,
}

impl Router {
    /// Route one watch event to every plugin whose watch selects it, as the event that
    /// watch sees (an object that stops matching a selector is `deleted` for it).
    pub(crate) fn route(&self, ev: &WatchEvent) {
        if let Some(shards) = self.ownership.shards()
            && !shards.owns(&ev.object.key())
        {
            return;
        }
        let env = self.current.get();
        for (active, route) in env.routes(&ev.resource) {
            let Some(event_type) = route.event_for(ev) else {
                continue;
            };
            let old = (event_type == EventType::Modified)
                .then(|| ev.old.clone())
                .flatten();
            active.push(&ev.resource, route, event_type, ev.object.clone(), old);
        }
    }
}
