//! Watching the cluster: discovery of what plugins name, one watcher and cache per served
//! resource (shared by every plugin), and the events those watchers produce.

pub(crate) mod backoff;
pub(crate) mod cache;
pub mod discovery;
pub(crate) mod initial;
pub(crate) mod manager;
mod stages;
mod task;

pub use initial::InitialSync;
pub use manager::{DEFAULT_PAGE_SIZE, WatchConfig};
pub(crate) use manager::{WatchEvent, WatchManager, WatchReadiness, WatchSignal};
pub(crate) use stages::kept;
