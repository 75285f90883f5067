//! Working with unstructured objects: metadata accessors, owner references, conditions.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{HandleError, Result};

/// Read-only accessors for the common fields of an unstructured Kubernetes object.
///
/// ```
/// use kubewasm_sdk::ObjectExt;
/// let obj = serde_json::json!({
///     "apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "c", "namespace": "ns", "labels": {"app": "web"}},
///     "status": {"state": "Available"}
/// });
/// assert_eq!(obj.name(), Some("c"));
/// assert_eq!(obj.label("app"), Some("web"));
/// assert_eq!(obj.str_at("/status/state"), Some("Available"));
/// assert!(!obj.is_being_deleted());
/// ```
pub trait ObjectExt {
    /// `apiVersion`.
    fn api_version(&self) -> Option<&str>;
    /// `kind`.
    fn kind(&self) -> Option<&str>;
    /// `metadata.name`.
    fn name(&self) -> Option<&str>;
    /// `metadata.namespace`.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;
    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str>;
    /// `metadata.generation`.
    fn generation(&self) -> Option<i64>;
    /// `metadata.labels[key]`.
    fn label(&self, key: &str) -> Option<&str>;
    /// `metadata.annotations[key]`.
    fn annotation(&self, key: &str) -> Option<&str>;
    /// `metadata.deletionTimestamp` is set: the object is going away (finalizers pending).
    fn is_being_deleted(&self) -> bool;
    /// The string at a JSON pointer, e.g. `"/status/state"`.
    fn str_at(&self, pointer: &str) -> Option<&str>;
    /// `metadata.name`, or a permanent error when it is missing.
    fn require_name(&self) -> Result<&str>;
}

impl ObjectExt for Value {
    fn api_version(&self) -> Option<&str> {
        self.get("apiVersion").and_then(Value::as_str)
    }

    fn kind(&self) -> Option<&str> {
        self.get("kind").and_then(Value::as_str)
    }

    fn name(&self) -> Option<&str> {
        self.str_at("/metadata/name")
    }

    fn namespace(&self) -> Option<&str> {
        self.str_at("/metadata/namespace")
    }

    fn uid(&self) -> Option<&str> {
        self.str_at("/metadata/uid")
    }

    fn resource_version(&self) -> Option<&str> {
        self.str_at("/metadata/resourceVersion")
    }

    fn generation(&self) -> Option<i64> {
        self.pointer("/metadata/generation").and_then(Value::as_i64)
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.pointer("/metadata/annotations")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    }

    fn is_being_deleted(&self) -> bool {
        self.pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
    }

    fn str_at(&self, pointer: &str) -> Option<&str> {
        self.pointer(pointer).and_then(Value::as_str)
    }

    fn require_name(&self) -> Result<&str> {
        self.name()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| HandleError::permanent("object has no metadata.name"))
    }
}

/// An entry of `metadata.ownerReferences`.
///
/// Usually you do not need this: `Intent::create(..).owned_by_trigger()` asks the host to
/// add a controller reference to the triggering object. Use it to point at another owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// Owner's `apiVersion`.
    pub api_version: String,
    /// Owner's `kind`.
    pub kind: String,
    /// Owner's `metadata.name`.
    pub name: String,
    /// Owner's `metadata.uid`.
    pub uid: String,
    /// The owner is the managing controller (at most one per object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Foreground deletion of the owner waits for this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

impl OwnerReference {
    /// A plain (non-controller) owner reference to `owner`, which must have
    /// `apiVersion`, `kind`, `metadata.name` and `metadata.uid`.
    pub fn of(owner: &Value) -> Result<Self> {
        let field = |v: Option<&str>, what: &str| {
            v.map(str::to_owned)
                .ok_or_else(|| HandleError::permanent(format!("owner has no {what}")))
        };
        Ok(Self {
            api_version: field(owner.api_version(), "apiVersion")?,
            kind: field(owner.kind(), "kind")?,
            name: field(owner.name(), "metadata.name")?,
            uid: field(owner.uid(), "metadata.uid")?,
            controller: None,
            block_owner_deletion: None,
        })
    }

    /// A controller owner reference (`controller: true`, `blockOwnerDeletion: true`).
    pub fn controller_of(owner: &Value) -> Result<Self> {
        Ok(Self {
            controller: Some(true),
            block_owner_deletion: Some(true),
            ..Self::of(owner)?
        })
    }

    /// Adds this reference to `object`'s `metadata.ownerReferences`, replacing one with
    /// the same uid. Errors when `object` is not a JSON object.
    pub fn add_to(&self, object: &mut Value) -> Result<()> {
        let metadata = object
            .as_object_mut()
            .ok_or_else(|| HandleError::permanent("not a JSON object"))?
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let metadata = metadata
            .as_object_mut()
            .ok_or_else(|| HandleError::permanent("metadata is not an object"))?;
        let refs = metadata
            .entry("ownerReferences")
            .or_insert_with(|| Value::Array(Vec::new()));
        let refs = refs
            .as_array_mut()
            .ok_or_else(|| HandleError::permanent("metadata.ownerReferences is not a list"))?;
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(self.uid.as_str()));
        refs.push(serde_json::to_value(self).map_err(|e| HandleError::permanent(e.to_string()))?);
        Ok(())
    }
}

/// Whether `object` has an owner reference to an object with uid `owner_uid`.
pub fn is_owned_by(object: &Value, owner_uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner_uid))
        })
}

/// A status condition in the Kubernetes convention (`metav1.Condition`).
///
/// ```
/// use kubewasm_sdk::Condition;
/// let site = serde_json::json!({"metadata": {"generation": 2}, "status": {}});
/// let c = Condition::new("Ready", true)
///     .reason("ChildrenApplied")
///     .message("database and service requested")
///     .observed_generation_of(&site)
///     .transitioned_from(&site);
/// assert_eq!(c.status, "True");
/// assert_eq!(c.observed_generation, Some(2));
/// assert!(c.last_transition_time.is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl Condition {
    /// A condition with status `True` or `False`.
    pub fn new(type_: impl Into<String>, status: bool) -> Self {
        Self {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.to_owned(),
            reason: String::new(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: None,
        }
    }

    /// A condition with status `Unknown`.
    pub fn unknown(type_: impl Into<String>) -> Self {
        Self {
            status: "Unknown".to_owned(),
            ..Self::new(type_, false)
        }
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Sets the message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Sets `observedGeneration` from `object`'s `metadata.generation`, if any.
    pub fn observed_generation_of(mut self, object: &Value) -> Self {
        self.observed_generation = object.generation();
        self
    }

    /// Sets `lastTransitionTime`: keeps the time of the same-type condition in `object`'s
    /// `status.conditions` when its status is unchanged (so re-applying is a no-op), and
    /// uses the current time otherwise.
    pub fn transitioned_from(mut self, object: &Value) -> Self {
        let previous = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(self.type_.as_str()))
            });
        self.last_transition_time = match previous {
            Some(p) if p.get("status").and_then(Value::as_str) == Some(self.status.as_str()) => p
                .get("lastTransitionTime")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| Some(now_rfc3339())),
            _ => Some(now_rfc3339()),
        };
        self
    }

    /// The condition as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The current UTC time as RFC 3339 with second precision (`2026-01-02T03:04:05Z`).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC.
pub fn format_rfc3339(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

/// Serializes any value (e.g. a k8s-openapi object) to JSON; a permanent error if it fails.
pub fn to_value<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|e| HandleError::permanent(format!("cannot serialize: {e}")))
}

/// Converts an unstructured object into a k8s-openapi type, checking `apiVersion`/`kind`.
#[cfg(feature = "k8s-openapi")]
pub fn from_value_typed<K>(value: Value) -> Result<K>
where
    K: k8s_openapi::Resource + serde::de::DeserializeOwned,
{
    let (av, kind) = (value.api_version(), value.kind());
    if av != Some(K::API_VERSION) || kind != Some(K::KIND) {
        return Err(HandleError::permanent(format!(
            "expected {} {}, got {} {}",
            K::API_VERSION,
            K::KIND,
            av.unwrap_or("<no apiVersion>"),
            kind.unwrap_or("<no kind>")
        )));
    }
    serde_json::from_value(value)
        .map_err(|e| HandleError::permanent(format!("does not decode as {}: {e}", K::KIND)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accessors() {
        let o = json!({
            "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
            "metadata": {"name": "db", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "generation": 3, "annotations": {"a": "b"},
                         "deletionTimestamp": "2026-01-01T00:00:00Z"}
        });
        assert_eq!(o.api_version(), Some("mongodb.com/v1"));
        assert_eq!(o.kind(), Some("MongoDB"));
        assert_eq!(o.namespace(), Some("ns"));
        assert_eq!(o.uid(), Some("u"));
        assert_eq!(o.resource_version(), Some("7"));
        assert_eq!(o.generation(), Some(3));
        assert_eq!(o.annotation("a"), Some("b"));
        assert_eq!(o.label("a"), None);
        assert!(o.is_being_deleted());
        assert_eq!(o.require_name().unwrap(), "db");
        assert!(!json!({}).require_name().unwrap_err().retry);
    }

    #[test]
    fn owner_references() {
        let owner = json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
                           "metadata": {"name": "blog", "uid": "abc"}});
        let r = OwnerReference::controller_of(&owner).unwrap();
        let mut child = json!({"metadata": {"name": "blog-db"}});
        r.add_to(&mut child).unwrap();
        r.add_to(&mut child).unwrap();
        assert_eq!(
            child["metadata"]["ownerReferences"],
            json!([{"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
                    "name": "blog", "uid": "abc", "controller": true, "blockOwnerDeletion": true}])
        );
        assert!(is_owned_by(&child, "abc"));
        assert!(!is_owned_by(&child, "other"));
        assert!(OwnerReference::of(&json!({"kind": "X"})).is_err());
    }

    #[test]
    fn condition_keeps_time_when_status_unchanged() {
        let obj = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}
        ]}});
        let same = Condition::new("Ready", true).transitioned_from(&obj);
        assert_eq!(
            same.last_transition_time.as_deref(),
            Some("2020-01-01T00:00:00Z")
        );
        let flipped = Condition::new("Ready", false).transitioned_from(&obj);
        assert_ne!(
            flipped.last_transition_time.as_deref(),
            Some("2020-01-01T00:00:00Z")
        );
        assert_eq!(
            Condition::unknown("Ready").reason("Waiting").to_value(),
            json!({"type": "Ready", "status": "Unknown", "reason": "Waiting"})
        );
    }

    #[test]
    fn rfc3339() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(1_767_323_045), "2026-01-02T03:04:05Z");
    }
}
