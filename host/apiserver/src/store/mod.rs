//! The object store: one global resourceVersion counter (like an etcd revision),
//! the objects of every resource, the bounded watch history and the write
//! pipeline (create, update, patch, apply, delete) with kube-apiserver's rules
//! for metadata, status subresource, generation, finalizers and no-op writes.

use crate::apply::{self, ApplyRequest, ManagedEntry};
use crate::error::{ApiResult, StatusError};
use crate::meta::{self, finalizers, meta_str, set_meta};
use crate::registry::{GroupResource, Registry, ResourceInfo};
use base64::Engine;
use kubewasm_core::selector::{FieldSelector, LabelSelector};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, broadcast};

mod crd;
mod history;
mod namespaces;

use crd::crd_status;
use namespaces::check_namespace;

/// Namespace and name of an object ("" namespace for cluster-scoped objects).
pub(crate) type ObjKey = (String, String);

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

/// One committed change.
#[derive(Debug)]
pub(crate) struct Event {
    /// resourceVersion of the change.
    pub(crate) rv: u64,
    /// Resource.
    pub(crate) gr: GroupResource,
    /// Type.
    pub(crate) ty: EventType,
    /// The object after the change (for deletions: the last state, with the deletion's resourceVersion).
    pub(crate) object: Arc<Value>,
    /// The object before the change.
    pub(crate) prev: Option<Arc<Value>>,
}

/// How a write records field ownership.
#[derive(Debug, Clone)]
pub(crate) enum Ownership {
    /// A non-apply write by this manager (`Update` operation).
    Track(String),
    /// Entries already computed by server-side apply.
    Given(Vec<ManagedEntry>),
    /// Internal write (metadata changes by controllers) tracked for this manager.
    System(String),
}

/// Target of a write: resource, version, namespace and subresource.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Resource.
    pub(crate) info: Arc<ResourceInfo>,
    /// Request version.
    pub(crate) version: String,
    /// Namespace ("" when cluster-scoped).
    pub(crate) namespace: String,
    /// `Some("status")` for the status subresource.
    pub(crate) subresource: Option<String>,
}

impl Target {
    fn api_version(&self) -> String {
        self.info.api_version(&self.version)
    }
    fn is_status(&self) -> bool {
        self.subresource.as_deref() == Some("status")
    }
    fn not_found(&self, name: &str) -> StatusError {
        StatusError::not_found(&self.info.group, &self.info.plural, name)
    }
}

/// Deletion propagation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Delete now, dependents later.
    Background,
    /// Dependents first.
    Foreground,
    /// Keep dependents, drop their owner references.
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    /// Propagation policy (None: the resource's default, Background).
    pub(crate) propagation: Option<Propagation>,
    /// uid precondition.
    pub(crate) uid: Option<String>,
    /// resourceVersion precondition.
    pub(crate) resource_version: Option<String>,
}

/// Options of a list or watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListOptions {
    /// Label selector.
    pub(crate) labels: LabelSelector,
    /// Field selector.
    pub(crate) fields: FieldSelector,
    /// Page size.
    pub(crate) limit: Option<usize>,
    /// Continue token.
    pub(crate) continue_token: Option<String>,
}

impl ListOptions {
    /// True when the object passes both selectors.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.labels.matches_object(obj) && self.fields.matches_object(obj)
    }
}

/// The start of a watch, taken atomically with the subscription.
pub(crate) struct WatchStart {
    /// Current objects, for watches without a resourceVersion.
    pub(crate) initial: Vec<Arc<Value>>,
    /// Retained events after the requested resourceVersion.
    pub(crate) backlog: Vec<Arc<Event>>,
    /// Live events after this point.
    pub(crate) rx: broadcast::Receiver<Arc<Event>>,
    /// resourceVersion at subscription time.
    pub(crate) rv: u64,
}

struct State {
    rv: u64,
    registry: Registry,
    objects: BTreeMap<GroupResource, BTreeMap<ObjKey, Arc<Value>>>,
    uids: HashMap<String, (GroupResource, ObjKey)>,
    history: VecDeque<Arc<Event>>,
    compacted: u64,
    history_limit: usize,
    events: broadcast::Sender<Arc<Event>>,
}

/// The shared store.
pub(crate) struct Store {
    state: Mutex<State>,
    gc: Arc<Notify>,
}

/// Manager name of the built-in controllers (garbage collector, namespace controller).
pub(crate) const CONTROLLER_MANAGER: &str = "kube-controller-manager";

fn strip_for_compare(v: &Value) -> Value {
    let mut c = v.clone();
    meta::remove_meta(&mut c, "resourceVersion");
    c
}

fn non_meta(v: &Value, without_status: bool) -> Value {
    let mut c = v.clone();
    if let Some(o) = c.as_object_mut() {
        o.remove("metadata");
        o.remove("apiVersion");
        o.remove("kind");
        if without_status {
            o.remove("status");
        }
    }
    c
}

impl Store {
    /// A store with the default namespaces.
    pub(crate) fn new(history_limit: usize) -> Arc<Store> {
        let (events, _) = broadcast::channel(4096);
        let store = Arc::new(Store {
            state: Mutex::new(State {
                rv: 0,
                registry: Registry::new(),
                objects: BTreeMap::new(),
                uids: HashMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                history_limit: history_limit.max(1),
                events,
            }),
            gc: Arc::new(Notify::new()),
        });
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let target = store.target("", "v1", "namespaces", "");
            if let Some(t) = target {
                let body = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name": ns}});
                if let Err(e) =
                    store.create(&t, body, Ownership::Track("kube-apiserver".into()), false)
                {
                    tracing::error!(namespace = ns, error = %e.message, "creating default namespace failed");
                }
            }
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way
        // that matters more than stopping service, so recover the guard.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the garbage collector.
    pub(crate) fn gc_notify(&self) -> Arc<Notify> {
        self.gc.clone()
    }

    /// The registry (a snapshot).
    pub(crate) fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// Resolves a resource; `None` when not served.
    pub(crate) fn target(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        namespace: &str,
    ) -> Option<Target> {
        let info = self.lock().registry.lookup(group, version, plural)?;
        Some(Target {
            info,
            version: version.to_string(),
            namespace: namespace.to_string(),
            subresource: None,
        })
    }

    /// Drops all watch history: watches from older resourceVersions get 410.
    pub(crate) fn compact(&self) {
        let mut st = self.lock();
        st.history.clear();
        st.compacted = st.rv;
    }

    /// Reads one object.
    pub(crate) fn get(&self, t: &Target, name: &str) -> ApiResult<Value> {
        let st = self.lock();
        let obj = st
            .find(&t.info.gr(), &t.namespace, name)
            .ok_or_else(|| t.not_found(name))?;
        Ok(present(t, &obj))
    }

    /// Lists objects (all namespaces when the target namespace is empty).
    pub(crate) fn list(&self, t: &Target, opts: &ListOptions) -> ApiResult<Value> {
        let st = self.lock();
        let (list_rv, start_after) = match &opts.continue_token {
            Some(tok) => {
                let (rv, key) = decode_continue(tok)?;
                if rv < st.compacted {
                    return Err(StatusError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue value from the response.",
                    ));
                }
                (rv, Some(key))
            }
            None => (st.rv, None),
        };
        let empty = BTreeMap::new();
        let objs = st.objects.get(&t.info.gr()).unwrap_or(&empty);
        let matching: Vec<(&ObjKey, &Arc<Value>)> = objs
            .iter()
            .filter(|(k, _)| t.namespace.is_empty() || k.0 == t.namespace)
            .filter(|(k, _)| start_after.as_ref().is_none_or(|s| *k > s))
            .filter(|(_, o)| opts.matches(o))
            .collect();
        let limit = opts.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let page: Vec<Value> = matching
            .iter()
            .take(limit)
            .map(|(_, o)| present(t, o))
            .collect();
        let mut list_meta = Map::new();
        list_meta.insert("resourceVersion".into(), json!(list_rv.to_string()));
        if matching.len() > page.len()
            && let Some((last, _)) = matching.get(page.len().saturating_sub(1))
        {
            list_meta.insert("continue".into(), json!(encode_continue(list_rv, last)));
            list_meta.insert(
                "remainingItemCount".into(),
                json!(matching.len() - page.len()),
            );
        }
        Ok(json!({
            "apiVersion": t.api_version(),
            "kind": t.info.list_kind,
            "metadata": list_meta,
            "items": page,
        }))
    }

    /// Starts a watch: `from` None means "current state as ADDED, then changes".
    pub(crate) fn watch(&self, gr: &GroupResource, from: Option<u64>) -> ApiResult<WatchStart> {
        let st = self.lock();
        let rx = st.events.subscribe();
        match from {
            None => {
                let initial = st
                    .objects
                    .get(gr)
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default();
                Ok(WatchStart {
                    initial,
                    backlog: vec![],
                    rx,
                    rv: st.rv,
                })
            }
            Some(n) => {
                if n < st.compacted {
                    return Err(StatusError::expired(format!(
                        "too old resource version: {n} ({})",
                        st.compacted
                    )));
                }
                let backlog = st
                    .history
                    .iter()
                    .filter(|e| e.rv > n && &e.gr == gr)
                    .cloned()
                    .collect();
                Ok(WatchStart {
                    initial: vec![],
                    backlog,
                    rx,
                    rv: st.rv,
                })
            }
        }
    }

    /// POST: creates an object.
    pub(crate) fn create(
        &self,
        t: &Target,
        body: Value,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let mut st = self.lock();
        let out = st.create(t, body, own, dry_run)?;
        drop(st);
        self.gc.notify_one();
        Ok(present(t, &out))
    }

    /// PUT: replaces an object (optimistic concurrency when the body carries a resourceVersion).
    pub(crate) fn update(
        &self,
        t: &Target,
        name: &str,
        body: Value,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let mut st = self.lock();
        check_body_identity(t, name, &body)?;
        let old = st
            .find(&t.info.gr(), &t.namespace, name)
            .ok_or_else(|| t.not_found(name))?;
        if let Some(rv) = meta_str(&body, "resourceVersion").filter(|s| !s.is_empty())
            && rv != meta_str(&old, "resourceVersion").unwrap_or("")
        {
            return Err(StatusError::stale(&t.info.group, &t.info.plural, name));
        }
        // A PUT's uid is a precondition (kube-apiserver: 409, not 422).
        if let Some(uid) = meta_str(&body, "uid").filter(|u| !u.is_empty())
            && Some(uid) != meta_str(&old, "uid")
        {
            return Err(StatusError::conflict(
                &t.info.group,
                &t.info.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid").unwrap_or("")
                ),
            ));
        }
        let out = st.update(t, name, &old, body, own, dry_run)?;
        drop(st);
        self.gc.notify_one();
        Ok(present(t, &out))
    }

    /// PATCH with a merge or JSON patch already applied by `f` to the current object.
    pub(crate) fn patch(
        &self,
        t: &Target,
        name: &str,
        f: impl FnOnce(&Value) -> ApiResult<Value>,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let mut st = self.lock();
        let old = st
            .find(&t.info.gr(), &t.namespace, name)
            .ok_or_else(|| t.not_found(name))?;
        let current = present(t, &old);
        let patched = f(&current)?;
        if let Some(rv) = meta_str(&patched, "resourceVersion").filter(|r| !r.is_empty())
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(StatusError::stale(&t.info.group, &t.info.plural, name));
        }
        let out = st.update(t, name, &old, patched, own, dry_run)?;
        drop(st);
        self.gc.notify_one();
        Ok(present(t, &out))
    }

    /// Server-side apply; the object and whether it was created.
    pub(crate) fn apply(
        &self,
        t: &Target,
        name: &str,
        mut config: Value,
        manager: &str,
        force: bool,
        dry_run: bool,
    ) -> ApiResult<(Value, bool)> {
        if !config.is_object() {
            return Err(StatusError::bad_request(
                "apply configuration must be an object",
            ));
        }
        if config
            .pointer("/metadata/managedFields")
            .is_some_and(|m| !m.is_null())
        {
            return Err(StatusError::bad_request(
                "metadata.managedFields must be nil",
            ));
        }
        if meta_str(&config, "name").is_none() {
            set_meta(&mut config, "name", json!(name));
        }
        check_body_identity(t, name, &config)?;
        check_type(t, &config)?;
        if let Some(v) = t.info.version(&t.version) {
            v.prune(&mut config);
        }
        if t.info.status {
            if t.is_status() {
                let keep = json!({
                    "apiVersion": config.get("apiVersion").cloned().unwrap_or(Value::Null),
                    "kind": config.get("kind").cloned().unwrap_or(Value::Null),
                    "metadata": {"name": name},
                    "status": config.get("status").cloned().unwrap_or(Value::Null),
                });
                config = keep;
                if config.get("status").is_some_and(Value::is_null)
                    && let Some(o) = config.as_object_mut()
                {
                    o.remove("status");
                }
            } else if let Some(o) = config.as_object_mut() {
                o.remove("status");
            }
        }
        if t.info.namespaced {
            set_meta(&mut config, "namespace", json!(t.namespace));
        }
        let mut st = self.lock();
        let old = st.find(&t.info.gr(), &t.namespace, name);
        if let (Some(rv), Some(old)) = (meta_str(&config, "resourceVersion"), &old)
            && rv != meta_str(old, "resourceVersion").unwrap_or("")
        {
            return Err(StatusError::stale(&t.info.group, &t.info.plural, name));
        }
        meta::remove_meta(&mut config, "resourceVersion");
        let (live, entries) = match &old {
            Some(o) => {
                let mut l = present(t, o);
                let entries =
                    apply::decode_managed(l.pointer("/metadata/managedFields")).unwrap_or_default();
                meta::remove_meta(&mut l, "managedFields");
                (l, entries)
            }
            None => {
                if t.is_status() {
                    return Err(t.not_found(name));
                }
                // A uid in the configuration names an object that must exist: apply never
                // creates it (so a deleted object is not brought back).
                if let Some(uid) = meta_str(&config, "uid").filter(|u| !u.is_empty()) {
                    return Err(StatusError::conflict(
                        &t.info.group,
                        &t.info.plural,
                        name,
                        &format!(
                            "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
                        ),
                    ));
                }
                let mut l = json!({"apiVersion": t.api_version(), "kind": t.info.kind, "metadata": {"name": name}});
                if t.info.namespaced {
                    set_meta(&mut l, "namespace", json!(t.namespace));
                }
                (l, vec![])
            }
        };
        let schema = t
            .info
            .version(&t.version)
            .map(|v| v.schema.clone())
            .unwrap_or(crate::schema::Schema::Deduced);
        let now = meta::now();
        let api_version = t.api_version();
        let req = ApplyRequest {
            manager,
            subresource: t.subresource.as_deref(),
            api_version: &api_version,
            force,
            now: &now,
        };
        let (new, entries) =
            apply::apply(entries, &live, &config, &schema, &req).map_err(|conflicts| {
                let mut e = StatusError::new(409, "Conflict", apply::conflict_message(&conflicts));
                e.details = Some(json!({
                    "causes": conflicts.iter().map(|c| json!({
                        "reason": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.manager),
                        "field": c.path,
                    })).collect::<Vec<_>>()
                }));
                e
            })?;
        let result = match &old {
            Some(o) => (
                st.update(t, name, o, new, Ownership::Given(entries), dry_run)?,
                false,
            ),
            None => (st.create(t, new, Ownership::Given(entries), dry_run)?, true),
        };
        drop(st);
        self.gc.notify_one();
        Ok((present(t, &result.0), result.1))
    }

    /// DELETE: removes an object or marks it for deletion; returns its last state.
    pub(crate) fn delete(&self, t: &Target, name: &str, opts: &DeleteOptions) -> ApiResult<Value> {
        let mut st = self.lock();
        let out = st.delete(&t.info.gr(), &t.namespace, name, opts)?;
        drop(st);
        self.gc.notify_one();
        Ok(present(t, &out))
    }

    /// DELETE on a collection: deletes every matching object; returns them as a list.
    pub(crate) fn delete_collection(
        &self,
        t: &Target,
        opts: &ListOptions,
        del: &DeleteOptions,
    ) -> ApiResult<Value> {
        let mut st = self.lock();
        let keys: Vec<ObjKey> = st
            .objects
            .get(&t.info.gr())
            .map(|m| {
                m.iter()
                    .filter(|(k, o)| {
                        (t.namespace.is_empty() || k.0 == t.namespace) && opts.matches(o)
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut items = Vec::new();
        for (ns, name) in keys {
            let gone = st.delete(&t.info.gr(), &ns, &name, del)?;
            items.push(present(t, &gone));
        }
        let rv = st.rv;
        drop(st);
        self.gc.notify_one();
        Ok(
            json!({"apiVersion": t.api_version(), "kind": t.info.list_kind, "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
        )
    }

    /// All objects of all resources (for the garbage collector).
    pub(crate) fn snapshot(&self) -> Vec<(GroupResource, Arc<Value>)> {
        let st = self.lock();
        st.objects
            .iter()
            .flat_map(|(gr, m)| m.values().map(move |o| (gr.clone(), o.clone())))
            .collect()
    }

    /// Internal metadata update by a controller; skipped when the object changed uid or vanished.
    pub(crate) fn controller_update(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        uid: &str,
        f: impl FnOnce(&mut Value),
    ) -> ApiResult<()> {
        let mut st = self.lock();
        let Some(info) = st.registry.get(gr) else {
            return Ok(());
        };
        let Some(old) = st.find(gr, ns, name) else {
            return Ok(());
        };
        if meta_str(&old, "uid") != Some(uid) {
            return Ok(());
        }
        let t = storage_target(&info, ns);
        let mut new = (*old).clone();
        f(&mut new);
        st.update(
            &t,
            name,
            &old,
            new,
            Ownership::System(CONTROLLER_MANAGER.into()),
            false,
        )?;
        drop(st);
        self.gc.notify_one();
        Ok(())
    }

    /// Internal delete by a controller (uid-guarded).
    pub(crate) fn controller_delete(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        uid: &str,
        p: Propagation,
    ) -> ApiResult<()> {
        let mut st = self.lock();
        let opts = DeleteOptions {
            propagation: Some(p),
            uid: Some(uid.to_string()),
            resource_version: None,
        };
        match st.delete(gr, ns, name, &opts) {
            Ok(_) => {}
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
        drop(st);
        self.gc.notify_one();
        Ok(())
    }
}

fn storage_target(info: &Arc<ResourceInfo>, ns: &str) -> Target {
    Target {
        version: info
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default(),
        info: info.clone(),
        namespace: ns.to_string(),
        subresource: None,
    }
}

/// The object as served at the target's version.
fn present(t: &Target, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(t.api_version()));
        m.insert("kind".into(), json!(t.info.kind));
    }
    o
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = json!({"rv": rv, "ns": key.0, "name": key.1}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(tok: &str) -> ApiResult<(u64, ObjKey)> {
    let bad = || StatusError::bad_request("continue key is not valid");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((
        v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?,
        (
            v.get("ns")
                .and_then(Value::as_str)
                .ok_or_else(bad)?
                .to_string(),
            v.get("name")
                .and_then(Value::as_str)
                .ok_or_else(bad)?
                .to_string(),
        ),
    ))
}

fn check_type(t: &Target, body: &Value) -> ApiResult<()> {
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !av.is_empty() && av != t.api_version() {
        return Err(StatusError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            t.api_version()
        )));
    }
    if !kind.is_empty() && kind != t.info.kind {
        return Err(StatusError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            t.info.kind
        )));
    }
    Ok(())
}

fn check_body_identity(t: &Target, name: &str, body: &Value) -> ApiResult<()> {
    if !body.is_object() {
        return Err(StatusError::bad_request(
            "the request body must be an object",
        ));
    }
    let body_name = meta_str(body, "name").unwrap_or("");
    if body_name != name {
        return Err(StatusError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(t, body)
}

fn gr_is(gr: &GroupResource, group: &str, resource: &str) -> bool {
    gr.group == group && gr.resource == resource
}

impl State {
    fn create(
        &mut self,
        t: &Target,
        mut body: Value,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Arc<Value>> {
        if !body.is_object() {
            return Err(StatusError::bad_request(
                "the request body must be an object",
            ));
        }
        check_type(t, &body)?;
        check_namespace(t, &body)?;
        let gr = t.info.gr();
        let mut name = meta_str(&body, "name").unwrap_or("").to_string();
        if name.is_empty() {
            let prefix = meta_str(&body, "generateName").unwrap_or("").to_string();
            if prefix.is_empty() {
                return Err(StatusError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    "",
                    vec![(
                        "FieldValueRequired".into(),
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
            for _ in 0..8 {
                name = format!("{prefix}{}", meta::random_suffix());
                if self.find(&gr, &t.namespace, &name).is_none() {
                    break;
                }
            }
        }
        if let Err(msg) = meta::validate_name(&name, meta::name_rule(&t.info.group, &t.info.plural))
        {
            return Err(StatusError::invalid(
                &t.info.group,
                &t.info.kind,
                &name,
                vec![(
                    "FieldValueInvalid".into(),
                    "metadata.name".into(),
                    format!("Invalid value: \"{name}\": {msg}"),
                )],
            ));
        }
        self.check_namespace_exists(t, &name)?;
        if self.find(&gr, &t.namespace, &name).is_some() {
            return Err(StatusError::already_exists(
                &t.info.group,
                &t.info.plural,
                &name,
            ));
        }
        let version = t
            .info
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        if t.info.status
            && !matches!(own, Ownership::Given(_))
            && let Some(o) = body.as_object_mut()
        {
            o.remove("status");
        }
        stamp_identity(t, &mut body, &version, &name);
        {
            let m = meta::meta_mut(&mut body);
            for f in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
            ] {
                m.remove(f);
            }
        }
        // Ownership is computed against an empty object, before server-set fields.
        let entries = match own {
            Ownership::Given(e) => e,
            Ownership::Track(m) | Ownership::System(m) => {
                let from_body = apply::decode_managed(body.pointer("/metadata/managedFields"))
                    .unwrap_or_default();
                let empty = json!({});
                let schema = t
                    .info
                    .version(&t.version)
                    .map(|v| v.schema.clone())
                    .unwrap_or(crate::schema::Schema::Deduced);
                let mut plain = body.clone();
                meta::remove_meta(&mut plain, "managedFields");
                apply::track_update(
                    from_body,
                    &empty,
                    &plain,
                    &schema,
                    &m,
                    None,
                    &t.api_version(),
                    &meta::now(),
                )
            }
        };
        set_managed(&mut body, &entries);
        {
            let m = meta::meta_mut(&mut body);
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(meta::now()));
            if t.info.generation {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        if gr_is(&gr, "", "namespaces") {
            let o = body
                .as_object_mut()
                .ok_or_else(|| StatusError::internal("namespace is not an object"))?;
            o.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            o.insert("status".into(), json!({"phase": "Active"}));
            let labels = meta::meta_mut(&mut body)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.validate_crd(&name, &body)?;
            let status = crd_status(&body, None);
            if let Some(o) = body.as_object_mut() {
                o.insert("status".into(), status);
            }
        }
        validate_schema(t, &name, &body, None)?;
        if dry_run {
            return Ok(Arc::new(body));
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.registry.register_crd(&body);
        }
        Ok(self.store(&gr, &t.namespace, &name, body, None))
    }

    fn update(
        &mut self,
        t: &Target,
        name: &str,
        old: &Arc<Value>,
        mut new: Value,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Arc<Value>> {
        if !new.is_object() {
            return Err(StatusError::bad_request(
                "the request body must be an object",
            ));
        }
        check_type(t, &new)?;
        check_namespace(t, &new)?;
        if let Some(uid) = meta_str(&new, "uid").filter(|u| !u.is_empty())
            && Some(uid) != meta_str(old, "uid")
        {
            let message = format!("Invalid value: \"{uid}\": field is immutable");
            return Err(StatusError::invalid(
                &t.info.group,
                &t.info.kind,
                name,
                vec![("FieldValueInvalid".into(), "metadata.uid".into(), message)],
            ));
        }
        let gr = t.info.gr();
        let storage_version = t
            .info
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        if t.is_status() {
            let status = new.get("status").cloned();
            new = (**old).clone();
            if let Some(o) = new.as_object_mut() {
                match status {
                    Some(s) => o.insert("status".into(), s),
                    None => o.remove("status"),
                };
            }
        } else if t.info.status
            && let Some(o) = new.as_object_mut()
        {
            match old.get("status") {
                Some(s) => o.insert("status".into(), s.clone()),
                None => o.remove("status"),
            };
        }
        stamp_identity(t, &mut new, &storage_version, name);
        {
            let m = meta::meta_mut(&mut new);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old.pointer(&format!("/metadata/{f}")) {
                    Some(v) => m.insert(f.into(), v.clone()),
                    None => m.remove(f),
                };
            }
            m.insert(
                "resourceVersion".into(),
                old.pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.validate_crd(name, &new)?;
            let status = crd_status(&new, Some(old));
            if let Some(o) = new.as_object_mut() {
                o.insert("status".into(), status);
            }
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            let before = finalizers(old);
            if finalizers(&new).iter().any(|f| !before.contains(f)) {
                return Err(StatusError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    name,
                    vec![(
                        "FieldValueForbidden".into(),
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        // Field ownership.
        let schema = t
            .info
            .version(&t.version)
            .map(|v| v.schema.clone())
            .unwrap_or(crate::schema::Schema::Deduced);
        let entries = match own {
            Ownership::Given(e) => e,
            Ownership::Track(m) | Ownership::System(m) => {
                let requested = if t.is_status() {
                    None
                } else {
                    apply::decode_managed(new.pointer("/metadata/managedFields"))
                        .filter(|e| !e.is_empty())
                };
                let base = requested.unwrap_or_else(|| {
                    apply::decode_managed(old.pointer("/metadata/managedFields"))
                        .unwrap_or_default()
                });
                let mut a = (**old).clone();
                let mut b = new.clone();
                meta::remove_meta(&mut a, "managedFields");
                meta::remove_meta(&mut b, "managedFields");
                apply::track_update(
                    base,
                    &a,
                    &b,
                    &schema,
                    &m,
                    t.subresource.as_deref(),
                    &t.api_version(),
                    &meta::now(),
                )
            }
        };
        set_managed(&mut new, &entries);
        if t.info.generation && non_meta(&new, t.info.status) != non_meta(old, t.info.status) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_meta(&mut new, "generation", json!(g + 1));
        }
        validate_schema(t, name, &new, Some(old))?;
        if strip_for_compare(&new) == strip_for_compare(old) {
            return Ok(old.clone());
        }
        if dry_run {
            return Ok(Arc::new(new));
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.registry.register_crd(&new);
        }
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let spec_finalizers_empty = new
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if deleting
            && finalizers(&new).is_empty()
            && (!gr_is(&gr, "", "namespaces") || spec_finalizers_empty)
        {
            let stored = Arc::new(new);
            return Ok(self.remove(&gr, &t.namespace, name, &stored));
        }
        Ok(self.store(&gr, &t.namespace, name, new, Some(old.clone())))
    }

    fn delete(
        &mut self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Arc<Value>> {
        let info = self
            .registry
            .get(gr)
            .ok_or_else(|| StatusError::not_found(&gr.group, &gr.resource, name))?;
        let old = self
            .find(gr, ns, name)
            .ok_or_else(|| StatusError::not_found(&gr.group, &gr.resource, name))?;
        if let Some(uid) = &opts.uid
            && meta_str(&old, "uid") != Some(uid.as_str())
        {
            return Err(StatusError::conflict(
                &gr.group,
                &gr.resource,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid").unwrap_or("")
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && meta_str(&old, "resourceVersion") != Some(rv.as_str())
        {
            return Err(StatusError::conflict(
                &gr.group,
                &gr.resource,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&old, "resourceVersion").unwrap_or("")
                ),
            ));
        }
        let mut fins = finalizers(&old);
        match opts.propagation {
            Some(Propagation::Orphan) if !fins.iter().any(|f| f == "orphan") => {
                fins.push("orphan".into())
            }
            Some(Propagation::Foreground) if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            _ => {}
        }
        let is_namespace = gr_is(gr, "", "namespaces");
        let already = old.pointer("/metadata/deletionTimestamp").is_some();
        if fins.is_empty() && !is_namespace {
            return Ok(self.remove(gr, ns, name, &old));
        }
        if already && fins == finalizers(&old) {
            return Ok(old);
        }
        let mut new = (*old).clone();
        meta::set_finalizers(&mut new, &fins);
        if !already {
            set_meta(&mut new, "deletionTimestamp", json!(meta::now()));
            set_meta(&mut new, "deletionGracePeriodSeconds", json!(0));
            if info.generation {
                let g = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                set_meta(&mut new, "generation", json!(g + 1));
            }
        }
        if is_namespace && let Some(o) = new.as_object_mut() {
            o.insert("status".into(), json!({"phase": "Terminating"}));
        }
        meta::remove_meta(&mut new, "resourceVersion");
        Ok(self.store(gr, ns, name, new, Some(old)))
    }
}

/// OpenAPI validation of a custom resource against its CRD version's schema, after
/// pruning, as the apiserver's create/update strategies do; on update unchanged
/// values are ratcheted and the status subresource validates `.status` only.
fn validate_schema(t: &Target, name: &str, new: &Value, old: Option<&Value>) -> ApiResult<()> {
    let Some(validator) = t.info.version(&t.version).and_then(|v| v.validator.clone()) else {
        return Ok(());
    };
    let errs = match old {
        Some(old) if t.is_status() => validator.validate_status(new, old),
        old => validator.validate(new, old),
    };
    if errs.is_empty() {
        return Ok(());
    }
    Err(crate::validation::invalid(
        &t.info.group,
        &t.info.kind,
        name,
        &errs,
    ))
}

fn set_managed(obj: &mut Value, entries: &[ManagedEntry]) {
    if entries.is_empty() {
        meta::remove_meta(obj, "managedFields");
    } else {
        set_meta(obj, "managedFields", apply::encode_managed(entries));
    }
}

/// What create and update both impose on a stored object: the storage apiVersion and the
/// kind, pruning by the structural schema, and the name and namespace of the request.
fn stamp_identity(t: &Target, body: &mut Value, version: &str, name: &str) {
    if let Some(o) = body.as_object_mut() {
        o.insert("apiVersion".into(), json!(t.info.api_version(version)));
        o.insert("kind".into(), json!(t.info.kind));
    }
    if let Some(v) = t.info.version(&t.version) {
        v.prune(body);
    }
    let m = meta::meta_mut(body);
    m.insert("name".into(), json!(name));
    if t.info.namespaced {
        m.insert("namespace".into(), json!(t.namespace));
    } else {
        m.remove("namespace");
    }
}
