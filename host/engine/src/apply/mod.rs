//! Writing to the cluster: admitted intents (server-side apply, merge patch, delete),
//! Warning Events about failing objects, and manifest files applied like
//! `kubectl apply --server-side`.

pub(crate) mod applier;
pub mod events;
pub mod manifests;

pub use applier::WriteIdentity;
pub(crate) use applier::{Applier, Outcome};
