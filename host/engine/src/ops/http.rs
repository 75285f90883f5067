//! The operations endpoint: `/healthz` (the process is alive), `/readyz` (plugins loaded,
//! caches synced), `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::ops::metrics::Metrics;

type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// The readiness check, set once the host exists (not ready until then).
#[derive(Clone, Default)]
pub struct Readiness(Arc<RwLock<Option<Check>>>);

impl Readiness {
    /// Install the check.
    pub fn set(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        if let Ok(mut c) = self.0.write() {
            *c = Some(Box::new(check));
        }
    }

    /// Whether the host is ready.
    pub fn ready(&self) -> bool {
        self.0
            .read()
            .map(|c| c.as_ref().is_some_and(|f| f()))
            .unwrap_or(false)
    }
}

#[derive(Clone)]
struct Ops {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(ops): State<Ops>) -> impl IntoResponse {
    if ops.readiness.ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: plugins loading or caches syncing\n",
        )
    }
}

async fn metrics(State(ops): State<Ops>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        ops.metrics.encode(),
    )
}

/// Serve on `addr` until `cancel`; returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    cancel: CancellationToken,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding the metrics endpoint on {addr}"),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::Io {
        context: "metrics endpoint address".into(),
        source,
    })?;
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(self::metrics))
        .with_state(Ops { metrics, readiness });
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    tracing::info!(addr = %bound, "serving /healthz, /readyz, /metrics");
    Ok(bound)
}
