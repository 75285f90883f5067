//! Binding a decoded intent to its resolved resource and the trigger: the namespace, the
//! scope, the name rule, and the controller ownerReference of `owned-by-trigger`.

use serde_json::Value;

use super::{BindError, CrossNamespaceOwner, EXCERPT, Prepared, Trigger};
use crate::intent::{Action, Intent};
use crate::kind::KindInfo;
use crate::manifest::Verb;
use crate::names::{self, excerpt};

/// Bind a decoded intent to its resolved kind and the trigger: choose the namespace,
/// check the scope, add the controller ownerReference when asked.
pub(super) fn bind(
    mut intent: Intent,
    kind: KindInfo,
    trigger: &Trigger,
) -> Result<Prepared, BindError> {
    let namespace = if kind.namespaced {
        match (&intent.target.namespace, &trigger.namespace) {
            (Some(ns), _) | (None, Some(ns)) => Some(ns.clone()),
            (None, None) => return Err(BindError::NamespaceRequired(intent.target.kind.clone())),
        }
    } else {
        if let Some(ns) = &intent.target.namespace {
            return Err(BindError::ClusterScoped {
                kind: intent.target.kind.clone(),
                namespace: ns.clone(),
            });
        }
        None
    };
    names::check_request_name(
        &intent.target.name,
        names::name_rule(&kind.group, &kind.plural),
    )
    .map_err(|reason| BindError::InvalidName {
        kind: intent.target.kind.clone(),
        name: excerpt(&intent.target.name, EXCERPT),
        reason,
    })?;
    if let Action::Apply { status: true, .. } | Action::Merge { status: true, .. } = intent.action
        && !kind.has_status
    {
        return Err(BindError::NoStatusSubresource(intent.target.kind.clone()));
    }
    intent.target.namespace = namespace.clone();
    if let Action::Apply { body, .. } = &mut intent.action {
        if let Some(ns) = &namespace
            && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("namespace".into(), Value::String(ns.clone()));
        }
        if intent.owned_by_trigger {
            add_owner(
                body,
                trigger,
                &intent.target.to_string(),
                namespace.as_deref(),
            )?;
        }
    }
    let mut prepared = Prepared {
        intent,
        resolved_api_version: kind.api_version(),
        kind,
        namespace,
    };
    guard_trigger_uid(&mut prepared, trigger);
    Ok(prepared)
}

/// A `patch` that server-side applies the trigger itself names the trigger's uid (unless
/// the plugin named one), so a trigger deleted during the call is not created again by
/// it: kube-apiserver refuses to create an object for an apply that names a uid.
fn guard_trigger_uid(p: &mut Prepared, trigger: &Trigger) {
    let Some(uid) = &trigger.uid else { return };
    if p.intent.verb != Verb::Patch || !p.targets(trigger) {
        return;
    }
    if let Action::Apply {
        body,
        status: false,
    } = &mut p.intent.action
        && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.entry("uid")
            .or_insert_with(|| Value::String(uid.clone()));
    }
}

/// Add a controller ownerReference to `trigger` on `object`, refusing what the API server's garbage
/// collector would not honour (cross-namespace owners, a second controller).
pub(super) fn add_owner(
    body: &mut Value,
    trigger: &Trigger,
    object: &str,
    namespace: Option<&str>,
) -> Result<(), BindError> {
    let reference = trigger.owner_reference()?;
    CrossNamespaceOwner::check(trigger, object, namespace)
        .map_err(BindError::CrossNamespaceOwner)?;
    let meta = body
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or(BindError::NoMetadata)?;
    let refs = meta
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(vec![]));
    let Some(refs) = refs.as_array_mut() else {
        return Err(BindError::OwnerReferencesNotList);
    };
    let uid = reference["uid"].clone();
    refs.retain(|r| r.get("uid") != Some(&uid));
    if let Some(other) = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
    {
        return Err(BindError::SecondController(
            other
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
        ));
    }
    refs.push(reference);
    Ok(())
}
