//! The host: wires watch → router → dispatch → handler (runtime call, admission, apply),
//! and the reloader that keeps the plugins in line with the plugin directory.
//!
//! | module | box |
//! | --- | --- |
//! | [`environment`] | the immutable set of plugins at work, swapped whole on reload |
//! | [`router`] | watch events and replays into plugin queues |
//! | [`handler`] | one delivery: call, admit, apply, account |
//! | [`reload`] | plugin directory → environment |
//! | [`dir_watch`] | notify watcher on the plugin directory |

pub mod dir_watch;
pub(crate) mod environment;
pub(crate) mod handler;
pub(crate) mod reload;
pub(crate) mod router;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::Client;
use kubewasm_runtime::{LoadOptions, Loader, PluginEngine};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::environment::Current;
pub use self::environment::PluginStatus;
use self::handler::HandlerDeps;
use self::reload::Reloader;
use self::router::Router;
use crate::Error;
use crate::apply::Applier;
use crate::apply::events::EventRecorder;
use crate::dispatch::{QuarantinePolicy, QueueConfig};
use crate::ops::http::{BlockedObject, PluginReport, ReadinessReport};
use crate::ops::leader::Leadership;
use crate::ops::metrics::{Metrics, PluginLabel};
use crate::watch::cache::Caches;
use crate::watch::discovery::Discovery;
use crate::watch::{WatchConfig, WatchManager, WatchSignal};

/// Everything `kubewasm run` is configured with.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Directory holding `NAME.wasm` (+ settings) files.
    pub plugins_dir: PathBuf,
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
    /// Whether this replica may write (leader election); [`Leadership::always`] for one replica.
    pub leadership: Leadership,
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
}

/// A running host. Build with [`Host::start`], stop with [`Host::shutdown`].
pub struct Host {
    reloader: Arc<Reloader>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    manager_task: JoinHandle<()>,
    manager_cancel: CancellationToken,
    _dir_watch: Option<dir_watch::DirWatch>,
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
        if !config.plugins_dir.is_dir() {
            return Err(Error::Io {
                context: format!("plugin directory {}", config.plugins_dir.display()),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            });
        }
        let loader = Loader::new(
            PluginEngine::new()?,
            config.load.clone(),
            config.cache_dir.as_deref(),
        )?;
        let discovery = Arc::new(Discovery::new(client.clone()));
        let caches = Arc::new(Caches::default());
        let (tx, rx) = mpsc::channel::<WatchSignal>(4096);
        let watches = WatchManager::new(
            client.clone(),
            discovery.clone(),
            caches.clone(),
            config.watch.clone(),
            tx,
            metrics.clone(),
        );
        let router = Router {
            current: Current::default(),
            watches: watches.clone(),
            caches: caches.clone(),
            leadership: config.leadership.clone(),
            tombstones: Default::default(),
            tombstone_retention: config.tombstone_retention,
            pending: Default::default(),
        };
        let deps = HandlerDeps {
            applier: Arc::new(Applier::with_identity(
                client.clone(),
                config.write_identity.clone(),
            )),
            discovery,
            watches: watches.clone(),
            caches,
            metrics: metrics.clone(),
            leadership: config.leadership.clone(),
            recorder: config.event_interval.map(|interval| {
                Arc::new(EventRecorder::new(
                    client.clone(),
                    config.identity.clone(),
                    interval,
                ))
            }),
            record: match &config.record {
                Some(r) => Some(Arc::new(crate::cases::record::Recorder::new(r.clone())?)),
                None => None,
            },
        };
        let reloader = Arc::new(Reloader::new(
            config.plugins_dir.clone(),
            loader,
            config.queue.clone(),
            config.quarantine,
            deps,
            router.clone(),
        ));

        // Follow the directory from before the first scan, so no change slips between them.
        let (dir_watch, notifications) = match config.reload_debounce {
            Some(debounce) => {
                let (w, rx) = dir_watch::watch_dir(&config.plugins_dir, debounce)?;
                (Some(w), Some(rx))
            }
            None => (None, None),
        };
        reloader.reconcile().await;
        if router.current.get().plugins.is_empty() {
            tracing::warn!(dir = %config.plugins_dir.display(), "no plugins loaded");
        }

        let manager_cancel = CancellationToken::new();
        let manager_task = tokio::spawn(watches.run(manager_cancel.clone()));
        let cancel = CancellationToken::new();
        let mut tasks = vec![
            tokio::spawn(route_events(router.clone(), rx, cancel.clone())),
            tokio::spawn(follow_leadership(
                router.clone(),
                config.leadership.clone(),
                metrics.clone(),
                cancel.clone(),
            )),
            tokio::spawn(report_queue_depths(
                router.current.clone(),
                metrics,
                cancel.clone(),
            )),
        ];
        if notifications.is_some() || config.rescan_interval.is_some() {
            tasks.push(tokio::spawn(follow_plugin_dir(
                reloader.clone(),
                notifications,
                config.rescan_interval,
                cancel.clone(),
            )));
        }

        Ok(Host {
            reloader,
            cancel,
            tasks,
            manager_task,
            manager_cancel,
            _dir_watch: dir_watch,
        })
    }

    /// Names of the plugins at work.
    pub fn plugins(&self) -> Vec<String> {
        self.reloader
            .router
            .current
            .get()
            .plugins
            .keys()
            .cloned()
            .collect()
    }

    /// Plugins, rejected files and reload count.
    pub fn status(&self) -> PluginStatus {
        self.reloader
            .status
            .read()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Ready: the plugin directory was loaded once and every watched resource the API
    /// server serves has its cache synced (resources not served do not block).
    pub fn ready(&self) -> bool {
        self.readiness_check()().ready()
    }

    /// The readiness check as a closure, for the `/readyz` endpoint.
    pub fn readiness_check(&self) -> impl Fn() -> ReadinessReport + Send + Sync + 'static {
        let reloader = self.reloader.clone();
        move || {
            let watches = reloader.deps.watches.readiness();
            let env = reloader.router.current.get();
            let plugins = env
                .plugins
                .values()
                .map(|a| plugin_report(a, &reloader.deps.watches, &watches))
                .collect();
            let rejected = reloader
                .status
                .read()
                .map(|s| {
                    s.rejected
                        .iter()
                        .map(|(file, reason)| (file.display().to_string(), reason.clone()))
                        .collect()
                })
                .unwrap_or_default();
            ReadinessReport {
                plugins_loaded: reloader.loaded_once.load(Ordering::Acquire),
                watches,
                plugins,
                rejected,
            }
        }
    }

    /// Stop taking events, let in-flight calls and applies finish, stop the watches.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        for a in self.reloader.router.current.get().plugins.values() {
            a.queue.close();
        }
        let sets = self
            .reloader
            .workers
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
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
) -> PluginReport {
    let mut report = PluginReport {
        name: a.plugin.name().to_string(),
        version: a.plugin.manifest.version.clone(),
        ..Default::default()
    };
    for r in a.plugin.manifest.read_resources() {
        let spelled = r.to_string();
        if readiness.unserved.contains(&spelled) || watches.resolved(r).is_none() {
            report.waiting_for.push(spelled);
        } else if readiness.syncing.contains(&spelled) {
            report.syncing.push(spelled);
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
    router: Router,
    mut rx: mpsc::Receiver<WatchSignal>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            signal = rx.recv() => match signal {
                Some(WatchSignal::Event(ev)) => router.route(&ev),
                Some(WatchSignal::Resolved(target)) => router.resolved(&target),
                None => break,
            },
        }
    }
}

/// Task: on becoming leader, replay every cached object to every plugin.
async fn follow_leadership(
    router: Router,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
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
            router.replay_all();
        }
        was = now;
    }
}

/// Task: publish each plugin's queue depth once a second.
async fn report_queue_depths(current: Current, metrics: Arc<Metrics>, cancel: CancellationToken) {
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
    }
}

/// Task: reconcile the plugin directory on each notification and every rescan interval.
async fn follow_plugin_dir(
    reloader: Arc<Reloader>,
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
            } => {}
        }
        reloader.reconcile().await;
    }
}
