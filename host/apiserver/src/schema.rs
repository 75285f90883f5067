//! The structural type information server-side apply needs: which map keys are
//! declared fields, which lists are associative (`map` with keys, `set`) or atomic,
//! and which maps are atomic. Built-in kinds are served schemaless, so they get a
//! small hand-written approximation; custom resources use their CRD's
//! `openAPIV3Schema`, which also drives pruning of unknown fields.

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How list items are identified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListKind {
    /// The whole list is one value.
    Atomic,
    /// Items are scalars identified by value.
    Set,
    /// Items are maps identified by these key fields.
    Map(Vec<String>),
}

/// What unknown keys of an object are.
#[derive(Debug, Clone)]
pub(crate) enum Rest {
    /// Treated as declared struct fields of this type (built-in approximation).
    Declared(Schema),
    /// Elements of a map (`additionalProperties`, preserved unknown fields).
    Element(Schema),
    /// Unknown and dropped by pruning.
    Prune,
}

/// An object type.
#[derive(Debug, Clone)]
pub(crate) struct ObjectSchema {
    /// Declared fields.
    pub(crate) fields: BTreeMap<String, Schema>,
    /// Other keys.
    pub(crate) rest: Rest,
}

/// A list type.
#[derive(Debug, Clone)]
pub(crate) struct ListSchema {
    /// Item identity.
    pub(crate) kind: ListKind,
    /// Item type.
    pub(crate) item: Schema,
}

/// A type.
#[derive(Debug, Clone)]
pub(crate) enum Schema {
    /// Scalars and anything replaced as a whole.
    Atomic,
    /// No type known: object keys are map elements, lists are atomic.
    Deduced,
    /// No type known, but object keys are treated as declared struct fields.
    Lenient,
    /// An object with declared fields.
    Object(Arc<ObjectSchema>),
    /// A list.
    List(Arc<ListSchema>),
}

impl Schema {
    /// The type of key `key` of an object of this type, and whether it is a declared field.
    pub(crate) fn child(&self, key: &str) -> (Schema, bool) {
        match self {
            Schema::Object(o) => match o.fields.get(key) {
                Some(s) => (s.clone(), true),
                None => match &o.rest {
                    Rest::Declared(s) => (s.clone(), true),
                    Rest::Element(s) => (s.clone(), false),
                    Rest::Prune => (Schema::Deduced, false),
                },
            },
            Schema::Lenient => (Schema::Lenient, true),
            _ => (Schema::Deduced, false),
        }
    }

    /// True when values of this type are replaced as a whole even if they are maps.
    pub(crate) fn is_atomic(&self) -> bool {
        matches!(self, Schema::Atomic)
    }

    /// List item identity and item type (atomic unless declared otherwise).
    pub(crate) fn list(&self) -> (ListKind, Schema) {
        match self {
            Schema::List(l) => (l.kind.clone(), l.item.clone()),
            _ => (ListKind::Atomic, Schema::Deduced),
        }
    }

    /// Drops unknown fields, as kube-apiserver prunes custom resources.
    pub(crate) fn prune(&self, v: &mut Value) {
        match (self, v) {
            (Schema::Object(o), Value::Object(m)) => {
                if matches!(o.rest, Rest::Prune) {
                    m.retain(|k, _| o.fields.contains_key(k));
                }
                for (k, child) in m.iter_mut() {
                    let (s, _) = self.child(k);
                    s.prune(child);
                }
            }
            (Schema::List(l), Value::Array(items)) => {
                for item in items {
                    l.item.prune(item);
                }
            }
            _ => {}
        }
    }
}

fn obj(fields: Vec<(&str, Schema)>, rest: Rest) -> Schema {
    Schema::Object(Arc::new(ObjectSchema {
        fields: fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        rest,
    }))
}

fn map_list(keys: &[&str], item: Schema) -> Schema {
    Schema::List(Arc::new(ListSchema {
        kind: ListKind::Map(keys.iter().map(|k| k.to_string()).collect()),
        item,
    }))
}

fn set_list() -> Schema {
    Schema::List(Arc::new(ListSchema {
        kind: ListKind::Set,
        item: Schema::Atomic,
    }))
}

fn string_map() -> Schema {
    obj(vec![], Rest::Element(Schema::Atomic))
}

/// `ObjectMeta`.
pub(crate) fn object_meta() -> Schema {
    obj(
        vec![
            ("labels", string_map()),
            ("annotations", string_map()),
            ("ownerReferences", map_list(&["uid"], Schema::Lenient)),
            ("finalizers", set_list()),
            ("managedFields", Schema::Atomic),
        ],
        Rest::Declared(Schema::Lenient),
    )
}

fn container() -> Schema {
    obj(
        vec![
            (
                "ports",
                map_list(&["containerPort", "protocol"], Schema::Lenient),
            ),
            ("env", map_list(&["name"], Schema::Lenient)),
            ("volumeMounts", map_list(&["mountPath"], Schema::Lenient)),
        ],
        Rest::Declared(Schema::Lenient),
    )
}

fn pod_spec() -> Schema {
    obj(
        vec![
            ("containers", map_list(&["name"], container())),
            ("initContainers", map_list(&["name"], container())),
            ("volumes", map_list(&["name"], Schema::Lenient)),
            ("imagePullSecrets", map_list(&["name"], Schema::Lenient)),
            ("nodeSelector", string_map()),
        ],
        Rest::Declared(Schema::Lenient),
    )
}

fn pod_template() -> Schema {
    obj(
        vec![("metadata", object_meta()), ("spec", pod_spec())],
        Rest::Declared(Schema::Lenient),
    )
}

fn label_selector() -> Schema {
    obj(
        vec![("matchLabels", string_map())],
        Rest::Declared(Schema::Lenient),
    )
}

/// The approximate schema of a built-in kind.
pub(crate) fn builtin(group: &str, kind: &str) -> Schema {
    let spec = match (group, kind) {
        ("", "Pod") => pod_spec(),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => obj(
            vec![("template", pod_template()), ("selector", label_selector())],
            Rest::Declared(Schema::Lenient),
        ),
        ("batch", "Job") => obj(
            vec![("template", pod_template())],
            Rest::Declared(Schema::Lenient),
        ),
        ("", "Service") => obj(
            vec![
                ("ports", map_list(&["port", "protocol"], Schema::Lenient)),
                ("selector", string_map()),
            ],
            Rest::Declared(Schema::Lenient),
        ),
        _ => Schema::Lenient,
    };
    let mut fields = vec![("metadata", object_meta()), ("spec", spec)];
    if matches!(kind, "ConfigMap" | "Secret") {
        fields.push(("data", string_map()));
        fields.push(("stringData", string_map()));
        fields.push(("binaryData", string_map()));
    }
    if kind == "CustomResourceDefinition" {
        fields.push((
            "spec",
            obj(
                vec![("versions", map_list(&["name"], Schema::Lenient))],
                Rest::Declared(Schema::Lenient),
            ),
        ));
    }
    obj(fields, Rest::Declared(Schema::Lenient))
}

/// Converts a CRD version's `openAPIV3Schema` (the root object schema).
pub(crate) fn from_openapi(root: Option<&Value>) -> Schema {
    let Some(root) = root else {
        return obj(
            vec![("metadata", object_meta())],
            Rest::Element(Schema::Deduced),
        );
    };
    let mut s = convert(root);
    if let Schema::Object(o) = &mut s {
        let o = Arc::make_mut(o);
        o.fields.insert("metadata".into(), object_meta());
        o.fields.insert("apiVersion".into(), Schema::Atomic);
        o.fields.insert("kind".into(), Schema::Atomic);
    }
    s
}

fn convert(s: &Value) -> Schema {
    let preserve = s
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        return Schema::Atomic;
    }
    if s.get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Schema::Deduced;
    }
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "object" => {
            if s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
                return Schema::Atomic;
            }
            let fields: BTreeMap<String, Schema> = s
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
                .unwrap_or_default();
            let rest = match s.get("additionalProperties") {
                Some(Value::Object(ap)) => Rest::Element(convert(&Value::Object(ap.clone()))),
                Some(Value::Bool(true)) => Rest::Element(Schema::Deduced),
                _ if preserve => Rest::Element(Schema::Deduced),
                _ => Rest::Prune,
            };
            Schema::Object(Arc::new(ObjectSchema { fields, rest }))
        }
        "array" => {
            let item = s.get("items").map(convert).unwrap_or(Schema::Deduced);
            Schema::List(Arc::new(ListSchema {
                kind: list_kind(s),
                item,
            }))
        }
        "" if preserve => Schema::Deduced,
        "" if s.get("properties").is_some() => convert(&with_type(s, "object")),
        _ => Schema::Atomic,
    }
}

/// The item identity an OpenAPI array schema declares (`x-kubernetes-list-type` and
/// `x-kubernetes-list-map-keys`); shared by server-side apply and validation.
pub(crate) fn list_kind(s: &Value) -> ListKind {
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Map(
            s.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| k.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => ListKind::Atomic,
    }
}

fn with_type(s: &Value, ty: &str) -> Value {
    let mut c = s.clone();
    if let Some(o) = c.as_object_mut() {
        o.insert("type".into(), Value::String(ty.into()));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_unknown_fields() {
        let s = from_openapi(Some(&json!({
            "type":"object",
            "properties":{"spec":{"type":"object","properties":{"a":{"type":"string"},
                "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}
        })));
        let mut v = json!({"apiVersion":"x/v1","kind":"K","metadata":{"name":"n"},
            "spec":{"a":"1","b":2,"free":{"z":1}},"extra":true});
        s.prune(&mut v);
        assert_eq!(
            v,
            json!({"apiVersion":"x/v1","kind":"K","metadata":{"name":"n"},"spec":{"a":"1","free":{"z":1}}})
        );
    }
}
