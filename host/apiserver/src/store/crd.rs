//! The CustomResourceDefinition lifecycle: a CRD's status as the API server sets it,
//! validation of a new or changed CRD, and unregistering its resource (and deleting its
//! objects) when it is deleted.

use serde_json::{Value, json};

use super::{ObjKey, State};
use crate::error::{ApiResult, StatusError};
use crate::meta;
use crate::registry::GroupResource;
use std::sync::Arc;

pub(super) fn crd_status(crd: &Value, old: Option<&Value>) -> Value {
    let now = meta::now();
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    if let (Some(n), Some(kind)) = (
        names.as_object_mut(),
        crd.pointer("/spec/names/kind").and_then(Value::as_str),
    ) {
        n.entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
        n.entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
    }
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let conditions = old
        .and_then(|o| o.pointer("/status/conditions"))
        .cloned()
        .unwrap_or_else(|| {
            json!([
                {"type":"NamesAccepted","status":"True","lastTransitionTime":now,"reason":"NoConflicts","message":"no conflicts found"},
                {"type":"Established","status":"True","lastTransitionTime":now,"reason":"InitialNamesAccepted","message":"the initial names have been accepted"}
            ])
        });
    json!({"acceptedNames": names, "conditions": conditions, "storedVersions": stored})
}

impl State {
    pub(super) fn drop_crd(&mut self, crd: &Value) {
        let (Some(group), Some(plural)) = (
            crd.pointer("/spec/group").and_then(Value::as_str),
            crd.pointer("/spec/names/plural").and_then(Value::as_str),
        ) else {
            return;
        };
        let gr = GroupResource {
            group: group.into(),
            resource: plural.into(),
        };
        if self.registry.get(&gr).is_some_and(|r| r.builtin) {
            return;
        }
        let instances: Vec<(ObjKey, Arc<Value>)> = self
            .objects
            .get(&gr)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        for ((ns, name), obj) in instances {
            self.remove(&gr, &ns, &name, &obj);
        }
        self.objects.remove(&gr);
        self.registry.unregister(&gr);
        tracing::info!(group, plural, "custom resource unregistered");
    }

    pub(super) fn validate_crd(&self, name: &str, crd: &Value) -> ApiResult<()> {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("");
        let invalid = |field: &str, msg: String| {
            StatusError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                name,
                vec![("FieldValueInvalid".into(), field.into(), msg)],
            )
        };
        if name != format!("{plural}.{group}") {
            return Err(invalid(
                "metadata.name",
                format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
            ));
        }
        if crate::registry::Registry::new().register_crd(crd).is_none() {
            return Err(invalid(
                "spec",
                "Invalid value: group, names.plural, names.kind and at least one served version are required and must not shadow a built-in resource".into(),
            ));
        }
        let causes = structural_errors(crd);
        if !causes.is_empty() {
            return Err(StatusError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                name,
                causes,
            ));
        }
        Ok(())
    }
}

/// A field error as [`StatusError::invalid`] takes it: reason, field, message.
type Cause = (String, String, String);

fn required(field: String, detail: &str) -> Cause {
    (
        "FieldValueRequired".into(),
        field,
        format!("Required value: {detail}"),
    )
}

fn forbidden(field: String, detail: &str) -> Cause {
    (
        "FieldValueForbidden".into(),
        field,
        format!("Forbidden: {detail}"),
    )
}

/// What `apiextensions.k8s.io/v1` requires of each version's schema, as kube-apiserver
/// words it: a schema per version, and a structural one (every node typed unless it
/// preserves unknown fields or is int-or-string, an object at the root, `items` on
/// arrays, `properties` and `additionalProperties` not both, `metadata` restricted to
/// `name` and `generateName`, `x-kubernetes-list-type: map` with its keys). Not checked:
/// CEL rules, defaults, `allOf`/`anyOf`/`oneOf`/`not` invariants.
pub(super) fn structural_errors(crd: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
        match v.pointer("/schema/openAPIV3Schema") {
            None => out.push(required(path, "schemas are required")),
            Some(root) => node_errors(root, &path, Level::Root, &mut out),
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Field,
    Item,
}

fn node_errors(s: &Value, path: &str, level: Level, out: &mut Vec<Cause>) {
    let flag = |k: &str| s.get(k).and_then(Value::as_bool) == Some(true);
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    if ty.is_empty()
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
        && !flag("x-kubernetes-embedded-resource")
    {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Field => "must not be empty for specified object fields",
            Level::Item => "must not be empty for specified array items",
        };
        out.push(required(format!("{path}.type"), detail));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        out.push((
            "FieldValueInvalid".into(),
            format!("{path}.type"),
            format!("Invalid value: \"{ty}\": must be object at the root"),
        ));
    }
    let properties = s.get("properties").and_then(Value::as_object);
    if properties.is_some() && s.get("additionalProperties").is_some_and(Value::is_object) {
        out.push(forbidden(
            format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if ty == "array" && !s.get("items").is_some_and(Value::is_object) {
        out.push(required(format!("{path}.items"), "must be specified"));
    }
    if s.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let keys: Vec<&str> = s
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if keys.is_empty() {
            out.push(required(
                format!("{path}.x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        if let Some(items) = s.get("items").filter(|i| i.is_object()) {
            let item_type = items.get("type").and_then(Value::as_str).unwrap_or("");
            if item_type != "object" {
                out.push((
                    "FieldValueInvalid".into(),
                    format!("{path}.items.type"),
                    format!(
                        "Invalid value: \"{item_type}\": must be object if parent array's x-kubernetes-list-type is map"
                    ),
                ));
            }
            for key in keys {
                match items.pointer(&format!("/properties/{key}")) {
                    None => out.push((
                        "FieldValueInvalid".into(),
                        format!("{path}.x-kubernetes-list-map-keys"),
                        "Invalid value: entries must all be names of item properties".into(),
                    )),
                    Some(p) => {
                        let t = p.get("type").and_then(Value::as_str).unwrap_or("");
                        if t == "array" || t == "object" {
                            out.push((
                                "FieldValueInvalid".into(),
                                format!("{path}.items.properties[{key}].type"),
                                format!("Invalid value: \"{t}\": must be a scalar type if parent array's x-kubernetes-list-type is map"),
                            ));
                        }
                    }
                }
            }
        }
    }
    if let Some(props) = properties {
        for (k, child) in props {
            let child_path = format!("{path}.properties[{k}]");
            if level == Level::Root && k == "metadata" {
                let extra = child
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|m| m.keys().any(|f| f != "name" && f != "generateName"));
                let other_type = child
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t != "object");
                if extra || other_type {
                    out.push(forbidden(
                        child_path.clone(),
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    ));
                }
            }
            node_errors(child, &child_path, Level::Field, out);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        node_errors(items, &format!("{path}.items"), Level::Item, out);
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
        node_errors(
            ap,
            &format!("{path}.additionalProperties"),
            Level::Field,
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn a_structural_schema_passes() {
        let ok = crd(json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
            "spec": {"type": "object", "properties": {
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "port": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "conds": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "required": ["type"],
                              "properties": {"type": {"type": "string"}}}},
            }},
        }}));
        assert_eq!(structural_errors(&ok), Vec::<Cause>::new());
    }

    #[test]
    fn what_kube_apiserver_refuses_is_refused_with_its_words() {
        let bad = crd(json!({"properties": {
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "spec": {"properties": {"a": {"type": "string"}},
                     "additionalProperties": {"type": "string"}},
            "list": {"type": "array"},
            "conds": {"type": "array", "x-kubernetes-list-type": "map",
                      "items": {"type": "object", "properties": {"type": {}}}},
        }}));
        let fields: Vec<String> = structural_errors(&bad)
            .into_iter()
            .map(|(_, f, m)| format!("{f}: {m}"))
            .collect();
        let p = "spec.versions[0].schema.openAPIV3Schema";
        for want in [
            format!("{p}.type: Required value: must not be empty at the root"),
            format!(
                "{p}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ),
            format!(
                "{p}.properties[spec].type: Required value: must not be empty for specified object fields"
            ),
            format!(
                "{p}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            ),
            format!("{p}.properties[list].items: Required value: must be specified"),
            format!(
                "{p}.properties[conds].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            ),
            format!(
                "{p}.properties[conds].items.properties[type].type: Required value: must not be empty for specified object fields"
            ),
        ] {
            assert!(fields.contains(&want), "missing {want}\nin {fields:#?}");
        }
        let none = json!({"spec": {"versions": [{"name": "v1"}]}});
        assert_eq!(
            structural_errors(&none)[0].2,
            "Required value: schemas are required"
        );
    }
}
