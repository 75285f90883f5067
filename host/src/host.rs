//! The host: wires registry → watch → dispatch → runtime → intent → grant → apply.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::apply::{Applier, Outcome, PrepareError};
use crate::cache::{Caches, PluginView};
use crate::discovery::Discovery;
use crate::dispatch::{Delivery, Handler, Queue, QueueConfig, QueueKey};
use crate::grant;
use crate::intent;
use crate::manifest::Watch;
use crate::registry::{self, LoadOptions};
use crate::resource::ResourceRef;
use crate::runtime::{CompiledPlugin, EventType, PluginEngine, PluginEvent};
use crate::selector::{FieldSelector, LabelSelector};
use crate::watch::{WatchConfig, WatchEvent, WatchManager};

/// Everything `kubewasm run` is configured with.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Directory holding `NAME.wasm` (+ settings) files.
    pub plugins_dir: PathBuf,
    /// Plugin loading and limits.
    pub load: LoadOptions,
    /// Watch settings.
    pub watch: WatchConfig,
    /// Queue settings.
    pub queue: QueueConfig,
}

/// A watch with its selectors parsed once, for routing.
struct Route {
    id: Arc<str>,
    resource: ResourceRef,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Route {
    fn new(w: &Watch) -> Self {
        Route {
            id: w.id.as_str().into(),
            resource: w.resource.clone(),
            namespace: w.namespace.clone(),
            // Selectors were validated with the manifest; an unparsable one cannot reach here.
            labels: w
                .label_selector
                .as_deref()
                .and_then(|s| LabelSelector::parse(s).ok())
                .unwrap_or_default(),
            fields: w
                .field_selector
                .as_deref()
                .and_then(|s| FieldSelector::parse(s).ok())
                .unwrap_or_default(),
        }
    }

    fn selects(&self, o: &crate::cache::CachedObject) -> bool {
        let ns = o.object.metadata.namespace.as_deref();
        let name = o.object.metadata.name.as_deref().unwrap_or_default();
        self.namespace
            .as_deref()
            .is_none_or(|want| ns == Some(want))
            && self.labels.matches(o.labels())
            && self.fields.matches(name, ns)
    }

    /// The event this watch sees, as a selector-filtered informer would: an object that
    /// stops matching is deleted for this watch, one that starts matching is added.
    fn event_for(&self, ev: &WatchEvent) -> Option<EventType> {
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

/// One plugin at work: the compiled plugin and its queue.
struct Active {
    plugin: Arc<CompiledPlugin>,
    routes: Vec<Route>,
    queue: Arc<Queue>,
}

/// Handles a plugin's deliveries: call, decode, check, apply.
struct PluginHandler {
    plugin: Arc<CompiledPlugin>,
    applier: Arc<Applier>,
    watches: Arc<WatchManager>,
    caches: Arc<Caches>,
}

impl PluginHandler {
    /// Kinds the plugin may read: what it watches plus what it declared, once resolved.
    fn view(&self) -> Arc<PluginView> {
        let m = &self.plugin.manifest;
        let allowed: HashSet<_> = m
            .watches
            .iter()
            .map(|w| &w.resource)
            .chain(m.reads.iter())
            .filter_map(|r| self.watches.resolved(r))
            .map(|r| r.type_ref())
            .collect();
        Arc::new(PluginView::new(self.caches.clone(), allowed))
    }

    async fn run(&self, d: &Delivery) -> Result<usize, Error> {
        let name = self.plugin.name().to_string();
        let object = d.object.describe();
        let event = PluginEvent {
            event_type: d.event_type,
            watch_id: d.watch_id.to_string(),
            object: d.object.json.clone(),
            old_object: d.old.as_ref().map(|o| o.json.clone()),
        };
        let started = Instant::now();
        let raw = self
            .plugin
            .handle(&event, &object, self.view())
            .await
            .map_err(|kind| Error::Call {
                plugin: name.clone(),
                kind,
            })?;
        tracing::debug!(plugin = %name, object = %object, intents = raw.len(), took = ?started.elapsed(), "plugin returned");

        // Validate everything before writing anything: a call is applied whole or not at all.
        let max = self.plugin.limits.max_intent_bytes;
        let mut prepared = Vec::with_capacity(raw.len());
        for (index, r) in raw.into_iter().enumerate() {
            let decoded = intent::decode(r, max).map_err(|reason| Error::InvalidIntent {
                plugin: name.clone(),
                index,
                reason,
            })?;
            let p = match self.applier.prepare(decoded, &d.object).await {
                Ok(p) => p,
                Err(PrepareError::Invalid(reason)) => {
                    return Err(Error::InvalidIntent {
                        plugin: name.clone(),
                        index,
                        reason,
                    });
                }
                Err(PrepareError::Resolve(e)) => {
                    return Err(Error::InvalidIntent {
                        plugin: name.clone(),
                        index,
                        reason: e.to_string(),
                    });
                }
            };
            grant::check(&self.plugin.manifest, &p.access()).map_err(|reason| Error::Refused {
                plugin: name.clone(),
                index,
                reason,
            })?;
            prepared.push(p);
        }

        let manager = self.plugin.manifest.field_manager();
        for p in &prepared {
            match self.applier.execute(&manager, p).await {
                Ok(Outcome::Written { resource_version }) => tracing::info!(
                    plugin = %name, manager = %manager, trigger = %object,
                    resource_version = %resource_version, "applied {}", p.describe()
                ),
                Ok(Outcome::Deleted) => {
                    tracing::info!(plugin = %name, manager = %manager, trigger = %object, "applied {}", p.describe())
                }
                Ok(Outcome::AlreadyGone) => {
                    tracing::info!(plugin = %name, trigger = %object, "{}: already gone", p.describe())
                }
                Err(e) => {
                    if e.status() == Some(409) && !p.intent.force {
                        tracing::warn!(plugin = %name, manager = %manager, trigger = %object,
                            "{}: conflict with another field manager; not forced (the intent did not ask for force)",
                            p.describe());
                    }
                    return Err(e);
                }
            }
        }
        Ok(prepared.len())
    }
}

impl Handler for PluginHandler {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        let name = self.plugin.name();
        let object = d.object.describe();
        tracing::info!(plugin = name, event = d.event_type.as_str(), watch = %d.watch_id, object = %object, "event");
        match self.run(d).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let retry = e.is_retryable();
                tracing::error!(plugin = name, object = %object, event = d.event_type.as_str(), retry, error = %e, "event failed");
                Err(e)
            }
        }
    }
}

/// A running host. Build with [`Host::start`], stop with [`Host::shutdown`].
pub struct Host {
    cancel: CancellationToken,
    router: tokio::task::JoinHandle<()>,
    manager_task: tokio::task::JoinHandle<()>,
    manager_cancel: CancellationToken,
    queues: Vec<Arc<Queue>>,
    workers: Vec<JoinSet<()>>,
    /// The watch manager (readiness, resolved resources).
    pub watches: Arc<WatchManager>,
    /// Names of the loaded plugins.
    pub plugins: Vec<String>,
}

impl Host {
    /// Load the plugins, start the watches and dispatch. Bad plugin files are logged and
    /// skipped; only an unreadable plugin directory or a broken engine is an error.
    pub async fn start(client: Client, config: HostConfig) -> Result<Host, Error> {
        let engine = PluginEngine::new()?;
        let set = registry::load_dir(&engine, &config.plugins_dir, &config.load).await?;
        if set.plugins.is_empty() {
            tracing::warn!(dir = %config.plugins_dir.display(), "no plugins loaded");
        }
        let discovery = Arc::new(Discovery::new(client.clone()));
        let caches = Arc::new(Caches::default());
        let applier = Arc::new(Applier::new(client.clone(), discovery.clone()));
        let (tx, mut rx) = mpsc::channel::<WatchEvent>(4096);
        let watches =
            WatchManager::new(client, discovery, caches.clone(), config.watch.clone(), tx);

        let mut desired = BTreeSet::new();
        let mut active: BTreeMap<String, Active> = BTreeMap::new();
        let mut workers = Vec::new();
        for (name, plugin) in &set.plugins {
            let m = &plugin.manifest;
            desired.extend(m.watches.iter().map(|w| w.resource.clone()));
            desired.extend(m.reads.iter().cloned());
            let queue = Queue::new(name.clone(), config.queue.clone());
            let handler = Arc::new(PluginHandler {
                plugin: plugin.clone(),
                applier: applier.clone(),
                watches: watches.clone(),
                caches: caches.clone(),
            });
            workers.push(queue.spawn(handler));
            active.insert(
                name.clone(),
                Active {
                    plugin: plugin.clone(),
                    routes: m.watches.iter().map(Route::new).collect(),
                    queue,
                },
            );
        }
        watches.set_desired(desired);
        let manager_cancel = CancellationToken::new();
        let manager_task = tokio::spawn(watches.clone().run(manager_cancel.clone()));

        let cancel = CancellationToken::new();
        let queues: Vec<_> = active.values().map(|a| a.queue.clone()).collect();
        let router_watches = watches.clone();
        let router_cancel = cancel.clone();
        let router = tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    _ = router_cancel.cancelled() => break,
                    ev = rx.recv() => match ev { Some(ev) => ev, None => break },
                };
                for a in active.values() {
                    for route in &a.routes {
                        let Some(res) = router_watches.resolved(&route.resource) else {
                            continue;
                        };
                        if res.key() != ev.resource {
                            continue;
                        }
                        let Some(event_type) = route.event_for(&ev) else {
                            continue;
                        };
                        let key = QueueKey {
                            watch_id: route.id.clone(),
                            object: ev.object.key(),
                        };
                        let delivery = Delivery {
                            watch_id: route.id.clone(),
                            event_type,
                            object: ev.object.clone(),
                            old: if event_type == EventType::Modified {
                                ev.old.clone()
                            } else {
                                None
                            },
                        };
                        tracing::trace!(plugin = a.plugin.name(), "queued");
                        a.queue.push(key, delivery);
                    }
                }
            }
        });

        Ok(Host {
            cancel,
            router,
            manager_task,
            manager_cancel,
            queues,
            workers,
            watches,
            plugins: set.plugins.keys().cloned().collect(),
        })
    }

    /// Stop taking events, let in-flight calls and applies finish, stop the watches.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        let _ = self.router.await;
        for q in &self.queues {
            q.close();
        }
        for mut w in self.workers {
            while w.join_next().await.is_some() {}
        }
        self.manager_cancel.cancel();
        let _ = self.manager_task.await;
        tracing::info!("host stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CachedObject, ResourceKey};
    use crate::resource::TypeRef;
    use serde_json::json;

    fn obj(labels: serde_json::Value) -> Arc<CachedObject> {
        CachedObject::new(
            serde_json::from_value(json!({"apiVersion":"v1","kind":"ConfigMap",
                "metadata":{"name":"c","namespace":"a","labels":labels,"resourceVersion":"1"}}))
            .unwrap(),
        )
    }

    fn route(ns: Option<&str>, labels: Option<&str>) -> Route {
        Route::new(&Watch {
            id: "w".into(),
            resource: ResourceRef::Kind(TypeRef::new("v1", "ConfigMap")),
            namespace: ns.map(str::to_string),
            label_selector: labels.map(str::to_string),
            field_selector: None,
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
