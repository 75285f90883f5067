//! What the host serves and checks about itself: its own permissions (`access`), Prometheus
//! metrics, the `/healthz`, `/readyz` and `/metrics` endpoints (`http`), and the in-cluster
//! client configuration.

pub(crate) mod access;
pub(crate) mod http;
pub mod incluster;
pub(crate) mod metrics;
