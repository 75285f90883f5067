//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets and
//! ReplicationControllers: an `autoscaling/v1` Scale view of `spec.replicas`,
//! `status.replicas` and the selector, as kube-apiserver serves it (`kubectl scale`,
//! HorizontalPodAutoscalers). Writes change only the object's `spec.replicas`.

use crate::error::{ApiResult, StatusError};
use serde_json::{Map, Value, json};

/// The Scale of `obj` (a stored workload as the main endpoint answers it).
pub(crate) fn of(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut m = Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(key) {
            m.insert(key.into(), v.clone());
        }
    }
    let mut status =
        json!({"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0))});
    if let Some(sel) = obj.pointer("/spec/selector").and_then(selector_string) {
        status["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": m,
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": status,
    })
}

/// `current` with `spec.replicas` taken from `scale` (the Scale a PUT or patch gives);
/// a `resourceVersion` in it must be the object's, as for any update.
pub(crate) fn apply(
    current: &Value,
    scale: &Value,
    conflict: impl Fn() -> StatusError,
) -> ApiResult<Value> {
    let want = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    let have = current
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    if want.is_some_and(|w| !w.is_empty() && Some(w) != have) {
        return Err(conflict());
    }
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().filter(|n| *n >= 0).ok_or_else(|| {
            StatusError::new(
                422,
                "Invalid",
                format!(
                    "Scale.autoscaling \"{}\" is invalid: spec.replicas: Invalid value: {v}: must be greater than or equal to 0",
                    current
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ),
            )
        })?,
    };
    let mut out = current.clone();
    match out.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) => {
            spec.insert("replicas".into(), json!(replicas));
        }
        None => out["spec"] = json!({"replicas": replicas}),
    }
    Ok(out)
}

/// A label selector as its string form (`metav1.LabelSelectorAsSelector(..).String()`:
/// requirements sorted by key); a ReplicationController's selector is a plain map.
fn selector_string(sel: &Value) -> Option<String> {
    let obj = sel.as_object()?;
    let plain = !obj.contains_key("matchLabels") && !obj.contains_key("matchExpressions");
    let labels = if plain {
        Some(sel)
    } else {
        sel.get("matchLabels")
    };
    let mut reqs: Vec<(String, String)> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))))
        .collect();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_string(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort();
    Some(
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view_and_write() {
        let d = json!({
            "metadata": {"name": "d", "namespace": "n", "resourceVersion": "7", "labels": {"x": "y"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "c", "operator": "In", "values": ["z", "y"]}]}},
            "status": {"replicas": 1}
        });
        let s = of(&d);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(
            s["status"],
            json!({"replicas": 1, "selector": "a=1,b=2,c in (y,z)"})
        );
        assert!(s["metadata"].get("labels").is_none());
        let conflict = || StatusError::new(409, "Conflict", "c");
        let out = apply(&d, &json!({"spec": {"replicas": 5}}), conflict).expect("applied");
        assert_eq!(out["spec"]["replicas"], 5);
        assert_eq!(out["spec"]["selector"], d["spec"]["selector"]);
        let stale = json!({"metadata": {"resourceVersion": "6"}, "spec": {"replicas": 5}});
        assert_eq!(
            apply(&d, &stale, conflict).map_err(|e| e.code).err(),
            Some(409)
        );
        let negative = json!({"spec": {"replicas": -1}});
        assert_eq!(
            apply(&d, &negative, conflict).map_err(|e| e.code).err(),
            Some(422)
        );
        let rc = json!({"spec": {"selector": {"app": "w"}}});
        assert_eq!(of(&rc)["status"]["selector"], "app=w");
    }
}
