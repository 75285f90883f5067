//! Running plugins: the wasmtime engine, compiled components, per-call stores, and the
//! host functions a plugin may import.
//!
//! Lifecycle, Spin-style: host capabilities are added to one [`Linker`](wasmtime::component::Linker)
//! when the engine is built ([`engine::PluginEngine`]), each component is linked once into an
//! `InstancePre` when loaded ([`plugin::CompiledPlugin`]), and each call gets a prepared
//! store ([`state::PluginState`]) with its deadline, memory cap and cluster view.

pub mod bindings;
pub mod codecache;
mod convert;
pub mod engine;
pub mod limits;
pub mod plugin;
pub mod state;

pub use engine::PluginEngine;
pub use limits::Limits;
pub use plugin::{CompiledPlugin, EventType, PluginEvent};
pub use state::{ClusterView, NoCluster, ReadError};
