//! Plugin loads and pulls off the reload path. Each changed source is pulled (Plugin
//! objects), compiled, linked and described in a task of its own while reconciles go on:
//! one file that compiles slowly (a crafted module, up to `--compile-timeout`) holds one
//! compile slot, and one registry that answers slowly (up to `--pull-timeout`) holds one
//! pull slot, never the reload of another source. A reconcile starts a job and goes on;
//! the job's end wakes the reloader, whose next reconcile takes the result.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use kubewasm_core::sync::lock;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::plugins::environment::Origin;

/// Loads that run at once. Each is a compile worker process at most (a cache hit is only
/// a link and a describe call): two keep a slow one from holding back the rest without
/// letting many compiles crowd the host's CPUs.
pub(crate) const COMPILE_SLOTS: usize = 2;

/// Pulls that run at once. A pull mostly waits on a registry; four keep a registry that
/// stalls (up to `--pull-timeout`) from holding back the other Plugins' pulls, while the
/// bytes in flight stay bounded (each pull is capped by `--max-module-mib`).
pub(crate) const PULL_SLOTS: usize = 4;

/// What a source's job came to, or that it still runs.
pub(crate) enum Outcome<T> {
    /// The job of this version finished (taken: the next start begins a new one).
    Done(Box<T>),
    /// It runs (started now, or earlier), at the stage it said last ([`Progress::stage`],
    /// 0 at first); the reloader is woken when it ends.
    Running(u8),
}

/// What a job tells the reloader while it runs: the stage it is at (a Plugin object's
/// job: resolving its tag, pulling, loading), which its status says.
#[derive(Clone)]
pub(crate) struct Progress {
    stage: Arc<AtomicU8>,
    finished: Arc<Notify>,
}

impl Progress {
    /// The job is at `stage` now; the reloader is woken, so status can say so.
    pub(crate) fn stage(&self, stage: u8) {
        self.stage.store(stage, Ordering::Release);
        self.finished.notify_one();
    }
}

/// One source's job: of which version, and where it stands.
struct Job<T> {
    fingerprint: String,
    state: JobState<T>,
    stage: Arc<AtomicU8>,
}

enum JobState<T> {
    Running(AbortHandle),
    Done(Box<T>),
}

/// The jobs of the reloader's sources, one per source at most.
pub(crate) struct Jobs<T> {
    jobs: Arc<Mutex<HashMap<Origin, Job<T>>>>,
    finished: Arc<Notify>,
}

impl<T: Send + 'static> Jobs<T> {
    /// Jobs whose ends wake whoever waits on `finished`.
    pub(crate) fn new(finished: Arc<Notify>) -> Self {
        Jobs {
            jobs: Arc::new(Mutex::new(HashMap::new())),
            finished,
        }
    }

    /// The job of `origin` at version `fingerprint`: its result once it has finished
    /// (taken), or the stage it runs at; None when no job of that version is known.
    pub(crate) fn peek(&self, origin: &Origin, fingerprint: &str) -> Option<Outcome<T>> {
        let mut jobs = lock(&self.jobs);
        let job = jobs.get(origin).filter(|j| j.fingerprint == fingerprint)?;
        if matches!(job.state, JobState::Running(_)) {
            return Some(Outcome::Running(job.stage.load(Ordering::Acquire)));
        }
        match jobs.remove(origin) {
            Some(Job {
                state: JobState::Done(result),
                ..
            }) => Some(Outcome::Done(result)),
            _ => None,
        }
    }

    /// Start the job of `origin` at version `fingerprint` from `work` (a job of another
    /// version of the same source is stopped: a compile's worker is killed, a pull's
    /// connection closed, so a source rewritten many times holds one slot at most).
    /// `work` must take its slot itself.
    pub(crate) fn start<F>(
        &self,
        origin: &Origin,
        fingerprint: &str,
        work: impl FnOnce(Progress) -> F,
    ) where
        F: Future<Output = T> + Send + 'static,
    {
        let mut jobs = lock(&self.jobs);
        if let Some(Job {
            state: JobState::Running(task),
            ..
        }) = jobs.remove(origin)
        {
            task.abort();
        }
        let stage = Arc::new(AtomicU8::new(0));
        let work = work(Progress {
            stage: stage.clone(),
            finished: self.finished.clone(),
        });
        let (all, finished) = (self.jobs.clone(), self.finished.clone());
        let (key, version) = (origin.clone(), fingerprint.to_string());
        // The map stays locked until the job is in it, so the task cannot finish first.
        let task = tokio::spawn(async move {
            let result = work.await;
            tracing::debug!(source = %key, "plugin job finished");
            if let Some(job) = lock(&all).get_mut(&key)
                && job.fingerprint == version
            {
                job.state = JobState::Done(Box::new(result));
            }
            finished.notify_one();
        });
        tracing::debug!(source = %origin, "plugin job started");
        jobs.insert(
            origin.clone(),
            Job {
                fingerprint: fingerprint.to_string(),
                state: JobState::Running(task.abort_handle()),
                stage,
            },
        );
    }

    /// Forget `origin`'s job (the source is gone, unchanged again or unreadable): a
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
}

impl<T> Drop for Jobs<T> {
    fn drop(&mut self) {
        for (_, job) in lock(&self.jobs).drain() {
            if let JobState::Running(task) = job.state {
                task.abort();
            }
        }
    }
}
