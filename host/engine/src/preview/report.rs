//! The preview report: per plugin, the latest finding on each object its dry run wrote
//! (what would change) and on each object its candidate was compared on (agrees or
//! diverges), bounded, with the counts `status.preview` carries. The pipeline's layer
//! fills it; the status writer, `/preview` and `kubewasm plan` read it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

use kubewasm_core::grant::Mode;
use kubewasm_core::plugin_object::{CandidatePreview, PreviewItem, PreviewStatus};
use kubewasm_core::sync::lock;

use super::change::Change;

/// Objects kept per plugin and source at most; the oldest finding goes first.
pub(crate) const MAX_OBJECTS: usize = 1000;
/// Findings `status.preview.recent` lists.
const RECENT: usize = 5;
/// Paths one recent finding lists.
const RECENT_PATHS: usize = 5;

/// Who a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Source {
    /// The plugin's own writes, in `spec.mode: DryRun`.
    DryRun,
    /// The shadow candidate's, compared with the serving version's.
    Candidate,
}

/// The latest finding on one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    /// `Kind namespace/name` of the object written.
    pub(crate) object: String,
    pub(crate) source: Source,
    /// The intent's verb (`create`, `patch`, `patch-status`, `delete`); `-` when the
    /// candidate returned no intent for an object the serving version wrote.
    pub(crate) verb: String,
    /// The object whose event it was.
    pub(crate) trigger: String,
    /// What the write would do (for the candidate: to the object as the serving version
    /// left it).
    pub(crate) change: Change,
    /// For the candidate: whether it agrees with the serving version on this object, and
    /// if not, why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) divergence: Option<Divergence>,
    /// Orders findings: the higher, the newer.
    #[serde(skip)]
    seq: u64,
}

/// How a candidate's result compares with the serving version's on one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub(crate) enum Divergence {
    /// The candidate would leave the object as the serving version did.
    Agrees,
    /// It would not.
    Diverges {
        /// What differs, in words.
        why: String,
    },
}

/// A finding to record.
pub(crate) struct Finding {
    pub(crate) object: String,
    pub(crate) verb: String,
    pub(crate) trigger: String,
    pub(crate) change: Change,
    pub(crate) divergence: Option<Divergence>,
}

/// One plugin's report.
#[derive(Debug, Default)]
struct PluginReport {
    mode: Mode,
    /// The candidate's module and version, while one runs.
    candidate: Option<(String, String)>,
    events: u64,
    candidate_events: u64,
    objects: BTreeMap<(Source, String), Entry>,
    recent: VecDeque<PreviewItem>,
    seq: u64,
}

/// A plugin that previews: its name, its mode, and its candidate's digest and version.
pub(crate) type Previewing = (String, Mode, Option<(String, String)>);

/// Every plugin's preview report.
#[derive(Debug, Default)]
pub(crate) struct Previews {
    plugins: Mutex<BTreeMap<String, PluginReport>>,
}

/// One plugin's whole report, as `/preview/{plugin}` serves it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub(crate) summary: PreviewStatus,
    /// Each object's latest finding, dry run first, then the candidate's.
    pub(crate) objects: Vec<Entry>,
}

impl Previews {
    /// Say which plugins preview, in which mode, with which candidate running (module,
    /// version); a plugin not named is forgotten, and a candidate replaced starts over.
    pub(crate) fn set(
        &self,
        plugins: impl IntoIterator<Item = (String, Mode, Option<(String, String)>)>,
    ) {
        let mut all = lock(&self.plugins);
        let mut next = BTreeMap::new();
        for (name, mode, candidate) in plugins {
            let mut r = all.remove(&name).unwrap_or_default();
            if r.candidate != candidate {
                r.objects.retain(|(s, _), _| *s != Source::Candidate);
                r.recent.retain(|i| i.source != "candidate");
                r.candidate_events = 0;
            }
            if r.mode != mode {
                r.objects.retain(|(s, _), _| *s != Source::DryRun);
                r.recent.retain(|i| i.source != "dryRun");
                r.events = 0;
            }
            r.mode = mode;
            r.candidate = candidate;
            next.insert(name, r);
        }
        *all = next;
    }

    /// One event handled by `plugin` (its dry run, or its candidate), with what it found.
    pub(crate) fn record(&self, plugin: &str, source: Source, findings: Vec<Finding>) {
        let mut all = lock(&self.plugins);
        let Some(r) = all.get_mut(plugin) else {
            return;
        };
        match source {
            Source::DryRun => r.events += 1,
            Source::Candidate => r.candidate_events += 1,
        }
        for f in findings {
            r.seq += 1;
            let entry = Entry {
                object: f.object,
                source,
                verb: f.verb,
                trigger: f.trigger,
                change: f.change,
                divergence: f.divergence,
                seq: r.seq,
            };
            if let Some(item) = recent_item(&entry) {
                r.recent.push_front(item);
                r.recent.truncate(RECENT);
            }
            r.objects.insert((source, entry.object.clone()), entry);
            r.bound(source);
        }
    }

    /// `status.preview` of `plugin`; None when it does not preview.
    pub(crate) fn summary(&self, plugin: &str) -> Option<PreviewStatus> {
        lock(&self.plugins).get(plugin).map(PluginReport::summary)
    }

    /// Whether any plugin previews.
    pub(crate) fn any(&self) -> bool {
        !lock(&self.plugins).is_empty()
    }

    /// Every plugin that previews with its `status.preview`, by name (what `/preview`
    /// lists).
    pub(crate) fn summaries(&self) -> BTreeMap<String, PreviewStatus> {
        lock(&self.plugins)
            .iter()
            .map(|(name, r)| (name.clone(), r.summary()))
            .collect()
    }

    /// The whole report of `plugin`; None when it does not preview.
    pub(crate) fn report(&self, plugin: &str) -> Option<Report> {
        let all = lock(&self.plugins);
        let r = all.get(plugin)?;
        Some(Report {
            summary: r.summary(),
            objects: r.objects.values().cloned().collect(),
        })
    }
}

impl PluginReport {
    /// Keep at most [`MAX_OBJECTS`] of `source`'s findings: the oldest goes.
    fn bound(&mut self, source: Source) {
        let count = self.objects.keys().filter(|(s, _)| *s == source).count();
        if count <= MAX_OBJECTS {
            return;
        }
        let oldest = self
            .objects
            .iter()
            .filter(|((s, _), _)| *s == source)
            .min_by_key(|(_, e)| e.seq)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.objects.remove(&k);
        }
    }

    fn summary(&self) -> PreviewStatus {
        let of = |source: Source| self.objects.values().filter(move |e| e.source == source);
        let candidate = self.candidate.as_ref().map(|(digest, version)| {
            let diverges = |e: &&Entry| matches!(e.divergence, Some(Divergence::Diverges { .. }));
            CandidatePreview {
                digest: Some(format!("sha256:{digest}")),
                version: Some(version.clone()),
                events: self.candidate_events,
                agreements: of(Source::Candidate).filter(|e| !diverges(e)).count() as u64,
                divergences: of(Source::Candidate).filter(diverges).count() as u64,
            }
        });
        PreviewStatus {
            mode: self.mode,
            events: self.events,
            changes: of(Source::DryRun).filter(|e| e.change.changes()).count() as u64,
            refusals: of(Source::DryRun)
                .filter(|e| matches!(e.change, Change::Refused { .. }))
                .count() as u64,
            candidate,
            recent: self.recent.iter().cloned().collect(),
        }
    }
}

/// What `status.preview.recent` says of a finding; None when it is nothing to see (no
/// change, an agreement).
fn recent_item(e: &Entry) -> Option<PreviewItem> {
    let source = match e.source {
        Source::DryRun => "dryRun",
        Source::Candidate => "candidate",
    };
    let mut paths = e.change.paths();
    paths.truncate(RECENT_PATHS);
    let (action, reason) = match (&e.divergence, &e.change) {
        (Some(Divergence::Agrees), _) => return None,
        (Some(Divergence::Diverges { why }), _) => ("Diverges", Some(why.clone())),
        (None, Change::Create(_)) => ("Create", None),
        (None, Change::Update(_)) => ("Update", None),
        (None, Change::Delete) => ("Delete", None),
        (None, Change::Refused { reason, .. }) => ("Refused", Some(reason.clone())),
        (None, Change::Unchanged | Change::AlreadyGone) => return None,
    };
    Some(PreviewItem {
        object: e.object.clone(),
        action: action.into(),
        source: source.into(),
        paths,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preview::change::{Fields, change};
    use serde_json::json;

    fn finding(object: &str, change: Change, divergence: Option<Divergence>) -> Finding {
        Finding {
            object: object.into(),
            verb: "create".into(),
            trigger: "ContentSite a/x".into(),
            change,
            divergence,
        }
    }

    #[test]
    fn counts_follow_each_objects_latest_finding() {
        let p = Previews::default();
        p.set([("p".to_string(), Mode::DryRun, None)]);
        let create = change(None, Some(&json!({"metadata":{"name":"a"}})));
        p.record(
            "p",
            Source::DryRun,
            vec![finding("ConfigMap a/a", create.clone(), None)],
        );
        p.record(
            "p",
            Source::DryRun,
            vec![finding(
                "ConfigMap a/b",
                Change::Refused {
                    code: 403,
                    reason: "forbidden".into(),
                },
                None,
            )],
        );
        let s = p.summary("p").unwrap();
        assert_eq!((s.events, s.changes, s.refusals), (2, 1, 1));
        assert_eq!(s.recent[0].action, "Refused");
        assert_eq!(s.recent[1].paths, ["metadata.name"]);
        // The object now exists as the plugin wants it: nothing would change.
        p.record(
            "p",
            Source::DryRun,
            vec![finding("ConfigMap a/a", Change::Unchanged, None)],
        );
        assert_eq!(p.summary("p").unwrap().changes, 0);
        assert!(p.summary("other").is_none());
    }

    #[test]
    fn a_new_candidate_starts_over_and_a_forgotten_plugin_goes() {
        let p = Previews::default();
        let c1 = Some(("oci://r/p@sha256:1".to_string(), "2.0.0".to_string()));
        p.set([("p".to_string(), Mode::Enforce, c1.clone())]);
        let diverges = Some(Divergence::Diverges {
            why: "spec.size".into(),
        });
        let update = Change::Update(Fields::default());
        p.record(
            "p",
            Source::Candidate,
            vec![finding("X a/a", update.clone(), diverges)],
        );
        p.record(
            "p",
            Source::Candidate,
            vec![finding(
                "X a/b",
                Change::Unchanged,
                Some(Divergence::Agrees),
            )],
        );
        let c = p.summary("p").unwrap().candidate.unwrap();
        assert_eq!((c.events, c.agreements, c.divergences), (2, 1, 1));
        p.set([("p".to_string(), Mode::Enforce, c1)]);
        assert_eq!(p.summary("p").unwrap().candidate.unwrap().divergences, 1);
        let c2 = Some(("oci://r/p@sha256:2".to_string(), "3.0.0".to_string()));
        p.set([("p".to_string(), Mode::Enforce, c2)]);
        let c = p.summary("p").unwrap().candidate.unwrap();
        assert_eq!((c.events, c.divergences), (0, 0));
        p.set([]);
        assert!(p.report("p").is_none());
    }

    #[test]
    fn objects_are_bounded_oldest_first() {
        let p = Previews::default();
        p.set([("p".to_string(), Mode::DryRun, None)]);
        for i in 0..MAX_OBJECTS + 10 {
            p.record(
                "p",
                Source::DryRun,
                vec![finding(&format!("X a/{i}"), Change::Delete, None)],
            );
        }
        let r = p.report("p").unwrap();
        assert_eq!(r.objects.len(), MAX_OBJECTS);
        assert!(!r.objects.iter().any(|e| e.object == "X a/0"));
        assert!(
            r.objects
                .iter()
                .any(|e| e.object == format!("X a/{}", MAX_OBJECTS + 9))
        );
    }
}
