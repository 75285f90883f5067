//! Plugin objects (`plugins.kubewasm.dev`) as a source of plugins, beside the plugin
//! directory: each object's module is pulled from its OCI registry by digest into a
//! content-addressed store, and becomes a [`PluginFile`] whose settings, limits and
//! approval come from the object alone. The reloader loads it through the same path as a
//! file; this module also turns the outcome into the object's status.
//!
//! The objects themselves arrive through the watch manager like any watched kind (its
//! relists, 410 handling and discovery of a CRD installed later included): the host asks
//! for them in every environment's demand.
//!
//! NamespacedPlugins (`namespacedplugins.kubewasm.dev`, with `--tenant-registry` only) go
//! the same way, each as plugin `NS/P` confined to its namespace `NS`: the platform's
//! ceilings ([`TenantsConfig`]: registries, limits, count) and the confinement of
//! `spec.permissions` (`core::tenant::confine_approval`; cluster-scoped custom
//! kinds by discovery, [`ObjectSource::cluster_scoped`]) refuse it before any pull; its
//! pull secret is read in `NS`, and its status written to the object in `NS`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kubewasm_core::grant::{Approval, Mode};
use kubewasm_core::plugin_object::{
    self, CandidateSpec, Condition, Permissions, PluginObject, PluginObjectStatus, PreviewStatus,
};
use kubewasm_core::resource::{ResourceRef, TypeRef};
use kubewasm_core::sync::lock;
use kubewasm_core::tenant;
use kubewasm_oci::{Auths, Credentials, Reference, RegistryConfig, Store};
use kubewasm_runtime::{LimitOverrides, PluginFile};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::plugins::compiles::{PULL_SLOTS, Progress};

/// Stages of a Plugin object's job, as [`Progress`] reports them: 0 is its start (the
/// tag resolved, when it has one).
pub(crate) const STAGE_PULLING: u8 = 1;
/// Pulled; the module is being loaded.
pub(crate) const STAGE_LOADING: u8 = 2;

use crate::plugins::environment::Origin;
use crate::preview::report::Previews;
use crate::replicas::ownership::Ownership;
use crate::serve::metrics::Metrics;
use crate::watch::cache::CachedObject;
use crate::watch::discovery::Discovery;

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
    /// The content-addressed module store; None: a directory private to this process,
    /// removed when the host stops.
    pub store_dir: Option<PathBuf>,
    /// Where pull secrets are read from: the host's namespace.
    pub namespace: String,
    /// Largest module pulled, checked against the manifest before any layer byte.
    pub max_module_bytes: u64,
    /// The operator's ceilings on `spec.limits`: a Plugin asking above one is refused
    /// (`InvalidLimits`) before its module is pulled.
    pub ceilings: kubewasm_runtime::LimitCeilings,
    /// Longest one pull may take, all of it (the pull secret, the tag, the manifest, the
    /// module): a registry that stalls fails the pull then, and it is retried with backoff.
    pub pull_timeout: Duration,
    /// The pull secrets a Plugin may name (`--allowed-pull-secret`); a Plugin naming any
    /// other is refused before any Secret is read. Empty: none, the host's own
    /// credentials only.
    pub allowed_pull_secrets: Vec<String>,
    /// How long the watch of Plugin objects may fail before their plugins are unloaded
    /// (until it works again): what the host cannot see, it must not keep serving.
    pub watch_grace: std::time::Duration,
    /// Follow NamespacedPlugins under these ceilings; None: they are not watched.
    pub tenants: Option<TenantsConfig>,
}

/// The platform's ceilings on NamespacedPlugins (`run --tenant-*`), checked before any
/// pull.
#[derive(Debug, Clone, Default)]
pub struct TenantsConfig {
    /// Registries a namespace may pull from (`--tenant-registry [NS=]PATTERN`): the
    /// namespace (None: every one) and an `--allowed-registry` pattern.
    pub registries: Vec<(Option<String>, String)>,
    /// NamespacedPlugins one namespace may run: the oldest (then by name) run, the rest
    /// are refused (`TooManyPlugins`).
    pub max_plugins: usize,
    /// Ceilings on a tenant's `spec.limits` (`InvalidLimits`).
    pub ceilings: kubewasm_runtime::LimitCeilings,
    /// The limits a tenant's plugin gets when its spec sets none: the host's defaults,
    /// clamped to the ceilings.
    pub defaults: LimitOverrides,
}

impl TenantsConfig {
    /// Why a plugin of `namespace` may not pull from `registry`, if it may not.
    fn check_registry(&self, namespace: &str, registry: &str) -> Result<(), Failure> {
        let allowed: Vec<&str> = self
            .registries
            .iter()
            .filter(|(ns, _)| ns.as_deref().is_none_or(|ns| ns == namespace))
            .map(|(_, pattern)| pattern.as_str())
            .collect();
        if allowed
            .iter()
            .any(|p| kubewasm_oci::registry_matches(p, registry))
        {
            return Ok(());
        }
        let which = match allowed.is_empty() {
            true => "none is".to_string(),
            false => format!("only {} are", allowed.join(", ")),
        };
        Err(Failure::new(
            "RegistryNotAllowed",
            format!(
                "registry {registry} is not one namespace {namespace} may pull from (--tenant-registry): {which}"
            ),
        ))
    }

    /// A tenant's limits: `spec.limits` within the ceilings, the rest from the defaults.
    fn limits(&self, asked: LimitOverrides) -> Result<LimitOverrides, Failure> {
        let c = &self.ceilings;
        let over = |key: &str, asked: String, max: String, flag: &str| {
            Err(Failure::new(
                "InvalidLimits",
                format!(
                    "spec.limits: {key}: {asked} is over the platform's ceiling of {max} for NamespacedPlugins ({flag})"
                ),
            ))
        };
        if let (Some(a), Some(m)) = (asked.memory_mib, c.memory_mib)
            && a > m
        {
            return over(
                "memoryMiB",
                a.to_string(),
                m.to_string(),
                "--tenant-max-memory-mib",
            );
        }
        if let (Some(a), Some(m)) = (asked.call_deadline, c.call_deadline)
            && a > m
        {
            let f = |d: Duration| format!("{d:?}");
            return over("callDeadline", f(a), f(m), "--tenant-max-call-deadline");
        }
        // 0 derives the count from the pool's memory: a tenant names one.
        if let (Some(a), Some(m)) = (asked.max_instances, c.instances)
            && (a > m || a == 0)
        {
            return over(
                "maxInstances",
                a.to_string(),
                m.to_string(),
                "--tenant-max-instances",
            );
        }
        let d = &self.defaults;
        Ok(LimitOverrides {
            memory_mib: asked.memory_mib.or(d.memory_mib),
            call_deadline: asked.call_deadline.or(d.call_deadline),
            max_instances: asked.max_instances.or(d.max_instances),
            ..asked
        })
    }
}

/// Each NamespacedPlugin beyond the first `max` of its namespace (oldest first, then by
/// name): the ones refused `TooManyPlugins`, with how many its namespace has.
fn over_count(objects: &[Arc<CachedObject>], max: usize) -> BTreeMap<(String, String), usize> {
    let mut by_ns: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for o in objects {
        let Some(ns) = o.namespace() else { continue };
        let created = serde_json::from_str::<serde_json::Value>(&o.json())
            .ok()
            .and_then(|v| {
                let t = v.pointer("/metadata/creationTimestamp")?.as_str()?;
                Some(t.to_string())
            })
            .unwrap_or_default();
        let entry = by_ns.entry(ns.to_string()).or_default();
        entry.push((created, o.name().to_string()));
    }
    let mut out = BTreeMap::new();
    for (ns, mut list) in by_ns {
        list.sort();
        let count = list.len();
        for (_, name) in list.into_iter().skip(max) {
            out.insert((ns.clone(), name), count);
        }
    }
    out
}

/// The Plugin kind, as a watch target.
pub(crate) fn plugin_kind() -> ResourceRef {
    ResourceRef::Kind(TypeRef::new(
        plugin_object::API_VERSION,
        plugin_object::KIND,
    ))
}

/// The NamespacedPlugin kind, as a watch target.
pub(crate) fn namespaced_plugin_kind() -> ResourceRef {
    ResourceRef::Kind(TypeRef::new(
        plugin_object::API_VERSION,
        plugin_object::NAMESPACED_KIND,
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
    "PullTimeout",
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

    /// Whether the spec's approval itself is refused: a NamespacedPlugin's permissions
    /// reaching out of its namespace (`Approved` says so too, with this reason).
    pub(crate) fn is_approval(&self) -> bool {
        [tenant::CLUSTER_SCOPED_KIND, tenant::OUTSIDE_NAMESPACE].contains(&self.reason)
    }

    /// Whether to try again at the next reconcile even though nothing changed: the
    /// registry may be back, the secret created, the blob repaired.
    pub(crate) fn retry(&self) -> bool {
        self.is_pull()
    }
}

/// A Plugin object's module: unchanged since it was last looked at, to fetch, or failed
/// before any request.
pub(crate) enum Pulled {
    /// The same spec and digest as last time.
    Unchanged,
    /// To pull (or find in the store), in a job of its own: [`ObjectSource::fetch`].
    Fetch(Box<Fetch>),
    /// Why not.
    Failed(Failure),
}

/// One Plugin object, ready for the reloader: what to fetch for it, or why not.
pub(crate) struct Candidate {
    /// The Plugin object, or its shadow candidate.
    pub(crate) origin: Origin,
    /// `metadata.name`: the plugin's name.
    pub(crate) name: String,
    /// `metadata.generation`.
    pub(crate) generation: i64,
    /// The module.
    pub(crate) pulled: Pulled,
    /// Fingerprint of everything the load depends on (spec, and the digest when known
    /// without asking the registry); a fetch records its own.
    pub(crate) fingerprint: String,
    /// The object's conditions as last written, for their transition times.
    pub(crate) previous: Vec<Condition>,
    /// `spec.permissions` as an approval (None: they do not parse).
    pub(crate) approval: Option<Approval>,
}

/// Everything a pull of one Plugin's module needs, owned: it runs in a task of its own.
pub(crate) struct Fetch {
    /// The Plugin's name.
    name: String,
    /// `spec.module`, as written.
    module: String,
    reference: Reference,
    /// The manifest digest when known without asking the registry: a digest reference, or
    /// a tag resolved since the last rescan.
    digest: Option<String>,
    /// Fingerprint of the spec.
    spec_fp: String,
    /// `spec.pullSecretRef`, checked against the allowed ones.
    pull_secret: Option<String>,
    settings: Option<String>,
    overrides: LimitOverrides,
    /// The fingerprint the object was last looked at with: a tag found at the same digest
    /// again is unchanged, and nothing is pulled or reloaded.
    known: String,
    /// A rescan's look at a tag already resolved for this spec: status says nothing
    /// unless it moved (the job then reaches [`STAGE_PULLING`]).
    recheck: bool,
    /// A NamespacedPlugin's namespace: its pull secret is read there.
    tenant: Option<String>,
}

impl Fetch {
    /// What the job is known by: the spec (a tag resolved meanwhile does not restart it).
    pub(crate) fn key(&self) -> &str {
        &self.spec_fp
    }

    /// `spec.module`, as written.
    pub(crate) fn module(&self) -> &str {
        &self.module
    }

    /// Whether this is a rescan's look at a tag already resolved for this spec.
    pub(crate) fn recheck(&self) -> bool {
        self.recheck
    }
}

/// What a pull came to, with the fingerprint to record for it (the spec's and, once the
/// tag is resolved, the digest's).
pub(crate) struct Fetched {
    pub(crate) fingerprint: String,
    /// The module (None: a tag found at the digest already looked at), or why not.
    pub(crate) result: Result<Option<FetchedModule>, Failure>,
}

/// A module pulled (or found in the store), as a plugin file.
pub(crate) struct FetchedModule {
    /// The pinned reference pulled (`oci://…@sha256:…`).
    pub(crate) pinned: String,
    /// The manifest digest pulled.
    pub(crate) digest: String,
    pub(crate) file: PluginFile,
    /// The tag named in `spec.module` moved to this digest since it was last resolved.
    pub(crate) moved: Option<TagMove>,
    /// Found in the store: no registry call fetched it.
    pub(crate) from_store: bool,
}

/// A tag found at another digest than when it was last resolved for the same Plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TagMove {
    /// The reference as `spec.module` names it.
    pub(crate) reference: String,
    pub(crate) from: String,
    pub(crate) to: String,
}

/// Pulls the modules of Plugin objects.
pub(crate) struct ObjectSource {
    client: Client,
    oci: kubewasm_oci::Client,
    store: Store,
    /// The store's directory when none was given: kept while the host runs.
    _private_store: Option<tempfile::TempDir>,
    config: ObjectsConfig,
    /// Tag references resolved: (reference, spec fingerprint) → digest, and whether since
    /// the last rescan. A tag is resolved again when the object changes or on a rescan,
    /// not on every reload.
    resolved: Mutex<BTreeMap<String, (String, bool)>>,
    /// The digest each Plugin's tag was last found at, (plugin, reference) → digest, and
    /// whether since the last rescan: kept across a rescan, so a tag that moved is said.
    tags: Mutex<BTreeMap<(String, String), (String, bool)>>,
    /// Pulls running at once ([`PULL_SLOTS`]).
    slots: Arc<Semaphore>,
    /// `kubewasm_pulls_total`, `kubewasm_pull_seconds`.
    metrics: Arc<Metrics>,
    /// Whether a NamespacedPlugin's kinds are namespaced, as the cluster serves them.
    discovery: Arc<Discovery>,
}

impl ObjectSource {
    pub(crate) fn new(
        client: Client,
        config: ObjectsConfig,
        metrics: Arc<Metrics>,
        discovery: Arc<Discovery>,
    ) -> Result<Self, crate::Error> {
        let oci = kubewasm_oci::Client::new(&config.registry).map_err(|e| crate::Error::Io {
            context: format!("registry client: {e}"),
            source: std::io::Error::other("registry client"),
        })?;
        let (dir, private) = match &config.store_dir {
            Some(dir) => (dir.clone(), None),
            None => {
                let private = tempfile::Builder::new()
                    .prefix("kubewasm-modules-")
                    .tempdir()
                    .map_err(|source| crate::Error::Io {
                        context: "a directory for pulled modules".into(),
                        source,
                    })?;
                (private.path().to_path_buf(), Some(private))
            }
        };
        let store = Store::open(&dir).map_err(|e| crate::Error::Io {
            context: format!("module store {}: {e}", dir.display()),
            source: std::io::Error::other("module store"),
        })?;
        Ok(ObjectSource {
            client,
            oci,
            store,
            _private_store: private,
            config,
            resolved: Mutex::new(BTreeMap::new()),
            tags: Mutex::new(BTreeMap::new()),
            slots: Arc::new(Semaphore::new(PULL_SLOTS)),
            metrics,
            discovery,
        })
    }

    /// Mark resolved tags stale, so the next reload asks the registry again (a rescan).
    /// What was not resolved again since the rescan before is forgotten (a spec changed
    /// or deleted), so both maps stay as large as the Plugins' tags.
    pub(crate) fn forget_tags(&self) {
        stale(&mut lock(&self.resolved));
        stale(&mut lock(&self.tags));
    }

    /// Why the approval of a NamespacedPlugin in `namespace` (already confined offline,
    /// [`ObjectSource::approve`]) reaches a cluster-scoped kind, as discovery says: a
    /// custom kind the host cannot know offline. A kind not served (yet) says nothing:
    /// it is neither watched nor written while it is not served.
    pub(crate) async fn cluster_scoped(
        &self,
        namespace: &str,
        approval: &Approval,
    ) -> Option<Failure> {
        let mut served = HashMap::new();
        for r in tenant::kinds_asked(approval) {
            if let Ok(kind) = self.discovery.resolve(&r).await {
                served.insert(r, (*kind).clone());
            }
        }
        let resolve = |r: &ResourceRef| served.get(r).cloned();
        tenant::confine_approval(namespace, &mut approval.clone(), &resolve)
            .err()
            .map(|c| Failure::new(c.reason, c.message))
    }

    /// `--pull-timeout`.
    pub(crate) fn pull_timeout(&self) -> Duration {
        self.config.pull_timeout
    }

    /// Every Plugin object, checked and made ready to fetch, with no request, and the
    /// shadow candidate of each that names one: unchanged when `unchanged(origin,
    /// fingerprint)` says it was looked at as it is; `known(origin)` is the fingerprint it
    /// was last looked at with.
    pub(crate) fn candidates(
        &self,
        objects: &[Arc<CachedObject>],
        unchanged: impl Fn(&Origin, &str) -> bool,
        known: impl Fn(&Origin) -> String,
    ) -> Vec<Candidate> {
        let tenants = self.config.tenants.as_ref();
        let over = tenants.map_or_else(BTreeMap::new, |t| over_count(objects, t.max_plugins));
        let mut out = Vec::with_capacity(objects.len());
        for o in objects {
            let raw = match serde_json::from_str::<serde_json::Value>(&o.json()) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(object = %o.describe(), error = %e, "unreadable Plugin object");
                    continue;
                }
            };
            let tenant = o.namespace().map(str::to_string);
            // NamespacedPlugins are followed only with --tenant-registry.
            if tenant.is_some() && tenants.is_none() {
                continue;
            }
            let name = o.name().to_string();
            let (origin, plugin) = match &tenant {
                Some(ns) => (
                    Origin::Namespaced {
                        namespace: ns.clone(),
                        name: name.clone(),
                    },
                    format!("{ns}/{name}"),
                ),
                None => (Origin::Object(name.clone()), name.clone()),
            };
            // The spec alone decides what loads: a status (anyone with status access may
            // write one) never unloads a plugin.
            let mut spec_only = raw.clone();
            if let Some(o) = spec_only.as_object_mut() {
                o.remove("status");
            }
            let parsed: Result<PluginObject, _> = serde_json::from_value(spec_only);
            let previous = raw
                .pointer("/status/conditions")
                .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
                .unwrap_or_default();
            let spec_fp = hex_sha256(serving_spec(&raw));
            let mut c = Candidate {
                origin,
                name: plugin,
                generation: o.generation().unwrap_or_default(),
                pulled: Pulled::Unchanged,
                fingerprint: spec_fp.clone(),
                previous,
                // A spec or permissions that do not parse approve nothing: what runs for
                // this object is unloaded, never left with what it had.
                approval: Some(Approval::default()),
            };
            let shadow = parsed.as_ref().ok().and_then(|obj| {
                let spec = obj.spec.candidate.as_ref()?;
                Some(match tenant {
                    None => self.shadow(obj, spec, &c, &unchanged, &known),
                    Some(_) => unsupported_shadow(&c),
                })
            });
            let over = tenant.as_ref().and_then(|ns| over.get(&(ns.clone(), name)));
            c.pulled = match parsed {
                Err(e) => Pulled::Failed(Failure::new("InvalidSpec", format!("spec: {e}"))),
                Ok(obj) => self
                    .approve(&obj, tenant.as_deref(), over.copied(), &mut c)
                    .and_then(|()| self.prepare(&obj, &spec_fp, &mut c, &unchanged, &known))
                    .unwrap_or_else(Pulled::Failed),
            };
            out.push(c);
            out.extend(shadow);
        }
        out
    }

    /// Set `c`'s approval from `obj`'s: a Plugin's as it is; a NamespacedPlugin's in
    /// `tenant` confined to it, after its namespace's count (`over`: how many it has,
    /// when this one is beyond `--tenant-max-plugins`).
    fn approve(
        &self,
        obj: &PluginObject,
        tenant: Option<&str>,
        over: Option<usize>,
        c: &mut Candidate,
    ) -> Result<(), Failure> {
        let Some(ns) = tenant else {
            c.approval = Some(obj.spec.approval().unwrap_or_default());
            return Ok(());
        };
        if let Some(count) = over {
            let max = self.config.tenants.as_ref().map_or(0, |t| t.max_plugins);
            return Err(Failure::new(
                "TooManyPlugins",
                format!(
                    "namespace {ns} has {count} NamespacedPlugins and may run {max} (--tenant-max-plugins): the oldest run, this one does not"
                ),
            ));
        }
        let mut approval = obj
            .spec
            .approval()
            .map_err(|e| Failure::new("InvalidPermissions", format!("spec.permissions: {e}")))?;
        tenant::confine_approval(ns, &mut approval, &tenant::offline)
            .map_err(|why| Failure::new(why.reason, why.message))?;
        c.approval = Some(approval);
        Ok(())
    }

    /// The shadow candidate of `obj` (`spec.candidate`), prepared as a Plugin of its own:
    /// its module and settings, everything else (permissions, limits, pull secret) the
    /// Plugin's, in dry run whatever the Plugin's mode.
    fn shadow(
        &self,
        obj: &PluginObject,
        spec: &CandidateSpec,
        serving: &Candidate,
        unchanged: &impl Fn(&Origin, &str) -> bool,
        known: &impl Fn(&Origin) -> String,
    ) -> Candidate {
        let mut shadow = obj.clone();
        shadow.spec.module = Some(spec.module.clone());
        shadow.spec.settings = spec.settings.clone();
        shadow.spec.candidate = None;
        shadow.spec.mode = Mode::DryRun;
        let spec_fp = hex_sha256(serde_json::to_string(&shadow.spec).unwrap_or_default());
        let mut c = Candidate {
            origin: Origin::Shadow(serving.name.clone()),
            name: serving.name.clone(),
            generation: serving.generation,
            pulled: Pulled::Unchanged,
            fingerprint: spec_fp.clone(),
            previous: serving.previous.clone(),
            approval: Some(shadow.spec.approval().unwrap_or_default()),
        };
        c.pulled = match self.prepare(&shadow, &spec_fp, &mut c, unchanged, known) {
            Ok(p) => p,
            Err(f) => Pulled::Failed(f),
        };
        c
    }

    /// Check a Plugin's spec and say what to fetch for it: nothing here reaches the
    /// registry or reads a Secret.
    fn prepare(
        &self,
        obj: &PluginObject,
        spec_fp: &str,
        c: &mut Candidate,
        unchanged: &impl Fn(&Origin, &str) -> bool,
        known: &impl Fn(&Origin) -> String,
    ) -> Result<Pulled, Failure> {
        let spec = &obj.spec;
        // The candidate carries the approval; here a malformed one stops the pull.
        spec.permissions
            .to_approval()
            .map_err(|e| Failure::new("InvalidPermissions", format!("spec.permissions: {e}")))?;
        let tenant = c.origin.tenant().map(str::to_string);
        let overrides = self.limits(spec.limits.as_ref(), tenant.as_deref())?;
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
        if let (Some(ns), Some(t)) = (&tenant, &self.config.tenants) {
            t.check_registry(ns, reference.registry())?;
        }
        let pull_secret = spec.pull_secret_ref.as_ref().map(|s| s.name.clone());
        // A tenant's pull secret is read in its own namespace, by name (its Role grants
        // the host `get` on it): no --allowed-pull-secret.
        if let Some(secret) = &pull_secret
            && tenant.is_none()
        {
            self.check_pull_secret(secret)?;
        }
        let (digest, recheck) = match reference.digest() {
            Some(d) => (Some(d.to_string()), false),
            // A tag that failed to resolve is not asked again before its retry is due.
            None if unchanged(&c.origin, spec_fp) => return Ok(Pulled::Unchanged),
            None => match lock(&self.resolved).get(&format!("{module} {spec_fp}")) {
                Some((d, true)) => (Some(d.clone()), false),
                Some((_, false)) => (None, true),
                None => (None, false),
            },
        };
        if let Some(d) = &digest {
            c.fingerprint = fingerprint(spec_fp, d);
            if unchanged(&c.origin, &c.fingerprint) {
                return Ok(Pulled::Unchanged);
            }
        }
        Ok(Pulled::Fetch(Box::new(Fetch {
            name: c.name.clone(),
            module: module.to_string(),
            reference,
            digest,
            spec_fp: spec_fp.to_string(),
            pull_secret,
            settings: spec.settings.as_ref().map(|s| s.to_string()),
            overrides,
            known: known(&c.origin),
            recheck,
            tenant,
        })))
    }

    /// `spec.limits`, checked: within the operator's ceilings, or a tenant's within the
    /// platform's tenant ceilings (the tenant defaults filling what it does not set).
    fn limits(
        &self,
        limits: Option<&serde_json::Value>,
        tenant: Option<&str>,
    ) -> Result<LimitOverrides, Failure> {
        let invalid = |e: String| Failure::new("InvalidLimits", format!("spec.limits: {e}"));
        let asked: LimitOverrides = match limits {
            None => LimitOverrides::default(),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| invalid(e.to_string()))?,
        };
        asked.validate().map_err(invalid)?;
        match (tenant, &self.config.tenants) {
            // The operator's ceilings bound tenants too.
            (Some(_), Some(t)) => {
                let limits = t.limits(asked)?;
                self.config.ceilings.check(&limits).map_err(invalid)?;
                Ok(limits)
            }
            _ => {
                self.config.ceilings.check(&asked).map_err(invalid)?;
                Ok(asked)
            }
        }
    }

    /// Whether a Plugin may name pull secret `name`: only those the operator allowed, so
    /// whoever may create a Plugin cannot have the host read any other Secret.
    fn check_pull_secret(&self, name: &str) -> Result<(), Failure> {
        let allowed = &self.config.allowed_pull_secrets;
        if allowed.iter().any(|a| a == name) {
            return Ok(());
        }
        let which = if allowed.is_empty() {
            "none is (the host's own registry credentials only)".to_string()
        } else {
            format!("only {} are", allowed.join(", "))
        };
        Err(Failure::new(
            "PullSecretNotAllowed",
            format!(
                "spec.pullSecretRef {name:?} is not a pull secret the operator allowed (--allowed-pull-secret): {which}"
            ),
        ))
    }

    /// Pull `f`'s module (from the store when it is there), within `--pull-timeout` once
    /// a pull slot is free. The fingerprint returned is the one to record, failed or not:
    /// a tag resolved before the deadline counts, so the retry waits its backoff.
    pub(crate) async fn fetch(self: Arc<Self>, f: Fetch, progress: Progress) -> Fetched {
        // Never closed: a closed semaphore would only lift the bound.
        let _slot = self.slots.clone().acquire_owned().await.ok();
        self.metrics.declare_pulls(&f.name);
        let mut digest = f.digest.clone();
        let deadline = self.config.pull_timeout;
        let started = tokio::time::Instant::now();
        let result =
            tokio::time::timeout(deadline, self.fetch_within(&f, &mut digest, &progress)).await;
        let fingerprint = match &digest {
            Some(d) => fingerprint(&f.spec_fp, d),
            None => f.spec_fp.clone(),
        };
        let result = result.unwrap_or_else(|_| {
            Err(Failure::new(
                "PullTimeout",
                format!(
                    "pulling {} took longer than {deadline:?} (--pull-timeout): the registry did not answer in time",
                    f.module
                ),
            ))
        });
        let pulled = match &result {
            Ok(None) => None,
            Ok(Some(m)) if m.from_store => Some("stored"),
            Ok(Some(_)) => Some("pulled"),
            Err(_) => Some("failed"),
        };
        if let Some(outcome) = pulled {
            self.metrics.pulled(&f.name, outcome, started.elapsed());
        }
        Fetched {
            fingerprint,
            result,
        }
    }

    async fn fetch_within(
        &self,
        f: &Fetch,
        digest: &mut Option<String>,
        progress: &Progress,
    ) -> Result<Option<FetchedModule>, Failure> {
        let creds = self
            .credentials(f.pull_secret.as_deref(), f.tenant.as_deref(), &f.reference)
            .await?;
        let mut moved = None;
        let d = match digest.clone() {
            Some(d) => d,
            None => {
                let d = self
                    .oci
                    .resolve(&f.reference, &creds)
                    .await
                    .map_err(|e| Failure::new(e.reason(), e.to_string()))?;
                lock(&self.resolved)
                    .insert(format!("{} {}", f.module, f.spec_fp), (d.clone(), true));
                let before = lock(&self.tags)
                    .insert((f.name.clone(), f.module.clone()), (d.clone(), true))
                    .map(|(before, _)| before);
                tracing::debug!(plugin = %f.name, reference = %f.module, digest = %d, "tag resolved");
                if let Some(before) = before
                    && before != d
                {
                    tracing::info!(plugin = %f.name, reference = %f.module, from = %before, to = %d,
                        "tag moved");
                    moved = Some(TagMove {
                        reference: f.module.clone(),
                        from: before,
                        to: d.clone(),
                    });
                }
                *digest = Some(d.clone());
                d
            }
        };
        if fingerprint(&f.spec_fp, &d) == f.known {
            return Ok(None);
        }
        progress.stage(STAGE_PULLING);
        let pinned = f.reference.pinned(&d);
        let pulled = self
            .oci
            .pull_wasm(&pinned, &creds, &self.store, self.config.max_module_bytes)
            .await
            .map_err(|e| Failure::new(e.reason(), e.to_string()))?;
        if !pulled.from_store {
            tracing::info!(plugin = %f.name, module = %pinned, bytes = pulled.size, "module pulled");
        }
        // The bytes the pull verified, never read again from the store.
        let bytes = pulled.bytes;
        let plural = match f.tenant {
            Some(_) => plugin_object::NAMESPACED_PLURAL.to_string(),
            None => plugin_object::PLURAL.to_string(),
        };
        let file = PluginFile {
            // Named after the object: a plugin must call itself what its source is named
            // (its bytes come from the store; the path only names it in messages).
            // (`NS/P` for a NamespacedPlugin: it must call itself P.)
            path: PathBuf::from(plural + "." + plugin_object::GROUP)
                .join(format!("{}.wasm", f.name)),
            digest: hex::encode(Sha256::digest(&bytes)),
            bytes,
            settings: f.settings.clone(),
            overrides: f.overrides.clone(),
            // Its calls take its namespace's part of the call budget.
            tenant: f.tenant.clone(),
        };
        Ok(Some(FetchedModule {
            pinned: pinned.to_string(),
            digest: d,
            file,
            moved,
            from_store: pulled.from_store,
        }))
    }

    /// The credentials for the module's registry: from the Plugin's pull secret when it
    /// names one (allowed: [`ObjectSource::check_pull_secret`]), else from the host's
    /// Docker config.
    async fn credentials(
        &self,
        secret: Option<&str>,
        tenant: Option<&str>,
        reference: &Reference,
    ) -> Result<Credentials, Failure> {
        let Some(secret) = secret else {
            // A tenant never gets the host's own credentials.
            if tenant.is_some() {
                return Ok(Credentials::Anonymous);
            }
            return Ok(self.config.auths.for_registry(reference.registry()));
        };
        // Checked when the pull was prepared; again here, right before the read.
        if tenant.is_none() {
            self.check_pull_secret(secret)?;
        }
        let namespace = tenant.unwrap_or(&self.config.namespace);
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), namespace);
        let s = api.get(secret).await.map_err(|e| {
            Failure::new(
                "PullSecretUnavailable",
                format!("pull secret {}/{}: {}", namespace, secret, kube_error(&e)),
            )
        })?;
        let bad = |why: &str| {
            Failure::new(
                "InvalidPullSecret",
                format!("pull secret {namespace}/{secret}: {why}"),
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

/// Forget the entries not resolved since the last call, and mark the rest stale.
fn stale<K: Ord>(map: &mut BTreeMap<K, (String, bool)>) {
    map.retain(|_, (_, fresh)| *fresh);
    for (_, fresh) in map.values_mut() {
        *fresh = false;
    }
}

/// The fingerprint of a Plugin's load: its spec and the digest pulled.
/// Reason of a NamespacedPlugin's `spec.candidate`, which is not run.
const CANDIDATE_NOT_SUPPORTED: &str = "CandidateNotSupported";

/// The shadow candidate of a NamespacedPlugin (`serving`): refused, never pulled. A shadow
/// runs as a cluster Plugin of its own (its approval unconfined, no tenant identity or
/// budget share), so a tenant's is said on status (`Previewing`) rather than run.
fn unsupported_shadow(serving: &Candidate) -> Candidate {
    Candidate {
        origin: Origin::Shadow(serving.name.clone()),
        name: serving.name.clone(),
        generation: serving.generation,
        pulled: Pulled::Failed(Failure::new(
            CANDIDATE_NOT_SUPPORTED,
            "only cluster Plugins shadow a candidate, not NamespacedPlugins",
        )),
        fingerprint: CANDIDATE_NOT_SUPPORTED.to_string(),
        previous: serving.previous.clone(),
        approval: Some(Approval::default()),
    }
}

/// The spec as the serving version depends on it: without `candidate`, so adding,
/// changing or removing a candidate leaves the serving version as it is.
fn serving_spec(raw: &serde_json::Value) -> String {
    let mut spec = raw.get("spec").cloned().unwrap_or_default();
    if let Some(o) = spec.as_object_mut() {
        o.remove("candidate");
    }
    spec.to_string()
}

fn fingerprint(spec_fp: &str, digest: &str) -> String {
    hex_sha256(format!("{spec_fp} {digest}"))
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
    /// Whether the newest module fits the permissions (None: not known yet); if not, why.
    pub(crate) approved: Option<Result<(), Failure>>,
    /// What the newest module asks for.
    pub(crate) requested: Option<Permissions>,
    /// Conditions as last written.
    pub(crate) previous: Vec<Condition>,
    /// A job running for the newest spec (its generation is then the one reported).
    pub(crate) busy: Option<Busy>,
    /// The tag of the newest spec moved when it was last pulled.
    pub(crate) moved: Option<TagMove>,
    /// Its shadow candidate, while `spec.candidate` names one.
    pub(crate) candidate: Option<CandidateState>,
    /// What it watches or reads that the API server does not serve (yet).
    pub(crate) waiting_for: Vec<String>,
}

/// Where a Plugin's shadow candidate stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CandidateState {
    /// A job running for it.
    pub(crate) busy: Option<Busy>,
    /// Why its newest spec does not run.
    pub(crate) failure: Option<Failure>,
    /// The pinned reference running as the candidate.
    pub(crate) serving: Option<String>,
}

/// A job running for a Plugin's newest spec, as status says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Busy {
    /// Its module is being pulled, within the deadline (`--pull-timeout`).
    Pulling { module: String, deadline: Duration },
    /// Pulled; being compiled, described and checked.
    Loading { module: String },
}

impl Busy {
    fn describe(&self) -> String {
        match self {
            Busy::Pulling { module, deadline } => {
                format!("pulling {module} (for at most {deadline:?}, --pull-timeout)")
            }
            Busy::Loading { module } => format!("loading {module}"),
        }
    }
}

impl ObjectState {
    /// The status this state reads as; transition times kept from `previous` when a
    /// condition's status did not change.
    #[cfg(test)]
    pub(crate) fn status(&self, now: &str) -> PluginObjectStatus {
        self.status_with(now, None)
    }

    /// [`ObjectState::status`] with what its preview found (`status.preview` and the
    /// `Previewing` condition).
    pub(crate) fn status_with(
        &self,
        now: &str,
        preview: Option<PreviewStatus>,
    ) -> PluginObjectStatus {
        let (ready, reason, message) = self.ready();
        let mut conditions = vec![self.condition(now, "Ready", ready, reason, message)];
        let (status, reason, message) = self.approval();
        conditions.push(self.condition(now, "Approved", status, reason, message));
        if let Some((status, reason, message)) = self.pull() {
            conditions.push(self.condition(now, "Pulled", status, reason, message));
        }
        let (status, reason, message) = previewing(preview.as_ref(), self.candidate.as_ref());
        conditions.push(self.condition(now, "Previewing", status, reason, message));
        PluginObjectStatus {
            observed_generation: Some(self.generation),
            module: self.serving.as_ref().map(|s| s.0.clone()),
            digest: self.serving.as_ref().map(|s| s.1.clone()),
            version: self.serving.as_ref().map(|s| s.2.clone()),
            requested: self.requested.clone(),
            preview,
            conditions,
        }
    }

    /// One condition, its transition time kept from `previous` when its status is the
    /// same.
    fn condition(
        &self,
        now: &str,
        type_: &str,
        status: &str,
        reason: &str,
        message: String,
    ) -> Condition {
        let since = self
            .previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.to_string());
        Condition {
            type_: type_.into(),
            status: status.into(),
            observed_generation: Some(self.generation),
            last_transition_time: since,
            reason: reason.into(),
            message: kubewasm_core_excerpt(&message),
        }
    }

    /// `Ready`: what serves, and what the newest spec came to (status, reason, message).
    fn ready(&self) -> (&'static str, &'static str, String) {
        let (ready, reason, mut message) = match (&self.busy, &self.serving, &self.failure) {
            (Some(busy), serving, _) => {
                let reason = match busy {
                    Busy::Pulling { .. } => "Pulling",
                    Busy::Loading { .. } => "Loading",
                };
                match serving {
                    Some((pinned, _, version)) => (
                        "True",
                        reason,
                        format!(
                            "version {version} from {pinned} keeps serving; {}",
                            busy.describe()
                        ),
                    ),
                    None => ("False", reason, busy.describe()),
                }
            }
            // Serving, but its reads of these fail: not ready, and `kubectl get plugins`
            // shows it.
            (None, Some((pinned, _, version)), None) if !self.waiting_for.is_empty() => (
                "False",
                "WaitingForResource",
                format!(
                    "version {version} from {pinned} serves what is served; waiting for {} (not served yet)",
                    self.waiting_for.join(", ")
                ),
            ),
            (None, Some((pinned, _, version)), None) => (
                "True",
                "Serving",
                format!("version {version} from {pinned}"),
            ),
            (None, Some((pinned, _, version)), Some(f)) => (
                "True",
                f.reason,
                format!(
                    "version {version} from {pinned} keeps serving; the newest spec does not load: {}",
                    f.message
                ),
            ),
            (None, None, Some(f)) => ("False", f.reason, f.message.clone()),
            (None, None, None) => ("False", "Pending", "not loaded yet".to_string()),
        };
        if let Some(m) = &self.moved
            && self.busy.is_none()
        {
            message.push_str(&format!(
                "; tag {} moved from {} to {}",
                m.reference, m.from, m.to
            ));
        }
        (ready, reason, message)
    }

    /// `Approved`: whether the newest module fits `spec.permissions` (and, for a
    /// NamespacedPlugin, its namespace); if not, the reason `Ready` says too.
    fn approval(&self) -> (&'static str, &'static str, String) {
        match &self.approved {
            Some(Ok(())) => (
                "True",
                "WithinPermissions",
                "the module asks for nothing beyond spec.permissions".into(),
            ),
            Some(Err(f)) => ("False", f.reason, f.message.clone()),
            None => (
                "Unknown",
                "NotEvaluated",
                "the module was not loaded".into(),
            ),
        }
    }

    /// `Pulled`, when there is something to say: the newest module's pull.
    fn pull(&self) -> Option<(&'static str, &'static str, String)> {
        match (&self.busy, self.pulled, &self.failure) {
            (Some(busy @ Busy::Pulling { .. }), _, _) => {
                Some(("Unknown", "Pulling", busy.describe()))
            }
            (Some(Busy::Loading { .. }), _, _) | (None, Some(true), _) => {
                Some(("True", "Pulled", String::new()))
            }
            (None, Some(false), Some(f)) => Some(("False", f.reason, f.message.clone())),
            _ => None,
        }
    }
}

/// `Previewing`: whether the plugin's writes are only previewed, or a candidate runs
/// beside it, and what they found so far.
fn previewing(
    p: Option<&PreviewStatus>,
    candidate: Option<&CandidateState>,
) -> (&'static str, &'static str, String) {
    // A candidate that does not run (yet) is said first: it is what the operator waits on.
    if let Some(c) = candidate
        && c.serving.is_none()
    {
        return match (&c.busy, &c.failure) {
            (Some(busy), _) => ("False", "CandidateLoading", busy.describe()),
            (None, Some(f)) => (
                "False",
                f.reason,
                format!("the candidate does not run: {}", f.message),
            ),
            (None, None) => (
                "False",
                "CandidatePending",
                "the candidate is not loaded yet".into(),
            ),
        };
    }
    let Some(p) = p else {
        return (
            "False",
            "Enforcing",
            "writes are applied; no candidate runs".into(),
        );
    };
    let mut parts = Vec::new();
    if p.mode == Mode::DryRun {
        parts.push(format!(
            "dry run: {} events, {} objects would change, {} writes refused",
            p.events, p.changes, p.refusals
        ));
    }
    if let Some(c) = &p.candidate {
        parts.push(format!(
            "candidate {}: {} events, agrees on {} objects, diverges on {}",
            c.version.as_deref().unwrap_or("?"),
            c.events,
            c.agreements,
            c.divergences
        ));
    }
    let reason = match (p.mode == Mode::DryRun, p.candidate.is_some()) {
        (true, true) => "DryRunAndShadow",
        (true, false) => "DryRun",
        _ => "Shadow",
    };
    ("True", reason, parts.join("; "))
}

/// Messages in conditions stay short: a plugin's refusal lists can be long.
fn kubewasm_core_excerpt(message: &str) -> String {
    kubewasm_core::excerpt::excerpt(message, 1024).into_owned()
}

/// Writes Plugin objects' status (the leader, or the holder of shard 0, only), skipping
/// what it already wrote. Each write is fenced by that term: a replica whose term ends
/// while a write is in flight abandons it, so two replicas never both write status.
pub(crate) struct StatusWriter {
    client: Client,
    ownership: Ownership,
    /// What the plugins in dry run and their candidates found.
    previews: Arc<Previews>,
    written: Mutex<BTreeMap<String, PluginObjectStatus>>,
}

impl StatusWriter {
    pub(crate) fn new(client: Client, ownership: Ownership, previews: Arc<Previews>) -> Self {
        StatusWriter {
            client,
            ownership,
            previews,
            written: Mutex::new(BTreeMap::new()),
        }
    }

    /// Forget what was written (a new term: write everything again).
    pub(crate) fn forget(&self) {
        lock(&self.written).clear();
    }

    /// The API of the object of plugin `name`, its kind and its name: a Plugin, or for
    /// `NS/P` the NamespacedPlugin `P` in `NS`.
    fn api_of<'a>(&self, name: &'a str) -> (Api<kube::api::DynamicObject>, &'static str, &'a str) {
        let resource = |kind: &str, plural: &str| kube::discovery::ApiResource {
            group: plugin_object::GROUP.into(),
            version: plugin_object::VERSION.into(),
            api_version: plugin_object::API_VERSION.into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        match name.split_once('/') {
            Some((ns, object)) => {
                let kind = plugin_object::NAMESPACED_KIND;
                let r = resource(kind, plugin_object::NAMESPACED_PLURAL);
                (
                    Api::namespaced_with(self.client.clone(), ns, &r),
                    kind,
                    object,
                )
            }
            None => {
                let r = resource(plugin_object::KIND, plugin_object::PLURAL);
                (
                    Api::all_with(self.client.clone(), &r),
                    plugin_object::KIND,
                    name,
                )
            }
        }
    }

    /// Write the status of each object whose status changed.
    pub(crate) async fn write(&self, states: &BTreeMap<String, ObjectState>) {
        let now = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        for (name, state) in states {
            let status = state.status_with(&now, self.previews.summary(name));
            let unchanged = lock(&self.written)
                .get(name)
                .is_some_and(|w| same_ignoring_times(w, &status));
            if unchanged {
                continue;
            }
            let (api, kind, object) = self.api_of(name);
            let body = serde_json::json!({
                "apiVersion": plugin_object::API_VERSION,
                "kind": kind,
                "metadata": {"name": object},
                "status": status,
            });
            let params = PatchParams::apply(STATUS_MANAGER).force();
            let written = self
                .ownership
                .guard_first(api.patch_status(object, &params, &Patch::Apply(&body)))
                .await;
            let Ok(written) = written else {
                // Not (or no longer) this replica's to write: the next holder writes all.
                tracing::debug!(plugin = %name, "Plugin status not written: this replica's term ended");
                return;
            };
            match written {
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
            busy: None,
            moved: None,
            candidate: None,
            waiting_for: Vec::new(),
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
    fn a_running_pull_reads_pulling_at_its_generation_and_a_moved_tag_is_said() {
        let mut pulling = state();
        pulling.generation = 3;
        pulling.busy = Some(Busy::Pulling {
            module: "oci://r/p@sha256:bb".into(),
            deadline: Duration::from_secs(180),
        });
        let s = pulling.status("t1");
        let ready = &s.conditions[0];
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "Pulling")
        );
        assert!(
            ready
                .message
                .contains("keeps serving; pulling oci://r/p@sha256:bb")
                && ready.message.contains("--pull-timeout"),
            "{}",
            ready.message
        );
        assert_eq!(ready.observed_generation, Some(3));
        let pulled = s.conditions.iter().find(|c| c.type_ == "Pulled").unwrap();
        assert_eq!(
            (pulled.status.as_str(), pulled.reason.as_str()),
            ("Unknown", "Pulling")
        );
        // What serves is still said.
        assert_eq!(s.digest.as_deref(), Some("sha256:aa"));

        let mut first = pulling.clone();
        first.serving = None;
        first.busy = Some(Busy::Loading {
            module: "oci://r/p@sha256:bb".into(),
        });
        let s = first.status("t1");
        assert_eq!(
            (
                s.conditions[0].status.as_str(),
                s.conditions[0].reason.as_str()
            ),
            ("False", "Loading")
        );

        let mut moved = state();
        moved.moved = Some(TagMove {
            reference: "oci://r/p:live".into(),
            from: "sha256:00".into(),
            to: "sha256:aa".into(),
        });
        let s = moved.status("t1");
        assert_eq!(s.conditions[0].reason, "Serving");
        assert!(
            s.conditions[0]
                .message
                .ends_with("; tag oci://r/p:live moved from sha256:00 to sha256:aa"),
            "{}",
            s.conditions[0].message
        );
    }

    #[test]
    fn stale_tags_are_forgotten_after_a_rescan_without_a_look() {
        let mut m = BTreeMap::from([("a", ("d1".to_string(), true))]);
        stale(&mut m);
        assert_eq!(m.get("a"), Some(&("d1".to_string(), false)));
        stale(&mut m);
        assert!(m.is_empty());
    }

    fn tenants() -> TenantsConfig {
        TenantsConfig {
            registries: vec![
                (Some("team-a".into()), "reg.example:5000".into()),
                (None, "*.example.com".into()),
            ],
            max_plugins: 2,
            ceilings: kubewasm_runtime::LimitCeilings {
                memory_mib: Some(64),
                call_deadline: Some(Duration::from_secs(2)),
                instances: Some(2),
            },
            defaults: LimitOverrides {
                memory_mib: Some(32),
                call_deadline: Some(Duration::from_secs(1)),
                max_instances: Some(2),
                ..LimitOverrides::default()
            },
        }
    }

    #[test]
    fn a_tenant_pulls_only_from_its_registries() {
        let t = tenants();
        assert!(t.check_registry("team-a", "reg.example:5000").is_ok());
        assert!(t.check_registry("team-b", "r.example.com").is_ok());
        let f = t.check_registry("team-b", "reg.example:5000").unwrap_err();
        assert_eq!(f.reason, "RegistryNotAllowed");
        assert!(
            f.message.ends_with("only *.example.com are"),
            "{}",
            f.message
        );
        assert!(t.check_registry("team-a", "reg.example:5001").is_err());
    }

    #[test]
    fn a_tenants_limits_stay_under_the_ceilings_and_default_within_them() {
        let t = tenants();
        let got = t.limits(LimitOverrides::default()).unwrap();
        assert_eq!(
            (got.memory_mib, got.call_deadline, got.max_instances),
            (Some(32), Some(Duration::from_secs(1)), Some(2))
        );
        let asked = LimitOverrides {
            memory_mib: Some(64),
            max_intents: Some(3),
            ..LimitOverrides::default()
        };
        let got = t.limits(asked).unwrap();
        assert_eq!((got.memory_mib, got.max_intents), (Some(64), Some(3)));
        for (asked, flag) in [
            (
                LimitOverrides {
                    memory_mib: Some(65),
                    ..LimitOverrides::default()
                },
                "--tenant-max-memory-mib",
            ),
            (
                LimitOverrides {
                    call_deadline: Some(Duration::from_secs(3)),
                    ..LimitOverrides::default()
                },
                "--tenant-max-call-deadline",
            ),
            (
                LimitOverrides {
                    max_instances: Some(0),
                    ..LimitOverrides::default()
                },
                "--tenant-max-instances",
            ),
        ] {
            let f = t.limits(asked).unwrap_err();
            assert_eq!(f.reason, "InvalidLimits");
            assert!(f.message.contains(flag), "{}", f.message);
        }
    }

    #[test]
    fn the_oldest_plugins_of_a_namespace_run_then_by_name() {
        let obj = |ns: Option<&str>, name: &str, created: &str| {
            let mut meta = serde_json::json!({"name": name, "creationTimestamp": created,
                "resourceVersion": "1"});
            if let Some(ns) = ns {
                meta["namespace"] = serde_json::json!(ns);
            }
            CachedObject::new(
                serde_json::from_value(serde_json::json!({"apiVersion": "kubewasm.dev/v1alpha1",
                    "kind": "NamespacedPlugin", "metadata": meta}))
                .unwrap(),
            )
        };
        let objects = [
            obj(Some("a"), "z", "2026-01-01T00:00:00Z"),
            obj(Some("a"), "c", "2026-01-02T00:00:00Z"),
            obj(Some("a"), "b", "2026-01-02T00:00:00Z"),
            obj(Some("b"), "x", "2026-01-03T00:00:00Z"),
            obj(None, "cluster", "2026-01-01T00:00:00Z"),
        ];
        let over = over_count(&objects, 2);
        assert_eq!(
            over,
            BTreeMap::from([(("a".to_string(), "c".to_string()), 3)])
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let m = kubewasm_core_excerpt(&"é".repeat(4000));
        assert!(m.len() < 1100 && m.ends_with("bytes truncated)"), "{m}");
    }
}
