//! Watch streams: newline-delimited JSON events with selector transitions,
//! bookmarks, `sendInitialEvents`, timeouts, and closing on lag or shutdown.

use crate::error::{ApiResult, StatusError};
use crate::store::{Event, EventType, ListOptions, Target, WatchStart};
use crate::table::{self, Output};
use bytes::Bytes;
use futures::SinkExt;
use futures::channel::mpsc;
use serde_json::{Value, json};
use std::collections::HashMap;
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
    /// `sendInitialEvents=true` (asked, or defaulted for a watch from `""` or `"0"`):
    /// the current objects come first, ended by the `k8s.io/initial-events-end` bookmark
    /// when bookmarks are allowed.
    pub(crate) send_initial_events: bool,
    /// `timeoutSeconds`.
    pub(crate) timeout: Option<Duration>,
    /// Bookmark period.
    pub(crate) bookmark_interval: Duration,
    /// Output rendering.
    pub(crate) output: Output,
}

/// How the server treats `sendInitialEvents` on a watch (kube-apiserver's `WatchList`
/// feature, KEP-3157).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WatchList {
    /// Served, as by kube-apiserver 1.34 and later (the feature gate on by default).
    #[default]
    Served,
    /// Refused with 422, as by kube-apiserver with the gate off (1.27–1.31, 1.33) or
    /// before it (1.19–1.26 refuse `resourceVersionMatch` on any watch).
    Disabled,
    /// Ignored: a server that knows neither parameter (not built on kube-apiserver's
    /// library) answers a plain watch, never ending the initial events with a bookmark.
    Ignored,
}

/// `NotOlderThan`, the one `resourceVersionMatch` a watch takes.
const NOT_OLDER_THAN: &str = "NotOlderThan";

/// A boolean query parameter as kube-apiserver decodes one: absent is false, `0` and
/// `false` (any case) are false, anything else (an empty value too) is true.
pub(crate) fn query_bool(q: &HashMap<String, String>, k: &str) -> Option<bool> {
    q.get(k)
        .map(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The parameters of a list or watch that say where it starts.
struct Start<'a> {
    rv: &'a str,
    cont: &'a str,
    rv_match: &'a str,
    send: Option<bool>,
}

/// One cause of a 422: reason, field, message (`field.Error`'s body).
type Cause = (String, String, String);

const RV_MATCH: &str = "resourceVersionMatch";
const SEND: &str = "sendInitialEvents";

fn forbidden(field: &str, detail: &str) -> Cause {
    let reason = "FieldValueForbidden".to_string();
    (reason, field.to_string(), format!("Forbidden: {detail}"))
}

fn unsupported(value: &str, supported: &str) -> Cause {
    let reason = "FieldValueNotSupported".to_string();
    let message = format!("Unsupported value: {value:?}: supported values: {supported}");
    (reason, RV_MATCH.to_string(), message)
}

/// The `sendInitialEvents` a list or watch asked for (None: not given), after
/// kube-apiserver's defaulting and validation of its ListOptions
/// (`SetListOptionsDefaults`, `ValidateListOptions`): 422 Invalid for what it refuses.
pub(crate) fn initial_events(
    q: &HashMap<String, String>,
    watch: bool,
    served: WatchList,
) -> ApiResult<Option<bool>> {
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
    let mut start = Start {
        rv: get("resourceVersion"),
        cont: get("continue"),
        rv_match: get(RV_MATCH),
        send: query_bool(q, SEND),
    };
    if watch && served == WatchList::Ignored {
        start.send = None;
        start.rv_match = "";
    }
    let legacy = start.rv.is_empty() || start.rv == "0";
    let unset = start.send.is_none() && start.rv_match.is_empty();
    if watch && served == WatchList::Served && unset && legacy {
        // A watch from "" or "0" is a watch-list, sending the current state as before.
        start.send = Some(true);
        start.rv_match = NOT_OLDER_THAN;
    }
    let errs = if watch {
        watch_errors(&start, served)
    } else {
        list_errors(&start)
    };
    if errs.is_empty() {
        Ok(start.send)
    } else {
        Err(StatusError::invalid("meta.k8s.io", "ListOptions", "", errs))
    }
}

/// `validateWatchOptions`.
fn watch_errors(s: &Start, served: WatchList) -> Vec<Cause> {
    let mut errs = Vec::new();
    if s.send.is_some() {
        if s.rv_match != NOT_OLDER_THAN {
            errs.push(forbidden(
                RV_MATCH,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if served != WatchList::Served {
            errs.push(forbidden(
                SEND,
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            ));
        }
    }
    if !s.rv_match.is_empty() {
        if s.send.is_none() {
            errs.push(forbidden(
                RV_MATCH,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if s.rv_match != NOT_OLDER_THAN {
            errs.push(unsupported(s.rv_match, "\"NotOlderThan\""));
        }
        if !s.cont.is_empty() {
            errs.push(forbidden(
                RV_MATCH,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    errs
}

/// `ValidateListOptions` of a list.
fn list_errors(s: &Start) -> Vec<Cause> {
    let mut errs = Vec::new();
    if !s.rv_match.is_empty() {
        if s.rv.is_empty() {
            errs.push(forbidden(
                RV_MATCH,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !s.cont.is_empty() {
            errs.push(forbidden(
                RV_MATCH,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if s.rv_match != "Exact" && s.rv_match != NOT_OLDER_THAN {
            errs.push(unsupported(s.rv_match, "\"Exact\", \"NotOlderThan\", \"\""));
        }
        if s.rv_match == "Exact" && s.rv == "0" {
            errs.push(forbidden(
                RV_MATCH,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if s.send.is_some() {
        errs.push(forbidden(SEND, "sendInitialEvents is forbidden for list"));
    }
    errs
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

/// An event's watch lines, by event type and apiVersion: watchers of one resource send the
/// same bytes, so the first to send a line serialises it and the others reuse it.
#[derive(Debug, Default)]
pub(crate) struct Lines(std::sync::Mutex<Vec<(&'static str, String, Bytes)>>);

impl Lines {
    fn get_or_make(
        &self,
        ty: &'static str,
        api_version: &str,
        make: impl FnOnce() -> Bytes,
    ) -> Bytes {
        let mut lines = kubewasm_core::sync::lock(&self.0);
        if let Some((_, _, b)) = lines.iter().find(|(t, v, _)| *t == ty && v == api_version) {
            return b.clone();
        }
        let b = make();
        lines.push((ty, api_version.to_string(), b.clone()));
        b
    }
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

    /// Sends `ev`'s object as a `ty` event: in full, the line its other watchers sent.
    async fn send_event(&mut self, ty: &'static str, ev: &Event) -> bool {
        let line = match self.req.output {
            Output::Full => {
                let av = self.req.target.info.api_version(&self.req.target.version);
                ev.lines
                    .get_or_make(ty, &av, || line(ty, self.render(&ev.object)))
            }
            _ => line(ty, self.render(&ev.object)),
        };
        self.tx.send(Ok(line)).await.is_ok()
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
                    return self.send_event("ADDED", ev).await;
                }
            }
            EventType::Deleted => {
                if self.passes(&ev.object) {
                    return self.send_event("DELETED", ev).await;
                }
            }
            EventType::Modified => {
                let was = ev.prev.as_ref().is_some_and(|p| self.passes(p));
                let is = self.passes(&ev.object);
                match (was, is) {
                    (true, true) => return self.send_event("MODIFIED", ev).await,
                    (false, true) => return self.send_event("ADDED", ev).await,
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
    // kube-apiserver ends the initial events with a bookmark only where bookmarks are
    // allowed: a client waiting for it must ask for them.
    let ends = ctx.req.send_initial_events && ctx.req.bookmarks;
    if ends && !ctx.bookmark(rv, true).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_line_is_made_once_per_type_and_api_version() {
        let lines = Lines::default();
        let mut made = 0;
        let mut make = |s: &'static str| {
            made += 1;
            Bytes::from_static(s.as_bytes())
        };
        assert_eq!(lines.get_or_make("ADDED", "v1", || make("a")), "a");
        assert_eq!(lines.get_or_make("ADDED", "v1", || make("b")), "a");
        assert_eq!(lines.get_or_make("DELETED", "v1", || make("c")), "c");
        assert_eq!(lines.get_or_make("ADDED", "v2", || make("d")), "d");
        assert_eq!(made, 3);
    }
}
