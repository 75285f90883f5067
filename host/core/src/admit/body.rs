//! What a create or patch body writes beyond its fields: owner references (the trigger,
//! or an object the plugin may write, with the uid the host knows) and finalizers (only
//! those a grant names).

use serde_json::Value;

use super::{AdmitError, BindError, BodyError, CrossNamespaceOwner, EXCERPT, Prepared, Trigger};
use crate::grant::{self, Access};
use crate::intent::{Action, IntentError};
use crate::kind::{KindInfo, ResolveError, Resolver};
use crate::manifest::{Manifest, Verb};
use crate::names::{self, excerpt};
use crate::resource::TypeRef;

/// What the host knows of existing objects: the uid of an object as the host caches it
/// (`run`: its watch caches; `kubewasm test`: the case's `cluster:` objects), to check the
/// owner references a plugin writes. None when the object is not known.
pub trait Owners: Sync {
    /// The uid of the object of `kind` named `name` (in `namespace` when namespaced).
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String>;
}

/// The metadata a create or (non-status) patch body writes, if any. A merge patch may
/// name `metadata` with any value; anything but an object is refused (an apply body's
/// metadata is checked when it is decoded).
fn written_metadata(p: &Prepared) -> Result<Option<&serde_json::Map<String, Value>>, AdmitError> {
    match &p.intent.action {
        Action::Apply {
            body,
            status: false,
        }
        | Action::Merge {
            body,
            status: false,
        } => match body.get("metadata") {
            None => Ok(None),
            Some(Value::Object(meta)) => Ok(Some(meta)),
            Some(_) => Err(IntentError::BadMetadata.into()),
        },
        // Status patches carry no metadata beyond identity (checked when decoded).
        _ => Ok(None),
    }
}

/// Check the finalizers and owner references a body writes. `null` is checked like any
/// other value: it is not a list, so it is refused (in a merge patch it would remove
/// every finalizer or owner, other managers' included; `[]` says that and is checked
/// against the object's field owners before it is sent).
pub(super) async fn check_body(
    manifest: &Manifest,
    p: &Prepared,
    trigger: &Trigger,
    resolver: &impl Resolver,
    owners: &impl Owners,
) -> Result<(), AdmitError> {
    let Some(meta) = written_metadata(p)? else {
        return Ok(());
    };
    let object = p.intent.target.to_string();
    if meta.contains_key("managedFields") {
        return Err(BodyError::ManagedFields(object).into());
    }
    match meta.get("finalizers") {
        None => {}
        Some(Value::Array(list)) => {
            for f in list {
                let Some(name) = f.as_str() else {
                    return Err(BodyError::FinalizersNotList.into());
                };
                if !grant::finalizer_granted(manifest, &p.access(), name) {
                    return Err(BodyError::FinalizerNotGranted {
                        finalizer: excerpt(name, EXCERPT),
                        object,
                    }
                    .into());
                }
            }
        }
        Some(_) => return Err(BodyError::FinalizersNotList.into()),
    }
    match meta.get("ownerReferences") {
        None => Ok(()),
        Some(Value::Array(refs)) => {
            for (index, r) in refs.iter().enumerate() {
                check_owner(manifest, p, &object, index, r, trigger, resolver, owners).await?;
            }
            // An owner reference is a deletion waiting for its owner to go: a patch may
            // write one only where it may delete. (`create` may, on an object it makes:
            // `owned-by-trigger`; a create is an upsert, so whether the object exists is
            // checked against the cluster, [`check_adoption`].)
            if !refs.is_empty() && p.intent.verb == Verb::Patch {
                grant::check(
                    manifest,
                    &Access {
                        verb: Verb::Delete,
                        force: false,
                        ..p.access()
                    },
                )
                .map_err(|reason| BodyError::OwnerNeedsDelete {
                    object,
                    reason: Box::new(reason),
                })?;
            }
            Ok(())
        }
        Some(_) => Err(BindError::OwnerReferencesNotList.into()),
    }
}

/// One owner reference: the trigger itself, or an object the plugin may write, in the
/// object's namespace (or cluster-scoped), with the uid the host knows.
#[allow(clippy::too_many_arguments)]
async fn check_owner(
    manifest: &Manifest,
    p: &Prepared,
    object: &str,
    index: usize,
    r: &Value,
    trigger: &Trigger,
    resolver: &impl Resolver,
    owners: &impl Owners,
) -> Result<(), AdmitError> {
    let bad = |reason: String| BodyError::BadOwnerReference { index, reason };
    let field = |key: &str| -> Result<&str, BodyError> {
        match r.get(key).and_then(Value::as_str) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(bad(format!("{key} is missing or not a string"))),
        }
    };
    let (api_version, kind, name, uid) = (
        field("apiVersion")?,
        field("kind")?,
        field("name")?,
        field("uid")?,
    );
    if crate::resource::check_api_version(api_version).is_err() || !names::is_kind(kind) {
        return Err(bad(format!(
            "apiVersion {:?} kind {:?} is not a valid kind",
            excerpt(api_version, EXCERPT),
            excerpt(kind, EXCERPT)
        ))
        .into());
    }
    if !names::is_path_safe(name) {
        return Err(bad(format!(
            "name {:?} is not a valid name",
            excerpt(name, EXCERPT)
        ))
        .into());
    }
    let owner_of = |ns: Option<&str>| match ns {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    };
    let is_trigger = trigger.uid.as_deref() == Some(uid)
        && trigger.api_version == api_version
        && trigger.kind == kind
        && trigger.name == name;
    if is_trigger {
        return CrossNamespaceOwner::check(trigger, object, p.namespace.as_deref())
            .map_err(|e| BodyError::CrossNamespaceOwner(e).into());
    }
    let info = match resolver
        .resolve_kind(&TypeRef::new(api_version, kind))
        .await
    {
        Ok(info) => info,
        // An owner of a kind nobody serves cannot exist: permanent, not retried.
        Err(ResolveError::NotServed(what)) => {
            return Err(bad(format!("owner kind {what} is not served")).into());
        }
        Err(e) => return Err(e.into()),
    };
    // A namespaced owner is looked up in the object's own namespace: an owner reference
    // has no namespace, so the garbage collector reads it that way too.
    let owner_ns = if info.namespaced {
        match &p.namespace {
            Some(ns) => Some(ns.as_str()),
            None => {
                return Err(BodyError::NamespacedOwnerOfClusterObject {
                    owner: owner_of(None),
                    object: object.to_string(),
                }
                .into());
            }
        }
    } else {
        None
    };
    let owner_api_version = info.api_version();
    let writable = [Verb::Patch, Verb::Create, Verb::Delete]
        .into_iter()
        .map(|verb| {
            grant::check(
                manifest,
                &Access {
                    api_version: &owner_api_version,
                    kind: &info.kind,
                    namespace: owner_ns,
                    verb,
                    force: false,
                },
            )
        })
        .collect::<Vec<_>>();
    if let Some(Err(reason)) = writable.iter().find(|r| r.is_err()).cloned()
        && writable.iter().all(Result::is_err)
    {
        return Err(BodyError::OwnerNotWritable {
            owner: owner_of(owner_ns),
            object: object.to_string(),
            reason: Box::new(reason),
        }
        .into());
    }
    let known = owners.uid(&info, owner_ns, name);
    if known.as_deref() != Some(uid) {
        return Err(BodyError::OwnerUidMismatch {
            owner: owner_of(owner_ns),
            object: object.to_string(),
            uid: excerpt(uid, EXCERPT),
            known,
        }
        .into());
    }
    Ok(())
}

/// Whether a create must be checked against the object as it exists ([`check_adoption`])
/// before it is sent: it writes owner references and no grant lets the plugin delete the
/// object. A create is a server-side apply, an upsert: on an object that exists it adds
/// owner references as a patch would, and only `run` knows whether the object exists.
pub fn adoption_matters(manifest: &Manifest, p: &Prepared) -> bool {
    p.intent.verb == Verb::Create
        && !written_owner_uids(p).is_empty()
        && grant::check(
            manifest,
            &Access {
                verb: Verb::Delete,
                force: false,
                ..p.access()
            },
        )
        .is_err()
}

/// The uids of the owner references a create or patch body writes.
fn written_owner_uids(p: &Prepared) -> Vec<&str> {
    let Ok(Some(meta)) = written_metadata(p) else {
        return Vec::new();
    };
    owner_uids(meta.get("ownerReferences"))
}

fn owner_uids(refs: Option<&Value>) -> Vec<&str> {
    refs.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
        .collect()
}

/// Check a create that writes owner references, by a plugin that may not delete the
/// object ([`adoption_matters`]), against the object as it exists (`live`): an owner
/// reference it does not already carry would hand an existing object to the garbage
/// collector, which only a grant allowing `delete` may do (as for a patch). Owner
/// references it already carries (the plugin created it with them) give nothing new.
pub fn check_adoption(manifest: &Manifest, p: &Prepared, live: &Value) -> Result<(), BodyError> {
    let carried = owner_uids(live.pointer("/metadata/ownerReferences"));
    let Ok(Some(meta)) = written_metadata(p) else {
        return Ok(());
    };
    let refs = meta.get("ownerReferences").and_then(Value::as_array);
    let Some(added) = refs.into_iter().flatten().find(|r| {
        r.get("uid")
            .and_then(Value::as_str)
            .is_some_and(|uid| !carried.contains(&uid))
    }) else {
        return Ok(());
    };
    let text = |key: &str| {
        excerpt(
            added.get(key).and_then(Value::as_str).unwrap_or("?"),
            EXCERPT,
        )
    };
    let reason = match grant::check(
        manifest,
        &Access {
            verb: Verb::Delete,
            force: false,
            ..p.access()
        },
    ) {
        Ok(()) => return Ok(()),
        Err(reason) => reason,
    };
    Err(BodyError::AdoptionNeedsDelete {
        object: p.intent.target.to_string(),
        owner: format!("{} {}", text("kind"), text("name")),
        reason: Box::new(reason),
    })
}
