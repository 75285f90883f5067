//! kubewasm: a Kubernetes automation host for WebAssembly plugins. This crate is the
//! engine and the facade: it re-exports the pure model ([`core`], `kubewasm-core`) and the
//! plugin runtime ([`runtime`], `kubewasm-runtime`), and adds everything that talks to a
//! cluster. The `kubewasm` binary (crate `kubewasm-cli`) is a thin CLI on top.
//!
//! The engine runs three loops, one module each, around the parts they share:
//!
//! ```text
//! plugins (directory, Plugin objects, approvals) ─► the next environment ─► watch (which kinds)
//! watch (discovery, one watcher and cache per resource) ─► event::route ─► event::queue
//!      ─► event::handler ─► event::layers ─► event::pipeline: call ─► admit ─► apply (SSA)
//! replicas (leader Lease or shards): which keys this replica may handle, for every loop
//! ```
//!
//! [`host::Host`] is the manager: it builds, starts and stops every part. [`serve`] is
//! what the host serves about itself (probes, metrics), [`cases`] runs test cases through
//! the same pipeline (`kubewasm test`) and records `run`'s events as cases.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub use kubewasm_core as core;
pub use kubewasm_runtime as runtime;

pub mod apply;
pub mod cases;
pub mod error;
pub mod event;
pub mod host;
pub mod plan;
pub(crate) mod plugins;
pub(crate) mod preview;
pub mod replicas;
pub mod serve;
pub mod watch;

pub use error::Error;

/// A duration as a log field's plain value: milliseconds, to the microsecond (Rust's
/// debug form, `1.234567ms` or `2s`, changes unit with the value).
pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}
