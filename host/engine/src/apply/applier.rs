//! The applier: turns admitted intents into API calls. Create and apply-patches are
//! server-side apply under the plugin's field manager; merge patches and deletes are
//! plain PATCH / DELETE with preconditions.
//!
//! Each plugin's writes go out under its own identity at the API server: with
//! [`WriteIdentity::PluginServiceAccounts`] (the default of `kubewasm run`), a request for
//! plugin `P` carries `Impersonate-User: system:serviceaccount:NS:kubewasm-P`, so the API
//! server's RBAC judges it by that ServiceAccount's roles (from `kubewasm rbac`), not by
//! the host's. The host's own identity only reads (the caches) and impersonates.

use std::collections::HashMap;
use std::sync::Mutex;

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
pub(crate) enum Outcome {
    /// The object as written has this resourceVersion.
    Written {
        /// The resourceVersion the server gave it.
        resource_version: String,
    },
    /// Delete accepted.
    Deleted,
    /// Delete of an object that was already gone.
    AlreadyGone,
    /// Sent in dry run: what it would change (a refusal included).
    Previewed(crate::preview::change::Change),
}

/// Whose identity a plugin's writes are sent with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteIdentity {
    /// The host's own (`--no-impersonation`, for clusters where the host may not
    /// impersonate).
    Host,
    /// Each plugin's ServiceAccount (named like its field manager, `kubewasm-<plugin>`)
    /// in this namespace, impersonated.
    PluginServiceAccounts {
        /// The namespace of the plugins' ServiceAccounts (the host's).
        namespace: String,
    },
}

impl WriteIdentity {
    /// The user a plugin with field manager `manager` writes as; None for the host's own.
    pub fn user(&self, manager: &str) -> Option<String> {
        match self {
            WriteIdentity::Host => None,
            WriteIdentity::PluginServiceAccounts { namespace } => {
                Some(format!("system:serviceaccount:{namespace}:{manager}"))
            }
        }
    }
}

/// Whom one plugin's writes are sent as (`plugins::environment::Version::writer`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Writer {
    /// Its field manager, `kubewasm-P`, also its ServiceAccount's name.
    pub(crate) manager: String,
    /// A NamespacedPlugin's namespace, where its ServiceAccount is: such a plugin is
    /// always impersonated, whatever [`WriteIdentity`] says, so a team's plugin never
    /// writes with more than the team granted. None: a cluster plugin, as [`WriteIdentity`]
    /// says.
    pub(crate) tenant: Option<String>,
}

/// A client that sends every request of `base` as `user` (`Impersonate-User`), through
/// `base`'s connection and credentials.
fn impersonating(base: &Client, user: &str) -> Result<Client, http::header::InvalidHeaderValue> {
    let value = http::HeaderValue::from_str(user)?;
    let inner = base.clone();
    let service = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let value = value.clone();
        async move {
            req.headers_mut().insert("impersonate-user", value);
            inner.send(req).await
        }
    });
    Ok(Client::new(service, base.default_namespace()))
}

/// Applies intents, each plugin's with its own client (see [`WriteIdentity`]).
pub(crate) struct Applier {
    client: Client,
    identity: WriteIdentity,
    /// Impersonating clients, one per writer, built on first use.
    clients: Mutex<HashMap<Writer, Client>>,
}

impl Applier {
    /// An applier writing each plugin's intents with `identity`, through `client`.
    pub(crate) fn with_identity(client: Client, identity: WriteIdentity) -> Self {
        Applier {
            client,
            identity,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The client writing as `writer`.
    fn client_for(&self, writer: &Writer) -> Client {
        let user = match &writer.tenant {
            Some(ns) => Some(format!("system:serviceaccount:{ns}:{}", writer.manager)),
            None => self.identity.user(&writer.manager),
        };
        let Some(user) = user else {
            return self.client.clone();
        };
        let mut clients = kubewasm_core::sync::lock(&self.clients);
        if let Some(c) = clients.get(writer) {
            return c.clone();
        }
        match impersonating(&self.client, &user) {
            Ok(c) => {
                clients.insert(writer.clone(), c.clone());
                c
            }
            // A manager is `kubewasm-` + a DNS label (checked at load), a valid header
            // value; should that ever fail, the write goes out unimpersonated and logged.
            Err(e) => {
                tracing::error!(user = %user, error = %e, "cannot impersonate; writing as the host");
                self.client.clone()
            }
        }
    }

    /// The object `p` writes as the API server has it now, `managedFields` included, read
    /// as the plugin writing it (an empty dry-run merge patch: see `event::preflight`);
    /// None when it does not exist.
    pub(crate) async fn current(
        &self,
        writer: &Writer,
        p: &Prepared,
    ) -> Result<Option<serde_json::Value>, Error> {
        let resource = api_resource(&p.kind);
        let client = self.client_for(writer);
        let manager = writer.manager.as_str();
        let api: Api<DynamicObject> = match &p.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        };
        let name = p.intent.target.name.as_str();
        let params = PatchParams {
            dry_run: true,
            field_manager: Some(manager.to_string()),
            ..PatchParams::default()
        };
        let empty = Patch::Merge(serde_json::json!({}));
        let status = matches!(
            p.intent.action,
            Action::Apply { status: true, .. } | Action::Merge { status: true, .. }
        );
        let res = if status {
            api.patch_status(name, &params, &empty).await
        } else {
            api.patch(name, &params, &empty).await
        };
        match res {
            Ok(o) => serde_json::to_value(o).map(Some).map_err(|e| Error::Kube {
                context: format!("reading {}", p.describe()),
                source: kube::Error::SerdeError(e),
            }),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(Error::from_kube("read (dry-run)", p.describe(), e)),
        }
    }

    /// Execute one prepared intent as the field manager `manager` (and, when impersonating,
    /// as that plugin's ServiceAccount).
    pub(crate) async fn execute(&self, writer: &Writer, p: &Prepared) -> Result<Outcome, Error> {
        Ok(match self.send(writer, p, false).await? {
            Sent::Object(o) => Outcome::Written {
                resource_version: o.metadata.resource_version.unwrap_or_default(),
            },
            Sent::Deleted => Outcome::Deleted,
            Sent::AlreadyGone => Outcome::AlreadyGone,
        })
    }

    /// Send one prepared intent with `dryRun=All`, as [`Applier::execute`] would send it:
    /// the object as the write would leave it (None: it would be deleted, or is gone).
    /// The API server validates it and stores nothing.
    pub(crate) async fn dry_run(
        &self,
        writer: &Writer,
        p: &Prepared,
    ) -> Result<Option<serde_json::Value>, Error> {
        match self.send(writer, p, true).await? {
            Sent::Object(o) => serde_json::to_value(o).map(Some).map_err(|e| Error::Kube {
                context: format!("reading the dry run of {}", p.describe()),
                source: kube::Error::SerdeError(e),
            }),
            Sent::Deleted | Sent::AlreadyGone => Ok(None),
        }
    }

    /// One intent as an API request: server-side apply, a merge patch, or a delete.
    async fn send(&self, writer: &Writer, p: &Prepared, dry_run: bool) -> Result<Sent, Error> {
        let resource = api_resource(&p.kind);
        let client = self.client_for(writer);
        let manager = writer.manager.as_str();
        let api: Api<DynamicObject> = match &p.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        };
        let name = p.intent.target.name.as_str();
        let what = p.describe();
        match &p.intent.action {
            Action::Apply { body, status } => {
                let mut params = PatchParams::apply(manager);
                params.force = p.intent.force;
                params.dry_run = dry_run;
                let patch = Patch::Apply(body);
                let res = if *status {
                    api.patch_status(name, &params, &patch).await
                } else {
                    api.patch(name, &params, &patch).await
                };
                res.map(|o| Sent::Object(Box::new(o)))
                    .map_err(|e| Error::from_kube("apply", what, e))
            }
            Action::Merge { body, status } => {
                let params = PatchParams {
                    field_manager: Some(manager.to_string()),
                    dry_run,
                    ..PatchParams::default()
                };
                let patch = Patch::Merge(body);
                let res = if *status {
                    api.patch_status(name, &params, &patch).await
                } else {
                    api.patch(name, &params, &patch).await
                };
                res.map(|o| Sent::Object(Box::new(o)))
                    .map_err(|e| Error::from_kube("merge-patch", what, e))
            }
            Action::Delete {
                uid,
                resource_version,
                propagation,
            } => {
                let params = DeleteParams {
                    dry_run,
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
                    Ok(_) => Ok(Sent::Deleted),
                    // Already gone is the state the plugin asked for.
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(Sent::AlreadyGone),
                    Err(e) => Err(Error::from_kube("delete", what, e)),
                }
            }
        }
    }
}

/// What the API server answered one write with.
enum Sent {
    /// The object as written (or as a dry run would write it).
    Object(Box<DynamicObject>),
    /// Delete accepted.
    Deleted,
    /// Delete of an object that was already gone.
    AlreadyGone,
}
