//! Object metadata helpers: accessors, timestamps, name generation and validation.

use rand::Rng;
use serde_json::{Map, Value};

/// Now, RFC3339 with seconds precision, UTC.
pub(crate) fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metadata.<field>` as a string.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// The metadata map, created if missing.
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(o) = obj else {
        unreachable!("object ensured above")
    };
    let m = o
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    match m {
        Value::Object(m) => m,
        _ => unreachable!("object ensured above"),
    }
}

/// Sets `metadata.<field>`.
pub(crate) fn set_meta(obj: &mut Value, field: &str, v: Value) {
    meta_mut(obj).insert(field.into(), v);
}

/// Removes `metadata.<field>`.
pub(crate) fn remove_meta(obj: &mut Value, field: &str) {
    meta_mut(obj).remove(field);
}

/// `metadata.finalizers`.
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `metadata.finalizers` (removing the field when empty).
pub(crate) fn set_finalizers(obj: &mut Value, f: &[String]) {
    if f.is_empty() {
        remove_meta(obj, "finalizers");
    } else {
        set_meta(obj, "finalizers", Value::from(f.to_vec()));
    }
}

/// `metadata.ownerReferences`.
pub(crate) fn owner_refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A random 5-character suffix from kube's alphabet (no vowels, no confusable digits).
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Name rules and messages: kubewasm's one implementation, shared with intents and
/// manifests, so the embedded server and the host agree on what a valid name is.
pub(crate) use kubewasm_core::names::{name_rule, validate_name};

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_core::names::NameRule;

    #[test]
    fn names() {
        assert!(validate_name("a-b.c", NameRule::Subdomain).is_ok());
        assert!(validate_name("Bad_Name", NameRule::Subdomain).is_err());
        assert!(validate_name("a.b", NameRule::Label).is_err());
        assert!(validate_name("system:admin", NameRule::PathSegment).is_ok());
        assert_eq!(random_suffix().len(), 5);
    }
}
