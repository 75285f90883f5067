//! Traces: one OpenTelemetry trace per event, through the global tracer the binary installs
//! when `OTEL_*` names an OTLP endpoint (`kubewasm run`, `dev`). Without one the global
//! tracer is OpenTelemetry's no-op: an event costs one span that records nothing.
//!
//! The root span, `event`, starts when the queue got the event (its attributes: plugin,
//! version, watch, event type, the object's identity). Its children, each pointing at it:
//! `queue wait`, `call`, `admission` and one span per write, named `VERB KIND` (its verb,
//! kind, namespace, name and outcome). They are built from the [`Report`]'s steps once the
//! event ends, with the pipeline's own times, through the OpenTelemetry API rather than as
//! `tracing` spans: a `tracing` span starts when it is created, and the queue wait and the
//! root began before this layer ran; a write's outcome is known only from the report.
//!
//! An object carrying a W3C `traceparent` in the annotation `tracing.k8s.io/traceparent`
//! (the consumer side of KEP-5915, in review: a component that wrote it, e.g. a controller
//! that made the object) gets a root span with a link to that context, not a parent: the
//! event is a trace of its own, which a backend shows beside the writer's. The host writes
//! no such annotation (host/cli/README.md, Traces, says why).
//!
//! While the layers inside run, the root's context is the current OpenTelemetry context:
//! [`super::Observe`] puts its trace id in the event's span, so every line logged for the
//! event carries it.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::trace::{
    FutureExt as _, Link, Span as _, SpanBuilder, SpanContext, SpanId, Status,
    TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Context, KeyValue};

use super::Handle;
use crate::Error;
use crate::event::pipeline::{Report, Request, Step};
use crate::watch::cache::{CachedObject, TRACEPARENT};

/// Traces each event.
pub(crate) struct Trace<S> {
    inner: S,
    tracer: BoxedTracer,
}

impl<S> Trace<S> {
    /// Events traced with the global tracer as it is now (the binary installs its provider
    /// before the host starts).
    pub(crate) fn new(inner: S) -> Self {
        Trace {
            inner,
            tracer: opentelemetry::global::tracer("kubewasm"),
        }
    }
}

impl<S: Handle> Handle for Trace<S> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let now = SystemTime::now();
        let queued = req
            .delivery
            .queued
            .and_then(|q| now.checked_sub(q.elapsed()));
        let start = queued.unwrap_or(now);
        let links = linked(&req.delivery.object)
            .map(Link::with_context)
            .into_iter()
            .collect();
        let root = SpanBuilder::from_name("event").with_links(links);
        let mut root = self.start(root, start, &Context::new());
        if !root.is_recording() {
            return self.inner.handle(req).await;
        }
        root.set_attributes(event_attributes(&req));
        let cx = Context::new().with_span(root);
        if queued.is_some() {
            self.child(&cx, "queue wait", start, now, Vec::new(), None);
        }
        let report = self.inner.handle(req).with_context(cx.clone()).await;
        for &(step, from, to) in &report.steps {
            let (name, attributes, failed) = step_span(&report, step);
            self.child(&cx, name, from, to, attributes, failed);
        }
        let span = cx.span();
        if let Some(why) = failure(&report.result) {
            span.set_status(Status::error(why));
        }
        span.end();
        report
    }
}

impl<S> Trace<S> {
    fn start(&self, builder: SpanBuilder, start: SystemTime, parent: &Context) -> BoxedSpan {
        builder
            .with_start_time(start)
            .start_with_context(&self.tracer, parent)
    }

    /// A finished child of `cx`'s span.
    fn child(
        &self,
        cx: &Context,
        name: impl Into<Cow<'static, str>>,
        from: SystemTime,
        to: SystemTime,
        attributes: Vec<KeyValue>,
        failed: Option<String>,
    ) {
        let builder = SpanBuilder::from_name(name).with_attributes(attributes);
        let mut span = self.start(builder, from, cx);
        if let Some(why) = failed {
            span.set_status(Status::error(why));
        }
        span.end_with_timestamp(to);
    }
}

/// The root span's attributes: the plugin, its version, the watch, the event and the
/// object it is about.
fn event_attributes(req: &Request<'_>) -> Vec<KeyValue> {
    let d = req.delivery;
    let manifest = &req.version.plugin.manifest;
    let o = d.object.trigger();
    let mut attributes = vec![
        KeyValue::new("kubewasm.plugin", manifest.name.clone()),
        KeyValue::new("kubewasm.plugin.version", manifest.version.clone()),
        KeyValue::new("kubewasm.watch", d.watch_id.to_string()),
        KeyValue::new("kubewasm.event", d.event_type.as_str()),
        KeyValue::new("kubewasm.object.api_version", o.api_version),
        KeyValue::new("kubewasm.object.kind", o.kind),
        KeyValue::new("kubewasm.object.name", o.name),
    ];
    if let Some(ns) = o.namespace {
        attributes.push(KeyValue::new("kubewasm.object.namespace", ns));
    }
    if let Some(uid) = o.uid {
        attributes.push(KeyValue::new("kubewasm.object.uid", uid));
    }
    if req.dry_run {
        attributes.push(KeyValue::new("kubewasm.dry_run", true));
    }
    attributes
}

/// A step's span: its name, attributes, and why it failed, if it did.
fn step_span(report: &Report, step: Step) -> (Cow<'static, str>, Vec<KeyValue>, Option<String>) {
    match step {
        Step::Call => {
            let failed = report.call_error.as_ref().map(ToString::to_string);
            let returned = i64::try_from(report.returned).unwrap_or(i64::MAX);
            let attributes = vec![KeyValue::new("kubewasm.intents", returned)];
            ("call".into(), attributes, failed)
        }
        Step::Admission => {
            // Admission ends the event when it refuses: nothing admitted, the refusal is
            // the result.
            let failed = report
                .admitted
                .is_none()
                .then(|| failure(&report.result))
                .flatten();
            ("admission".into(), Vec::new(), failed)
        }
        Step::Write(i) => write_span(report, i),
    }
}

/// The span of the write of admitted intent `i`.
fn write_span(report: &Report, i: usize) -> (Cow<'static, str>, Vec<KeyValue>, Option<String>) {
    let Some(p) = report.prepared().get(i) else {
        return ("write".into(), Vec::new(), None);
    };
    let written = report.writes.iter().find(|(j, _)| *j == i).map(|(_, w)| w);
    // No outcome: the term ended or the version was unloaded while it was sent.
    let outcome = written.map_or("cancelled", |w| w.outcome());
    let target = &p.intent.target;
    let verb = p.intent.verb.as_str();
    let mut attributes = vec![
        KeyValue::new("kubewasm.write.verb", verb),
        KeyValue::new("kubewasm.write.api_version", target.api_version.clone()),
        KeyValue::new("kubewasm.write.kind", target.kind.clone()),
        KeyValue::new("kubewasm.write.name", target.name.clone()),
        KeyValue::new("kubewasm.write.outcome", outcome),
    ];
    if let Some(ns) = &p.namespace {
        attributes.push(KeyValue::new("kubewasm.write.namespace", ns.clone()));
    }
    let failed = matches!(outcome, "conflict" | "error")
        .then(|| failure(&report.result))
        .flatten();
    (format!("{verb} {}", target.kind).into(), attributes, failed)
}

/// The context an object's `tracing.k8s.io/traceparent` names, when it is a valid W3C
/// `traceparent` of version 00 (anything else, from whoever wrote the object, is ignored).
fn linked(object: &CachedObject) -> Option<SpanContext> {
    let value = object.kept_annotation(TRACEPARENT)?;
    let mut parts = value.split('-');
    let (Some("00"), Some(trace), Some(span), Some(flags), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !(hex(trace, 32) && hex(span, 16) && hex(flags, 2)) {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & 1);
    let cx = SpanContext::new(trace, span, flags, true, TraceState::default());
    cx.is_valid().then_some(cx)
}

/// Why the event failed, when it did: a term that ended or a version unloaded is no
/// failure of the event.
fn failure(result: &Result<(), Error>) -> Option<String> {
    match result {
        Ok(()) | Err(Error::NotLeader { .. } | Error::Retired { .. }) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A ConfigMap annotated with `traceparent` (None: not annotated), as cached.
    fn annotated(traceparent: Option<&str>) -> Arc<CachedObject> {
        let annotations: serde_json::Map<_, _> = traceparent
            .map(|t| (TRACEPARENT.to_string(), t.into()))
            .into_iter()
            .collect();
        CachedObject::new(
            serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "a", "annotations": annotations}}))
            .expect("a ConfigMap"),
        )
    }

    fn meta(traceparent: &str) -> Arc<CachedObject> {
        annotated(Some(traceparent))
    }

    #[test]
    fn a_valid_traceparent_is_linked_anything_else_ignored() {
        let cx = linked(&meta(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ))
        .expect("a valid traceparent");
        assert_eq!(
            cx.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(cx.span_id().to_string(), "b7ad6b7169203331");
        assert!(cx.is_sampled() && cx.is_remote());
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-+af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        ] {
            assert!(linked(&meta(bad)).is_none(), "{bad}");
        }
        assert!(linked(&annotated(None)).is_none());
    }
}
