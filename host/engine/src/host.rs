//! The host, as controller-runtime's Manager: it owns every part and wires them together
//! — `watch` → `event::route` → `event::queue` → `event::handler` (the layers around the
//! pipeline: call → admit → apply) — with the reloader (`plugins`) that keeps the plugin set
//! in line with its sources, the plugin directory and the Plugin objects.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kubewasm_runtime::{LoadOptions, Loader, PluginEngine};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::apply::Applier;
use crate::apply::events::EventRecorder;
use crate::event::handler::{PluginHandler, Shared};
use crate::event::layers;
use crate::event::pipeline::Pipeline;
use crate::event::route::Router;
use crate::event::{QuarantinePolicy, Queue, QueueConfig};
pub use crate::plugins::environment::PluginStatus;
use crate::plugins::environment::{Active, Current, Version};
pub use crate::plugins::objects::ObjectsConfig;
use crate::plugins::objects::{ObjectSource, StatusWriter, plugin_kind};
use crate::plugins::reload::Reloader;
use crate::plugins::replay::Replayer;
use crate::plugins::{dir_watch, environment, reload};
use crate::replicas::ownership::Ownership;
use crate::serve::access::{Access, Missing, Need, Rule};
use crate::serve::http::{BlockedObject, PluginReport, ReadinessReport};
use crate::serve::metrics::{Metrics, PluginLabel};
use crate::watch::cache::Caches;
use crate::watch::discovery::Discovery;
use crate::watch::{WatchConfig, WatchManager, WatchSignal};
use kubewasm_core::sync::lock;

/// Everything `kubewasm run` is configured with.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Directory holding `NAME.wasm` (+ settings) files; None: Plugin objects only.
    pub plugins_dir: Option<PathBuf>,
    /// Follow Plugin objects (`plugins.kubewasm.dev`), pulling their modules as this
    /// says; None: the plugin directory only.
    pub objects: Option<ObjectsConfig>,
    /// The operator's approvals of the directory's plugins: a YAML stream or a directory
    /// of `Plugin` objects (`kubewasm_runtime::approval`), re-read on every reload and
    /// followed like the plugin directory; None: nothing is approved.
    pub approvals: Option<PathBuf>,
    /// Plugin loading and limits.
    pub load: LoadOptions,
    /// Watch settings.
    pub watch: WatchConfig,
    /// Queue settings.
    pub queue: QueueConfig,
    /// On-disk compiled-code cache; None keeps compiled code in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Quiet period after a change in the plugin directory before reloading; None: no
    /// hot reload.
    pub reload_debounce: Option<Duration>,
    /// Rescan the plugin directory this often even without change notifications
    /// (network filesystems); None: only on notifications.
    pub rescan_interval: Option<Duration>,
    /// When failing plugins are quarantined.
    pub quarantine: QuarantinePolicy,
    /// Which objects this replica handles: all while it leads ([`Ownership::always`] for
    /// one replica), or those of the shards it holds.
    pub ownership: Ownership,
    /// Record Kubernetes Events on objects whose events fail, at most one per object and
    /// reason per interval (None: do not).
    pub event_interval: Option<Duration>,
    /// This replica's name in Events and the Lease (e.g. the pod name).
    pub identity: String,
    /// Write every handled event as a `kubewasm test` case (`--record DIR`); None: do not.
    pub record: Option<crate::cases::record::RecordConfig>,
    /// Whose identity each plugin's writes are sent with (its impersonated ServiceAccount,
    /// or the host's own).
    pub write_identity: crate::apply::WriteIdentity,
    /// How long a follower remembers deletions, to deliver them as `deleted` when it
    /// becomes leader; at least the lease duration (a handover takes that long at most).
    pub tombstone_retention: Duration,
    /// The host's own permissions: what it needs is asked of the API server before use
    /// and reported when missing (`/readyz?verbose`, `/status`). Shared with the caller,
    /// which adds what it needs itself (the Lease).
    pub access: Arc<Access>,
    /// How often each plugin's ServiceAccount is asked again whether it may read what
    /// its approval lets it read (`apply::identity::AccountReviews`; with impersonation
    /// only). A plugin that lost a rule is unloaded; one refused for it loads once granted.
    pub access_review_interval: Duration,
}

/// How often permissions found missing (the host's own, impersonating a plugin's
/// account) are asked again, so a fix to RBAC is noticed without a restart.
const RECHECK_PERMISSIONS: Duration = Duration::from_secs(10);

/// How often the health of the Plugin watch is looked at (see
/// [`HostConfig::objects`]'s grace): a few atomic reads.
const PLUGIN_WATCH_POLL: Duration = Duration::from_secs(1);

/// A running host. Build with [`Host::start`], stop with [`Host::shutdown`].
pub struct Host {
    parts: Arc<Parts>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    manager_task: JoinHandle<()>,
    manager_cancel: CancellationToken,
    _dir_watch: Option<dir_watch::DirWatch>,
}

/// What the host owns, shared with its tasks.
struct Parts {
    /// The plugins at work: the one source of truth for which version serves.
    current: Current,
    watches: Arc<WatchManager>,
    router: Router,
    replayer: Replayer,
    reloader: Reloader,
    /// One reload at a time: each starts from the environment the last one left.
    reloading: tokio::sync::Mutex<()>,
    handlers: Arc<Shared>,
    queue_config: QueueConfig,
    caches: Arc<Caches>,
    /// Queue workers of every plugin started, joined at shutdown.
    workers: Mutex<Vec<JoinSet<()>>>,
    /// Writes Plugin objects' status when this replica leads (None: no objects).
    status_writer: Option<StatusWriter>,
    /// A reconcile of the Plugin objects ended: their status is to be written (by its own
    /// task, so a slow status write never holds back the next reconcile).
    status_due: tokio::sync::Notify,
    ownership: Ownership,
    /// A Plugin object changed, or their kind became served.
    objects_changed: tokio::sync::Notify,
    /// How long the watch of Plugin objects may fail before their plugins are unloaded.
    plugin_watch_grace: Duration,
    /// Their plugins are unloaded for that: the watch has failed past the grace.
    objects_withheld: std::sync::atomic::AtomicBool,
    client: Client,
    access: Arc<Access>,
    write_identity: crate::apply::WriteIdentity,
    /// Per plugin at work, whether the host may write as it: None, or the one line
    /// saying why not (`apply::identity::check_impersonation`), asked once per plugin.
    cannot_write: Mutex<std::collections::BTreeMap<String, Option<String>>>,
}

impl Parts {
    /// Put a new plugin to work: its queue, and workers running its handler.
    fn activate(&self, version: Arc<Version>) -> Active {
        let name = version.plugin.name().to_string();
        let queue = Queue::new(name.clone(), self.queue_config.clone(), self.caches.clone());
        let handler = Arc::new(PluginHandler {
            name,
            shared: self.handlers.clone(),
        });
        lock(&self.workers).push(queue.spawn(handler));
        Active::new(version, queue)
    }

    /// Bring the plugin set in line with the plugin directory: swap in the next
    /// environment (routes resolved), point the watches at it, close the queues of
    /// removed plugins, replay what new and replaced plugins must see. Says which loads
    /// it left running.
    async fn reload(&self) -> reload::Loading {
        let _one = self.reloading.lock().await;
        let mut next = self
            .reloader
            .reconcile(
                &self.current.get(),
                |v| self.activate(v),
                self.plugin_objects(),
            )
            .await;
        let changed = next.changed();
        let env = if changed {
            let env = self.current.update(|_| {
                let mut env = std::mem::take(&mut next.env);
                env.resolve(&self.watches);
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
        self.reloader.took_effect(&env, changed, next.loading);
        self.check_impersonation(&env).await;
        if self.status_writer.is_some() && next.objects.is_some() && self.ownership.is_first() {
            self.status_due.notify_one();
        }
        next.loading
    }

    /// The first reload: the directory's files load (in parallel, [`compiles`]) before the
    /// host starts, so it starts with its plugins.
    async fn load_first(&self) {
        while self.reload().await.files {
            self.reloader.load_finished().await;
        }
    }

    /// Ask, once per plugin new to `env`, whether the host may write as it; a plugin it
    /// may not is reported not ready, in one line.
    async fn check_impersonation(&self, env: &environment::Environment) {
        let new: Vec<Arc<kubewasm_runtime::CompiledPlugin>> = {
            let mut known = lock(&self.cannot_write);
            known.retain(|name, _| env.plugins.contains_key(name));
            env.plugins
                .iter()
                .filter(|(name, _)| !known.contains_key(*name))
                .map(|(_, a)| a.plugin().clone())
                .collect()
        };
        for plugin in new {
            let verdict = crate::apply::identity::check_impersonation(
                &self.client,
                &self.write_identity,
                &plugin.manifest,
            )
            .await
            .err();
            if let Some(why) = &verdict {
                tracing::error!(plugin = %plugin.name(), error = %why, "plugin not ready: the host cannot write as it");
            }
            lock(&self.cannot_write).insert(plugin.name().to_string(), verdict);
        }
    }

    /// Ask again what was found missing: the host's own rules, and each plugin the host
    /// could not impersonate.
    async fn recheck_permissions(&self) {
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
            let verdict = crate::apply::identity::check_impersonation(
                &self.client,
                &self.write_identity,
                &active.plugin().manifest,
            )
            .await;
            if verdict.is_ok() {
                tracing::info!(plugin = %name, "the host may now write as the plugin; it is ready");
                lock(&self.cannot_write).insert(name, None);
            }
        }
    }

    /// Point the watch manager at what `env` needs: which targets, and which of them are
    /// read whole (with shards, the others are cached by shard).
    fn point_watches(&self, env: &environment::Environment) {
        let mut whole = env.read_whole();
        if self.reloader.follows_objects() {
            whole.insert(plugin_kind());
        }
        self.watches.set_whole(whole);
        self.watches.set_desired(self.desired(env));
    }

    /// What the watch manager must serve for `env`: its plugins' watches and reads, and
    /// the Plugin objects when they are a source.
    fn desired(
        &self,
        env: &environment::Environment,
    ) -> std::collections::BTreeMap<
        kubewasm_core::resource::ResourceRef,
        crate::watch::manager::Demand,
    > {
        let mut desired = env.desired();
        if self.reloader.follows_objects() {
            desired.insert(plugin_kind(), None);
        }
        desired
    }

    /// The Plugin objects, when they are a source and their cache is synced (a partial
    /// list would unload the plugins not listed yet); none at all while their watch has
    /// failed for longer than the grace, so that a Plugin deleted or narrowed while the
    /// host cannot see it (its RBAC revoked, the API server unreachable) does not keep
    /// serving.
    fn plugin_objects(&self) -> Option<Vec<Arc<crate::watch::cache::CachedObject>>> {
        use std::sync::atomic::Ordering;
        if !self.reloader.follows_objects() {
            return None;
        }
        let resolved = self.watches.resolved(&plugin_kind())?;
        let cache = self.caches.get(&resolved.type_ref())?;
        if !cache.is_synced() {
            return None;
        }
        match cache.failing_for() {
            Some(failing) if failing >= self.plugin_watch_grace => {
                if !self.objects_withheld.swap(true, Ordering::SeqCst) {
                    tracing::error!(
                        failing_for_s = failing.as_secs(),
                        grace_s = self.plugin_watch_grace.as_secs(),
                        "the watch of Plugin objects has been failing for longer than --plugin-watch-grace: the plugins of Plugin objects are unloaded until it works again (a Plugin deleted or narrowed meanwhile must not keep serving)"
                    );
                }
                Some(Vec::new())
            }
            _ => {
                if self.objects_withheld.swap(false, Ordering::SeqCst) {
                    tracing::info!(
                        "the watch of Plugin objects works again: their plugins load again"
                    );
                }
                Some(cache.snapshot())
            }
        }
    }

    /// Whether the Plugin watch crossed its grace either way since the last reconcile:
    /// failing past it with the objects' plugins still loaded, or working again with them
    /// withheld. A failure or a recovery sends no event (a relist that finds nothing
    /// changed sends none), so this is polled.
    fn plugin_watch_turned(&self) -> bool {
        use std::sync::atomic::Ordering;
        let failing = self
            .watches
            .resolved(&plugin_kind())
            .and_then(|r| self.caches.get(&r.type_ref()))
            .and_then(|c| c.failing_for());
        let past_grace = failing.is_some_and(|f| f >= self.plugin_watch_grace);
        past_grace != self.objects_withheld.load(Ordering::SeqCst)
    }

    /// Whether a watch event is about a Plugin object.
    fn is_plugin_object(&self, resource: &crate::watch::cache::ResourceKey) -> bool {
        self.reloader.follows_objects()
            && resource.group == kubewasm_core::plugin_object::GROUP
            && resource.plural == kubewasm_core::plugin_object::PLURAL
    }

    /// A watch target now resolves: route it, and replay it to plugins that waited.
    fn resolved(&self, target: &kubewasm_core::resource::ResourceRef) {
        if *target == plugin_kind() {
            self.objects_changed.notify_one();
        }
        self.current.update(|env| {
            let mut env = env.clone();
            env.resolve(&self.watches);
            env
        });
        self.replayer.resolved(target);
    }
}

impl Host {
    /// Load the plugins, start the watches and dispatch, and (when configured) follow the
    /// plugin directory. Bad plugin files are logged and skipped; only an unreadable plugin
    /// directory or a broken engine is an error.
    pub async fn start(
        client: Client,
        config: HostConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Host, Error> {
        if let Some(dir) = &config.plugins_dir
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
            .map(|o| ObjectSource::new(client.clone(), o))
            .transpose()?;
        let loader = Loader::new(
            PluginEngine::new()?,
            config.load.clone(),
            config.cache_dir.as_deref(),
        )?;
        let access = config.access.clone();
        // Plugin objects' status and the allowed pull secrets (their list and watch are the
        // watch manager's, once their kind is served).
        if let Some(o) = &config.objects {
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
            // Only the secrets the operator allowed: the host reads no other.
            needs.extend(o.allowed_pull_secrets.iter().map(|name| Need {
                rule: Rule::new("get", "", "secrets", Some(&o.namespace)).named(name),
                purpose: "a pull secret Plugin objects may name (--allowed-pull-secret)".into(),
                blocking: false,
            }));
            access.require(&client, "plugin objects", needs).await;
        }
        let discovery = Arc::new(Discovery::new(client.clone()));
        // Plugins read as their own ServiceAccounts when they write as them.
        let reviews = match &config.write_identity {
            crate::apply::WriteIdentity::PluginServiceAccounts { namespace } => {
                Some(Arc::new(crate::apply::identity::AccountReviews::new(
                    client.clone(),
                    discovery.clone(),
                    namespace.clone(),
                    config.watch.namespaces.clone(),
                )))
            }
            crate::apply::WriteIdentity::Host => None,
        };
        let caches = Arc::new(Caches::default());
        let (tx, rx) = mpsc::channel::<WatchSignal>(4096);
        let watches = WatchManager::new(
            client.clone(),
            discovery.clone(),
            caches.clone(),
            config.watch.clone(),
            tx,
            metrics.clone(),
            access.clone(),
        );
        if let Some(shards) = config.ownership.shards() {
            watches.shard_caches(shards.clone());
        }
        let current = Current::default();
        let ownership = config.ownership.clone();
        let pipeline = Pipeline {
            applier: Arc::new(Applier::with_identity(
                client.clone(),
                config.write_identity.clone(),
            )),
            discovery,
            caches: caches.clone(),
            ownership: ownership.clone(),
        };
        let recorder = match &config.record {
            Some(r) => Some(Arc::new(crate::cases::record::Recorder::new(r.clone())?)),
            None => None,
        };
        let handlers = Arc::new(Shared {
            current: current.clone(),
            stack: layers::stack(pipeline, ownership.clone(), metrics.clone(), recorder),
            caches: caches.clone(),
            warnings: config.event_interval.map(|interval| {
                Arc::new(EventRecorder::new(
                    client.clone(),
                    config.identity.clone(),
                    interval,
                ))
            }),
            ownership: ownership.clone(),
        });
        let parts = Arc::new(Parts {
            router: Router {
                current: current.clone(),
                ownership: ownership.clone(),
            },
            replayer: Replayer::new(
                current.clone(),
                watches.clone(),
                caches.clone(),
                ownership.clone(),
                config.tombstone_retention,
            ),
            status_writer: objects
                .as_ref()
                .map(|_| StatusWriter::new(client.clone(), ownership.clone())),
            reloader: Reloader::new(
                config.plugins_dir.clone(),
                config.approvals.clone(),
                objects,
                loader,
                config.quarantine,
                metrics.clone(),
                reviews,
            ),
            ownership: ownership.clone(),
            objects_changed: tokio::sync::Notify::new(),
            status_due: tokio::sync::Notify::new(),
            plugin_watch_grace: config
                .objects
                .as_ref()
                .map_or(Duration::MAX, |o| o.watch_grace),
            objects_withheld: std::sync::atomic::AtomicBool::new(false),
            client: client.clone(),
            access,
            write_identity: config.write_identity.clone(),
            cannot_write: Mutex::new(std::collections::BTreeMap::new()),
            reloading: tokio::sync::Mutex::new(()),
            current,
            watches: watches.clone(),
            handlers,
            queue_config: config.queue.clone(),
            caches,
            workers: Mutex::new(Vec::new()),
        });

        // Follow the directory from before the first scan, so no change slips between them.
        let (dir_watch, notifications) = match (config.reload_debounce, &config.plugins_dir) {
            (Some(debounce), Some(dir)) => {
                let (w, rx) = dir_watch::watch_dir(dir, config.approvals.as_deref(), debounce)?;
                (Some(w), Some(rx))
            }
            _ => (None, None),
        };
        // Ask for the Plugin objects from the start: they load once their cache syncs.
        parts.point_watches(&parts.current.get());
        parts.load_first().await;
        if let Some(dir) = &config.plugins_dir
            && parts.current.get().plugins.is_empty()
        {
            tracing::warn!(dir = %dir.display(), "no plugins loaded from the plugin directory");
        }

        let manager_cancel = CancellationToken::new();
        let manager_task = tokio::spawn(watches.run(manager_cancel.clone()));
        let cancel = CancellationToken::new();
        let mut tasks = vec![
            tokio::spawn(route_events(parts.clone(), rx, cancel.clone())),
            tokio::spawn(follow_ownership(
                parts.clone(),
                ownership,
                metrics.clone(),
                cancel.clone(),
            )),
            tokio::spawn(recheck_permissions(parts.clone(), cancel.clone())),
            tokio::spawn(review_access(
                parts.clone(),
                config.access_review_interval,
                cancel.clone(),
            )),
            tokio::spawn(follow_loads(parts.clone(), cancel.clone())),
            tokio::spawn(report_queue_depths(
                parts.current.clone(),
                parts.caches.clone(),
                metrics,
                cancel.clone(),
            )),
        ];
        if parts.reloader.follows_objects() {
            tasks.push(tokio::spawn(write_object_status(
                parts.clone(),
                cancel.clone(),
            )));
            tasks.push(tokio::spawn(follow_plugin_objects(
                parts.clone(),
                config.reload_debounce.unwrap_or(Duration::from_millis(300)),
                cancel.clone(),
            )));
        }
        if notifications.is_some() || config.rescan_interval.is_some() {
            tasks.push(tokio::spawn(follow_plugin_dir(
                parts.clone(),
                notifications,
                config.rescan_interval,
                cancel.clone(),
            )));
        }

        Ok(Host {
            parts,
            cancel,
            tasks,
            manager_task,
            manager_cancel,
            _dir_watch: dir_watch,
        })
    }

    /// Names of the plugins at work.
    pub fn plugins(&self) -> Vec<String> {
        self.parts.current.get().plugins.keys().cloned().collect()
    }

    /// Plugins, rejected files and reload count.
    pub fn status(&self) -> PluginStatus {
        self.parts.reloader.status(&self.parts.current.get())
    }

    /// Ready: the plugin directory was loaded once and every watched resource the API
    /// server serves has its cache synced (resources not served do not block).
    pub fn ready(&self) -> bool {
        self.readiness_check()().ready()
    }

    /// The readiness check as a closure, for the `/readyz` endpoint.
    pub fn readiness_check(&self) -> impl Fn() -> ReadinessReport + Send + Sync + 'static {
        let parts = self.parts.clone();
        move || {
            let watches = parts.watches.readiness();
            let missing = parts.access.missing();
            let cannot_write = lock(&parts.cannot_write).clone();
            let env = parts.current.get();
            let plugins = env
                .plugins
                .values()
                .map(|a| {
                    let mut report = plugin_report(a, &parts.watches, &watches, &missing);
                    report.not_ready = cannot_write.get(&report.name).cloned().flatten();
                    report
                })
                .collect();
            let status = parts.reloader.status(&env);
            let rejected = status
                .rejected
                .iter()
                .map(|(source, reason)| (source.clone(), reason.clone()))
                .collect();
            let missing_reads = status
                .missing_reads
                .iter()
                .map(|(source, rules)| (source.clone(), rules.clone()))
                .collect();
            // Plugin objects block readiness once their kind is served, until a reconcile
            // of their synced cache.
            let objects_pending = parts.reloader.follows_objects()
                && parts.watches.resolved(&plugin_kind()).is_some()
                && !parts.reloader.objects_loaded_once();
            ReadinessReport {
                plugins_loaded: parts.reloader.loaded_once() && !objects_pending,
                watches,
                plugins,
                rejected,
                missing_reads,
                missing,
                shards: parts
                    .ownership
                    .shards()
                    .map(|s| crate::serve::http::ShardsReport {
                        total: s.total(),
                        held: s.held().into_iter().collect(),
                        members: s.members(),
                        identity: s.identity().to_string(),
                    }),
            }
        }
    }

    /// Stop taking events, let in-flight calls and applies finish, stop the watches.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        for a in self.parts.current.get().plugins.values() {
            a.queue.close();
        }
        let sets = std::mem::take(&mut *lock(&self.parts.workers));
        for mut set in sets {
            while set.join_next().await.is_some() {}
        }
        self.manager_cancel.cancel();
        let _ = self.manager_task.await;
        tracing::info!("host stopped");
    }
}

/// Where one plugin stands: its watched and read resources, and the objects its queue
/// parked after permanent failures.
fn plugin_report(
    a: &environment::Active,
    watches: &WatchManager,
    readiness: &crate::watch::WatchReadiness,
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

/// Task: every watch event into the queues of the plugins that select it.
async fn route_events(
    parts: Arc<Parts>,
    mut rx: mpsc::Receiver<WatchSignal>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            signal = rx.recv() => match signal {
                Some(WatchSignal::Event(ev)) => {
                    if parts.is_plugin_object(&ev.resource) {
                        tracing::debug!(object = %ev.object.describe(), event = %ev.event_type,
                            resource_version = ev.object.resource_version().unwrap_or_default(),
                            "Plugin object changed");
                        parts.objects_changed.notify_one();
                    }
                    parts.replayer.observe(&ev);
                    parts.router.route(&ev);
                }
                Some(WatchSignal::Resolved(target)) => parts.resolved(&target),
                None => break,
            },
        }
    }
}

/// Task: on becoming leader, replay every cached object to every plugin; on gaining
/// shards, replay theirs.
async fn follow_ownership(
    parts: Arc<Parts>,
    ownership: Ownership,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    let leadership = match ownership {
        Ownership::Leader(l) => l,
        Ownership::Shards(s) => return follow_shards(parts, s, metrics, cancel).await,
    };
    let mut leader_rx = leadership.subscribe();
    let mut was = *leader_rx.borrow_and_update();
    metrics.leader.set(i64::from(was));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            changed = leader_rx.changed() => if changed.is_err() { break },
        }
        let now = *leader_rx.borrow_and_update();
        metrics.leader.set(i64::from(now));
        if now && !was {
            tracing::info!("leading: re-delivering every cached object to every plugin");
            parts.replayer.lead();
            // A new term: the Plugin objects' status is this replica's to write.
            if let Some(writer) = &parts.status_writer {
                writer.forget();
                writer.write(&parts.reloader.object_states()).await;
            }
        }
        was = now;
    }
}

/// Task (with shards): on gaining shards, deliver their tombstones and replay their
/// cached objects; the holder of shard 0 writes the Plugin objects' status.
async fn follow_shards(
    parts: Arc<Parts>,
    shards: crate::replicas::shards::ShardSet,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    let mut rx = shards.subscribe();
    let mut was = rx.borrow_and_update().clone();
    metrics.leader.set(i64::from(!was.is_empty()));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            changed = rx.changed() => if changed.is_err() { break },
        }
        let now = rx.borrow_and_update().clone();
        metrics.leader.set(i64::from(!now.is_empty()));
        let gained: std::collections::BTreeSet<u32> = now.difference(&was).copied().collect();
        if !gained.is_empty() {
            tracing::debug!(shards = ?gained, "shards gained: delivering their deletions, replaying their objects");
            parts.replayer.gain(&gained);
            if gained.contains(&0)
                && let Some(writer) = &parts.status_writer
            {
                writer.forget();
                writer.write(&parts.reloader.object_states()).await;
            }
        }
        was = now;
    }
}

/// Task: ask again, now and then, about the permissions found missing.
async fn recheck_permissions(parts: Arc<Parts>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(RECHECK_PERMISSIONS) => {}
        }
        parts.recheck_permissions().await;
    }
}

/// Task: every `interval`, ask again whether each plugin's account may read what it is
/// approved to read, and reconcile: a plugin that lost a rule is unloaded, one refused
/// for a missing rule loads once it is granted.
async fn review_access(parts: Arc<Parts>, interval: Duration, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
        parts.reloader.review_access_again().await;
        parts.reload().await;
    }
}

/// Task: publish each plugin's queue depth, and each cache's size, once a second.
async fn report_queue_depths(
    current: Current,
    caches: Arc<Caches>,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        for (name, active) in &current.get().plugins {
            let label = PluginLabel {
                plugin: name.clone(),
            };
            metrics
                .queue_depth
                .get_or_create(&label)
                .set(active.queue.depth() as i64);
            metrics
                .blocked
                .get_or_create(&label)
                .set(active.queue.blocked().len() as i64);
        }
        for cache in caches.all() {
            metrics
                .cached_objects
                .get_or_create(&crate::serve::metrics::ResourceLabel {
                    resource: cache.resource.to_string(),
                })
                .set(cache.len() as i64);
        }
    }
}

/// Task: write the Plugin objects' status as the last reconcile left it, after each
/// reconcile of them (a burst of reconciles makes one write of the latest states).
async fn write_object_status(parts: Arc<Parts>, cancel: CancellationToken) {
    let Some(writer) = &parts.status_writer else {
        return;
    };
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = parts.status_due.notified() => {}
        }
        if parts.ownership.is_first() {
            writer.write(&parts.reloader.object_states()).await;
        }
    }
}

/// Task: reconcile when a plugin's load ends, so its result takes effect.
async fn follow_loads(parts: Arc<Parts>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = parts.reloader.load_finished() => {}
        }
        parts.reload().await;
    }
}

/// Task: reconcile the plugin directory on each notification and every rescan interval.
async fn follow_plugin_dir(
    parts: Arc<Parts>,
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
            } => parts.reloader.rescan(),
        }
        parts.reload().await;
    }
}

/// Task: reconcile after Plugin objects change (debounced: a burst of changes, or the
/// status writes of one reconcile, make one reconcile), once their cache is synced.
async fn follow_plugin_objects(parts: Arc<Parts>, debounce: Duration, cancel: CancellationToken) {
    loop {
        let retry = parts.reloader.next_retry();
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = parts.objects_changed.notified() => {}
            // The Plugin watch failed past its grace, or works again.
            _ = async {
                loop {
                    tokio::time::sleep(PLUGIN_WATCH_POLL).await;
                    if parts.plugin_watch_turned() {
                        break;
                    }
                }
            } => {}
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
        while parts.plugin_objects().is_none() && waited < Duration::from_secs(30) {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => waited += Duration::from_millis(50),
            }
        }
        parts.reload().await;
    }
}
