//! kubewasm: a Kubernetes automation host for WebAssembly plugins. This crate is the
//! engine and the facade: it re-exports the pure model ([`core`], `kubewasm-core`) and the
//! plugin runtime ([`runtime`], `kubewasm-runtime`), and adds everything that talks to a
//! cluster. The `kubewasm` binary (crate `kubewasm-cli`) is a thin CLI on top.
//!
//! The data flow, one module per box:
//!
//! ```text
//! host::reload (plugin dir) ─► runtime (compile, describe)
//!      │ union of watches and reads
//!      ▼
//! watch (discovery + one watcher/cache per resource) ─► host::router ─► dispatch (queue per plugin)
//!      ─► host::handler: runtime (call) ─► core::admit (decode, resolve, bind, grant) ─► apply (SSA)
//! ```
//!
//! [`host::Host`] wires the boxes together. [`cases`] replays the same call path offline
//! (`kubewasm test`) and records `run`'s events as cases.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use kubewasm_core as core;
pub use kubewasm_runtime as runtime;

pub mod apply;
pub mod cases;
pub mod dispatch;
pub mod error;
pub mod host;
pub mod ops;
pub mod watch;

pub use error::Error;
