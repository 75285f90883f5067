//! Writing to the cluster: admitted intents (server-side apply, merge patch, delete),
//! Warning Events about failing objects, and manifest files applied like
//! `kubectl apply --server-side`.

pub mod applier;
pub mod events;
pub mod manifests;

pub use applier::{Applier, Outcome, WriteIdentity};
