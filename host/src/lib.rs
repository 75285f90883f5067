//! kubewasm: a Kubernetes automation host for WebAssembly plugins.
//!
//! The data flow, one module per box:
//!
//! ```text
//! registry (load plugin dir) ─► runtime (wasmtime: describe/handle)
//!      │ union of watches
//!      ▼
//! watch (discovery + one watcher/cache per resource) ─► dispatch (per-plugin queues)
//!      ─► runtime (call) ─► intent (decode, validate) ─► grant (check) ─► apply (SSA)
//! ```
//!
//! [`host::Host`] wires the boxes together; the `kubewasm` binary is a thin CLI on top.
// `deny`, not `forbid`: the code cache must call wasmtime's unsafe `Component::deserialize`
// (one audited function in `runtime::codecache`).
#![deny(unsafe_code)]

pub mod apply;
pub mod cache;
pub mod dev;
pub mod discovery;
pub mod dispatch;
pub mod error;
pub mod events;
pub mod grant;
pub mod host;
pub mod incluster;
pub mod inspect;
pub mod intent;
pub mod leader;
pub mod manifest;
pub mod metrics;
pub mod ops;
pub mod quarantine;
pub mod rbac;
pub mod registry;
pub mod reload;
pub mod resource;
pub mod runtime;
pub mod selector;
pub mod testcase;
pub mod watch;

pub use error::Error;
