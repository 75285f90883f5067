//! Running in production: the host's own permissions, leader election, Prometheus metrics, the `/healthz`, `/readyz`
//! and `/metrics` endpoints, and the in-cluster client configuration.

pub mod access;
pub mod http;
pub mod incluster;
pub mod leader;
pub(crate) mod lease;
pub mod metrics;
pub mod ownership;
pub mod shards;

/// A duration as a log field's plain value: milliseconds, to the microsecond (Rust's
/// debug form, `1.234567ms` or `2s`, changes unit with the value).
pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}
