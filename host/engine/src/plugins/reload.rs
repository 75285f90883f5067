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
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::{Notify, Semaphore};

use kubewasm_core::grant::{Approval, approve, check_approval, still_fits};
use kubewasm_core::manifest::Manifest;
use kubewasm_core::plugin_object::Permissions;
use kubewasm_runtime::approval::Approvals;
use kubewasm_runtime::loader::Loaded;
use kubewasm_runtime::{CompiledPlugin, Loader, PluginFile, loader};

use crate::Error;
use crate::apply::identity::{AccessVerdict, AccountReviews};
use crate::event::{Health, QuarantinePolicy};
use crate::plugins::compiles::{COMPILE_SLOTS, Jobs, Outcome, Progress};
use crate::plugins::environment::{Active, Environment, PluginStatus, Version};
use crate::plugins::objects::{
    Busy, Candidate, Failure, Fetch, ObjectSource, ObjectState, Pulled, STAGE_LOADING,
    STAGE_PULLING, TagMove,
};
use crate::plugins::replay::Replay;
use crate::serve::metrics::{InfoLabels, Metrics};
use crate::watch::cache::CachedObject;
use kubewasm_core::sync::write;

/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Origin {
    /// A `.wasm` file of the plugin directory.
    File(PathBuf),
    /// A Plugin object, by name.
    Object(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Object(name) => write!(f, "plugins.kubewasm.dev/{name}"),
        }
    }
}

/// What the reloader knows about one source of a plugin.
#[derive(Default)]
struct SourceState {
    /// Fingerprint of the last version looked at (loaded or rejected); empty: look again.
    fingerprint: String,
    /// The plugin this source currently serves (an older version when the newest was
    /// rejected).
    serving: Option<String>,
    /// Why the newest version was rejected.
    rejected: Option<String>,
    /// Plugin objects only: what serves (pinned reference, digest) and how the newest
    /// spec fared.
    object: ObjectOutcome,
    /// Plugin objects only: the generation looked at last.
    object_generation: i64,
    /// Plugin objects only: the object's conditions as last read, for transition times.
    object_previous: Vec<kubewasm_core::plugin_object::Condition>,
    /// A failure worth trying again (the registry down, a secret missing): when, and how
    /// many tries so far. Until then the source counts as unchanged.
    retry_at: Option<tokio::time::Instant>,
    retries: u32,
    /// Refused because its ServiceAccount may not read what it is approved to (or that
    /// could not be asked): looked at again at the next access review.
    access_refused: bool,
    /// The read rules its ServiceAccount was found to lack, as the last review said.
    missing_reads: Vec<String>,
    /// A job (load, or pull and load) runs for its newest version: a retry due is being
    /// made, so it does not wake the reloader again before the job ends.
    running: bool,
}

/// First retry of a failed pull, doubling per try up to [`RETRY_MAX`]: registry trouble
/// is retried with backoff, never hot.
const RETRY_BASE: std::time::Duration = std::time::Duration::from_secs(5);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(300);

impl SourceState {
    /// Whether `fingerprint` is what was last looked at, and no retry of it is due.
    fn unchanged(&self, fingerprint: &str) -> bool {
        self.fingerprint == fingerprint
            && self
                .retry_at
                .is_none_or(|at| tokio::time::Instant::now() < at)
    }
}

/// How a Plugin object's newest spec fared, and what serves for it.
#[derive(Default, Clone)]
struct ObjectOutcome {
    serving_module: Option<(String, String)>,
    failure: Option<Failure>,
    pulled: Option<bool>,
    approved: Option<Result<(), String>>,
    requested: Option<Permissions>,
    /// The job running for the newest spec, and that spec's generation.
    busy: Option<(i64, Busy)>,
    /// The tag of the newest spec moved when it was last pulled.
    moved: Option<TagMove>,
}

/// What a file's job came to: its load.
type FileJob = Result<Loaded, kubewasm_runtime::Error>;

/// What a Plugin object's job came to: its pull, then the load of what it pulled.
struct ObjectJob {
    /// The fingerprint to record (the spec's, and the digest's once resolved).
    fingerprint: String,
    /// The module loaded (None: its tag still names the digest looked at), or why the
    /// pull failed.
    result: Result<Option<ObjectLoad>, Failure>,
}

/// A Plugin object's module, pulled and loaded (or not).
struct ObjectLoad {
    pinned: String,
    digest: String,
    moved: Option<TagMove>,
    loaded: FileJob,
}

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
        !(self.replays.is_empty() && self.removed.is_empty())
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
    compiles: Jobs<FileJob>,
    /// The Plugin objects' pulls and loads.
    fetches: Jobs<ObjectJob>,
    /// Loads running at once, files and objects together ([`COMPILE_SLOTS`]).
    compile_slots: Arc<Semaphore>,
    /// A job ended (or a pull turned into a load): a reconcile takes its result.
    finished: Arc<Notify>,
    quarantine: QuarantinePolicy,
    metrics: Arc<Metrics>,
    sources: tokio::sync::Mutex<BTreeMap<Origin, SourceState>>,
    status: RwLock<PluginStatus>,
    /// Where each Plugin object stood after the last reconcile of the objects.
    object_states: RwLock<BTreeMap<String, ObjectState>>,
    loaded_once: AtomicBool,
    objects_loaded_once: AtomicBool,
    /// Plugin name → the source it serves from, as of the last reconcile.
    serving_from: RwLock<BTreeMap<String, String>>,
    /// The earliest retry due, as of the last reconcile.
    next_retry: RwLock<Option<tokio::time::Instant>>,
    /// Whether each plugin's own ServiceAccount may read what it is approved to; None:
    /// plugins act as the host (`--no-impersonation`), nothing to ask.
    reviews: Option<Arc<AccountReviews>>,
}

/// One source's newest version, read: the file (with the approval that bounds it), or
/// why it could not be read; `Unchanged` when its fingerprint says nothing changed.
enum Newest {
    Unchanged,
    Read(Box<PluginFile>, Option<Approval>),
    /// A Plugin object's module to pull, then load under the approval.
    Fetch(Box<Fetch>, Option<Approval>),
    /// Unreadable (a file mid-write, bad settings, a failed pull): the fingerprint is
    /// kept only when `retry` is false.
    Failed {
        failure: Failure,
        retry: bool,
    },
}

/// One source to look at in a reconcile.
struct Item {
    origin: Origin,
    fingerprint: String,
    newest: Newest,
    /// The approval in force for this source now, when known even if the newest version
    /// could not be read (a Plugin's permissions): the running version must fit it.
    approval_now: Option<Approval>,
    /// Plugin objects: the generation, and the conditions as last read.
    object: Option<ObjectSeen>,
    /// The plugin this source is approved as (its file's or object's name), when known.
    account: Option<String>,
}

/// A Plugin object as a reconcile saw it: generation, and its conditions as last read.
type ObjectSeen = (i64, Vec<kubewasm_core::plugin_object::Condition>);

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
            status: RwLock::new(PluginStatus::default()),
            object_states: RwLock::new(BTreeMap::new()),
            loaded_once: AtomicBool::new(false),
            objects_loaded_once: AtomicBool::new(false),
            serving_from: RwLock::new(BTreeMap::new()),
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
            origin.to_string(),
        ))
    }

    /// The plugin sources, loaded once.
    pub(crate) fn loaded_once(&self) -> bool {
        self.loaded_once.load(Ordering::Acquire)
    }

    /// The Plugin objects, reconciled once from a synced cache.
    pub(crate) fn objects_loaded_once(&self) -> bool {
        self.objects_loaded_once.load(Ordering::Acquire)
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

    /// Plugins, rejected sources and reload count.
    pub(crate) fn status(&self) -> PluginStatus {
        kubewasm_core::sync::read(&self.status).clone()
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
        let listing = match loader::plugin_files(dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the plugin directory; keeping the running plugins");
                return None;
            }
        };
        let items = listing
            .into_iter()
            .map(|path| {
                let origin = Origin::File(path.clone());
                match PluginFile::read(&path) {
                    // Unreadable now (e.g. mid-write, or bad settings): keep what runs.
                    Err(e) => Item {
                        fingerprint: format!("unreadable: {e}"),
                        newest: Newest::Failed {
                            failure: Failure::new("Unreadable", e.to_string()),
                            retry: false,
                        },
                        origin,
                        approval_now: None,
                        object: None,
                        account: None,
                    },
                    Ok(mut file) => {
                        // Looked up by the name the plugin must give itself.
                        let name = file.name();
                        let fingerprint =
                            format!("{}/{}", file.fingerprint(), approvals.fingerprint_of(&name));
                        // Nothing approved, or an approval that cannot be used, approves
                        // nothing: what runs from this file must fit that.
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
                                    format!(
                                        "plugin {name}: its approval cannot be used: {problem}"
                                    ),
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
                }
            })
            .collect();
        Some(items)
    }

    /// The newest version of every Plugin object: nothing here waits on a registry.
    fn object_items(
        &self,
        source: &ObjectSource,
        objects: &[Arc<CachedObject>],
        known: &BTreeMap<Origin, SourceState>,
    ) -> Vec<Item> {
        let state = |name: &str| known.get(&Origin::Object(name.to_string()));
        let unchanged = |name: &str, fp: &str| state(name).is_some_and(|s| s.unchanged(fp));
        // What a fetch may find again and skip: the version last looked at, unless its
        // pull failed (a retry must pull).
        let looked_at = |name: &str| {
            state(name)
                .filter(|s| s.retry_at.is_none())
                .map(|s| s.fingerprint.clone())
                .unwrap_or_default()
        };
        source
            .candidates(objects, unchanged, looked_at)
            .into_iter()
            .map(|c: Candidate| {
                let Candidate {
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
                    origin: Origin::Object(name.clone()),
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
        let mut listed: HashSet<Origin> = HashSet::new();
        let mut looked_at_files = false;
        let looked_at_objects = objects.is_some();
        let mut items = Vec::new();
        if let Some(f) = files {
            looked_at_files = true;
            items.extend(f);
        }
        items.extend(objects.unwrap_or_default());
        for item in items {
            listed.insert(item.origin.clone());
            let origin = item.origin.clone();
            let access = self.review(&item).await;
            if self.consider(item, access, &mut sources, &mut next, &activate) {
                match origin {
                    Origin::File(_) => next.loading.files = true,
                    Origin::Object(_) => next.loading.objects = true,
                }
            }
        }

        // Sources that disappeared take their plugin with them.
        let gone: Vec<Origin> = sources
            .keys()
            .filter(|o| !listed.contains(*o))
            .filter(|o| match o {
                Origin::File(_) => looked_at_files,
                Origin::Object(_) => looked_at_objects,
            })
            .cloned()
            .collect();
        for origin in gone {
            // A Plugin deleted during its pull: the pull stops.
            self.compiles.discard(&origin);
            self.fetches.discard(&origin);
            if let Some(state) = sources.remove(&origin)
                && let Some(name) = state.serving
                && let Some(active) = next.env.plugins.remove(&name)
            {
                tracing::info!(plugin = %name, version = %active.plugin().manifest.version, source = %origin, "plugin removed");
                next.removed.push(active);
            }
        }
        let rejected = sources
            .iter()
            .filter_map(|(o, s)| s.rejected.clone().map(|r| (o.to_string(), r)))
            .chain(approvals_error)
            .collect();
        {
            let mut status = write(&self.status);
            status.rejected = rejected;
            status.missing_reads = sources
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
        *write(&self.serving_from) = sources
            .iter()
            .filter_map(|(o, s)| Some((s.serving.clone()?, o.to_string())))
            .collect();
        if looked_at_objects {
            let states: BTreeMap<String, ObjectState> = sources
                .iter()
                .filter_map(|(o, s)| match o {
                    Origin::Object(name) => Some((name.clone(), object_state(s, &next.env))),
                    Origin::File(_) => None,
                })
                .collect();
            *write(&self.object_states) = states.clone();
            next.objects = Some(states);
            if !next.loading.objects {
                self.objects_loaded_once.store(true, Ordering::Release);
            }
        }
        next
    }

    /// Whether the plugin of `item` may read, as its own ServiceAccount, what its
    /// approval in force lets it read (None: nothing to ask).
    async fn review(&self, item: &Item) -> Option<AccessVerdict> {
        let reviews = self.reviews.as_ref()?;
        let name = item.account.as_deref()?;
        let approval = item.approval_now.as_ref()?;
        Some(reviews.review(name, approval).await)
    }

    /// Look at one source's newest version: load it when it changed, and put it to work
    /// when it is good; unload what runs when its approval no longer covers it, or when
    /// its ServiceAccount may no longer read what the approval lets it read (`access`).
    /// True while its load runs (the reconcile after it ends takes the result).
    fn consider(
        &self,
        item: Item,
        access: Option<AccessVerdict>,
        sources: &mut BTreeMap<Origin, SourceState>,
        next: &mut Reconciled,
        activate: &(dyn Fn(Arc<Version>) -> Active + Sync),
    ) -> bool {
        let Item {
            origin,
            fingerprint,
            newest,
            approval_now,
            object,
            account: _,
        } = item;
        let state = sources.entry(origin.clone()).or_default();
        state.running = false;
        // A generation is observed once its job has ended (status says so then; while a
        // Plugin's job runs, status reports the generation it works on).
        let observed = state.object_generation;
        let generation = object.as_ref().map(|(g, _)| *g).unwrap_or_default();
        if let Some((generation, previous)) = &object {
            state.object_generation = *generation;
            state.object_previous = previous.clone();
        }
        // The approval's reads bound by the plugin's own account: refused before it loads,
        // unloaded when lost. A review the API server did not answer refuses a load but
        // leaves a version at work serving (an API server outage must not unload every
        // plugin; it is asked again at the next review).
        state.missing_reads = match &access {
            Some(AccessVerdict::Denied { missing, .. }) => missing.clone(),
            _ => Vec::new(),
        };
        let refusal = match &access {
            Some(AccessVerdict::Denied { why, .. }) => Some(("AccessDenied", why.clone(), true)),
            Some(AccessVerdict::Unanswered(why)) => Some(("AccessUnknown", why.clone(), false)),
            Some(AccessVerdict::Allowed) | None => None,
        };
        match refusal {
            // Granted since it was refused, while nothing changed: this reconcile has no
            // newest version to load (the refusal recorded it as looked at), so the next
            // one must look again, and is asked for now (a Plugin's retry is due at once;
            // a file's comes with the next review). Until then it stays refused.
            None if state.access_refused
                && matches!(newest, Newest::Unchanged)
                && state.serving.is_none() =>
            {
                state.fingerprint.clear();
                state.retry_at = Some(tokio::time::Instant::now());
                return false;
            }
            None => state.access_refused = false,
            Some((reason, why, unload)) => {
                let serving = state.serving.clone();
                if unload
                    && let Some(name) = serving.as_ref()
                    && let Some(active) = next.env.plugins.remove(name)
                {
                    tracing::error!(plugin = %name, source = %origin, error = %why, "plugin unloaded: its ServiceAccount may not read what it is approved to read");
                    next.removed.push(active);
                    state.serving = None;
                    state.object.serving_module = None;
                }
                let loading = !matches!(newest, Newest::Unchanged);
                if loading || unload {
                    self.compiles.discard(&origin);
                    self.fetches.discard(&origin);
                    state.object.busy = None;
                    if state.rejected.as_deref() != Some(why.as_str()) {
                        tracing::error!(source = %origin, error = %why, still_serving = state.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
                    }
                    if loading {
                        state.fingerprint = fingerprint;
                    }
                    state.access_refused = true;
                    state.rejected = Some(why.clone());
                    state.object.approved = Some(Err(why.clone()));
                    state.object.failure = Some(Failure::new(reason, why));
                    return false;
                }
                // Unanswered while serving, nothing new: keep serving; every reconcile
                // asks again.
                tracing::warn!(source = %origin, error = %why, "cannot review the plugin's access; it keeps serving");
            }
        }
        if !matches!(newest, Newest::Fetch(..)) {
            state.object.busy = None;
        }
        if let Newest::Unchanged = newest {
            // Back to the version it serves: a job for another one is not wanted.
            self.compiles.discard(&origin);
            self.fetches.discard(&origin);
            return false;
        }
        // The approval in force now bounds what may keep running, whatever becomes of the
        // newest version: narrowing it unloads a version that uses more.
        if let Some(approval) = &approval_now
            && let Some(name) = state.serving.clone()
            && let Some(active) = next.env.plugins.get(&name)
            && let Err(why) = still_approved(&active.plugin().manifest, approval)
        {
            tracing::error!(plugin = %name, source = %origin, error = %why, "plugin unloaded: its approval no longer covers it");
            if let Some(active) = next.env.plugins.remove(&name) {
                next.removed.push(active);
            }
            state.serving = None;
            state.object.serving_module = None;
        }
        // The fingerprint is recorded only with the job's result: until then every
        // reconcile sees the source as changed, and asks again.
        let (loaded, approval, fingerprint, module) = match newest {
            Newest::Unchanged => return false,
            Newest::Failed { failure, retry } => {
                self.compiles.discard(&origin);
                self.fetches.discard(&origin);
                failed(state, &origin, fingerprint, failure, retry);
                return false;
            }
            Newest::Read(file, approval) => {
                let (loader, slots) = (self.loader.clone(), self.compile_slots.clone());
                let job = |_: Progress| async move {
                    // Never closed: a closed semaphore would only lift the bound.
                    let _slot = slots.acquire_owned().await.ok();
                    loader.load(*file).await
                };
                match self.compiles.poll(&origin, &fingerprint, job) {
                    Outcome::Running(_) => {
                        state.object_generation = observed;
                        state.running = true;
                        return true;
                    }
                    Outcome::Done(result) => (*result, approval, fingerprint, None),
                }
            }
            Newest::Fetch(fetch, approval) => {
                let Some(source) = self.objects.clone() else {
                    return false;
                };
                let key = fetch.key().to_string();
                let module = fetch.module().to_string();
                let recheck = fetch.recheck();
                let deadline = source.pull_timeout();
                let (loader, slots) = (self.loader.clone(), self.compile_slots.clone());
                let job = |progress: Progress| object_job(source, *fetch, loader, slots, progress);
                match self.fetches.poll(&origin, &key, job) {
                    Outcome::Running(stage) => {
                        state.object_generation = observed;
                        // A rescan's look at a tag says nothing until the tag moved.
                        state.object.busy = match stage {
                            STAGE_LOADING.. => Some(Busy::Loading { module }),
                            STAGE_PULLING => Some(Busy::Pulling { module, deadline }),
                            _ if recheck => None,
                            _ => Some(Busy::Pulling { module, deadline }),
                        }
                        .map(|busy| (generation, busy));
                        state.running = true;
                        return true;
                    }
                    Outcome::Done(job) => {
                        state.object.busy = None;
                        let ObjectJob {
                            fingerprint,
                            result,
                        } = *job;
                        match result {
                            Err(failure) => {
                                let retry = failure.retry();
                                failed(state, &origin, fingerprint, failure, retry);
                                return false;
                            }
                            // The tag still names the digest looked at: nothing to reload.
                            Ok(None) => {
                                state.fingerprint = fingerprint;
                                state.retries = 0;
                                state.retry_at = None;
                                return false;
                            }
                            Ok(Some(load)) => {
                                state.object.pulled = Some(true);
                                state.object.moved = load.moved;
                                (
                                    load.loaded,
                                    approval,
                                    fingerprint,
                                    Some((load.pinned, load.digest)),
                                )
                            }
                        }
                    }
                }
            }
        };
        state.fingerprint = fingerprint;
        state.retries = 0;
        state.retry_at = None;
        let mut loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, source = %origin, still_serving = state.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
                state.rejected = Some(e.to_string());
                state.object.failure = Some(Failure::new("LoadFailed", e.to_string()));
                state.object.approved = None;
                return false;
            }
        };
        state.object.requested = Some(Permissions::requested_by(&loaded.plugin.manifest));
        // The operator's approval, not the plugin's own answer, bounds what it may hold:
        // a version asking for more is refused and the old one keeps serving.
        if let Err(e) = approve(&mut loaded.plugin.manifest, approval.as_ref()) {
            let e = Error::Load(kubewasm_runtime::Error::NotApproved(e));
            tracing::error!(error = %e, source = %origin, still_serving = state.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
            state.rejected = Some(e.to_string());
            state.object.approved = Some(Err(e.to_string()));
            state.object.failure = Some(Failure::new("NotApproved", e.to_string()));
            return false;
        }
        state.object.approved = Some(Ok(()));
        let name = loaded.plugin.name().to_string();
        if let Origin::Object(object_name) = &origin
            && *object_name != name
        {
            let why = format!(
                "the module describes itself as plugin {name:?}: a Plugin object is named after its plugin"
            );
            tracing::error!(source = %origin, error = %why, "plugin rejected");
            state.rejected = Some(why.clone());
            state.object.failure = Some(Failure::new("NameMismatch", why));
            return false;
        }
        let env = &mut next.env;
        if let Some(owner) = env.plugins.get(&name)
            && state.serving.as_deref() != Some(name.as_str())
        {
            let e = Error::DuplicateName {
                origin: origin.to_string(),
                name: name.clone(),
                other: owner.plugin().path.display().to_string(),
            };
            tracing::error!(error = %e, "plugin rejected");
            state.rejected = Some(e.to_string());
            state.object.failure = Some(Failure::new("NameInUse", e.to_string()));
            return false;
        }
        state.rejected = None;
        state.object.failure = None;
        if let Some(module) = module {
            state.object.serving_module = Some(module);
        }
        let plugin = Arc::new(loaded.plugin);
        let how = loaded.source.as_str();
        if let Some(old_name) = state.serving.clone().filter(|n| *n != name)
            && let Some(old) = env.plugins.remove(&old_name)
        {
            next.removed.push(old);
            tracing::info!(plugin = %old_name, source = %origin, "plugin renamed to {name}");
        }
        match env.plugins.get(&name) {
            Some(active) => {
                next.announced.push(Announcement::Replaced {
                    name: name.clone(),
                    from: active.plugin().manifest.version.clone(),
                    to: plugin.manifest.version.clone(),
                    how,
                    took: loaded.took,
                    file: origin.to_string(),
                });
                // The queue stays; the new version (healthy) serves its next events.
                let replaced = Active::new(
                    self.version(plugin, approval.as_ref(), &origin),
                    active.queue.clone(),
                );
                env.plugins.insert(name.clone(), replaced);
                next.replays.push(Replay::Replaced(name.clone()));
            }
            None => {
                next.announced.push(Announcement::Loaded {
                    name: name.clone(),
                    version: plugin.manifest.version.clone(),
                    how,
                    took: loaded.took,
                    file: origin.to_string(),
                    watches: plugin.manifest.watches.len(),
                });
                let active = activate(self.version(plugin, approval.as_ref(), &origin));
                env.plugins.insert(name.clone(), active);
                next.replays.push(Replay::Added(name.clone()));
            }
        }
        state.serving = Some(name);
        false
    }
    /// After `env` took effect: drop compiled code no plugin uses, and publish the status.
    /// `loading`: what the reconcile left loading (the directory counts as loaded once
    /// none of its files' loads runs).
    pub(crate) fn took_effect(&self, env: &Environment, changed: bool, loading: Loading) {
        if changed {
            let digests: HashSet<String> = env
                .plugins
                .values()
                .map(|a| a.plugin().digest.clone())
                .collect();
            self.loader.retain(&digests);
        }
        let metrics = &self.metrics;
        let from = kubewasm_core::sync::read(&self.serving_from).clone();
        let mut st = write(&self.status);
        st.loaded = env
            .plugins
            .iter()
            .map(|(n, a)| {
                let p = a.plugin();
                let origin = from
                    .get(n)
                    .cloned()
                    .unwrap_or_else(|| p.path.display().to_string());
                (n.clone(), (p.manifest.version.clone(), origin))
            })
            .collect();
        if changed {
            st.reloads += 1;
            metrics.reloads.inc();
        }
        metrics.rejected_files.set(st.rejected.len() as i64);
        metrics.plugin_info.clear();
        for (plugin, (version, _)) in &st.loaded {
            metrics
                .plugin_info
                .get_or_create(&InfoLabels {
                    plugin: plugin.clone(),
                    version: version.clone(),
                })
                .set(1);
        }
        drop(st);
        if !loading.files {
            self.loaded_once.store(true, Ordering::Release);
        }
    }
}

/// Record that `origin`'s newest version failed before any load: said once per failure,
/// retried with backoff when `retry` (registry trouble), else when it changes.
fn failed(
    state: &mut SourceState,
    origin: &Origin,
    fingerprint: String,
    failure: Failure,
    retry: bool,
) {
    // Said once per failure, not at every retry of the same one.
    if state.object.failure.as_ref() != Some(&failure) {
        tracing::error!(source = %origin, error = %failure.message, still_serving = state.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
    }
    state.fingerprint = fingerprint;
    if retry {
        let backoff = RETRY_BASE
            .saturating_mul(1 << state.retries.min(10))
            .min(RETRY_MAX);
        state.retries += 1;
        state.retry_at = Some(tokio::time::Instant::now() + backoff);
    } else {
        state.retries = 0;
        state.retry_at = None;
    }
    state.rejected = Some(failure.message.clone());
    state.object.pulled = failure.is_pull().then_some(false);
    state.object.approved = None;
    state.object.failure = Some(failure);
}

/// A Plugin object's job: pull its module (a pull slot, `--pull-timeout`), then load it
/// (a compile slot), so neither a stalling registry nor a slow compile holds a reconcile.
async fn object_job(
    source: Arc<ObjectSource>,
    fetch: Fetch,
    loader: Arc<Loader>,
    slots: Arc<Semaphore>,
    progress: Progress,
) -> ObjectJob {
    let fetched = source.fetch(fetch, progress.clone()).await;
    let result = match fetched.result {
        Err(failure) => Err(failure),
        Ok(None) => Ok(None),
        Ok(Some(module)) => {
            progress.stage(STAGE_LOADING);
            // Never closed: a closed semaphore would only lift the bound.
            let _slot = slots.acquire_owned().await.ok();
            let loaded = loader.load(module.file).await;
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

/// Whether a running version still fits `approval` ([`still_fits`]), and if not, why.
fn still_approved(running: &Manifest, approval: &Approval) -> Result<(), String> {
    if still_fits(running, Some(approval)) {
        return Ok(());
    }
    Err(match check_approval(running, Some(approval)) {
        Err(e) => e.to_string(),
        Ok(()) => format!(
            "plugin {}: a finalizer it was given is no longer approved",
            running.name
        ),
    })
}

/// Where a Plugin object stands, from its source's state and the environment.
fn object_state(s: &SourceState, env: &Environment) -> ObjectState {
    let serving = s.serving.as_ref().and_then(|name| {
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
    }
}
