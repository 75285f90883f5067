//! Why admission refuses an intent, and a call.

use crate::grant::GrantError;
use crate::intent::IntentError;
use crate::kind::ResolveError;

use super::Trigger;

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
    /// The trigger is in another namespace than the object (the GC would not honour it).
    #[error("owned-by-trigger: {0}")]
    CrossNamespaceOwner(CrossNamespaceOwner),
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

/// An owner reference to an object in another namespace than the object it is written on:
/// the garbage collector reads an owner reference in the object's own namespace, so it
/// would not honour it. Refused for `owned-by-trigger` (a [`BindError`]) and for owner
/// references in a body (a [`BodyError`]) alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "owner {owner} is in namespace {owner_namespace} but {object} is {}: owner references cannot cross namespaces",
    .namespace.as_ref().map(|n| format!("in namespace {n}")).unwrap_or_else(|| "cluster-scoped".into())
)]
pub struct CrossNamespaceOwner {
    /// The owner.
    pub owner: String,
    /// Its namespace.
    pub owner_namespace: String,
    /// The object.
    pub object: String,
    /// The object's namespace (None: cluster-scoped).
    pub namespace: Option<String>,
}

impl CrossNamespaceOwner {
    /// Refuse `trigger` as the owner of `object` in `namespace` when it lives in another
    /// namespace (a cluster-scoped trigger may own objects anywhere).
    pub(super) fn check(
        trigger: &Trigger,
        object: &str,
        namespace: Option<&str>,
    ) -> Result<(), CrossNamespaceOwner> {
        match &trigger.namespace {
            Some(owner_ns) if namespace != Some(owner_ns.as_str()) => Err(CrossNamespaceOwner {
                owner: trigger.describe(),
                owner_namespace: owner_ns.clone(),
                object: object.to_string(),
                namespace: namespace.map(str::to_string),
            }),
            _ => Ok(()),
        }
    }
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
    #[error(transparent)]
    CrossNamespaceOwner(CrossNamespaceOwner),
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
    /// A patch writing owner references on an object its grants do not let it delete: an
    /// owner reference hands the object to the garbage collector, which deletes it when
    /// the owner goes (the trigger, say), so only `create` (a new object) or a patch whose
    /// grant also allows `delete` may write one.
    #[error(
        "a patch that writes owner references on {object} needs delete on it too (the garbage collector deletes an object whose owner is gone; only create may set owners without delete): {reason}"
    )]
    OwnerNeedsDelete {
        /// The object.
        object: String,
        /// The grant check's answer for `delete`.
        reason: Box<GrantError>,
    },
    /// A create adding an owner reference to an object that already exists, by a plugin
    /// whose grants do not let it delete the object: a create is a server-side apply, an
    /// upsert, so it would hand an existing object to the garbage collector as a patch
    /// would ([`BodyError::OwnerNeedsDelete`]).
    #[error(
        "a create that adds owner {owner} to {object}, which already exists, needs delete on it too (create is an upsert: the garbage collector would delete the existing object once its owner is gone; without delete, a create may set owners only on an object it makes): {reason}"
    )]
    AdoptionNeedsDelete {
        /// The object.
        object: String,
        /// The owner the create would add.
        owner: String,
        /// The grant check's answer for `delete`.
        reason: Box<GrantError>,
    },
    /// A body writing `metadata.managedFields`, the API server's record of who owns
    /// which field: rewriting it would take other managers' fields without a conflict.
    #[error(
        "metadata.managedFields of {0} is the API server's record of field ownership; a plugin may not write it"
    )]
    ManagedFields(String),
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
    /// A merge patch that would take fields another manager owns, without `allowForce`.
    #[error(transparent)]
    TakesFields(#[from] TakesFields),
}

/// A merge patch that changes fields another field manager owns, with no grant allowing
/// force: server-side apply would report the conflict, a merge patch would silently take
/// the fields, so it is held to the same rule as a forced apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "merge patch of {object} changes {field}, which field manager {manager:?} owns: a merge patch takes other managers' fields without a conflict, so it needs a grant with allow-force (a patch with the apply strategy reports the conflict instead)"
)]
pub struct TakesFields {
    /// The object.
    pub object: String,
    /// The field (from the object's managedFields).
    pub field: String,
    /// The manager owning it.
    pub manager: String,
}

/// A call refused whole: which intent, and why.
///
/// Its `Display` is the one spelling of a refusal, wherever it is reported (`run`'s error
/// after the plugin's name, `kubewasm test`'s report, a recorded case's expectation):
/// `intent #N refused: …` when no grant allows the intent (or its force), `invalid intent #N: …` for
/// everything else admission refuses.
#[derive(Debug, thiserror::Error)]
pub struct Rejection {
    /// Position of the intent in the plugin's answer.
    pub index: usize,
    /// Why.
    pub error: AdmitError,
}

impl Rejection {
    /// Whether the intent was refused for what its grants allow (as opposed to being
    /// malformed): no grant covers it, or its force, or the delete an owner reference
    /// amounts to.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.error,
            AdmitError::Refused(_)
                | AdmitError::TakesFields(_)
                | AdmitError::Body(
                    BodyError::OwnerNeedsDelete { .. } | BodyError::AdoptionNeedsDelete { .. }
                )
        )
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            AdmitError::Refused(why) => write!(f, "intent #{} refused: {why}", self.index),
            AdmitError::TakesFields(why) => write!(f, "intent #{} refused: {why}", self.index),
            AdmitError::Body(
                why @ (BodyError::OwnerNeedsDelete { .. } | BodyError::AdoptionNeedsDelete { .. }),
            ) => {
                write!(f, "intent #{} refused: {why}", self.index)
            }
            why => write!(f, "invalid intent #{}: {why}", self.index),
        }
    }
}
