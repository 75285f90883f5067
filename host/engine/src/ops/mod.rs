//! Running in production: leader election, Prometheus metrics, the `/healthz`, `/readyz`
//! and `/metrics` endpoints, and the in-cluster client configuration.

pub mod http;
pub mod incluster;
pub mod leader;
pub mod metrics;
