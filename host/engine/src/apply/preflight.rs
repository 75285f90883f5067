//! Checks of a call's admitted intents that need the cluster, done before any of them is
//! written (a call is applied whole or not at all, as far as checks can tell).
//!
//! Merge patches: the API server never reports a conflict for a JSON merge patch, it
//! moves the fields the patch changes to the patching manager. So each merge patch is
//! checked against the object as it is now ([`admit::check_merge`]): changing a field
//! another manager owns needs `allowForce`. The object is read with an empty dry-run merge
//! patch, as the plugin: it needs only the `patch` permission the write itself needs
//! (a GET would need `get`, which `kubewasm rbac` does not give for a patch grant), and
//! it returns `managedFields`, which the host's caches drop. The write then carries the
//! `resourceVersion` it was checked against, so an object changed in between is a 409
//! (retried, or a newer event of the trigger) rather than a write nobody checked.

use kubewasm_core::admit::{self, Prepared, Rejection};
use kubewasm_core::intent::Action;
use kubewasm_core::manifest::Manifest;
use serde_json::Value;

use super::Applier;
use crate::Error;

/// Check every merge patch of `prepared` (the plugin `plugin`'s, writing as `manager`)
/// against its object, and make each carry the resourceVersion it was checked against.
/// The first merge patch taking another manager's field without `allowForce` refuses
/// the call (an [`Error::Refused`]); a failed read ends it like a failed write would.
pub(crate) async fn check_merges(
    applier: &Applier,
    plugin: &str,
    manifest: &Manifest,
    manager: &str,
    prepared: &mut [Prepared],
) -> Result<(), Error> {
    for (index, p) in prepared.iter_mut().enumerate() {
        if !matches!(p.intent.action, Action::Merge { .. }) {
            continue;
        }
        // Not there: nothing is owned; the patch itself will find it missing.
        let Some(live) = applier.current(manager, p).await? else {
            continue;
        };
        admit::check_merge(manifest, p, &live, manager).map_err(|e| {
            Error::rejected(
                plugin,
                Rejection {
                    index,
                    error: e.into(),
                },
            )
        })?;
        let version = live
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let (Some(version), Action::Merge { body, .. }) = (version, &mut p.intent.action) {
            precondition(body, version);
        }
    }
    Ok(())
}

/// A merge patch naming `metadata.resourceVersion` is applied only to that version
/// (kube-apiserver answers 409 otherwise). One the plugin named itself is kept.
fn precondition(body: &mut Value, version: String) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry("resourceVersion")
            .or_insert(Value::String(version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_precondition_is_the_checked_version_unless_the_plugin_named_one() {
        let mut body = json!({"data": {"a": "b"}});
        precondition(&mut body, "7".into());
        assert_eq!(
            body,
            json!({"data": {"a": "b"}, "metadata": {"resourceVersion": "7"}})
        );
        let mut own = json!({"metadata": {"resourceVersion": "3", "labels": {}}});
        precondition(&mut own, "7".into());
        assert_eq!(own["metadata"]["resourceVersion"], json!("3"));
    }
}
