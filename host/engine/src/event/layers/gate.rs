//! The ownership gate: followers keep their caches warm but leave events to the leader,
//! which replays everything when it takes over; with shards, a replica handles only the
//! keys of the shards it holds, and replays a shard's objects when it gains it. This is
//! the one place a handler asks whether the event is its own; the pipeline's guard drops
//! any call or write still running when the term ends.

use super::Handle;
use crate::Error;
use crate::event::pipeline::{Report, Request};
use crate::replicas::ownership::Ownership;

/// Lets an event through only while this replica handles its key.
pub(crate) struct Gate<S> {
    inner: S,
    ownership: Ownership,
}

impl<S> Gate<S> {
    pub(crate) fn new(inner: S, ownership: Ownership) -> Self {
        Gate { inner, ownership }
    }
}

impl<S: Handle> Handle for Gate<S> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let plugin = req.version.plugin.name().to_string();
        let object = req.delivery.object.describe();
        if !self.ownership.owns(&req.delivery.object.key()) {
            tracing::debug!(
                plugin,
                object,
                "not this replica's (not the leader, or not its shard); event left to its owner"
            );
            return Report::skipped(Ok(()));
        }
        let report = self.inner.handle(req).await;
        if let Err(Error::NotLeader { .. }) = &report.result {
            // Not a failure of the plugin or the object, and nothing more may be written
            // (not even a Warning Event): the new leader handles the event.
            tracing::warn!(
                plugin,
                object,
                "leadership ended while handling the event; abandoned, left to the new leader (or the shard's new holder)"
            );
        }
        report
    }
}
