//! Reconciling the plugin set with the plugin directory. A file that changed is loaded and
//! validated first; only a good version replaces the running one. The reloader computes
//! the next [`Environment`] and what it takes (replays, removals); the host swaps it in.
//!
//! The operator's approvals (`--approvals`) are read on every reconcile; a plugin is
//! looked at again when its file or its approval changes, and a version serving that its
//! approval no longer covers (narrowed, deleted) is unloaded, not left serving.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kubewasm_runtime::approval::Approvals;
use kubewasm_runtime::{CompiledPlugin, Loader, PluginFile, loader};

use crate::Error;
use crate::dispatch::{Health, QuarantinePolicy};
use crate::host::environment::{Active, Environment, PluginStatus, Version};
use crate::host::replay::Replay;
use crate::ops::metrics::{InfoLabels, Metrics};
use kubewasm_core::sync::write;

/// What the reloader knows about one file of the plugin directory.
struct FileState {
    /// Fingerprint of the last version looked at (loaded or rejected).
    fingerprint: String,
    /// The plugin this file currently serves (an older version when the newest was rejected).
    serving: Option<String>,
    /// Why the newest version was rejected.
    rejected: Option<String>,
}

impl FileState {
    fn new() -> Self {
        FileState {
            fingerprint: String::new(),
            serving: None,
            rejected: None,
        }
    }
}

/// A plugin that came into effect, for the log.
enum Announcement {
    Loaded {
        name: String,
        version: String,
        how: &'static str,
        took: std::time::Duration,
        file: PathBuf,
        watches: usize,
    },
    Replaced {
        name: String,
        from: String,
        to: String,
        how: &'static str,
        took: std::time::Duration,
        file: PathBuf,
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
            } => tracing::info!(plugin = %name, version = %version, how, took = ?took,
                file = %file.display(), watches, "plugin loaded"),
            Announcement::Replaced {
                name,
                from,
                to,
                how,
                took,
                file,
            } => tracing::info!(plugin = %name, from = %from, to = %to, how, took = ?took,
                file = %file.display(), "plugin replaced"),
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

/// Loads the plugin directory and works out the next environment from it.
pub(crate) struct Reloader {
    dir: PathBuf,
    /// The operator's approvals file or directory; None: nothing is approved.
    approvals_path: Option<PathBuf>,
    /// The approvals last read well, kept while the file cannot be read (mid-write), and
    /// the error that says so.
    approvals: tokio::sync::Mutex<(Approvals, Option<String>)>,
    loader: Loader,
    quarantine: QuarantinePolicy,
    metrics: Arc<Metrics>,
    files: tokio::sync::Mutex<BTreeMap<PathBuf, FileState>>,
    status: RwLock<PluginStatus>,
    loaded_once: AtomicBool,
}

impl Reloader {
    pub(crate) fn new(
        dir: PathBuf,
        approvals_path: Option<PathBuf>,
        loader: Loader,
        quarantine: QuarantinePolicy,
        metrics: Arc<Metrics>,
    ) -> Self {
        Reloader {
            dir,
            approvals_path,
            approvals: tokio::sync::Mutex::new((Approvals::none(), None)),
            loader,
            quarantine,
            metrics,
            files: tokio::sync::Mutex::new(BTreeMap::new()),
            status: RwLock::new(PluginStatus::default()),
            loaded_once: AtomicBool::new(false),
        }
    }

    /// A new version of a plugin: healthy, so not quarantined.
    fn version(&self, plugin: Arc<CompiledPlugin>) -> Arc<Version> {
        self.metrics.set_quarantined(plugin.name(), false);
        Arc::new(Version {
            health: Health::new(self.quarantine),
            plugin,
        })
    }

    /// The plugin directory, loaded once.
    pub(crate) fn loaded_once(&self) -> bool {
        self.loaded_once.load(Ordering::Acquire)
    }

    /// Plugins, rejected files and reload count.
    pub(crate) fn status(&self) -> PluginStatus {
        kubewasm_core::sync::read(&self.status).clone()
    }

    /// The approvals as they are now. An approvals file that cannot be read or parsed
    /// (mid-write, a YAML slip) keeps the last ones read well, with the error logged once
    /// and reported as rejected: half a file must not unload every plugin.
    async fn approvals(&self) -> (Approvals, Option<(PathBuf, String)>) {
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
        let error = last.1.clone().map(|e| (path.clone(), e));
        (last.0.clone(), error)
    }

    /// The environment that follows `current` from the plugin directory: new versions of
    /// changed files (good ones only), new files, files gone. `activate` puts a new
    /// plugin to work (its queue and workers).
    pub(crate) async fn reconcile(
        &self,
        current: &Environment,
        activate: impl Fn(Arc<Version>) -> Active,
    ) -> Reconciled {
        let mut files = self.files.lock().await;
        let mut next = Reconciled {
            env: current.clone(),
            replays: Vec::new(),
            removed: Vec::new(),
            announced: Vec::new(),
        };
        let listing = match loader::plugin_files(&self.dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the plugin directory; keeping the running plugins");
                return next;
            }
        };
        let env = &mut next.env;
        let (approvals, approvals_error) = self.approvals().await;

        for path in &listing {
            let file = match PluginFile::read(path) {
                Ok(f) => f,
                Err(e) => {
                    // Unreadable now (e.g. mid-write, or bad settings): keep what runs.
                    let fp = format!("unreadable: {e}");
                    let state = files.entry(path.clone()).or_insert_with(FileState::new);
                    if state.fingerprint != fp {
                        tracing::error!(error = %e, still_serving = ?state.serving, "plugin rejected");
                        state.fingerprint = fp;
                        state.rejected = Some(e.to_string());
                    }
                    continue;
                }
            };
            let fp = format!(
                "{}/{}",
                file.fingerprint(),
                approvals.fingerprint_of(&file.name())
            );
            if files.get(path).is_some_and(|s| s.fingerprint == fp) {
                continue;
            }
            // The operator's approval, not the plugin's own answer, bounds what it may
            // hold: a version asking for more is refused and the old one keeps serving.
            let loaded = self.loader.load_approved(file, &approvals).await;
            let state = files.entry(path.clone()).or_insert_with(FileState::new);
            state.fingerprint = fp;
            let loaded = match loaded {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, file = %path.display(), still_serving = ?state.serving, "plugin rejected");
                    state.rejected = Some(e.to_string());
                    continue;
                }
            };
            let name = loaded.plugin.name().to_string();
            if let Some(owner) = env.plugins.get(&name)
                && owner.plugin().path != *path
            {
                let e = Error::DuplicateName {
                    path: path.clone(),
                    name: name.clone(),
                    other: owner.plugin().path.clone(),
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
                next.removed.push(old);
                tracing::info!(plugin = %old_name, file = %path.display(), "plugin renamed to {name}");
            }
            match env.plugins.get(&name) {
                Some(active) => {
                    next.announced.push(Announcement::Replaced {
                        name: name.clone(),
                        from: active.plugin().manifest.version.clone(),
                        to: plugin.manifest.version.clone(),
                        how,
                        took: loaded.took,
                        file: path.clone(),
                    });
                    // The queue stays; the new version (healthy) serves its next events.
                    let replaced = Active::new(self.version(plugin), active.queue.clone());
                    env.plugins.insert(name.clone(), replaced);
                    next.replays.push(Replay::Replaced(name.clone()));
                }
                None => {
                    next.announced.push(Announcement::Loaded {
                        name: name.clone(),
                        version: plugin.manifest.version.clone(),
                        how,
                        took: loaded.took,
                        file: path.clone(),
                        watches: plugin.manifest.watches.len(),
                    });
                    env.plugins
                        .insert(name.clone(), activate(self.version(plugin)));
                    next.replays.push(Replay::Added(name.clone()));
                }
            }
            state.serving = Some(name);
        }

        // A version serving that its approval no longer covers (narrowed or deleted while
        // it ran, its newest version refused or unchanged) is unloaded: nothing keeps rights
        // the operator took away.
        for (path, state) in files.iter_mut() {
            let Some(name) = state.serving.clone() else {
                continue;
            };
            let fits = env.plugins.get(&name).is_none_or(|active| {
                approvals.problem(&name).is_none()
                    && kubewasm_core::grant::still_fits(
                        &active.plugin().manifest,
                        approvals.get(&name),
                    )
            });
            if fits {
                continue;
            }
            if let Some(active) = env.plugins.remove(&name) {
                tracing::warn!(plugin = %name, version = %active.plugin().manifest.version, file = %path.display(),
                    "plugin unloaded: its approval no longer covers what it asks for");
                next.removed.push(active);
            }
            state.serving = None;
            state.rejected.get_or_insert_with(|| {
                format!("plugin {name}: unloaded: its approval no longer covers what it asks for")
            });
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
                tracing::info!(plugin = %name, version = %active.plugin().manifest.version, file = %path.display(), "plugin removed");
                next.removed.push(active);
            }
        }
        let rejected = files
            .iter()
            .filter_map(|(p, s)| s.rejected.clone().map(|r| (p.clone(), r)))
            .chain(approvals_error)
            .collect();
        write(&self.status).rejected = rejected;
        next
    }

    /// After `env` took effect: drop compiled code no plugin uses, and publish the status.
    pub(crate) fn took_effect(&self, env: &Environment, changed: bool) {
        if changed {
            let digests: HashSet<String> = env
                .plugins
                .values()
                .map(|a| a.plugin().digest.clone())
                .collect();
            self.loader.retain(&digests);
        }
        let metrics = &self.metrics;
        let mut st = write(&self.status);
        st.loaded = env
            .plugins
            .iter()
            .map(|(n, a)| {
                let p = a.plugin();
                (n.clone(), (p.manifest.version.clone(), p.path.clone()))
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
        self.loaded_once.store(true, Ordering::Release);
    }
}
