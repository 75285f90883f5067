//! The leadership gate: followers keep their caches warm but leave events to the leader,
//! which replays everything when it takes over. This is the one place a handler asks
//! whether it leads; the pipeline's guard drops any call or write still running when the
//! term ends.

use super::Handle;
use crate::Error;
use crate::host::handler::{Report, Request};
use crate::ops::leader::Leadership;

/// Lets events through only while this replica leads.
pub(crate) struct Gate<S> {
    inner: S,
    leadership: Leadership,
}

impl<S> Gate<S> {
    pub(crate) fn new(inner: S, leadership: Leadership) -> Self {
        Gate { inner, leadership }
    }
}

impl<S: Handle> Handle for Gate<S> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let plugin = req.version.plugin.name().to_string();
        let object = req.delivery.object.describe();
        if !self.leadership.is_leader() {
            tracing::debug!(plugin, object, "not the leader; event left to the leader");
            return Report::skipped(Ok(()));
        }
        let report = self.inner.handle(req).await;
        if let Err(Error::NotLeader { .. }) = &report.result {
            // Not a failure of the plugin or the object, and nothing more may be written
            // (not even a Warning Event): the new leader handles the event.
            tracing::warn!(
                plugin,
                object,
                "leadership ended while handling the event; abandoned, left to the new leader"
            );
        }
        report
    }
}
