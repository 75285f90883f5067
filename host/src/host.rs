//! The host: wires registry → watch → dispatch → runtime → intent → grant → apply.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::Error;
use crate::apply::{Applier, Outcome, PrepareError};
use crate::cache::{Caches, PluginView};
use crate::discovery::Discovery;
use crate::dispatch::{Delivery, Handler, Queue, QueueConfig, QueueKey};
use crate::events::EventRecorder;
use crate::grant;
use crate::intent;
use crate::leader::Leadership;
use crate::manifest::Watch;
use crate::metrics::{EventLabels, InfoLabels, Metrics, PluginLabel};
use crate::quarantine::{Health, QuarantinePolicy};
use crate::registry::{self, LoadOptions, Loader, PluginFile};
use crate::reload;
use crate::resource::ResourceRef;
use crate::runtime::{CompiledPlugin, EventType, PluginEngine, PluginEvent};
use crate::selector::{FieldSelector, LabelSelector};
use crate::watch::{WatchConfig, WatchEvent, WatchManager};

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
}

/// A watch with its selectors parsed once, for routing.
struct Route {
    id: Arc<str>,
    resource: ResourceRef,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Route {
    fn new(w: &Watch) -> Self {
        Route {
            id: w.id.as_str().into(),
            resource: w.resource.clone(),
            namespace: w.namespace.clone(),
            // Selectors were validated with the manifest; an unparsable one cannot reach here.
            labels: w
                .label_selector
                .as_deref()
                .and_then(|s| LabelSelector::parse(s).ok())
                .unwrap_or_default(),
            fields: w
                .field_selector
                .as_deref()
                .and_then(|s| FieldSelector::parse(s).ok())
                .unwrap_or_default(),
        }
    }

    fn selects(&self, o: &crate::cache::CachedObject) -> bool {
        let ns = o.object.metadata.namespace.as_deref();
        let name = o.object.metadata.name.as_deref().unwrap_or_default();
        self.namespace
            .as_deref()
            .is_none_or(|want| ns == Some(want))
            && self.labels.matches(o.labels())
            && self.fields.matches(name, ns)
    }

    /// The event this watch sees, as a selector-filtered informer would: an object that
    /// stops matching is deleted for this watch, one that starts matching is added.
    fn event_for(&self, ev: &WatchEvent) -> Option<EventType> {
        let now = self.selects(&ev.object);
        match (ev.event_type, &ev.old) {
            (EventType::Modified, Some(old)) => match (self.selects(old), now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            },
            (t, _) => now.then_some(t),
        }
    }
}

/// One version of a plugin and its health (a new version starts healthy).
struct Version {
    plugin: Arc<CompiledPlugin>,
    health: Health,
}

/// The slot a plugin's queue workers read the current version from: a replaced plugin
/// takes effect at the next event of each object, while running calls finish on the old one.
type Slot = Arc<RwLock<Arc<Version>>>;

/// One plugin at work.
#[derive(Clone)]
struct Active {
    plugin: Arc<CompiledPlugin>,
    routes: Arc<Vec<Route>>,
    queue: Arc<Queue>,
    slot: Slot,
}

/// The plugins at work. Immutable: a reload builds a new one and swaps it whole.
#[derive(Clone, Default)]
struct Environment {
    plugins: BTreeMap<String, Active>,
}

impl Environment {
    fn desired(&self) -> BTreeSet<ResourceRef> {
        self.plugins
            .values()
            .flat_map(|a| {
                let m = &a.plugin.manifest;
                m.watches
                    .iter()
                    .map(|w| w.resource.clone())
                    .chain(m.reads.iter().cloned())
            })
            .collect()
    }
}

/// What the host knows about one file of the plugin directory.
struct FileState {
    /// Fingerprint of the last version looked at (loaded or rejected).
    fingerprint: String,
    /// The plugin this file currently serves (an older version when the newest was rejected).
    serving: Option<String>,
    /// Why the newest version was rejected.
    rejected: Option<String>,
}

/// Status of the plugin directory, for logs, readiness and metrics.
#[derive(Debug, Clone, Default)]
pub struct PluginStatus {
    /// Plugins at work: name → (version, file).
    pub loaded: BTreeMap<String, (String, PathBuf)>,
    /// Files whose newest version was rejected, with the reason.
    pub rejected: BTreeMap<PathBuf, String>,
    /// Reloads done (added, replaced or removed plugins).
    pub reloads: u64,
}

/// Handles a plugin's deliveries: call, decode, check, apply.
struct PluginHandler {
    slot: Slot,
    applier: Arc<Applier>,
    watches: Arc<WatchManager>,
    caches: Arc<Caches>,
    metrics: Arc<Metrics>,
    leadership: Leadership,
    recorder: Option<Arc<EventRecorder>>,
}

impl PluginHandler {
    /// Kinds the plugin may read: what it watches plus what it declared, once resolved.
    fn view(&self, plugin: &CompiledPlugin) -> Arc<PluginView> {
        let m = &plugin.manifest;
        let allowed: HashSet<_> = m
            .watches
            .iter()
            .map(|w| &w.resource)
            .chain(m.reads.iter())
            .filter_map(|r| self.watches.resolved(r))
            .map(|r| r.type_ref())
            .collect();
        Arc::new(PluginView::new(self.caches.clone(), allowed))
    }

    async fn run(&self, plugin: &CompiledPlugin, d: &Delivery) -> Result<usize, Error> {
        let name = plugin.name().to_string();
        let object = d.object.describe();
        let event = PluginEvent {
            event_type: d.event_type,
            watch_id: d.watch_id.to_string(),
            object: d.object.json.clone(),
            old_object: d.old.as_ref().map(|o| o.json.clone()),
        };
        let started = Instant::now();
        let result = plugin.handle(&event, &object, self.view(plugin)).await;
        self.metrics
            .call_seconds
            .get_or_create(&PluginLabel {
                plugin: name.clone(),
            })
            .observe(started.elapsed().as_secs_f64());
        let raw = result.map_err(|kind| Error::Call {
            plugin: name.clone(),
            kind,
        })?;
        tracing::debug!(plugin = %name, object = %object, intents = raw.len(), took = ?started.elapsed(), "plugin returned");

        // Validate everything before writing anything: a call is applied whole or not at all.
        let max = plugin.limits.max_intent_bytes;
        let mut prepared = Vec::with_capacity(raw.len());
        for (index, r) in raw.into_iter().enumerate() {
            let decoded = intent::decode(r, max).map_err(|reason| Error::InvalidIntent {
                plugin: name.clone(),
                index,
                reason,
            })?;
            let p = match self.applier.prepare(decoded, &d.object).await {
                Ok(p) => p,
                Err(PrepareError::Invalid(reason)) => {
                    return Err(Error::InvalidIntent {
                        plugin: name.clone(),
                        index,
                        reason,
                    });
                }
                Err(PrepareError::Resolve(e)) => {
                    return Err(Error::InvalidIntent {
                        plugin: name.clone(),
                        index,
                        reason: e.to_string(),
                    });
                }
            };
            grant::check(&plugin.manifest, &p.access()).map_err(|reason| Error::Refused {
                plugin: name.clone(),
                index,
                reason,
            })?;
            prepared.push(p);
        }

        let manager = plugin.manifest.field_manager();
        for p in &prepared {
            if !self.leadership.is_leader() {
                return Err(Error::NotLeader {
                    plugin: name.clone(),
                });
            }
            let result = self.applier.execute(&manager, p).await;
            let outcome = match &result {
                Ok(_) => "applied",
                Err(e) if e.status() == Some(409) => "conflict",
                Err(_) => "error",
            };
            self.metrics.intent(&name, p.intent.verb.as_str(), outcome);
            if outcome == "conflict" {
                self.metrics
                    .conflicts
                    .get_or_create(&PluginLabel {
                        plugin: name.clone(),
                    })
                    .inc();
            }
            match result {
                Ok(Outcome::Written { resource_version }) => tracing::info!(
                    plugin = %name, manager = %manager, trigger = %object,
                    resource_version = %resource_version, "applied {}", p.describe()
                ),
                Ok(Outcome::Deleted) => {
                    tracing::info!(plugin = %name, manager = %manager, trigger = %object, "applied {}", p.describe())
                }
                Ok(Outcome::AlreadyGone) => {
                    tracing::info!(plugin = %name, trigger = %object, "{}: already gone", p.describe())
                }
                Err(e) => {
                    if e.status() == Some(409) && !p.intent.force {
                        tracing::warn!(plugin = %name, manager = %manager, trigger = %object,
                            "{}: conflict with another field manager; not forced (the intent did not ask for force)",
                            p.describe());
                    }
                    return Err(e);
                }
            }
        }
        Ok(prepared.len())
    }
}

impl Handler for PluginHandler {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        // The version current when the event starts handles it, start to finish.
        let version = match self.slot.read() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let plugin = &version.plugin;
        let name = plugin.name();
        let object = d.object.describe();
        if !self.leadership.is_leader() {
            // Followers keep caches warm but leave writing to the leader, which resyncs
            // everything when it takes over.
            tracing::debug!(plugin = name, object = %object, "not the leader; event left to the leader");
            return Ok(());
        }
        if let Err(q) = version.health.check() {
            // The event waits in the queue (retried with backoff) until the quarantine ends.
            tracing::debug!(plugin = name, object = %object, "plugin quarantined; event deferred");
            return Err(Error::Quarantined {
                plugin: name.to_string(),
                reason: q.reason,
                remaining: q.remaining,
            });
        }
        self.metrics
            .events
            .get_or_create(&EventLabels {
                plugin: name.to_string(),
                event: d.event_type.as_str().to_string(),
            })
            .inc();
        tracing::info!(plugin = name, version = %plugin.manifest.version, event = d.event_type.as_str(), watch = %d.watch_id, object = %object, "event");
        // Everything logged while handling this event (plugin logs, applies) carries the
        // plugin and the object through this span.
        let span = tracing::info_span!("event", plugin = name, object = %object, event = d.event_type.as_str());
        match self.run(plugin, d).instrument(span).await {
            Ok(_) => {
                version.health.success();
                self.metrics.set_quarantined(name, false);
                Ok(())
            }
            Err(e) => {
                let retry = e.is_retryable();
                self.metrics.error(name, e.kind());
                tracing::error!(plugin = name, object = %object, event = d.event_type.as_str(), retry, error = %e, "event failed");
                if let Some(recorder) = &self.recorder
                    && d.event_type != EventType::Deleted
                {
                    let reason = match &e {
                        Error::InvalidIntent { .. } | Error::Refused { .. } => "IntentRefused",
                        Error::Call { .. } => "PluginFailed",
                        _ => "ApplyFailed",
                    };
                    recorder
                        .warning(&d.object.object, reason, &e.to_string())
                        .await;
                }
                match &e {
                    Error::Call { kind, .. } if kind.is_sandbox_failure() => {
                        if version.health.failure(&kind.to_string()) {
                            self.metrics.set_quarantined(name, true);
                            tracing::error!(plugin = name, reason = %kind, "plugin quarantined: it receives no events until its file changes or the cooldown passes");
                        }
                    }
                    // The plugin answered: it works, whatever it answered.
                    _ => {
                        version.health.success();
                        self.metrics.set_quarantined(name, false);
                    }
                }
                Err(e)
            }
        }
    }
}

/// Everything the host's tasks share.
struct Shared {
    dir: PathBuf,
    loader: Loader,
    queue_config: QueueConfig,
    applier: Arc<Applier>,
    caches: Arc<Caches>,
    watches: Arc<WatchManager>,
    env: RwLock<Arc<Environment>>,
    files: tokio::sync::Mutex<BTreeMap<PathBuf, FileState>>,
    workers: Mutex<Vec<JoinSet<()>>>,
    status: RwLock<PluginStatus>,
    loaded_once: std::sync::atomic::AtomicBool,
    metrics: Arc<Metrics>,
    quarantine: QuarantinePolicy,
    leadership: Leadership,
    recorder: Option<Arc<EventRecorder>>,
}

enum Change {
    Added(String),
    Replaced(String),
}

impl Shared {
    fn env(&self) -> Arc<Environment> {
        match self.env.read() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn version(&self, plugin: Arc<CompiledPlugin>) -> Arc<Version> {
        self.metrics.set_quarantined(plugin.name(), false);
        Arc::new(Version {
            plugin,
            health: Health::new(self.quarantine),
        })
    }

    fn new_active(&self, plugin: Arc<CompiledPlugin>) -> Active {
        let name = plugin.name().to_string();
        let slot: Slot = Arc::new(RwLock::new(self.version(plugin.clone())));
        let queue = Queue::new(name, self.queue_config.clone());
        let handler = Arc::new(PluginHandler {
            slot: slot.clone(),
            applier: self.applier.clone(),
            watches: self.watches.clone(),
            caches: self.caches.clone(),
            metrics: self.metrics.clone(),
            leadership: self.leadership.clone(),
            recorder: self.recorder.clone(),
        });
        let set = queue.spawn(handler);
        if let Ok(mut w) = self.workers.lock() {
            w.push(set);
        }
        Active {
            routes: Arc::new(plugin.manifest.watches.iter().map(Route::new).collect()),
            plugin,
            queue,
            slot,
        }
    }

    /// Bring the running plugins in line with the plugin directory. A file that changed is
    /// loaded and validated first; only a good version replaces the running one.
    async fn reconcile(&self) {
        let mut files = self.files.lock().await;
        let listing = match registry::plugin_files(&self.dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the plugin directory; keeping the running plugins");
                return;
            }
        };
        let mut env = (*self.env()).clone();
        let mut changes = Vec::new();
        let mut removed = Vec::new();

        for path in &listing {
            let file = match PluginFile::read(path) {
                Ok(f) => f,
                Err(e) => {
                    // Unreadable now (e.g. mid-write, or bad settings): keep what runs.
                    let fp = format!("unreadable: {e}");
                    let state = files.entry(path.clone()).or_insert(FileState {
                        fingerprint: String::new(),
                        serving: None,
                        rejected: None,
                    });
                    if state.fingerprint != fp {
                        tracing::error!(error = %e, still_serving = ?state.serving, "plugin rejected");
                        state.fingerprint = fp;
                        state.rejected = Some(e.to_string());
                    }
                    continue;
                }
            };
            let fp = file.fingerprint();
            if files.get(path).is_some_and(|s| s.fingerprint == fp) {
                continue;
            }
            let loaded = self.loader.load(file).await;
            let state = files.entry(path.clone()).or_insert(FileState {
                fingerprint: String::new(),
                serving: None,
                rejected: None,
            });
            state.fingerprint = fp;
            let loaded = match loaded {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, still_serving = ?state.serving, "plugin rejected");
                    state.rejected = Some(e.to_string());
                    continue;
                }
            };
            let name = loaded.plugin.name().to_string();
            if let Some(owner) = env.plugins.get(&name)
                && owner.plugin.path != *path
            {
                let e = Error::DuplicateName {
                    path: path.clone(),
                    name: name.clone(),
                    other: owner.plugin.path.clone(),
                };
                tracing::error!(error = %e, "plugin rejected");
                state.rejected = Some(e.to_string());
                continue;
            }
            state.rejected = None;
            let plugin = Arc::new(loaded.plugin);
            let how = loaded.source.as_str();
            if let Some(old_name) = state.serving.clone().filter(|n| *n != name)
                && let Some(old) = env.plugins.remove(&old_name)
            {
                removed.push(old);
                tracing::info!(plugin = %old_name, file = %path.display(), "plugin renamed to {name}");
            }
            match env.plugins.get_mut(&name) {
                Some(active) => {
                    let old_version = active.plugin.manifest.version.clone();
                    active.plugin = plugin.clone();
                    active.routes =
                        Arc::new(plugin.manifest.watches.iter().map(Route::new).collect());
                    tracing::info!(plugin = %name, from = %old_version, to = %plugin.manifest.version,
                        how, took = ?loaded.took, file = %path.display(), "plugin replaced");
                    changes.push(Change::Replaced(name.clone()));
                }
                None => {
                    tracing::info!(plugin = %name, version = %plugin.manifest.version, how,
                        took = ?loaded.took, file = %path.display(),
                        watches = plugin.manifest.watches.len(), "plugin loaded");
                    env.plugins.insert(name.clone(), self.new_active(plugin));
                    changes.push(Change::Added(name.clone()));
                }
            }
            state.serving = Some(name);
        }

        // Files that disappeared take their plugin with them.
        let gone: Vec<PathBuf> = files
            .keys()
            .filter(|p| !listing.contains(p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(state) = files.remove(&path)
                && let Some(name) = state.serving
                && let Some(active) = env.plugins.remove(&name)
            {
                tracing::info!(plugin = %name, version = %active.plugin.manifest.version, file = %path.display(), "plugin removed");
                removed.push(active);
            }
        }

        let nothing_changed = changes.is_empty() && removed.is_empty();
        if !nothing_changed {
            // Swap first, then point the slots of replaced plugins at their new versions.
            for change in &changes {
                if let Change::Replaced(name) = change
                    && let Some(active) = env.plugins.get(name)
                {
                    let version = self.version(active.plugin.clone());
                    if let Ok(mut slot) = active.slot.write() {
                        *slot = version;
                    }
                }
            }
            let env = Arc::new(env);
            if let Ok(mut e) = self.env.write() {
                *e = env.clone();
            }
            self.watches.set_desired(env.desired());
            for active in &removed {
                active.queue.close();
            }
            self.replay(&env, &changes);
            let digests: HashSet<String> = env
                .plugins
                .values()
                .map(|a| a.plugin.digest.clone())
                .collect();
            self.loader.retain(&digests);
        }
        self.publish_status(&files, nothing_changed);
        self.loaded_once
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// A replica that becomes leader re-delivers every cached object to every plugin, so
    /// whatever changed while it followed is handled.
    fn replay_all(&self) {
        let env = self.env();
        let changes: Vec<Change> = env
            .plugins
            .keys()
            .map(|n| Change::Replaced(n.clone()))
            .collect();
        self.replay(&env, &changes);
    }

    /// New plugins see the objects already cached (as `added`); replaced ones get every
    /// object again (as `resync`) so the new version's output converges everywhere. Objects
    /// of kinds not cached yet arrive through their watcher's initial list.
    fn replay(&self, env: &Environment, changes: &[Change]) {
        for change in changes {
            let (name, event_type) = match change {
                Change::Added(n) => (n, EventType::Added),
                Change::Replaced(n) => (n, EventType::Resync),
            };
            let Some(active) = env.plugins.get(name) else {
                continue;
            };
            for route in active.routes.iter() {
                let Some(res) = self.watches.resolved(&route.resource) else {
                    continue;
                };
                let Some(cache) = self.caches.get(&res.type_ref()) else {
                    continue;
                };
                if !cache.is_synced() {
                    continue;
                }
                for obj in cache.snapshot() {
                    if !route.selects(&obj) {
                        continue;
                    }
                    active.queue.push(
                        QueueKey {
                            watch_id: route.id.clone(),
                            object: obj.key(),
                        },
                        Delivery {
                            watch_id: route.id.clone(),
                            event_type,
                            object: obj,
                            old: None,
                        },
                    );
                }
            }
        }
    }

    fn publish_status(&self, files: &BTreeMap<PathBuf, FileState>, unchanged: bool) {
        let env = self.env();
        if let Ok(mut st) = self.status.write() {
            st.loaded = env
                .plugins
                .iter()
                .map(|(n, a)| {
                    (
                        n.clone(),
                        (a.plugin.manifest.version.clone(), a.plugin.path.clone()),
                    )
                })
                .collect();
            st.rejected = files
                .iter()
                .filter_map(|(p, s)| s.rejected.clone().map(|r| (p.clone(), r)))
                .collect();
            if !unchanged {
                st.reloads += 1;
                self.metrics.reloads.inc();
            }
            self.metrics.rejected_files.set(st.rejected.len() as i64);
            self.metrics.plugin_info.clear();
            for (plugin, (version, _)) in &st.loaded {
                self.metrics
                    .plugin_info
                    .get_or_create(&InfoLabels {
                        plugin: plugin.clone(),
                        version: version.clone(),
                    })
                    .set(1);
            }
        }
    }

    /// Route one watch event to every plugin whose watch selects it.
    fn route(&self, ev: &WatchEvent) {
        if !self.leadership.is_leader() {
            return;
        }
        let env = self.env();
        for a in env.plugins.values() {
            for route in a.routes.iter() {
                let Some(res) = self.watches.resolved(&route.resource) else {
                    continue;
                };
                if res.key() != ev.resource {
                    continue;
                }
                let Some(event_type) = route.event_for(ev) else {
                    continue;
                };
                a.queue.push(
                    QueueKey {
                        watch_id: route.id.clone(),
                        object: ev.object.key(),
                    },
                    Delivery {
                        watch_id: route.id.clone(),
                        event_type,
                        object: ev.object.clone(),
                        old: if event_type == EventType::Modified {
                            ev.old.clone()
                        } else {
                            None
                        },
                    },
                );
            }
        }
    }
}

/// A running host. Build with [`Host::start`], stop with [`Host::shutdown`].
pub struct Host {
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    manager_task: tokio::task::JoinHandle<()>,
    manager_cancel: CancellationToken,
    _dir_watch: Option<reload::DirWatch>,
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
        let engine = PluginEngine::new()?;
        let loader = Loader::new(engine, config.load.clone(), config.cache_dir.as_deref())?;
        let discovery = Arc::new(Discovery::new(client.clone()));
        let caches = Arc::new(Caches::default());
        let applier = Arc::new(Applier::new(client.clone(), discovery.clone()));
        let (tx, mut rx) = mpsc::channel::<WatchEvent>(4096);
        let watches = WatchManager::new(
            client.clone(),
            discovery,
            caches.clone(),
            config.watch.clone(),
            tx,
            metrics.clone(),
        );
        let shared = Arc::new(Shared {
            dir: config.plugins_dir.clone(),
            loader,
            queue_config: config.queue.clone(),
            applier,
            caches,
            watches: watches.clone(),
            env: RwLock::new(Arc::new(Environment::default())),
            files: tokio::sync::Mutex::new(BTreeMap::new()),
            workers: Mutex::new(Vec::new()),
            status: RwLock::new(PluginStatus::default()),
            loaded_once: std::sync::atomic::AtomicBool::new(false),
            metrics: metrics.clone(),
            quarantine: config.quarantine,
            leadership: config.leadership.clone(),
            recorder: config.event_interval.map(|interval| {
                Arc::new(EventRecorder::new(
                    client.clone(),
                    config.identity.clone(),
                    interval,
                ))
            }),
        });

        // Follow the directory from before the first scan, so no change slips between them.
        let dir_watch = match config.reload_debounce {
            Some(debounce) => Some(reload::watch_dir(&config.plugins_dir, debounce)?),
            None => None,
        };
        shared.reconcile().await;
        if shared.env().plugins.is_empty() {
            tracing::warn!(dir = %config.plugins_dir.display(), "no plugins loaded");
        }

        let manager_cancel = CancellationToken::new();
        let manager_task = tokio::spawn(watches.run(manager_cancel.clone()));
        let cancel = CancellationToken::new();
        let mut tasks = Vec::new();

        let router_shared = shared.clone();
        let router_cancel = cancel.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = router_cancel.cancelled() => break,
                    ev = rx.recv() => match ev {
                        Some(ev) => router_shared.route(&ev),
                        None => break,
                    },
                }
            }
        }));

        let leader_shared = shared.clone();
        let leader_cancel = cancel.clone();
        let mut leader_rx = config.leadership.subscribe();
        tasks.push(tokio::spawn(async move {
            let mut was = *leader_rx.borrow_and_update();
            leader_shared.metrics.leader.set(i64::from(was));
            loop {
                tokio::select! {
                    _ = leader_cancel.cancelled() => break,
                    changed = leader_rx.changed() => if changed.is_err() { break },
                }
                let now = *leader_rx.borrow_and_update();
                leader_shared.metrics.leader.set(i64::from(now));
                if now && !was {
                    tracing::info!("leading: re-delivering every cached object to every plugin");
                    leader_shared.replay_all();
                }
                was = now;
            }
        }));

        let gauge_shared = shared.clone();
        let gauge_cancel = cancel.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = gauge_cancel.cancelled() => break,
                    _ = tick.tick() => {}
                }
                for (name, active) in &gauge_shared.env().plugins {
                    gauge_shared
                        .metrics
                        .queue_depth
                        .get_or_create(&PluginLabel {
                            plugin: name.clone(),
                        })
                        .set(active.queue.depth() as i64);
                }
            }
        }));

        let (dir_watch, notifications) = match dir_watch {
            Some((w, rx)) => (Some(w), Some(rx)),
            None => (None, None),
        };
        if notifications.is_some() || config.rescan_interval.is_some() {
            let reload_shared = shared.clone();
            let reload_cancel = cancel.clone();
            let mut notifications = notifications;
            let rescan = config.rescan_interval;
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = reload_cancel.cancelled() => break,
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
                    reload_shared.reconcile().await;
                }
            }));
        }

        Ok(Host {
            shared,
            cancel,
            tasks,
            manager_task,
            manager_cancel,
            _dir_watch: dir_watch,
        })
    }

    /// Names of the plugins at work.
    pub fn plugins(&self) -> Vec<String> {
        self.shared.env().plugins.keys().cloned().collect()
    }

    /// Plugins, rejected files and reload count.
    pub fn status(&self) -> PluginStatus {
        self.shared
            .status
            .read()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Ready: the plugin directory was loaded once and every watched resource is served
    /// and its cache synced.
    pub fn ready(&self) -> bool {
        self.readiness_check()()
    }

    /// The readiness check as a closure, for the `/readyz` endpoint.
    pub fn readiness_check(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || {
            shared
                .loaded_once
                .load(std::sync::atomic::Ordering::Acquire)
                && shared.watches.ready()
        }
    }

    /// Stop taking events, let in-flight calls and applies finish, stop the watches.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        for a in self.shared.env().plugins.values() {
            a.queue.close();
        }
        let sets = self
            .shared
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CachedObject, ResourceKey};
    use crate::resource::TypeRef;
    use serde_json::json;

    fn obj(labels: serde_json::Value) -> Arc<CachedObject> {
        CachedObject::new(
            serde_json::from_value(json!({"apiVersion":"v1","kind":"ConfigMap",
                "metadata":{"name":"c","namespace":"a","labels":labels,"resourceVersion":"1"}}))
            .unwrap(),
        )
    }

    fn route(ns: Option<&str>, labels: Option<&str>) -> Route {
        Route::new(&Watch {
            id: "w".into(),
            resource: ResourceRef::Kind(TypeRef::new("v1", "ConfigMap")),
            namespace: ns.map(str::to_string),
            label_selector: labels.map(str::to_string),
            field_selector: None,
        })
    }

    fn ev(t: EventType, new: serde_json::Value, old: Option<serde_json::Value>) -> WatchEvent {
        WatchEvent {
            resource: ResourceKey {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
            },
            event_type: t,
            object: obj(new),
            old: old.map(obj),
        }
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let r = route(None, Some("app=web"));
        let m = |new, old| r.event_for(&ev(EventType::Modified, new, Some(old)));
        assert_eq!(
            m(json!({"app":"web"}), json!({"app":"web"})),
            Some(EventType::Modified)
        );
        assert_eq!(m(json!({"app":"web"}), json!({})), Some(EventType::Added));
        assert_eq!(m(json!({}), json!({"app":"web"})), Some(EventType::Deleted));
        assert_eq!(m(json!({}), json!({})), None);
        assert_eq!(r.event_for(&ev(EventType::Added, json!({}), None)), None);
        assert_eq!(
            r.event_for(&ev(EventType::Resync, json!({"app":"web"}), None)),
            Some(EventType::Resync)
        );
    }

    #[test]
    fn namespace_filter() {
        assert_eq!(
            route(Some("a"), None).event_for(&ev(EventType::Added, json!({}), None)),
            Some(EventType::Added)
        );
        assert_eq!(
            route(Some("b"), None).event_for(&ev(EventType::Added, json!({}), None)),
            None
        );
    }
}
