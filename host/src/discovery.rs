//! Resolving kinds and resource arguments to served resources, through the API server's
//! discovery documents. Results are cached; misses are not, so a CRD installed later is
//! found on the next lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::core::{ApiResource, GroupVersion};
use kube::discovery::{ApiCapabilities, Scope, oneshot};

use crate::Error;
use crate::cache::ResourceKey;
use crate::resource::{ResourceArg, ResourceRef, TypeRef};

/// A served resource.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// kube's description of it (group, version, kind, plural, apiVersion).
    pub api: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Whether it has a `status` subresource.
    pub has_status: bool,
}

impl Resolved {
    /// Its identity.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            group: self.api.group.clone(),
            version: self.api.version.clone(),
            plural: self.api.plural.clone(),
        }
    }

    /// Its kind.
    pub fn type_ref(&self) -> TypeRef {
        TypeRef::new(self.api.api_version.clone(), self.api.kind.clone())
    }

    fn from(api: ApiResource, caps: &ApiCapabilities) -> Self {
        Resolved {
            namespaced: caps.scope == Scope::Namespaced,
            has_status: caps.subresources.iter().any(|(r, _)| r.plural == "status"),
            api,
        }
    }
}

/// Discovery client with a positive cache.
pub struct Discovery {
    client: Client,
    cache: Mutex<HashMap<ResourceRef, Arc<Resolved>>>,
}

impl Discovery {
    /// A resolver using `client`.
    pub fn new(client: Client) -> Self {
        Discovery {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Resolve a kind.
    pub async fn kind(&self, t: &TypeRef) -> Result<Arc<Resolved>, Error> {
        self.resolve(&ResourceRef::Kind(t.clone())).await
    }

    /// Resolve a watch or read target. `Error::UnknownResource` when it is not served.
    pub async fn resolve(&self, r: &ResourceRef) -> Result<Arc<Resolved>, Error> {
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(r).cloned()) {
            return Ok(hit);
        }
        let resolved = Arc::new(match r {
            ResourceRef::Kind(t) => self.lookup_kind(t).await?,
            ResourceRef::Resource(arg) => self.lookup_resource(arg).await?,
        });
        if let Ok(mut c) = self.cache.lock() {
            c.insert(r.clone(), resolved.clone());
        }
        Ok(resolved)
    }

    async fn lookup_kind(&self, t: &TypeRef) -> Result<Resolved, Error> {
        match oneshot::pinned_kind(&self.client, &t.gvk()).await {
            Ok((api, caps)) => Ok(Resolved::from(api, &caps)),
            Err(e) => Err(classify(e, t.to_string())),
        }
    }

    async fn lookup_resource(&self, arg: &ResourceArg) -> Result<Resolved, Error> {
        let what = arg.to_string();
        let found = match &arg.version {
            Some(v) => {
                let gv = GroupVersion {
                    group: arg.group.clone(),
                    version: v.clone(),
                };
                let group = oneshot::pinned_group(&self.client, &gv)
                    .await
                    .map_err(|e| classify(e, what.clone()))?;
                group
                    .versioned_resources(v)
                    .into_iter()
                    .find(|(r, _)| r.plural == arg.plural)
            }
            None => {
                let group = oneshot::group(&self.client, &arg.group)
                    .await
                    .map_err(|e| classify(e, what.clone()))?;
                group
                    .recommended_resources()
                    .into_iter()
                    .find(|(r, _)| r.plural == arg.plural)
            }
        };
        found
            .map(|(api, caps)| Resolved::from(api, &caps))
            .ok_or(Error::UnknownResource { what })
    }
}

/// Not-found answers mean "not served (yet)"; everything else is a real failure.
fn classify(err: kube::Error, what: String) -> Error {
    match &err {
        kube::Error::Api(s) if s.code == 404 => Error::UnknownResource { what },
        kube::Error::Discovery(_) => Error::UnknownResource { what },
        _ => Error::from_kube("discover", what, err),
    }
}
