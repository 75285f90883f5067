//! What the host serves and checks about itself: its own permissions (`access`), Prometheus
//! metrics, the `/healthz`, `/readyz` and `/metrics` endpoints (`http`), with
//! `--metrics-secure` over HTTPS (`tls`) behind the API server's reviews of each request
//! (`authn`), and the in-cluster client configuration.

pub(crate) mod access;
pub(crate) mod authn;
pub(crate) mod http;
pub mod incluster;
pub(crate) mod metrics;
pub(crate) mod tls;

pub use tls::CertSource;
