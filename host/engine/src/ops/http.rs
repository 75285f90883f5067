//! The operations endpoint: `/healthz` (the process is alive), `/readyz` (plugins loaded,
//! caches synced), `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::ops::metrics::Metrics;

/// What `/readyz` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadinessReport {
    /// The plugin directory was loaded once.
    pub plugins_loaded: bool,
    /// Where the watched and read resources stand.
    pub watches: crate::watch::WatchReadiness,
}

impl ReadinessReport {
    /// Ready: plugins loaded, and no served resource still syncing.
    pub fn ready(&self) -> bool {
        self.plugins_loaded && self.watches.syncing.is_empty()
    }

    /// The `?verbose` text, one check a line, as kube-apiserver's `/readyz?verbose`.
    pub fn verbose(&self) -> String {
        let mut out = String::new();
        let mark = |ok: bool| if ok { "[+]" } else { "[-]" };
        out.push_str(&format!("{}plugins loaded\n", mark(self.plugins_loaded)));
        for r in &self.watches.synced {
            out.push_str(&format!("[+]cache {r} synced\n"));
        }
        for r in &self.watches.syncing {
            out.push_str(&format!("[-]cache {r} syncing\n"));
        }
        for r in &self.watches.unserved {
            out.push_str(&format!(
                "[+]{r} not served (yet): its plugins wait for it; not blocking\n"
            ));
        }
        out.push_str(if self.ready() {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        out
    }
}

type Check = Box<dyn Fn() -> ReadinessReport + Send + Sync>;

/// The readiness check, set once the host exists (not ready until then).
#[derive(Clone, Default)]
pub struct Readiness(Arc<RwLock<Option<Check>>>);

impl Readiness {
    /// Install the check.
    pub fn set(&self, check: impl Fn() -> ReadinessReport + Send + Sync + 'static) {
        if let Ok(mut c) = self.0.write() {
            *c = Some(Box::new(check));
        }
    }

    /// The current report (not ready before the host exists).
    pub fn report(&self) -> ReadinessReport {
        self.0
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|f| f()))
            .unwrap_or_default()
    }

    /// Whether the host is ready.
    pub fn ready(&self) -> bool {
        self.report().ready()
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

async fn readyz(
    State(ops): State<Ops>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> impl IntoResponse {
    let report = ops.readiness.report();
    let status = if report.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = if q.contains_key("verbose") {
        report.verbose()
    } else if report.ready() {
        "ready\n".to_string()
    } else {
        "not ready: plugins loading or caches syncing\n".to_string()
    };
    (status, body)
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
