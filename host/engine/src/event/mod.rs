//! One event, from a watch to the cluster: routing to the plugins whose watches select it
//! (`route`), each plugin's queue (`queue`, with coalescing and the rate limiter as separate
//! pieces, as client-go's workqueue, and the health that quarantines a plugin whose calls
//! keep failing: `health`), the queue's handler (`handler`: the version serving, the
//! plugin's view), the layers around the pipeline (`layers`: gate, quarantine, observe,
//! record) and the pipeline itself (`pipeline`: call, admit, apply), over the cluster port
//! (`cluster`: the API server for `run`, an embedded one for `kubewasm test`), or that
//! port in dry run (`dry_run`: a plugin in `spec.mode: DryRun`, a shadow candidate,
//! `kubewasm plan`).

mod coalesce;
mod health;
mod queue;
mod rate_limit;
#[cfg(test)]
mod testing;

pub use health::QuarantinePolicy;
pub use queue::QueueConfig;

pub(crate) use health::Health;
pub(crate) use queue::{Delivery, Handler, Queue, QueueKey};

pub(crate) mod cluster;
pub(crate) mod dry_run;
pub(crate) mod handler;
pub(crate) mod layers;
pub(crate) mod pipeline;
pub(crate) mod preflight;
pub(crate) mod route;
