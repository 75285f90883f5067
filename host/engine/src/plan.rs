//! `kubewasm plan`: what a plugin would do to a live cluster, without doing it. The
//! plugin's watched kinds are listed (its namespaces and selectors, kinds resolved
//! through discovery as `run` resolves them) into caches like `run`'s, with the kinds it
//! declared under `reads`, so its `host.get`/`host.list` answer as in `run`; then it is
//! called once per selected object as a resync would call it, and each call goes through
//! `run`'s own [`Pipeline`] over the API server in dry run ([`Request::dry_run`]): the
//! same admission and preflight, every admitted write sent with `dryRun=All` as the
//! plugin's identity. The plan is the dry run's findings ([`dry_run_findings`], as the
//! `Preview` layer records them for a Plugin in `spec.mode: DryRun`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams};
use kubewasm_core::event::EventType;
use kubewasm_core::grant::{Approval, Mode};
use kubewasm_core::kind::{KindInfo, ResolveError};
use kubewasm_core::manifest::Manifest;
use kubewasm_core::resource::{ResourceRef, TypeRef};
use kubewasm_runtime::CompiledPlugin;
use serde::Serialize;

use crate::Error;
use crate::apply::{Applier, WriteIdentity};
use crate::event::cluster::ApiCluster;
use crate::event::layers::{Handle, dry_run_findings};
use crate::event::pipeline::{Pipeline, Report, Request};
use crate::event::{Delivery, Health, QuarantinePolicy};
use crate::plugins::environment::{Origin, Route, Version, plugin_projections, plugin_reads};
use crate::preview::change::{Change, FieldChange};
use crate::replicas::ownership::Ownership;
use crate::watch::cache::{Caches, PluginView, ResourceCache};
use crate::watch::discovery::{Discovery, api_resource};
use crate::watch::kept;
use crate::watch::manager::{Demand, shared_demand};

/// How a plan is made.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Whose identity the dry-run writes are sent with, as `run` sends the real ones.
    pub identity: WriteIdentity,
    /// List namespaced kinds only in these namespaces (`run --namespace`); empty: every
    /// namespace.
    pub namespaces: Vec<String>,
}

/// What a plugin would do: each write that would change something or be refused, the
/// counts, and the calls that failed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    plugin: String,
    version: String,
    /// Calls made: one per watched object per watch selecting it.
    calls: usize,
    /// Watched kinds the cluster does not serve (nothing of theirs is planned).
    not_served: Vec<String>,
    /// Writes that would create, change or delete an object, or be refused.
    changes: Vec<Entry>,
    summary: Summary,
    /// Calls whose event failed (the plugin's error, a refused intent, the cluster).
    errors: Vec<Failure>,
}

/// One write of the plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    /// `Kind namespace/name` of the object written.
    object: String,
    /// The intent's verb.
    verb: String,
    /// The object whose call returned it.
    trigger: String,
    /// What the write would do.
    change: Change,
}

/// The counts of a plan.
#[derive(Debug, Default, Serialize)]
struct Summary {
    create: usize,
    update: usize,
    delete: usize,
    refused: usize,
    /// Writes that would leave their object as it is (or delete one already gone).
    unchanged: usize,
}

/// A call whose event failed.
#[derive(Debug, Serialize)]
struct Failure {
    trigger: String,
    watch: String,
    error: String,
}

/// Plan `plugin` (loaded by the caller as `run` loads it) on the cluster of `client`,
/// under `approval` (None: exactly what it asks for, as `kubewasm test` without
/// `--approvals`). `source` names where it came from. `Err`: the cluster could not be
/// read; a failing call is in the plan ([`Plan::failed`]).
pub async fn plan(
    client: kube::Client,
    plugin: CompiledPlugin,
    approval: Option<Approval>,
    source: &Path,
    options: &PlanOptions,
) -> Result<Plan, Error> {
    let approval = approval.unwrap_or_else(|| Approval::asked_by(&plugin.manifest));
    let scopes = Arc::new(approval.read_scopes());
    let cluster = ApiCluster {
        applier: Arc::new(Applier::with_identity(
            client.clone(),
            options.identity.clone(),
        )),
        discovery: Arc::new(Discovery::new(client.clone())),
        caches: Arc::default(),
    };
    let m = &plugin.manifest;
    let (kinds, not_served) = resolve(&cluster.discovery, m).await?;
    fill(&client, &cluster.caches, m, &kinds, &options.namespaces).await?;
    let reads = plugin_reads(m, &scopes, |r| kinds.get(r).map(|k| k.type_ref()));
    // What the plugin receives and reads, projected as `run` projects them.
    let projections = Arc::new(plugin_projections(m, |r| {
        kinds.get(r).map(|k| k.type_ref())
    }));
    let view = Arc::new(
        PluginView::per_kind(
            cluster.caches.clone(),
            Arc::new(reads),
            plugin.limits.memory,
        )
        .with_projections(projections.clone()),
    );
    let deliveries = deliveries(m, &kinds, &cluster.caches);
    let mut out = Plan::new(m, not_served);
    let version = Version::new(
        Arc::new(plugin),
        Health::new(QuarantinePolicy::default()),
        scopes,
        Origin::File(source.to_path_buf()),
        Mode::DryRun,
    );
    let pipeline = Pipeline {
        cluster,
        ownership: Ownership::always(),
    };
    for delivery in &deliveries {
        let req = Request {
            version: &version,
            delivery,
            view: view.clone(),
            projections: projections.clone(),
            keep_intents: false,
            dry_run: true,
            shadow: None,
        };
        let report = pipeline.handle(req).await;
        out.add(delivery, &report);
    }
    Ok(out)
}

/// Every kind the plugin watches or reads, as the cluster serves it; the watched ones it
/// does not serve, named. A cluster that cannot answer is an error.
async fn resolve(
    discovery: &Discovery,
    m: &Manifest,
) -> Result<(HashMap<ResourceRef, Arc<KindInfo>>, Vec<String>), Error> {
    let mut kinds = HashMap::new();
    let mut not_served = Vec::new();
    for r in m.read_resources() {
        if kinds.contains_key(r) {
            continue;
        }
        match discovery.resolve(r).await {
            Ok(k) => {
                kinds.insert(r.clone(), k);
            }
            Err(ResolveError::NotServed(what)) => {
                if m.watches.iter().any(|w| &w.resource == r) && !not_served.contains(&what) {
                    not_served.push(what);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((kinds, not_served))
}

/// One cache per served kind, filled with a list as `run`'s watcher fills it: the label
/// selector all the kind's watches share sent to the server (none when one needs every
/// object, a declared read included), in `namespaces` when the kind is namespaced.
async fn fill(
    client: &kube::Client,
    caches: &Caches,
    m: &Manifest,
    kinds: &HashMap<ResourceRef, Arc<KindInfo>>,
    namespaces: &[String],
) -> Result<(), Error> {
    let mut demands: BTreeMap<TypeRef, (Arc<KindInfo>, BTreeSet<Demand>)> = BTreeMap::new();
    let watched = m.watches.iter().map(|w| {
        (
            &w.resource,
            w.label_selector.as_ref().map(ToString::to_string),
        )
    });
    let read = m.reads.iter().map(|r| (&r.resource, None));
    for (r, demand) in watched.chain(read) {
        if let Some(k) = kinds.get(r) {
            let entry = demands
                .entry(k.type_ref())
                .or_insert_with(|| (k.clone(), BTreeSet::new()));
            entry.1.insert(demand);
        }
    }
    for (k, wanted) in demands.values() {
        let cache = Arc::new(ResourceCache::new(k.key(), k.type_ref(), k.namespaced));
        let mut params = ListParams::default();
        if let Some(s) = shared_demand(wanted) {
            params = params.labels(&s);
        }
        let scopes: Vec<Option<&str>> = match k.namespaced && !namespaces.is_empty() {
            true => namespaces.iter().map(|n| Some(n.as_str())).collect(),
            false => vec![None],
        };
        for scope in scopes {
            let api: Api<DynamicObject> = match scope {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &api_resource(k)),
                None => Api::all_with(client.clone(), &api_resource(k)),
            };
            let listed = api.list(&params).await.map_err(|source| Error::Kube {
                context: match scope {
                    Some(ns) => format!("listing {} in namespace {ns}", k.type_ref()),
                    None => format!("listing {}", k.type_ref()),
                },
                source,
            })?;
            for o in listed.items {
                cache.insert(kept(o, k));
            }
        }
        cache.mark_synced();
        caches.insert(cache);
    }
    Ok(())
}

/// The events a resync would deliver: for each watch, in the manifest's order, each
/// object of its kind it selects (namespace and selectors, the router's own check), by
/// namespace and name.
fn deliveries(
    m: &Manifest,
    kinds: &HashMap<ResourceRef, Arc<KindInfo>>,
    caches: &Caches,
) -> Vec<Delivery> {
    let mut out = Vec::new();
    for w in &m.watches {
        let Some(cache) = kinds
            .get(&w.resource)
            .and_then(|k| caches.get(&k.type_ref()))
        else {
            continue;
        };
        let route = Route::new(w);
        let mut objects = cache.snapshot();
        objects.sort_by_key(|o| o.key());
        out.extend(
            objects
                .into_iter()
                .filter(|o| route.selects(o))
                .map(|object| Delivery {
                    watch_id: route.id.clone(),
                    event_type: EventType::Resync,
                    object,
                    old: None,
                    queued: None,
                }),
        );
    }
    out
}

impl Plan {
    fn new(m: &Manifest, not_served: Vec<String>) -> Plan {
        Plan {
            plugin: m.name.clone(),
            version: m.version.clone(),
            calls: 0,
            not_served,
            changes: Vec::new(),
            summary: Summary::default(),
            errors: Vec::new(),
        }
    }

    /// One call's findings, and its failure.
    fn add(&mut self, d: &Delivery, report: &Report) {
        self.calls += 1;
        let trigger = d.object.describe();
        for f in dry_run_findings(report, &trigger) {
            let s = &mut self.summary;
            match &f.change {
                Change::Create(_) => s.create += 1,
                Change::Update(_) => s.update += 1,
                Change::Delete => s.delete += 1,
                Change::Refused { .. } => s.refused += 1,
                Change::Unchanged | Change::AlreadyGone => {
                    s.unchanged += 1;
                    continue;
                }
            }
            self.changes.push(Entry {
                object: f.object,
                verb: f.verb,
                trigger: f.trigger,
                change: f.change,
            });
        }
        if let Err(e) = &report.result {
            self.errors.push(Failure {
                trigger,
                watch: d.watch_id.to_string(),
                error: e.to_string(),
            });
        }
    }

    /// Whether applying would do anything: a create, an update, a delete, or a write the
    /// API server would refuse (it would fail on apply).
    pub fn changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Whether some call failed: the plan is incomplete.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Each failed call, one line each: the plugin, the object and the reason.
    pub fn failures(&self) -> Vec<String> {
        self.errors
            .iter()
            .map(|f| format!("{} (watch {}): {}", f.trigger, f.watch, f.error))
            .collect()
    }

    /// The summary line: `Plan: 2 to create, 1 to change, 0 to delete, 1 refused; 7
    /// objects unchanged`.
    fn summary(&self) -> String {
        let s = &self.summary;
        format!(
            "Plan: {} to create, {} to change, {} to delete, {} refused; {} objects unchanged",
            s.create, s.update, s.delete, s.refused, s.unchanged
        )
    }

    /// The plan as a terraform-style diff: one block per write, then the summary line.
    pub fn text(&self) -> String {
        let mut out = format!(
            "kubewasm plan: {} {}, {} objects watched\n",
            self.plugin, self.version, self.calls
        );
        for kind in &self.not_served {
            let _ = writeln!(
                out,
                "note: {kind} is not served by the cluster: nothing of it is planned"
            );
        }
        for e in &self.changes {
            let _ = writeln!(
                out,
                "\n{} {} {}  (for {})",
                e.change.sign(),
                e.verb,
                e.object,
                e.trigger
            );
            write_change(&mut out, &e.change);
        }
        for f in self.failures() {
            let _ = writeln!(out, "\nerror: {f}");
        }
        let _ = writeln!(out, "\n{}", self.summary());
        out
    }

    /// The plan as JSON (stable keys: `plugin`, `version`, `calls`, `notServed`,
    /// `changes[{object, verb, trigger, change{action, fields[{path, from, to}], more,
    /// code, reason}}]`, `summary{create, update, delete, refused, unchanged}`,
    /// `errors[{trigger, watch, error}]`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The lines under a write: each field `path: from → to` (a create: `path: to`), or the
/// API server's reason for a refusal.
fn write_change(out: &mut String, change: &Change) {
    let fields = match change {
        Change::Create(f) | Change::Update(f) => f,
        Change::Refused { code, reason } => {
            let _ = writeln!(out, "    refused ({code}): {reason}");
            return;
        }
        _ => return,
    };
    for FieldChange { path, from, to } in &fields.fields {
        let to = to.as_deref().unwrap_or("(removed)");
        let _ = match (change, from) {
            (Change::Create(_), _) => writeln!(out, "    {path}: {to}"),
            (_, Some(from)) => writeln!(out, "    {path}: {from} → {to}"),
            (_, None) => writeln!(out, "    {path}: (absent) → {to}"),
        };
    }
    if fields.more > 0 {
        let _ = writeln!(out, "    … and {} more fields", fields.more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preview::change::change;
    use serde_json::json;

    fn entry(verb: &str, change: Change) -> Entry {
        Entry {
            object: "ConfigMap n/a".into(),
            verb: verb.into(),
            trigger: "ConfigMap n/t".into(),
            change,
        }
    }

    fn plan(changes: Vec<Entry>, summary: Summary) -> Plan {
        Plan {
            plugin: "p".into(),
            version: "1.0.0".into(),
            calls: 3,
            not_served: vec![],
            changes,
            summary,
            errors: vec![],
        }
    }

    #[test]
    fn the_text_shows_each_write_by_sign_with_its_fields_and_counts_the_rest() {
        let cm = |v: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "namespace": "n", "resourceVersion": v},
                   "data": {"k": v}})
        };
        let update = change(Some(&cm("1")), Some(&cm("2")));
        let create = change(None, Some(&cm("1")));
        let refused = Change::Refused {
            code: 403,
            reason: "configmaps is forbidden".into(),
        };
        let p = plan(
            vec![
                entry("create", create),
                entry("patch", update),
                entry("create", refused),
            ],
            Summary {
                create: 1,
                update: 1,
                refused: 1,
                unchanged: 4,
                ..Summary::default()
            },
        );
        let text = p.text();
        for line in [
            "kubewasm plan: p 1.0.0, 3 objects watched",
            "+ create ConfigMap n/a  (for ConfigMap n/t)\n    apiVersion: \"v1\"\n",
            "    data.k: \"1\"\n",
            "~ patch ConfigMap n/a  (for ConfigMap n/t)\n    data.k: \"1\" → \"2\"\n",
            "! create ConfigMap n/a  (for ConfigMap n/t)\n    refused (403): configmaps is forbidden\n",
            "\nPlan: 1 to create, 1 to change, 0 to delete, 1 refused; 4 objects unchanged\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from\n{text}");
        }
        assert!(!text.contains("resourceVersion"), "server-kept: {text}");
        assert!(p.changes() && !p.failed());
        let v = p.json();
        assert_eq!(v["changes"][1]["change"]["action"], json!("update"));
        assert_eq!(
            v["changes"][1]["change"]["fields"],
            json!([{"path": "data.k", "from": "\"1\"", "to": "\"2\""}])
        );
        assert_eq!(v["changes"][2]["change"]["code"], json!(403));
        assert_eq!(v["summary"]["unchanged"], json!(4));
    }

    #[test]
    fn nothing_to_change_is_an_empty_plan_with_its_count() {
        let p = plan(
            vec![],
            Summary {
                unchanged: 2,
                ..Summary::default()
            },
        );
        assert!(!p.changes() && !p.failed());
        assert!(p.text().ends_with(
            "\nPlan: 0 to create, 0 to change, 0 to delete, 0 refused; 2 objects unchanged\n"
        ));
    }
}
