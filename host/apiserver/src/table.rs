//! `meta.k8s.io/v1` Table output (what kubectl asks for on get/list/watch) and
//! `PartialObjectMetadata` output.

use crate::registry::{PrinterColumn, ResourceInfo};
use serde_json::{Value, json};

/// What the rows' `object` carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    /// Nothing.
    None,
    /// A PartialObjectMetadata (default).
    Metadata,
    /// The whole object.
    Object,
}

/// How a response is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The objects themselves.
    Full,
    /// A Table.
    Table(IncludeObject),
    /// PartialObjectMetadata(List).
    Metadata,
}

/// Picks the output from the Accept header and `includeObject`.
pub(crate) fn output(accept: &str, include: Option<&str>) -> Output {
    let first = accept.split(',').next().unwrap_or("");
    if first.contains("as=Table") {
        let inc = match include {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        };
        Output::Table(inc)
    } else if first.contains("as=PartialObjectMetadata") {
        Output::Metadata
    } else {
        Output::Full
    }
}

/// A PartialObjectMetadata of an object.
pub(crate) fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A PartialObjectMetadataList of a list.
pub(crate) fn partial_list(list: &Value) -> Value {
    let items: Vec<Value> = list
        .get("items")
        .and_then(Value::as_array)
        .map(|i| i.iter().map(partial).collect())
        .unwrap_or_default();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list.get("metadata").cloned().unwrap_or(json!({})),
        "items": items,
    })
}

/// kube's human-readable duration (`5m`, `3h10m`, `2d`).
pub(crate) fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let m = s / 60;
    let h = m / 60;
    let d = h / 24;
    let y = d / 365;
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 730 {
        format!("{d}d")
    } else if d < 2920 {
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{y}y")
    }
}

fn age(ts: Option<&str>) -> Value {
    match ts.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
        Some(t) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        None => json!("<unknown>"),
    }
}

/// Evaluates a simple JSONPath (`.a.b`, `.a[0].b`).
pub(crate) fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let trimmed = path.trim().trim_start_matches('{').trim_end_matches('}');
    for part in trimmed.split('.').filter(|p| !p.is_empty()) {
        let (field, idx) = match part.split_once('[') {
            Some((f, rest)) => (f, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        if let Some(i) = idx {
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

fn columns(info: &ResourceInfo, version: &str) -> Vec<PrinterColumn> {
    let custom = info
        .version(version)
        .map(|v| v.columns.clone())
        .unwrap_or_default();
    if !custom.is_empty() {
        return custom;
    }
    vec![PrinterColumn {
        name: "Age".into(),
        ty: "date".into(),
        format: String::new(),
        description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

fn cell(col: &PrinterColumn, obj: &Value) -> Value {
    let v = json_path(obj, &col.json_path);
    match (col.ty.as_str(), v) {
        (_, None) | (_, Some(Value::Null)) => Value::Null,
        ("date", Some(v)) => age(v.as_str()),
        (_, Some(Value::String(s))) => json!(s),
        ("string", Some(v)) => json!(v.to_string()),
        (_, Some(v)) => v.clone(),
    }
}

fn row(info: &ResourceInfo, version: &str, obj: &Value, include: IncludeObject) -> Value {
    let mut cells = vec![
        obj.pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null),
    ];
    cells.extend(columns(info, version).iter().map(|c| cell(c, obj)));
    let mut r = json!({"cells": cells});
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(partial(obj)),
        IncludeObject::Object => Some(obj.clone()),
    };
    if let (Some(o), Some(m)) = (object, r.as_object_mut()) {
        m.insert("object".into(), o);
    }
    r
}

/// A Table of the given objects.
pub(crate) fn table(
    info: &ResourceInfo,
    version: &str,
    objs: &[Value],
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    let mut defs = vec![json!({
        "name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.",
        "priority": 0,
    })];
    defs.extend(columns(info, version).iter().map(|c| {
        json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": objs.iter().map(|o| row(info, version, o, include)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
    }

    #[test]
    fn paths() {
        let v = json!({"spec":{"a":[{"b":1}]}});
        assert_eq!(json_path(&v, ".spec.a[0].b"), Some(&json!(1)));
        assert_eq!(json_path(&v, ".spec.x"), None);
    }
}
