//! Quarantine bookkeeping: a plugin whose calls keep failing in the sandbox (traps,
//! deadlines, memory) gets no events until its file changes or the cooldown passes; its
//! deferred events wait in the queue, retried with backoff.

use std::sync::Arc;

use super::Handle;
use crate::Error;
use crate::event::pipeline::{Report, Request};
use crate::serve::metrics::Metrics;

/// Defers events of a quarantined plugin and keeps each version's health.
pub(crate) struct Quarantine<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S> Quarantine<S> {
    pub(crate) fn new(inner: S, metrics: Arc<Metrics>) -> Self {
        Quarantine { inner, metrics }
    }
}

impl<S: Handle> Handle for Quarantine<S> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let version = req.version;
        let name = version.plugin.name();
        if let Err(q) = version.health.check() {
            tracing::debug!(plugin = name, object = %req.delivery.object.describe(), "plugin quarantined; event deferred");
            return Report::skipped(Err(Error::Quarantined {
                plugin: name.to_string(),
                reason: q.reason,
                remaining: q.remaining,
            }));
        }
        let report = self.inner.handle(req).await;
        match &report.result {
            // Says nothing about the plugin: the call was dropped at the end of the term,
            // or because the version was unloaded.
            Err(Error::NotLeader { .. } | Error::Retired { .. }) => {}
            // Nor does a call that never ran for want of the host's memory budget.
            Err(Error::Call {
                kind: kubewasm_runtime::CallError::BudgetWait { .. },
                ..
            }) => {}
            Err(Error::Call { kind, .. }) if kind.is_sandbox_failure() => {
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
        report
    }
}
