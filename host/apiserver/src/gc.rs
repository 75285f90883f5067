//! Garbage collection by ownerReferences (background, foreground, orphan) and
//! namespace termination, run as a task woken after writes.

use crate::meta::{finalizers, meta_str, owner_refs};
use crate::registry::GroupResource;
use crate::store::{Propagation, Store};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[derive(Debug)]
enum Action {
    DropRefs(Obj, Vec<String>),
    RemoveFinalizer(Obj, &'static str),
    Delete(Obj, Propagation),
    FinalizeNamespace(String, String),
}

#[derive(Debug, Clone)]
struct Obj {
    gr: GroupResource,
    ns: String,
    name: String,
    uid: String,
}

/// `resource.group ns/name`, as a log field's plain value.
impl std::fmt::Display for Obj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.gr.resource)?;
        if !self.gr.group.is_empty() {
            write!(f, ".{}", self.gr.group)?;
        }
        if self.ns.is_empty() {
            write!(f, " {}", self.name)
        } else {
            write!(f, " {}/{}", self.ns, self.name)
        }
    }
}

/// What the collector does, as a log field's plain value (not Rust's debug form).
impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::DropRefs(o, uids) => {
                write!(f, "drop owner references {} of {o}", uids.join(","))
            }
            Action::RemoveFinalizer(o, name) => write!(f, "remove finalizer {name} of {o}"),
            Action::Delete(o, p) => {
                let how = match p {
                    Propagation::Background => "background",
                    Propagation::Foreground => "foreground",
                    Propagation::Orphan => "orphan",
                };
                write!(f, "delete {o} ({how})")
            }
            Action::FinalizeNamespace(name, _) => write!(f, "finalize namespace {name}"),
        }
    }
}

fn obj(gr: &GroupResource, o: &Value) -> Obj {
    Obj {
        gr: gr.clone(),
        ns: meta_str(o, "namespace").unwrap_or("").to_string(),
        name: meta_str(o, "name").unwrap_or("").to_string(),
        uid: meta_str(o, "uid").unwrap_or("").to_string(),
    }
}

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

fn plan(snapshot: &[(GroupResource, Arc<Value>)]) -> Vec<Action> {
    let by_uid: HashMap<&str, &Value> = snapshot
        .iter()
        .filter_map(|(_, o)| meta_str(o, "uid").map(|u| (u, o.as_ref())))
        .collect();
    let mut referenced: HashSet<&str> = HashSet::new();
    let mut blocking: HashSet<&str> = HashSet::new();
    let mut actions = Vec::new();
    for (gr, o) in snapshot {
        let refs = owner_refs(o);
        let mut dangling = Vec::new();
        let mut orphaning = Vec::new();
        let mut foreground = Vec::new();
        let mut live = false;
        for r in &refs {
            let Some(uid) = r.get("uid").and_then(Value::as_str) else {
                continue;
            };
            if let Some((u, _)) = by_uid.get_key_value(uid) {
                referenced.insert(u);
                if r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                    blocking.insert(u);
                }
            }
            match by_uid.get(uid) {
                None => dangling.push(uid.to_string()),
                Some(owner) if deleting(owner) => {
                    let f = finalizers(owner);
                    if f.iter().any(|x| x == "orphan") {
                        orphaning.push(uid.to_string());
                    } else if f.iter().any(|x| x == "foregroundDeletion") {
                        foreground.push(uid.to_string());
                    } else {
                        live = true;
                    }
                }
                Some(_) => live = true,
            }
        }
        if refs.is_empty() {
            continue;
        }
        if !orphaning.is_empty() {
            actions.push(Action::DropRefs(obj(gr, o), orphaning));
        } else if !live && (!dangling.is_empty() || !foreground.is_empty()) {
            if !deleting(o) {
                let p = if foreground.is_empty() {
                    Propagation::Background
                } else {
                    Propagation::Foreground
                };
                actions.push(Action::Delete(obj(gr, o), p));
            }
        } else if live && (!dangling.is_empty() || !foreground.is_empty()) {
            dangling.extend(foreground);
            actions.push(Action::DropRefs(obj(gr, o), dangling));
        }
    }
    for (gr, o) in snapshot.iter().filter(|(_, o)| deleting(o)) {
        let uid = meta_str(o, "uid").unwrap_or("");
        let f = finalizers(o);
        if f.iter().any(|x| x == "orphan") && !referenced.contains(uid) {
            actions.push(Action::RemoveFinalizer(obj(gr, o), "orphan"));
        }
        if f.iter().any(|x| x == "foregroundDeletion") && !blocking.contains(uid) {
            actions.push(Action::RemoveFinalizer(obj(gr, o), "foregroundDeletion"));
        }
        if gr.group.is_empty() && gr.resource == "namespaces" {
            let name = meta_str(o, "name").unwrap_or("");
            let contents: Vec<&(GroupResource, Arc<Value>)> = snapshot
                .iter()
                .filter(|(_, c)| meta_str(c, "namespace") == Some(name))
                .collect();
            if contents.is_empty() {
                actions.push(Action::FinalizeNamespace(name.to_string(), uid.to_string()));
            }
            for (cgr, c) in contents {
                if !deleting(c) {
                    actions.push(Action::Delete(obj(cgr, c), Propagation::Background));
                }
            }
        }
    }
    actions
}

fn execute(store: &Store, action: Action) {
    let result = match &action {
        Action::DropRefs(o, uids) => store.controller_update(&o.gr, &o.ns, &o.name, &o.uid, |v| {
            let kept: Vec<Value> = owner_refs(v)
                .into_iter()
                .filter(|r| {
                    r.get("uid")
                        .and_then(Value::as_str)
                        .is_none_or(|u| !uids.iter().any(|x| x == u))
                })
                .collect();
            if kept.is_empty() {
                crate::meta::remove_meta(v, "ownerReferences");
            } else {
                crate::meta::set_meta(v, "ownerReferences", Value::Array(kept));
            }
        }),
        Action::RemoveFinalizer(o, f) => {
            store.controller_update(&o.gr, &o.ns, &o.name, &o.uid, |v| {
                let kept: Vec<String> = finalizers(v).into_iter().filter(|x| x != f).collect();
                crate::meta::set_finalizers(v, &kept);
            })
        }
        Action::Delete(o, p) => store.controller_delete(&o.gr, &o.ns, &o.name, &o.uid, *p),
        Action::FinalizeNamespace(name, uid) => store.finalize_namespace(name, uid),
    };
    match result {
        Ok(()) => tracing::debug!(action = %action, "garbage collector acted"),
        Err(e) => {
            tracing::warn!(action = %action, error = %e.message, "garbage collector action failed")
        }
    }
}

/// Runs one collection pass; true when it acted.
pub(crate) fn pass(store: &Store) -> bool {
    let actions = plan(&store.snapshot());
    let acted = !actions.is_empty();
    for a in actions {
        execute(store, a);
    }
    acted
}

/// The collector task: a pass after every batch of writes, until shutdown.
pub(crate) async fn run(store: Arc<Store>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let notify = store.gc_notify();
    loop {
        tokio::select! {
            _ = notify.notified() => {}
            _ = shutdown.changed() => return,
        }
        for _ in 0..64 {
            if !pass(&store) {
                break;
            }
        }
    }
}
