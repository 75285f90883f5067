//! `kubewasm-core`: the pure model of kubewasm, with no I/O: names of kinds and objects,
//! the kind resolution model, plugin manifests, selectors, intents and their validation
//! pipeline, the grant check, the least-privilege RBAC rules rendered from manifests and
//! event types. Every other kubewasm crate builds on it; it depends on none of them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admit;
pub mod event;
pub mod excerpt;
pub mod grant;
pub mod intent;
pub mod kind;
pub mod manifest;
pub mod names;
pub mod plugin_object;
pub mod projection;
pub mod rbac;
pub mod resource;
pub mod selector;
pub mod sync;
pub mod tenant;
