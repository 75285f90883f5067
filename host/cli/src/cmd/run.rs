//! `kubewasm run`: the host against a cluster; also the host half of `kubewasm dev`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use kubewasm::apply::WriteIdentity;
use kubewasm::cases::record::RecordConfig;
use kubewasm::core::rbac;
use kubewasm::event::{QuarantinePolicy, QueueConfig};
use kubewasm::host::{
    Election, EventsConfig, Host, HostConfig, ObjectsConfig, PluginsConfig, ReplicasConfig,
    ServeConfig, TenantsConfig,
};
use kubewasm::replicas::leader::{self, LeaderConfig};
use kubewasm::replicas::shards::ShardConfig;
use kubewasm::runtime::{LimitCeilings, LimitOverrides, Limits, LoadOptions};
use kubewasm::watch::{InitialSync, WatchConfig};

/// Flags of the host, shared by `run` and `dev`.
#[derive(Args, Debug, Clone)]
pub struct HostArgs {
    /// Directory of plugins: `NAME.wasm` plus optional `NAME.yaml`/`NAME.json` settings.
    /// Optional: Plugin objects (`kubectl get plugins`) are the other source.
    #[arg(long, value_name = "DIR")]
    pub plugins: Option<PathBuf>,
    /// Do not follow Plugin objects (plugins.kubewasm.dev): the plugin directory only.
    /// By default the host loads every Plugin object, pulling its module from its OCI
    /// registry, once the CRD is served (installed later included).
    #[arg(long)]
    pub no_plugin_objects: bool,
    /// Where modules pulled for Plugin objects are kept, by digest (default:
    /// CACHE_DIR/modules with --cache-dir, else a directory private to this process).
    /// A pod restarting with the registry down still loads the digests kept here.
    #[arg(long, value_name = "DIR")]
    module_store: Option<PathBuf>,
    /// Largest module pulled for a Plugin object, in MiB, checked against the registry's
    /// manifest before any byte of the module is downloaded.
    #[arg(long, default_value_t = 128, value_parser = mebibytes)]
    max_module_mib: usize,
    /// Longest one pull of a Plugin object's module may take, all of it (pull secret,
    /// tag, manifest, module). Pulls run beside reloads, the previous version serving
    /// meanwhile; a pull that takes longer fails (`PullTimeout`) and is retried with
    /// backoff.
    #[arg(long, default_value = "3m", value_parser = humantime::parse_duration)]
    pull_timeout: Duration,
    /// A Secret of the host's namespace that Plugin objects may name as
    /// `spec.pullSecretRef` (repeatable). A Plugin naming any other is refused
    /// (`PullSecretNotAllowed`) before any Secret is read; without this flag, none may.
    #[arg(long = "allowed-pull-secret", value_name = "NAME")]
    allowed_pull_secret: Vec<String>,
    /// How long the watch of Plugin objects may fail (403, unreachable API server) before
    /// the plugins of Plugin objects are unloaded until it works again: a Plugin deleted or
    /// narrowed while the host cannot see it must not keep serving. Plugin files are not
    /// affected.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    plugin_watch_grace: Duration,
    #[command(flatten)]
    registry: super::registry_args::RegistryArgs,
    /// A registry Plugin objects may pull from (repeatable): HOST[:PORT] exactly, or
    /// *.DOMAIN[:PORT] for any host under DOMAIN; the port is part of the match. With
    /// none, any registry at a public address. Either way, a registry at a loopback,
    /// link-local, private or cluster-internal address (or named localhost, *.svc,
    /// *.cluster.local, a single label) is refused unless named exactly here or by
    /// --insecure-registry; resolved addresses are checked when connecting. Blob
    /// redirects to another host (a CDN) must go to an HTTPS host these rules allow.
    #[arg(long = "allowed-registry", value_name = "PATTERN", value_parser = super::registry_args::allowed_pattern)]
    allowed_registry: Vec<String>,
    /// A registry NamespacedPlugins may pull from (repeatable): NS=PATTERN for namespace
    /// NS only, PATTERN for every namespace; PATTERN as --allowed-registry (HOST[:PORT], or
    /// *.DOMAIN[:PORT]). A NamespacedPlugin pulling from any other is refused
    /// (RegistryNotAllowed) before any request. Without this flag NamespacedPlugins are
    /// not watched at all (the host needs no RBAC for them); with it, each runs confined
    /// to its namespace: its watches, reads and grants there only (ClusterScopedKind,
    /// OutsideNamespace), its writes as ServiceAccount kubewasm-NAME of that namespace.
    /// --allowed-registry and --insecure-registry still apply to every pull.
    #[arg(long = "tenant-registry", value_name = "[NS=]PATTERN", value_parser = tenant_registry)]
    tenant_registry: Vec<(Option<String>, String)>,
    /// NamespacedPlugins one namespace may run: the oldest (by creationTimestamp, then
    /// name) run, the others are refused (TooManyPlugins).
    #[arg(long, value_name = "N", default_value_t = 5)]
    tenant_max_plugins: usize,
    /// Largest memoryMiB a NamespacedPlugin may ask for in spec.limits (InvalidLimits
    /// above it); one asking none gets the smaller of this and --memory-mib.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    tenant_max_memory_mib: usize,
    /// Longest callDeadline a NamespacedPlugin may ask for in spec.limits (InvalidLimits
    /// above it); one asking none gets the shorter of this and --call-deadline.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration)]
    tenant_max_call_deadline: Duration,
    /// Most maxInstances a NamespacedPlugin may ask for in spec.limits (InvalidLimits
    /// above it, or 0); one asking none gets the smaller of this and --max-instances.
    #[arg(long, value_name = "N", default_value_t = 2)]
    tenant_max_instances: usize,
    /// Refuse Plugin objects whose spec.module names a tag: only REPO@sha256:HEX
    /// (`kubewasm push` prints it) is pulled (reason DigestRequired).
    #[arg(long)]
    require_digest: bool,
    /// The operator's approvals of the --plugins DIR plugins: a YAML stream, or a directory
    /// of YAML files, of kubewasm.dev/v1alpha1 Plugin objects (as `kubewasm approve`
    /// prints them; their metadata.name, spec.permissions and spec.limits are used).
    /// Followed like the plugin directory: a narrowed approval unloads a plugin it no longer
    /// covers. Without it nothing is approved, and every plugin is refused.
    #[arg(long, value_name = "PATH", requires = "plugins")]
    pub approvals: Option<PathBuf>,
    /// Re-deliver every watched object this often as a `resync` event (0 disables).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    resync: Duration,
    /// Objects handled in parallel per plugin.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Deadline of one plugin call.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    call_deadline: Duration,
    /// Memory cap per plugin instance, in MiB (1 to 65536).
    #[arg(long, default_value_t = 256, value_parser = mebibytes)]
    memory_mib: usize,
    /// Maximum intents one call may return.
    #[arg(long, default_value_t = 256)]
    max_intents: usize,
    /// Calls after which a pooled plugin instance is replaced by a fresh one.
    #[arg(long, default_value_t = 1000)]
    recycle_after_calls: u64,
    /// Memory one plugin's idle pooled instances may hold together, in MiB (1 to 65536).
    #[arg(long, default_value_t = 256, value_parser = mebibytes)]
    pool_memory_mib: usize,
    /// Memory all plugins' calls in flight and idle instances may hold together, in MiB:
    /// each call holds its plugin's --memory-mib from start to end and waits while the
    /// budget is spent (a cap over the whole budget is clamped to it). `auto`: half the
    /// container's memory limit (cgroup v2 memory.max, or cgroup v1
    /// memory.limit_in_bytes), or of the machine's memory without one; `off`: unbounded.
    #[arg(long, default_value = "auto", value_parser = call_budget)]
    call_memory_budget: CallBudgetArg,
    /// Longest a plugin call waits for its share of --call-memory-budget; past it the
    /// call is not run and its event is retried with backoff (counted in
    /// kubewasm_call_budget_wait_timeouts_total). Every call that waited is logged (WARN).
    #[arg(long, default_value = "30s", value_parser = positive_duration)]
    call_budget_wait: Duration,
    /// Percent (1 to 100) of --call-memory-budget that the plugins of one tenant
    /// namespace (its NamespacedPlugins) may hold together: a tenant call takes its
    /// namespace's part first, then the global budget, so a namespace whose plugins are
    /// slow or run out of memory leaves the rest to the others (waits counted in
    /// kubewasm_call_budget_tenant_waits_total). A tenant plugin's memory cap is clamped
    /// to its namespace's part.
    #[arg(long, value_name = "PERCENT", default_value_t = 25, value_parser = clap::value_parser!(u8).range(1..=100))]
    tenant_budget_share: u8,
    /// Largest memoryMiB a plugin's limits may ask for (its settings file's `kubewasm`
    /// key, or spec.limits of its Plugin object): a plugin asking more is refused at load.
    /// Default: no ceiling but --call-memory-budget, to which every cap is clamped.
    #[arg(long, value_name = "MIB", value_parser = mebibytes)]
    max_plugin_memory_mib: Option<usize>,
    /// Longest callDeadline a plugin's limits may ask for; a plugin asking longer is
    /// refused at load. Default: no ceiling but the most any plugin may ask (1h).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    max_plugin_call_deadline: Option<Duration>,
    /// Largest maxInstances a plugin's limits may ask for; a plugin asking more is
    /// refused at load. Default: no ceiling (a derived count, maxInstances 0, is at most
    /// --concurrency and two per CPU).
    #[arg(long, value_name = "N")]
    max_plugin_instances: Option<usize>,
    /// Instances of one plugin alive at once (running or pooled); further calls wait for
    /// a free one. 0 derives it: as many as --pool-memory-mib holds at the instances'
    /// memory, at most two per CPU (calls only compute) and --concurrency.
    #[arg(long, default_value_t = 0)]
    max_instances: usize,
    /// First retry delay after a failed event (doubles per attempt).
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
    retry_base: Duration,
    /// Longest retry delay.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    retry_max: Duration,
    /// Retries per second across all of a plugin's objects (transient failures wait for
    /// the later of their own backoff and this overall limit). Permanent failures (400,
    /// 403, 404, 422, refused intents) are not retried until the object changes.
    #[arg(long, default_value_t = 10.0)]
    retry_rate: f64,
    /// Retries allowed at once before `--retry-rate` applies.
    #[arg(long, default_value_t = 100)]
    retry_burst: u32,
    /// How watches list the objects that exist when they start, and on every relist:
    /// `auto` uses streaming lists (a watch with sendInitialEvents, served by
    /// kube-apiserver 1.34 and later) where the API server serves them, asking it once,
    /// and pages otherwise; `streaming` always streams (a server without them refuses
    /// every watch); `paged` lists in pages of --list-page-size.
    #[arg(long, value_enum, default_value_t = InitialSyncArg::Auto)]
    initial_sync: InitialSyncArg,
    /// Objects per page of a paged list (0: the whole list in one response).
    #[arg(long, default_value_t = kubewasm::watch::DEFAULT_PAGE_SIZE)]
    list_page_size: u32,
    /// How often to look again for resources that are not served yet (CRDs installed later).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    discovery_interval: Duration,
    /// Instantiate a fresh instance for every event instead of reusing instances.
    #[arg(long)]
    fresh_instances: bool,
    /// Keep compiled plugins here, so restarts and reloads of known plugins skip
    /// compilation (keyed by content hash and engine version; must be writable only by
    /// the host). Entries are authenticated with KUBEWASM_CACHE_KEY_FILE's key (`run`:
    /// else a key of this process; `dev`: else the per-user key, and without this flag
    /// the per-user cache ~/.cache/kubewasm/code).
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// The compiled-code cache `dev` chose (the user's, keyed by the user's key); None:
    /// `--cache-dir`, keyed as `KUBEWASM_CACHE_KEY_FILE` says (`run` in a pod keeps its own
    /// key).
    #[arg(skip)]
    pub(crate) code_cache: Option<super::usercache::CodeCache>,
    /// Longest time compiling one plugin may take (in a worker process); a file that
    /// takes longer is refused until it changes.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    compile_timeout: Duration,
    /// Address space the compile worker may map, in MiB (1 to 65536); a plugin whose
    /// compilation needs more is refused.
    #[arg(long, default_value_t = 2048, value_parser = mebibytes)]
    compile_memory_mib: usize,
    /// Quiet period after a change in the plugin directory before reloading it.
    #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration)]
    reload_debounce: Duration,
    /// Do not follow the plugin directory: load it once at start.
    #[arg(long)]
    no_reload: bool,
    /// Also rescan the plugin directory this often, for filesystems without change
    /// notifications (0 disables).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    rescan_interval: Duration,
    /// Maximum log lines one call may write; further lines are dropped and counted.
    #[arg(long, default_value_t = 100)]
    max_log_lines: usize,
    /// Maximum size of one intent's JSON, in KiB (1 to 4194304).
    #[arg(long, default_value_t = 1024, value_parser = kibibytes)]
    max_intent_kib: usize,
    /// Quarantine a plugin after this many consecutive failed calls (traps, deadlines,
    /// memory cap, limits); 0 disables quarantine.
    #[arg(long, default_value_t = 5)]
    quarantine_after: u32,
    /// How long a quarantine lasts (a new version of the plugin file ends it at once).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    quarantine_cooldown: Duration,
    /// Address of /metrics, /status, /healthz and /readyz (`off` disables it). Loopback
    /// by default: reach it from inside the pod or with `kubectl port-forward`. Another
    /// address (e.g. `0.0.0.0:9090`, for Prometheus) exposes the metrics and the plugins'
    /// status to whoever reaches it: put a NetworkPolicy in front (deploy/README.md).
    #[arg(long, default_value = "127.0.0.1:9090")]
    metrics_addr: String,
    /// Serve --metrics-addr over HTTPS, every request authenticated with a TokenReview of
    /// its bearer token and authorized with a SubjectAccessReview of its path (verb get,
    /// non-resource URL /metrics, /status, ...), as controller-runtime's metrics server:
    /// 401 without a valid token, 403 without the RBAC (`kubewasm rbac --metrics-secure`
    /// renders the host's rules and the NS:kubewasm-metrics-reader ClusterRole to bind
    /// Prometheus to). Answers are kept up to a minute. /healthz and /readyz there are
    /// reviewed too: give the kubelet --probe-addr.
    #[arg(long)]
    metrics_secure: bool,
    /// With --metrics-secure: a directory holding the serving certificate and its key
    /// (a mounted kubernetes.io/tls Secret, e.g. cert-manager's), read again when they
    /// change. Without it, a self-signed certificate made at start.
    #[arg(long, value_name = "DIR", requires = "metrics_secure")]
    metrics_cert_path: Option<PathBuf>,
    /// The certificate file's name in --metrics-cert-path.
    #[arg(long, default_value = "tls.crt", value_name = "FILE")]
    metrics_cert_name: String,
    /// The key file's name in --metrics-cert-path.
    #[arg(long, default_value = "tls.key", value_name = "FILE")]
    metrics_cert_key: String,
    /// Address of the probes alone, /healthz and /readyz, for the kubelet (e.g.
    /// `0.0.0.0:8081`; `off`, the default, serves them only at --metrics-addr).
    #[arg(long, default_value = "off")]
    probe_addr: String,
    /// Run as one of several replicas: only the holder of a coordination.k8s.io/v1 Lease
    /// applies intents; the others keep warm caches and take over when it goes.
    #[arg(long)]
    leader_elect: bool,
    /// Run as one of several replicas that split the work: every object key (namespace/
    /// name) hashes to one of S shards, each a Lease `<lease-name>-shard-<i>`; the replicas
    /// balance the shards among themselves (about S/N each), and each handles, and caches,
    /// only the objects of the shards it holds (kinds declared under a plugin's `reads`
    /// are cached whole). S is fixed per installation: 32 suits up to a dozen replicas.
    #[arg(long, value_name = "S", conflicts_with = "leader_elect",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(kubewasm::replicas::shards::MAX_SHARDS)))]
    shards: Option<u32>,
    /// Name of the Lease (with --shards: the prefix of the shard and member Leases).
    #[arg(long, default_value = "kubewasm")]
    lease_name: String,
    /// Watch, cache and read only these namespaces (repeatable, or `WATCH_NAMESPACE`
    /// comma-separated); default: every namespace. With it, the Roles from `kubewasm rbac
    /// --namespace NS` are enough (no cluster-wide list or watch of namespaced kinds).
    /// Cluster-scoped kinds are still watched cluster-wide.
    #[arg(
        long = "namespace",
        value_name = "NS",
        env = "WATCH_NAMESPACE",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Namespace of the Lease (default: the pod's namespace, else `kubewasm-system`, where
    /// `kubewasm rbac` grants the Lease by default).
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's name in Events, and the base of its Lease identity (which adds a
    /// random suffix per process, so a restarted container is a new candidate; default:
    /// the hostname).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Send each plugin's writes with the host's own identity instead of impersonating the
    /// plugin's ServiceAccount `kubewasm-<plugin>` (for clusters where the host may not
    /// impersonate; the host's role must then hold every plugin's grants).
    #[arg(long)]
    no_impersonation: bool,
    /// Ask this often whether each plugin's ServiceAccount may still get, list and watch
    /// what its approval lets it read (SubjectAccessReviews; asked before each load too):
    /// a plugin that lost a rule is unloaded, one refused for a missing rule loads once it
    /// is granted. Not with --no-impersonation (plugins then read as the host).
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    access_review_interval: Duration,
    /// Namespace of the plugins' ServiceAccounts (default: the pod's namespace, else
    /// `kubewasm-system`, where `kubewasm rbac` and `approve` put them by default).
    #[arg(long, env = "POD_NAMESPACE")]
    plugin_namespace: Option<String>,
    /// Write each handled event (the object, what the plugin read through `host.get` /
    /// `host.list`, the intents it returned) as a `kubewasm test` case under
    /// DIR/PLUGIN/, so the cluster's behaviour replays offline. Secrets' values are
    /// redacted unless --record-secrets.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// With --record: keep Secrets' data in clear text in the recorded cases.
    #[arg(long, requires = "record")]
    record_secrets: bool,
    /// How long a Lease is valid without renewal.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// A leader that could not renew for this long stops applying.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    renew_deadline: Duration,
    /// How often to try to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    retry_period: Duration,
    /// Record a Kubernetes Event on an object whose event fails, at most once per object
    /// and reason per this interval (0 disables Events).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    event_interval: Duration,
}

/// Flags of `kubewasm run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    host: HostArgs,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    context: Option<String>,
}

impl HostArgs {
    /// The host's configuration from the flags.
    fn config(&self) -> Result<HostConfig> {
        if self.plugins.is_none() && self.no_plugin_objects {
            anyhow::bail!(
                "nothing to load: give --plugins DIR, or drop --no-plugin-objects to load Plugin objects"
            );
        }
        if let Some(path) = &self.approvals
            && !path.exists()
        {
            anyhow::bail!("--approvals {}: no such file or directory", path.display());
        }
        let ceilings = self.ceilings()?;
        if self.plugins.is_some() && self.approvals.is_none() {
            tracing::warn!(
                "no --approvals: nothing is approved for the plugin directory, so every plugin \
                 there that watches, reads or writes anything is refused (`kubewasm approve \
                 FILE.wasm` prints an approval)"
            );
        }
        let host_namespace = self.plugin_namespace();
        let identity = self.identity();
        Ok(HostConfig {
            plugins: self.plugins_config(ceilings, &host_namespace)?,
            watch: WatchConfig {
                resync: (!self.resync.is_zero()).then_some(self.resync),
                discovery_interval: self.discovery_interval,
                namespaces: self.watch_namespaces()?,
                initial_sync: self.initial_sync.into(),
                list_page_size: self.list_page_size,
            },
            events: self.events_config(host_namespace),
            replicas: self.replicas_config(&identity),
            serve: ServeConfig {
                metrics_addr: self.metrics_addr()?,
                probe_addr: self.probe_addr()?,
                metrics_secure: self.metrics_secure.then(|| self.metrics_cert()),
            },
            identity,
        })
    }

    /// Where plugins come from and how they load.
    fn plugins_config(
        &self,
        ceilings: LimitCeilings,
        host_namespace: &str,
    ) -> Result<PluginsConfig> {
        let load = LoadOptions {
            limits: Limits {
                deadline: self.call_deadline,
                memory: self.memory_mib << 20,
                max_intents: self.max_intents,
                max_intent_bytes: self.max_intent_kib << 10,
                max_log_lines: self.max_log_lines,
                recycle_after_calls: self.recycle_after_calls.max(1),
                pool_memory: self.pool_memory_mib << 20,
                max_instances: self.max_instances,
                tenant: None,
            },
            reuse_instances: !self.fresh_instances,
            pool_size: self.concurrency,
            // A long-running host keeps the compiler's memory out of its own.
            compiler: super::worker_compiler(
                self.compile_timeout,
                (self.compile_memory_mib as u64) << 20,
            )?,
            call_budget: self
                .call_memory_budget
                .budget(self.call_budget_wait)
                .with_tenant_share(self.tenant_budget_share),
            ceilings,
        };
        Ok(PluginsConfig {
            dir: self.plugins.clone(),
            objects: self.objects_config(ceilings, host_namespace)?,
            approvals: self.approvals.clone(),
            load,
            cache_dir: match &self.code_cache {
                Some(c) => c.dir.clone(),
                None => self.cache_dir.clone(),
            },
            cache_key_file: self.code_cache.as_ref().and_then(|c| c.key_file.clone()),
            reload_debounce: (!self.no_reload).then_some(self.reload_debounce),
            rescan_interval: (!self.no_reload && !self.rescan_interval.is_zero())
                .then_some(self.rescan_interval),
            // At least a second: a zero interval would ask the API server in a loop.
            access_review_interval: self.access_review_interval.max(Duration::from_secs(1)),
        })
    }

    /// How Plugin objects' modules are pulled; None with --no-plugin-objects.
    fn objects_config(
        &self,
        ceilings: LimitCeilings,
        host_namespace: &str,
    ) -> Result<Option<ObjectsConfig>> {
        if self.no_plugin_objects {
            anyhow::ensure!(
                self.tenant_registry.is_empty(),
                "--tenant-registry follows NamespacedPlugins, which --no-plugin-objects turns off with Plugin objects"
            );
            return Ok(None);
        }
        anyhow::ensure!(
            !self.pull_timeout.is_zero(),
            "--pull-timeout must be more than 0"
        );
        Ok(Some(ObjectsConfig {
            registry: kubewasm_oci::RegistryConfig {
                allowed: self.allowed_registry.clone(),
                require_digest: self.require_digest,
                ..self.registry.config()
            },
            auths: Arc::new(self.registry.auths()?),
            store_dir: self.module_store(),
            namespace: host_namespace.to_string(),
            max_module_bytes: (self.max_module_mib as u64) << 20,
            ceilings,
            pull_timeout: self.pull_timeout,
            allowed_pull_secrets: self.allowed_pull_secret.clone(),
            watch_grace: self.plugin_watch_grace,
            tenants: self.tenants_config(),
        }))
    }

    /// The platform's ceilings on NamespacedPlugins; None without --tenant-registry.
    fn tenants_config(&self) -> Option<TenantsConfig> {
        if self.tenant_registry.is_empty() {
            return None;
        }
        let memory = self.tenant_max_memory_mib;
        let deadline = self.tenant_max_call_deadline;
        let instances = self.tenant_max_instances;
        Some(TenantsConfig {
            registries: self.tenant_registry.clone(),
            max_plugins: self.tenant_max_plugins,
            ceilings: LimitCeilings {
                memory_mib: Some(memory),
                call_deadline: Some(deadline),
                instances: Some(instances),
            },
            // The host's defaults, within the tenant ceilings (0 instances: derived, so
            // the ceiling).
            defaults: LimitOverrides {
                memory_mib: Some(self.memory_mib.min(memory)),
                call_deadline: Some(self.call_deadline.min(deadline)),
                max_instances: Some(match self.max_instances {
                    0 => instances,
                    n => n.min(instances),
                }),
                ..LimitOverrides::default()
            },
        })
    }

    /// How events are queued, handled and written.
    fn events_config(&self, host_namespace: String) -> EventsConfig {
        EventsConfig {
            queue: QueueConfig {
                concurrency: self.concurrency,
                retry_base: self.retry_base,
                retry_max: self.retry_max,
                retry_rate: self.retry_rate,
                retry_burst: self.retry_burst,
            },
            quarantine: QuarantinePolicy {
                threshold: self.quarantine_after,
                cooldown: self.quarantine_cooldown,
            },
            event_interval: (!self.event_interval.is_zero()).then_some(self.event_interval),
            record: self.record.clone().map(|dir| RecordConfig {
                dir,
                secrets: self.record_secrets,
            }),
            write_identity: if self.no_impersonation {
                WriteIdentity::Host
            } else {
                WriteIdentity::PluginServiceAccounts {
                    namespace: host_namespace,
                }
            },
        }
    }

    /// Where pulled modules are kept: --module-store, else CACHE_DIR/modules; None: a
    /// directory private to the process.
    fn module_store(&self) -> Option<PathBuf> {
        self.module_store
            .clone()
            .or_else(|| self.cache_dir.as_ref().map(|c| c.join("modules")))
    }

    /// Alone, the leader's Lease, or the shards' Leases: one Lease setup for both.
    fn replicas_config(&self, identity: &str) -> ReplicasConfig {
        let lease = || LeaderConfig {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            ..LeaderConfig::new(
                &self.lease_name,
                self.lease_namespace.clone().unwrap_or_else(home_namespace),
                leader::process_identity(identity),
            )
        };
        let election = match (self.leader_elect, self.shards) {
            (true, _) => Election::Leader(lease()),
            (false, Some(shards)) => Election::Shards(ShardConfig {
                lease: lease(),
                shards,
            }),
            (false, None) => Election::Alone,
        };
        ReplicasConfig {
            election,
            // A handover takes at most a lease duration (plus a retry period); twice that
            // covers a follower that observed the old lease late.
            tombstone_retention: self.lease_duration.saturating_mul(2),
        }
    }

    /// The ceilings on plugins' limits, which the host's own defaults must respect too.
    fn ceilings(&self) -> Result<LimitCeilings> {
        let ceilings = LimitCeilings {
            memory_mib: self.max_plugin_memory_mib,
            call_deadline: self.max_plugin_call_deadline,
            instances: self.max_plugin_instances,
        };
        let defaults = LimitOverrides {
            memory_mib: Some(self.memory_mib),
            call_deadline: Some(self.call_deadline),
            max_instances: Some(self.max_instances),
            ..LimitOverrides::default()
        };
        ceilings.check(&defaults).map_err(|e| {
            anyhow::anyhow!(
                "the host's defaults for every plugin (--memory-mib, --call-deadline, \
                 --max-instances) must be within the ceilings: {e}"
            )
        })?;
        Ok(ceilings)
    }

    /// Where the plugins' ServiceAccounts are: `--plugin-namespace`, else
    /// [`home_namespace`].
    pub(crate) fn plugin_namespace(&self) -> String {
        self.plugin_namespace.clone().unwrap_or_else(home_namespace)
    }

    /// `--namespace` values, checked ([`namespaces_flag`]).
    fn watch_namespaces(&self) -> Result<Vec<String>> {
        namespaces_flag(&self.namespaces)
    }

    fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "kubewasm".into())
        })
    }

    fn metrics_addr(&self) -> Result<Option<SocketAddr>> {
        address("--metrics-addr", &self.metrics_addr)
    }

    /// --metrics-cert-path's files, else a self-signed certificate.
    fn metrics_cert(&self) -> kubewasm::serve::CertSource {
        match &self.metrics_cert_path {
            Some(dir) => kubewasm::serve::CertSource::Files {
                cert: dir.join(&self.metrics_cert_name),
                key: dir.join(&self.metrics_cert_key),
            },
            None => kubewasm::serve::CertSource::SelfSigned,
        }
    }

    fn probe_addr(&self) -> Result<Option<SocketAddr>> {
        address("--probe-addr", &self.probe_addr)
    }
}

/// `--namespace` values (of `run`, `dev` and `plan`), checked as Kubernetes names
/// namespaces (DNS-1123 labels), blanks and repeats dropped.
pub(crate) fn namespaces_flag(values: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for ns in values.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        kubewasm::core::names::validate_name(ns, kubewasm::core::names::NameRule::Label)
            .map_err(|reason| anyhow::anyhow!("--namespace {ns:?}: {reason}"))?;
        if !out.iter().any(|n| n == ns) {
            out.push(ns.to_string());
        }
    }
    Ok(out)
}

/// A listening address flag: `host:port`, or `off`.
fn address(flag: &str, value: &str) -> Result<Option<SocketAddr>> {
    if value == "off" {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .with_context(|| format!("{flag} {value:?} is not host:port or off"))
}

/// `kubewasm run`.
pub async fn command(args: RunArgs) -> Result<()> {
    let client = client_for(args.kubeconfig.as_ref(), args.context.as_ref()).await?;
    run_host(client, &args.host, |_| {}).await
}

/// A client from a kubeconfig (file or default locations), else the in-cluster configuration.
pub async fn client_for(
    kubeconfig: Option<&PathBuf>,
    context: Option<&String>,
) -> Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.cloned(),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .context("loading kubeconfig")?,
        None => {
            let has_kubeconfig = std::env::var_os("KUBECONFIG").is_some()
                || std::env::var_os("HOME")
                    .map(|h| std::path::Path::new(&h).join(".kube/config").is_file())
                    .unwrap_or(false);
            if has_kubeconfig || std::env::var_os("KUBERNETES_SERVICE_HOST").is_none() {
                kube::Config::infer()
                    .await
                    .context("no kubeconfig found and not running in a cluster")?
            } else {
                let dir = std::env::var_os("KUBEWASM_SERVICEACCOUNT_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(kubewasm::serve::incluster::DEFAULT_DIR));
                kubewasm::serve::incluster::config_from_dir(&dir)
                    .context("in-cluster configuration")?
            }
        }
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// The namespace the host lives in when no flag (or `POD_NAMESPACE`) names it: in a pod,
/// its ServiceAccount's namespace; elsewhere [`rbac::DEFAULT_NAMESPACE`], where `kubewasm
/// rbac` and `approve` put the ServiceAccounts by default. Not the kubeconfig context's:
/// which context a developer has selected says nothing of where the RBAC was applied.
pub fn home_namespace() -> String {
    let dir = std::env::var_os("KUBEWASM_SERVICEACCOUNT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(kubewasm::serve::incluster::DEFAULT_DIR));
    home_namespace_in(&dir)
}

/// [`home_namespace`] with the ServiceAccount's files in `dir`.
fn home_namespace_in(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("namespace"))
        .ok()
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| rbac::DEFAULT_NAMESPACE.to_string())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Run the host on `client` until SIGINT/SIGTERM (or, for a leader, until it loses its
/// Lease: `kubewasm::Error::LostLease`, which exits with [`EXIT_LOST_LEASE`]).
/// `started` sees the host once its plugins are loaded (`dev` prints its banner there).
pub async fn run_host(
    client: kube::Client,
    args: &HostArgs,
    started: impl FnOnce(&Host),
) -> Result<()> {
    let config = args.config()?;
    // What ran so far (the loader's relocations, the arguments, the kubeconfig and TLS,
    // the settings and approvals) does not run again: its pages go before the host's own
    // start-up adds its own, so that the two do not add up in the peak.
    release_resident_memory();
    let host = Host::start(client, config).await?;
    tracing::info!(plugins = %host.plugins().join(","), "host running; Ctrl-C to stop");
    started(&host);
    let releases = tokio::spawn(give_back_resident_memory());
    let result = host.run(shutdown_signal()).await;
    releases.abort();
    result?;
    Ok(())
}

/// When the running host gives back the code pages and free heap pages it stopped using
/// ([`crate::resident`]) a third time: after the first lists of its caches and their
/// first events (the first is before the host's own start-up, the second once it
/// started).
const SECOND_RELEASE: std::time::Duration = std::time::Duration::from_secs(10);
/// How often it does again, so code that ran once (a reload, a burst) does not stay
/// resident.
const RELEASE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Give back resident memory once the host started, [`SECOND_RELEASE`] later, then every
/// [`RELEASE_EVERY`].
async fn give_back_resident_memory() {
    release_resident_memory();
    let start = tokio::time::Instant::now() + SECOND_RELEASE;
    let mut every = tokio::time::interval_at(start, RELEASE_EVERY);
    loop {
        every.tick().await;
        release_resident_memory();
    }
}

fn release_resident_memory() {
    let dropped = crate::resident::release();
    tracing::debug!(
        mapped_bytes = dropped,
        "dropped the binary's unused pages and returned free heap pages"
    );
}

/// The exit code of `kubewasm run` after losing its Lease (renewals failed until the
/// renew deadline, or another replica took it): not 1, so a hand-over is told from a
/// crash (deploy/README.md says what to alert on).
pub const EXIT_LOST_LEASE: i32 = 3;

/// `--initial-sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum InitialSyncArg {
    Auto,
    Streaming,
    Paged,
}

impl From<InitialSyncArg> for InitialSync {
    fn from(a: InitialSyncArg) -> Self {
        match a {
            InitialSyncArg::Auto => InitialSync::Auto,
            InitialSyncArg::Streaming => InitialSync::Streaming,
            InitialSyncArg::Paged => InitialSync::Paged,
        }
    }
}

/// A MiB count within the loader's range, so `<< 20` cannot overflow.
/// `--call-memory-budget`: `auto`, `off` or MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallBudgetArg {
    Auto,
    Off,
    Mib(usize),
}

fn call_budget(text: &str) -> Result<CallBudgetArg, String> {
    match text {
        "auto" => Ok(CallBudgetArg::Auto),
        "off" => Ok(CallBudgetArg::Off),
        n => mebibytes(n)
            .map(CallBudgetArg::Mib)
            .map_err(|e| format!("`auto`, `off` or MiB: {e}")),
    }
}

impl CallBudgetArg {
    /// The budget, calls waiting at most `wait` for their share; said once in the log
    /// with where its figure came from (for `auto`, the memory limit found and its file).
    fn budget(self, wait: Duration) -> kubewasm::runtime::budget::CallBudget {
        use kubewasm::runtime::budget::{self, CallBudget};
        let (b, from, limit_mib) = match self {
            CallBudgetArg::Auto => match budget::default_budget() {
                (b, Some(limit)) => (
                    b,
                    format!("half of {}", limit.source),
                    Some(limit.bytes >> 20),
                ),
                (b, None) => (
                    b,
                    "nothing (no cgroup memory limit, no /proc/meminfo)".into(),
                    None,
                ),
            },
            CallBudgetArg::Off => (
                CallBudget::unbounded(),
                "--call-memory-budget off".into(),
                None,
            ),
            CallBudgetArg::Mib(m) => (
                CallBudget::new((m as u64) << 20),
                "--call-memory-budget".into(),
                None,
            ),
        };
        let b = b.with_wait(wait);
        let wait = humantime::format_duration(wait).to_string();
        match (b.bytes(), limit_mib) {
            (Some(bytes), Some(limit_mib)) => tracing::info!(
                mib = bytes >> 20,
                memory_limit_mib = limit_mib,
                from,
                wait,
                "plugin call memory budget"
            ),
            (Some(bytes), None) => {
                tracing::info!(mib = bytes >> 20, from, wait, "plugin call memory budget")
            }
            (None, _) => tracing::info!(from, "plugin call memory budget: unbounded"),
        }
        b
    }
}

/// A duration longer than zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be longer than 0s".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

fn mebibytes(text: &str) -> Result<usize, String> {
    within(text, kubewasm::runtime::MAX_MEMORY_MIB)
}

/// A KiB count within the loader's range, so `<< 10` cannot overflow.
fn kibibytes(text: &str) -> Result<usize, String> {
    within(text, kubewasm::runtime::MAX_INTENT_KIB)
}

fn within(text: &str, max: usize) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    if n == 0 || n > max {
        return Err(format!("must be between 1 and {max}"));
    }
    Ok(n)
}

/// `--tenant-registry [NS=]PATTERN`: the namespace (a DNS label; none: every one) and an
/// `--allowed-registry` pattern.
fn tenant_registry(s: &str) -> Result<(Option<String>, String), String> {
    match s.split_once('=') {
        Some((ns, pattern)) => {
            if !kubewasm::core::names::is_dns_label(ns) {
                return Err(format!("{s:?}: NS in NS=PATTERN must be a namespace name"));
            }
            let pattern = super::registry_args::allowed_pattern(pattern)?;
            Ok((Some(ns.to_string()), pattern))
        }
        None => Ok((None, super::registry_args::allowed_pattern(s)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        host: HostArgs,
    }

    fn flags(args: &[&str]) -> HostArgs {
        let mut all = vec!["kubewasm"];
        all.extend_from_slice(args);
        Flags::try_parse_from(all).expect("flags parse").host
    }

    #[test]
    fn the_home_namespace_is_the_pods_else_the_one_rbac_renders() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(home_namespace_in(dir.path()), "kubewasm-system");
        std::fs::write(dir.path().join("namespace"), "team-a\n").expect("write");
        assert_eq!(home_namespace_in(dir.path()), "team-a");
    }

    #[test]
    fn a_leader_and_shards_stand_on_the_same_lease_setup() {
        let lease = [
            "--lease-name",
            "kw",
            "--lease-duration",
            "9s",
            "--renew-deadline",
            "6s",
        ];
        let leader = flags(&[&["--leader-elect"][..], &lease].concat()).replicas_config("pod");
        let Election::Leader(l) = &leader.election else {
            panic!("--leader-elect: {:?}", leader.election);
        };
        let sharded = flags(&[&["--shards", "4"][..], &lease].concat()).replicas_config("pod");
        let Election::Shards(s) = &sharded.election else {
            panic!("--shards: {:?}", sharded.election);
        };
        assert_eq!(s.shards, 4);
        for l in [l, &s.lease] {
            assert_eq!(l.lease_name, "kw");
            assert_eq!(
                l.namespace,
                rbac::DEFAULT_NAMESPACE,
                "out of a pod, without --lease-namespace: where `kubewasm rbac` grants it"
            );
            assert_eq!(l.lease_duration, Duration::from_secs(9));
            assert_eq!(l.renew_deadline, Duration::from_secs(6));
            assert!(
                l.identity.starts_with("pod_"),
                "a per-process identity: {}",
                l.identity
            );
        }
        assert_ne!(
            l.identity, s.lease.identity,
            "each process its own candidate"
        );
        assert_eq!(leader.tombstone_retention, Duration::from_secs(18));
        let alone = flags(&["--lease-namespace", "other"]).replicas_config("pod");
        assert!(
            matches!(alone.election, Election::Alone),
            "{:?}",
            alone.election
        );
    }

    #[test]
    fn pulled_modules_go_to_the_module_store_else_the_cache_else_a_private_directory() {
        let both = flags(&["--module-store", "/m", "--cache-dir", "/c"]);
        assert_eq!(both.module_store(), Some(PathBuf::from("/m")));
        let cache = flags(&["--cache-dir", "/c"]);
        assert_eq!(cache.module_store(), Some(PathBuf::from("/c/modules")));
        // KUBEWASM_CACHE_DIR stands for --cache-dir: only without it is the store private.
        if std::env::var_os("KUBEWASM_CACHE_DIR").is_none() {
            assert_eq!(flags(&[]).module_store(), None);
        }
    }

    #[test]
    fn endpoints_are_addresses_or_off() {
        let args = flags(&["--metrics-addr", "off", "--probe-addr", "0.0.0.0:8081"]);
        assert_eq!(args.metrics_addr().expect("off"), None);
        assert_eq!(
            args.probe_addr().expect("an address"),
            Some("0.0.0.0:8081".parse().expect("address"))
        );
        assert!(
            flags(&["--metrics-addr", "localhost"])
                .metrics_addr()
                .is_err()
        );
    }

    #[test]
    fn a_secure_metrics_listener_takes_the_pods_certificate_else_a_self_signed_one() {
        use kubewasm::serve::CertSource;
        assert_eq!(
            flags(&["--metrics-secure"]).metrics_cert(),
            CertSource::SelfSigned
        );
        let dir = ["--metrics-secure", "--metrics-cert-path", "/certs"];
        assert_eq!(
            flags(&dir).metrics_cert(),
            CertSource::Files {
                cert: "/certs/tls.crt".into(),
                key: "/certs/tls.key".into()
            }
        );
        let named = [
            &dir[..],
            &[
                "--metrics-cert-name",
                "c.pem",
                "--metrics-cert-key",
                "k.pem",
            ],
        ]
        .concat();
        assert_eq!(
            flags(&named).metrics_cert(),
            CertSource::Files {
                cert: "/certs/c.pem".into(),
                key: "/certs/k.pem".into()
            }
        );
        // A certificate for a plain listener would be served by nobody: refused.
        assert!(Flags::try_parse_from(["kubewasm", "--metrics-cert-path", "/certs"]).is_err());
    }
}
