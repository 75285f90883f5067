//! The operations endpoints: `/healthz` (the process is alive), `/readyz` (plugins loaded,
//! caches synced; `?verbose` lists each check), `/status` (JSON: per plugin its `Ready` and
//! `Blocked` conditions and the objects parked by permanent failures), `/metrics`
//! (Prometheus text format), `/preview` (JSON: the plugins that preview, in `spec.mode:
//! DryRun` or with a shadow candidate, each with its `status.preview` summary) and
//! `/preview/{plugin}` (that plugin's whole per-object report, as `kubewasm preview
//! report` prints it).
//!
//! Two listeners: [`serve`] answers all of them and belongs on loopback (`kubewasm run
//! --metrics-addr`, default `127.0.0.1:9090`: reached from inside the pod or through
//! `kubectl port-forward`); [`serve_probes`] answers only the probes, for the kubelet,
//! on the pod's address (`--probe-addr`). Exposing the first is an operator's choice
//! (`--metrics-addr 0.0.0.0:9090` behind a NetworkPolicy), logged as a warning unless it
//! runs `--metrics-secure`: then it speaks HTTPS (`serve::tls`) and lets a request through
//! only once the API server says its bearer may get the path (`serve::authn`), as
//! controller-runtime's metrics server does; the probes stay plain HTTP for the kubelet.
//!
//! Nothing a plugin wrote is served by the probes or `/status`: a blocked object shows its
//! failure's class and a fixed description ([`BlockedObject::message`] stays in the host),
//! a rejected plugin file only that it was rejected. The plugin's own words go to the log.
//! `/preview` is the exception, by design: what a dry run would change is field values,
//! the plugin's and other objects' (the live object it would overwrite), so each is an
//! excerpt, a Secret's data is never shown, and the report is bounded in objects and
//! fields (`preview::report`, `preview::change`).
//!
//! Why the full preview report is served here and not written to a report object: it
//! costs no writes to etcd (a report changes with every event), needs no new kind, and
//! since it shows other objects' field values, it stays on loopback behind the pod's
//! network, readable only by whoever may reach the pod (`kubectl port-forward` needs the
//! `pods/portforward` permission), not by everyone who may read a namespace's objects.
//! The Plugin object's `status.preview` carries only counts and field paths.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::preview::report::Previews;
use crate::serve::authn::{self, ApiReviewer, Decision, Gate};
use crate::serve::metrics::Metrics;

/// What `/readyz` and `/status` report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadinessReport {
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
    /// Plugin sources refused because their plugin's ServiceAccount lacks read rules its
    /// approval needs: (source, each rule). The rules are the operator's approval and
    /// RBAC, never the plugin's words, so they are shown.
    pub missing_reads: Vec<(String, Vec<String>)>,
    /// RBAC rules the host needs and the API server says it lacks
    /// ([`crate::serve::access`]); a blocking one holds readiness back.
    pub missing: Vec<crate::serve::access::Missing>,
    /// With `--shards`: the shards this replica holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsReport>,
}

/// The shards of one replica, in `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ShardsReport {
    /// S.
    pub total: u32,
    /// The shards this replica holds.
    pub held: Vec<u32>,
    /// Replicas sharing them, this one included, as last seen.
    pub members: usize,
    /// This process's identity in the Leases.
    pub identity: String,
}

/// Where one plugin stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PluginReport {
    /// The plugin.
    pub name: String,
    /// Its manifest version.
    pub version: String,
    /// Resources it watches or reads that are not served (yet): it gets their events once
    /// they are (a CRD installed later); they do not block readiness.
    pub waiting_for: Vec<String>,
    /// Resources whose cache is still syncing (these block readiness).
    pub syncing: Vec<String>,
    /// RBAC rules the host lacks to watch what the plugin watches or reads (e.g. `list
    /// configmaps cluster-wide`): its caches cannot sync until they are granted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<String>,
    /// Objects whose last event failed permanently: not retried until the object, the
    /// plugin or its settings change, or the slow resync.
    pub blocked: Vec<BlockedObject>,
    /// Why the plugin cannot work at all (one line, the host's words: e.g. the host may
    /// not impersonate its ServiceAccount, `apply::identity`); its `Ready` condition is
    /// False. It does not hold the host's own readiness back: the other plugins serve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_ready: Option<String>,
}

/// An object parked by a permanent failure. Served as its resource, object, reason,
/// `since` and, as `message`, the fixed description of its reason ([`describe_reason`]):
/// the error itself may quote the plugin (a `handle-error` message, an excerpt of an
/// intent) and stays in the host's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BlockedObject {
    /// The object's resource.
    pub resource: String,
    /// `namespace/name`.
    pub object: String,
    /// The failure's class.
    pub reason: String,
    /// The error, as logged. Never served.
    pub message: String,
    /// When it first failed this way (RFC 3339).
    pub since: String,
}

impl serde::Serialize for BlockedObject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = s.serialize_struct("BlockedObject", 5)?;
        out.serialize_field("resource", &self.resource)?;
        out.serialize_field("object", &self.object)?;
        out.serialize_field("reason", &self.reason)?;
        out.serialize_field("message", describe_reason(&self.reason))?;
        out.serialize_field("since", &self.since)?;
        out.end()
    }
}

/// What a failure class (`Error::kind`) means, in the host's words only.
pub(crate) fn describe_reason(reason: &str) -> &'static str {
    match reason {
        "refused" => "an intent was outside the plugin's grants; the host's log says which",
        "invalid-intent" => "the plugin returned an invalid intent; the host's log says why",
        "plugin" => "the plugin returned an error; the host's log has its message",
        "limit" => "the plugin's output was over a limit; the host's log says which",
        "deadline" | "memory" | "trap" => {
            "the sandbox stopped the plugin's call; the host's log has the details"
        }
        "conflict" => "another field manager owns fields the plugin writes without force",
        "api" => "the API server refused a write; the host's log has its answer",
        _ => "the event failed permanently; the host's log has the details",
    }
}

/// What `/status` and `/readyz?verbose` say of a rejected plugin file: the error may
/// quote the plugin (its `describe` error, its settings), so only that it was rejected.
const REJECTED: &str = "rejected at load; the host's log says why";

/// What `/status` and `/readyz?verbose` say of a plugin refused because its own
/// ServiceAccount may not read what its approval lets it read (each rule follows).
const ACCOUNT_LACKS: &str =
    "not loaded: its ServiceAccount may not read what it is approved to read";

impl PluginReport {
    /// The plugin's conditions, Kubernetes-style: `Ready` and `Blocked`.
    pub(crate) fn conditions(&self) -> serde_json::Value {
        let (ready, reason, message) = if let Some(why) = &self.not_ready {
            ("False", "CannotWrite", why.clone())
        } else if !self.forbidden.is_empty() {
            (
                "False",
                "Forbidden",
                format!(
                    "the host's RBAC does not allow: {}",
                    self.forbidden.join(", ")
                ),
            )
        } else if !self.syncing.is_empty() {
            (
                "False",
                "Syncing",
                format!("syncing {}", self.syncing.join(", ")),
            )
        } else if !self.waiting_for.is_empty() {
            // Its reads of these fail: not ready (as its Plugin object says).
            (
                "False",
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
    pub(crate) fn ready(&self) -> bool {
        self.plugins_loaded
            && self.watches.syncing.is_empty()
            && !self.missing.iter().any(|m| m.blocking)
    }

    /// The one-line answer of `/readyz` without `?verbose`.
    pub(crate) fn summary(&self) -> &'static str {
        if self.ready() {
            "ready\n"
        } else if self.missing.iter().any(|m| m.blocking) {
            "not ready: the host's RBAC lacks rules it needs (see /readyz?verbose)\n"
        } else {
            "not ready: plugins loading or caches syncing\n"
        }
    }

    /// The `/status` document: readiness, and per plugin its conditions and the objects
    /// parked by permanent failures.
    pub(crate) fn status(&self) -> serde_json::Value {
        let plugins: Vec<serde_json::Value> = self
            .plugins
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                v["conditions"] = p.conditions();
                v
            })
            .collect();
        let mut doc = serde_json::json!({
            "ready": self.ready(),
            "pluginsLoaded": self.plugins_loaded,
            "resources": {
                "synced": self.watches.synced,
                "syncing": self.watches.syncing,
                "unserved": self.watches.unserved,
            },
            "plugins": plugins,
            "rejected": self.rejected.iter()
                .map(|(file, _)| {
                    let mut v = serde_json::json!({"file": file, "reason": REJECTED});
                    if let Some((_, rules)) = self.missing_reads.iter().find(|(f, _)| f == file) {
                        v["reason"] = serde_json::json!(ACCOUNT_LACKS);
                        v["missingRules"] = serde_json::json!(rules);
                    }
                    v
                })
                .collect::<Vec<_>>(),
            "permissions": {"missing": self.missing},
        });
        if let Some(shards) = &self.shards {
            doc["shards"] = serde_json::to_value(shards).unwrap_or_default();
        }
        doc
    }

    /// The `?verbose` text, one check a line, as kube-apiserver's `/readyz?verbose`.
    pub(crate) fn verbose(&self) -> String {
        let mut out = String::new();
        let mark = |ok: bool| if ok { "[+]" } else { "[-]" };
        out.push_str(&format!("{}plugins loaded\n", mark(self.plugins_loaded)));
        for m in &self.missing {
            out.push_str(&format!(
                "[-]permission {}: denied by the host's RBAC (needed for {}){}\n",
                m.rule,
                m.needed_for,
                if m.blocking { "" } else { "; not blocking" }
            ));
        }
        for p in &self.plugins {
            if let Some(why) = &p.not_ready {
                out.push_str(&format!(
                    "[-]plugin {} {}: not ready: {why} (not blocking)\n",
                    p.name, p.version
                ));
                continue;
            }
            let state = if !p.forbidden.is_empty() {
                format!("forbidden: the host may not {}", p.forbidden.join(", "))
            } else if !p.syncing.is_empty() {
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
                mark(p.syncing.is_empty() && p.forbidden.is_empty()),
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
        for (file, _) in &self.rejected {
            match self.missing_reads.iter().find(|(f, _)| f == file) {
                Some((_, rules)) => {
                    for rule in rules {
                        out.push_str(&format!(
                            "[+]plugin file {file}: {ACCOUNT_LACKS}: {rule}; not blocking\n"
                        ));
                    }
                }
                None => out.push_str(&format!(
                    "[+]plugin file {file} {REJECTED}; never started until it changes\n"
                )),
            }
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
pub(crate) struct Readiness(Arc<RwLock<Option<Check>>>);

impl Readiness {
    /// Install the check.
    pub(crate) fn set(&self, check: impl Fn() -> ReadinessReport + Send + Sync + 'static) {
        {
            let mut c = kubewasm_core::sync::write(&self.0);
            *c = Some(Box::new(check));
        }
    }

    /// The current report (not ready before the host exists).
    pub(crate) fn report(&self) -> ReadinessReport {
        kubewasm_core::sync::read(&self.0)
            .as_ref()
            .map(|f| f())
            .unwrap_or_default()
    }

    /// Whether the host is ready.
    pub(crate) fn ready(&self) -> bool {
        self.report().ready()
    }
}

#[derive(Clone)]
struct Ops {
    metrics: Arc<Metrics>,
    readiness: Readiness,
    previews: Arc<Previews>,
}

impl axum::extract::FromRef<Ops> for Readiness {
    fn from_ref(ops: &Ops) -> Readiness {
        ops.readiness.clone()
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(
    State(readiness): State<Readiness>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> impl IntoResponse {
    let report = readiness.report();
    let status = if report.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = if q.contains_key("verbose") {
        report.verbose()
    } else {
        report.summary().to_string()
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

/// `/preview`: the plugins that preview, each with its summary.
async fn previews(State(ops): State<Ops>) -> impl IntoResponse {
    let plugins: Vec<serde_json::Value> = ops
        .previews
        .summaries()
        .into_iter()
        .map(|(name, summary)| serde_json::json!({"name": name, "summary": summary}))
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "plugins": plugins }).to_string(),
    )
}

/// `/preview/{plugin}`: the plugin's whole report; 404 when it does not preview.
async fn preview(State(ops): State<Ops>, Path(plugin): Path<String>) -> impl IntoResponse {
    let (code, body) = match ops.previews.report(&plugin) {
        Some(report) => (
            StatusCode::OK,
            serde_json::to_value(&report).unwrap_or_default(),
        ),
        None => (
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": format!(
                "no plugin named {plugin:?} previews on this host: it is not loaded here, or \
                 it has spec.mode Enforce and no candidate running (GET /preview lists those \
                 that preview)"
            )}),
        ),
    };
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

/// The routes of [`serve`].
fn ops_routes(ops: Ops) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/metrics", get(self::metrics))
        .route("/preview", get(previews))
        .route("/preview/{plugin}", get(preview))
        .with_state(ops)
}

/// `--metrics-secure`: the listener's TLS configuration and the reviews every request
/// passes.
pub(crate) struct Secure {
    pub tls: Arc<rustls::ServerConfig>,
    pub gate: Arc<Gate<ApiReviewer>>,
}

/// Lets a request through only when the API server says its bearer may `get` its path
/// ([`crate::serve::authn`]); 401, 403 or 500 (logged) otherwise, as controller-runtime's
/// filter answers.
async fn reviewed(
    State(gate): State<Arc<Gate<ApiReviewer>>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let verb = authn::verb(req.method());
    let path = req.uri().path().to_string();
    match gate.check(token, &verb, &path).await {
        Decision::Allowed => next.run(req).await,
        Decision::Unauthenticated => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized\n",
        )
            .into_response(),
        Decision::Forbidden { user } => {
            tracing::debug!(%user, %verb, %path, "metrics endpoint: request forbidden by RBAC");
            (
                StatusCode::FORBIDDEN,
                format!("Forbidden (user={user}, verb={verb}, path={path})\n"),
            )
                .into_response()
        }
        Decision::Failed { reason } => {
            tracing::error!(%verb, %path, error = %reason,
                "metrics endpoint: could not ask the API server whether the request may be served, so it is refused (the host's RBAC needs create on tokenreviews.authentication.k8s.io and subjectaccessreviews.authorization.k8s.io: `kubewasm rbac --metrics-secure`)");
            (StatusCode::INTERNAL_SERVER_ERROR, "Authorization failed\n").into_response()
        }
    }
}

/// Serve `/healthz`, `/readyz`, `/status`, `/metrics` and `/preview` on `addr` until
/// `cancel`; returns the bound address (port 0 picks one). Plain HTTP is meant for
/// loopback: bound elsewhere, whoever reaches the address reads the metrics, the plugins'
/// status and their preview reports (said at start). With `secure`, HTTPS, and each
/// request reviewed.
pub(crate) async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    previews: Arc<Previews>,
    secure: Option<Secure>,
    cancel: CancellationToken,
) -> Result<SocketAddr, Error> {
    let app = ops_routes(Ops {
        metrics,
        readiness,
        previews,
    });
    if let Some(secure) = secure {
        let app = app.layer(axum::middleware::from_fn_with_state(secure.gate, reviewed));
        let bound = crate::serve::tls::listen(addr, app, secure.tls, cancel).await?;
        tracing::info!(addr = %bound,
            "serving /healthz, /readyz, /status, /metrics, /preview over HTTPS, each request authenticated with a TokenReview and authorized with a SubjectAccessReview (--metrics-secure)");
        return Ok(bound);
    }
    let bound = listen(addr, app, "metrics endpoint", cancel).await?;
    if bound.ip().is_loopback() {
        tracing::info!(addr = %bound, "serving /healthz, /readyz, /status, /metrics, /preview");
    } else {
        tracing::warn!(addr = %bound,
            "serving /healthz, /readyz, /status, /metrics, /preview on a non-loopback address: whoever can reach it reads the metrics, the plugins' status and their preview reports, which show excerpts of objects' fields (restrict it with a NetworkPolicy)");
    }
    Ok(bound)
}

/// Serve only the probes, `/healthz` and `/readyz`, on `addr` until `cancel` (for the
/// kubelet, on the pod's address); returns the bound address.
pub(crate) async fn serve_probes(
    addr: SocketAddr,
    readiness: Readiness,
    cancel: CancellationToken,
) -> Result<SocketAddr, Error> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(readiness);
    let bound = listen(addr, app, "probe endpoint", cancel).await?;
    tracing::info!(addr = %bound, "serving the probes /healthz, /readyz");
    Ok(bound)
}

/// Bind `addr` and serve `app` on it in the background until `cancel`.
async fn listen(
    addr: SocketAddr,
    app: Router,
    what: &'static str,
    cancel: CancellationToken,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding the {what} on {addr}"),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::Io {
        context: format!("{what} address"),
        source,
    })?;
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "{what} stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preview::change::change;
    use crate::preview::report::{Finding, Source};
    use kubewasm_core::grant::Mode;
    use tower::ServiceExt as _;

    /// GET `path` of the ops routes over `previews`: status and JSON body.
    async fn get_json(previews: Arc<Previews>, path: &str) -> (StatusCode, serde_json::Value) {
        let app = ops_routes(Ops {
            metrics: Arc::new(Metrics::new()),
            readiness: Readiness::default(),
            previews,
        });
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .expect("request");
        let response = app.oneshot(request).await.expect("response");
        let code = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        (code, serde_json::from_slice(&body).expect("JSON"))
    }

    #[tokio::test]
    async fn preview_lists_the_plugins_that_preview_and_serves_each_report() {
        let previews = Arc::new(Previews::default());
        previews.set([("web".to_string(), Mode::DryRun, None)]);
        let after =
            serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
        previews.record(
            "web",
            Source::DryRun,
            vec![Finding {
                object: "ConfigMap default/a".into(),
                verb: "create".into(),
                trigger: "ContentSite default/blog".into(),
                change: change(None, Some(&after)),
                divergence: None,
            }],
        );
        let (code, list) = get_json(previews.clone(), "/preview").await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(list["plugins"][0]["name"], "web");
        assert_eq!(list["plugins"][0]["summary"]["mode"], "DryRun");
        assert_eq!(list["plugins"][0]["summary"]["changes"], 1);

        let (code, report) = get_json(previews.clone(), "/preview/web").await;
        assert_eq!(code, StatusCode::OK);
        let entry = &report["objects"][0];
        assert_eq!(entry["object"], "ConfigMap default/a");
        assert_eq!(entry["source"], "dryRun");
        assert_eq!(entry["change"]["action"], "create");
        let paths: Vec<&str> = entry["change"]["fields"]
            .as_array()
            .expect("fields")
            .iter()
            .filter_map(|f| f["path"].as_str())
            .collect();
        assert!(paths.contains(&"data.k"), "{report}");
        assert_eq!(report["summary"]["events"], 1);

        let (code, missing) = get_json(previews, "/preview/other").await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        let error = missing["error"].as_str().expect("an error message");
        assert!(
            error.contains("\"other\"") && error.contains("GET /preview"),
            "{error}"
        );
    }

    fn report(blocked_message: &str) -> ReadinessReport {
        ReadinessReport {
            plugins_loaded: true,
            plugins: vec![PluginReport {
                name: "web".into(),
                version: "1".into(),
                blocked: vec![BlockedObject {
                    resource: "v1/configmaps".into(),
                    object: "default/x".into(),
                    reason: "plugin".into(),
                    message: blocked_message.into(),
                    since: "2026-01-01T00:00:00Z".into(),
                }],
                ..Default::default()
            }],
            rejected: vec![(
                "evil.wasm".into(),
                format!("describe failed: {blocked_message}"),
            )],
            ..Default::default()
        }
    }

    #[test]
    fn status_and_verbose_carry_no_plugin_text() {
        let secret = "hunter2";
        let r = report(&format!(
            "plugin web: plugin error: the password is {secret}"
        ));
        let status = r.status();
        let text = status.to_string();
        assert!(!text.contains(secret), "{text}");
        let blocked = &status["plugins"][0]["blocked"][0];
        assert_eq!(blocked["reason"], "plugin");
        assert_eq!(blocked["message"], describe_reason("plugin"));
        assert_eq!(status["rejected"][0]["reason"], REJECTED);
        assert!(!r.verbose().contains(secret), "{}", r.verbose());
    }

    #[test]
    fn a_missing_rule_is_named_and_only_a_blocking_one_holds_readiness() {
        let mut r = report("x");
        let missing = |blocking: bool| crate::serve::access::Missing {
            rule: "list configmaps cluster-wide".into(),
            group: String::new(),
            plural: "configmaps".into(),
            needed_for: "the watch of v1/ConfigMap".into(),
            blocking,
        };
        r.missing = vec![missing(false)];
        assert!(r.ready());
        assert!(r.verbose().contains(
            "[-]permission list configmaps cluster-wide: denied by the host's RBAC (needed for the watch of v1/ConfigMap); not blocking"
        ));
        r.missing = vec![missing(true)];
        r.plugins[0].forbidden = vec!["list configmaps cluster-wide".into()];
        assert!(!r.ready());
        assert!(r.summary().contains("RBAC lacks rules"), "{}", r.summary());
        let status = r.status();
        assert_eq!(
            status["permissions"]["missing"][0]["rule"],
            "list configmaps cluster-wide"
        );
        assert_eq!(status["permissions"]["missing"][0]["blocking"], true);
        assert_eq!(status["plugins"][0]["conditions"][0]["reason"], "Forbidden");
        assert!(
            r.verbose().contains(
                "[-]plugin web 1: forbidden: the host may not list configmaps cluster-wide"
            ),
            "{}",
            r.verbose()
        );
    }

    #[test]
    fn a_plugin_that_cannot_write_is_not_ready_without_holding_the_host_back() {
        let mut r = report("x");
        r.plugins[0].not_ready =
            Some("the host may not impersonate ServiceAccount kubewasm-web in namespace kw".into());
        assert!(r.ready());
        let conditions = r.plugins[0].conditions();
        assert_eq!(conditions[0]["status"], "False");
        assert_eq!(conditions[0]["reason"], "CannotWrite");
        assert!(
            conditions[0]["message"]
                .as_str()
                .unwrap()
                .contains("kubewasm-web in namespace kw")
        );
        assert!(
            r.verbose()
                .contains("[-]plugin web 1: not ready: the host may not impersonate"),
            "{}",
            r.verbose()
        );
    }
}
