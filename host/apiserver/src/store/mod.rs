//! The object store: one global resourceVersion counter (like an etcd revision),
//! the objects of every resource, the bounded watch history and the write
//! pipeline (create, update, patch, apply, delete) with kube-apiserver's rules
//! for metadata, status subresource, generation, finalizers and no-op writes.
//!
//! Here: the store's types and the request-level writes (locking, preconditions, waking
//! the garbage collector). By concept: `history` (objects, resourceVersions, the uid
//! index, watch history), `read` (get, paged list, watch start), `write` (the write
//! pipeline's rules), `ssa` (server-side apply), `crd` and `namespaces` (their
//! lifecycles).

use crate::apply::ManagedEntry;
use crate::error::{ApiResult, StatusError};
use crate::meta::meta_str;
use crate::registry::{GroupResource, Registry, ResourceInfo};
use kubewasm_core::selector::{FieldSelector, LabelSelector};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, broadcast};

mod crd;
mod history;
mod namespaces;
mod read;
mod seed;
mod ssa;
mod write;

use write::check_body_identity;

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
    /// Its watch lines as sent in full, serialised once for every watcher (as
    /// kube-apiserver's watch cache does): filled by the watch streams.
    pub(crate) lines: crate::watch::Lines,
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
    /// A seeded object ([`Store::seed`]): these entries, and the identity and status
    /// the object is written with.
    Seeded(Vec<ManagedEntry>),
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
    /// `dryRun=All`: checked and answered, nothing changed.
    pub(crate) dry_run: bool,
}

/// The answer of a delete: the object, and whether it is gone (else it is only marked
/// for deletion and waits for finalizers).
pub(crate) struct Deleted {
    /// The object's last state, or its state marked for deletion.
    pub(crate) object: Value,
    /// Removed now (or, in a dry run, would be).
    pub(crate) gone: bool,
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

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchFrom {
    /// The current objects as ADDED, then their changes.
    State,
    /// The retained events after this resourceVersion (410 Expired when compacted).
    After(u64),
    /// The changes from now on, without the current objects.
    Now,
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
        kubewasm_core::sync::lock(&self.state)
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
        if !dry_run {
            self.gc.notify_one();
        }
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
        if !dry_run {
            self.gc.notify_one();
        }
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
        if !dry_run {
            self.gc.notify_one();
        }
        Ok(present(t, &out))
    }

    /// DELETE: removes an object or marks it for deletion.
    pub(crate) fn delete(
        &self,
        t: &Target,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Deleted> {
        let mut st = self.lock();
        let (out, gone) = st.delete(&t.info.gr(), &t.namespace, name, opts)?;
        drop(st);
        if !opts.dry_run {
            self.gc.notify_one();
        }
        Ok(Deleted {
            object: present(t, &out),
            gone,
        })
    }

    /// DELETE on a collection: deletes every matching object; answers the list of them as
    /// they were before (kube-apiserver answers the list it deleted from).
    pub(crate) fn delete_collection(
        &self,
        t: &Target,
        opts: &ListOptions,
        del: &DeleteOptions,
    ) -> ApiResult<Value> {
        let mut st = self.lock();
        let listed: Vec<(ObjKey, Arc<Value>)> = st
            .objects
            .get(&t.info.gr())
            .map(|m| {
                m.iter()
                    .filter(|(k, o)| {
                        (t.namespace.is_empty() || k.0 == t.namespace) && opts.matches(o)
                    })
                    .map(|(k, o)| (k.clone(), o.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let rv = st.rv;
        let mut items = Vec::new();
        for ((ns, name), obj) in listed {
            st.delete(&t.info.gr(), &ns, &name, del)?;
            items.push(present(t, &obj));
        }
        drop(st);
        if !del.dry_run {
            self.gc.notify_one();
        }
        Ok(
            json!({"apiVersion": t.api_version(), "kind": t.info.list_kind, "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
        )
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
            dry_run: false,
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

fn gr_is(gr: &GroupResource, group: &str, resource: &str) -> bool {
    gr.group == group && gr.resource == resource
}
