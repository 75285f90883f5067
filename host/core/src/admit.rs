//! The validation pipeline every call's intents go through before anything is written:
//! decode → resolve → bind (namespace, scope, owner reference) → grant. `kubewasm run`
//! and `kubewasm test` both call [`admit`], so a test case passes exactly when `run`
//! would apply the same intents; only the [`Resolver`] differs (discovery or offline).

use serde_json::{Value, json};

use crate::grant::{self, Access, GrantError};
use crate::intent::{self, Action, Intent, IntentError, RawIntent};
use crate::kind::{KindInfo, ResolveError, Resolver};
use crate::manifest::Manifest;
use crate::resource::TypeRef;

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
}

impl Prepared {
    /// What the grant check needs: the resolved resource's group and kind.
    pub fn access(&self) -> Access<'_> {
        Access {
            api_version: &self.intent.target.api_version,
            kind: &self.kind.kind,
            namespace: self.namespace.as_deref(),
            verb: self.intent.verb,
            force: self.intent.force,
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
}

/// A call refused whole: which intent, and why.
#[derive(Debug, thiserror::Error)]
#[error("intent #{index}: {error}")]
pub struct Rejection {
    /// Position of the intent in the plugin's answer.
    pub index: usize,
    /// Why.
    pub error: AdmitError,
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
    Ok(Prepared {
        intent,
        kind,
        namespace,
    })
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
/// resource. The first failure rejects the call.
pub async fn admit(
    manifest: &Manifest,
    raw: Vec<RawIntent>,
    max_bytes: usize,
    trigger: &Trigger,
    resolver: &impl Resolver,
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
        prepared.push(p);
    }
    Ok(prepared)
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
                &Offline
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
        ))
        .unwrap_err();
        assert_eq!(err.index, 1);
        assert!(matches!(
            err.error,
            AdmitError::Invalid(IntentError::MissingApiVersion)
        ));
    }
}
