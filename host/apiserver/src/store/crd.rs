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
        Ok(())
    }
}
