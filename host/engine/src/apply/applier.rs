//! The applier: turns admitted intents into API calls. Create and apply-patches are
//! server-side apply under the plugin's field manager; merge patches and deletes are
//! plain PATCH / DELETE with preconditions.

use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kubewasm_core::admit::Prepared;
use kubewasm_core::intent::{Action, Propagation};

use crate::Error;
use crate::watch::discovery::api_resource;

/// What an executed intent did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The object as written has this resourceVersion.
    Written {
        /// The resourceVersion the server gave it.
        resource_version: String,
    },
    /// Delete accepted.
    Deleted,
    /// Delete of an object that was already gone.
    AlreadyGone,
}

/// Applies intents with one client.
pub struct Applier {
    client: Client,
}

impl Applier {
    /// An applier over `client`.
    pub fn new(client: Client) -> Self {
        Applier { client }
    }

    /// Execute one prepared intent as the field manager `manager`.
    pub async fn execute(&self, manager: &str, p: &Prepared) -> Result<Outcome, Error> {
        let resource = api_resource(&p.kind);
        let api: Api<DynamicObject> = match &p.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
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
