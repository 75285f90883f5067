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
//!
//! Creates that write owner references, by a plugin that may not delete the object: a
//! create is a server-side apply, an upsert, so on an object that exists it would add
//! owner references as a patch does, and the garbage collector would delete the object
//! once the owner goes. The object is read the same way (a create grant is `create` and
//! `patch` in RBAC); one that exists may get no owner reference it does not carry already
//! ([`admit::check_adoption`]), and the apply carries the `resourceVersion` checked, so
//! an object changed or replaced in between is a 409. The window left: an object absent
//! at the read and created by someone else before the apply arrives (milliseconds later)
//! is adopted. Closing it would take a create that fails on an existing object (a POST),
//! which records the plugin's fields as an update, not an apply; the plugin cannot make
//! that other create happen, only guess at it.

use kubewasm_core::admit::{self, Prepared, Rejection};
use kubewasm_core::intent::Action;
use kubewasm_core::manifest::Manifest;
use serde_json::Value;

use crate::Error;
use crate::apply::Writer;
use crate::event::cluster::Cluster;

/// Check every merge patch of `prepared` (the plugin `plugin`'s, writing as `writer`),
/// and every create that writes owner references where the plugin may not delete,
/// against its object, and make each carry the resourceVersion it was checked against.
/// The first merge patch taking another manager's field without `allowForce`, or create
/// adopting an existing object, refuses the call (an [`Error::Refused`]); a failed read
/// ends it like a failed write would.
pub(crate) async fn check_merges(
    cluster: &impl Cluster,
    plugin: &str,
    manifest: &Manifest,
    writer: &Writer,
    prepared: &mut [Prepared],
) -> Result<(), Error> {
    for (index, p) in prepared.iter_mut().enumerate() {
        if admit::adoption_matters(manifest, p) {
            check_adoption(cluster, plugin, manifest, writer, index, p).await?;
            continue;
        }
        if !matches!(p.intent.action, Action::Merge { .. }) {
            continue;
        }
        // Not there: nothing is owned; the patch itself will find it missing.
        let Some(live) = cluster.current(writer, p).await? else {
            continue;
        };
        admit::check_merge(manifest, p, &live, &writer.manager)
            .map_err(|e| refused(plugin, index, e.into()))?;
        if let (Some(version), Action::Merge { body, .. }) =
            (resource_version(&live), &mut p.intent.action)
        {
            precondition(body, version);
        }
    }
    Ok(())
}

/// A create writing owner references on an object the plugin may not delete: refused
/// when the object exists without them, sent with the `resourceVersion` checked when it
/// carries them already (see the module documentation).
async fn check_adoption(
    cluster: &impl Cluster,
    plugin: &str,
    manifest: &Manifest,
    writer: &Writer,
    index: usize,
    p: &mut Prepared,
) -> Result<(), Error> {
    // Not there: the apply creates it, with the owners the plugin may give a new object.
    let Some(live) = cluster.current(writer, p).await? else {
        return Ok(());
    };
    admit::check_adoption(manifest, p, &live).map_err(|e| refused(plugin, index, e.into()))?;
    if let (Some(version), Action::Apply { body, .. }) =
        (resource_version(&live), &mut p.intent.action)
    {
        precondition(body, version);
    }
    Ok(())
}

/// A merge patch (or an apply) naming `metadata.resourceVersion` is applied only to that version
/// (kube-apiserver answers 409 otherwise). One the plugin named itself is kept.
/// Intent `index` of `plugin`'s call refused, as admission refuses it.
fn refused(plugin: &str, index: usize, error: admit::AdmitError) -> Error {
    Error::rejected(plugin, Rejection { index, error })
}

/// The live object's `resourceVersion`, the one the write is checked against.
fn resource_version(live: &Value) -> Option<String> {
    live.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
}

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
