//! Plugin objects (`plugins.kubewasm.dev`) as a source of plugins, beside the plugin
//! directory: each object's module is pulled from its OCI registry by digest into a
//! content-addressed store, and becomes a [`PluginFile`] whose settings, limits and
//! approval come from the object alone. The reloader loads it through the same path as a
//! file; this module also turns the outcome into the object's status.
//!
//! The objects themselves arrive through the watch manager like any watched kind (its
//! relists, 410 handling and discovery of a CRD installed later included): the host asks
//! for them in every environment's demand.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kubewasm_core::grant::Approval;
use kubewasm_core::plugin_object::{
    self, Condition, Permissions, PluginObject, PluginObjectStatus,
};
use kubewasm_core::resource::{ResourceRef, TypeRef};
use kubewasm_core::sync::lock;
use kubewasm_oci::{Auths, Credentials, Reference, RegistryConfig, Store};
use kubewasm_runtime::{LimitOverrides, PluginFile};
use sha2::{Digest, Sha256};

use crate::watch::cache::CachedObject;

/// Field manager of the host's status writes.
const STATUS_MANAGER: &str = "kubewasm";

/// How the host pulls the modules of Plugin objects.
#[derive(Debug, Clone)]
pub struct ObjectsConfig {
    /// Registries reached over plain HTTP, and extra CAs.
    pub registry: RegistryConfig,
    /// The host's own registry credentials (its Docker config file), used when a Plugin
    /// names no pull secret.
    pub auths: Arc<Auths>,
    /// The content-addressed module store.
    pub store_dir: PathBuf,
    /// Where pull secrets are read from: the host's namespace.
    pub namespace: String,
    /// Largest module pulled, checked against the manifest before any layer byte.
    pub max_module_bytes: u64,
    /// The operator's ceilings on `spec.limits`: a Plugin asking above one is refused
    /// (`InvalidLimits`) before its module is pulled.
    pub ceilings: kubewasm_runtime::LimitCeilings,
}

/// The Plugin kind, as a watch target.
pub(crate) fn plugin_kind() -> ResourceRef {
    ResourceRef::Kind(TypeRef::new(
        plugin_object::API_VERSION,
        plugin_object::KIND,
    ))
}

/// Why a Plugin's newest spec is not what serves, as a condition says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// CamelCase reason.
    pub(crate) reason: &'static str,
    /// Short message.
    pub(crate) message: String,
}

/// Reasons of failures reaching or reading the registry: the newest spec may work when
/// tried again.
const PULL_REASONS: &[&str] = &[
    "ManifestNotFound",
    "Unauthorized",
    "RegistryUnavailable",
    "DigestMismatch",
    "ModuleTooLarge",
    "NotAWasmArtifact",
    "StoreError",
    "PullFailed",
    "PullSecretUnavailable",
];

impl Failure {
    pub(crate) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
        }
    }

    /// Whether pulling the module failed (rather than its spec, load or approval).
    pub(crate) fn is_pull(&self) -> bool {
        PULL_REASONS.contains(&self.reason)
    }

    /// Whether to try again at the next reconcile even though nothing changed: the
    /// registry may be back, the secret created, the blob repaired.
    pub(crate) fn retry(&self) -> bool {
        self.is_pull()
    }
}

/// A Plugin object's module: pulled, unchanged since it was last looked at, or failed.
pub(crate) enum Pulled {
    /// The same spec and digest as last time.
    Unchanged,
    /// Pulled (or found in the store), as a plugin file.
    File(Box<PluginFile>),
    /// Why not.
    Failed(Failure),
}

/// One Plugin object, ready for the reloader: its module pulled and turned into a file,
/// or why not.
pub(crate) struct Candidate {
    /// `metadata.name`: the plugin's name.
    pub(crate) name: String,
    /// `metadata.generation`.
    pub(crate) generation: i64,
    /// The pinned reference pulled (`oci://…@sha256:…`).
    pub(crate) pinned: Option<String>,
    /// The manifest digest pulled.
    pub(crate) digest: Option<String>,
    /// The module.
    pub(crate) pulled: Pulled,
    /// Fingerprint of everything the load depends on (spec, pulled digest).
    pub(crate) fingerprint: String,
    /// The object's conditions as last written, for their transition times.
    pub(crate) previous: Vec<Condition>,
    /// `spec.permissions` as an approval (None: they do not parse).
    pub(crate) approval: Option<Approval>,
}

/// Pulls the modules of Plugin objects.
pub(crate) struct ObjectSource {
    client: Client,
    oci: kubewasm_oci::Client,
    store: Store,
    config: ObjectsConfig,
    /// Tag references resolved: (reference, spec fingerprint) → digest. A tag is resolved
    /// again when the object changes or on a rescan, not on every reload.
    resolved: Mutex<BTreeMap<String, String>>,
}

impl ObjectSource {
    pub(crate) fn new(client: Client, config: ObjectsConfig) -> Result<Self, crate::Error> {
        let oci = kubewasm_oci::Client::new(&config.registry).map_err(|e| crate::Error::Io {
            context: format!("registry client: {e}"),
            source: std::io::Error::other("registry client"),
        })?;
        let store = Store::open(&config.store_dir).map_err(|e| crate::Error::Io {
            context: format!("module store {}: {e}", config.store_dir.display()),
            source: std::io::Error::other("module store"),
        })?;
        Ok(ObjectSource {
            client,
            oci,
            store,
            config,
            resolved: Mutex::new(BTreeMap::new()),
        })
    }

    /// Forget resolved tags, so the next reload asks the registry again (a rescan).
    pub(crate) fn forget_tags(&self) {
        lock(&self.resolved).clear();
    }

    /// Every Plugin object, its module pulled (from the store when it is there) unless
    /// `unchanged(name, fingerprint)` says it was looked at as it is.
    pub(crate) async fn candidates(
        &self,
        objects: &[Arc<CachedObject>],
        unchanged: impl Fn(&str, &str) -> bool,
    ) -> Vec<Candidate> {
        let mut out = Vec::with_capacity(objects.len());
        for o in objects {
            let raw = match serde_json::to_value(&o.object) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(object = %o.describe(), error = %e, "unreadable Plugin object");
                    continue;
                }
            };
            let name = o.object.metadata.name.clone().unwrap_or_default();
            let generation = o.object.metadata.generation.unwrap_or_default();
            let parsed: Result<PluginObject, _> = serde_json::from_value(raw.clone());
            let previous = raw
                .pointer("/status/conditions")
                .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
                .unwrap_or_default();
            let spec_fp = hex_sha256(raw.get("spec").map(|s| s.to_string()).unwrap_or_default());
            let mut c = Candidate {
                name: name.clone(),
                generation,
                pinned: None,
                digest: None,
                pulled: Pulled::Unchanged,
                fingerprint: spec_fp.clone(),
                previous,
                // A spec or permissions that do not parse approve nothing: what runs for
                // this object is unloaded, never left with what it had.
                approval: Some(Approval::default()),
            };
            c.pulled = match parsed {
                Err(e) => Pulled::Failed(Failure::new("InvalidSpec", format!("spec: {e}"))),
                Ok(obj) => {
                    c.approval = Some(obj.spec.permissions.to_approval().unwrap_or_default());
                    match self.pull(&obj, &spec_fp, &mut c, &unchanged).await {
                        Ok(p) => p,
                        Err(f) => Pulled::Failed(f),
                    }
                }
            };
            out.push(c);
        }
        out
    }

    async fn pull(
        &self,
        obj: &PluginObject,
        spec_fp: &str,
        c: &mut Candidate,
        unchanged: &impl Fn(&str, &str) -> bool,
    ) -> Result<Pulled, Failure> {
        let spec = &obj.spec;
        // The candidate carries the approval; here a malformed one stops the pull.
        spec.permissions
            .to_approval()
            .map_err(|e| Failure::new("InvalidPermissions", format!("spec.permissions: {e}")))?;
        let overrides = match &spec.limits {
            None => LimitOverrides::default(),
            Some(v) => {
                let o: LimitOverrides = serde_json::from_value(v.clone())
                    .map_err(|e| Failure::new("InvalidLimits", format!("spec.limits: {e}")))?;
                o.validate()
                    .and_then(|()| self.config.ceilings.check(&o))
                    .map_err(|e| Failure::new("InvalidLimits", format!("spec.limits: {e}")))?;
                o
            }
        };
        if spec
            .settings
            .as_ref()
            .is_some_and(|s| s.get("kubewasm").is_some())
        {
            return Err(Failure::new(
                "InvalidSettings",
                "spec.settings must not hold the host's `kubewasm` key: limits go in spec.limits, permissions in spec.permissions",
            ));
        }
        let module = spec
            .module
            .as_deref()
            .ok_or_else(|| Failure::new("InvalidReference", "spec.module is required"))?;
        let reference: Reference = module
            .parse()
            .map_err(|e: kubewasm_oci::Error| Failure::new(e.reason(), e.to_string()))?;
        let creds = self.credentials(obj, &reference).await?;
        let digest = match reference.digest() {
            Some(d) => d.to_string(),
            // A tag that failed to resolve is not asked again before its retry is due.
            None if unchanged(&c.name, spec_fp) => return Ok(Pulled::Unchanged),
            None => {
                let key = format!("{module} {spec_fp}");
                let known = lock(&self.resolved).get(&key).cloned();
                match known {
                    Some(d) => d,
                    None => {
                        let d = self
                            .oci
                            .resolve(&reference, &creds)
                            .await
                            .map_err(|e| Failure::new(e.reason(), e.to_string()))?;
                        lock(&self.resolved).insert(key, d.clone());
                        d
                    }
                }
            }
        };
        let pinned = reference.pinned(&digest);
        c.pinned = Some(pinned.to_string());
        c.digest = Some(digest.clone());
        c.fingerprint = hex_sha256(format!("{spec_fp} {digest}"));
        if unchanged(&c.name, &c.fingerprint) {
            return Ok(Pulled::Unchanged);
        }
        let pulled = self
            .oci
            .pull_wasm(&pinned, &creds, &self.store, self.config.max_module_bytes)
            .await
            .map_err(|e| Failure::new(e.reason(), e.to_string()))?;
        if !pulled.from_store {
            tracing::info!(plugin = %c.name, module = %pinned, bytes = pulled.size, "module pulled");
        }
        let bytes = tokio::fs::read(&pulled.path).await.map_err(|e| {
            Failure::new(
                "StoreError",
                format!("reading {}: {e}", pulled.path.display()),
            )
        })?;
        let file = PluginFile {
            // Named after the object: a plugin must call itself what its source is named
            // (its bytes come from the store; the path only names it in messages).
            path: PathBuf::from(plugin_object::PLURAL.to_string() + "." + plugin_object::GROUP)
                .join(format!("{}.wasm", c.name)),
            digest: hex::encode(Sha256::digest(&bytes)),
            bytes,
            settings: spec.settings.as_ref().map(|s| s.to_string()),
            overrides,
        };
        Ok(Pulled::File(Box::new(file)))
    }

    /// The credentials for the module's registry: from the Plugin's pull secret when it
    /// names one, else from the host's Docker config.
    async fn credentials(
        &self,
        obj: &PluginObject,
        reference: &Reference,
    ) -> Result<Credentials, Failure> {
        let Some(secret) = &obj.spec.pull_secret_ref else {
            return Ok(self.config.auths.for_registry(reference.registry()));
        };
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), &self.config.namespace);
        let s = api.get(&secret.name).await.map_err(|e| {
            Failure::new(
                "PullSecretUnavailable",
                format!(
                    "pull secret {}/{}: {}",
                    self.config.namespace,
                    secret.name,
                    kube_error(&e)
                ),
            )
        })?;
        let bad = |why: &str| {
            Failure::new(
                "InvalidPullSecret",
                format!(
                    "pull secret {}/{}: {why}",
                    self.config.namespace, secret.name
                ),
            )
        };
        if s.type_.as_deref() != Some("kubernetes.io/dockerconfigjson") {
            return Err(bad("not of type kubernetes.io/dockerconfigjson"));
        }
        let data = s
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .ok_or_else(|| bad("no .dockerconfigjson key"))?;
        let auths = Auths::from_docker_config_json(&data.0).map_err(|e| bad(&e.to_string()))?;
        Ok(auths.for_registry(reference.registry()))
    }
}

/// A kube error in one short phrase (the API's status message when there is one).
fn kube_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

fn hex_sha256(text: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(text.as_ref()))
}

/// Where one Plugin object stands after a reload: written to its status by the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectState {
    pub(crate) generation: i64,
    /// What serves for it: (pinned reference, digest, version).
    pub(crate) serving: Option<(String, String, String)>,
    /// Why the newest spec does not serve (None: it does).
    pub(crate) failure: Option<Failure>,
    /// Whether the newest module was pulled (None: not tried, e.g. an invalid spec).
    pub(crate) pulled: Option<bool>,
    /// Whether the newest module fits the permissions (None: not known yet).
    pub(crate) approved: Option<Result<(), String>>,
    /// What the newest module asks for.
    pub(crate) requested: Option<Permissions>,
    /// Conditions as last written.
    pub(crate) previous: Vec<Condition>,
}

impl ObjectState {
    /// The status this state reads as; transition times kept from `previous` when a
    /// condition's status did not change.
    pub(crate) fn status(&self, now: &str) -> PluginObjectStatus {
        let gen_ = Some(self.generation);
        let mut conditions = Vec::new();
        let cond = |type_: &str, status: &str, reason: &str, message: String| {
            let since = self
                .previous
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.to_string());
            Condition {
                type_: type_.into(),
                status: status.into(),
                observed_generation: gen_,
                last_transition_time: since,
                reason: reason.into(),
                message: kubewasm_core_excerpt(&message),
            }
        };
        let (ready, reason, message) = match (&self.serving, &self.failure) {
            (Some((pinned, _, version)), None) => (
                "True",
                "Serving",
                format!("version {version} from {pinned}"),
            ),
            (Some((pinned, _, version)), Some(f)) => (
                "True",
                f.reason,
                format!(
                    "version {version} from {pinned} keeps serving; the newest spec does not load: {}",
                    f.message
                ),
            ),
            (None, Some(f)) => ("False", f.reason, f.message.clone()),
            (None, None) => ("False", "Pending", "not loaded yet".to_string()),
        };
        conditions.push(cond("Ready", ready, reason, message));
        match &self.approved {
            Some(Ok(())) => conditions.push(cond(
                "Approved",
                "True",
                "WithinPermissions",
                "the module asks for nothing beyond spec.permissions".into(),
            )),
            Some(Err(why)) => {
                conditions.push(cond("Approved", "False", "NotApproved", why.clone()))
            }
            None => conditions.push(cond(
                "Approved",
                "Unknown",
                "NotEvaluated",
                "the module was not loaded".into(),
            )),
        }
        match (self.pulled, &self.failure) {
            (Some(true), _) => conditions.push(cond("Pulled", "True", "Pulled", String::new())),
            (Some(false), Some(f)) => {
                conditions.push(cond("Pulled", "False", f.reason, f.message.clone()))
            }
            _ => {}
        }
        PluginObjectStatus {
            observed_generation: gen_,
            module: self.serving.as_ref().map(|s| s.0.clone()),
            digest: self.serving.as_ref().map(|s| s.1.clone()),
            version: self.serving.as_ref().map(|s| s.2.clone()),
            requested: self.requested.clone(),
            conditions,
        }
    }
}

/// Messages in conditions stay short: a plugin's refusal lists can be long.
fn kubewasm_core_excerpt(message: &str) -> String {
    kubewasm_core::excerpt::excerpt(message, 1024).into_owned()
}

/// Writes Plugin objects' status (the leader only), skipping what it already wrote.
pub(crate) struct StatusWriter {
    client: Client,
    written: Mutex<BTreeMap<String, PluginObjectStatus>>,
}

impl StatusWriter {
    pub(crate) fn new(client: Client) -> Self {
        StatusWriter {
            client,
            written: Mutex::new(BTreeMap::new()),
        }
    }

    /// Forget what was written (a new term: write everything again).
    pub(crate) fn forget(&self) {
        lock(&self.written).clear();
    }

    /// Write the status of each object whose status changed.
    pub(crate) async fn write(&self, states: &BTreeMap<String, ObjectState>) {
        let now = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let api: Api<kube::api::DynamicObject> = Api::all_with(
            self.client.clone(),
            &kube::discovery::ApiResource {
                group: plugin_object::GROUP.into(),
                version: plugin_object::VERSION.into(),
                api_version: plugin_object::API_VERSION.into(),
                kind: plugin_object::KIND.into(),
                plural: plugin_object::PLURAL.into(),
            },
        );
        for (name, state) in states {
            let status = state.status(&now);
            let unchanged = lock(&self.written)
                .get(name)
                .is_some_and(|w| same_ignoring_times(w, &status));
            if unchanged {
                continue;
            }
            let body = serde_json::json!({
                "apiVersion": plugin_object::API_VERSION,
                "kind": plugin_object::KIND,
                "metadata": {"name": name},
                "status": status,
            });
            match api
                .patch_status(
                    name,
                    &PatchParams::apply(STATUS_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await
            {
                Ok(_) => {
                    lock(&self.written).insert(name.clone(), status);
                }
                // Deleted meanwhile: nothing to report on.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => tracing::warn!(plugin = %name, error = %kube_error(&e),
                    "cannot write the Plugin object's status; will retry at the next reload"),
            }
        }
        let gone: Vec<String> = lock(&self.written)
            .keys()
            .filter(|n| !states.contains_key(*n))
            .cloned()
            .collect();
        for n in gone {
            lock(&self.written).remove(&n);
        }
    }
}

fn same_ignoring_times(a: &PluginObjectStatus, b: &PluginObjectStatus) -> bool {
    let strip = |s: &PluginObjectStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time.clear();
        }
        s
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ObjectState {
        ObjectState {
            generation: 2,
            serving: Some((
                "oci://r/p@sha256:aa".into(),
                "sha256:aa".into(),
                "1.0.0".into(),
            )),
            failure: None,
            pulled: Some(true),
            approved: Some(Ok(())),
            requested: None,
            previous: vec![],
        }
    }

    #[test]
    fn serving_reads_ready_and_a_failed_newest_keeps_ready_with_its_reason() {
        let s = state().status("t1");
        let ready = &s.conditions[0];
        assert_eq!(
            (
                ready.type_.as_str(),
                ready.status.as_str(),
                ready.reason.as_str()
            ),
            ("Ready", "True", "Serving")
        );
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(s.digest.as_deref(), Some("sha256:aa"));

        let mut failed = state();
        failed.failure = Some(Failure::new(
            "DigestMismatch",
            "blob sha256:bb is not what it claims",
        ));
        failed.pulled = Some(false);
        failed.approved = None;
        failed.previous = s.conditions.clone();
        let f = failed.status("t2");
        let ready = &f.conditions[0];
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "DigestMismatch")
        );
        assert!(ready.message.contains("keeps serving"), "{}", ready.message);
        // Ready did not change status: its transition time stays.
        assert_eq!(ready.last_transition_time, "t1");
        let pulled = f.conditions.iter().find(|c| c.type_ == "Pulled").unwrap();
        assert_eq!(
            (pulled.status.as_str(), pulled.last_transition_time.as_str()),
            ("False", "t2")
        );

        let mut gone = failed.clone();
        gone.serving = None;
        gone.failure = Some(Failure::new("NotApproved", "watch v1/Secret"));
        let g = gone.status("t3");
        assert_eq!(
            (
                g.conditions[0].status.as_str(),
                g.conditions[0].reason.as_str()
            ),
            ("False", "NotApproved")
        );
        assert_eq!(g.digest, None);
    }

    #[test]
    fn long_messages_are_cut() {
        let m = kubewasm_core_excerpt(&"é".repeat(4000));
        assert!(m.len() < 1100 && m.ends_with("bytes truncated)"), "{m}");
    }
}
