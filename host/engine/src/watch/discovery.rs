//! Resolving kinds and resource arguments to served resources, through the API server's
//! discovery documents. Results are cached; misses are not, so a CRD installed later is
//! found on the next lookup. The one resolver behind watches, reads and intents in `run`,
//! and behind `kubewasm rbac --kubeconfig`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::core::{ApiResource, GroupVersion, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Scope, oneshot};
use kubewasm_core::kind::{KindInfo, ResolveError, Resolver};
use kubewasm_core::resource::{ResourceArg, ResourceRef, TypeRef};

/// kube's description of a resolved kind, for building `Api` handles.
pub fn api_resource(k: &KindInfo) -> ApiResource {
    ApiResource {
        group: k.group.clone(),
        version: k.version.clone(),
        api_version: k.api_version(),
        kind: k.kind.clone(),
        plural: k.plural.clone(),
    }
}

fn kind_info(api: ApiResource, caps: &ApiCapabilities) -> KindInfo {
    KindInfo {
        group: api.group,
        version: api.version,
        kind: api.kind,
        plural: api.plural,
        namespaced: caps.scope == Scope::Namespaced,
        has_status: caps.subresources.iter().any(|(r, _)| r.plural == "status"),
        guessed: false,
    }
}

/// Discovery client with a positive cache.
pub struct Discovery {
    client: Client,
    cache: Mutex<HashMap<ResourceRef, Arc<KindInfo>>>,
}

impl Discovery {
    /// A resolver using `client`.
    pub fn new(client: Client) -> Self {
        Discovery {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Resolve a watch, read or intent target. [`ResolveError::NotServed`] when the cluster
    /// does not serve it (yet).
    pub async fn resolve(&self, r: &ResourceRef) -> Result<Arc<KindInfo>, ResolveError> {
        if let Some(hit) =
            Some(kubewasm_core::sync::lock(&self.cache)).and_then(|c| c.get(r).cloned())
        {
            return Ok(hit);
        }
        let resolved = Arc::new(match r {
            ResourceRef::Kind(t) => self.lookup_kind(t).await?,
            ResourceRef::Resource(arg) => self.lookup_resource(arg).await?,
        });
        {
            let mut c = kubewasm_core::sync::lock(&self.cache);
            c.insert(r.clone(), resolved.clone());
        }
        Ok(resolved)
    }

    async fn lookup_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        if t.version() == "*" {
            // "Whichever version the group serves" (grants name a group, not a version):
            // the group's preferred version that serves the kind.
            let group = oneshot::group(&self.client, t.group())
                .await
                .map_err(|e| classify(e, t.to_string()))?;
            return group
                .recommended_kind(&t.kind)
                .map(|(api, caps)| kind_info(api, &caps))
                .ok_or_else(|| ResolveError::NotServed(t.to_string()));
        }
        let gvk = GroupVersionKind::gvk(t.group(), t.version(), &t.kind);
        match oneshot::pinned_kind(&self.client, &gvk).await {
            Ok((api, caps)) => Ok(kind_info(api, &caps)),
            Err(e) => Err(classify(e, t.to_string())),
        }
    }

    async fn lookup_resource(&self, arg: &ResourceArg) -> Result<KindInfo, ResolveError> {
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
            .map(|(api, caps)| kind_info(api, &caps))
            .ok_or(ResolveError::NotServed(what))
    }
}

impl Resolver for Discovery {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        self.resolve(&ResourceRef::Kind(t.clone()))
            .await
            .map(|k| (*k).clone())
    }
}

/// Not-found answers mean "not served (yet)"; everything else is a real failure.
fn classify(err: kube::Error, what: String) -> ResolveError {
    match &err {
        kube::Error::Api(s) if s.code == 404 => ResolveError::NotServed(what),
        kube::Error::Discovery(_) => ResolveError::NotServed(what),
        _ => ResolveError::Unavailable {
            what,
            source: Box::new(err),
        },
    }
}
