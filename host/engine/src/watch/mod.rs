//! Watching the cluster: discovery of what plugins name, one watcher and cache per served
//! resource (shared by every plugin), and the events those watchers produce.

pub mod cache;
pub mod discovery;
pub mod manager;

pub use manager::{WatchConfig, WatchEvent, WatchManager, WatchReadiness, WatchSignal};
