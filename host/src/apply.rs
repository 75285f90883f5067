//! The applier: turns checked intents into API calls. Create and apply-patches are
//! server-side apply under the plugin's field manager; merge patches and deletes are
//! plain PATCH / DELETE with preconditions.

use std::sync::Arc;

use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use serde_json::{Value, json};

use crate::Error;
use crate::cache::CachedObject;
use crate::discovery::{Discovery, Resolved};
use crate::grant::Access;
use crate::intent::{Action, Intent, Propagation};

/// An intent bound to a served resource and a namespace, ready to execute.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The decoded intent (with ownerReference added to the body when asked).
    pub intent: Intent,
    /// The resource it writes.
    pub resource: Arc<Resolved>,
    /// The namespace it writes in (None: cluster-scoped).
    pub namespace: Option<String>,
}

impl Prepared {
    /// What the grant check needs.
    pub fn access(&self) -> Access<'_> {
        Access {
            api_version: &self.intent.target.api_version,
            kind: &self.intent.target.kind,
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

/// Why an intent could not be prepared.
#[derive(Debug)]
pub enum PrepareError {
    /// The intent is wrong (plugin bug): names the reason.
    Invalid(String),
    /// Resolving the kind failed (not served yet, or the API server is unreachable).
    Resolve(Error),
}

/// What an executed intent did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The object as written has this resourceVersion.
    Written { resource_version: String },
    /// Delete accepted.
    Deleted,
    /// Delete of an object that was already gone.
    AlreadyGone,
}

/// Applies intents with one client.
pub struct Applier {
    client: Client,
    discovery: Arc<Discovery>,
}

impl Applier {
    /// An applier over `client`, resolving kinds with `discovery`.
    pub fn new(client: Client, discovery: Arc<Discovery>) -> Self {
        Applier { client, discovery }
    }

    /// Resolve the intent's kind and namespace and add the owner reference it asks for.
    pub async fn prepare(
        &self,
        mut intent: Intent,
        trigger: &CachedObject,
    ) -> Result<Prepared, PrepareError> {
        let resource = self
            .discovery
            .kind(&crate::resource::TypeRef::new(
                intent.target.api_version.clone(),
                intent.target.kind.clone(),
            ))
            .await
            .map_err(PrepareError::Resolve)?;
        let trigger_ns = trigger.object.metadata.namespace.clone();
        let namespace = if resource.namespaced {
            match (&intent.target.namespace, &trigger_ns) {
                (Some(ns), _) => Some(ns.clone()),
                (None, Some(ns)) => Some(ns.clone()),
                (None, None) => {
                    return Err(PrepareError::Invalid(format!(
                        "{} is namespaced: set metadata.namespace (the trigger is cluster-scoped)",
                        intent.target.kind
                    )));
                }
            }
        } else {
            if let Some(ns) = &intent.target.namespace {
                return Err(PrepareError::Invalid(format!(
                    "{} is cluster-scoped but the intent names namespace {ns}",
                    intent.target.kind
                )));
            }
            None
        };
        intent.target.namespace = namespace.clone();
        if let Action::Apply { body, .. } = &mut intent.action {
            if let Some(ns) = &namespace {
                set_namespace(body, ns);
            }
            if intent.owned_by_trigger {
                add_owner(body, trigger, namespace.as_deref()).map_err(PrepareError::Invalid)?;
            }
        }
        Ok(Prepared {
            intent,
            resource,
            namespace,
        })
    }

    /// Execute one prepared intent as the field manager `manager`.
    pub async fn execute(&self, manager: &str, p: &Prepared) -> Result<Outcome, Error> {
        let api: Api<DynamicObject> = match &p.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &p.resource.api),
            None => Api::all_with(self.client.clone(), &p.resource.api),
        };
        let name = p.intent.target.name.as_str();
        let what = p.describe();
        let written = |o: DynamicObject| Outcome::Written {
            resource_version: o.metadata.resource_version.unwrap_or_default(),
        };
        match &p.intent.action {
            Action::Apply { body, status } => {
                let mut params = PatchParams::apply(manager);
                params.force = p.intent.force;
                let patch = Patch::Apply(body);
                let res = if *status {
                    api.patch_status(name, &params, &patch).await
                } else {
                    api.patch(name, &params, &patch).await
                };
                res.map(written)
                    .map_err(|e| Error::from_kube("apply", what, e))
            }
            Action::Merge { body, status } => {
                let params = PatchParams {
                    field_manager: Some(manager.to_string()),
                    ..PatchParams::default()
                };
                let patch = Patch::Merge(body);
                let res = if *status {
                    api.patch_status(name, &params, &patch).await
                } else {
                    api.patch(name, &params, &patch).await
                };
                res.map(written)
                    .map_err(|e| Error::from_kube("merge-patch", what, e))
            }
            Action::Delete {
                uid,
                resource_version,
                propagation,
            } => {
                let params = DeleteParams {
                    preconditions: (uid.is_some() || resource_version.is_some()).then(|| {
                        Preconditions {
                            uid: uid.clone(),
                            resource_version: resource_version.clone(),
                        }
                    }),
                    propagation_policy: propagation.map(|p| match p {
                        Propagation::Background => PropagationPolicy::Background,
                        Propagation::Foreground => PropagationPolicy::Foreground,
                        Propagation::Orphan => PropagationPolicy::Orphan,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(name, &params).await {
                    Ok(_) => Ok(Outcome::Deleted),
                    // Already gone is the state the plugin asked for.
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(Outcome::AlreadyGone),
                    Err(e) => Err(Error::from_kube("delete", what, e)),
                }
            }
        }
    }
}

fn set_namespace(body: &mut Value, ns: &str) {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    }
}

/// Add a controller ownerReference to `trigger`, refusing what the API server's garbage
/// collector would not honour (cross-namespace owners, a second controller).
fn add_owner(
    body: &mut Value,
    trigger: &CachedObject,
    namespace: Option<&str>,
) -> Result<(), String> {
    let o = &trigger.object;
    let (Some(types), Some(name), Some(uid)) = (&o.types, &o.metadata.name, &o.metadata.uid) else {
        return Err(
            "owned-by-trigger: the triggering object has no apiVersion/kind/name/uid".into(),
        );
    };
    if let Some(owner_ns) = &o.metadata.namespace
        && namespace != Some(owner_ns.as_str())
    {
        return Err(format!(
            "owned-by-trigger: owner {} is in namespace {owner_ns}; owner references cannot cross namespaces{}",
            trigger.describe(),
            namespace
                .map(|n| format!(" (object is in {n})"))
                .unwrap_or_else(|| " (object is cluster-scoped)".into())
        ));
    }
    let reference = json!({
        "apiVersion": types.api_version,
        "kind": types.kind,
        "name": name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let meta = body
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or("object has no metadata")?;
    let refs = meta
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(vec![]));
    let Some(refs) = refs.as_array_mut() else {
        return Err("metadata.ownerReferences must be a list".into());
    };
    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
    if let Some(other) = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
    {
        return Err(format!(
            "owned-by-trigger: object already names a controller owner {}",
            other.get("name").and_then(Value::as_str).unwrap_or("?")
        ));
    }
    refs.push(reference);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(ns: Option<&str>) -> Arc<CachedObject> {
        let mut v = json!({"apiVersion":"sites.kubewasm.dev/v1alpha1","kind":"ContentSite",
            "metadata":{"name":"blog","uid":"u-1"}});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = json!(ns);
        }
        CachedObject::new(serde_json::from_value(v).unwrap())
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
        assert!(err.contains("cannot cross namespaces"), "{err}");
        let err = add_owner(&mut body, &trigger(Some("shop")), None).unwrap_err();
        assert!(err.contains("cluster-scoped"), "{err}");
        // A cluster-scoped owner may own namespaced objects.
        assert!(add_owner(&mut body, &trigger(None), Some("other")).is_ok());
    }

    #[test]
    fn a_second_controller_is_refused() {
        let mut body = json!({"metadata":{"name":"x","ownerReferences":[
            {"apiVersion":"v1","kind":"X","name":"other","uid":"u-2","controller":true}]}});
        let err = add_owner(&mut body, &trigger(Some("shop")), Some("shop")).unwrap_err();
        assert!(
            err.contains("already names a controller owner other"),
            "{err}"
        );
    }
}
