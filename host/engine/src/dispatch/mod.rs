//! Dispatch: each plugin's queue of events and the health that quarantines a plugin
//! whose calls keep failing in the sandbox.
//!
//! The queue is three pieces, as client-go's workqueue: the queue itself (per-key state,
//! workers), coalescing (merging a burst of events for one object) and the rate limiter
//! (when a failed key is tried again).

mod coalesce;
mod quarantine;
mod queue;
mod rate_limit;
#[cfg(test)]
mod testing;

pub use quarantine::QuarantinePolicy;
pub use queue::QueueConfig;

pub(crate) use quarantine::Health;
pub(crate) use queue::{Delivery, Handler, Latest, Lookup, Queue, QueueKey};
