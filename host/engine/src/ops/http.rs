//! The operations endpoint: `/healthz` (the process is alive), `/readyz` (plugins loaded,
//! caches synced; `?verbose` lists each check), `/status` (JSON: per plugin its `Ready` and
//! `Blocked` conditions and the objects parked by permanent failures), `/metrics`
//! (Prometheus text format).

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

/// What `/readyz` and `/status` report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessReport {
    /// The plugin directory was loaded once.
    pub plugins_loaded: bool,
    /// Where the watched and read resources stand.
    #[serde(skip)]
    pub watches: crate::watch::WatchReadiness,
    /// Each plugin at work.
    pub plugins: Vec<PluginReport>,
    /// Plugin files whose newest version was rejected: (file, reason). They never start
    /// until the file changes.
    pub rejected: Vec<(String, String)>,
}

/// Where one plugin stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginReport {
    /// The plugin.
    pub name: String,
    /// Its manifest version.
    pub version: String,
    /// Resources it watches or reads that are not served (yet): it gets their events once
    /// they are (a CRD installed later); they do not block readiness.
    pub waiting_for: Vec<String>,
    /// Resources whose cache is still syncing (these block readiness).
    pub syncing: Vec<String>,
    /// Objects whose last event failed permanently: not retried until the object, the
    /// plugin or its settings change, or the slow resync.
    pub blocked: Vec<BlockedObject>,
}

/// An object parked by a permanent failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedObject {
    /// The object's resource.
    pub resource: String,
    /// `namespace/name`.
    pub object: String,
    /// The failure's class.
    pub reason: String,
    /// The error.
    pub message: String,
    /// When it first failed this way (RFC 3339).
    pub since: String,
}

impl PluginReport {
    /// The plugin's conditions, Kubernetes-style: `Ready` and `Blocked`.
    pub fn conditions(&self) -> serde_json::Value {
        let (ready, reason, message) = if !self.syncing.is_empty() {
            (
                "False",
                "Syncing",
                format!("syncing {}", self.syncing.join(", ")),
            )
        } else if !self.waiting_for.is_empty() {
            (
                "True",
                "WaitingForResource",
                format!(
                    "serving what is served; waiting for {} (not served yet)",
                    self.waiting_for.join(", ")
                ),
            )
        } else {
            (
                "True",
                "Synced",
                "every watched resource synced".to_string(),
            )
        };
        let blocked = if self.blocked.is_empty() {
            serde_json::json!({"type": "Blocked", "status": "False", "reason": "NoPermanentFailures", "message": ""})
        } else {
            serde_json::json!({
                "type": "Blocked", "status": "True", "reason": "PermanentFailure",
                "message": format!(
                    "{} object(s) failed permanently and are not retried until they, the plugin or its settings change",
                    self.blocked.len()
                ),
            })
        };
        serde_json::json!([
            {"type": "Ready", "status": ready, "reason": reason, "message": message},
            blocked,
        ])
    }
}

impl ReadinessReport {
    /// Ready: plugins loaded, and no served resource still syncing. Plugins waiting for a
    /// resource that is not served do not block: it may never be.
    pub fn ready(&self) -> bool {
        self.plugins_loaded && self.watches.syncing.is_empty()
    }

    /// The `/status` document: readiness, and per plugin its conditions and the objects
    /// parked by permanent failures.
    pub fn status(&self) -> serde_json::Value {
        let plugins: Vec<serde_json::Value> = self
            .plugins
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                v["conditions"] = p.conditions();
                v
            })
            .collect();
        serde_json::json!({
            "ready": self.ready(),
            "pluginsLoaded": self.plugins_loaded,
            "resources": {
                "synced": self.watches.synced,
                "syncing": self.watches.syncing,
                "unserved": self.watches.unserved,
            },
            "plugins": plugins,
            "rejected": self.rejected.iter()
                .map(|(file, reason)| serde_json::json!({"file": file, "reason": reason}))
                .collect::<Vec<_>>(),
        })
    }

    /// The `?verbose` text, one check a line, as kube-apiserver's `/readyz?verbose`.
    pub fn verbose(&self) -> String {
        let mut out = String::new();
        let mark = |ok: bool| if ok { "[+]" } else { "[-]" };
        out.push_str(&format!("{}plugins loaded\n", mark(self.plugins_loaded)));
        for p in &self.plugins {
            let state = if !p.syncing.is_empty() {
                format!("syncing {}", p.syncing.join(", "))
            } else if !p.waiting_for.is_empty() {
                format!(
                    "waiting for {} (not served yet; not blocking)",
                    p.waiting_for.join(", ")
                )
            } else {
                "synced".to_string()
            };
            out.push_str(&format!(
                "{}plugin {} {}: {state}\n",
                mark(p.syncing.is_empty()),
                p.name,
                p.version
            ));
            if !p.blocked.is_empty() {
                out.push_str(&format!(
                    "[+]plugin {}: {} object(s) blocked by permanent failures (see /status; not blocking)\n",
                    p.name,
                    p.blocked.len()
                ));
            }
        }
        for (file, reason) in &self.rejected {
            out.push_str(&format!(
                "[+]plugin file {file} rejected, never started until it changes: {reason}\n"
            ));
        }
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
        {
            let mut c = kubewasm_core::sync::write(&self.0);
            *c = Some(Box::new(check));
        }
    }

    /// The current report (not ready before the host exists).
    pub fn report(&self) -> ReadinessReport {
        kubewasm_core::sync::read(&self.0)
            .as_ref()
            .map(|f| f())
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

async fn status(State(ops): State<Ops>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ops.readiness.report().status().to_string(),
    )
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
        .route("/status", get(status))
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
    tracing::info!(addr = %bound, "serving /healthz, /readyz, /status, /metrics");
    Ok(bound)
}
