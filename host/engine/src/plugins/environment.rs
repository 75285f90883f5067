//! The plugins at work, as one immutable value: a reload builds a new [`Environment`] and
//! swaps it whole (Kubewarden-style), so every reader sees one consistent set of plugins.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use kubewasm_core::event::EventType;
use kubewasm_core::grant::{Mode, ReadScopes, ReadWhere};
use kubewasm_core::manifest::{Manifest, Watch};
use kubewasm_core::projection::Projection;
use kubewasm_core::resource::{ResourceRef, TypeRef};
use kubewasm_runtime::{CompiledPlugin, ReadScope};

use tokio_util::sync::CancellationToken;

use crate::apply::Writer;
use crate::event::{Delivery, Health, Queue, QueueKey};
use crate::preview::report::Previewing;
use crate::watch::cache::{CachedObject, ResourceKey};
use crate::watch::manager::{Demand, shared_demand};
use crate::watch::{WatchEvent, WatchManager};
use kubewasm_core::sync::{read, write};

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
        self.watch.selects(|k| o.label(k), o.name(), o.namespace())
    }

    /// Why the watch's namespace and selectors do not select the object (None: they do).
    pub(crate) fn rejects(&self, o: &CachedObject) -> Option<String> {
        self.watch.rejects(|k| o.label(k), o.name(), o.namespace())
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

/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Origin {
    /// A `.wasm` file of the plugin directory.
    File(PathBuf),
    /// A Plugin object, by name.
    Object(String),
    /// The shadow candidate of a Plugin object (`spec.candidate`), by the object's name.
    Shadow(String),
    /// A NamespacedPlugin object: its plugin is `namespace/name` in the host, confined to
    /// its namespace.
    Namespaced { namespace: String, name: String },
}

impl Origin {
    /// The namespace a plugin from here is confined to (None: not a tenant's).
    pub(crate) fn tenant(&self) -> Option<&str> {
        match self {
            Origin::Namespaced { namespace, .. } => Some(namespace),
            _ => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Object(name) => write!(f, "plugins.kubewasm.dev/{name}"),
            Origin::Shadow(name) => write!(f, "plugins.kubewasm.dev/{name} (candidate)"),
            Origin::Namespaced { namespace, name } => {
                write!(f, "namespacedplugins.kubewasm.dev/{namespace}/{name}")
            }
        }
    }
}

/// One version of a plugin and its health (a new version starts healthy).
pub(crate) struct Version {
    pub(crate) plugin: Arc<CompiledPlugin>,
    pub(crate) health: Health,
    /// Where its approval lets it read each resource (as the approval spells it): the
    /// namespaces its view of the caches answers in, never its own watches'.
    pub(crate) reads: Arc<ReadScopes>,
    /// The source it was loaded from: the one record of which source serves a plugin.
    pub(crate) origin: Origin,
    /// Whether its writes are made or only previewed (its approval's `mode`).
    pub(crate) mode: Mode,
    /// The namespace of a NamespacedPlugin's plugin (named `NS/P` in the host): it writes
    /// as ServiceAccount `kubewasm-P` there, and reads and watches only there (what only
    /// tenants need is watched only in their namespaces, `Environment::tenant_scopes`).
    pub(crate) tenant: Option<String>,
    /// Everything it watches and reads has settled once (its events no longer wait).
    settled: std::sync::atomic::AtomicBool,
    /// Tripped when the version leaves the environment (replaced, removed, or unloaded
    /// for its narrowed approval): its calls in flight or waiting are dropped, and none of
    /// its writes is sent after it. Revocation is immediate, not at the end of a call.
    retired: CancellationToken,
}

impl Version {
    pub(crate) fn new(
        plugin: Arc<CompiledPlugin>,
        health: Health,
        reads: Arc<ReadScopes>,
        origin: Origin,
        mode: Mode,
    ) -> Self {
        Version {
            plugin,
            health,
            reads,
            tenant: origin.tenant().map(str::to_string),
            origin,
            mode,
            settled: Default::default(),
            retired: CancellationToken::new(),
        }
    }

    /// Whom its writes are sent as: its field manager `kubewasm-P`, and for a tenant's
    /// plugin the namespace its ServiceAccount is in.
    pub(crate) fn writer(&self) -> Writer {
        Writer {
            manager: self.plugin.manifest.field_manager(),
            tenant: self.tenant.clone(),
        }
    }

    /// Whether everything it watches and reads has settled once.
    pub(crate) fn is_settled(&self) -> bool {
        self.settled.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Its events no longer wait for its caches.
    pub(crate) fn mark_settled(&self) {
        self.settled
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the version has left the environment.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.is_cancelled()
    }

    /// Run `fut` while the version serves: None when it is retired first (`fut` is
    /// dropped: a plugin call's instance with it, its budget and place given back).
    pub(crate) async fn while_serving<F: Future>(&self, fut: F) -> Option<F::Output> {
        self.retired.run_until_cancelled(fut).await
    }
}

/// One plugin at work. A new version replaces `version` in the next environment; the
/// queue (and its workers) stays, so a replaced plugin takes effect at the next event of
/// each object; a call still running on the old version is dropped and its event handled
/// again by the new one ([`Version::while_serving`]).
#[derive(Clone)]
pub(crate) struct Active {
    pub(crate) version: Arc<Version>,
    pub(crate) routes: Arc<Vec<Route>>,
    pub(crate) queue: Arc<Queue>,
}

impl Active {
    pub(crate) fn new(version: Arc<Version>, queue: Arc<Queue>) -> Self {
        let routes = version.plugin.manifest.watches.iter().map(Route::new);
        Active {
            routes: Arc::new(routes.collect()),
            version,
            queue,
        }
    }

    /// The plugin's current version.
    pub(crate) fn plugin(&self) -> &Arc<CompiledPlugin> {
        &self.version.plugin
    }

    /// Queue an event of `object` for the watch `route`.
    pub(crate) fn push(
        &self,
        resource: &ResourceKey,
        route: &Route,
        event_type: EventType,
        object: Arc<CachedObject>,
        old: Option<Arc<CachedObject>>,
    ) {
        self.queue.push(
            QueueKey {
                resource: resource.clone(),
                object: object.key(),
            },
            Delivery {
                watch_id: route.id.clone(),
                event_type,
                object,
                old,
                queued: None,
            },
        );
    }
}

/// The plugins at work, and what their watches and reads resolve to.
#[derive(Clone, Default)]
pub(crate) struct Environment {
    pub(crate) plugins: BTreeMap<String, Active>,
    /// Shadow candidates by plugin name (`spec.candidate`): each runs beside its
    /// plugin's serving version, in dry run, on its events.
    pub(crate) shadows: BTreeMap<String, Arc<Version>>,
    /// New versions waiting for their caches (`plugins::staging`), by plugin name: the
    /// version in `plugins` serves until they are promoted.
    pub(crate) staged: BTreeMap<String, Active>,
    /// Resolved once per environment and per newly served target, never per event:
    /// served resource → (plugin, index of its route).
    routes: HashMap<ResourceKey, Vec<(String, usize)>>,
    /// Plugin → the kinds it may read, as served, each with where it may read it.
    reads: HashMap<String, Arc<HashMap<TypeRef, ReadScope>>>,
    /// Plugin → the kinds it watches or reads that are not served (yet), as it spells
    /// them: its reads of those say so.
    unserved: HashMap<String, Arc<HashSet<TypeRef>>>,
    /// Plugin → its projection of each kind it watches or reads, as served.
    projections: HashMap<String, Arc<HashMap<TypeRef, Projection>>>,
}

impl Environment {
    /// The plugins at work: name → (version, the source it was loaded from).
    pub(crate) fn loaded(&self) -> BTreeMap<String, (String, String)> {
        self.plugins
            .iter()
            .map(|(name, a)| {
                let version = a.plugin().manifest.version.clone();
                (name.clone(), (version, a.version.origin.to_string()))
            })
            .collect()
    }

    /// The plugins that preview: in `DryRun` mode, or with a shadow candidate (its
    /// digest and version).
    pub(crate) fn previewing(&self) -> Vec<Previewing> {
        self.plugins
            .iter()
            .filter_map(|(name, a)| {
                let shadow = self.shadows.get(name).map(|v| {
                    let p = &v.plugin;
                    (p.digest.clone(), p.manifest.version.clone())
                });
                let mode = a.version.mode;
                (mode == Mode::DryRun || shadow.is_some()).then(|| (name.clone(), mode, shadow))
            })
            .collect()
    }

    /// The plugin serving from `origin` (a candidate from its shadow origin), if any.
    pub(crate) fn served_from(&self, origin: &Origin) -> Option<&str> {
        if let Origin::Shadow(_) = origin {
            return self
                .shadows
                .iter()
                .find(|(_, v)| v.origin == *origin)
                .map(|(name, _)| name.as_str());
        }
        self.plugins
            .iter()
            .find(|(_, a)| a.version.origin == *origin)
            .map(|(name, _)| name.as_str())
    }

    /// The digests of the code every version at work runs, candidates included.
    pub(crate) fn digests(&self) -> std::collections::HashSet<String> {
        let plugins = self.plugins.values().map(|a| a.plugin().digest.clone());
        let shadows = self.shadows.values().map(|v| v.plugin.digest.clone());
        let staged = self.staged.values().map(|a| a.plugin().digest.clone());
        plugins.chain(shadows).chain(staged).collect()
    }

    /// The targets some plugin declared under `reads`: cached whole even with shards.
    pub(crate) fn read_whole(&self) -> BTreeSet<ResourceRef> {
        self.plugins
            .values()
            .chain(self.staged.values())
            .flat_map(|a| a.plugin().manifest.reads.iter().map(|r| r.resource.clone()))
            .collect()
    }

    /// Per target some plugin watches or reads, the union of what the plugins (staged
    /// versions included) declared of it: what its cache keeps.
    pub(crate) fn projections(&self) -> BTreeMap<ResourceRef, Projection> {
        let mut union: BTreeMap<ResourceRef, Projection> = BTreeMap::new();
        for a in self.plugins.values().chain(self.staged.values()) {
            for (r, p) in a.plugin().manifest.declarations() {
                match union.get_mut(r) {
                    Some(have) => *have = have.union(p),
                    None => {
                        union.insert(r.clone(), p.clone());
                    }
                }
            }
        }
        union
    }

    /// Per target only tenant plugins (staged versions included) watch or read: their
    /// namespaces, the only ones it is watched in. A target a cluster plugin needs too is
    /// left out: watched cluster-wide (or in `--namespace`), as before tenants.
    pub(crate) fn tenant_scopes(&self) -> BTreeMap<ResourceRef, BTreeSet<String>> {
        tenant_scopes(
            self.plugins
                .values()
                .chain(self.staged.values())
                .map(|a| (a.version.tenant.as_deref(), &a.plugin().manifest)),
        )
    }

    /// Every resource some plugin watches or reads: what the watch manager must serve,
    /// each with the label selector all of its consumers share (sent to the server), or
    /// `None` when one of them needs every object (no selector, or a declared read).
    pub(crate) fn desired(&self) -> BTreeMap<ResourceRef, Demand> {
        let mut wanted: BTreeMap<ResourceRef, BTreeSet<Demand>> = BTreeMap::new();
        for a in self.plugins.values().chain(self.staged.values()) {
            let m = &a.plugin().manifest;
            for w in &m.watches {
                wanted
                    .entry(w.resource.clone())
                    .or_default()
                    .insert(w.label_selector.as_ref().map(ToString::to_string));
            }
            // A declared read may list any object of its kind.
            for r in &m.reads {
                wanted.entry(r.resource.clone()).or_default().insert(None);
            }
        }
        wanted
            .into_iter()
            .map(|(r, demands)| (r, shared_demand(&demands)))
            .collect()
    }

    /// Resolve every route and read through the watch manager's resolutions (what is not
    /// served yet is left out, and resolved again when it is).
    pub(crate) fn resolve(&mut self, watches: &WatchManager) {
        self.routes.clear();
        self.reads.clear();
        self.unserved.clear();
        self.projections.clear();
        for (name, a) in &self.plugins {
            let unserved = a
                .plugin()
                .manifest
                .read_resources()
                .filter(|r| watches.resolved(r).is_none())
                .filter_map(|r| match r {
                    ResourceRef::Kind(t) => Some(t.clone()),
                    ResourceRef::Resource(_) => None,
                })
                .collect();
            self.unserved.insert(name.clone(), Arc::new(unserved));
            for (i, route) in a.routes.iter().enumerate() {
                if let Some(res) = watches.resolved(route.resource()) {
                    self.routes
                        .entry(res.key())
                        .or_default()
                        .push((name.clone(), i));
                }
            }
            let reads = plugin_reads(&a.plugin().manifest, &a.version.reads, |r| {
                watches.resolved(r).map(|k| k.type_ref())
            });
            self.reads.insert(name.clone(), Arc::new(reads));
            let projections = plugin_projections(&a.plugin().manifest, |r| {
                watches.resolved(r).map(|k| k.type_ref())
            });
            self.projections.insert(name.clone(), Arc::new(projections));
        }
    }

    /// `plugin`'s projection of each kind it watches or reads, as served now.
    pub(crate) fn projections_of(&self, plugin: &str) -> Arc<HashMap<TypeRef, Projection>> {
        self.projections.get(plugin).cloned().unwrap_or_default()
    }

    /// The plugins, and their routes, that watch `resource`.
    pub(crate) fn routes(&self, resource: &ResourceKey) -> impl Iterator<Item = (&Active, &Route)> {
        self.routes
            .get(resource)
            .into_iter()
            .flatten()
            .filter_map(|(name, i)| {
                let a = self.plugins.get(name)?;
                Some((a, a.routes.get(*i)?))
            })
    }

    /// The kinds `plugin` watches or reads that are not served (yet).
    pub(crate) fn unserved(&self, plugin: &str) -> Arc<HashSet<TypeRef>> {
        self.unserved.get(plugin).cloned().unwrap_or_default()
    }

    /// The kinds `plugin` may read, as served now, and where.
    pub(crate) fn reads(&self, plugin: &str) -> Arc<HashMap<TypeRef, ReadScope>> {
        self.reads.get(plugin).cloned().unwrap_or_default()
    }
}

/// The kinds a plugin with `manifest` may read, as `resolve` says they are served (what
/// is not served is left out), each where its approval's `scopes` let it read it
/// (nothing approved: nowhere); two spellings of one kind read where either may. `run`'s
/// environment and `kubewasm test` both scope a plugin's view with it.
pub(crate) fn plugin_reads(
    manifest: &Manifest,
    scopes: &ReadScopes,
    resolve: impl Fn(&ResourceRef) -> Option<TypeRef>,
) -> HashMap<TypeRef, ReadScope> {
    let mut reads: HashMap<TypeRef, ReadScope> = HashMap::new();
    for r in manifest.read_resources() {
        let Some(kind) = resolve(r) else {
            continue;
        };
        let here = match scopes.get(r) {
            Some(ReadWhere::ClusterWide) => ReadScope::ClusterWide,
            Some(ReadWhere::Namespaces(ns)) => ReadScope::Namespaces(ns.clone()),
            None => ReadScope::Namespaces(BTreeSet::new()),
        };
        let scope = match (reads.remove(&kind), here) {
            (None, here) => here,
            (Some(ReadScope::ClusterWide), _) | (_, ReadScope::ClusterWide) => {
                ReadScope::ClusterWide
            }
            (Some(ReadScope::Namespaces(mut a)), ReadScope::Namespaces(b)) => {
                a.extend(b);
                ReadScope::Namespaces(a)
            }
        };
        reads.insert(kind, scope);
    }
    reads
}

/// A plugin's projection of each kind it watches or reads, as `resolve` says they are
/// served: the union of what its watches and reads of that kind declare, whatever their
/// spelling (whole objects if any declares nothing). `run` and `kubewasm test` both
/// project what a plugin receives and reads with it.
pub(crate) fn plugin_projections(
    manifest: &Manifest,
    resolve: impl Fn(&ResourceRef) -> Option<TypeRef>,
) -> HashMap<TypeRef, Projection> {
    let mut out: HashMap<TypeRef, Projection> = HashMap::new();
    for (r, p) in manifest.declarations() {
        let Some(kind) = resolve(r) else {
            continue;
        };
        let united = match out.remove(&kind) {
            Some(have) => have.union(p),
            None => p.clone(),
        };
        out.insert(kind, united);
    }
    out
}

/// The current environment, shared by the router, the handlers, the reloader and the
/// host's status: the one source of truth for which version of each plugin serves.
#[derive(Clone, Default)]
pub(crate) struct Current(Arc<RwLock<Arc<Environment>>>);

impl Current {
    pub(crate) fn get(&self) -> Arc<Environment> {
        read(&self.0).clone()
    }

    /// Replace the environment with `f` of it, atomically (the reloader and the router
    /// both derive new environments). Every version of the old environment that is not in
    /// the new one is retired here, the one place versions leave: its calls are dropped.
    pub(crate) fn update(&self, f: impl FnOnce(&Environment) -> Environment) -> Arc<Environment> {
        let mut env = write(&self.0);
        let next = Arc::new(f(&env));
        let kept = |name: &String, v: &Arc<Version>| {
            let same = |a: &Active| Arc::ptr_eq(&a.version, v);
            next.plugins.get(name).is_some_and(same) || next.staged.get(name).is_some_and(same)
        };
        for (name, old) in env.plugins.iter().chain(env.staged.iter()) {
            if !kept(name, &old.version) {
                old.version.retired.cancel();
            }
        }
        for (name, old) in &env.shadows {
            if !next.shadows.get(name).is_some_and(|v| Arc::ptr_eq(v, old)) {
                old.retired.cancel();
            }
        }
        *env = next;
        env.clone()
    }
}

/// How the versions serving changed from one environment to the next: what
/// `kubewasm_reloads_total` counts. Versions that start or stop serving, not the swaps
/// that carry them: a replica that takes two loads in one reconcile, or stages a new
/// version before it serves (`plugins::staging`), counts what a replica taking them one
/// by one counts. Shadow candidates and staged versions serve nothing, so they count
/// nothing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Swaps {
    /// Plugins that started serving.
    pub(crate) added: u64,
    /// Plugins whose serving version was replaced by another.
    pub(crate) replaced: u64,
    /// Plugins that stopped serving.
    pub(crate) removed: u64,
}

impl Swaps {
    /// What changed from `before` to `after` (a version is told by identity: a new
    /// version of the same file, its settings or its approval is a new one).
    pub(crate) fn between(before: &Environment, after: &Environment) -> Swaps {
        let serving = |env: &Environment| -> BTreeMap<String, *const Version> {
            env.plugins
                .iter()
                .map(|(name, a)| (name.clone(), Arc::as_ptr(&a.version)))
                .collect()
        };
        Swaps::of(&serving(before), &serving(after))
    }

    /// What changed from `before` to `after`, plugin name → the version serving.
    pub(crate) fn of<V: PartialEq>(
        before: &BTreeMap<String, V>,
        after: &BTreeMap<String, V>,
    ) -> Swaps {
        let mut swaps = Swaps::default();
        for (name, now) in after {
            match before.get(name) {
                None => swaps.added += 1,
                Some(was) if was != now => swaps.replaced += 1,
                Some(_) => {}
            }
        }
        swaps.removed = before.keys().filter(|n| !after.contains_key(*n)).count() as u64;
        swaps
    }

    /// All of them.
    pub(crate) fn total(&self) -> u64 {
        self.added + self.replaced + self.removed
    }
}

/// Status of the plugin sources, for logs, readiness and metrics.
#[derive(Debug, Clone, Default)]
pub struct PluginStatus {
    /// Plugins at work: name → (version, the file it was loaded from).
    pub loaded: BTreeMap<String, (String, String)>,
    /// Sources (a file's path, `plugins.kubewasm.dev/NAME`) whose newest version was
    /// rejected, with the reason.
    pub rejected: BTreeMap<String, String>,
    /// Plugins added, replaced or removed since the host started ([`Swaps`]), as
    /// `kubewasm_reloads_total` counts them.
    pub reloads: u64,
    /// Sources refused (or unloaded) because their plugin's ServiceAccount lacks read
    /// rules its approval needs: source → each rule (`list secrets in namespace a`).
    pub missing_reads: BTreeMap<String, Vec<String>>,
}

/// [`Environment::tenant_scopes`] of plugins given as their tenant namespace (None: a
/// cluster plugin) and manifest.
fn tenant_scopes<'a>(
    plugins: impl Iterator<Item = (Option<&'a str>, &'a Manifest)>,
) -> BTreeMap<ResourceRef, BTreeSet<String>> {
    // None: a cluster plugin needs it.
    let mut scopes: BTreeMap<ResourceRef, Option<BTreeSet<String>>> = BTreeMap::new();
    for (tenant, manifest) in plugins {
        for (r, _) in manifest.declarations() {
            let scope = scopes
                .entry(r.clone())
                .or_insert_with(|| Some(BTreeSet::new()));
            match (tenant, scope.as_mut()) {
                (Some(ns), Some(namespaces)) => {
                    namespaces.insert(ns.to_string());
                }
                (Some(_), None) => {}
                (None, _) => *scope = None,
            }
        }
    }
    scopes
        .into_iter()
        .filter_map(|(r, namespaces)| Some((r, namespaces?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_core::resource::TypeRef;

    #[test]
    fn what_only_tenants_need_is_scoped_to_their_namespaces() {
        let kind = |k: &str| ResourceRef::Kind(TypeRef::new("v1", k));
        let manifest = |watched: &[&str], read: &[&str]| Manifest {
            name: "p".into(),
            version: "1".into(),
            watches: watched
                .iter()
                .map(|k| Watch {
                    id: (*k).into(),
                    resource: kind(k),
                    namespace: None,
                    label_selector: None,
                    field_selector: None,
                    fields: kubewasm_core::projection::Projection::whole(),
                })
                .collect(),
            grants: vec![],
            reads: read
                .iter()
                .map(|k| kubewasm_core::manifest::Read::whole(kind(k)))
                .collect(),
        };
        let backup_a = manifest(&["ConfigMap"], &["Secret"]);
        let backup_b = manifest(&["ConfigMap"], &[]);
        let cluster = manifest(&["Service"], &["Secret"]);
        let scopes = tenant_scopes(
            [
                (Some("a"), &backup_a),
                (Some("b"), &backup_b),
                (None, &cluster),
            ]
            .into_iter(),
        );
        // ConfigMaps: only tenants, in a and b; Secrets: a cluster plugin reads them too;
        // Services: a cluster plugin's alone.
        assert_eq!(
            scopes,
            BTreeMap::from([(kind("ConfigMap"), ["a", "b"].map(String::from).into())])
        );
    }
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
            fields: kubewasm_core::projection::Projection::whole(),
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
