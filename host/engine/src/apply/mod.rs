//! Writing to the cluster: admitted intents (server-side apply, merge patch, delete;
//! what only the cluster can tell is checked before, by the pipeline's
//! `event::preflight`), Warning Events about failing objects, manifest files applied like
//! `kubectl apply --server-side`, and whether the host may write as each plugin at all
//! ([`identity`]).

pub(crate) mod applier;
pub mod events;
pub mod identity;
pub mod manifests;

pub use applier::WriteIdentity;
pub(crate) use applier::{Applier, Outcome, Writer};
