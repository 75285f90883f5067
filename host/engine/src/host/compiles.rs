//! Plugin loads off the reload path. Each changed source is compiled, linked and described
//! in a task of its own, at most [`COMPILE_SLOTS`] at once, while reconciles go on: one
//! file that compiles slowly (a crafted module, up to `--compile-timeout`) holds one slot,
//! never the reload of another file. A reconcile starts a load and goes on; the load's end
//! wakes the reloader, whose next reconcile takes the result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kubewasm_core::sync::lock;
use kubewasm_runtime::loader::Loaded;
use kubewasm_runtime::{Loader, PluginFile};
use tokio::sync::{Notify, Semaphore};
use tokio::task::AbortHandle;

use crate::host::reload::Origin;

/// Loads that run at once. Each is a compile worker process at most (a cache hit is only
/// a link and a describe call): two keep a slow one from holding back the rest without
/// letting many compiles crowd the host's CPUs.
pub(crate) const COMPILE_SLOTS: usize = 2;

/// What a source's load came to, or that it still runs.
pub(crate) enum Outcome {
    /// The load of this version finished (taken: the next poll starts a new one).
    Done(Box<Result<Loaded, kubewasm_runtime::Error>>),
    /// It runs (started now, or earlier); the reloader is woken when it ends.
    Running,
}

/// One source's load: of which version, and where it stands.
struct Job {
    fingerprint: String,
    state: JobState,
}

enum JobState {
    Running(AbortHandle),
    Done(Box<Result<Loaded, kubewasm_runtime::Error>>),
}

/// The loads of the reloader's sources, one per source at most.
pub(crate) struct Compiles {
    loader: Arc<Loader>,
    slots: Arc<Semaphore>,
    jobs: Arc<Mutex<HashMap<Origin, Job>>>,
    finished: Arc<Notify>,
}

impl Compiles {
    pub(crate) fn new(loader: Arc<Loader>, slots: usize) -> Self {
        Compiles {
            loader,
            slots: Arc::new(Semaphore::new(slots.max(1))),
            jobs: Arc::new(Mutex::new(HashMap::new())),
            finished: Arc::new(Notify::new()),
        }
    }

    /// The load of `origin` at version `fingerprint`: its result once it has finished,
    /// else started (a load of an older version of the same source is stopped: its
    /// worker is killed, so a source rewritten many times holds one slot at most).
    pub(crate) fn poll(&self, origin: &Origin, fingerprint: &str, file: PluginFile) -> Outcome {
        let mut jobs = lock(&self.jobs);
        if let Some(job) = jobs.get(origin) {
            if job.fingerprint == fingerprint {
                if matches!(job.state, JobState::Running(_)) {
                    return Outcome::Running;
                }
                if let Some(Job {
                    state: JobState::Done(result),
                    ..
                }) = jobs.remove(origin)
                {
                    return Outcome::Done(result);
                }
            }
            if let Some(Job {
                state: JobState::Running(task),
                ..
            }) = jobs.remove(origin)
            {
                task.abort();
            }
        }
        let (loader, slots, all, finished) = (
            self.loader.clone(),
            self.slots.clone(),
            self.jobs.clone(),
            self.finished.clone(),
        );
        let (key, version) = (origin.clone(), fingerprint.to_string());
        // The map stays locked until the job is in it, so the task cannot finish first.
        let task = tokio::spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            let result = loader.load(file).await;
            tracing::debug!(source = %key, ok = result.is_ok(), "plugin load finished");
            if let Some(job) = lock(&all).get_mut(&key)
                && job.fingerprint == version
            {
                job.state = JobState::Done(Box::new(result));
            }
            finished.notify_one();
        });
        tracing::debug!(source = %origin, "plugin load started");
        jobs.insert(
            origin.clone(),
            Job {
                fingerprint: fingerprint.to_string(),
                state: JobState::Running(task.abort_handle()),
            },
        );
        Outcome::Running
    }

    /// Forget `origin`'s load (the source is gone, unchanged again or unreadable): a
    /// running one is stopped.
    pub(crate) fn discard(&self, origin: &Origin) {
        if let Some(Job {
            state: JobState::Running(task),
            ..
        }) = lock(&self.jobs).remove(origin)
        {
            task.abort();
        }
    }

    /// Wait until a load has finished since the last wait.
    pub(crate) async fn finished(&self) {
        self.finished.notified().await
    }
}

impl Drop for Compiles {
    fn drop(&mut self) {
        for (_, job) in lock(&self.jobs).drain() {
            if let JobState::Running(task) = job.state {
                task.abort();
            }
        }
    }
}
