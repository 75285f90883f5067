//! Which fields a JSON merge patch takes from other field managers.
//!
//! Server-side apply reports a conflict when it would change a field another manager
//! owns, and only `force` (a grant's `allowForce`) overrides that. A JSON merge patch is
//! an update: the API server never reports a conflict for it, it moves the fields it
//! changes to the patching manager. So a merge patch is checked before it is sent: the
//! object as it is now (its `managedFields`) and the object as the patch would leave it
//! are compared under each other manager's field set; a field of another manager that
//! changes needs `allowForce`, exactly as a forced apply would.

use serde_json::{Map, Value};

use super::EXCERPT;
use crate::names::excerpt;

/// A field another manager owns that a write would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenField {
    /// The manager that owns it.
    pub manager: String,
    /// The field, e.g. `data.key`, `metadata.finalizers["example.com/x"]`,
    /// `spec.containers[{"name":"web"}].image`.
    pub field: String,
}

/// What `patch` (a JSON merge patch, RFC 7386) would do to `live`, as the API server
/// applies it: to the status subresource only `status` is taken (`status`), to the main
/// resource of a kind with a status subresource `status` is ignored (`has_status`).
pub fn merged(live: &Value, patch: &Value, status: bool, has_status: bool) -> Value {
    let mut out = live.clone();
    let Some(fields) = patch.as_object() else {
        return out;
    };
    for (key, value) in fields {
        let reaches = match key.as_str() {
            "status" => status || !has_status,
            _ => !status,
        };
        if reaches {
            merge_key(&mut out, key, value);
        }
    }
    out
}

/// RFC 7386 for one member of an object.
fn merge_key(target: &mut Value, key: &str, patch: &Value) {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(obj) = target.as_object_mut() else {
        return;
    };
    match patch {
        Value::Null => {
            obj.remove(key);
        }
        Value::Object(fields) => {
            let slot = obj
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            for (k, v) in fields {
                merge_key(slot, k, v);
            }
        }
        other => {
            obj.insert(key.to_string(), other.clone());
        }
    }
}

/// The first field that another manager than `manager` owns in `live` (per its
/// `metadata.managedFields`) and that differs in `after`: what a write turning `live`
/// into `after` takes from other managers. None when it takes nothing.
pub fn taken_field(live: &Value, after: &Value, manager: &str) -> Option<TakenField> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    for entry in entries {
        let owner = entry.get("manager").and_then(Value::as_str).unwrap_or("");
        if owner == manager {
            continue;
        }
        let Some(set) = entry.get("fieldsV1").and_then(Value::as_object) else {
            continue;
        };
        let mut path = Vec::new();
        if let Some(field) = changed_in(set, Some(live), Some(after), &mut path) {
            return Some(TakenField {
                manager: excerpt(owner, EXCERPT),
                field: excerpt(&field, 2 * EXCERPT),
            });
        }
    }
    None
}

/// Under one field-set node (`f:name`, `k:{…}`, `v:…`, `i:N` and `.` members; an empty
/// node is a leaf owned whole), the first owned field whose value differs between
/// `before` and `after` (None: absent), spelled from `path`.
fn changed_in(
    node: &Map<String, Value>,
    before: Option<&Value>,
    after: Option<&Value>,
    path: &mut Vec<String>,
) -> Option<String> {
    if before == after {
        return None;
    }
    // A leaf, or the node's own existence (`.`), changes with any change of the value
    // (a leaf) or its removal (`.`).
    if node.is_empty() || (node.contains_key(".") && after.is_none()) {
        return Some(spell(path));
    }
    for (key, child) in node {
        let Some(child) = child.as_object() else {
            continue;
        };
        let found = if let Some(name) = key.strip_prefix("f:") {
            path.push(format!(".{name}"));
            let r = changed_in(child, member(before, name), member(after, name), path);
            path.pop();
            r
        } else if let Some(k) = key.strip_prefix("k:") {
            let Ok(Value::Object(want)) = serde_json::from_str::<Value>(k) else {
                continue;
            };
            path.push(format!("[{k}]"));
            let r = changed_in(child, keyed(before, &want), keyed(after, &want), path);
            path.pop();
            r
        } else if let Some(v) = key.strip_prefix("v:") {
            let Ok(want) = serde_json::from_str::<Value>(v) else {
                continue;
            };
            let has = |v: Option<&Value>| {
                v.and_then(Value::as_array)
                    .is_some_and(|items| items.contains(&want))
            };
            (has(before) && !has(after)).then(|| format!("{}[{v}]", spell(path)))
        } else if let Some(i) = key.strip_prefix("i:") {
            let Ok(i) = i.parse::<usize>() else { continue };
            path.push(format!("[{i}]"));
            let r = changed_in(child, item(before, i), item(after, i), path);
            path.pop();
            r
        } else {
            None
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Member `name` of an object.
fn member<'a>(v: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    v?.get(name)
}

/// The element of a list whose fields are `key`'s (a `k:` field-set entry).
fn keyed<'a>(v: Option<&'a Value>, key: &Map<String, Value>) -> Option<&'a Value> {
    v?.as_array()?
        .iter()
        .find(|e| key.iter().all(|(f, x)| e.get(f) == Some(x)))
}

/// Element `i` of a list.
fn item(v: Option<&Value>, i: usize) -> Option<&Value> {
    v?.as_array()?.get(i)
}

fn spell(path: &[String]) -> String {
    let s: String = path.concat();
    s.strip_prefix('.').unwrap_or(&s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "x", "namespace": "a",
                "labels": {"app": "web", "mine": "1"},
                "finalizers": ["example.com/keep"],
                "managedFields": [
                    {"manager": "kubectl", "operation": "Apply", "fieldsV1": {
                        "f:data": {"f:owned": {}},
                        "f:metadata": {"f:labels": {"f:app": {}},
                                       "f:finalizers": {".": {}, "v:\"example.com/keep\"": {}}}}},
                    {"manager": "kubewasm-p", "operation": "Update", "fieldsV1": {
                        "f:data": {"f:mine": {}}, "f:metadata": {"f:labels": {"f:mine": {}}}}},
                    {"manager": "ctl", "operation": "Update", "subresource": "status",
                     "fieldsV1": {"f:status": {"f:phase": {}},
                                  "f:spec": {"f:containers": {
                                      "k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}}}
                ]
            },
            "data": {"owned": "a", "mine": "b"},
            "spec": {"containers": [{"name": "web", "image": "w:1", "env": []},
                                    {"name": "side", "image": "s:1"}]},
            "status": {"phase": "Up"}
        })
    }

    fn taken(patch: Value, status: bool) -> Option<String> {
        let l = live();
        taken_field(&l, &merged(&l, &patch, status, true), "kubewasm-p")
            .map(|t| format!("{} {}", t.manager, t.field))
    }

    #[test]
    fn a_merge_patch_of_another_managers_field_takes_it() {
        assert_eq!(
            taken(json!({"data": {"owned": "b"}}), false).as_deref(),
            Some("kubectl data.owned")
        );
        assert_eq!(
            taken(json!({"data": null}), false).as_deref(),
            Some("kubectl data.owned")
        );
        assert_eq!(
            taken(json!({"metadata": {"labels": {"app": null}}}), false).as_deref(),
            Some("kubectl metadata.labels.app")
        );
        // Finalizers: removing another manager's (null or a list without it) takes it.
        assert_eq!(
            taken(json!({"metadata": {"finalizers": []}}), false).as_deref(),
            Some("kubectl metadata.finalizers[\"example.com/keep\"]")
        );
        assert_eq!(
            taken(json!({"metadata": {"finalizers": null}}), false).as_deref(),
            Some("kubectl metadata.finalizers")
        );
        // An element of a keyed list, by its key.
        let containers =
            json!({"spec": {"containers": [{"name": "web", "image": "w:2", "env": []}]}});
        assert_eq!(
            taken(containers, false).as_deref(),
            Some("ctl spec.containers[{\"name\":\"web\"}].image")
        );
    }

    #[test]
    fn what_no_other_manager_owns_is_not_taken() {
        for patch in [
            // Its own fields, new fields, the same value again.
            json!({"data": {"mine": "c", "new": "d"}, "metadata": {"labels": {"mine": null}}}),
            json!({"data": {"owned": "a"}}),
            // Another finalizer beside the kept one; a list element nobody else owns.
            json!({"metadata": {"finalizers": ["example.com/keep", "example.com/more"]}}),
            json!({"spec": {"containers": [{"name": "web", "image": "w:1", "env": [1]}]}}),
            // Status through the main resource is ignored by the server.
            json!({"status": {"phase": "Down"}}),
        ] {
            assert_eq!(taken(patch.clone(), false), None, "{patch}");
        }
        // Through the status subresource, status is what changes.
        assert_eq!(
            taken(json!({"status": {"phase": "Down"}}), true).as_deref(),
            Some("ctl status.phase")
        );
        assert_eq!(taken(json!({"data": {"owned": "z"}}), true), None);
    }

    #[test]
    fn merge_follows_rfc_7386() {
        let l = json!({"a": {"b": 1, "c": 2}, "d": [1], "e": 1});
        let p = json!({"a": {"b": null, "x": {"y": 1}}, "d": [2], "e": {"f": 1}});
        assert_eq!(
            merged(&l, &p, false, false),
            json!({"a": {"c": 2, "x": {"y": 1}}, "d": [2], "e": {"f": 1}})
        );
    }
}
