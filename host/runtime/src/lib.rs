//! `kubewasm-runtime`: running plugins. The wasmtime engine, compiled components with a
//! pool of reusable instances, the compiled-code cache, loading plugin files, and one
//! module per host capability a plugin imports.
//!
//! Lifecycle, Spin-style: capabilities are added to one [`Linker`](wasmtime::component::Linker)
//! when the engine is built ([`PluginEngine`]), each component is linked once into an
//! `InstancePre` when loaded ([`CompiledPlugin`]), and each call gets a prepared store with
//! its deadline, memory cap and cluster view (see [`capability`]).
// `deny`, not `forbid`: loading compiled code calls wasmtime's unsafe deserialization
// (audited in `artifact`, the only module allowed to).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod approval;
mod artifact;
mod bindings;
pub mod budget;
pub mod capability;
pub mod codecache;
pub mod compiler;
mod convert;
pub mod engine;
pub mod error;
mod lift;
pub mod limits;
pub mod loader;
pub mod plugin;
mod state;

pub use budget::CallBudget;
pub use capability::cluster::{
    ClusterView, ListAnswer, ListLimit, NoCluster, ReadError, ReadScope,
};
pub use engine::PluginEngine;
pub use error::{CallError, Error, ManifestRejection};
pub use limits::Limits;
pub use loader::{LimitCeilings, LimitOverrides, LoadOptions, Loader, PluginFile, load_plugin};
pub use plugin::{CompiledPlugin, PluginEvent};
