//! Objects and their history: the one resourceVersion counter, the objects of every
//! resource by namespace and name, the uid index, and the bounded event history that
//! watches replay from (older resourceVersions are compacted: 410 Expired).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Event, EventType, State, gr_is};
use crate::meta::{meta_str, set_meta};
use crate::registry::GroupResource;

impl State {
    pub(super) fn find(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(gr)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    pub(super) fn record(
        &mut self,
        gr: &GroupResource,
        ty: EventType,
        object: Arc<Value>,
        prev: Option<Arc<Value>>,
    ) {
        let ev = Arc::new(Event {
            rv: self.rv,
            gr: gr.clone(),
            ty,
            object,
            prev,
            lines: Default::default(),
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        // No receivers is fine: nobody watches.
        let _ = self.events.send(ev);
    }

    pub(super) fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub(super) fn store(
        &mut self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        mut obj: Value,
        prev: Option<Arc<Value>>,
    ) -> Arc<Value> {
        let rv = self.next_rv();
        set_meta(&mut obj, "resourceVersion", json!(rv.to_string()));
        let obj = Arc::new(obj);
        if let Some(uid) = meta_str(&obj, "uid") {
            self.uids.insert(
                uid.to_string(),
                (gr.clone(), (ns.to_string(), name.to_string())),
            );
        }
        self.objects
            .entry(gr.clone())
            .or_default()
            .insert((ns.to_string(), name.to_string()), obj.clone());
        let ty = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(gr, ty, obj.clone(), prev);
        obj
    }

    pub(super) fn remove(
        &mut self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        old: &Arc<Value>,
    ) -> Arc<Value> {
        if let Some(m) = self.objects.get_mut(gr) {
            m.remove(&(ns.to_string(), name.to_string()));
        }
        if let Some(uid) = meta_str(old, "uid") {
            self.uids.remove(uid);
        }
        let rv = self.next_rv();
        let mut last = (**old).clone();
        set_meta(&mut last, "resourceVersion", json!(rv.to_string()));
        let last = Arc::new(last);
        self.record(gr, EventType::Deleted, last.clone(), Some(old.clone()));
        if gr_is(gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.drop_crd(old);
        }
        last
    }
}
