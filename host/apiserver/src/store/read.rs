//! Reads: one object, a list page by page (continue tokens, refused with 410 once
//! compacted past them), the start of a watch (current objects or the retained events
//! after a resourceVersion, taken with the subscription), and the whole store for the
//! garbage collector.

use super::{ListOptions, ObjKey, Store, Target, WatchFrom, WatchStart, present};
use crate::error::{ApiResult, StatusError};
use crate::registry::GroupResource;
use base64::Engine;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

impl Store {
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
        // From the continue key (or the namespace's first), so a page costs its own
        // objects, not the pages before it.
        let ns = &t.namespace;
        let lower = match (start_after, ns.is_empty()) {
            (Some(k), _) => Bound::Excluded(k),
            (None, false) => Bound::Included((ns.clone(), String::new())),
            (None, true) => Bound::Unbounded,
        };
        let mut matching = objs
            .range((lower, Bound::Unbounded))
            .take_while(|(k, _)| ns.is_empty() || &k.0 == ns)
            .filter(|(_, o)| opts.matches(o));
        let limit = opts.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut page = Vec::new();
        let mut last = None;
        for (k, o) in matching.by_ref().take(limit) {
            page.push(present(t, o));
            last = Some(k);
        }
        let mut list_meta = Map::new();
        list_meta.insert("resourceVersion".into(), json!(list_rv.to_string()));
        if let Some(last) = last
            && matching.next().is_some()
        {
            list_meta.insert("continue".into(), json!(encode_continue(list_rv, last)));
            // As kube-apiserver: counted only without selectors (a count of the objects
            // left, not of those that would match).
            if opts.labels.is_empty() && opts.fields.is_empty() {
                list_meta.insert("remainingItemCount".into(), json!(matching.count() + 1));
            }
        }
        Ok(json!({
            "apiVersion": t.api_version(),
            "kind": t.info.list_kind,
            "metadata": list_meta,
            "items": page,
        }))
    }

    /// Starts a watch from `from`.
    pub(crate) fn watch(&self, gr: &GroupResource, from: WatchFrom) -> ApiResult<WatchStart> {
        let st = self.lock();
        let rx = st.events.subscribe();
        let (initial, backlog) = match from {
            WatchFrom::State => {
                let initial = st
                    .objects
                    .get(gr)
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default();
                (initial, vec![])
            }
            WatchFrom::Now => (vec![], vec![]),
            WatchFrom::After(n) => {
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
                (vec![], backlog)
            }
        };
        Ok(WatchStart {
            initial,
            backlog,
            rx,
            rv: st.rv,
        })
    }

    /// All objects of all resources (for the garbage collector).
    pub(crate) fn snapshot(&self) -> Vec<(GroupResource, Arc<Value>)> {
        let st = self.lock();
        st.objects
            .iter()
            .flat_map(|(gr, m)| m.values().map(move |o| (gr.clone(), o.clone())))
            .collect()
    }
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
