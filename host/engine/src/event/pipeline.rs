//! The pipeline of one event: call the plugin, admit what it returns, apply it. Nothing
//! else happens here; leadership, quarantine, metrics, logs and recording are the layers
//! around it ([`crate::event::layers`]), each reading the [`Report`] this returns.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kubewasm_core::admit::{self, Prepared};
use kubewasm_core::intent::RawIntent;
use kubewasm_core::projection::Projection;
use kubewasm_core::resource::TypeRef;
use kubewasm_runtime::{CallError, ClusterView, PluginEvent};

use crate::Error;
use crate::apply::Outcome;
use crate::event::Delivery;
use crate::event::cluster::Cluster;
use crate::event::dry_run::DryRun;
use crate::event::preflight;
use crate::plugins::environment::Version;
use crate::preview::change::Change;
use crate::replicas::ownership::Ownership;
use crate::watch::cache::CachedObject;

/// One event for one plugin version, as it goes down the layers.
pub(crate) struct Request<'a> {
    /// The version that handles the event, start to finish.
    pub(crate) version: &'a Version,
    pub(crate) delivery: &'a Delivery,
    /// What the plugin may read during the call.
    pub(crate) view: Arc<dyn ClusterView>,
    /// The plugin's projection of each kind: what it receives of the event's objects.
    pub(crate) projections: Arc<HashMap<TypeRef, Projection>>,
    /// Keep the raw intents in the report (a layer that records them asks for it).
    pub(crate) keep_intents: bool,
    /// Send every write with `dryRun=All` ([`DryRun`]): its version is in `DryRun` mode,
    /// or a shadow candidate.
    pub(crate) dry_run: bool,
    /// The plugin's shadow candidate, run beside it (`layers::Preview`).
    pub(crate) shadow: Option<Arc<Version>>,
}

/// What became of one event, for the layers to account for.
pub(crate) struct Report {
    /// How long the plugin call took; `None` when the plugin was not called.
    pub(crate) call: Option<Duration>,
    /// The call's error, when the plugin was called and failed.
    pub(crate) call_error: Option<CallError>,
    /// How many intents the plugin returned.
    pub(crate) returned: usize,
    /// What the plugin returned, when [`Request::keep_intents`] asked for it.
    pub(crate) raw: Option<Vec<RawIntent>>,
    /// The intents as admitted (a refusal is the report's result).
    pub(crate) admitted: Option<Vec<Prepared>>,
    /// Each write done or tried, in order, by index into the admitted intents.
    pub(crate) writes: Vec<(usize, Written)>,
    /// How the event ended: `Err` is what the queue sees (retry, park, defer).
    pub(crate) result: Result<(), Error>,
    /// When each step reached ran, start and end on the wall clock (what a trace shows).
    pub(crate) steps: Vec<(Step, SystemTime, SystemTime)>,
}

/// A step of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The plugin call.
    Call,
    /// Admission and the preflight.
    Admission,
    /// The write of admitted intent `i`.
    Write(usize),
}

/// What one write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// Applied; the object's new resourceVersion, or `None` for a deletion.
    Applied(Option<String>),
    /// A deletion found the object already gone.
    AlreadyGone,
    /// A write to the trigger found it deleted during the call: skipped, not a failure.
    TriggerGone,
    /// Sent in dry run: what it would change (a refusal is a finding, not a failure).
    Previewed(Change),
    /// Refused by the API server; the error is the report's result.
    Failed {
        /// A conflict with another field manager (409).
        conflict: bool,
    },
}

impl Written {
    /// The outcome in one word: `kubewasm_intents_total`'s `result`, a write span's
    /// `kubewasm.write.outcome`.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Written::Applied(_) | Written::AlreadyGone => "applied",
            Written::TriggerGone => "gone",
            Written::Previewed(_) => "previewed",
            Written::Failed { conflict: true } => "conflict",
            Written::Failed { conflict: false } => "error",
        }
    }
}

impl Report {
    /// A report of an event that never reached the plugin.
    pub(crate) fn skipped(result: Result<(), Error>) -> Report {
        Report {
            call: None,
            call_error: None,
            returned: 0,
            raw: None,
            admitted: None,
            writes: Vec::new(),
            result,
            steps: Vec::new(),
        }
    }

    /// Step `step` ran from `start` until now.
    fn timed(&mut self, step: Step, start: SystemTime) {
        self.steps.push((step, start, SystemTime::now()));
    }

    /// The admitted intents (empty when admission refused or was not reached).
    pub(crate) fn prepared(&self) -> &[Prepared] {
        self.admitted.as_deref().unwrap_or_default()
    }
}

/// The event as the plugin receives it: what an informer's handler gets, each object
/// projected to the plugin's projection of its kind (`projections`).
pub(crate) fn plugin_event(
    d: &Delivery,
    projections: &HashMap<TypeRef, Projection>,
) -> PluginEvent {
    let trigger = d.object.trigger();
    let projection = projections.get(&TypeRef::new(trigger.api_version, trigger.kind));
    let json = |o: &CachedObject| match projection {
        Some(p) if !p.is_whole() => o.json_for(p),
        _ => o.json(),
    };
    PluginEvent {
        event_type: d.event_type,
        watch_id: d.watch_id.to_string(),
        object: json(&d.object),
        old_object: d.old.as_deref().map(json),
    }
}

/// Calls, admits, applies, on the cluster `C` (`run`'s API server, or `kubewasm test`'s
/// embedded one: the same pipeline either way).
pub(crate) struct Pipeline<C> {
    pub(crate) cluster: C,
    /// Every plugin call and every write runs under the guard of the term over its key
    /// (the leader's, or its shard's): a call in flight when the term ends is dropped, and
    /// no write starts after it.
    pub(crate) ownership: Ownership,
}

impl<C: Cluster + 'static> crate::event::layers::Handle for Pipeline<C> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let mut report = Report::skipped(Ok(()));
        let start = SystemTime::now();
        let called = self.call(&req, &mut report).await;
        report.timed(Step::Call, start);
        let Some(raw) = called else {
            return report;
        };
        if req.dry_run {
            self.admit_and_apply(&DryRun(&self.cluster), &req, raw, &mut report)
                .await;
        } else {
            self.admit_and_apply(&self.cluster, &req, raw, &mut report)
                .await;
        }
        report
    }
}

/// The term ended: nothing more of the event is done.
fn not_leader(req: &Request<'_>) -> Error {
    Error::NotLeader {
        plugin: req.version.plugin.name().to_string(),
    }
}

/// The version left the environment: nothing more of it is done.
fn retired(req: &Request<'_>) -> Error {
    let plugin = &req.version.plugin;
    Error::Retired {
        plugin: plugin.name().to_string(),
        version: plugin.manifest.version.clone(),
    }
}

impl<C: Cluster> Pipeline<C> {
    /// Steps 2 and 3 on `cluster`: the pipeline's own, or it in dry run.
    async fn admit_and_apply(
        &self,
        cluster: &impl Cluster,
        req: &Request<'_>,
        raw: Vec<RawIntent>,
        report: &mut Report,
    ) {
        let start = SystemTime::now();
        let admitted = self.admit(cluster, req, raw, report).await;
        report.timed(Step::Admission, start);
        let Some(prepared) = admitted else {
            return;
        };
        self.apply(cluster, req, &prepared, report).await;
        report.admitted = Some(prepared);
    }

    /// Step 1, the call: under the term's guard and while its version serves; None when
    /// the event ends here (`report` says why).
    async fn call(&self, req: &Request<'_>, report: &mut Report) -> Option<Vec<RawIntent>> {
        let plugin = &req.version.plugin;
        let d = req.delivery;
        let event = plugin_event(d, &req.projections);
        let started = Instant::now();
        // Dropped when the term ends or when the version is unloaded, waiting (for a live
        // instance, for the memory budget) or running: its instance goes with it.
        let label = d.object.describe();
        let call = plugin.handle(&event, &label, req.view.clone());
        let called = self
            .ownership
            .guard(&d.object.key(), req.version.while_serving(call))
            .await;
        let raw = match called {
            Err(_) => {
                report.result = Err(not_leader(req));
                return None;
            }
            Ok(None) => {
                report.result = Err(retired(req));
                return None;
            }
            Ok(Some(Err(kind))) => {
                report.call = Some(started.elapsed());
                report.call_error = Some(kind.clone());
                report.result = Err(Error::Call {
                    plugin: plugin.name().to_string(),
                    kind,
                });
                return None;
            }
            Ok(Some(Ok(raw))) => raw,
        };
        report.call = Some(started.elapsed());
        report.returned = raw.len();
        report.raw = req.keep_intents.then(|| raw.clone());
        Some(raw)
    }

    /// Step 2, admission: everything before writing anything (a call is applied whole or
    /// not at all), then what only the cluster can tell (merge patches taking other
    /// managers' fields, creates adopting existing objects); None when refused (`report`
    /// says why).
    async fn admit(
        &self,
        cluster: &impl Cluster,
        req: &Request<'_>,
        raw: Vec<RawIntent>,
        report: &mut Report,
    ) -> Option<Vec<Prepared>> {
        let plugin = &req.version.plugin;
        let name = plugin.name();
        let trigger = req.delivery.object.trigger();
        let admitted = admit::admit(
            &plugin.manifest,
            raw,
            plugin.limits.max_intent_bytes,
            &trigger,
            cluster,
            cluster,
        )
        .await;
        let mut prepared = match admitted {
            Ok(p) => p,
            Err(r) => {
                report.result = Err(Error::rejected(name, r));
                return None;
            }
        };
        let writer = req.version.writer();
        let check =
            preflight::check_merges(cluster, name, &plugin.manifest, &writer, &mut prepared);
        let key = req.delivery.object.key();
        match self.ownership.guard(&key, check).await {
            Err(_) => report.result = Err(not_leader(req)),
            Ok(Err(e)) => report.result = Err(e),
            Ok(Ok(())) => return Some(prepared),
        }
        None
    }

    /// Step 3, the writes, in order; the first failure ends the event, and says what was
    /// applied.
    async fn apply(
        &self,
        cluster: &impl Cluster,
        req: &Request<'_>,
        prepared: &[Prepared],
        report: &mut Report,
    ) {
        let plugin = &req.version.plugin;
        let d = req.delivery;
        let key = d.object.key();
        let trigger = d.object.trigger();
        let writer = req.version.writer();
        for (i, p) in prepared.iter().enumerate() {
            // Written only under grants still in force: no write of a version unloaded
            // since the call (a write already sent is not recalled; it was sent while the
            // version served).
            if req.version.is_retired() {
                report.result = Err(retired(req));
                break;
            }
            let start = SystemTime::now();
            let write = cluster.execute(&writer, p);
            let guarded = self.ownership.guard(&key, write).await;
            report.timed(Step::Write(i), start);
            let Ok(result) = guarded else {
                report.result = Err(not_leader(req));
                break;
            };
            match result {
                Ok(Outcome::Written { resource_version }) => report
                    .writes
                    .push((i, Written::Applied(Some(resource_version)))),
                Ok(Outcome::Deleted) => report.writes.push((i, Written::Applied(None))),
                Ok(Outcome::AlreadyGone) => report.writes.push((i, Written::AlreadyGone)),
                Ok(Outcome::Previewed(change)) => {
                    report.writes.push((i, Written::Previewed(change)))
                }
                // The trigger as the plugin saw it is gone: deleted (or replaced) during the
                // call. Its next event (`deleted`) follows through the queue.
                Err(e) if e.target_missing() && p.requires_trigger(&trigger) => {
                    report.writes.push((i, Written::TriggerGone))
                }
                Err(e) => {
                    let conflict = e.status() == Some(409);
                    report.writes.push((i, Written::Failed { conflict }));
                    let describe = d.object.describe();
                    report.result = Err(partial(plugin.name(), &describe, prepared, i, e));
                    break;
                }
            }
        }
    }
}

/// The error of write `failed` of a call's `prepared` intents: when others of the call
/// were applied before it or would have been after it, [`Error::Partial`] names them
/// (applied i of n), so the one line reporting the failed event says what state the
/// call left; a call of one intent keeps the write's own error.
fn partial(plugin: &str, trigger: &str, prepared: &[Prepared], failed: usize, e: Error) -> Error {
    if prepared.len() < 2 {
        return e;
    }
    Error::Partial {
        plugin: plugin.to_string(),
        trigger: trigger.to_string(),
        applied: failed,
        total: prepared.len(),
        failed: prepared
            .get(failed)
            .map(Prepared::describe)
            .unwrap_or_default(),
        source: Box::new(e),
    }
}
