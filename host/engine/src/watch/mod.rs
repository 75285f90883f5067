//! Watching the cluster: discovery of what plugins name, one watcher and cache per served
//! resource (shared by every plugin), and the events those watchers produce.

pub(crate) mod backoff;
pub(crate) mod cache;
pub mod discovery;
pub(crate) mod manager;
mod stages;
mod task;

pub use manager::WatchConfig;
pub(crate) use manager::{WatchEvent, WatchManager, WatchReadiness, WatchSignal};
pub(crate) use stages::kept;
