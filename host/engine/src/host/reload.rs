//! Reconciling the running plugins with the plugin directory. A file that changed is
//! loaded and validated first; only a good version replaces the running one, and the new
//! [`Environment`] is swapped in whole.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use kubewasm_runtime::{CompiledPlugin, Loader, PluginFile, loader};
use tokio::task::JoinSet;

use crate::Error;
use crate::dispatch::{Health, QuarantinePolicy, Queue, QueueConfig};
use crate::host::environment::{Active, Current, Environment, PluginStatus, Slot, Version};
use crate::host::handler::{HandlerDeps, PluginHandler};
use crate::host::router::{Replay, Router};
use crate::ops::metrics::InfoLabels;

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

/// Loads the plugin directory and keeps the environment in line with it.
pub(crate) struct Reloader {
    pub(crate) dir: PathBuf,
    pub(crate) loader: Loader,
    pub(crate) queue_config: QueueConfig,
    pub(crate) quarantine: QuarantinePolicy,
    pub(crate) deps: HandlerDeps,
    pub(crate) router: Router,
    files: tokio::sync::Mutex<BTreeMap<PathBuf, FileState>>,
    /// Queue workers of every plugin started, joined at shutdown.
    pub(crate) workers: Mutex<Vec<JoinSet<()>>>,
    pub(crate) status: RwLock<PluginStatus>,
    pub(crate) loaded_once: AtomicBool,
}

impl Reloader {
    pub(crate) fn new(
        dir: PathBuf,
        loader: Loader,
        queue_config: QueueConfig,
        quarantine: QuarantinePolicy,
        deps: HandlerDeps,
        router: Router,
    ) -> Self {
        Reloader {
            dir,
            loader,
            queue_config,
            quarantine,
            deps,
            router,
            files: tokio::sync::Mutex::new(BTreeMap::new()),
            workers: Mutex::new(Vec::new()),
            status: RwLock::new(PluginStatus::default()),
            loaded_once: AtomicBool::new(false),
        }
    }

    fn current(&self) -> &Current {
        &self.router.current
    }

    fn version(&self, plugin: Arc<CompiledPlugin>) -> Arc<Version> {
        self.deps.metrics.set_quarantined(plugin.name(), false);
        Arc::new(Version {
            plugin,
            health: Health::new(self.quarantine),
        })
    }

    fn new_active(&self, plugin: Arc<CompiledPlugin>) -> Active {
        let name = plugin.name().to_string();
        let slot: Slot = Arc::new(RwLock::new(self.version(plugin.clone())));
        let queue = Queue::new(name, self.queue_config.clone(), self.deps.caches.clone());
        let handler = Arc::new(PluginHandler {
            slot: slot.clone(),
            deps: self.deps.clone(),
        });
        let set = queue.spawn(handler);
        if let Ok(mut w) = self.workers.lock() {
            w.push(set);
        }
        Active {
            routes: Active::routes_of(&plugin),
            plugin,
            queue,
            slot,
        }
    }

    /// Bring the running plugins in line with the plugin directory.
    pub(crate) async fn reconcile(&self) {
        let mut files = self.files.lock().await;
        let listing = match loader::plugin_files(&self.dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the plugin directory; keeping the running plugins");
                return;
            }
        };
        let mut env = (*self.current().get()).clone();
        let mut replays = Vec::new();
        let mut removed = Vec::new();
        // Said once the new environment is in effect, so "loaded" and "replaced" are true
        // when they are read.
        let mut announced = Vec::new();

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
            let fp = file.fingerprint();
            if files.get(path).is_some_and(|s| s.fingerprint == fp) {
                continue;
            }
            // The operator's approval, not the plugin's own answer, bounds what it may
            // hold: a version asking for more is refused and the old one keeps serving.
            let loaded = self.loader.load_approved(file).await;
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
                    active.routes = Active::routes_of(&plugin);
                    announced.push(Announcement::Replaced {
                        name: name.clone(),
                        from: old_version,
                        to: plugin.manifest.version.clone(),
                        how,
                        took: loaded.took,
                        file: path.clone(),
                    });
                    replays.push(Replay::Replaced(name.clone()));
                }
                None => {
                    announced.push(Announcement::Loaded {
                        name: name.clone(),
                        version: plugin.manifest.version.clone(),
                        how,
                        took: loaded.took,
                        file: path.clone(),
                        watches: plugin.manifest.watches.len(),
                    });
                    env.plugins.insert(name.clone(), self.new_active(plugin));
                    replays.push(Replay::Added(name.clone()));
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

        let nothing_changed = replays.is_empty() && removed.is_empty();
        if !nothing_changed {
            // Point the slots of replaced plugins at their new versions, then swap the
            // environment: from here each plugin's next event runs on its new version and
            // is routed by its new watches; calls already running finish on the old one.
            for replay in &replays {
                if let Replay::Replaced(name) = replay
                    && let Some(active) = env.plugins.get(name)
                {
                    let version = self.version(active.plugin.clone());
                    if let Ok(mut slot) = active.slot.write() {
                        *slot = version;
                    }
                }
            }
            let env = Arc::new(env);
            self.current().set(env.clone());
            self.deps.watches.set_desired(env.desired());
            for active in &removed {
                active.queue.close();
            }
            self.router.replay(&env, &replays);
            let digests: HashSet<String> = env
                .plugins
                .values()
                .map(|a| a.plugin.digest.clone())
                .collect();
            self.loader.retain(&digests);
        }
        for a in announced {
            a.log();
        }
        self.publish_status(&self.current().get(), &files, nothing_changed);
        self.loaded_once.store(true, Ordering::Release);
    }

    fn publish_status(
        &self,
        env: &Environment,
        files: &BTreeMap<PathBuf, FileState>,
        unchanged: bool,
    ) {
        let metrics = &self.deps.metrics;
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
        }
    }
}
