//! Server-side apply and managedFields tracking, after structured-merge-diff:
//! field sets of objects, comparison, apply merge, pruning of fields a manager
//! stopped applying, conflict detection and `Update` ownership transfer.

use crate::fieldset::{FieldSet, Path, PathElement, canonical, display_path};
use crate::schema::{ListKind, Schema};
use serde_json::{Map, Value, json};

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ManagedEntry {
    /// Manager name.
    pub(crate) manager: String,
    /// `Apply` or `Update`.
    pub(crate) operation: String,
    /// API version the fields were written with.
    pub(crate) api_version: String,
    /// RFC3339 time of the last change by this manager.
    pub(crate) time: Option<String>,
    /// `status` for entries written through the status subresource.
    pub(crate) subresource: Option<String>,
    /// The owned fields.
    pub(crate) set: FieldSet,
}

impl ManagedEntry {
    fn is(
        &self,
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        api_version: &str,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// The manager as kube-apiserver prints it in conflict messages.
    pub(crate) fn display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// An apply conflict: the other manager (as displayed) and the field path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Conflict {
    /// The manager, displayed like kube-apiserver (`"name"` or `"name" using v1`).
    pub(crate) manager: String,
    /// The field path, like `.spec.x`.
    pub(crate) path: String,
}

/// Decodes `metadata.managedFields`; `None` when an entry is malformed.
pub(crate) fn decode_managed(v: Option<&Value>) -> Option<Vec<ManagedEntry>> {
    let Some(v) = v else { return Some(Vec::new()) };
    if v.is_null() {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for e in v.as_array()? {
        let set = match e.get("fieldsV1") {
            Some(f) => FieldSet::from_fields_v1(f)?,
            None => FieldSet::new(),
        };
        out.push(ManagedEntry {
            manager: e
                .get("manager")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            operation: e.get("operation")?.as_str()?.to_string(),
            api_version: e
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            time: e.get("time").and_then(Value::as_str).map(String::from),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from),
            set,
        });
    }
    Some(out)
}

/// Encodes entries in kube-apiserver's order (operation, time, manager, apiVersion, subresource).
pub(crate) fn encode_managed(entries: &[ManagedEntry]) -> Value {
    let mut sorted: Vec<&ManagedEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            a.time.as_deref().unwrap_or(""),
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                b.time.as_deref().unwrap_or(""),
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(
        sorted
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.set.to_fields_v1());
                if let Some(s) = &e.subresource {
                    m.insert("subresource".into(), json!(s));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// Fields never tracked by managedFields.
fn strip_set() -> FieldSet {
    let mut s = FieldSet::new();
    let f = |x: &str| PathElement::Field(x.to_string());
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

fn item_element(kind: &ListKind, item: &Value, idx: usize) -> PathElement {
    match kind {
        ListKind::Set => PathElement::Value(canonical(item)),
        ListKind::Map(keys) => {
            let mut m = Map::new();
            for k in keys {
                if let Some(v) = item.get(k) {
                    m.insert(k.clone(), v.clone());
                }
            }
            if m.is_empty() {
                PathElement::Index(idx)
            } else {
                PathElement::Key(canonical(&Value::Object(m)))
            }
        }
        ListKind::Atomic => PathElement::Index(idx),
    }
}

/// The set of fields a (partial) object sets.
pub(crate) fn to_field_set(v: &Value, schema: &Schema) -> FieldSet {
    let mut set = FieldSet::new();
    walk_set(v, schema, &mut Vec::new(), &mut set);
    set
}

fn walk_set(v: &Value, schema: &Schema, path: &mut Path, set: &mut FieldSet) {
    match v {
        Value::Object(m) if !schema.is_atomic() => {
            for (k, cv) in m {
                let (cs, declared) = schema.child(k);
                path.push(PathElement::Field(k.clone()));
                walk_set(cv, &cs, path, set);
                let empty_map = cv.as_object().is_some_and(Map::is_empty);
                if cv.is_null() || empty_map || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let (kind, item_schema) = schema.list();
            if kind == ListKind::Atomic {
                set.insert(path);
            } else {
                for (i, item) in items.iter().enumerate() {
                    path.push(item_element(&kind, item, i));
                    walk_set(item, &item_schema, path, set);
                    set.insert(path);
                    path.pop();
                }
            }
        }
        _ => set.insert(path),
    }
}

/// Field-level differences between two objects.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Paths only in the new object.
    pub(crate) added: FieldSet,
    /// Leaf paths whose value changed.
    pub(crate) modified: FieldSet,
    /// Paths only in the old object.
    pub(crate) removed: FieldSet,
}

impl Comparison {
    /// True when the objects are equal field by field.
    pub(crate) fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Compares two objects; fields managedFields never tracks are left out.
pub(crate) fn compare(old: &Value, new: &Value, schema: &Schema) -> Comparison {
    let mut c = Comparison::default();
    walk_cmp(Some(old), Some(new), schema, &mut Vec::new(), &mut c);
    let strip = strip_set();
    c.added = c.added.difference(&strip);
    c.modified = c.modified.difference(&strip);
    c.removed = c.removed.difference(&strip);
    c
}

fn list_items<'a>(kind: &ListKind, v: Option<&'a Value>) -> Vec<(PathElement, &'a Value)> {
    v.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .enumerate()
                .map(|(i, it)| (item_element(kind, it, i), it))
                .collect()
        })
        .unwrap_or_default()
}

fn walk_cmp(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: &Schema,
    path: &mut Path,
    c: &mut Comparison,
) {
    if old.is_none() && new.is_none() {
        return;
    }
    let objects = old.is_none_or(Value::is_object) && new.is_none_or(Value::is_object);
    let arrays = old.is_none_or(Value::is_array) && new.is_none_or(Value::is_array);
    let (kind, item_schema) = schema.list();
    if objects && !schema.is_atomic() {
        let empty = Map::new();
        let o = old.and_then(Value::as_object).unwrap_or(&empty);
        let n = new.and_then(Value::as_object).unwrap_or(&empty);
        let mut keys: Vec<&String> = o.keys().collect();
        keys.extend(n.keys().filter(|k| !o.contains_key(*k)));
        for k in keys {
            let (cs, _) = schema.child(k);
            path.push(PathElement::Field(k.clone()));
            walk_cmp(o.get(k), n.get(k), &cs, path, c);
            mark(o.get(k), n.get(k), path, c);
            path.pop();
        }
    } else if arrays && kind != ListKind::Atomic {
        let o = list_items(&kind, old);
        let n = list_items(&kind, new);
        let mut elems: Vec<&PathElement> = o.iter().map(|(pe, _)| pe).collect();
        for (pe, _) in &n {
            if !o.iter().any(|(x, _)| x == pe) {
                elems.push(pe);
            }
        }
        for pe in elems {
            let oi = o.iter().find(|(x, _)| x == pe).map(|(_, v)| *v);
            let ni = n.iter().find(|(x, _)| x == pe).map(|(_, v)| *v);
            path.push(pe.clone());
            walk_cmp(oi, ni, &item_schema, path, c);
            mark(oi, ni, path, c);
            path.pop();
        }
    } else {
        match (old, new) {
            (None, Some(_)) => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            (Some(a), Some(b)) if a != b => c.modified.insert(path),
            _ => {}
        }
    }
}

fn mark(old: Option<&Value>, new: Option<&Value>, path: &Path, c: &mut Comparison) {
    match (old, new) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        _ => {}
    }
}

/// Merges an apply configuration into the live object.
pub(crate) fn merge(live: &Value, config: &Value, schema: &Schema) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) if !schema.is_atomic() => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    out.remove(k);
                    continue;
                }
                let (cs, _) = schema.child(k);
                let merged = match l.get(k) {
                    Some(lv) => merge(lv, cv, &cs),
                    None => cv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => {
            let (kind, item_schema) = schema.list();
            if kind == ListKind::Atomic {
                return config.clone();
            }
            let ce: Vec<(PathElement, &Value)> = c
                .iter()
                .enumerate()
                .map(|(i, it)| (item_element(&kind, it, i), it))
                .collect();
            let mut used = Vec::new();
            let mut out = Vec::new();
            for (i, li) in l.iter().enumerate() {
                let pe = item_element(&kind, li, i);
                match ce.iter().find(|(x, _)| *x == pe) {
                    Some((_, ci)) => {
                        out.push(merge(li, ci, &item_schema));
                        used.push(pe);
                    }
                    None => out.push(li.clone()),
                }
            }
            for (pe, ci) in ce {
                if !used.contains(&pe) {
                    out.push(ci.clone());
                }
            }
            Value::Array(out)
        }
        _ => config.clone(),
    }
}

fn item_matches(pe: &PathElement, item: &Value, idx: usize) -> bool {
    match pe {
        PathElement::Value(v) => canonical(item) == *v,
        PathElement::Key(k) => {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            !keys.is_empty() && keys.iter().all(|(name, val)| item.get(name) == Some(val))
        }
        PathElement::Index(i) => *i == idx,
        PathElement::Field(_) => false,
    }
}

/// Removes the value at `path` (with everything below it).
pub(crate) fn remove_path(obj: &mut Value, path: &[PathElement]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match (first, obj) {
        (PathElement::Field(f), Value::Object(m)) => {
            if rest.is_empty() {
                m.remove(f);
            } else if let Some(child) = m.get_mut(f) {
                remove_path(child, rest);
            }
        }
        (pe, Value::Array(items)) => {
            let Some(idx) = items
                .iter()
                .enumerate()
                .position(|(i, it)| item_matches(pe, it, i))
            else {
                return;
            };
            if rest.is_empty() {
                items.remove(idx);
            } else if let Some(child) = items.get_mut(idx) {
                remove_path(child, rest);
            }
        }
        _ => {}
    }
}

/// Ownership after a non-apply write (`Update` operation) by `manager`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn track_update(
    mut entries: Vec<ManagedEntry>,
    old: &Value,
    new: &Value,
    schema: &Schema,
    manager: &str,
    subresource: Option<&str>,
    api_version: &str,
    now: &str,
) -> Vec<ManagedEntry> {
    let c = compare(old, new, schema);
    let changed = c.added.union(&c.modified);
    for e in &mut entries {
        e.set = e.set.difference(&changed).difference(&c.removed);
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", subresource, api_version))
        {
            Some(e) => {
                e.set = e.set.union(&changed);
                e.time = Some(now.to_string());
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: Some(now.to_string()),
                subresource: subresource.map(String::from),
                set: changed,
            }),
        }
    }
    entries.retain(|e| !e.set.is_empty());
    entries
}

/// Inputs of one server-side apply.
pub(crate) struct ApplyRequest<'a> {
    /// The applying manager.
    pub(crate) manager: &'a str,
    /// `status` when applied through the status subresource.
    pub(crate) subresource: Option<&'a str>,
    /// The request's apiVersion.
    pub(crate) api_version: &'a str,
    /// Take ownership of conflicting fields.
    pub(crate) force: bool,
    /// Current time, RFC3339.
    pub(crate) now: &'a str,
}

/// Server-side apply of `config` onto `live`: the new object and managedFields, or the conflicts.
pub(crate) fn apply(
    mut entries: Vec<ManagedEntry>,
    live: &Value,
    config: &Value,
    schema: &Schema,
    req: &ApplyRequest<'_>,
) -> Result<(Value, Vec<ManagedEntry>), Vec<Conflict>> {
    let mut new = merge(live, config, schema);
    let applied = to_field_set(config, schema).difference(&strip_set());
    let mine = |e: &ManagedEntry| e.is(req.manager, "Apply", req.subresource, req.api_version);
    let previous = entries.iter().find(|e| mine(e)).cloned();
    let others = entries
        .iter()
        .filter(|e| !mine(e))
        .fold(FieldSet::new(), |acc, e| acc.union(&e.set));
    if let Some(prev) = &previous {
        let owned = applied.union(&others);
        for p in prev.set.difference(&owned).paths() {
            if !owned.has_member_below(&p) {
                remove_path(&mut new, &p);
            }
        }
    }
    let c = compare(live, &new, schema);
    let changed = c.added.union(&c.modified);
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !mine(e)) {
        for p in e.set.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: e.display(),
                path: display_path(&p),
            });
        }
    }
    if !conflicts.is_empty() && !req.force {
        return Err(conflicts);
    }
    for e in entries.iter_mut().filter(|e| !mine(e)) {
        e.set = e.set.difference(&changed).difference(&c.removed);
    }
    let time = match &previous {
        Some(p) if c.is_same() => p.time.clone(),
        _ => Some(req.now.to_string()),
    };
    entries.retain(|e| !mine(e));
    entries.push(ManagedEntry {
        manager: req.manager.to_string(),
        operation: "Apply".into(),
        api_version: req.api_version.to_string(),
        time,
        subresource: req.subresource.map(String::from),
        set: applied,
    });
    entries.retain(|e| !e.set.is_empty());
    Ok((new, entries))
}

/// kube-apiserver's message for apply conflicts.
pub(crate) fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager, only.path
        );
    }
    let mut managers: Vec<&String> = conflicts.iter().map(|c| &c.manager).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| &c.manager == m) {
            lines.push(format!("- {}", c.path));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    fn req<'a>(manager: &'a str, force: bool) -> ApplyRequest<'a> {
        ApplyRequest {
            manager,
            subresource: None,
            api_version: "v1",
            force,
            now: "2024-01-01T00:00:00Z",
        }
    }

    #[test]
    fn apply_prunes_and_conflicts() {
        let s = schema::builtin("", "ConfigMap");
        let live = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}});
        let cfg = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1"}},"data":{"a":"1","b":"2"}});
        let (obj, entries) =
            apply(vec![], &live, &cfg, &s, &req("m1", false)).expect("no conflict");
        assert_eq!(obj["data"], json!({"a":"1","b":"2"}));
        assert_eq!(
            entries[0].set.to_fields_v1(),
            json!({"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:x":{}}}})
        );
        let cfg2 =
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"a":"1"}});
        let (obj2, entries2) =
            apply(entries.clone(), &obj, &cfg2, &s, &req("m1", false)).expect("ok");
        assert_eq!(obj2["data"], json!({"a":"1"}));
        assert!(
            obj2["metadata"]
                .get("labels")
                .is_none_or(|l| l == &json!({}))
        );
        let cfg3 =
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"a":"2"}});
        let err =
            apply(entries2.clone(), &obj2, &cfg3, &s, &req("m2", false)).expect_err("conflict");
        assert_eq!(
            conflict_message(&err),
            "Apply failed with 1 conflict: conflict with \"m1\": .data.a"
        );
        let (obj4, entries4) = apply(entries2, &obj2, &cfg3, &s, &req("m2", true)).expect("forced");
        assert_eq!(obj4["data"]["a"], json!("2"));
        assert_eq!(entries4.len(), 1);
        assert_eq!(entries4[0].manager, "m2");
    }

    #[test]
    fn update_tracks_added_maps() {
        let s = schema::builtin("", "ConfigMap");
        let old = json!({});
        let new = json!({"metadata":{"name":"a","labels":{"x":"1"}},"data":{"k":"v"}});
        let e = track_update(vec![], &old, &new, &s, "kubectl", None, "v1", "t");
        assert_eq!(
            e[0].set.to_fields_v1(),
            json!({"f:data":{".":{},"f:k":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}})
        );
    }
}
