//! Helpers shared by the dispatch tests: ConfigMaps in namespace `a`, their events and
//! keys, and API errors.

use std::sync::Arc;
use std::time::Duration;

use kubewasm_core::event::EventType;
use serde_json::json;

use super::{Delivery, QueueKey};
use crate::Error;
use crate::watch::cache::{CachedObject, ObjectKey, ResourceKey};

/// The ConfigMap `a/name` at resourceVersion `rv`.
pub(super) fn obj(name: &str, rv: &str) -> Arc<CachedObject> {
    CachedObject::new(
        serde_json::from_value(json!({"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":name,"namespace":"a","resourceVersion":rv}}))
        .unwrap(),
    )
}

/// An event of watch `w` for `a/name` at `rv` (a modification's `old` is at rv "old").
pub(super) fn ev(t: EventType, name: &str, rv: &str) -> Delivery {
    Delivery {
        watch_id: "w".into(),
        event_type: t,
        object: obj(name, rv),
        old: (t == EventType::Modified).then(|| obj(name, "old")),
        queued: None,
    }
}

/// The queue key of the ConfigMap `a/name`.
pub(super) fn key(name: &str) -> QueueKey {
    QueueKey {
        resource: ResourceKey {
            group: String::new(),
            version: "v1".into(),
            plural: "configmaps".into(),
        },
        object: ObjectKey {
            namespace: Some("a".into()),
            name: name.into(),
        },
    }
}

/// The delivered object's resourceVersion.
pub(super) fn rv(d: &Delivery) -> &str {
    d.object.resource_version().unwrap()
}

/// An apply refused with `status` (and the server's `Retry-After`, in seconds).
pub(super) fn api_error(status: u16, retry_after: Option<u64>) -> Error {
    Error::Api {
        verb: "apply",
        target: "MongoDB a/db".into(),
        status,
        reason: "Reason".into(),
        message: "message".into(),
        retry_after: retry_after.map(Duration::from_secs),
        field_conflict: false,
        uid_rejected: false,
    }
}
