//! The host, as controller-runtime's Manager: it builds, owns, starts, readies and stops
//! every part — the endpoints (`serve`), this replica's standing among replicas (a leader
//! Lease or shards, `replicas`), the watches (`watch`), the plugin set and its reloads
//! (`plugins`), and the event loop (`watch` → `event::route` → `event::queue` →
//! `event::handler`: the layers around the pipeline, call → admit → apply). `kubewasm run`
//! turns its flags into a [`HostConfig`] and calls [`Host::start`], then [`Host::run`].
//!
//! The parts, each a small struct owning what it needs, its task a method of it:
//!
//! | part | concern |
//! | --- | --- |
//! | `Standing` | leader election or shards, and the lost-lease exit |
//! | `Plugins` | the plugin set: reloads (the one place the environment is swapped), readiness |
//! | `Workers` | a plugin's queue and the workers running its handler |
//! | `ObjectsWatch` | the Plugin objects as a source: their cache, its grace, their status |
//! | `WriteChecks` | whether the host may write as each plugin, and its own permissions |
//! | `Routing` | watch events into the queues |
//! | `Terms` | a new term (leading, shards gained): replays, and the objects' status |
//! | `Gauges` | queue depths and cache sizes, once a second |

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kubewasm_core::projection::Projection;
use kubewasm_core::resource::ResourceRef;
use kubewasm_runtime::{CompiledPlugin, LoadOptions, Loader, PluginEngine};
use tokio::sync::{Notify, mpsc};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::apply::events::EventRecorder;
use crate::apply::identity::AccountReviews;
use crate::apply::{Applier, WriteIdentity};
use crate::cases::record::{RecordConfig, Recorder};
use crate::event::cluster::ApiCluster;
use crate::event::handler::{PluginHandler, Shared};
use crate::event::layers;
use crate::event::pipeline::Pipeline;
use crate::event::route::Router;
use crate::event::{QuarantinePolicy, Queue, QueueConfig};
use crate::plugins::dir_watch::{self, DirWatch};
pub use crate::plugins::environment::PluginStatus;
use crate::plugins::environment::{Active, Current, Environment, Swaps, Version};
use crate::plugins::objects::{
    ObjectSource, ObjectState, StatusWriter, namespaced_plugin_kind, plugin_kind,
};
pub use crate::plugins::objects::{ObjectsConfig, TenantsConfig};
use crate::plugins::reload::{Loading, Reloader};
use crate::plugins::replay::{Replay, Replayer};
use crate::plugins::staging;
use crate::preview::report::Previews;
use crate::replicas::leader::{self, LeaderConfig, Leadership};
use crate::replicas::ownership::Ownership;
use crate::replicas::shards::{self, ShardConfig, ShardSet};
use crate::serve::access::{Access, Missing, Need, Rule};
use crate::serve::authn::{ApiReviewer, Gate};
use crate::serve::http::{self, BlockedObject, PluginReport, Readiness, ReadinessReport};
use crate::serve::metrics::{Metrics, PluginLabel, ResourceLabel};
use crate::watch::cache::{CachedObject, Caches, ResourceKey};
use crate::watch::discovery::Discovery;
use crate::watch::manager::Demand;
use crate::watch::{WatchConfig, WatchManager, WatchReadiness, WatchSignal};
use kubewasm_core::sync::lock;

/// Everything the host is configured with, grouped by the part it configures.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// This replica's name in Events (e.g. the pod name).
    pub identity: String,
    /// Where plugins come from and how they load.
    pub plugins: PluginsConfig,
    /// What is watched and cached.
    pub watch: WatchConfig,
    /// How events are queued, handled and written.
    pub events: EventsConfig,
    /// Alone, or one of several replicas.
    pub replicas: ReplicasConfig,
    /// The endpoints the host serves about itself.
    pub serve: ServeConfig,
}

/// The plugin sources and their loading.
#[derive(Debug, Clone)]
pub struct PluginsConfig {
    /// Directory holding `NAME.wasm` (+ settings) files; None: Plugin objects only.
    pub dir: Option<PathBuf>,
    /// Follow Plugin objects (`plugins.kubewasm.dev`), pulling their modules as this
    /// says; None: the plugin directory only.
    pub objects: Option<ObjectsConfig>,
    /// The operator's approvals of the directory's plugins: a YAML stream or a directory
    /// of `Plugin` objects (`kubewasm_runtime::approval`), re-read on every reload and
    /// followed like the plugin directory; None: nothing is approved.
    pub approvals: Option<PathBuf>,
    /// Plugin loading and limits.
    pub load: LoadOptions,
    /// On-disk compiled-code cache; None keeps compiled code in memory only.
    pub cache_dir: Option<PathBuf>,
    /// The key authenticating the cache's entries (`dev`: the user's); None: as the
    /// environment says (`KUBEWASM_CACHE_KEY_FILE`, else a key of this process).
    pub cache_key_file: Option<PathBuf>,
    /// Quiet period after a change in the plugin directory before reloading; None: no
    /// hot reload.
    pub reload_debounce: Option<Duration>,
    /// Rescan the plugin directory this often even without change notifications
    /// (network filesystems); None: only on notifications.
    pub rescan_interval: Option<Duration>,
    /// How often each plugin's ServiceAccount is asked again whether it may read what
    /// its approval lets it read (`apply::identity::AccountReviews`; with impersonation
    /// only). A plugin that lost a rule is unloaded; one refused for it loads once granted.
    pub access_review_interval: Duration,
}

/// How events are queued, handled and written.
#[derive(Debug, Clone)]
pub struct EventsConfig {
    /// Queue settings.
    pub queue: QueueConfig,
    /// When failing plugins are quarantined.
    pub quarantine: QuarantinePolicy,
    /// Record Kubernetes Events on objects whose events fail, at most one per object and
    /// reason per interval (None: do not).
    pub event_interval: Option<Duration>,
    /// Write every handled event as a `kubewasm test` case (`--record DIR`); None: do not.
    pub record: Option<RecordConfig>,
    /// Whose identity each plugin's writes are sent with (its impersonated ServiceAccount,
    /// or the host's own).
    pub write_identity: WriteIdentity,
}

/// This replica among others.
#[derive(Debug, Clone)]
pub struct ReplicasConfig {
    /// How the work is shared.
    pub election: Election,
    /// How long a follower remembers deletions, to deliver them as `deleted` when it
    /// becomes leader; at least the lease duration (a handover takes that long at most).
    pub tombstone_retention: Duration,
}

/// How the work is shared between replicas.
#[derive(Debug, Clone)]
pub enum Election {
    /// A single replica: it handles everything, always.
    Alone,
    /// Only the holder of this Lease applies intents; a leader that loses it makes
    /// [`Host::run`] return [`Error::LostLease`].
    Leader(LeaderConfig),
    /// Every object key hashes to a shard, each held on its own Lease.
    Shards(ShardConfig),
}

/// The endpoints the host serves about itself.
#[derive(Debug, Clone, Default)]
pub struct ServeConfig {
    /// `/metrics`, `/status`, `/healthz` and `/readyz`; None: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// The probes alone, `/healthz` and `/readyz`; None: not served apart.
    pub probe_addr: Option<SocketAddr>,
    /// `--metrics-secure`: the metrics listener over HTTPS with this certificate, every
    /// request reviewed by the API server (`serve::authn`); None: plain HTTP.
    pub metrics_secure: Option<crate::serve::CertSource>,
}

/// How often permissions found missing (the host's own, impersonating a plugin's
/// account) are asked again, so a fix to RBAC is noticed without a restart.
const RECHECK_PERMISSIONS: Duration = Duration::from_secs(10);

/// How often the health of the Plugin watch is looked at (see
/// [`ObjectsConfig::watch_grace`]): a few atomic reads.
const PLUGIN_WATCH_POLL: Duration = Duration::from_secs(1);

/// How often a replica waiting to stand for a Lease looks whether it is ready to serve.
const READY_POLL: Duration = Duration::from_millis(200);

/// While a plugin previews, how often the Plugin objects' status is written again: its
/// `status.preview` counts change with every event it handles, not only at reconciles (the
/// writer skips a status that did not change).
const PREVIEW_STATUS_INTERVAL: Duration = Duration::from_secs(5);

/// A running host. Build with [`Host::start`]; run with [`Host::run`] (or stop with
/// [`Host::shutdown`]).
pub struct Host {
    plugins: Arc<Plugins>,
    /// Routing, terms, reload triggers, permission checks, gauges: stopped first.
    tasks: Tasks,
    /// The watch manager: stopped once the workers, which read its caches, have ended.
    watching: Tasks,
    /// Leader election or shards: given up last, once no write of this replica can land.
    standing: Standing,
    /// The endpoints and the election.
    background: CancellationToken,
    _dir_watch: Option<DirWatch>,
}

impl Host {
    /// Serve the endpoints, stand for the Lease (or the shards) once ready, load the
    /// plugins, start the watches and the event loop, and (when configured) follow the
    /// plugin sources. Bad plugin files are logged and skipped; an unreadable plugin
    /// directory, an endpoint that cannot bind, an invalid election or a broken engine is
    /// an error.
    pub async fn start(client: Client, config: HostConfig) -> Result<Host, Error> {
        let metrics = Arc::new(Metrics::new());
        config.plugins.load.call_budget.observe(metrics.clone());
        let readiness = Readiness::default();
        let background = CancellationToken::new();
        // Until the host is up: a failure on the way stops what had started.
        let starting = background.clone().drop_guard();
        let previews = Arc::<Previews>::default();
        let endpoints = Endpoints {
            metrics: &metrics,
            readiness: &readiness,
            previews: &previews,
        };
        serve(&client, &config.serve, endpoints, &background).await?;
        let access = Arc::new(Access::default());
        if config.serve.metrics_secure.is_some() {
            access
                .require(&client, "metrics", secure_metrics_needs())
                .await;
        }
        let standing = Standing::stand(
            &client,
            &config.replicas.election,
            &readiness,
            &access,
            &metrics,
            &background,
        )
        .await?;
        let parts = Parts {
            client,
            config,
            ownership: standing.ownership.clone(),
            metrics,
            access,
            previews,
        };
        let (plugins, tasks, watching, dir_watch) = parts.assemble().await?;
        let ready = plugins.clone();
        readiness.set(move || ready.readiness());
        starting.disarm();
        Ok(Host {
            plugins,
            tasks,
            watching,
            standing,
            background,
            _dir_watch: dir_watch,
        })
    }

    /// Run until `shutdown` resolves, then stop ([`Host::shutdown`]). A leader that loses
    /// its Lease first stops its work (calls and applies in flight were abandoned at the
    /// write deadline, and none starts after) and returns [`Error::LostLease`], so the
    /// process exits and a fresh one starts as a follower, as with controller-runtime.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let lost = tokio::select! {
            _ = shutdown => false,
            _ = self.standing.lost() => true,
        };
        if lost {
            return Err(self.step_down().await);
        }
        tracing::info!("shutting down: finishing in-flight events");
        self.shutdown().await;
        Ok(())
    }

    /// Names of the plugins at work.
    pub fn plugins(&self) -> Vec<String> {
        self.plugins.current.get().plugins.keys().cloned().collect()
    }

    /// Plugins at work (from the environment serving, as [`Host::plugins`]), rejected
    /// sources and reload count.
    pub fn status(&self) -> PluginStatus {
        self.plugins.status()
    }

    /// Stop taking events, let in-flight calls and applies finish, stop the watches, then
    /// the endpoints, and give up the Lease so another replica takes over at once.
    pub async fn shutdown(self) {
        self.stop_work().await;
        self.background.cancel();
        self.standing.release().await;
    }

    /// The Lease is lost: stop the work (bounded by the renew deadline, in case the API
    /// server is unreachable) without releasing it, since it is no longer ours.
    async fn step_down(self) -> Error {
        let lease = self.standing.lease.clone();
        let _ = tokio::time::timeout(self.standing.renew_deadline, self.stop_work()).await;
        Error::LostLease { lease }
    }

    /// Stop the tasks, close the queues and wait for their workers, stop the watches.
    async fn stop_work(&self) {
        self.tasks.stop().await;
        for a in self.plugins.current.get().plugins.values() {
            a.queue.close();
        }
        self.plugins.workers.join().await;
        self.watching.stop().await;
        tracing::info!("host stopped");
    }
}

/// What the endpoints report on.
#[derive(Clone, Copy)]
struct Endpoints<'a> {
    metrics: &'a Arc<Metrics>,
    readiness: &'a Readiness,
    previews: &'a Arc<Previews>,
}

/// Serve the endpoints `config` names until `cancel`.
async fn serve(
    client: &Client,
    config: &ServeConfig,
    on: Endpoints<'_>,
    cancel: &CancellationToken,
) -> Result<(), Error> {
    if let Some(addr) = config.metrics_addr {
        let secure = match &config.metrics_secure {
            Some(source) => Some(http::Secure {
                tls: crate::serve::tls::server_config(source, addr, cancel)?,
                gate: Arc::new(Gate::new(ApiReviewer(client.clone()))),
            }),
            None => None,
        };
        let (metrics, readiness) = (on.metrics.clone(), on.readiness.clone());
        http::serve(
            addr,
            metrics,
            readiness,
            on.previews.clone(),
            secure,
            cancel.clone(),
        )
        .await?;
    }
    if let Some(addr) = config.probe_addr {
        http::serve_probes(addr, on.readiness.clone(), cancel.clone()).await?;
    }
    Ok(())
}

/// What `--metrics-secure` asks of the API server for each request (not blocking: the
/// host works without, its metrics answer 500 until granted).
fn secure_metrics_needs() -> Vec<Need> {
    [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ]
    .into_iter()
    .map(|(group, resource)| Need {
        rule: Rule::new("create", group, resource, None),
        purpose: "the reviews of each request to the metrics endpoint (--metrics-secure)".into(),
        blocking: false,
    })
    .collect()
}

/// Tasks stopped together.
#[derive(Default)]
struct Tasks {
    cancel: CancellationToken,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Tasks {
    /// Start `task`, given the token that stops it.
    fn spawn<F>(&self, task: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(task(self.cancel.clone()));
        lock(&self.handles).push(handle);
    }

    /// Stop every task and wait for it to end.
    async fn stop(&self) {
        self.cancel.cancel();
        let handles = std::mem::take(&mut *lock(&self.handles));
        for h in handles {
            let _ = h.await;
        }
    }
}

/// This replica's standing among replicas: its share of the work, the election's task,
/// and the Lease whose loss ends the run.
struct Standing {
    ownership: Ownership,
    task: Option<JoinHandle<()>>,
    /// `namespace/name` of a single leader's Lease (empty otherwise).
    lease: String,
    /// How long stopping may take once the Lease is lost.
    renew_deadline: Duration,
}

impl Standing {
    /// Stand as `election` says, once the host is ready to serve (plugins loaded, caches
    /// synced), so a replica that cannot serve yet never takes a Lease from one that can.
    async fn stand(
        client: &Client,
        election: &Election,
        readiness: &Readiness,
        access: &Access,
        metrics: &Metrics,
        cancel: &CancellationToken,
    ) -> Result<Standing, Error> {
        let ready = once_ready(readiness.clone());
        match election {
            Election::Alone => Ok(Standing::alone()),
            Election::Leader(lease) => {
                lease.validate()?;
                let name = format!("{}/{}", lease.namespace, lease.lease_name);
                tracing::info!(identity = %lease.identity, lease = %name,
                    "leader election: standing once ready to serve");
                access
                    .require(client, "leader election", lease.needs())
                    .await;
                let (leadership, task) = leader::spawn_when(
                    client.clone(),
                    lease.clone(),
                    ready,
                    metrics.leader_changes.clone(),
                    cancel.clone(),
                );
                Ok(Standing {
                    ownership: Ownership::Leader(leadership),
                    task: Some(task),
                    lease: name,
                    renew_deadline: lease.renew_deadline,
                })
            }
            Election::Shards(sharding) => {
                sharding.validate()?;
                tracing::info!(identity = %sharding.lease.identity, leases = %sharding.describe(),
                    shards = sharding.shards, "sharding: standing for shards once ready to serve");
                access
                    .require(client, "shard Leases", sharding.needs())
                    .await;
                let (set, task) = shards::spawn_when(
                    client.clone(),
                    sharding.clone(),
                    ready,
                    metrics.shards.clone(),
                    cancel.clone(),
                );
                Ok(Standing {
                    ownership: Ownership::Shards(set),
                    task: Some(task),
                    lease: String::new(),
                    renew_deadline: sharding.lease.renew_deadline,
                })
            }
        }
    }

    /// A single replica: everything, always, no Lease.
    fn alone() -> Standing {
        Standing {
            ownership: Ownership::always(),
            task: None,
            lease: String::new(),
            renew_deadline: Duration::ZERO,
        }
    }

    /// Resolves when a single leader loses its Lease; pends forever otherwise (a shard
    /// lost is given up alone).
    async fn lost(&self) {
        match &self.ownership {
            Ownership::Leader(l) => l.lost().await,
            Ownership::Shards(_) => std::future::pending().await,
        }
    }

    /// Wait for the election's task to end (its token cancelled): a leader releases its
    /// Lease, a shard holder its shards.
    async fn release(self) {
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}

/// Resolves once `readiness` says ready.
async fn once_ready(readiness: Readiness) {
    while !readiness.ready() {
        tokio::time::sleep(READY_POLL).await;
    }
}

/// What the host is built from, consumed by [`Parts::assemble`].
struct Parts {
    client: Client,
    config: HostConfig,
    ownership: Ownership,
    metrics: Arc<Metrics>,
    access: Arc<Access>,
    /// What the plugins in dry run and their candidates would do.
    previews: Arc<Previews>,
}

/// The assembled host: its plugin set, its tasks, the watch manager's task, the
/// directory's watch.
type Assembled = (Arc<Plugins>, Tasks, Tasks, Option<DirWatch>);

impl Parts {
    /// Build the watches, the event handlers and the plugin set; load the plugins; start
    /// the watch manager and every task.
    async fn assemble(self) -> Result<Assembled, Error> {
        let (plugins, rx) = self.plugin_set().await?;
        let config = &self.config.plugins;
        // Follow the directory from before the first scan, so no change slips between them.
        let (dir_watch, notifications) = match (config.reload_debounce, &config.dir) {
            (Some(debounce), Some(dir)) => {
                let (w, rx) = dir_watch::watch_dir(dir, config.approvals.as_deref(), debounce)?;
                (Some(w), Some(rx))
            }
            _ => (None, None),
        };
        // Ask for the Plugin objects from the start: they load once their cache syncs.
        plugins.point_watches(&plugins.current.get());
        plugins.load_first().await;
        if let Some(dir) = &config.dir
            && plugins.current.get().plugins.is_empty()
        {
            tracing::warn!(dir = %dir.display(), "no plugins loaded from the plugin directory");
        }
        let watching = Tasks::default();
        let watches = plugins.watches.clone();
        watching.spawn(|cancel| watches.run(cancel));
        let tasks = self.spawn_tasks(&plugins, rx, notifications);
        Ok((plugins, tasks, watching, dir_watch))
    }

    /// The plugin set over new watches and caches, and the channel of the watch events.
    async fn plugin_set(&self) -> Result<(Arc<Plugins>, mpsc::Receiver<WatchSignal>), Error> {
        let discovery = Arc::new(Discovery::new(self.client.clone()));
        let reloader = self.reloader(&discovery).await?;
        let caches = Arc::new(Caches::default());
        let (tx, rx) = mpsc::channel::<WatchSignal>(4096);
        let watches = WatchManager::new(
            self.client.clone(),
            discovery.clone(),
            caches.clone(),
            self.config.watch.clone(),
            tx,
            self.metrics.clone(),
            self.access.clone(),
        );
        if let Some(shards) = self.ownership.shards() {
            watches.shard_caches(shards.clone());
        }
        let current = Current::default();
        let workers = self.workers(&current, &caches, discovery, &watches)?;
        let plugins = Plugins {
            replayer: Arc::new(Replayer::new(
                current.clone(),
                watches.clone(),
                caches.clone(),
                self.ownership.clone(),
                self.config.replicas.tombstone_retention,
            )),
            objects: self.config.plugins.objects.as_ref().map(|o| {
                Arc::new(ObjectsWatch::new(
                    StatusWriter::new(
                        self.client.clone(),
                        self.ownership.clone(),
                        self.previews.clone(),
                    ),
                    watches.clone(),
                    caches,
                    o.watch_grace,
                    o.tenants.is_some(),
                ))
            }),
            writes: Arc::new(self.write_checks(&current)),
            previews: self.previews.clone(),
            reloading: tokio::sync::Mutex::new(()),
            ownership: self.ownership.clone(),
            current,
            reloader,
            watches,
            workers,
        };
        Ok((Arc::new(plugins), rx))
    }

    /// The reloader over the plugin sources: the directory (which must exist), the
    /// Plugin objects (what they need asked of the API server), the approvals.
    async fn reloader(&self, discovery: &Arc<Discovery>) -> Result<Reloader, Error> {
        let config = &self.config.plugins;
        if let Some(dir) = &config.dir
            && !dir.is_dir()
        {
            return Err(Error::Io {
                context: format!("plugin directory {}", dir.display()),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            });
        }
        let objects = config
            .objects
            .clone()
            .map(|o| {
                let metrics = self.metrics.clone();
                ObjectSource::new(self.client.clone(), o, metrics, discovery.clone())
            })
            .transpose()?;
        let loader = match (&config.cache_dir, &config.cache_key_file) {
            (Some(dir), Some(key)) => {
                Loader::with_key_file(PluginEngine::new()?, config.load.clone(), dir, key)?
            }
            (dir, _) => Loader::new(PluginEngine::new()?, config.load.clone(), dir.as_deref())?,
        };
        if let Some(o) = &config.objects {
            let needs = object_needs(o);
            self.access
                .require(&self.client, "plugin objects", needs)
                .await;
        }
        Ok(Reloader::new(
            config.dir.clone(),
            config.approvals.clone(),
            objects,
            loader,
            self.config.events.quarantine,
            self.metrics.clone(),
            self.reviews(discovery),
        ))
    }

    /// The queues' workers and the handler stack they run: the pipeline within the layers.
    fn workers(
        &self,
        current: &Current,
        caches: &Arc<Caches>,
        discovery: Arc<Discovery>,
        watches: &Arc<WatchManager>,
    ) -> Result<Workers, Error> {
        let events = &self.config.events;
        let client = &self.client;
        let pipeline = Pipeline {
            cluster: ApiCluster {
                applier: Arc::new(Applier::with_identity(
                    client.clone(),
                    events.write_identity.clone(),
                )),
                discovery,
                caches: caches.clone(),
            },
            ownership: self.ownership.clone(),
        };
        let recorder = match &events.record {
            Some(r) => Some(Arc::new(Recorder::new(r.clone())?)),
            None => None,
        };
        let stack = layers::stack(
            pipeline,
            self.ownership.clone(),
            self.metrics.clone(),
            recorder,
            self.previews.clone(),
        );
        let warnings = events.event_interval.map(|interval| {
            Arc::new(EventRecorder::new(
                client.clone(),
                self.config.identity.clone(),
                interval,
            ))
        });
        Ok(Workers {
            handlers: Arc::new(Shared {
                current: current.clone(),
                stack,
                caches: caches.clone(),
                warnings,
                ownership: self.ownership.clone(),
                watches: watches.clone(),
            }),
            queue_config: events.queue.clone(),
            caches: caches.clone(),
            sets: Mutex::new(Vec::new()),
        })
    }

    /// Plugins read as their own ServiceAccounts when they write as them: reviews of what
    /// those may read. None when they write as the host.
    fn reviews(&self, discovery: &Arc<Discovery>) -> Option<Arc<AccountReviews>> {
        match &self.config.events.write_identity {
            WriteIdentity::PluginServiceAccounts { namespace } => {
                tracing::info!(namespace = %namespace, "each plugin writes as its ServiceAccount kubewasm-<plugin> (impersonated)");
                Some(Arc::new(AccountReviews::new(
                    self.client.clone(),
                    discovery.clone(),
                    namespace.clone(),
                    self.config.watch.namespaces.clone(),
                )))
            }
            WriteIdentity::Host => None,
        }
    }

    fn write_checks(&self, current: &Current) -> WriteChecks {
        WriteChecks {
            client: self.client.clone(),
            access: self.access.clone(),
            identity: self.config.events.write_identity.clone(),
            cannot_write: Mutex::new(BTreeMap::new()),
            current: current.clone(),
        }
    }

    /// Start every task of the host but the watch manager's.
    fn spawn_tasks(
        &self,
        plugins: &Arc<Plugins>,
        rx: mpsc::Receiver<WatchSignal>,
        notifications: Option<mpsc::Receiver<()>>,
    ) -> Tasks {
        let tasks = Tasks::default();
        let routing = Routing {
            router: Router {
                current: plugins.current.clone(),
                ownership: self.ownership.clone(),
            },
            replayer: plugins.replayer.clone(),
            current: plugins.current.clone(),
            watches: plugins.watches.clone(),
            objects: plugins.objects.clone(),
        };
        tasks.spawn(|cancel| routing.run(rx, cancel));
        let terms = Terms {
            plugins: plugins.clone(),
            metrics: self.metrics.clone(),
        };
        tasks.spawn(|cancel| terms.run(self.ownership.clone(), cancel));
        let writes = plugins.writes.clone();
        tasks.spawn(|cancel| writes.run(cancel));
        let interval = self.config.plugins.access_review_interval;
        let p = plugins.clone();
        tasks.spawn(|cancel| p.review_access(interval, cancel));
        let p = plugins.clone();
        tasks.spawn(|cancel| p.follow_loads(cancel));
        let p = plugins.clone();
        tasks.spawn(|cancel| p.follow_staged(cancel));
        let gauges = Gauges {
            current: plugins.current.clone(),
            caches: plugins.workers.caches.clone(),
            metrics: self.metrics.clone(),
        };
        tasks.spawn(|cancel| gauges.run(cancel));
        if plugins.objects.is_some() {
            let p = plugins.clone();
            tasks.spawn(|cancel| p.write_object_status(cancel));
            let debounce = self
                .config
                .plugins
                .reload_debounce
                .unwrap_or(Duration::from_millis(300));
            let p = plugins.clone();
            tasks.spawn(|cancel| p.follow_objects(debounce, cancel));
        }
        let rescan = self.config.plugins.rescan_interval;
        if notifications.is_some() || rescan.is_some() {
            let p = plugins.clone();
            tasks.spawn(|cancel| p.follow_dir(notifications, rescan, cancel));
        }
        tasks
    }
}

/// What the host needs for Plugin objects beyond their list and watch (the watch
/// manager's, once their kind is served): their status, and the allowed pull secrets.
fn object_needs(o: &ObjectsConfig) -> Vec<Need> {
    let mut needs = vec![Need {
        rule: Rule::new(
            "patch",
            kubewasm_core::plugin_object::GROUP,
            &format!("{}/status", kubewasm_core::plugin_object::PLURAL),
            None,
        ),
        purpose: "writing Plugin objects' status".into(),
        blocking: false,
    }];
    if o.tenants.is_some() {
        needs.push(Need {
            rule: Rule::new(
                "patch",
                kubewasm_core::plugin_object::GROUP,
                &format!("{}/status", kubewasm_core::plugin_object::NAMESPACED_PLURAL),
                None,
            ),
            purpose: "writing NamespacedPlugin objects' status".into(),
            blocking: false,
        });
    }
    // Only the secrets the operator allowed: the host reads no other.
    needs.extend(o.allowed_pull_secrets.iter().map(|name| Need {
        rule: Rule::new("get", "", "secrets", Some(&o.namespace)).named(name),
        purpose: "a pull secret Plugin objects may name (--allowed-pull-secret)".into(),
        blocking: false,
    }));
    needs
}

/// The plugin set, and the one way it changes: a reload, which swaps the next
/// environment into `current` (the one source of truth for what serves and what is
/// loaded), points the watches at it and hands the queues what it takes.
struct Plugins {
    current: Current,
    reloader: Reloader,
    /// One reload at a time: each starts from the environment the last one left.
    reloading: tokio::sync::Mutex<()>,
    watches: Arc<WatchManager>,
    replayer: Arc<Replayer>,
    workers: Workers,
    /// The Plugin objects, when they are a source.
    objects: Option<Arc<ObjectsWatch>>,
    writes: Arc<WriteChecks>,
    previews: Arc<Previews>,
    ownership: Ownership,
}

impl Plugins {
    /// Bring the plugin set in line with its sources: swap in the next environment
    /// (routes resolved), point the watches at it, close the queues of removed plugins,
    /// replay what new and replaced plugins must see. Says which loads it left running.
    async fn reload(&self) -> Loading {
        let _one = self.reloading.lock().await;
        let (objects, listed) = self.objects.as_ref().and_then(|o| o.snapshot()).unzip();
        let mut next = self
            .reloader
            .reconcile(&self.current.get(), |v| self.workers.activate(v), objects)
            .await;
        if let (Some(o), Some(listed)) = (&self.objects, listed)
            && !next.loading.objects
        {
            o.reconciled(listed);
        }
        let changed = next.changed();
        let mut swaps = Swaps::default();
        let env = if changed {
            let settled = |r: &ResourceRef, p: &Projection| self.watches.settled(r, p);
            let env = self.current.update(|before| {
                let mut env = std::mem::take(&mut next.env);
                staging::stage(&mut env, before, &mut next.replays, &settled);
                env.resolve(&self.watches);
                swaps = Swaps::between(before, &env);
                env
            });
            self.point_watches(&env);
            for active in &next.removed {
                active.queue.close();
            }
            self.replayer.replay(&env, &next.replays);
            env
        } else {
            self.current.get()
        };
        next.announce();
        self.reloader
            .took_effect(&env, changed, swaps, next.loading);
        self.previews.set(env.previewing());
        self.writes.check_new(&env).await;
        if let Some(o) = &self.objects
            && next.objects.is_some()
            && self.ownership.is_first()
        {
            o.status_due.notify_one();
        }
        next.loading
    }

    /// Put to work the staged versions whose caches have settled (each replayed as a
    /// replacement is), and say the new environment to whoever follows it.
    async fn promote_staged(&self) {
        // Not amid a reload: its next environment derives from the one before it.
        let _one = self.reloading.lock().await;
        let settled = |r: &ResourceRef, p: &Projection| self.watches.settled(r, p);
        let mut promoted = Vec::new();
        let mut swaps = Swaps::default();
        let env = self
            .current
            .update(|env| match staging::promote(env, &settled) {
                Some((mut next, names)) => {
                    next.resolve(&self.watches);
                    promoted = names;
                    swaps = Swaps::between(env, &next);
                    next
                }
                None => env.clone(),
            });
        if promoted.is_empty() {
            return;
        }
        self.point_watches(&env);
        let replays: Vec<Replay> = promoted.into_iter().map(Replay::Replaced).collect();
        self.replayer.replay(&env, &replays);
        self.reloader
            .took_effect(&env, true, swaps, Loading::default());
        self.previews.set(env.previewing());
        // The Plugin objects' status says which version serves: the promoted one now.
        if let Some(o) = &self.objects
            && self.ownership.is_first()
        {
            o.status_due.notify_one();
        }
    }

    /// Where each Plugin object stands, with what its plugin waits for (kinds not served
    /// yet, as the watch manager has looked them up).
    fn object_states(&self) -> BTreeMap<String, ObjectState> {
        let env = self.current.get();
        let mut states = self.reloader.object_states();
        for (name, state) in &mut states {
            let Some(a) = env.plugins.get(name) else {
                continue;
            };
            state.waiting_for = a
                .plugin()
                .manifest
                .read_resources()
                .filter(|r| self.watches.resolved(r).is_none())
                .map(ToString::to_string)
                .collect();
        }
        states
    }

    /// Task: promote staged versions as resources settle.
    async fn follow_staged(self: Arc<Self>, cancel: CancellationToken) {
        let mut settling = self.watches.settling();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = settling.changed() => if changed.is_err() { break },
            }
            self.promote_staged().await;
            // A kind served or found not served changes what Plugins wait for.
            if let Some(o) = &self.objects
                && self.ownership.is_first()
            {
                o.status_due.notify_one();
            }
        }
    }

    /// The first reload: the directory's files load (in parallel) before the host starts,
    /// so it starts with its plugins.
    async fn load_first(&self) {
        while self.reload().await.files {
            self.reloader.load_finished().await;
        }
    }

    /// Point the watch manager at what `env` needs: which targets, and which of them are
    /// read whole (with shards, the others are cached by shard).
    fn point_watches(&self, env: &Environment) {
        let kinds = self.objects.as_ref().map(|o| o.kinds()).unwrap_or_default();
        let mut whole = env.read_whole();
        whole.extend(kinds.iter().cloned());
        self.watches.set_whole(whole);
        self.watches.set_projections(env.projections());
        let mut tenant_scopes = env.tenant_scopes();
        // The host's own watches of the Plugin and NamespacedPlugin objects are
        // cluster-wide.
        for kind in &kinds {
            tenant_scopes.remove(kind);
        }
        self.watches.set_tenant_scopes(tenant_scopes);
        self.watches.set_desired(desired(env, &kinds));
    }

    /// Plugins at work, read from the environment serving; rejected sources and reloads
    /// from the reloader.
    fn status(&self) -> PluginStatus {
        self.reloader.status(&self.current.get())
    }

    /// Where the host stands, for `/readyz` and `/status`.
    fn readiness(&self) -> ReadinessReport {
        let watches = self.watches.readiness();
        let missing = self.writes.access.missing();
        let cannot_write = self.writes.cannot_write();
        let env = self.current.get();
        let plugins = env
            .plugins
            .values()
            .map(|a| {
                let mut report = plugin_report(a, &self.watches, &watches, &missing);
                report.not_ready = cannot_write.get(&report.name).cloned().flatten();
                report
            })
            .collect();
        let status = self.reloader.status(&env);
        // Plugin objects block readiness once their kind is served, until a reconcile of
        // their synced cache; NamespacedPlugins too.
        let objects_loaded = self.objects.as_ref().is_none_or(|o| o.loaded_once());
        ReadinessReport {
            plugins_loaded: self.reloader.loaded_once() && objects_loaded,
            watches,
            plugins,
            rejected: status.rejected.into_iter().collect(),
            missing_reads: status.missing_reads.into_iter().collect(),
            missing,
            shards: self.ownership.shards().map(shards_report),
        }
    }

    /// A new term of the one-of-a-kind work: the Plugin objects' status is this replica's
    /// to write, all of it again.
    async fn write_status_anew(&self) {
        if let Some(o) = &self.objects {
            o.writer.forget();
            o.writer.write(&self.object_states()).await;
        }
    }

    /// Task: every `interval`, ask again whether each plugin's account may read what it is
    /// approved to read, and reconcile: a plugin that lost a rule is unloaded, one refused
    /// for a missing rule loads once it is granted.
    async fn review_access(self: Arc<Self>, interval: Duration, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
            self.reloader.review_access_again().await;
            self.reload().await;
        }
    }

    /// Task: reconcile when a plugin's load ends, so its result takes effect.
    async fn follow_loads(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.reloader.load_finished() => {}
            }
            self.reload().await;
        }
    }

    /// Task: reconcile the plugin directory on each notification and every rescan interval.
    async fn follow_dir(
        self: Arc<Self>,
        mut notifications: Option<mpsc::Receiver<()>>,
        rescan: Option<Duration>,
        cancel: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                n = async {
                    match notifications.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => if n.is_none() { break },
                _ = async {
                    match rescan {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                } => self.reloader.rescan(),
            }
            self.reload().await;
        }
    }

    /// Task: write the Plugin objects' status as the last reconcile left it, after each
    /// reconcile of them (a burst of reconciles makes one write of the latest states), and
    /// every [`PREVIEW_STATUS_INTERVAL`] while a plugin previews (its `status.preview`).
    async fn write_object_status(self: Arc<Self>, cancel: CancellationToken) {
        let Some(objects) = &self.objects else {
            return;
        };
        loop {
            // Whether a plugin previews changes only at a reload, which wakes this loop.
            let previewing = self.previews.any();
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = status_due(&objects.status_due, previewing) => {}
            }
            if self.ownership.is_first() {
                objects.writer.write(&self.object_states()).await;
            }
        }
    }

    /// Task: reconcile after Plugin objects change (debounced: a burst of changes, or the
    /// status writes of one reconcile, make one reconcile), once their cache is synced.
    async fn follow_objects(self: Arc<Self>, debounce: Duration, cancel: CancellationToken) {
        let Some(objects) = self.objects.clone() else {
            return;
        };
        loop {
            let retry = self.reloader.next_retry();
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = objects.changed.notified() => {}
                // The Plugin watch failed past its grace, or works again.
                _ = objects.until_turned() => {}
                // A failed pull's retry is due.
                _ = async {
                    match retry {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(debounce) => {}
            }
            // The first list's events arrive before its cache is marked synced.
            let mut waited = Duration::ZERO;
            while objects.snapshot().is_none() && waited < Duration::from_secs(30) {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => waited += Duration::from_millis(50),
                }
            }
            self.reload().await;
        }
    }
}

/// Resolves when the Plugin objects' status is to be written: after a reconcile of them
/// (`reconciled`), and, while a plugin previews, every [`PREVIEW_STATUS_INTERVAL`].
async fn status_due(reconciled: &Notify, previewing: bool) {
    tokio::select! {
        _ = reconciled.notified() => {}
        _ = tokio::time::sleep(PREVIEW_STATUS_INTERVAL), if previewing => {}
    }
}

/// What the watch manager must serve for `env`: its plugins' watches and reads, and the
/// kinds of plugin objects that are a source (`ObjectsWatch::kinds`), every object.
fn desired(env: &Environment, objects: &[ResourceRef]) -> BTreeMap<ResourceRef, Demand> {
    let mut desired = env.desired();
    for kind in objects {
        desired.insert(kind.clone(), None);
    }
    desired
}

/// Which kinds of plugin objects: served, listed from a synced cache, or reconciled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Listed {
    /// Plugins.
    plugins: bool,
    /// NamespacedPlugins.
    tenants: bool,
}

/// Whether the plugin objects count as loaded for readiness: each kind of them that is
/// `served` reconciled once from a synced cache, with no load running at its end.
fn objects_loaded(served: Listed, reconciled: Listed) -> bool {
    (!served.plugins || reconciled.plugins) && (!served.tenants || reconciled.tenants)
}

/// The shards of this replica, in `/status`.
fn shards_report(s: &ShardSet) -> crate::serve::http::ShardsReport {
    crate::serve::http::ShardsReport {
        total: s.total(),
        held: s.held().into_iter().collect(),
        members: s.members(),
        identity: s.identity().to_string(),
    }
}

/// Where one plugin stands: its watched and read resources, and the objects its queue
/// parked after permanent failures.
fn plugin_report(
    a: &Active,
    watches: &WatchManager,
    readiness: &WatchReadiness,
    missing: &[Missing],
) -> PluginReport {
    let plugin = a.plugin();
    let mut report = PluginReport {
        name: plugin.name().to_string(),
        version: plugin.manifest.version.clone(),
        ..Default::default()
    };
    for r in plugin.manifest.read_resources() {
        let spelled = r.to_string();
        if readiness.unserved.contains(&spelled) || watches.resolved(r).is_none() {
            report.waiting_for.push(spelled);
        } else if readiness.syncing.contains(&spelled) {
            report.syncing.push(spelled);
        }
        if let Some(k) = watches.resolved(r) {
            for m in missing
                .iter()
                .filter(|m| m.group == k.group && m.plural == k.plural)
            {
                if !report.forbidden.contains(&m.rule) {
                    report.forbidden.push(m.rule.clone());
                }
            }
        }
    }
    report.blocked = a
        .queue
        .blocked()
        .into_iter()
        .map(|b| BlockedObject {
            resource: b.resource,
            object: b.object,
            reason: b.reason,
            message: b.message,
            since: k8s_openapi::jiff::Timestamp::try_from(b.since)
                .map(|t| t.to_string())
                .unwrap_or_default(),
        })
        .collect();
    report
}

/// The queues of the plugins at work and the workers running their handler.
struct Workers {
    handlers: Arc<Shared>,
    queue_config: QueueConfig,
    caches: Arc<Caches>,
    /// Queue workers of every plugin started, joined at shutdown.
    sets: Mutex<Vec<JoinSet<()>>>,
}

impl Workers {
    /// Put a new plugin to work: its queue, and workers running its handler.
    fn activate(&self, version: Arc<Version>) -> Active {
        let name = version.plugin.name().to_string();
        let queue = Queue::new(name.clone(), self.queue_config.clone(), self.caches.clone());
        let handler = Arc::new(PluginHandler {
            name,
            shared: self.handlers.clone(),
        });
        lock(&self.sets).push(queue.spawn(handler));
        Active::new(version, queue)
    }

    /// Wait for every worker to end (their queues closed).
    async fn join(&self) {
        let sets = std::mem::take(&mut *lock(&self.sets));
        for mut set in sets {
            while set.join_next().await.is_some() {}
        }
    }
}

/// The Plugin objects as a source: their cache (the watch manager's), how long its watch
/// may fail, and their status.
struct ObjectsWatch {
    watches: Arc<WatchManager>,
    caches: Arc<Caches>,
    /// How long the watch of Plugin objects may fail before their plugins are unloaded.
    grace: Duration,
    /// NamespacedPlugins are followed too (`--tenant-registry`).
    tenants: bool,
    /// Their plugins are unloaded for their watch failing past the grace.
    tenants_withheld: AtomicBool,
    /// Their plugins are unloaded for that: the watch has failed past the grace.
    withheld: AtomicBool,
    /// A Plugin object changed, or their kind became served.
    changed: Notify,
    /// A reconcile of the Plugin objects ended: their status is to be written (by its own
    /// task, so a slow status write never holds back the next reconcile).
    status_due: Notify,
    /// Writes their status when this replica does the one-of-a-kind work.
    writer: StatusWriter,
    /// The kinds reconciled once from a synced cache with no load left running.
    reconciled: Mutex<Listed>,
}

impl ObjectsWatch {
    fn new(
        writer: StatusWriter,
        watches: Arc<WatchManager>,
        caches: Arc<Caches>,
        grace: Duration,
        tenants: bool,
    ) -> Self {
        ObjectsWatch {
            watches,
            caches,
            grace,
            tenants,
            tenants_withheld: AtomicBool::new(false),
            withheld: AtomicBool::new(false),
            changed: Notify::new(),
            status_due: Notify::new(),
            writer,
            reconciled: Mutex::new(Listed::default()),
        }
    }

    /// A reconcile of what a snapshot `listed` ended with no load running.
    fn reconciled(&self, listed: Listed) {
        let mut r = lock(&self.reconciled);
        r.plugins |= listed.plugins;
        r.tenants |= listed.tenants;
    }

    /// Whether every kind of plugin objects served was reconciled once (readiness).
    fn loaded_once(&self) -> bool {
        let served = Listed {
            plugins: self.watches.resolved(&plugin_kind()).is_some(),
            tenants: self.tenants && self.watches.resolved(&namespaced_plugin_kind()).is_some(),
        };
        objects_loaded(served, *lock(&self.reconciled))
    }

    /// The Plugin objects, once their cache is synced (a partial list would unload the
    /// plugins not listed yet); none at all while their watch has failed for longer than
    /// the grace, so that a Plugin deleted or narrowed while the host cannot see it (its
    /// RBAC revoked, the API server unreachable) does not keep serving. With the kinds it
    /// listed.
    fn snapshot(&self) -> Option<(Vec<Arc<CachedObject>>, Listed)> {
        let resolved = self.watches.resolved(&plugin_kind())?;
        let cache = self.caches.get(&resolved.type_ref())?;
        if !cache.is_synced() {
            return None;
        }
        let failing = cache.failing_for();
        if past_grace(failing, self.grace) {
            if !self.withheld.swap(true, Ordering::SeqCst) {
                tracing::error!(
                    failing_for_s = failing.unwrap_or_default().as_secs(),
                    grace_s = self.grace.as_secs(),
                    "the watch of Plugin objects has been failing for longer than --plugin-watch-grace: the plugins of Plugin objects are unloaded until it works again (a Plugin deleted or narrowed meanwhile must not keep serving)"
                );
            }
            let all = Listed {
                plugins: true,
                tenants: true,
            };
            return Some((Vec::new(), all));
        }
        if self.withheld.swap(false, Ordering::SeqCst) {
            tracing::info!("the watch of Plugin objects works again: their plugins load again");
        }
        let mut objects = cache.snapshot();
        let (namespaced, tenants) = self.namespaced()?;
        objects.extend(namespaced);
        Some((
            objects,
            Listed {
                plugins: true,
                tenants,
            },
        ))
    }

    /// The kinds of plugin objects followed: Plugin, and NamespacedPlugin with tenants.
    fn kinds(&self) -> Vec<ResourceRef> {
        let mut kinds = vec![plugin_kind()];
        if self.tenants {
            kinds.push(namespaced_plugin_kind());
        }
        kinds
    }

    /// The NamespacedPlugins, once their cache is synced (None: not yet), and whether
    /// they were listed; none, unlisted, while tenants are off or their kind is not served
    /// (its CRD not installed).
    fn namespaced(&self) -> Option<(Vec<Arc<CachedObject>>, bool)> {
        if !self.tenants {
            return Some((Vec::new(), false));
        }
        let Some(resolved) = self.watches.resolved(&namespaced_plugin_kind()) else {
            return Some((Vec::new(), false));
        };
        let cache = self.caches.get(&resolved.type_ref())?;
        if !cache.is_synced() {
            return None;
        }
        // What the host cannot see must not keep serving, as for Plugins.
        let past = past_grace(cache.failing_for(), self.grace);
        if past != self.tenants_withheld.swap(past, Ordering::SeqCst) {
            tracing::warn!(
                withheld = past,
                "the watch of NamespacedPlugins crossed --plugin-watch-grace: their plugins are unloaded while it fails, loaded again once it works"
            );
        }
        if past {
            return Some((Vec::new(), true));
        }
        Some((cache.snapshot(), true))
    }

    /// Resolves once the Plugin watch crossed its grace either way since the last
    /// reconcile: failing past it with the objects' plugins still loaded, or working again
    /// with them withheld. A failure or a recovery sends no event (a relist that finds
    /// nothing changed sends none), so this is polled.
    async fn until_turned(&self) {
        loop {
            tokio::time::sleep(PLUGIN_WATCH_POLL).await;
            let failing = self
                .watches
                .resolved(&plugin_kind())
                .and_then(|r| self.caches.get(&r.type_ref()))
                .and_then(|c| c.failing_for());
            if past_grace(failing, self.grace) != self.withheld.load(Ordering::SeqCst) {
                return;
            }
            if self.tenants {
                let failing = self
                    .watches
                    .resolved(&namespaced_plugin_kind())
                    .and_then(|r| self.caches.get(&r.type_ref()))
                    .and_then(|c| c.failing_for());
                if past_grace(failing, self.grace) != self.tenants_withheld.load(Ordering::SeqCst) {
                    return;
                }
            }
        }
    }

    /// Whether a watch event is about a Plugin object.
    fn is_plugin_object(resource: &ResourceKey) -> bool {
        use kubewasm_core::plugin_object::{GROUP, NAMESPACED_PLURAL, PLURAL};
        resource.group == GROUP
            && (resource.plural == PLURAL || resource.plural == NAMESPACED_PLURAL)
    }
}

/// Whether a watch failing for `failing` (None: working) is past `grace`.
fn past_grace(failing: Option<Duration>, grace: Duration) -> bool {
    failing.is_some_and(|f| f >= grace)
}

/// Whether the host may write as each plugin at work (asked once per plugin, again while
/// it may not), and its own permissions found missing (asked again now and then).
struct WriteChecks {
    client: Client,
    access: Arc<Access>,
    identity: WriteIdentity,
    /// Per plugin at work, whether the host may write as it: None, or the one line
    /// saying why not (`apply::identity::check_impersonation`).
    cannot_write: Mutex<BTreeMap<String, Option<String>>>,
    current: Current,
}

impl WriteChecks {
    /// Per plugin at work, why the host may not write as it (None: it may).
    fn cannot_write(&self) -> BTreeMap<String, Option<String>> {
        lock(&self.cannot_write).clone()
    }

    /// Ask, once per plugin new to `env`, whether the host may write as it; a plugin it
    /// may not is reported not ready, in one line.
    async fn check_new(&self, env: &Environment) {
        let new: Vec<Arc<CompiledPlugin>> = {
            let mut known = lock(&self.cannot_write);
            known.retain(|name, _| env.plugins.contains_key(name));
            env.plugins
                .iter()
                .filter(|(name, _)| !known.contains_key(*name))
                .map(|(_, a)| a.plugin().clone())
                .collect()
        };
        for plugin in new {
            let verdict = self.check(&plugin).await.err();
            if let Some(why) = &verdict {
                tracing::error!(plugin = %plugin.name(), error = %why, "plugin not ready: the host cannot write as it");
            }
            lock(&self.cannot_write).insert(plugin.name().to_string(), verdict);
        }
    }

    async fn check(&self, plugin: &CompiledPlugin) -> Result<(), String> {
        crate::apply::identity::check_impersonation(&self.client, &self.identity, &plugin.manifest)
            .await
    }

    /// Ask again what was found missing: the host's own rules, and each plugin the host
    /// could not impersonate.
    async fn recheck(&self) {
        if self.access.any_denied() {
            self.access.recheck(&self.client).await;
        }
        let denied: Vec<String> = lock(&self.cannot_write)
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        let env = self.current.get();
        for name in denied {
            let Some(active) = env.plugins.get(&name) else {
                continue;
            };
            if self.check(active.plugin()).await.is_ok() {
                tracing::info!(plugin = %name, "the host may now write as the plugin; it is ready");
                lock(&self.cannot_write).insert(name, None);
            }
        }
    }

    /// Task: ask again, now and then, about the permissions found missing.
    async fn run(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(RECHECK_PERMISSIONS) => {}
            }
            self.recheck().await;
        }
    }
}

/// Watch events into the queues of the plugins that select them.
struct Routing {
    router: Router,
    replayer: Arc<Replayer>,
    current: Current,
    watches: Arc<WatchManager>,
    objects: Option<Arc<ObjectsWatch>>,
}

impl Routing {
    /// Task: every watch event into the queues of the plugins that select it.
    async fn run(self, mut rx: mpsc::Receiver<WatchSignal>, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                signal = rx.recv() => match signal {
                    Some(WatchSignal::Event(ev)) => {
                        if let Some(objects) = &self.objects
                            && ObjectsWatch::is_plugin_object(&ev.resource)
                        {
                            tracing::debug!(object = %ev.object.describe(), event = %ev.event_type,
                                resource_version = ev.object.resource_version().unwrap_or_default(),
                                "Plugin object changed");
                            objects.changed.notify_one();
                        }
                        self.replayer.observe(&ev);
                        self.router.route(&ev);
                    }
                    Some(WatchSignal::Resolved(target)) => self.resolved(&target),
                    None => break,
                },
            }
        }
    }

    /// A watch target now resolves: route it, and replay it to plugins that waited.
    fn resolved(&self, target: &ResourceRef) {
        if (*target == plugin_kind() || *target == namespaced_plugin_kind())
            && let Some(objects) = &self.objects
        {
            objects.changed.notify_one();
        }
        self.current.update(|env| {
            let mut env = env.clone();
            env.resolve(&self.watches);
            env
        });
        self.replayer.resolved(target);
    }
}

/// A new term: on becoming leader, replay every cached object to every plugin; on gaining
/// shards, replay theirs. The leader, or the holder of shard 0, writes the Plugin
/// objects' status anew.
struct Terms {
    plugins: Arc<Plugins>,
    metrics: Arc<Metrics>,
}

impl Terms {
    /// Task: follow this replica's terms.
    async fn run(self, ownership: Ownership, cancel: CancellationToken) {
        match ownership {
            Ownership::Leader(l) => self.follow_leadership(l, cancel).await,
            Ownership::Shards(s) => self.follow_shards(s, cancel).await,
        }
    }

    async fn follow_leadership(self, leadership: Leadership, cancel: CancellationToken) {
        let mut rx = leadership.subscribe();
        let mut was = *rx.borrow_and_update();
        self.metrics.leader.set(i64::from(was));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = rx.changed() => if changed.is_err() { break },
            }
            let now = *rx.borrow_and_update();
            self.metrics.leader.set(i64::from(now));
            if now && !was {
                tracing::info!("leading: re-delivering every cached object to every plugin");
                self.plugins.replayer.lead();
                self.plugins.write_status_anew().await;
            }
            was = now;
        }
    }

    /// On gaining shards, deliver their tombstones and replay their cached objects.
    async fn follow_shards(self, shards: ShardSet, cancel: CancellationToken) {
        let mut rx = shards.subscribe();
        let mut was = rx.borrow_and_update().clone();
        self.metrics.leader.set(i64::from(!was.is_empty()));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = rx.changed() => if changed.is_err() { break },
            }
            let now = rx.borrow_and_update().clone();
            self.metrics.leader.set(i64::from(!now.is_empty()));
            let gained = gained(&was, &now);
            if !gained.is_empty() {
                tracing::debug!(shards = ?gained, "shards gained: delivering their deletions, replaying their objects");
                self.plugins.replayer.gain(&gained);
                if gained.contains(&0) {
                    self.plugins.write_status_anew().await;
                }
            }
            was = now;
        }
    }
}

/// The shards held `now` that were not held before.
fn gained(was: &BTreeSet<u32>, now: &BTreeSet<u32>) -> BTreeSet<u32> {
    now.difference(was).copied().collect()
}

/// Each plugin's queue depth and parked objects, and each cache's size.
struct Gauges {
    current: Current,
    caches: Arc<Caches>,
    metrics: Arc<Metrics>,
}

impl Gauges {
    /// Task: publish them once a second.
    async fn run(self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            self.publish();
        }
    }

    fn publish(&self) {
        for (name, active) in &self.current.get().plugins {
            let label = PluginLabel {
                plugin: name.clone(),
            };
            let m = &self.metrics;
            m.queue_depth
                .get_or_create(&label)
                .set(active.queue.depth() as i64);
            m.blocked
                .get_or_create(&label)
                .set(active.queue.blocked().len() as i64);
        }
        for cache in self.caches.all() {
            self.metrics
                .cached_objects
                .get_or_create(&ResourceLabel {
                    resource: cache.resource.to_string(),
                })
                .set(cache.len() as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_is_withheld_only_once_failing_for_the_whole_grace() {
        let grace = Duration::from_secs(120);
        assert!(!past_grace(None, grace), "a working watch");
        assert!(!past_grace(Some(Duration::from_secs(119)), grace));
        assert!(past_grace(Some(grace), grace), "at the grace");
        assert!(past_grace(Some(Duration::from_secs(600)), grace));
        assert!(
            !past_grace(Some(Duration::from_secs(3600)), Duration::MAX),
            "no grace given: never withheld"
        );
    }

    #[test]
    fn readiness_waits_for_each_kind_of_plugin_objects_only_once_it_is_served() {
        let kinds = |plugins, tenants| Listed { plugins, tenants };
        // No kind served (no CRD): nothing to wait for.
        assert!(objects_loaded(kinds(false, false), kinds(false, false)));
        // Served: until a reconcile of their synced cache.
        assert!(!objects_loaded(kinds(true, false), kinds(false, false)));
        assert!(objects_loaded(kinds(true, false), kinds(true, false)));
        // NamespacedPlugins served too (tenants on): Plugins alone are not enough.
        assert!(!objects_loaded(kinds(true, true), kinds(true, false)));
        assert!(!objects_loaded(kinds(false, true), kinds(false, false)));
        assert!(objects_loaded(kinds(true, true), kinds(true, true)));
    }

    #[test]
    fn only_shards_newly_held_are_replayed() {
        let set = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(gained(&set(&[]), &set(&[0, 3])), set(&[0, 3]));
        assert_eq!(gained(&set(&[0, 3]), &set(&[3, 5])), set(&[5]));
        assert!(gained(&set(&[1, 2]), &set(&[1])).is_empty(), "lost only");
        assert!(gained(&set(&[1]), &set(&[1])).is_empty());
    }

    #[test]
    fn the_plugin_kind_is_watched_only_when_plugin_objects_are_a_source() {
        let env = Environment::default();
        assert!(desired(&env, &[]).is_empty());
        let with = desired(&env, &[plugin_kind()]);
        assert_eq!(with.len(), 1);
        assert_eq!(
            with.get(&plugin_kind()),
            Some(&None),
            "every Plugin object, no label selector"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn status_is_due_after_a_reconcile_and_periodically_only_while_previewing() {
        use tokio::time::{Instant, timeout};
        let reconciled = Notify::new();
        let long = PREVIEW_STATUS_INTERVAL * 10;
        assert!(
            timeout(long, status_due(&reconciled, false)).await.is_err(),
            "due with no reconcile and nothing previewing"
        );
        reconciled.notify_one();
        assert!(
            timeout(Duration::from_millis(1), status_due(&reconciled, false))
                .await
                .is_ok()
        );
        let start = Instant::now();
        assert!(timeout(long, status_due(&reconciled, true)).await.is_ok());
        assert_eq!(start.elapsed(), PREVIEW_STATUS_INTERVAL);
    }

    #[test]
    fn plugin_objects_are_told_by_group_and_plural() {
        let key = |group: &str, plural: &str| ResourceKey {
            group: group.into(),
            version: kubewasm_core::plugin_object::VERSION.into(),
            plural: plural.into(),
        };
        assert!(ObjectsWatch::is_plugin_object(&key(
            kubewasm_core::plugin_object::GROUP,
            kubewasm_core::plugin_object::PLURAL
        )));
        assert!(!ObjectsWatch::is_plugin_object(&key(
            "",
            kubewasm_core::plugin_object::PLURAL
        )));
        assert!(!ObjectsWatch::is_plugin_object(&key(
            kubewasm_core::plugin_object::GROUP,
            "configmaps"
        )));
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_replica_never_loses_a_lease() {
        let standing = Standing::alone();
        // A paused clock: the timeout fires only once nothing else can run.
        let lost = tokio::time::timeout(Duration::from_secs(3600), standing.lost()).await;
        assert!(lost.is_err(), "lost() pends forever alone");
        standing.release().await;
    }

    #[tokio::test]
    async fn tasks_stop_together() {
        let tasks = Tasks::default();
        let ended = Arc::new(AtomicBool::new(false));
        let e = ended.clone();
        tasks.spawn(|cancel| async move {
            cancel.cancelled().await;
            e.store(true, Ordering::SeqCst);
        });
        tasks.stop().await;
        assert!(
            ended.load(Ordering::SeqCst),
            "stop waits for the task to end"
        );
        assert!(lock(&tasks.handles).is_empty());
    }
}
