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

/// Evaluates a printer column's JSONPath as kube-apiserver does for a CRD's columns: the
/// first result of `.a.b`, `.a[0].b`, `.a[*].b` or `.a[?(@.k=="v")].b` (a filter comparing
/// one field with `==` or `!=` to a quoted string, a number or a boolean).
pub(crate) fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let trimmed = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut current = vec![obj];
    let mut rest = trimmed;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (field, tail) = r.split_at(end);
            if !field.is_empty() {
                current = current.into_iter().filter_map(|v| v.get(field)).collect();
            }
            rest = tail;
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = bracket_end(r)?;
            let (inside, tail) = (&r[..close], &r[close + 1..]);
            current = current
                .into_iter()
                .flat_map(|v| select(v, inside))
                .collect();
            rest = tail;
        } else {
            // `a.b` without a leading dot.
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            let (field, tail) = rest.split_at(end);
            current = current.into_iter().filter_map(|v| v.get(field)).collect();
            rest = tail;
        }
    }
    current.into_iter().next()
}

/// The index of the `]` closing a bracket expression (quotes may hold `]`).
fn bracket_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, ']') => return Some(i),
            _ => {}
        }
    }
    None
}

/// What a bracket expression selects of `v`: an index, `*`, or a filter.
fn select<'a>(v: &'a Value, inside: &str) -> Vec<&'a Value> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        _ => return vec![],
    };
    let inside = inside.trim();
    if inside == "*" {
        return items;
    }
    if let Ok(i) = inside.parse::<usize>() {
        return items.get(i).copied().into_iter().collect();
    }
    let Some(filter) = inside
        .strip_prefix("?(")
        .and_then(|f| f.strip_suffix(')'))
        .map(str::trim)
    else {
        return vec![];
    };
    let (lhs, op, rhs) = match (filter.split_once("=="), filter.split_once("!=")) {
        (Some((l, r)), _) => (l, true, r),
        (None, Some((l, r))) => (l, false, r),
        (None, None) => return vec![],
    };
    let Some(field) = lhs.trim().strip_prefix("@.") else {
        return vec![];
    };
    let rhs = rhs.trim();
    let want: Value = match rhs.chars().next() {
        Some(q @ ('"' | '\'')) => Value::String(rhs.trim_matches(q).to_string()),
        _ => match serde_json::from_str(rhs) {
            Ok(v) => v,
            Err(_) => return vec![],
        },
    };
    items
        .into_iter()
        .filter(|item| {
            let got = json_path(item, &format!(".{field}"));
            // A missing field matches neither `==` nor `!=`, as in client-go's jsonpath.
            got.is_some_and(|g| (*g == want) == op)
        })
        .collect()
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
        assert_eq!(json_path(&v, "{.spec.a[*].b}"), Some(&json!(1)));
        assert_eq!(json_path(&v, ".spec.a[1].b"), None);
    }

    /// The filter kube-apiserver evaluates in printer columns such as
    /// `.status.conditions[?(@.type=="Ready")].status`.
    #[test]
    fn filters_select_by_a_field() {
        let v = json!({"status": {"conditions": [
            {"type": "Approved", "status": "True", "n": 1},
            {"type": "Ready", "status": "False", "n": 2},
            {"status": "Unknown"},
        ]}});
        let ready = r#".status.conditions[?(@.type=="Ready")].status"#;
        assert_eq!(json_path(&v, ready), Some(&json!("False")));
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type=='Approved')].status"),
            Some(&json!("True"))
        );
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.n==2)].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(
            json_path(&v, r#".status.conditions[?(@.type!="Approved")].type"#),
            Some(&json!("Ready"))
        );
        assert_eq!(
            json_path(&v, r#".status.conditions[?(@.type=="Gone")].status"#),
            None
        );
        assert_eq!(json_path(&json!({}), ready), None);
    }
}
