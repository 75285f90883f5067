//! The plugins at work, as one immutable value: a reload builds a new [`Environment`] and
//! swaps it whole (Kubewarden-style), so every reader sees one consistent set of plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use kubewasm_core::event::EventType;
use kubewasm_core::manifest::Watch;
use kubewasm_core::resource::ResourceRef;
use kubewasm_runtime::CompiledPlugin;

use crate::dispatch::{Health, Queue};
use crate::watch::WatchEvent;
use crate::watch::cache::CachedObject;

/// A watch of a plugin, as the router uses it.
pub(crate) struct Route {
    pub(crate) id: Arc<str>,
    pub(crate) watch: Watch,
}

impl Route {
    pub(crate) fn new(w: &Watch) -> Self {
        Route {
            id: w.id.as_str().into(),
            watch: w.clone(),
        }
    }

    pub(crate) fn resource(&self) -> &ResourceRef {
        &self.watch.resource
    }

    /// Whether the watch's namespace and (already parsed) selectors select the object.
    pub(crate) fn selects(&self, o: &CachedObject) -> bool {
        let labels = o.labels();
        self.watch.selects(
            |k| labels.get(k).map(String::as_str),
            o.object.metadata.name.as_deref().unwrap_or_default(),
            o.object.metadata.namespace.as_deref(),
        )
    }

    /// The event this watch sees, as a selector-filtered informer would: an object that
    /// stops matching is deleted for this watch, one that starts matching is added.
    pub(crate) fn event_for(&self, ev: &WatchEvent) -> Option<EventType> {
        let now = self.selects(&ev.object);
        match (ev.event_type, &ev.old) {
            (EventType::Modified, Some(old)) => match (self.selects(old), now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            },
            (t, _) => now.then_some(t),
        }
    }
}

/// One version of a plugin and its health (a new version starts healthy).
pub(crate) struct Version {
    pub(crate) plugin: Arc<CompiledPlugin>,
    pub(crate) health: Health,
}

/// The slot a plugin's queue workers read the current version from: a replaced plugin
/// takes effect at the next event of each object, while running calls finish on the old one.
pub(crate) type Slot = Arc<RwLock<Arc<Version>>>;

/// One plugin at work.
#[derive(Clone)]
pub(crate) struct Active {
    pub(crate) plugin: Arc<CompiledPlugin>,
    pub(crate) routes: Arc<Vec<Route>>,
    pub(crate) queue: Arc<Queue>,
    pub(crate) slot: Slot,
}

impl Active {
    pub(crate) fn routes_of(plugin: &CompiledPlugin) -> Arc<Vec<Route>> {
        Arc::new(plugin.manifest.watches.iter().map(Route::new).collect())
    }
}

/// The plugins at work.
#[derive(Clone, Default)]
pub(crate) struct Environment {
    pub(crate) plugins: BTreeMap<String, Active>,
}

impl Environment {
    /// Every resource some plugin watches or reads: what the watch manager must serve,
    /// each with the label selector all of its consumers share (sent to the server), or
    /// `None` when one of them needs every object (no selector, or a declared read).
    pub(crate) fn desired(&self) -> BTreeMap<ResourceRef, crate::watch::manager::Demand> {
        let mut wanted: BTreeMap<ResourceRef, BTreeSet<Option<String>>> = BTreeMap::new();
        for a in self.plugins.values() {
            let m = &a.plugin.manifest;
            for w in &m.watches {
                wanted
                    .entry(w.resource.clone())
                    .or_default()
                    .insert(w.label_selector.as_ref().map(ToString::to_string));
            }
            // A declared read may list any object of its kind.
            for r in &m.reads {
                wanted.entry(r.clone()).or_default().insert(None);
            }
        }
        wanted
            .into_iter()
            .map(|(r, demands)| {
                let shared = match demands.iter().collect::<Vec<_>>().as_slice() {
                    [Some(s)] => Some(s.clone()),
                    _ => None,
                };
                (r, shared)
            })
            .collect()
    }
}

/// The current environment, shared by the router, the reloader and the host's status.
#[derive(Clone, Default)]
pub(crate) struct Current(Arc<RwLock<Arc<Environment>>>);

impl Current {
    pub(crate) fn get(&self) -> Arc<Environment> {
        match self.0.read() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub(crate) fn set(&self, env: Arc<Environment>) {
        match self.0.write() {
            Ok(mut e) => *e = env,
            Err(poisoned) => *poisoned.into_inner() = env,
        }
    }
}

/// Status of the plugin directory, for logs, readiness and metrics.
#[derive(Debug, Clone, Default)]
pub struct PluginStatus {
    /// Plugins at work: name → (version, file).
    pub loaded: BTreeMap<String, (String, PathBuf)>,
    /// Files whose newest version was rejected, with the reason.
    pub rejected: BTreeMap<PathBuf, String>,
    /// Reloads done (added, replaced or removed plugins).
    pub reloads: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::cache::ResourceKey;
    use kubewasm_core::resource::TypeRef;
    use serde_json::json;

    fn obj(labels: serde_json::Value) -> Arc<CachedObject> {
        CachedObject::new(
            serde_json::from_value(json!({"apiVersion":"v1","kind":"ConfigMap",
                "metadata":{"name":"c","namespace":"a","labels":labels,"resourceVersion":"1"}}))
            .unwrap(),
        )
    }

    fn route(ns: Option<&str>, labels: Option<&str>) -> Route {
        let (label_selector, field_selector) = Watch::parse_selectors("w", labels, None).unwrap();
        Route::new(&Watch {
            id: "w".into(),
            resource: ResourceRef::Kind(TypeRef::new("v1", "ConfigMap")),
            namespace: ns.map(str::to_string),
            label_selector,
            field_selector,
        })
    }

    fn ev(t: EventType, new: serde_json::Value, old: Option<serde_json::Value>) -> WatchEvent {
        WatchEvent {
            resource: ResourceKey {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
            },
            event_type: t,
            object: obj(new),
            old: old.map(obj),
        }
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let r = route(None, Some("app=web"));
        let m = |new, old| r.event_for(&ev(EventType::Modified, new, Some(old)));
        assert_eq!(
            m(json!({"app":"web"}), json!({"app":"web"})),
            Some(EventType::Modified)
        );
        assert_eq!(m(json!({"app":"web"}), json!({})), Some(EventType::Added));
        assert_eq!(m(json!({}), json!({"app":"web"})), Some(EventType::Deleted));
        assert_eq!(m(json!({}), json!({})), None);
        assert_eq!(r.event_for(&ev(EventType::Added, json!({}), None)), None);
        assert_eq!(
            r.event_for(&ev(EventType::Resync, json!({"app":"web"}), None)),
            Some(EventType::Resync)
        );
    }

    #[test]
    fn namespace_filter() {
        assert_eq!(
            route(Some("a"), None).event_for(&ev(EventType::Added, json!({}), None)),
            Some(EventType::Added)
        );
        assert_eq!(
            route(Some("b"), None).event_for(&ev(EventType::Added, json!({}), None)),
            None
        );
    }
}
