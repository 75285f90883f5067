//! Reconciling the plugin set with its sources: the plugin directory and the Plugin
//! objects. A file or object that changed is loaded and validated first; only a good
//! version replaces the running one, and one whose approval was narrowed below what it
//! uses is unloaded. The reloader computes the next [`Environment`] and what it takes
//! (replays, removals, the objects' status); the host swaps it in.
//!
//! The directory's plugins are approved by the operator's approvals (`--approvals`), read
//! on every reconcile: a plugin is looked at again when its file or its approval changes.
//! A Plugin object's approval is its own `spec.permissions`.
//!
//! Pulls and loads run apart from reconciles ([`Jobs`]): a reconcile starts the job of a
//! changed source (a file's load; a Plugin object's pull, then its load) and goes on; the
//! reconcile after the job ends takes its result. A source whose job runs keeps its running
//! version meanwhile, and a Plugin's status says `Pulling` or `Loading`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use kubewasm_core::grant::Approval;
use kubewasm_core::manifest::Manifest;
use kubewasm_runtime::Approvals;
use kubewasm_runtime::Loaded;
use kubewasm_runtime::{CompiledPlugin, Loader, PluginFile, plugin_files};

use crate::apply::identity::{AccessVerdict, AccountReviews};
use crate::event::{Health, QuarantinePolicy};
use crate::plugins::compiles::{COMPILE_SLOTS, Jobs, Outcome, Progress};

mod decide;

use self::decide::{
    Action, FileJob, Item, Job, Look, Looked, Newest, ObjectJob, ObjectLoad, Serving, SourceState,
    decide, gone,
};
use crate::plugins::environment::{Active, Environment, Origin, PluginStatus, Swaps, Version};
use crate::plugins::objects::{
    Candidate, CandidateState, Failure, Fetch, ObjectSource, ObjectState, Pulled, STAGE_LOADING,
};
use crate::plugins::replay::Replay;
use crate::serve::metrics::{InfoLabels, Metrics};
use crate::watch::cache::CachedObject;
use kubewasm_core::sync::write;

/// A plugin that came into effect, for the log.
enum Announcement {
    Loaded {
        name: String,
        version: String,
        how: &'static str,
        took: std::time::Duration,
        file: String,
        watches: usize,
    },
    Replaced {
        name: String,
        from: String,
        to: String,
        how: &'static str,
        took: std::time::Duration,
        file: String,
    },
}

impl Announcement {
    fn log(self) {
        match self {
            Announcement::Loaded {
                name,
                version,
                how,
                took,
                file,
                watches,
            } => {
                tracing::info!(plugin = %name, version = %version, how, took_ms = crate::millis(took),
                source = %file, watches, "plugin loaded")
            }
            Announcement::Replaced {
                name,
                from,
                to,
                how,
                took,
                file,
            } => {
                tracing::info!(plugin = %name, from = %from, to = %to, how, took_ms = crate::millis(took),
                source = %file, "plugin replaced")
            }
        }
    }
}

/// The next plugin set, and what it takes to get there.
pub(crate) struct Reconciled {
    /// The environment to swap in (its routes not resolved yet).
    pub(crate) env: Environment,
    /// Plugins whose cached objects must be replayed.
    pub(crate) replays: Vec<Replay>,
    /// Plugins no longer at work: their queues are to be closed.
    pub(crate) removed: Vec<Active>,
    /// Said once the new environment is in effect, so "loaded" and "replaced" are true
    /// when they are read.
    announced: Vec<Announcement>,
    /// Where each Plugin object stands (None: objects were not reconciled this time).
    pub(crate) objects: Option<BTreeMap<String, ObjectState>>,
    /// Loads the reconcile left running.
    pub(crate) loading: Loading,
    /// A shadow candidate came, went or was replaced.
    shadows_changed: bool,
}

/// Which sources' loads a reconcile left running.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Loading {
    /// A file of the plugin directory.
    pub(crate) files: bool,
    /// A Plugin object.
    pub(crate) objects: bool,
}

impl Reconciled {
    /// Whether anything changed.
    pub(crate) fn changed(&self) -> bool {
        !(self.replays.is_empty() && self.removed.is_empty()) || self.shadows_changed
    }

    /// Log what came into effect.
    pub(crate) fn announce(&mut self) {
        for a in self.announced.drain(..) {
            a.log();
        }
    }
}

/// Loads the plugin sources and works out the next environment from them.
pub(crate) struct Reloader {
    dir: Option<PathBuf>,
    /// The operator's approvals file or directory; None: nothing is approved.
    approvals_path: Option<PathBuf>,
    /// The approvals last read well, kept while the file cannot be read (mid-write), and
    /// the error that says so.
    approvals: tokio::sync::Mutex<(Approvals, Option<String>)>,
    objects: Option<Arc<ObjectSource>>,
    loader: Arc<Loader>,
    /// The files' loads.
    compiles: Jobs<FileJob<Loaded>>,
    /// The Plugin objects' pulls and loads.
    fetches: Jobs<ObjectJob<Loaded>>,
    /// Loads running at once, files and objects together ([`COMPILE_SLOTS`]).
    compile_slots: Arc<Semaphore>,
    /// A job ended (or a pull turned into a load): a reconcile takes its result.
    finished: Arc<Notify>,
    quarantine: QuarantinePolicy,
    metrics: Arc<Metrics>,
    sources: tokio::sync::Mutex<BTreeMap<Origin, SourceState>>,
    /// What the sources came to, as of the last reconcile (what serves is the
    /// environment's, never kept here).
    reported: RwLock<Reported>,
    /// Where each Plugin object stood after the last reconcile of the objects.
    object_states: RwLock<BTreeMap<String, ObjectState>>,
    loaded_once: AtomicBool,
    /// The earliest retry due, as of the last reconcile.
    next_retry: RwLock<Option<tokio::time::Instant>>,
    /// Whether each plugin's own ServiceAccount may read what it is approved to; None:
    /// plugins act as the host (`--no-impersonation`), nothing to ask.
    reviews: Option<Arc<AccountReviews>>,
}

impl Reloader {
    pub(crate) fn new(
        dir: Option<PathBuf>,
        approvals_path: Option<PathBuf>,
        objects: Option<ObjectSource>,
        loader: Loader,
        quarantine: QuarantinePolicy,
        metrics: Arc<Metrics>,
        reviews: Option<Arc<AccountReviews>>,
    ) -> Self {
        let loader = Arc::new(loader);
        let finished = Arc::new(Notify::new());
        Reloader {
            dir,
            approvals_path,
            approvals: tokio::sync::Mutex::new((Approvals::none(), None)),
            objects: objects.map(Arc::new),
            compiles: Jobs::new(finished.clone()),
            fetches: Jobs::new(finished.clone()),
            compile_slots: Arc::new(Semaphore::new(COMPILE_SLOTS)),
            finished,
            loader,
            quarantine,
            metrics,
            sources: tokio::sync::Mutex::new(BTreeMap::new()),
            reported: RwLock::new(Reported::default()),
            object_states: RwLock::new(BTreeMap::new()),
            loaded_once: AtomicBool::new(false),
            next_retry: RwLock::new(None),
            reviews,
        }
    }

    /// Before the next reconcile: ask again whether each plugin's account may read what
    /// it is approved to (what was allowed is forgotten), and look again at the sources
    /// refused for it.
    pub(crate) async fn review_access_again(&self) {
        let Some(reviews) = &self.reviews else {
            return;
        };
        reviews.forget();
        for state in self.sources.lock().await.values_mut() {
            if state.access_refused {
                state.fingerprint.clear();
            }
        }
    }

    /// A new version of a plugin from `origin`: healthy, so not quarantined.
    fn version(
        &self,
        plugin: Arc<CompiledPlugin>,
        approval: Option<&Approval>,
        origin: &Origin,
    ) -> Arc<Version> {
        self.metrics.set_quarantined(plugin.name(), false);
        Arc::new(Version::new(
            plugin,
            Health::new(self.quarantine),
            Arc::new(approval.map(Approval::read_scopes).unwrap_or_default()),
            origin.clone(),
            approval.map(|a| a.mode).unwrap_or_default(),
        ))
    }

    /// The plugin sources, loaded once.
    pub(crate) fn loaded_once(&self) -> bool {
        self.loaded_once.load(Ordering::Acquire)
    }

    /// Where each Plugin object stood after the last reconcile of the objects.
    pub(crate) fn object_states(&self) -> BTreeMap<String, ObjectState> {
        kubewasm_core::sync::read(&self.object_states).clone()
    }

    /// When a failed pull is to be tried again (None: none is).
    pub(crate) fn next_retry(&self) -> Option<tokio::time::Instant> {
        *kubewasm_core::sync::read(&self.next_retry)
    }

    /// Wait until a job has ended (or a pull turned into a load) since the last wait: a
    /// reconcile takes its result.
    pub(crate) async fn load_finished(&self) {
        self.finished.notified().await
    }

    /// Forget resolved tags: the next reconcile asks the registries again.
    pub(crate) fn rescan(&self) {
        if let Some(o) = &self.objects {
            o.forget_tags();
        }
    }

    /// Plugins at work in `env` (the one source of truth for what serves), with the
    /// rejected sources, the missing reads and the reload count as of the last reconcile.
    pub(crate) fn status(&self, env: &Environment) -> PluginStatus {
        let reported = kubewasm_core::sync::read(&self.reported).clone();
        PluginStatus {
            loaded: env.loaded(),
            rejected: reported.rejected,
            reloads: reported.reloads,
            missing_reads: reported.missing_reads,
        }
    }

    /// The approvals as they are now. An approvals file that cannot be read or parsed
    /// (mid-write, a YAML slip) keeps the last ones read well, with the error logged once
    /// and reported as rejected: half a file must not unload every plugin.
    async fn approvals(&self) -> (Approvals, Option<(String, String)>) {
        let Some(path) = &self.approvals_path else {
            return (Approvals::none(), None);
        };
        let mut last = self.approvals.lock().await;
        match Approvals::read(path) {
            Ok(a) => {
                *last = (a, None);
            }
            Err(e) => {
                let e = e.to_string();
                if last.1.as_deref() != Some(e.as_str()) {
                    tracing::error!(error = %e, "cannot read the approvals; keeping those last read");
                }
                last.1 = Some(e);
            }
        }
        let error = last.1.clone().map(|e| (path.display().to_string(), e));
        (last.0.clone(), error)
    }

    /// The newest version of every file of the plugin directory (None: it cannot be
    /// listed, so keep what runs), under the operator's `approvals`.
    fn file_items(
        &self,
        known: &BTreeMap<Origin, SourceState>,
        approvals: &Approvals,
    ) -> Option<Vec<Item>> {
        let dir = self.dir.as_ref()?;
        let listing = match plugin_files(dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the plugin directory; keeping the running plugins");
                return None;
            }
        };
        let items = listing
            .into_iter()
            .map(|path| file_item(path, known, approvals))
            .collect();
        Some(items)
    }

    /// The newest version of every Plugin object and of its shadow candidate: nothing
    /// here waits on a registry.
    fn object_items(
        &self,
        source: &ObjectSource,
        objects: &[Arc<CachedObject>],
        known: &BTreeMap<Origin, SourceState>,
    ) -> Vec<Item> {
        let unchanged =
            |origin: &Origin, fp: &str| known.get(origin).is_some_and(|s| s.unchanged(fp));
        // What a fetch may find again and skip: the version last looked at, unless its
        // pull failed (a retry must pull).
        let looked_at = |origin: &Origin| {
            known
                .get(origin)
                .filter(|s| s.retry_at.is_none())
                .map(|s| s.fingerprint.clone())
                .unwrap_or_default()
        };
        source
            .candidates(objects, unchanged, looked_at)
            .into_iter()
            .map(|c: Candidate| {
                let Candidate {
                    origin,
                    name,
                    generation,
                    pulled,
                    fingerprint,
                    previous,
                    approval,
                } = c;
                let newest = match pulled {
                    Pulled::Unchanged => Newest::Unchanged,
                    Pulled::Fetch(fetch) => Newest::Fetch(fetch, approval.clone()),
                    Pulled::Failed(failure) => {
                        // Registry trouble is retried at the next reconcile; a spec that
                        // cannot work waits for the next change.
                        let retry = failure.retry();
                        Newest::Failed { failure, retry }
                    }
                };
                Item {
                    origin,
                    fingerprint,
                    newest,
                    approval_now: approval,
                    object: Some((generation, previous)),
                    account: Some(name),
                }
            })
            .collect()
    }

    /// The environment that follows `current` from the plugin sources: new versions of
    /// changed files and objects (good ones only), new ones, ones gone. `activate` puts a
    /// new plugin to work (its queue and workers). `objects` are the Plugin objects of a
    /// synced cache; None leaves the objects' plugins as they are.
    pub(crate) async fn reconcile(
        &self,
        current: &Environment,
        activate: impl Fn(Arc<Version>) -> Active + Sync,
        objects: Option<Vec<Arc<CachedObject>>>,
    ) -> Reconciled {
        let mut sources = self.sources.lock().await;
        let mut next = Reconciled {
            env: current.clone(),
            replays: Vec::new(),
            removed: Vec::new(),
            announced: Vec::new(),
            objects: None,
            loading: Loading::default(),
            shadows_changed: false,
        };
        let (approvals, approvals_error) = self.approvals().await;
        let files = self.file_items(&sources, &approvals);
        tracing::debug!(
            files = files.as_ref().map(|f| f.len()),
            "reconciling the plugin sources"
        );
        let objects = match (&self.objects, &objects) {
            (Some(source), Some(list)) => Some(self.object_items(source, list, &sources)),
            _ => None,
        };
        // Sources of a kind not looked at this time stay as they are.
        let looked_at = Looked {
            files: files.is_some(),
            objects: objects.is_some(),
        };
        let items: Vec<Item> = files.into_iter().chain(objects).flatten().collect();
        let mut listed: HashSet<Origin> = HashSet::new();
        for item in items {
            listed.insert(item.origin.clone());
            let origin = item.origin.clone();
            let item = self.confine(item).await;
            let access = self.review(&item).await;
            if self.consider(item, access, &mut sources, &mut next, &activate) {
                match origin {
                    Origin::File(_) => next.loading.files = true,
                    Origin::Object(_) | Origin::Shadow(_) | Origin::Namespaced { .. } => {
                        next.loading.objects = true
                    }
                }
            }
        }
        self.remove_gone(&mut sources, &listed, looked_at, &mut next);
        self.report(&sources, approvals_error);
        if looked_at.objects {
            self.report_objects(&sources, &mut next);
        }
        next
    }

    /// Sources that disappeared (of a kind looked at) take their plugin with them.
    fn remove_gone(
        &self,
        sources: &mut BTreeMap<Origin, SourceState>,
        listed: &HashSet<Origin>,
        looked_at: Looked,
        next: &mut Reconciled,
    ) {
        for origin in gone(sources, listed, looked_at) {
            // A Plugin deleted during its pull: the pull stops.
            self.compiles.discard(&origin);
            self.fetches.discard(&origin);
            let Some(name) = next.env.served_from(&origin).map(str::to_string) else {
                continue;
            };
            if let Origin::Shadow(_) = origin {
                if let Some(v) = next.env.shadows.remove(&name) {
                    tracing::info!(plugin = %name, candidate = %v.plugin.manifest.version, "candidate removed: the shadow stops");
                    next.shadows_changed = true;
                }
            } else if let Some(active) = next.env.plugins.remove(&name) {
                tracing::info!(plugin = %name, version = %active.plugin().manifest.version, source = %origin, "plugin removed");
                next.removed.push(active);
            }
        }
    }

    /// Publish what the sources came to: the rejected ones (and an approvals file that
    /// cannot be read), the reads their accounts lack, and the next retry due.
    fn report(
        &self,
        sources: &BTreeMap<Origin, SourceState>,
        approvals_error: Option<(String, String)>,
    ) {
        let rejected = sources
            .iter()
            .filter_map(|(o, s)| s.rejected.clone().map(|r| (o.to_string(), r)))
            .chain(approvals_error)
            .collect();
        {
            let mut reported = write(&self.reported);
            reported.rejected = rejected;
            reported.missing_reads = sources
                .iter()
                .filter(|(_, s)| !s.missing_reads.is_empty())
                .map(|(o, s)| (o.to_string(), s.missing_reads.clone()))
                .collect();
        }
        *write(&self.next_retry) = sources
            .values()
            .filter(|s| !s.running)
            .filter_map(|s| s.retry_at)
            .min();
    }

    /// Where each Plugin object stands after this reconcile (for their status).
    fn report_objects(&self, sources: &BTreeMap<Origin, SourceState>, next: &mut Reconciled) {
        let states: BTreeMap<String, ObjectState> = sources
            .iter()
            .filter_map(|(o, s)| match o {
                Origin::Object(name) => Some((name.clone(), object_state(o, s, &next.env))),
                Origin::Namespaced { namespace, name } => {
                    Some((format!("{namespace}/{name}"), object_state(o, s, &next.env)))
                }
                Origin::File(_) | Origin::Shadow(_) => None,
            })
            .collect();
        let mut states = states;
        for (o, s) in sources {
            if let Origin::Shadow(name) = o
                && let Some(state) = states.get_mut(name)
            {
                state.candidate = Some(candidate_state(s));
            }
        }
        *write(&self.object_states) = states.clone();
        next.objects = Some(states);
    }

    /// A NamespacedPlugin whose approval names a cluster-scoped kind, as discovery says,
    /// approves nothing and is refused (`ClusterScopedKind`) before its pull; any other
    /// item as it is.
    async fn confine(&self, mut item: Item) -> Item {
        let (Some(source), Some(ns)) = (&self.objects, item.origin.tenant()) else {
            return item;
        };
        let Some(approval) = &item.approval_now else {
            return item;
        };
        if let Some(failure) = source.cluster_scoped(ns, approval).await {
            item.newest = Newest::Failed {
                failure,
                retry: false,
            };
            item.approval_now = Some(Approval::default());
        }
        item
    }

    /// Whether the plugin of `item` may read, as its own ServiceAccount, what its
    /// approval in force lets it read (None: nothing to ask).
    async fn review(&self, item: &Item) -> Option<AccessVerdict> {
        let reviews = self.reviews.as_ref()?;
        let name = item.account.as_deref()?;
        let approval = item.approval_now.as_ref()?;
        Some(reviews.review(name, approval).await)
    }

    /// Look at one source ([`decide`]) and carry out what it decides: load its newest
    /// version when it changed, put it to work when it is good; unload what runs when its
    /// approval no longer covers it, or when its ServiceAccount may no longer read what
    /// the approval lets it read (`access`). True while its load runs (the reconcile
    /// after it ends takes the result).
    fn consider(
        &self,
        item: Item,
        access: Option<AccessVerdict>,
        sources: &mut BTreeMap<Origin, SourceState>,
        next: &mut Reconciled,
        activate: &(dyn Fn(Arc<Version>) -> Active + Sync),
    ) -> bool {
        let (origin, fingerprint) = (item.origin.clone(), item.fingerprint.clone());
        let look = Look {
            job: self.job(&item),
            item,
            access,
            pull_timeout: self
                .objects
                .as_ref()
                .map_or(Duration::ZERO, |o| o.pull_timeout()),
        };
        let state = sources.entry(origin.clone()).or_default();
        let shadow = matches!(origin, Origin::Shadow(_));
        let decision = match shadow {
            true => decide(state, look, &Shadows(&next.env)),
            false => decide(state, look, &next.env),
        };
        for action in decision.actions {
            match action {
                Action::Discard => {
                    self.compiles.discard(&origin);
                    self.fetches.discard(&origin);
                }
                Action::Start(newest) => self.start(&origin, &fingerprint, newest),
                Action::Unload(name) if shadow => {
                    next.shadows_changed |= next.env.shadows.remove(&name).is_some();
                }
                Action::Unload(name) => {
                    if let Some(active) = next.env.plugins.remove(&name) {
                        next.removed.push(active);
                    }
                }
                Action::Serve(loaded, approval) if shadow => {
                    self.shadow(&origin, loaded, approval.as_ref(), next)
                }
                Action::Serve(loaded, approval) => {
                    self.serve(&origin, loaded, approval.as_ref(), next, activate)
                }
            }
        }
        decision.running
    }

    /// Where the job of `item`'s newest version stands; a result is taken.
    fn job(&self, item: &Item) -> Job<Loaded> {
        let outcome = match &item.newest {
            Newest::Read(..) => self.compiles.peek(&item.origin, &item.fingerprint),
            Newest::Fetch(fetch, _) => {
                return match self.fetches.peek(&item.origin, fetch.key()) {
                    Some(Outcome::Done(job)) => Job::Fetched(*job),
                    Some(Outcome::Running(stage)) => Job::Running(stage),
                    None => Job::None,
                };
            }
            Newest::Unchanged | Newest::Failed { .. } => None,
        };
        match outcome {
            Some(Outcome::Done(loaded)) => Job::Loaded(*loaded),
            Some(Outcome::Running(stage)) => Job::Running(stage),
            None => Job::None,
        }
    }

    /// Start the job of `origin`'s newest version: a file's load, or a Plugin object's
    /// pull and load (a job of an older version stops).
    fn start(&self, origin: &Origin, fingerprint: &str, newest: Newest) {
        let (loader, slots) = (self.loader.clone(), self.compile_slots.clone());
        match newest {
            Newest::Read(file, _) => {
                let job = |_: Progress| async move {
                    // Never closed: a closed semaphore would only lift the bound.
                    let _slot = slots.acquire_owned().await.ok();
                    loader.load(*file).await.map_err(|e| e.to_string())
                };
                self.compiles.start(origin, fingerprint, job);
            }
            Newest::Fetch(fetch, _) => {
                let Some(source) = self.objects.clone() else {
                    return;
                };
                let key = fetch.key().to_string();
                let job = |progress: Progress| object_job(source, *fetch, loader, slots, progress);
                self.fetches.start(origin, &key, job);
            }
            Newest::Unchanged | Newest::Failed { .. } => {}
        }
    }

    /// Put `loaded` to work under its name: it replaces the version serving under that
    /// name (the queue stays; the new version, healthy, serves its next events), or
    /// starts with a queue of its own.
    fn serve(
        &self,
        origin: &Origin,
        loaded: Loaded,
        approval: Option<&Approval>,
        next: &mut Reconciled,
        activate: &(dyn Fn(Arc<Version>) -> Active + Sync),
    ) {
        let plugin = Arc::new(loaded.plugin);
        let name = plugin.name().to_string();
        let (how, took, file) = (loaded.source.as_str(), loaded.took, origin.to_string());
        let version = self.version(plugin.clone(), approval, origin);
        let env = &mut next.env;
        match env.plugins.get(&name) {
            Some(active) => {
                next.announced.push(Announcement::Replaced {
                    name: name.clone(),
                    from: active.plugin().manifest.version.clone(),
                    to: plugin.manifest.version.clone(),
                    how,
                    took,
                    file,
                });
                let replaced = Active::new(version, active.queue.clone());
                env.plugins.insert(name.clone(), replaced);
                next.replays.push(Replay::Replaced(name));
            }
            None => {
                next.announced.push(Announcement::Loaded {
                    name: name.clone(),
                    version: plugin.manifest.version.clone(),
                    how,
                    took,
                    file,
                    watches: plugin.manifest.watches.len(),
                });
                env.plugins.insert(name.clone(), activate(version));
                next.replays.push(Replay::Added(name));
            }
        }
    }

    /// Run `loaded` as the shadow candidate of its plugin (replacing the one before, if
    /// any), in dry run whatever its approval's mode.
    fn shadow(
        &self,
        origin: &Origin,
        loaded: Loaded,
        approval: Option<&Approval>,
        next: &mut Reconciled,
    ) {
        let plugin = Arc::new(loaded.plugin);
        let name = plugin.name().to_string();
        let mut approval = approval.cloned().unwrap_or_default();
        approval.mode = kubewasm_core::grant::Mode::DryRun;
        let version = self.version(plugin.clone(), Some(&approval), origin);
        tracing::info!(plugin = %name, candidate = %plugin.manifest.version, how = loaded.source.as_str(),
            took_ms = crate::millis(loaded.took), source = %origin, "candidate loaded: runs beside the serving version, in dry run");
        next.env.shadows.insert(name, version);
        next.shadows_changed = true;
    }

    /// After `env` took effect: drop compiled code no plugin uses, and publish the
    /// metrics. `swaps`: how the versions serving changed with it (what
    /// `kubewasm_reloads_total` counts). `loading`: what the reconcile left loading (the
    /// directory counts as loaded once none of its files' loads runs).
    pub(crate) fn took_effect(
        &self,
        env: &Environment,
        changed: bool,
        swaps: Swaps,
        loading: Loading,
    ) {
        let metrics = &self.metrics;
        if changed {
            self.loader.retain(&env.digests());
        }
        write(&self.reported).reloads += swaps.total();
        metrics.reloaded("added", swaps.added);
        metrics.reloaded("replaced", swaps.replaced);
        metrics.reloaded("removed", swaps.removed);
        let rejected = kubewasm_core::sync::read(&self.reported).rejected.len();
        metrics.rejected_files.set(rejected as i64);
        metrics.plugin_info.clear();
        for (plugin, (version, _)) in env.loaded() {
            metrics.declare_plugin(&plugin);
            metrics
                .plugin_info
                .get_or_create(&InfoLabels { plugin, version })
                .set(1);
        }
        if !loading.files {
            self.loaded_once.store(true, Ordering::Release);
        }
    }
}

/// What the sources came to as of the last reconcile, for the host's status.
#[derive(Clone, Default)]
struct Reported {
    /// Sources whose newest version was rejected, with the reason.
    rejected: BTreeMap<String, String>,
    /// Plugins added, replaced or removed ([`Swaps`]).
    reloads: u64,
    /// Sources refused (or unloaded) for read rules their plugin's account lacks.
    missing_reads: BTreeMap<String, Vec<String>>,
}

impl Serving for Environment {
    fn serving(&self, name: &str) -> Option<(&Manifest, String)> {
        let plugin = self.plugins.get(name)?.plugin();
        Some((&plugin.manifest, plugin.path.display().to_string()))
    }

    fn served_from(&self, origin: &Origin) -> Option<String> {
        Environment::served_from(self, origin).map(str::to_string)
    }
}

/// The environment as a shadow candidate's decision sees it: the candidates at work.
struct Shadows<'a>(&'a Environment);

impl Serving for Shadows<'_> {
    fn serving(&self, name: &str) -> Option<(&Manifest, String)> {
        let v = self.0.shadows.get(name)?;
        Some((&v.plugin.manifest, v.origin.to_string()))
    }

    fn served_from(&self, origin: &Origin) -> Option<String> {
        self.0.served_from(origin).map(str::to_string)
    }
}

/// Where a Plugin's shadow candidate stands, from its source's state.
fn candidate_state(s: &SourceState) -> CandidateState {
    CandidateState {
        busy: s.object.busy.as_ref().map(|(_, busy)| busy.clone()),
        failure: s.object.failure.clone(),
        serving: s.object.serving_module.clone().map(|(pinned, _)| pinned),
    }
}

/// The newest version of the plugin file at `path`, under the operator's `approvals`.
fn file_item(path: PathBuf, known: &BTreeMap<Origin, SourceState>, approvals: &Approvals) -> Item {
    let origin = Origin::File(path.clone());
    let mut file = match PluginFile::read(&path) {
        Ok(file) => file,
        // Unreadable now (e.g. mid-write, or bad settings): keep what runs.
        Err(e) => {
            return Item {
                fingerprint: format!("unreadable: {e}"),
                newest: Newest::Failed {
                    failure: Failure::new("Unreadable", e.to_string()),
                    retry: false,
                },
                origin,
                approval_now: None,
                object: None,
                account: None,
            };
        }
    };
    // Looked up by the name the plugin must give itself.
    let name = file.name();
    let fingerprint = format!("{}/{}", file.fingerprint(), approvals.fingerprint_of(&name));
    // Nothing approved, or an approval that cannot be used, approves nothing: what runs
    // from this file must fit that.
    let approval_now = match approvals.problem(&name) {
        Some(_) => Approval::default(),
        None => approvals.get(&name).cloned().unwrap_or_default(),
    };
    let newest = if known
        .get(&origin)
        .is_some_and(|s| s.unchanged(&fingerprint))
    {
        Newest::Unchanged
    } else if let Some(problem) = approvals.problem(&name) {
        Newest::Failed {
            failure: Failure::new(
                "ApprovalUnusable",
                format!("plugin {name}: its approval cannot be used: {problem}"),
            ),
            retry: false,
        }
    } else {
        if let Some(limits) = approvals.limits(&name) {
            file.overrides = limits.clone();
        }
        Newest::Read(Box::new(file), approvals.get(&name).cloned())
    };
    Item {
        origin,
        fingerprint,
        newest,
        approval_now: Some(approval_now),
        object: None,
        account: Some(name),
    }
}

/// A Plugin object's job: pull its module (a pull slot, `--pull-timeout`), then load it
/// (a compile slot), so neither a stalling registry nor a slow compile holds a reconcile.
async fn object_job(
    source: Arc<ObjectSource>,
    fetch: Fetch,
    loader: Arc<Loader>,
    slots: Arc<Semaphore>,
    progress: Progress,
) -> ObjectJob<Loaded> {
    let fetched = source.fetch(fetch, progress.clone()).await;
    let result = match fetched.result {
        Err(failure) => Err(failure),
        Ok(None) => Ok(None),
        Ok(Some(module)) => {
            progress.stage(STAGE_LOADING);
            // Never closed: a closed semaphore would only lift the bound.
            let _slot = slots.acquire_owned().await.ok();
            let loaded = loader.load(module.file).await.map_err(|e| e.to_string());
            Ok(Some(ObjectLoad {
                pinned: module.pinned,
                digest: module.digest,
                moved: module.moved,
                loaded,
            }))
        }
    };
    ObjectJob {
        fingerprint: fetched.fingerprint,
        result,
    }
}

/// Where a Plugin object stands, from its source's state and the environment.
fn object_state(origin: &Origin, s: &SourceState, env: &Environment) -> ObjectState {
    let serving = env.served_from(origin).and_then(|name| {
        let active = env.plugins.get(name)?;
        let (pinned, digest) = s.object.serving_module.clone()?;
        Some((pinned, digest, active.plugin().manifest.version.clone()))
    });
    ObjectState {
        generation: s
            .object
            .busy
            .as_ref()
            .map_or(s.object_generation, |(generation, _)| *generation),
        busy: s.object.busy.as_ref().map(|(_, busy)| busy.clone()),
        moved: s.object.moved.clone(),
        serving,
        failure: s.object.failure.clone(),
        pulled: s.object.pulled,
        approved: s.object.approved.clone(),
        requested: s.object.requested.clone(),
        previous: s.object_previous.clone(),
        candidate: None,
        waiting_for: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::{LoadOptions, PluginEngine};

    /// Plugin name → the version serving (its identity), as a replica saw it after each
    /// environment swap.
    type Serving = BTreeMap<String, u32>;

    fn serving(pairs: &[(&str, u32)]) -> Serving {
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    /// `kubewasm_reloads_total` of a replica that went through `history`, each swap taken
    /// as `Plugins::reload` and `Plugins::promote_staged` take it (`took_effect` with how
    /// the versions serving changed).
    fn reloads_after(history: &[Serving]) -> (String, u64) {
        let metrics = Arc::new(Metrics::new());
        let engine = PluginEngine::new().expect("engine");
        let loader = Loader::new(engine, LoadOptions::default(), None).expect("loader");
        let reloader = Reloader::new(
            None,
            None,
            None,
            loader,
            QuarantinePolicy::default(),
            metrics.clone(),
            None,
        );
        let env = Environment::default();
        for swap in history.windows(2) {
            let swaps = Swaps::of(&swap[0], &swap[1]);
            reloader.took_effect(&env, true, swaps, Loading::default());
        }
        let text = metrics.encode();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("kubewasm_reloads_total"))
            .collect();
        (lines.join("\n"), reloader.status(&env).reloads)
    }

    /// Issue 33, item 12: two replicas of one Deployment, the same plugins loaded (two
    /// files of a ConfigMap, one Plugin object, then the ConfigMap swapped once), reported
    /// `kubewasm_reloads_total` 3 and 4. It counted environment swaps, and how many swaps
    /// carry the same loads depends on when each load ends on each replica (one reconcile
    /// takes whatever loads have ended), and on whether a new version is staged before it
    /// serves (a swap that changes what is staged, then the promotion). It counts the
    /// versions that start and stop serving now, by change, the same on every replica.
    #[test]
    fn replicas_count_the_same_reloads_for_the_same_loads() {
        let start = serving(&[]);
        let files = serving(&[("a", 1), ("b", 2)]);
        let object = serving(&[("a", 1), ("b", 2), ("c", 3)]);
        let swapped = serving(&[("a", 4), ("b", 2), ("c", 3)]);
        // Both files' loads ended before one reconcile.
        let one = [
            start.clone(),
            files.clone(),
            object.clone(),
            swapped.clone(),
        ];
        // a's load ended first; b's in the next reconcile.
        let two = [
            start.clone(),
            serving(&[("a", 1)]),
            files.clone(),
            object.clone(),
            swapped.clone(),
        ];
        // b's load and the Plugin object's pull ended together; the new version of a was
        // staged (what serves did not change) and promoted once its caches synced.
        let three = [start, serving(&[("a", 1)]), object.clone(), object, swapped];
        // Sorted, as compared.
        let expected = "kubewasm_reloads_total{change=\"added\"} 3\n\
                        kubewasm_reloads_total{change=\"removed\"} 0\n\
                        kubewasm_reloads_total{change=\"replaced\"} 1";
        let counts: Vec<(String, u64)> = [&one[..], &two[..], &three[..]]
            .into_iter()
            .map(|history| {
                let (lines, status) = reloads_after(history);
                let mut sorted: Vec<&str> = lines.lines().collect();
                sorted.sort();
                (sorted.join("\n"), status)
            })
            .collect();
        assert_eq!(counts[0], counts[1], "replicas one and two");
        assert_eq!(counts[0], counts[2], "replicas one and three");
        assert_eq!(counts[0], (expected.to_string(), 4), "what each counts");
    }

    #[test]
    fn a_removed_plugin_and_a_new_version_of_the_same_name_are_told_apart() {
        let before = serving(&[("a", 1), ("b", 2)]);
        let after = serving(&[("a", 3), ("c", 4)]);
        assert_eq!(
            Swaps::of(&before, &after),
            Swaps {
                added: 1,
                replaced: 1,
                removed: 1
            }
        );
        assert_eq!(Swaps::of(&before, &before), Swaps::default());
    }
}
