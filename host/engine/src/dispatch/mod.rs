//! Dispatch: each plugin's queue of events and the health that quarantines a plugin
//! whose calls keep failing in the sandbox.

pub mod quarantine;
pub mod queue;

pub use quarantine::{Health, QuarantinePolicy};
pub use queue::{Delivery, Handler, Latest, Lookup, NoCache, Queue, QueueConfig, QueueKey};
