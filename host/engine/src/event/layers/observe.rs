//! What the host says about each event: the counters and histograms of `/metrics`, the
//! `event` span every line logged while handling it carries (plugin logs included), the
//! `event` line, and one line per write. The span and the `event` line carry the id of the
//! event's trace when one is recorded ([`super::Trace`]).

use std::sync::Arc;

use opentelemetry::trace::TraceContextExt as _;
use tracing::Instrument;

use super::Handle;
use crate::Error;
use crate::event::pipeline::{Report, Request, Written};
use crate::preview::change::Change;
use crate::serve::metrics::{EventLabels, Metrics, PluginLabel, PreviewLabels};
use kubewasm_core::admit::Prepared;

/// Counts and logs events, calls and writes.
pub(crate) struct Observe<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S> Observe<S> {
    pub(crate) fn new(inner: S, metrics: Arc<Metrics>) -> Self {
        Observe { inner, metrics }
    }
}

impl<S: Handle> Handle for Observe<S> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let plugin = req.version.plugin.clone();
        let name = plugin.name();
        let d = req.delivery;
        let object = d.object.describe();
        let event = d.event_type.as_str();
        self.metrics
            .events
            .get_or_create(&EventLabels {
                plugin: name.to_string(),
                event: event.to_string(),
            })
            .inc();
        let trace_id = trace_id();
        let span = tracing::info_span!("event", plugin = name, object = %object, event, trace_id);
        async {
            tracing::info!(plugin = name, version = %plugin.manifest.version, event, watch = %d.watch_id, object = %object, trace_id, "event");
            let report = self.inner.handle(req).await;
            self.account(name, &plugin.manifest.field_manager(), &object, &report);
            report
        }
        .instrument(span)
        .await
    }
}

/// The id of the current OpenTelemetry trace, when it is recorded.
fn trace_id() -> Option<String> {
    let cx = opentelemetry::Context::current();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_sampled().then(|| sc.trace_id().to_string())
}

impl<S> Observe<S> {
    /// A dry-run write: counted when it would change something, logged as what it would
    /// do (`+` create, `~` update, `-` delete, `!` refused).
    fn previewed(&self, name: &str, object: &str, p: &Prepared, change: &Change) {
        if change.changes() {
            self.metrics
                .preview_changes
                .get_or_create(&PreviewLabels {
                    plugin: name.to_string(),
                    verb: p.intent.verb.as_str().to_string(),
                })
                .inc();
        }
        let sign = change.sign();
        match change {
            Change::Refused { code, reason } => tracing::warn!(
                plugin = %name, trigger = %object, code, reason = %reason,
                "dry run: {} {}: the API server would refuse it", sign, p.describe()
            ),
            _ => tracing::info!(
                plugin = %name, trigger = %object, fields = %change.paths().join(", "),
                "dry run: {} {}", sign, p.describe()
            ),
        }
    }

    fn account(&self, name: &str, manager: &str, object: &str, report: &Report) {
        let label = || PluginLabel {
            plugin: name.to_string(),
        };
        if let Some(took) = report.call {
            self.metrics
                .call_seconds
                .get_or_create(&label())
                .observe(took.as_secs_f64());
            if report.call_error.is_none() {
                tracing::debug!(plugin = %name, object = %object, intents = report.returned, took_ms = crate::millis(took), "plugin returned");
            }
        }
        let prepared = report.prepared();
        for (i, written) in &report.writes {
            let Some(p) = prepared.get(*i) else { continue };
            self.metrics
                .intent(name, p.intent.verb.as_str(), written.outcome());
            match written {
                Written::Applied(Some(resource_version)) => tracing::info!(
                    plugin = %name, manager = %manager, trigger = %object,
                    resource_version = %resource_version, "applied {}", p.describe()
                ),
                Written::Applied(None) => tracing::info!(
                    plugin = %name, manager = %manager, trigger = %object, "applied {}", p.describe()
                ),
                Written::AlreadyGone => {
                    tracing::info!(plugin = %name, trigger = %object, "{}: already gone", p.describe())
                }
                Written::TriggerGone => tracing::info!(
                    plugin = %name, trigger = %object,
                    "{}: skipped, the object was deleted during the call", p.describe()
                ),
                Written::Previewed(change) => self.previewed(name, object, p, change),
                Written::Failed { conflict } => {
                    if *conflict {
                        self.metrics.conflicts.get_or_create(&label()).inc();
                        if !p.intent.force {
                            tracing::warn!(plugin = %name, manager = %manager, trigger = %object,
                                "{}: conflict with another field manager; not forced (the intent did not ask for force)",
                                p.describe());
                        }
                    }
                }
            }
        }
        match &report.result {
            // Not the plugin's failure nor the object's: counted by nobody.
            Err(Error::NotLeader { .. } | Error::Retired { .. }) | Ok(()) => {}
            Err(e) => self.metrics.error(name, e.kind()),
        }
    }
}
