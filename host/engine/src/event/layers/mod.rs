//! The layers around the pipeline ([`crate::event::pipeline`]). Each takes a [`Request`],
//! may answer it alone (a follower, a quarantined plugin) or hand it to the layer inside,
//! and reads the [`Report`] on the way out. Outermost first:
//!
//! | layer | file | what it does |
//! | --- | --- | --- |
//! | [`Gate`] | `gate.rs` | only the leader (the shard's holder) handles events; says when a term ended mid-event |
//! | [`Quarantine`] | `quarantine.rs` | defers events of a quarantined plugin; keeps its health |
//! | [`Trace`] | `trace.rs` | the event's OpenTelemetry trace, when an exporter is configured |
//! | [`Observe`] | `observe.rs` | metrics, the event's span and log lines (with the trace id) |
//! | [`Record`] | `record.rs` | `--record DIR`: the event written as a test case |
//! | [`Preview`] | `preview.rs` | what a dry run would change; the shadow candidate, run beside and compared |
//!
//! The order matters: a follower's events are not counted, a quarantined plugin's deferred
//! events are neither counted, traced nor recorded, everything the pipeline logs carries the
//! event's span, and that span its trace's id (the trace's context is current inside
//! [`Trace`]).
//!
//! A small trait chain rather than `tower::Service`: a request borrows the delivery and the
//! plugin version (a `Service` call wants an owned, `'static` request), no layer needs
//! back-pressure (`poll_ready`: the queue bounds concurrency), and `async fn` in a trait
//! gives static dispatch with no boxing.

mod gate;
mod observe;
mod preview;
mod quarantine;
mod record;
mod trace;

use std::future::Future;
use std::sync::Arc;

pub(crate) use self::gate::Gate;
pub(crate) use self::observe::Observe;
pub(crate) use self::preview::{Preview, dry_run_findings};
pub(crate) use self::quarantine::Quarantine;
pub(crate) use self::record::Record;
pub(crate) use self::trace::Trace;
use crate::event::cluster::ApiCluster;
use crate::event::pipeline::{Pipeline, Report, Request};
use crate::preview::report::Previews;
use crate::replicas::ownership::Ownership;
use crate::serve::metrics::Metrics;

/// Handles one event: the pipeline, or a layer around it.
pub(crate) trait Handle: Send + Sync + 'static {
    /// Handle `req`, saying what became of it.
    fn handle(&self, req: Request<'_>) -> impl Future<Output = Report> + Send;
}

/// The pipeline with every layer around it.
pub(crate) type Stack = Gate<Quarantine<Trace<Observe<Record<Preview<Pipeline<ApiCluster>>>>>>>;

/// Wrap `pipeline` in the layers, outermost first.
pub(crate) fn stack(
    pipeline: Pipeline<ApiCluster>,
    ownership: Ownership,
    metrics: Arc<Metrics>,
    recorder: Option<Arc<crate::cases::record::Recorder>>,
    previews: Arc<Previews>,
) -> Stack {
    let previewed = Preview::new(pipeline, previews, metrics.clone());
    let recorded = Record::new(previewed, recorder);
    let observed = Observe::new(recorded, metrics.clone());
    let quarantined = Quarantine::new(Trace::new(observed), metrics);
    Gate::new(quarantined, ownership)
}
