//! A case's cluster: a fresh embedded API server (`kubewasm-apiserver`, in process) per
//! case and instance mode, seeded with the case's objects, and plugged into `run`'s
//! pipeline as its cluster port ([`Cluster`]). Kinds come from its discovery, owners and
//! the plugin's reads from caches filled from it as `run`'s watchers fill theirs, and the
//! admitted intents are applied to it by server-side apply as the plugin's field manager.
//! So a case fails where `run` would: a schema violation, a conflict with another field
//! manager, a merge patch over another manager's field.
//!
//! What the server holds first, in order: the CRDs of `--crds`, then the case's `cluster:`
//! objects (its CRDs first), then the event's object (not for `deleted`), each stored as
//! the cluster would hold it ([`ApiServer::seed`]): validated as a create, keeping the
//! `uid`, `creationTimestamp`, `generation`, `deletionTimestamp` and `status` written, its
//! field owners its `metadata.managedFields` when written, else [`SEED_MANAGER`] for every
//! field but `status`.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, TypeMeta};
use kubewasm_apiserver::{ApiServer, Config};
use kubewasm_core::admit::{Owners, Prepared};
use kubewasm_core::event::EventType;
use kubewasm_core::grant::ReadScopes;
use kubewasm_core::kind::{KindInfo, ResolveError, Resolver};
use kubewasm_core::manifest::{Manifest, Watch};
use kubewasm_core::resource::{ResourceRef, TypeRef};
use serde_json::Value;

use super::format::TestCase;
use crate::Error;
use crate::apply::{Applier, Outcome, WriteIdentity, Writer};
use crate::event::Delivery;
use crate::event::cluster::{ApiCluster, Cluster};
use crate::plugins::environment::{Route, plugin_projections, plugin_reads};

/// A plugin's projection of each kind, as `kubewasm test` resolves them.
pub(crate) type Projections = Arc<HashMap<TypeRef, kubewasm_core::projection::Projection>>;
use crate::watch::WatchEvent;
use crate::watch::cache::{CachedObject, PluginView, ResourceCache};
use crate::watch::discovery::api_resource;

/// The field manager owning the fields of a case's objects that state no
/// `managedFields`: what `kubectl apply --server-side` leaves.
pub(crate) const SEED_MANAGER: &str = "kubectl";

/// An embedded API server seeded with a case, as the pipeline's cluster port.
pub(crate) struct CaseCluster {
    api: ApiCluster,
    client: kube::Client,
    /// The event's object as the server stored it (None for `deleted`).
    event_object: Option<Value>,
    /// Serving while the case runs.
    _server: ApiServer,
}

impl CaseCluster {
    /// A fresh server holding `crds` (those of `--crds`), then the case's objects and
    /// the event's (see the module documentation).
    pub(crate) async fn start(crds: &[Value], case: &TestCase) -> Result<Self, String> {
        let server = ApiServer::start(Config::default())
            .await
            .map_err(|e| format!("embedded API server: {e}"))?;
        let mut config = server.client_config();
        // Plain HTTP on loopback: an empty root store, or the client would read the
        // system's CA certificates again for every case (most of a case's time).
        config.root_cert.get_or_insert_with(Vec::new);
        let client =
            kube::Client::try_from(config).map_err(|e| format!("embedded API server: {e}"))?;
        let is_crd = |o: &&Value| o["kind"] == "CustomResourceDefinition";
        let named = |o: &Value| o.pointer("/metadata/name").cloned();
        let own_crds: Vec<&Value> = case.cluster.iter().filter(is_crd).collect();
        // A CRD of the case replaces one of `--crds` with its name.
        let shared = crds
            .iter()
            .filter(|c| !own_crds.iter().any(|o| named(o) == named(c)));
        let mut objects: Vec<Value> = shared.chain(own_crds.iter().copied()).cloned().collect();
        let deleted = case.event.event_type == "deleted";
        // The event's object is stored as the event has it, in place of a `cluster:`
        // object of the same name (a recorded case lists what the plugin read, itself too).
        let event = &case.event.object;
        let replaced = |o: &Value| !deleted && same_object(o, event);
        objects.extend(
            case.cluster
                .iter()
                .filter(|o| !is_crd(o) && !replaced(o))
                .cloned(),
        );
        if !deleted {
            objects.push(event.clone());
        }
        let mut stored = server
            .seed(objects, SEED_MANAGER)
            .map_err(|e| format!("the case's objects cannot be stored: {e}"))?;
        let event_object = if deleted { None } else { stored.pop() };
        let api = ApiCluster {
            applier: Arc::new(Applier::with_identity(client.clone(), WriteIdentity::Host)),
            discovery: Arc::new(crate::watch::discovery::Discovery::new(client.clone())),
            caches: Arc::default(),
        };
        Ok(CaseCluster {
            api,
            client,
            event_object,
            _server: server,
        })
    }

    /// The kind `r` names, as the server serves it.
    async fn resolve(&self, r: &ResourceRef) -> Result<Arc<KindInfo>, ResolveError> {
        self.api.discovery.resolve(r).await
    }

    /// Fill the caches as `run`'s watchers would (`managedFields` dropped) with every
    /// object of the kinds the plugin may read and of the case's objects, and answer the
    /// plugin's reads through `run`'s view: the kinds it may read, each where its
    /// approval's `scopes` let it ([`plugin_reads`], as `run`'s environment scopes it),
    /// each kind projected to the plugin's projection of it ([`plugin_projections`]),
    /// returned too for the event's objects.
    pub(crate) async fn view(
        &self,
        manifest: &Manifest,
        scopes: &ReadScopes,
        budget: usize,
        case: &TestCase,
    ) -> Result<(Arc<PluginView>, Projections), String> {
        let mut resolved = HashMap::new();
        for r in manifest.read_resources() {
            if let Ok(k) = self.resolve(r).await {
                resolved.insert(r.clone(), k.type_ref());
            }
        }
        let present = case.cluster.iter().chain([&case.event.object]);
        let kinds = present
            .filter_map(|o| Some(TypeRef::new(o["apiVersion"].as_str()?, o["kind"].as_str()?)));
        for t in resolved.values().cloned().chain(kinds) {
            self.fill(&t).await?;
        }
        let reads = plugin_reads(manifest, scopes, |r| resolved.get(r).cloned());
        // The case's objects reach the plugin projected as `run` projects them.
        let projections = Arc::new(plugin_projections(manifest, |r| resolved.get(r).cloned()));
        let view = PluginView::per_kind(self.api.caches.clone(), Arc::new(reads), budget)
            .with_projections(projections.clone());
        Ok((Arc::new(view), projections))
    }

    /// One kind's cache, filled from the server (a kind it does not serve has none).
    async fn fill(&self, t: &TypeRef) -> Result<(), String> {
        let Ok(k) = self.resolve(&ResourceRef::Kind(t.clone())).await else {
            return Ok(());
        };
        if self.api.caches.get(&k.type_ref()).is_some() {
            return Ok(());
        }
        let cache = Arc::new(ResourceCache::new(k.key(), k.type_ref(), k.namespaced));
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(&k));
        let listed = api
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing {t} on the case's server: {e}"))?;
        for o in listed.items {
            cache.insert(cached(o, &k));
        }
        cache.mark_synced();
        self.api.caches.insert(cache);
        Ok(())
    }

    /// The delivery `run`'s router would make of the case's event: the watches of the
    /// plugin (the case's `event.watch`, else all) whose resource is the object's kind
    /// and whose namespace and selectors select it ([`Route::event_for`], the router's
    /// own check). None selecting, or several, fails the case saying why.
    pub(crate) async fn route(&self, m: &Manifest, case: &TestCase) -> Result<Delivery, String> {
        let ty = &case.event.event_type;
        let event_type =
            EventType::parse(ty).ok_or_else(|| format!("unknown event type {ty:?}"))?;
        let as_cached = |v: &Value| -> Result<Arc<CachedObject>, String> {
            let mut o: DynamicObject = serde_json::from_value(v.clone())
                .map_err(|e| format!("the event's object: {e}"))?;
            o.metadata.managed_fields = None;
            Ok(CachedObject::new(o))
        };
        let object = as_cached(self.event_object.as_ref().unwrap_or(&case.event.object))?;
        let old = case.event.old_object.as_ref().map(as_cached).transpose()?;
        let watches: Vec<&Watch> = match &case.event.watch {
            Some(id) => vec![m.watch(id).ok_or_else(|| {
                format!(
                    "watch {id:?} is not in the manifest of {} (its watches: {})",
                    m.name,
                    watches_list(m.watches.iter())
                )
            })?],
            None => m.watches.iter().collect(),
        };
        let mut selected = Vec::new();
        let mut why = Vec::new();
        let mut of_its_kind = false;
        for w in watches {
            match self.event_for(w, event_type, &object, &old).await {
                Ok(t) => selected.push((w, t)),
                Err(NotSelected::Kind(reason)) => {
                    why.push(format!("{} ({}): {reason}", w.id, w.resource))
                }
                Err(NotSelected::Selector(reason)) => {
                    of_its_kind = true;
                    why.push(format!("{} ({}): {reason}", w.id, w.resource))
                }
            }
        }
        let what = object.describe();
        if selected.is_empty() && !of_its_kind && case.event.watch.is_none() {
            let t = object.type_ref();
            return Err(format!(
                "the event's object ({t}) is of no kind {} watches: fix its apiVersion/kind \
                 or give `event.watch:` (its watches: {})",
                m.name,
                watches_list(m.watches.iter())
            ));
        }
        match selected.as_slice() {
            [(w, t)] => Ok(Delivery {
                watch_id: w.id.as_str().into(),
                event_type: *t,
                object,
                old: (*t == EventType::Modified).then_some(old).flatten(),
                queued: None,
            }),
            [] => Err(format!(
                "no watch of {} selects the event's object {what}, so `run` would never \
                 hand it to the plugin: {}",
                m.name,
                if why.is_empty() {
                    "it has no watches".into()
                } else {
                    why.join("; ")
                }
            )),
            several => Err(format!(
                "the event's object {what} matches several watches of {}: give \
                 `event.watch:` (one of {})",
                m.name,
                watches_list(several.iter().map(|(w, _)| *w))
            )),
        }
    }

    /// The event watch `w` sees, or why it sees none.
    async fn event_for(
        &self,
        w: &Watch,
        event_type: EventType,
        object: &Arc<CachedObject>,
        old: &Option<Arc<CachedObject>>,
    ) -> Result<EventType, NotSelected> {
        let kind = self
            .resolve(&w.resource)
            .await
            .map_err(|e| NotSelected::Kind(format!("not served by the case's cluster ({e})")))?;
        let t = object.type_ref();
        if kind.type_ref() != t {
            return Err(NotSelected::Kind(format!(
                "the object is a {t}, not a {}",
                kind.type_ref()
            )));
        }
        let route = Route::new(w);
        let ev = WatchEvent {
            resource: kind.key(),
            event_type,
            object: object.clone(),
            old: old.clone(),
        };
        route.event_for(&ev).ok_or_else(|| {
            NotSelected::Selector(
                route
                    .rejects(object)
                    .unwrap_or_else(|| "neither the object nor its old state is selected".into()),
            )
        })
    }

    /// The object `expected` names (its apiVersion, kind, namespace and name) as the
    /// server holds it now, `managedFields` included; None when absent.
    pub(crate) async fn object(&self, expected: &Value) -> Result<Option<Value>, String> {
        let text = |p: &str| expected.pointer(p).and_then(Value::as_str);
        let (Some(av), Some(kind), Some(name)) =
            (text("/apiVersion"), text("/kind"), text("/metadata/name"))
        else {
            return Err("an `after:` object needs apiVersion, kind and metadata.name".into());
        };
        let t = TypeRef::new(av, kind);
        let k = self
            .resolve(&ResourceRef::Kind(t.clone()))
            .await
            .map_err(|e| format!("after: {t}: {e}"))?;
        let api: Api<DynamicObject> = match (k.namespaced, text("/metadata/namespace")) {
            (true, ns) => Api::namespaced_with(
                self.client.clone(),
                ns.unwrap_or("default"),
                &api_resource(&k),
            ),
            (false, _) => Api::all_with(self.client.clone(), &api_resource(&k)),
        };
        let got = api
            .get_opt(name)
            .await
            .map_err(|e| format!("after: reading {t} {name}: {e}"))?;
        got.map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
            .transpose()
    }
}

/// Why a watch does not see an event: the object is not of its kind, or its namespace
/// or a selector leaves the object out.
enum NotSelected {
    Kind(String),
    Selector(String),
}

/// Whether two of a case's objects name the same object (kind, namespace and name).
fn same_object(a: &Value, b: &Value) -> bool {
    let group = |o: &Value| {
        let av = o["apiVersion"].as_str().unwrap_or_default();
        av.rsplit_once('/').map_or("", |(g, _)| g).to_string()
    };
    ["/kind", "/metadata/namespace", "/metadata/name"]
        .iter()
        .all(|p| a.pointer(p) == b.pointer(p))
        && group(a) == group(b)
}

/// A listed object as a watch cache holds it: its type named, `managedFields` dropped.
fn cached(mut o: DynamicObject, k: &KindInfo) -> Arc<CachedObject> {
    o.metadata.managed_fields = None;
    if o.types.is_none() {
        o.types = Some(TypeMeta {
            api_version: k.api_version(),
            kind: k.kind.clone(),
        });
    }
    CachedObject::new(o)
}

/// Watches as an error names them: `id (what it watches)`.
fn watches_list<'a>(watches: impl Iterator<Item = &'a Watch>) -> String {
    let shown: Vec<String> = watches
        .map(|w| format!("{} ({})", w.id, w.resource))
        .collect();
    match shown.is_empty() {
        true => "none".into(),
        false => shown.join(", "),
    }
}

impl Resolver for CaseCluster {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        self.api.resolve_kind(t).await
    }
}

impl Owners for CaseCluster {
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
        self.api.uid(kind, namespace, name)
    }
}

impl Cluster for CaseCluster {
    async fn current(&self, writer: &Writer, p: &Prepared) -> Result<Option<Value>, Error> {
        self.api.current(writer, p).await
    }

    async fn execute(&self, writer: &Writer, p: &Prepared) -> Result<Outcome, Error> {
        self.api.execute(writer, p).await
    }

    async fn dry_run(&self, writer: &Writer, p: &Prepared) -> Result<Option<Value>, Error> {
        self.api.dry_run(writer, p).await
    }
}
