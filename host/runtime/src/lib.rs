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
#![warn(missing_docs, unreachable_pub)]

// One path per item: `budget`, `codecache` and `compiler` are namespaces callers name
// (`budget::default_budget`, `compiler::landlock`); every other module is private and
// what callers use of it is re-exported here.
mod approval;
mod artifact;
mod bindings;
pub mod budget;
mod capability;
pub mod codecache;
pub mod compiler;
mod convert;
mod engine;
mod error;
mod lift;
mod limits;
mod loader;
mod plugin;
mod state;

pub use approval::Approvals;
pub use capability::cluster::{
    ClusterView, ListAnswer, ListLimit, NoCluster, ReadError, ReadScope,
};
pub use engine::PluginEngine;
pub use error::{CallError, EngineError, Error, LimitExceeded, ManifestRejection};
pub use limits::Limits;
pub use loader::{
    LimitCeilings, LimitOverrides, LoadOptions, Loaded, Loader, MAX_INTENT_KIB, MAX_MEMORY_MIB,
    PluginFile, load_plugin, plugin_files,
};
pub use plugin::{CompiledPlugin, InstancePolicy, PluginEvent, PoolStats};
