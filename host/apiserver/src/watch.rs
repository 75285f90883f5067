//! Watch streams: newline-delimited JSON events with selector transitions,
//! bookmarks, `sendInitialEvents`, timeouts, and closing on lag or shutdown.

use crate::store::{Event, EventType, ListOptions, Target, WatchStart};
use crate::table::{self, Output};
use bytes::Bytes;
use futures::SinkExt;
use futures::channel::mpsc;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// Parameters of one watch request.
pub(crate) struct WatchRequest {
    /// Resource, version and namespace ("" = all).
    pub(crate) target: Target,
    /// Selectors.
    pub(crate) opts: ListOptions,
    /// `allowWatchBookmarks`.
    pub(crate) bookmarks: bool,
    /// `sendInitialEvents`.
    pub(crate) send_initial_events: bool,
    /// `timeoutSeconds`.
    pub(crate) timeout: Option<Duration>,
    /// Bookmark period.
    pub(crate) bookmark_interval: Duration,
    /// Output rendering.
    pub(crate) output: Output,
}

type Tx = mpsc::Sender<Result<Bytes, std::io::Error>>;

/// An ERROR event line carrying a Status.
pub(crate) fn error_line(status: &Value) -> Bytes {
    line("ERROR", status.clone())
}

fn line(ty: &str, object: Value) -> Bytes {
    let mut s = json!({"type": ty, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

struct Ctx {
    req: WatchRequest,
    tx: Tx,
}

impl Ctx {
    fn render(&self, obj: &Value) -> Value {
        let mut o = obj.clone();
        if let Some(m) = o.as_object_mut() {
            m.insert(
                "apiVersion".into(),
                json!(self.req.target.info.api_version(&self.req.target.version)),
            );
            m.insert("kind".into(), json!(self.req.target.info.kind));
        }
        match self.req.output {
            Output::Full => o,
            Output::Metadata => table::partial(&o),
            Output::Table(inc) => {
                let rv = o
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null);
                table::table(
                    &self.req.target.info,
                    &self.req.target.version,
                    &[o],
                    json!({"resourceVersion": rv}),
                    inc,
                )
            }
        }
    }

    fn in_scope(&self, obj: &Value) -> bool {
        let ns = &self.req.target.namespace;
        ns.is_empty()
            || obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns.as_str())
    }

    fn passes(&self, obj: &Value) -> bool {
        self.in_scope(obj) && self.req.opts.matches(obj)
    }

    async fn send(&mut self, ty: &str, obj: &Value) -> bool {
        let rendered = self.render(obj);
        self.tx.send(Ok(line(ty, rendered))).await.is_ok()
    }

    async fn bookmark(&mut self, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end && let Some(m) = meta.as_object_mut() {
            m.insert(
                "annotations".into(),
                json!({"k8s.io/initial-events-end": "true"}),
            );
        }
        let obj = json!({
            "kind": self.req.target.info.kind,
            "apiVersion": self.req.target.info.api_version(&self.req.target.version),
            "metadata": meta,
        });
        self.tx.send(Ok(line("BOOKMARK", obj))).await.is_ok()
    }

    /// Sends what this event means for this watcher; false when the client is gone.
    async fn event(&mut self, ev: &Event) -> bool {
        if ev.gr != self.req.target.info.gr() {
            return true;
        }
        match ev.ty {
            EventType::Added => {
                if self.passes(&ev.object) {
                    return self.send("ADDED", &ev.object.clone()).await;
                }
            }
            EventType::Deleted => {
                if self.passes(&ev.object) {
                    return self.send("DELETED", &ev.object.clone()).await;
                }
            }
            EventType::Modified => {
                let was = ev.prev.as_ref().is_some_and(|p| self.passes(p));
                let is = self.passes(&ev.object);
                match (was, is) {
                    (true, true) => return self.send("MODIFIED", &ev.object.clone()).await,
                    (false, true) => return self.send("ADDED", &ev.object.clone()).await,
                    (true, false) => {
                        let mut last = ev.prev.as_deref().cloned().unwrap_or(Value::Null);
                        crate::meta::set_meta(
                            &mut last,
                            "resourceVersion",
                            json!(ev.rv.to_string()),
                        );
                        return self.send("DELETED", &last).await;
                    }
                    (false, false) => {}
                }
            }
        }
        true
    }
}

/// Runs a watch, writing event lines into `tx` until timeout, lag, shutdown, a simulated
/// outage or disconnect.
pub(crate) async fn run(
    req: WatchRequest,
    start: WatchStart,
    tx: Tx,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    mut outage: tokio::sync::watch::Receiver<bool>,
) {
    let WatchStart {
        initial,
        backlog,
        mut rx,
        rv,
    } = start;
    let mut ctx = Ctx { req, tx };
    let mut last_rv = rv;
    for obj in &initial {
        if ctx.passes(obj) && !ctx.send("ADDED", obj).await {
            return;
        }
    }
    if ctx.req.send_initial_events && !ctx.bookmark(rv, true).await {
        return;
    }
    for ev in &backlog {
        if !ctx.event(ev).await {
            return;
        }
    }
    let deadline = ctx.req.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut ticker =
        tokio::time::interval(ctx.req.bookmark_interval.max(Duration::from_millis(10)));
    ticker.tick().await;
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(ev) => {
                    last_rv = last_rv.max(ev.rv);
                    if !ctx.event(&ev).await {
                        return;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "watcher fell behind; closing its stream");
                    return;
                }
                Err(RecvError::Closed) => return,
            },
            _ = ticker.tick(), if ctx.req.bookmarks => {
                if !ctx.bookmark(last_rv, false).await {
                    return;
                }
            }
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => return,
            _ = shutdown.changed() => return,
            // A simulated outage drops every open watch.
            _ = async { outage.wait_for(|down| *down).await.map(|_| ()) } => return,
        }
    }
}

/// Creates the channel a watch writes into; the receiver is the response body stream.
pub(crate) fn channel() -> (Tx, mpsc::Receiver<Result<Bytes, std::io::Error>>) {
    mpsc::channel(64)
}
