//! The validation pipeline every call's intents go through before anything is written:
//! decode → resolve → bind (namespace, scope, owner reference) → grant. `kubewasm run`
//! and `kubewasm test` both call [`admit`], so a test case passes exactly when `run`
//! would apply the same intents; only the [`Resolver`] differs (discovery or offline).

use serde_json::{Value, json};

use crate::grant::{self, Access, GrantError};
use crate::intent::{self, Action, Intent, IntentError, RawIntent};
use crate::kind::{KindInfo, ResolveError, Resolver};
use crate::manifest::{Manifest, Verb};
use crate::names::{self, excerpt};
use crate::resource::TypeRef;

/// Longest excerpt of a plugin string an admission error carries.
const EXCERPT: usize = 64;

/// What the host knows of existing objects: the uid of an object as the host caches it
/// (`run`: its watch caches; `kubewasm test`: the case's `cluster:` objects), to check the
/// owner references a plugin writes. None when the object is not known.
pub trait Owners: Sync {
    /// The uid of the object of `kind` named `name` (in `namespace` when namespaced).
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String>;
}

/// Knows no object (every owner reference other than the trigger is refused).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoOwners;

impl Owners for NoOwners {
    fn uid(&self, _: &KindInfo, _: Option<&str>, _: &str) -> Option<String> {
        None
    }
}

/// The object whose event is being handled, as far as intents refer to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trigger {
    /// `group/version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace (None: cluster-scoped).
    pub namespace: Option<String>,
    /// uid, when the object has one (objects from a cluster always do).
    pub uid: Option<String>,
}

impl Trigger {
    /// Read the identity of a JSON object.
    pub fn from_json(object: &Value) -> Self {
        let s = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Trigger {
            api_version: s("/apiVersion").unwrap_or_default(),
            kind: s("/kind").unwrap_or_default(),
            name: s("/metadata/name").unwrap_or_default(),
            namespace: s("/metadata/namespace"),
            uid: s("/metadata/uid"),
        }
    }

    /// `Kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The controller ownerReference an `owned-by-trigger` intent gets.
    pub fn owner_reference(&self) -> Result<Value, BindError> {
        let Some(uid) = &self.uid else {
            return Err(BindError::TriggerIncomplete);
        };
        if self.api_version.is_empty() || self.kind.is_empty() || self.name.is_empty() {
            return Err(BindError::TriggerIncomplete);
        }
        Ok(json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }))
    }
}

/// An intent bound to a served resource and a namespace, ready to execute.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The decoded intent (namespace filled in, ownerReference added when asked).
    pub intent: Intent,
    /// The resource it writes.
    pub kind: KindInfo,
    /// The namespace it writes in (None: cluster-scoped).
    pub namespace: Option<String>,
    /// `group/version` of the resolved resource (what grants are checked against).
    resolved_api_version: String,
}

impl Prepared {
    /// What the grant check needs: the resolved resource's group, kind and scope, not
    /// the intent's own strings.
    pub fn access(&self) -> Access<'_> {
        Access {
            api_version: &self.resolved_api_version,
            kind: &self.kind.kind,
            namespace: self.namespace.as_deref(),
            verb: self.intent.verb,
            force: self.intent.force,
        }
    }

    /// Whether this intent writes the trigger itself (the same object under any version
    /// of its group).
    pub fn targets(&self, trigger: &Trigger) -> bool {
        let group = trigger
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        group == self.kind.group
            && trigger.kind == self.kind.kind
            && trigger.name == self.intent.target.name
            && trigger.namespace == self.namespace
    }

    /// Whether this write is to the trigger as the plugin saw it, so that finding no such
    /// object means the trigger was deleted (or replaced) during the call: a status write
    /// or a merge patch of the trigger (which need the object), or an apply naming the
    /// trigger's uid (which kube-apiserver never creates). A body naming another uid is
    /// the plugin's mistake, not a deletion; an apply without a uid creates the object.
    pub fn requires_trigger(&self, trigger: &Trigger) -> bool {
        if !self.targets(trigger) {
            return false;
        }
        let (body, needs_object) = match &self.intent.action {
            Action::Apply { body, status } => (body, *status),
            Action::Merge { body, .. } => (body, true),
            Action::Delete { .. } => return false,
        };
        match body
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
        {
            Some(uid) => trigger.uid.as_deref() == Some(uid),
            None => needs_object,
        }
    }

    /// `create MongoDB shop/site-db` for logs.
    pub fn describe(&self) -> String {
        let ns = self
            .namespace
            .as_ref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        format!(
            "{} {} {ns}{}",
            self.intent.verb.as_str(),
            self.intent.target.kind,
            self.intent.target.name
        )
    }
}

/// Why an intent could not be bound to its resource and namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// A namespaced kind, no namespace in the intent, and a cluster-scoped trigger.
    #[error("{0} is namespaced: set metadata.namespace (the trigger is cluster-scoped)")]
    NamespaceRequired(String),
    /// A cluster-scoped kind with a namespace.
    #[error("{kind} is cluster-scoped but the intent names namespace {namespace}")]
    ClusterScoped {
        /// Kind.
        kind: String,
        /// The namespace the intent named.
        namespace: String,
    },
    /// The trigger lacks what an ownerReference needs.
    #[error("owned-by-trigger: the triggering object has no apiVersion/kind/name/uid")]
    TriggerIncomplete,
    /// The owner is in another namespace than the object (the GC would not honour it).
    #[error(
        "owned-by-trigger: owner {owner} is in namespace {owner_namespace}; owner references cannot cross namespaces ({})",
        .namespace.as_ref().map(|n| format!("object is in {n}")).unwrap_or_else(|| "object is cluster-scoped".into())
    )]
    CrossNamespaceOwner {
        /// The trigger.
        owner: String,
        /// Its namespace.
        owner_namespace: String,
        /// The object's namespace.
        namespace: Option<String>,
    },
    /// The object already has a controller owner.
    #[error("owned-by-trigger: object already names a controller owner {0}")]
    SecondController(String),
    /// `metadata.ownerReferences` is not a list.
    #[error("metadata.ownerReferences must be a list")]
    OwnerReferencesNotList,
    /// The object has no metadata object.
    #[error("object has no metadata")]
    NoMetadata,
    /// A write to the status subresource of a resource that serves none: kube-apiserver
    /// answers 404, which would read as a missing object.
    #[error("{0} has no status subresource: write status with a patch of the object itself")]
    NoStatusSubresource(String),
    /// A name the resource does not accept.
    #[error("{kind} name {name:?} is invalid: {reason}")]
    InvalidName {
        /// Kind.
        kind: String,
        /// The name (an excerpt).
        name: String,
        /// kube-apiserver's rule.
        reason: String,
    },
}

/// Why the body of a create or patch writes something its grants do not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// `metadata.finalizers` is not a list of strings.
    #[error("metadata.finalizers must be a list of strings")]
    FinalizersNotList,
    /// A finalizer no grant of the plugin allows on this object.
    #[error(
        "finalizer {finalizer:?} on {object} is not granted (a finalizer keeps an object from being deleted; the operator grants finalizers by name)"
    )]
    FinalizerNotGranted {
        /// The finalizer (an excerpt).
        finalizer: String,
        /// The object.
        object: String,
    },
    /// An owner reference without apiVersion, kind, name or uid, or with invalid ones.
    #[error("metadata.ownerReferences[{index}] is malformed: {reason}")]
    BadOwnerReference {
        /// Position in the list.
        index: usize,
        /// Why.
        reason: String,
    },
    /// An owner in another namespace than the object.
    #[error(
        "owner {owner} is in namespace {owner_namespace} but {object} is {}: owner references cannot cross namespaces",
        .namespace.as_ref().map(|n| format!("in namespace {n}")).unwrap_or_else(|| "cluster-scoped".into())
    )]
    CrossNamespaceOwner {
        /// The owner.
        owner: String,
        /// Its namespace.
        owner_namespace: String,
        /// The object.
        object: String,
        /// The object's namespace.
        namespace: Option<String>,
    },
    /// A namespaced owner of a cluster-scoped object.
    #[error("owner {owner} is namespaced but {object} is cluster-scoped")]
    NamespacedOwnerOfClusterObject {
        /// The owner.
        owner: String,
        /// The object.
        object: String,
    },
    /// An owner that is neither the trigger nor an object the plugin may write.
    #[error(
        "owner {owner} of {object} is neither the triggering object nor an object this plugin may write ({reason})"
    )]
    OwnerNotWritable {
        /// The owner.
        owner: String,
        /// The object.
        object: String,
        /// The grant check's answer.
        reason: Box<GrantError>,
    },
    /// An owner whose uid is not the uid the host knows (a bogus uid makes the garbage
    /// collector delete the object).
    #[error("owner {owner} of {object} has uid {uid:?}, but {}", .known.as_ref().map(|k| format!("the host's cache says {k:?}")).unwrap_or_else(|| "the host does not know that object (owners must be cached: watched or read by some plugin)".into()))]
    OwnerUidMismatch {
        /// The owner.
        owner: String,
        /// The object.
        object: String,
        /// The uid the body names (an excerpt).
        uid: String,
        /// The uid the host knows.
        known: Option<String>,
    },
}

/// Why one intent of a call was not admitted.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// The intent itself is malformed.
    #[error(transparent)]
    Invalid(#[from] IntentError),
    /// Its kind could not be resolved.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// It cannot be bound to a namespace or owner.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// No grant allows it.
    #[error(transparent)]
    Refused(#[from] GrantError),
    /// Its body writes owners or finalizers its grants do not allow.
    #[error(transparent)]
    Body(#[from] BodyError),
}

/// A call refused whole: which intent, and why.
///
/// Its `Display` is the one spelling of a refusal, wherever it is reported (`run`'s error
/// after the plugin's name, `kubewasm test`'s report, a recorded case's expectation):
/// `intent #N refused: …` when no grant allows the intent, `invalid intent #N: …` for
/// everything else admission refuses.
#[derive(Debug, thiserror::Error)]
pub struct Rejection {
    /// Position of the intent in the plugin's answer.
    pub index: usize,
    /// Why.
    pub error: AdmitError,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            AdmitError::Refused(why) => write!(f, "intent #{} refused: {why}", self.index),
            why => write!(f, "invalid intent #{}: {why}", self.index),
        }
    }
}

/// Bind a decoded intent to its resolved kind and the trigger: choose the namespace,
/// check the scope, add the controller ownerReference when asked.
pub fn bind(mut intent: Intent, kind: KindInfo, trigger: &Trigger) -> Result<Prepared, BindError> {
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
            add_owner(body, trigger, namespace.as_deref())?;
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

/// Add a controller ownerReference to `trigger`, refusing what the API server's garbage
/// collector would not honour (cross-namespace owners, a second controller).
fn add_owner(
    body: &mut Value,
    trigger: &Trigger,
    namespace: Option<&str>,
) -> Result<(), BindError> {
    let reference = trigger.owner_reference()?;
    if let Some(owner_ns) = &trigger.namespace
        && namespace != Some(owner_ns.as_str())
    {
        return Err(BindError::CrossNamespaceOwner {
            owner: trigger.describe(),
            owner_namespace: owner_ns.clone(),
            namespace: namespace.map(str::to_string),
        });
    }
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

/// Admit one call's intents, all or nothing: decode each (documents at most `max_bytes`),
/// resolve its kind, bind it, check it against the manifest's grants on the resolved
/// resource, and check what its body writes beyond its fields (owner references against
/// the trigger, the grants and `owners`; finalizers against the grants). The first failure
/// rejects the call.
pub async fn admit(
    manifest: &Manifest,
    raw: Vec<RawIntent>,
    max_bytes: usize,
    trigger: &Trigger,
    resolver: &impl Resolver,
    owners: &impl Owners,
) -> Result<Vec<Prepared>, Rejection> {
    let mut prepared = Vec::with_capacity(raw.len());
    for (index, r) in raw.into_iter().enumerate() {
        let reject = |error: AdmitError| Rejection { index, error };
        let decoded = intent::decode(r, max_bytes).map_err(|e| reject(e.into()))?;
        let kind = resolver
            .resolve_kind(&TypeRef::new(
                decoded.target.api_version.clone(),
                decoded.target.kind.clone(),
            ))
            .await
            .map_err(|e| reject(e.into()))?;
        let p = bind(decoded, kind, trigger).map_err(|e| reject(e.into()))?;
        grant::check(manifest, &p.access()).map_err(|e| reject(e.into()))?;
        check_body(manifest, &p, trigger, resolver, owners)
            .await
            .map_err(reject)?;
        prepared.push(p);
    }
    Ok(prepared)
}

/// The metadata a create or (non-status) patch body writes, if any.
fn written_metadata(p: &Prepared) -> Option<&serde_json::Map<String, Value>> {
    match &p.intent.action {
        Action::Apply {
            body,
            status: false,
        }
        | Action::Merge {
            body,
            status: false,
        } => body.get("metadata").and_then(Value::as_object),
        // Status patches carry no metadata beyond identity (checked when decoded).
        _ => None,
    }
}

/// Check the finalizers and owner references a body writes.
async fn check_body(
    manifest: &Manifest,
    p: &Prepared,
    trigger: &Trigger,
    resolver: &impl Resolver,
    owners: &impl Owners,
) -> Result<(), AdmitError> {
    let Some(meta) = written_metadata(p) else {
        return Ok(());
    };
    let object = p.intent.target.to_string();
    match meta.get("finalizers") {
        None | Some(Value::Null) => {}
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
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(refs)) => {
            for (index, r) in refs.iter().enumerate() {
                check_owner(manifest, p, &object, index, r, trigger, resolver, owners).await?;
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
        return match &trigger.namespace {
            Some(owner_ns) if p.namespace.as_deref() != Some(owner_ns.as_str()) => {
                Err(BodyError::CrossNamespaceOwner {
                    owner: trigger.describe(),
                    owner_namespace: owner_ns.clone(),
                    object: object.to_string(),
                    namespace: p.namespace.clone(),
                }
                .into())
            }
            _ => Ok(()),
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::Offline;
    use crate::manifest::{Grant, Verb};

    fn trigger(ns: Option<&str>) -> Trigger {
        Trigger {
            api_version: "sites.kubewasm.dev/v1alpha1".into(),
            kind: "ContentSite".into(),
            name: "blog".into(),
            namespace: ns.map(str::to_string),
            uid: Some("u-1".into()),
        }
    }

    #[test]
    fn a_rejection_is_spelled_one_way() {
        let refused = Rejection {
            index: 1,
            error: AdmitError::Refused(GrantError::NotGranted {
                verb: "create",
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: Some("a".into()),
            }),
        };
        assert_eq!(
            refused.to_string(),
            "intent #1 refused: no grant allows create on v1 Secret in namespace a"
        );
        let invalid = Rejection {
            index: 0,
            error: AdmitError::Invalid(IntentError::NotAnObject("object")),
        };
        assert_eq!(
            invalid.to_string(),
            "invalid intent #0: object must be a JSON object"
        );
    }

    #[test]
    fn owner_reference_is_added_once() {
        let mut body = json!({"metadata":{"name":"x","namespace":"shop"}});
        let t = trigger(Some("shop"));
        add_owner(&mut body, &t, Some("shop")).unwrap();
        add_owner(&mut body, &t, Some("shop")).unwrap();
        assert_eq!(
            body["metadata"]["ownerReferences"],
            json!([{"apiVersion":"sites.kubewasm.dev/v1alpha1","kind":"ContentSite","name":"blog",
                    "uid":"u-1","controller":true,"blockOwnerDeletion":true}])
        );
    }

    #[test]
    fn owner_reference_cannot_cross_namespaces() {
        let mut body = json!({"metadata":{"name":"x"}});
        let err = add_owner(&mut body, &trigger(Some("shop")), Some("other")).unwrap_err();
        assert!(err.to_string().contains("cannot cross namespaces"), "{err}");
        let err = add_owner(&mut body, &trigger(Some("shop")), None).unwrap_err();
        assert!(err.to_string().contains("cluster-scoped"), "{err}");
        // A cluster-scoped owner may own namespaced objects.
        assert!(add_owner(&mut body, &trigger(None), Some("other")).is_ok());
    }

    #[test]
    fn a_second_controller_is_refused() {
        let mut body = json!({"metadata":{"name":"x","ownerReferences":[
            {"apiVersion":"v1","kind":"X","name":"other","uid":"u-2","controller":true}]}});
        let err = add_owner(&mut body, &trigger(Some("shop")), Some("shop")).unwrap_err();
        assert_eq!(err, BindError::SecondController("other".into()));
    }

    fn site_kind(has_status: bool) -> KindInfo {
        KindInfo {
            group: "sites.kubewasm.dev".into(),
            version: "v1alpha2".into(),
            kind: "ContentSite".into(),
            plural: "contentsites".into(),
            namespaced: true,
            has_status,
            guessed: false,
        }
    }

    /// ConfigMaps as discovery describes them, served by `group` (`""`: core).
    fn configmaps_in(group: &str) -> KindInfo {
        KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
            has_status: false,
            guessed: false,
        }
    }

    /// A decoded server-side apply patch of ContentSite `name`.
    fn site_patch(name: &str, body: Value, status: bool) -> Intent {
        let raw = RawIntent::Patch {
            target: crate::intent::ObjectRef {
                api_version: "sites.kubewasm.dev/v1alpha1".into(),
                kind: "ContentSite".into(),
                namespace: None,
                name: name.into(),
            },
            body: body.to_string(),
            strategy: crate::intent::Strategy::Apply,
            status,
            force: false,
        };
        crate::intent::decode(raw, 1 << 20).unwrap()
    }

    fn status_patch(name: &str) -> Intent {
        site_patch(name, json!({"status": {"phase": "Ready"}}), true)
    }

    #[test]
    fn a_status_write_needs_a_status_subresource() {
        let err = bind(
            status_patch("blog"),
            site_kind(false),
            &trigger(Some("shop")),
        )
        .unwrap_err();
        assert_eq!(err, BindError::NoStatusSubresource("ContentSite".into()));
        assert!(
            err.to_string().contains("has no status subresource"),
            "{err}"
        );
        assert!(
            bind(
                status_patch("blog"),
                site_kind(true),
                &trigger(Some("shop"))
            )
            .is_ok()
        );
    }

    #[test]
    fn an_intent_knows_whether_it_writes_its_trigger() {
        let t = trigger(Some("shop"));
        // Another version of the same group is the same object.
        let own = bind(status_patch("blog"), site_kind(true), &t).unwrap();
        assert!(own.targets(&t));
        assert!(own.requires_trigger(&t));
        let other = bind(status_patch("other"), site_kind(true), &t).unwrap();
        assert!(!other.targets(&t));
        assert!(!other.requires_trigger(&t));
        let elsewhere = trigger(Some("elsewhere"));
        assert!(!own.targets(&elsewhere));
        let created = bind(
            crate::intent::decode(
                create(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"blog"}})),
                1 << 20,
            )
            .unwrap(),
            configmaps_in(""),
            &t,
        )
        .unwrap();
        assert!(!created.targets(&t), "same name, another kind");
        assert!(!created.requires_trigger(&t));
    }

    #[test]
    fn an_apply_patch_of_the_trigger_names_its_uid_so_it_never_recreates_it() {
        let t = trigger(Some("shop"));
        let patch = |name: &str, body: Value, status: bool| {
            bind(site_patch(name, body, status), site_kind(true), &t).unwrap()
        };
        let own = patch("blog", json!({"metadata": {"labels": {"a": "b"}}}), false);
        let Action::Apply { body, .. } = &own.intent.action else {
            panic!("apply")
        };
        assert_eq!(body["metadata"]["uid"], json!("u-1"));
        assert!(own.requires_trigger(&t));
        // The plugin's own uid is kept; other objects and status writes are left alone.
        let named = patch("blog", json!({"metadata": {"uid": "u-mine"}}), false);
        let Action::Apply { body, .. } = &named.intent.action else {
            panic!("apply")
        };
        assert_eq!(body["metadata"]["uid"], json!("u-mine"));
        // Refused for that uid: the plugin's mistake, not a deleted trigger.
        assert!(!named.requires_trigger(&t));
        let other = patch("other", json!({"metadata": {"labels": {"a": "b"}}}), false);
        let Action::Apply { body, .. } = &other.intent.action else {
            panic!("apply")
        };
        assert!(body["metadata"].get("uid").is_none());
        assert!(!other.requires_trigger(&t));
        let status = patch("blog", json!({"status": {"phase": "Ready"}}), true);
        let Action::Apply { body, .. } = &status.intent.action else {
            panic!("apply")
        };
        assert!(body["metadata"].get("uid").is_none());
    }

    fn manifest(namespaces: &[&str]) -> Manifest {
        Manifest {
            name: "p".into(),
            version: "1".into(),
            watches: vec![],
            grants: vec![Grant {
                api_groups: vec!["rbac.authorization.k8s.io".into(), "".into()],
                kinds: vec!["*".into()],
                namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
                verbs: vec![Verb::Create],
                allow_force: false,
                finalizers: vec![],
            }],
            reads: vec![],
        }
    }

    fn create(object: Value) -> RawIntent {
        RawIntent::Create {
            object: object.to_string(),
            force: false,
            owned_by_trigger: false,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        // The offline resolver never awaits anything, so one poll finishes the future.
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("offline admission awaited something"),
        }
    }

    #[test]
    fn a_cluster_scoped_kind_is_not_covered_by_a_namespaced_grant() {
        // The trigger is namespaced, but a ClusterRole has no namespace: a grant limited to
        // namespace shop does not cover it.
        let role = json!({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
            "metadata":{"name":"escalate"}});
        let err = block_on(admit(
            &manifest(&["shop"]),
            vec![create(role.clone())],
            1 << 20,
            &trigger(Some("shop")),
            &Offline,
            &NoOwners,
        ))
        .unwrap_err();
        assert!(
            matches!(
                err.error,
                AdmitError::Refused(GrantError::NotGranted {
                    namespace: None,
                    ..
                })
            ),
            "{err}"
        );
        // The same grant covers a namespaced kind in its namespace, defaulted from the trigger.
        let cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}});
        let ok = block_on(admit(
            &manifest(&["shop"]),
            vec![create(cm)],
            1 << 20,
            &trigger(Some("shop")),
            &Offline,
            &NoOwners,
        ))
        .unwrap();
        assert_eq!(ok[0].namespace.as_deref(), Some("shop"));
        // And a cluster-wide grant covers the ClusterRole.
        assert!(
            block_on(admit(
                &manifest(&[]),
                vec![create(role)],
                1 << 20,
                &trigger(Some("shop")),
                &Offline,
                &NoOwners
            ))
            .is_ok()
        );
    }

    #[test]
    fn a_call_is_rejected_at_its_first_bad_intent() {
        let good = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}});
        let err = block_on(admit(
            &manifest(&[]),
            vec![create(good), create(json!({"kind":"X"}))],
            1 << 20,
            &trigger(Some("shop")),
            &Offline,
            &NoOwners,
        ))
        .unwrap_err();
        assert_eq!(err.index, 1);
        assert!(matches!(
            err.error,
            AdmitError::Invalid(IntentError::MissingApiVersion)
        ));
    }

    /// Knows a few objects by (kind, namespace, name).
    struct Known(
        Vec<(
            &'static str,
            Option<&'static str>,
            &'static str,
            &'static str,
        )>,
    );

    impl Owners for Known {
        fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, ns, n, _)| *k == kind.kind && *ns == namespace && *n == name)
                .map(|(.., uid)| uid.to_string())
        }
    }

    fn known() -> Known {
        Known(vec![
            ("ConfigMap", Some("shop"), "parent", "u-parent"),
            ("ConfigMap", Some("other"), "far", "u-far"),
            ("Secret", Some("shop"), "key", "u-key"),
            ("Namespace", None, "shop", "u-ns"),
        ])
    }

    fn writer(verbs: &[Verb], finalizers: &[&str]) -> Manifest {
        Manifest {
            name: "p".into(),
            version: "1".into(),
            watches: vec![],
            grants: vec![Grant {
                api_groups: vec!["".into()],
                kinds: vec!["ConfigMap".into()],
                namespaces: vec!["shop".into(), "other".into()],
                verbs: verbs.to_vec(),
                allow_force: false,
                finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
            }],
            reads: vec![],
        }
    }

    fn owned(refs: Value) -> RawIntent {
        create(json!({"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":"child","namespace":"shop","ownerReferences": refs}}))
    }

    fn patched(body: Value, status: bool) -> RawIntent {
        RawIntent::Patch {
            target: crate::intent::ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("shop".into()),
                name: "victim".into(),
            },
            body: body.to_string(),
            strategy: crate::intent::Strategy::Merge,
            status,
            force: false,
        }
    }

    fn run(m: &Manifest, raw: RawIntent) -> Result<Vec<Prepared>, AdmitError> {
        block_on(admit(
            m,
            vec![raw],
            1 << 20,
            &trigger(Some("shop")),
            &Offline,
            &known(),
        ))
        .map_err(|r| r.error)
    }

    fn reference(kind: &str, name: &str, uid: &str) -> Value {
        json!({"apiVersion": if kind == "ContentSite" {"sites.kubewasm.dev/v1alpha1"} else {"v1"},
               "kind": kind, "name": name, "uid": uid})
    }

    #[test]
    fn owner_references_must_be_the_trigger_or_a_writable_object_with_its_uid() {
        let m = writer(&[Verb::Create, Verb::Patch], &[]);
        // The trigger, and a ConfigMap the plugin may write with its real uid.
        assert!(run(&m, owned(json!([reference("ContentSite", "blog", "u-1")]))).is_ok());
        assert!(
            run(
                &m,
                owned(json!([reference("ConfigMap", "parent", "u-parent")]))
            )
            .is_ok()
        );
        // A bogus uid: the garbage collector would delete the object.
        let err = run(
            &m,
            owned(json!([reference("ConfigMap", "parent", "bogus")])),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                AdmitError::Body(BodyError::OwnerUidMismatch { known: Some(_), .. })
            ),
            "{err}"
        );
        // An owner the host does not know.
        let err = run(&m, owned(json!([reference("ConfigMap", "ghost", "u-9")]))).unwrap_err();
        assert!(
            matches!(
                err,
                AdmitError::Body(BodyError::OwnerUidMismatch { known: None, .. })
            ),
            "{err}"
        );
        // The trigger's name with another uid is not the trigger.
        let err = run(&m, owned(json!([reference("ContentSite", "blog", "u-2")]))).unwrap_err();
        assert!(
            matches!(err, AdmitError::Body(BodyError::OwnerNotWritable { .. })),
            "{err}"
        );
        // An object the plugin may not write (a Secret), even with its real uid.
        let err = run(&m, owned(json!([reference("Secret", "key", "u-key")]))).unwrap_err();
        assert!(
            matches!(err, AdmitError::Body(BodyError::OwnerNotWritable { .. })),
            "{err}"
        );
        // The uid of an object in another namespace: looked up in the object's namespace.
        let err = run(&m, owned(json!([reference("ConfigMap", "far", "u-far")]))).unwrap_err();
        assert!(
            matches!(err, AdmitError::Body(BodyError::OwnerUidMismatch { .. })),
            "{err}"
        );
        // Malformed references.
        for bad in [
            json!([{"apiVersion":"v1","kind":"ConfigMap","name":"parent"}]),
            json!([{"apiVersion":"v1?x","kind":"ConfigMap","name":"parent","uid":"u"}]),
            json!([{"apiVersion":"v1","kind":"ConfigMap","name":"a?b","uid":"u"}]),
            json!(["x"]),
        ] {
            let err = run(&m, owned(bad.clone())).unwrap_err();
            assert!(
                matches!(err, AdmitError::Body(BodyError::BadOwnerReference { .. })),
                "{bad}: {err}"
            );
        }
        // A patch-only grant cannot hand its target a bogus owner either (merge or apply).
        let m = writer(&[Verb::Patch], &[]);
        let bogus =
            json!({"metadata":{"ownerReferences":[reference("ConfigMap", "parent", "bogus")]}});
        assert!(matches!(
            run(&m, patched(bogus, false)),
            Err(AdmitError::Body(BodyError::OwnerUidMismatch { .. }))
        ));
        assert!(
            run(
                &m,
                patched(json!({"metadata":{"ownerReferences":null}}), false)
            )
            .is_ok()
        );
    }

    #[test]
    fn owner_references_do_not_cross_namespaces() {
        let m = writer(&[Verb::Create], &[]);
        // The trigger is in shop; the object in other.
        let raw = create(json!({"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":"child","namespace":"other",
                        "ownerReferences":[reference("ContentSite", "blog", "u-1")]}}));
        let err = run(&m, raw).unwrap_err();
        assert!(
            matches!(err, AdmitError::Body(BodyError::CrossNamespaceOwner { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("cannot cross namespaces"), "{err}");
    }

    #[test]
    fn finalizers_need_a_grant_naming_them() {
        let with = |f: Value| owned(json!([])).clone_with_finalizers(f);
        let m = writer(&[Verb::Create, Verb::Patch], &["example.com/cleanup"]);
        assert!(run(&m, with(json!(["example.com/cleanup"]))).is_ok());
        assert!(run(&m, with(json!([]))).is_ok());
        let err = run(&m, with(json!(["example.com/cleanup", "other.io/block"]))).unwrap_err();
        assert!(
            matches!(&err, AdmitError::Body(BodyError::FinalizerNotGranted { finalizer, .. }) if finalizer == "other.io/block"),
            "{err}"
        );
        assert!(matches!(
            run(&m, with(json!("x"))),
            Err(AdmitError::Body(BodyError::FinalizersNotList))
        ));
        // No finalizer granted: none may be added or kept, by create or patch.
        let m = writer(&[Verb::Create, Verb::Patch], &[]);
        assert!(run(&m, with(json!(["example.com/cleanup"]))).is_err());
        let keep = json!({"metadata":{"finalizers":["kubernetes.io/pvc-protection"]}});
        assert!(matches!(
            run(&m, patched(keep, false)),
            Err(AdmitError::Body(BodyError::FinalizerNotGranted { .. }))
        ));
    }

    #[test]
    fn names_follow_the_resolved_resource_rule() {
        let m = Manifest {
            grants: vec![Grant {
                api_groups: vec!["".into()],
                kinds: vec!["*".into()],
                namespaces: vec![],
                verbs: vec![Verb::Create],
                allow_force: false,
                finalizers: vec![],
            }],
            ..writer(&[], &[])
        };
        let obj = |kind: &str, name: &str| {
            create(json!({"apiVersion":"v1","kind":kind,"metadata":{"name":name}}))
        };
        assert!(run(&m, obj("ConfigMap", "a.b-c")).is_ok());
        assert!(run(&m, obj("Service", "web")).is_ok());
        for (kind, name) in [
            ("ConfigMap", "Upper"),
            ("ConfigMap", "a_b"),
            ("Service", "1web"),
            ("Service", "a.b"),
            ("Namespace", "a.b"),
        ] {
            let err = run(&m, obj(kind, name)).unwrap_err();
            assert!(
                matches!(err, AdmitError::Bind(BindError::InvalidName { .. })),
                "{kind} {name}: {err}"
            );
        }
    }

    #[test]
    fn the_grant_is_checked_on_the_resolved_resource() {
        /// Resolves every kind to another group's resource.
        struct Alias;
        impl Resolver for Alias {
            async fn resolve_kind(&self, _: &TypeRef) -> Result<KindInfo, ResolveError> {
                Ok(configmaps_in("evil.example"))
            }
        }
        let m = writer(&[Verb::Create], &[]);
        let raw = create(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}));
        let err = block_on(admit(
            &m,
            vec![raw],
            1 << 20,
            &trigger(Some("shop")),
            &Alias,
            &NoOwners,
        ))
        .unwrap_err();
        assert!(
            matches!(&err.error, AdmitError::Refused(GrantError::NotGranted { api_version, .. }) if api_version == "evil.example/v1"),
            "{err}"
        );
    }

    trait WithFinalizers {
        fn clone_with_finalizers(&self, f: Value) -> RawIntent;
    }

    impl WithFinalizers for RawIntent {
        fn clone_with_finalizers(&self, f: Value) -> RawIntent {
            let RawIntent::Create { object, .. } = self else {
                unreachable!("a create")
            };
            let mut v: Value = serde_json::from_str(object).unwrap();
            v["metadata"]["finalizers"] = f;
            create(v)
        }
    }
}
