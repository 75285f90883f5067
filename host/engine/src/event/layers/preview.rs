//! Preview: records what a plugin in `spec.mode: DryRun` would change, and runs its shadow
//! candidate (`spec.candidate`) beside the serving version. The candidate handles the same
//! delivery with the same view of the cluster, after the serving version's writes and in
//! dry run, so each of its would-be writes is judged against the object as the serving
//! version left it: a write that would change nothing agrees, anything else diverges, and
//! an object the serving version wrote that the candidate leaves alone diverges too.
//!
//! The candidate runs in a task of its own, a bounded number at once host-wide: the
//! serving version's event ends as soon as its own writes are done, and a slow or hostile
//! candidate costs at most its slots (an event found with none free is skipped and
//! counted, never queued behind the serving path).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Semaphore;

use kubewasm_core::admit::Prepared;
use kubewasm_core::excerpt::excerpt;

use super::Handle;
use crate::Error;
use crate::event::Delivery;
use crate::event::pipeline::{Report, Request, Written};
use crate::plugins::environment::Version;
use crate::preview::change::Change;
use crate::preview::report::{Divergence, Finding, Previews, Source};
use crate::serve::metrics::{Metrics, PluginLabel};

/// Candidate calls running at once, host-wide.
pub(crate) const SHADOW_SLOTS: usize = 4;

/// Records previews and runs shadow candidates.
pub(crate) struct Preview<S> {
    inner: Arc<S>,
    previews: Arc<Previews>,
    metrics: Arc<Metrics>,
    slots: Arc<Semaphore>,
}

/// What the serving version saw of an event (its view of the caches, its projections),
/// handed to the candidate as is: the candidate is compared on the same input.
type Seen = (
    Arc<dyn kubewasm_runtime::ClusterView>,
    Arc<
        std::collections::HashMap<
            kubewasm_core::resource::TypeRef,
            kubewasm_core::projection::Projection,
        >,
    >,
);

impl<S> Preview<S> {
    pub(crate) fn new(inner: S, previews: Arc<Previews>, metrics: Arc<Metrics>) -> Self {
        Preview {
            inner: Arc::new(inner),
            previews,
            metrics,
            slots: Arc::new(Semaphore::new(SHADOW_SLOTS)),
        }
    }
}

impl<S: Handle> Handle for Preview<S> {
    async fn handle(&self, req: Request<'_>) -> Report {
        let plugin = req.version.plugin.name().to_string();
        let dry_run = req.dry_run;
        let shadow = req.shadow.clone().map(|v| {
            let seen = (req.view.clone(), req.projections.clone());
            (v, req.delivery.clone(), seen)
        });
        // The event's object, which each finding names: only when there is one to record.
        let trigger = (dry_run || shadow.is_some()).then(|| req.delivery.object.describe());
        let report = self.inner.handle(req).await;
        let Some(trigger) = trigger else {
            return report;
        };
        if dry_run {
            let findings = dry_run_findings(&report, &trigger);
            self.previews.record(&plugin, Source::DryRun, findings);
        }
        if let Some((version, delivery, seen)) = shadow
            && report.call.is_some()
        {
            self.shadow(plugin, version, delivery, seen, served(&report));
        }
        report
    }
}

impl<S: Handle> Preview<S> {
    /// Run the candidate `version` on `delivery` in a task of its own, and compare.
    fn shadow(
        &self,
        plugin: String,
        version: Arc<Version>,
        delivery: Delivery,
        seen: Seen,
        served: Served,
    ) {
        let (view, projections) = seen;
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.metrics
                .shadow_skipped
                .get_or_create(&PluginLabel { plugin })
                .inc();
            return;
        };
        let (inner, previews, metrics) = (
            self.inner.clone(),
            self.previews.clone(),
            self.metrics.clone(),
        );
        tokio::spawn(async move {
            let _slot = slot;
            let req = Request {
                version: &version,
                delivery: &delivery,
                view,
                projections,
                keep_intents: false,
                dry_run: true,
                shadow: None,
            };
            let report = inner.handle(req).await;
            let trigger = delivery.object.describe();
            let Some(findings) = compare(&trigger, served, &report) else {
                return;
            };
            for f in &findings {
                if let Some(Divergence::Diverges { why }) = &f.divergence {
                    metrics
                        .shadow_divergences
                        .get_or_create(&PluginLabel {
                            plugin: plugin.clone(),
                        })
                        .inc();
                    tracing::info!(plugin = %plugin, candidate = %version.plugin.manifest.version,
                        trigger = %trigger, object = %f.object, why = %why, "shadow: the candidate diverges");
                }
            }
            previews.record(&plugin, Source::Candidate, findings);
        });
    }
}

/// `Kind namespace/name` of the object an intent writes.
pub(crate) fn object_of(p: &Prepared) -> String {
    match &p.namespace {
        Some(ns) => format!("{} {ns}/{}", p.kind.kind, p.intent.target.name),
        None => format!("{} {}", p.kind.kind, p.intent.target.name),
    }
}

/// The dry run's findings: each write previewed (also `kubewasm plan`'s).
pub(crate) fn dry_run_findings(report: &Report, trigger: &str) -> Vec<Finding> {
    let prepared = report.prepared();
    report
        .writes
        .iter()
        .filter_map(|(i, w)| match w {
            Written::Previewed(change) => Some((prepared.get(*i)?, change)),
            _ => None,
        })
        .map(|(p, change)| Finding {
            object: object_of(p),
            verb: p.intent.verb.as_str().to_string(),
            trigger: trigger.to_string(),
            change: change.clone(),
            divergence: None,
        })
        .collect()
}

/// What the serving version did to each object: its verb, and when it ran in dry run,
/// what it would have changed (None: written for real).
type Served = BTreeMap<String, (String, Option<Change>)>;

fn served(report: &Report) -> Served {
    let prepared = report.prepared();
    report
        .writes
        .iter()
        .filter_map(|(i, w)| {
            let p = prepared.get(*i)?;
            let change = match w {
                Written::Applied(_) | Written::AlreadyGone => None,
                Written::Previewed(c) => Some(c.clone()),
                Written::TriggerGone | Written::Failed { .. } => return None,
            };
            Some((object_of(p), (p.intent.verb.as_str().to_string(), change)))
        })
        .collect()
}

/// The candidate's report against what the serving version did; None when there is
/// nothing to say (the term ended, the candidate was replaced).
fn compare(trigger: &str, mut served: Served, report: &Report) -> Option<Vec<Finding>> {
    let finding = |object: String, verb: String, change: Change, why: Option<String>| Finding {
        object,
        verb,
        trigger: trigger.to_string(),
        change,
        divergence: Some(why.map_or(Divergence::Agrees, |why| Divergence::Diverges { why })),
    };
    match &report.result {
        Err(Error::NotLeader { .. } | Error::Retired { .. }) => return None,
        Err(e) => {
            let why = format!("the candidate failed: {}", excerpt(&e.to_string(), 300));
            return Some(vec![finding(
                trigger.to_string(),
                "-".into(),
                Change::Unchanged,
                Some(why),
            )]);
        }
        Ok(()) => {}
    }
    let prepared = report.prepared();
    let mut out = Vec::new();
    for (i, w) in &report.writes {
        let (Some(p), Written::Previewed(change)) = (prepared.get(*i), w) else {
            continue;
        };
        let object = object_of(p);
        let serving = served.remove(&object).and_then(|(_, c)| c);
        let why = divergence(change, serving.as_ref());
        out.push(finding(
            object,
            p.intent.verb.as_str().to_string(),
            change.clone(),
            why,
        ));
    }
    for (object, (verb, _)) in served {
        let why = format!(
            "the serving version writes it ({verb}); the candidate returns no intent for it"
        );
        out.push(finding(object, "-".into(), Change::Unchanged, Some(why)));
    }
    Some(out)
}

/// Why the candidate's `change` diverges; None when it agrees. Against a serving version
/// that wrote for real the object is as it left it, so agreeing is changing nothing; one
/// in dry run too left it as it was, so agreeing is the same change.
fn divergence(change: &Change, serving: Option<&Change>) -> Option<String> {
    let same = match serving {
        Some(s) => s == change,
        None => matches!(change, Change::Unchanged | Change::AlreadyGone),
    };
    if same {
        return None;
    }
    Some(match change {
        Change::Refused { code, reason } => {
            format!("the API server would refuse it ({code}): {reason}")
        }
        Change::Delete => "the candidate would delete it".into(),
        Change::Create(_) => "the candidate would create it".into(),
        Change::Update(f) => {
            let paths: Vec<&str> = f.fields.iter().map(|c| c.path.as_str()).collect();
            format!("the candidate would change {}", paths.join(", "))
        }
        Change::Unchanged | Change::AlreadyGone => "the candidate would leave it as it is".into(),
    })
}
