//! The event a plugin handles, and decoding its objects.
//!
//! Objects arrive as JSON text, exactly as the API server serves them. [`Event`] decodes
//! them on demand: to a [`serde_json::Value`], to any type implementing
//! [`serde::de::DeserializeOwned`], or (feature `k8s-openapi`) to a k8s-openapi type. This
//! is the "unstructured to typed" converter of the Go world. A malformed object becomes a
//! permanent [`HandleError`], so `?` does the right thing.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{HandleError, Result};

/// Why `handle` was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The object appeared (or the host saw it for the first time).
    Added,
    /// The object changed; [`Event::old_object`] holds the previous state.
    Modified,
    /// The object is gone; [`Event::object`] holds its last known state.
    Deleted,
    /// Periodic re-delivery of the current state; nothing necessarily changed.
    Resync,
}

impl EventType {
    /// `true` for the events that carry a current object to reconcile:
    /// added, modified and resync.
    pub fn is_upsert(self) -> bool {
        !matches!(self, EventType::Deleted)
    }
}

/// One change to one object, as the host delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    event_type: EventType,
    watch_id: String,
    object: String,
    old_object: Option<String>,
}

impl Event {
    /// An event from raw JSON text (what the host sends).
    pub fn new(
        event_type: EventType,
        watch_id: impl Into<String>,
        object: impl Into<String>,
    ) -> Self {
        Self {
            event_type,
            watch_id: watch_id.into(),
            object: object.into(),
            old_object: None,
        }
    }

    /// Sets the previous object (raw JSON) of a `modified` event.
    pub fn with_old_object(mut self, old_object: impl Into<String>) -> Self {
        self.old_object = Some(old_object.into());
        self
    }

    /// An `added` event for `object`; handy in tests.
    pub fn added(watch_id: impl Into<String>, object: &Value) -> Self {
        Self::new(EventType::Added, watch_id, object.to_string())
    }

    /// A `modified` event from `old` to `new`; handy in tests.
    pub fn modified(watch_id: impl Into<String>, old: &Value, new: &Value) -> Self {
        Self::new(EventType::Modified, watch_id, new.to_string()).with_old_object(old.to_string())
    }

    /// A `deleted` event for `object` (its last known state); handy in tests.
    pub fn deleted(watch_id: impl Into<String>, object: &Value) -> Self {
        Self::new(EventType::Deleted, watch_id, object.to_string())
    }

    /// A `resync` event for `object`; handy in tests.
    pub fn resync(watch_id: impl Into<String>, object: &Value) -> Self {
        Self::new(EventType::Resync, watch_id, object.to_string())
    }

    /// Why `handle` was called.
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The `id` of the watch that matched (as declared in the manifest).
    pub fn watch_id(&self) -> &str {
        &self.watch_id
    }

    /// The object as the JSON text the host sent.
    pub fn raw_object(&self) -> &str {
        &self.object
    }

    /// The previous object as JSON text (`modified` events only).
    pub fn raw_old_object(&self) -> Option<&str> {
        self.old_object.as_deref()
    }

    /// `true` for an `added` event.
    pub fn is_added(&self) -> bool {
        self.event_type == EventType::Added
    }

    /// `true` for a `modified` event.
    pub fn is_modified(&self) -> bool {
        self.event_type == EventType::Modified
    }

    /// `true` for a `deleted` event.
    pub fn is_deleted(&self) -> bool {
        self.event_type == EventType::Deleted
    }

    /// `true` for a `resync` event.
    pub fn is_resync(&self) -> bool {
        self.event_type == EventType::Resync
    }

    /// The object as an unstructured JSON value. Errors (permanent) unless it is a JSON object.
    pub fn object(&self) -> Result<Value> {
        parse_object(&self.object, "object")
    }

    /// The object decoded into `T` (your own serde type, or any `DeserializeOwned`).
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<T> {
        decode(&self.object, "object")
    }

    /// The previous object of a `modified` event, unstructured.
    pub fn old_object(&self) -> Result<Option<Value>> {
        self.old_object
            .as_deref()
            .map(|s| parse_object(s, "old object"))
            .transpose()
    }

    /// The previous object of a `modified` event, decoded into `T`.
    pub fn old_object_as<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        self.old_object
            .as_deref()
            .map(|s| decode(s, "old object"))
            .transpose()
    }

    /// The object as a k8s-openapi type, e.g. `event.typed::<Service>()`.
    ///
    /// Errors (permanent) when the object's `apiVersion`/`kind` are not `K`'s.
    #[cfg(feature = "k8s-openapi")]
    pub fn typed<K>(&self) -> Result<K>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        typed_from_str(&self.object, "object")
    }

    /// The previous object of a `modified` event as a k8s-openapi type.
    #[cfg(feature = "k8s-openapi")]
    pub fn old_typed<K>(&self) -> Result<Option<K>>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        self.old_object
            .as_deref()
            .map(|s| typed_from_str(s, "old object"))
            .transpose()
    }
}

fn parse_object(text: &str, what: &str) -> Result<Value> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| HandleError::permanent(format!("{what} is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(HandleError::permanent(format!(
            "{what} is not a JSON object"
        )));
    }
    Ok(value)
}

fn decode<T: DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        HandleError::permanent(format!(
            "{what} does not decode as {}: {e}",
            std::any::type_name::<T>()
        ))
    })
}

#[cfg(feature = "k8s-openapi")]
fn typed_from_str<K>(text: &str, what: &str) -> Result<K>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    let value = parse_object(text, what)?;
    crate::object::from_value_typed(value)
        .map_err(|e| HandleError::permanent(format!("{what}: {}", e.message)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Site {
        spec: SiteSpec,
    }
    #[derive(Deserialize, Debug, PartialEq)]
    struct SiteSpec {
        title: String,
    }

    #[test]
    fn decodes_value_and_user_types() {
        let obj = json!({"apiVersion": "v1", "kind": "X", "spec": {"title": "hi"}});
        let old = json!({"apiVersion": "v1", "kind": "X", "spec": {"title": "old"}});
        let ev = Event::modified("w", &old, &obj);
        assert!(ev.is_modified());
        assert_eq!(ev.watch_id(), "w");
        assert_eq!(ev.object().unwrap()["spec"]["title"], "hi");
        assert_eq!(ev.object_as::<Site>().unwrap().spec.title, "hi");
        assert_eq!(
            ev.old_object_as::<Site>().unwrap().unwrap().spec.title,
            "old"
        );
        assert_eq!(ev.old_object().unwrap().unwrap()["spec"]["title"], "old");
    }

    #[test]
    fn malformed_objects_are_permanent_errors() {
        let ev = Event::new(EventType::Added, "w", "{not json");
        let err = ev.object().unwrap_err();
        assert!(!err.retry);
        let ev = Event::new(EventType::Added, "w", "[1,2]");
        assert!(!ev.object().unwrap_err().retry);
        let ev = Event::new(EventType::Added, "w", r#"{"spec": {}}"#);
        let err = ev.object_as::<Site>().unwrap_err();
        assert!(!err.retry);
        assert!(err.message.contains("Site"), "{}", err.message);
        assert_eq!(
            Event::new(EventType::Added, "w", "{}").old_object(),
            Ok(None)
        );
    }

    #[test]
    fn upsert_classification() {
        assert!(EventType::Added.is_upsert());
        assert!(EventType::Modified.is_upsert());
        assert!(EventType::Resync.is_upsert());
        assert!(!EventType::Deleted.is_upsert());
    }

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn decodes_k8s_openapi_types() {
        use k8s_openapi::api::core::v1::{ConfigMap, Service};
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
            "data": {"k": "v"}
        });
        let ev = Event::added("cms", &cm);
        let typed: ConfigMap = ev.typed().unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("c"));
        assert_eq!(typed.data.unwrap()["k"], "v");
        let err = ev.typed::<Service>().unwrap_err();
        assert!(!err.retry);
        assert!(err.message.contains("Service"), "{}", err.message);
    }
}
