//! Running test cases (`kubewasm test`) through `run`'s own pipeline: the plugin loaded
//! and bounded by the operator's approval as `run` loads it ([`Loader::load_approved_as`];
//! without one, by what it asks for), the event routed by the plugin's real watch, and the
//! call, admission, preflight and writes done by `run`'s [`Pipeline`], on a fresh embedded
//! API server per case ([`CaseCluster`]) instead of the cluster. The plugin reads through
//! the view `run` gives it, scoped by its approval's read scopes. So a case fails where
//! `run` would: a selector that does not select, a schema violation, a conflict with
//! another field manager, a merge patch over another manager's field.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kubewasm_core::grant::{Approval, ReadScopes};
use kubewasm_runtime::Approvals;
use kubewasm_runtime::InstancePolicy;
use kubewasm_runtime::{CallError, CompiledPlugin, LoadOptions, Loader, PluginEngine, PluginFile};
use serde_json::{Value, json};

use super::cluster::CaseCluster;
use super::format::{self, TestCase, intent_json, show_owner_references};
use crate::Error;
use crate::apply::manifests::files_with_extensions;
use crate::event::layers::Handle;
use crate::event::pipeline::{Pipeline, Report as EventReport, Request};
use crate::event::{Health, QuarantinePolicy};
use crate::plugins::environment::{Origin, Version};
use crate::replicas::ownership::Ownership;
use kubewasm_core::grant::Mode;

/// Which instances run the cases.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Instances {
    /// A new instance for every case.
    Fresh,
    /// One instance per plugin and settings, reused by every case in order.
    Reused,
    /// Every case on a fresh instance and on the reused one.
    #[default]
    Both,
}

impl Instances {
    /// The modes to run, in order: `reuse` flags.
    fn modes(self) -> &'static [bool] {
        match self {
            Instances::Fresh => &[false],
            Instances::Reused => &[true],
            Instances::Both => &[false, true],
        }
    }
}

/// Options of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Use this plugin file for every case.
    pub plugin: Option<PathBuf>,
    /// Rewrite the expectations with the actual output.
    pub update: bool,
    /// Compiled-code cache directory.
    pub cache_dir: Option<PathBuf>,
    /// The key of `cache_dir`'s entries; None: as the environment says
    /// (`KUBEWASM_CACHE_KEY_FILE`, else random to this process).
    pub cache_key_file: Option<PathBuf>,
    /// Fresh, reused or both.
    pub instances: Instances,
    /// The operator's approvals (`--approvals`, as `run` takes them): each case runs under
    /// its plugin's approval there unless it states its own (`approval:`). None: a case
    /// without `approval:` runs approving exactly what the plugin asks for (the author's
    /// tests are about behaviour; `--approvals` also tests the approval).
    pub approvals: Option<PathBuf>,
    /// `--crds DIR`: CustomResourceDefinitions (every .yaml/.yml there) every case's
    /// server holds before the case's own objects.
    pub crds: Option<PathBuf>,
}

/// What a run found: the report to print, and the counts.
#[derive(Debug, Default)]
pub struct Report {
    /// One line per case (`ok`, `FAIL` with the differences, `updated`), then the counts.
    pub text: String,
    /// Cases passed (or updated).
    pub passed: usize,
    /// Cases failed, malformed ones included.
    pub failed: usize,
}

/// Loads the plugins of the cases as `run` loads them ([`Loader::load_approved_as`]):
/// compiled once (and through the code cache); a fresh `CompiledPlugin` per case for
/// fresh instances, one per plugin file and settings, kept for the whole run, for the
/// reused instance.
struct Plugins {
    loader: Loader,
    /// `--approvals`, read once.
    approvals: Option<Approvals>,
    reused: HashMap<(PathBuf, String), Loaded>,
}

/// A loaded plugin and where its approval lets it read.
type Loaded = (Arc<CompiledPlugin>, Arc<ReadScopes>);

impl Plugins {
    /// The plugin at `path` with the settings of `case` (from `case_file`) in place of its
    /// settings file's, under the case's approval, else `--approvals`, else what it asks
    /// for.
    async fn get(
        &mut self,
        path: &Path,
        case_file: &Path,
        case: &TestCase,
        reuse: bool,
    ) -> Result<Loaded, Error> {
        let mut file = PluginFile::read(path)?;
        if let Some(settings) = &case.settings {
            file.set_settings(settings, case_file)?;
        }
        let own = match &case.approval {
            Some(permissions) => Some(Approvals::single(&file.name(), permissions, case_file)?),
            None => None,
        };
        let approvals = own.as_ref().or(self.approvals.as_ref());
        let approved = approvals.map(|a| a.fingerprint_of(&file.name()));
        let key = (
            path.to_path_buf(),
            format!("{}/{approved:?}", file.fingerprint()),
        );
        if reuse && let Some(p) = self.reused.get(&key) {
            return Ok(p.clone());
        }
        let instances = InstancePolicy {
            reuse,
            pool_size: 1,
        };
        let loaded = match approvals {
            Some(a) => self.loader.load_approved_as(file, a, instances).await?,
            None => self.loader.load_as(file, instances).await?,
        };
        tracing::debug!(file = %path.display(), how = loaded.source.as_str(), "component ready");
        // Without an approval, the case approves what the plugin asks for, reads included.
        let approval = loaded
            .approval
            .unwrap_or_else(|| Approval::asked_by(&loaded.plugin.manifest));
        let plugin = (Arc::new(loaded.plugin), Arc::new(approval.read_scopes()));
        if reuse {
            self.reused.insert(key, plugin.clone());
        }
        Ok(plugin)
    }
}

/// What came out of one case: the intents as cases write them, the error (the plugin's,
/// admission's refusal, or the cluster's), and the case's cluster afterwards.
struct Outcome {
    intents: Vec<Value>,
    error: Option<String>,
    cluster: CaseCluster,
}

/// The plugin file a case runs: `--plugin`, else the case's `plugin:` (relative to its file).
fn plugin_path(opts: &RunOptions, file: &Path, case: &TestCase) -> Result<PathBuf, String> {
    match (&opts.plugin, &case.plugin) {
        (Some(p), _) => Ok(p.clone()),
        (None, Some(p)) => Ok(file.parent().unwrap_or(Path::new(".")).join(p)),
        (None, None) => Err("no plugin: give `plugin:` in the case or --plugin".into()),
    }
}

/// One case on one instance mode: a fresh cluster seeded with it, the event routed by the
/// plugin's watches, then `run`'s pipeline on that cluster.
async fn run_case(
    plugins: &mut Plugins,
    file: &Path,
    case: &TestCase,
    ctx: &Context,
    reuse: bool,
    watch: &mut Option<String>,
) -> Result<Outcome, String> {
    let path = plugin_path(&ctx.opts, file, case)?;
    // Worded as `run` logs a plugin it does not load.
    let (plugin, scopes) = plugins
        .get(&path, file, case, reuse)
        .await
        .map_err(|e| format!("plugin rejected: {e}"))?;
    let m = &plugin.manifest;
    let cluster = CaseCluster::start(&ctx.crds, case).await?;
    let delivery = cluster.route(m, case).await?;
    *watch = Some(delivery.watch_id.to_string());
    let (view, projections) = cluster.view(m, &scopes, plugin.limits.memory, case).await?;
    let health = Health::new(QuarantinePolicy::default());
    let version = Version::new(
        plugin.clone(),
        health,
        scopes,
        Origin::File(path),
        Mode::Enforce,
    );
    let pipeline: CasePipeline = Pipeline {
        cluster,
        ownership: Ownership::always(),
    };
    let request = Request {
        version: &version,
        delivery: &delivery,
        view,
        projections,
        keep_intents: true,
        dry_run: false,
        shadow: None,
    };
    let report = pipeline.handle(request).await;
    let (intents, error) = outcome(&report);
    Ok(Outcome {
        intents,
        error,
        cluster: pipeline.cluster,
    })
}

/// `kubewasm test`'s pipeline: `run`'s [`Pipeline`] type, on a case's cluster.
type CasePipeline = Pipeline<CaseCluster>;

/// The intents (as cases write them, each `owned-by-trigger` create with the owner
/// reference admission bound) and the error, of a pipeline's report.
fn outcome(report: &EventReport) -> (Vec<Value>, Option<String>) {
    let mut intents: Vec<Value> = report.raw.iter().flatten().map(intent_json).collect();
    show_owner_references(&mut intents, report.prepared());
    let error = match (&report.call_error, &report.result) {
        (Some(CallError::Plugin { message, retry }), _) => {
            Some(format!("plugin error (retry: {retry}): {message}"))
        }
        (Some(e), _) => Some(e.to_string()),
        (None, Ok(())) => None,
        (None, Err(Error::Refused { rejection, .. } | Error::InvalidIntent { rejection, .. })) => {
            Some(rejection.to_string())
        }
        (None, Err(e)) => Some(e.to_string()),
    };
    (intents, error)
}

/// What every case of a run shares.
struct Context {
    opts: RunOptions,
    /// The CRDs of `--crds`.
    crds: Vec<Value>,
}

/// The CustomResourceDefinitions of every .yaml/.yml file under `dir`.
fn read_crds(dir: &Path) -> Result<Vec<Value>, Error> {
    let mut crds = Vec::new();
    for file in files_with_extensions(&[dir.to_path_buf()], &["yaml", "yml"])? {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            context: format!("reading {}", file.display()),
            source,
        })?;
        let document = |reason: String| Error::Document {
            path: file.clone(),
            reason,
        };
        for de in serde_yaml_ng::Deserializer::from_str(&text) {
            let doc: Value =
                serde::Deserialize::deserialize(de).map_err(|e| document(e.to_string()))?;
            match doc["kind"].as_str() {
                _ if doc.is_null() => {}
                Some("CustomResourceDefinition") => crds.push(doc),
                other => {
                    return Err(document(format!(
                        "--crds takes CustomResourceDefinitions, not {}",
                        other.unwrap_or("an object without a kind")
                    )));
                }
            }
        }
    }
    Ok(crds)
}

/// Fill the defaults a test author may leave out, so `{create: {object}}` equals the full form.
fn normalize(expected: &Value) -> Value {
    let mut v = expected.clone();
    if let Some(c) = v.get_mut("create").and_then(Value::as_object_mut) {
        c.entry("ownedByTrigger").or_insert(json!(false));
        c.entry("force").or_insert(json!(false));
    }
    if let Some(p) = v.get_mut("patch").and_then(Value::as_object_mut) {
        p.entry("strategy").or_insert(json!("apply"));
        p.entry("status").or_insert(json!(false));
        p.entry("force").or_insert(json!(false));
    }
    v
}

/// Differences between `expected` and `actual`, one line per path. In subset mode, keys
/// absent from `expected` are ignored and `"<any>"` matches anything.
fn json_diff(expected: &Value, actual: &Value, subset: bool, path: &str, out: &mut Vec<String>) {
    if subset && expected == &json!("<any>") {
        return;
    }
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => json_diff(ev, av, subset, &p, out),
                    None => out.push(format!("{p}: expected {ev}, missing")),
                }
            }
            if !subset {
                for (k, av) in a {
                    if !e.contains_key(k) {
                        out.push(format!("{path}.{k}: unexpected {av}"));
                    }
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                out.push(format!(
                    "{path}: expected {} items, got {}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                json_diff(ev, av, subset, &format!("{path}[{i}]"), out);
            }
        }
        (e, a) if e != a => out.push(format!("{path}: expected {e}, got {a}")),
        _ => {}
    }
}

/// What is wrong with a case's `after:` objects, as report lines: each compared as a
/// subset with the object the case's cluster holds afterwards.
async fn check_after(case: &TestCase, cluster: &CaseCluster, report: &mut String) {
    for (i, expected) in case.after.iter().enumerate() {
        let actual = match cluster.object(expected).await {
            Ok(Some(actual)) => actual,
            Ok(None) => {
                let _ = writeln!(report, "  after[{i}]: expected {expected}, missing");
                continue;
            }
            Err(e) => {
                let _ = writeln!(report, "  {e}");
                continue;
            }
        };
        let mut diffs = Vec::new();
        json_diff(expected, &actual, true, &format!("after[{i}]"), &mut diffs);
        for d in diffs {
            let _ = writeln!(report, "  {d}");
        }
    }
}

/// What is wrong with a case's outcome, as report lines; None when it passes.
async fn check(case: &TestCase, outcome: &Outcome) -> Option<String> {
    let (intents, error) = (&outcome.intents, &outcome.error);
    let subset = case.expect.r#match.as_deref() == Some("subset");
    let mut report = String::new();
    match (&case.expect.error, error) {
        (Some(want), Some(got)) if got.contains(want.as_str()) => {
            if let Some(retry) = case.expect.retry
                && !got.contains(&format!("retry: {retry}"))
            {
                let _ = writeln!(report, "  error {got:?} does not have retry: {retry}");
            }
        }
        (Some(want), Some(got)) => {
            let _ = writeln!(
                report,
                "  expected an error containing {want:?}, got {got:?}"
            );
        }
        (Some(want), None) => {
            let _ = writeln!(
                report,
                "  expected an error containing {want:?}, got {} intents",
                intents.len()
            );
        }
        (None, Some(got)) => {
            let _ = writeln!(report, "  unexpected error: {got}");
        }
        (None, None) => {}
    }
    if let Some(expected) = &case.expect.intents {
        let expected: Vec<Value> = expected.iter().map(normalize).collect();
        // The bound ownerReference is compared when the case states it.
        let actual: Vec<Value> = intents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let stated = expected
                    .get(i)
                    .and_then(|e| e.pointer("/create/ownerReference"))
                    .is_some();
                let mut a = a.clone();
                if !stated && let Some(c) = a.get_mut("create").and_then(Value::as_object_mut) {
                    c.remove("ownerReference");
                }
                a
            })
            .collect();
        let mut diffs = Vec::new();
        json_diff(
            &Value::Array(expected),
            &Value::Array(actual),
            subset,
            "intents",
            &mut diffs,
        );
        for d in diffs {
            let _ = writeln!(report, "  {d}");
        }
    } else if case.expect.error.is_none() && case.after.is_empty() {
        let _ = writeln!(report, "  the case expects neither intents nor an error");
    }
    check_after(case, &outcome.cluster, &mut report).await;
    (!report.is_empty()).then_some(report)
}

/// Run every case under `paths` (files, or directories: every .yaml/.yml, sorted,
/// recursively). With `update`, each file is rewritten with the actual outputs.
pub async fn run(paths: &[PathBuf], opts: &RunOptions) -> Result<Report, Error> {
    let loader = match (&opts.cache_dir, &opts.cache_key_file) {
        (Some(dir), Some(key)) => {
            Loader::with_key_file(PluginEngine::new()?, LoadOptions::default(), dir, key)?
        }
        (dir, _) => Loader::new(PluginEngine::new()?, LoadOptions::default(), dir.as_deref())?,
    };
    let approvals = opts.approvals.as_deref().map(Approvals::read).transpose()?;
    let mut plugins = Plugins {
        loader,
        approvals,
        reused: HashMap::new(),
    };
    let ctx = Context {
        opts: opts.clone(),
        crds: opts
            .crds
            .as_deref()
            .map(read_crds)
            .transpose()?
            .unwrap_or_default(),
    };
    let mut report = Report::default();
    let mut seen = HashSet::new();
    for file in files_with_extensions(paths, &["yaml", "yml"])? {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            context: format!("reading {}", file.display()),
            source,
        })?;
        let mut updated = Vec::new();
        for case in format::parse(&text) {
            let case = match case {
                Ok(c) => c,
                Err(e) => {
                    report.failed += 1;
                    let _ = writeln!(report.text, "FAIL {}: not a test case: {e}", file.display());
                    continue;
                }
            };
            let label = format!("{}: {}", file.display(), case.name);
            if !seen.insert(label.clone()) {
                let _ = writeln!(report.text, "note: duplicate case name {label}");
            }
            let case = run_modes(&mut plugins, &file, case, &ctx, &label, &mut report).await;
            updated.push(case);
        }
        if opts.update {
            std::fs::write(&file, format::to_yaml(&updated)).map_err(|source| Error::Io {
                context: format!("writing {}", file.display()),
                source,
            })?;
        }
    }
    let _ = writeln!(
        report.text,
        "{} passed, {} failed",
        report.passed, report.failed
    );
    Ok(report)
}

/// One case in each instance mode (`--update`: the first mode only, recorded), counted
/// and written into `report`; the case as the file keeps it.
async fn run_modes(
    plugins: &mut Plugins,
    file: &Path,
    case: TestCase,
    ctx: &Context,
    label: &str,
    report: &mut Report,
) -> TestCase {
    let opts = &ctx.opts;
    let modes = match opts.update {
        true => &opts.instances.modes()[..1],
        false => opts.instances.modes(),
    };
    let mut failures = Vec::new();
    for &reuse in modes {
        let mode = if reuse {
            "reused instance"
        } else {
            "fresh instance"
        };
        // Every failure names the watch the event went to.
        let mut watch = None;
        let outcome = run_case(plugins, file, &case, ctx, reuse, &mut watch).await;
        let mode = match &watch {
            Some(w) => format!("{mode}, watch {w}"),
            None => mode.to_string(),
        };
        match outcome {
            Err(e) => failures.push((mode, format!("  {e}\n"))),
            // --update records intents and error; `after:` is kept as written.
            Ok(o) if opts.update => {
                let mut c = case.clone();
                c.expect.intents = o.error.is_none().then_some(o.intents);
                c.expect.error = o.error;
                report.passed += 1;
                let _ = writeln!(report.text, "updated {label}");
                return c;
            }
            Ok(o) => {
                if let Some(lines) = check(&case, &o).await {
                    failures.push((mode, lines));
                }
            }
        }
    }
    if failures.is_empty() {
        report.passed += 1;
        let _ = writeln!(report.text, "ok   {label}");
        return case;
    }
    report.failed += 1;
    let only_reused =
        modes.len() > 1 && failures.len() == 1 && failures[0].0.starts_with("reused instance");
    for (mode, lines) in &failures {
        let why = match only_reused {
            true => " (passes on a fresh instance: the plugin keeps state between calls)",
            false => "",
        };
        let _ = write!(report.text, "FAIL {label} [{mode}]{why}\n{lines}");
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_reports_paths_and_subset_ignores_extras() {
        let e = json!({"a": 1, "b": {"c": [1, 2]}, "t": "<any>"});
        let a = json!({"a": 2, "b": {"c": [1]}, "t": "2026-01-01", "x": true});
        let mut out = vec![];
        json_diff(&e, &a, false, "", &mut out);
        assert!(
            out.contains(&".a: expected 1, got 2".to_string()),
            "{out:?}"
        );
        assert!(
            out.contains(&".b.c: expected 2 items, got 1".to_string()),
            "{out:?}"
        );
        assert!(
            out.iter().any(|l| l.starts_with(".x: unexpected")),
            "{out:?}"
        );
        assert!(out.iter().any(|l| l.starts_with(".t: expected")), "{out:?}");
        let mut out = vec![];
        json_diff(&e, &a, true, "", &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
    }

    #[test]
    fn expected_intents_get_defaults() {
        let n = normalize(&json!({"create": {"object": {}}}));
        assert_eq!(
            n,
            json!({"create": {"object": {}, "ownedByTrigger": false, "force": false}})
        );
        let n = normalize(&json!({"patch": {"target": {}, "body": {}}}));
        assert_eq!(n["patch"]["strategy"], json!("apply"));
    }

    /// `kubewasm test` runs `run`'s pipeline: one generic type over two cluster ports.
    /// This does not compile if cases build their own call, admission and writes: the
    /// case pipeline is `event::pipeline::Pipeline` over the case's cluster, the type
    /// `run`'s layers stack over the API server's, and both handle events.
    #[test]
    fn cases_run_the_pipeline_type_run_uses() {
        use crate::event::cluster::{ApiCluster, Cluster};
        use crate::event::layers::{Stack, stack};
        let _: fn(CasePipeline) -> Pipeline<CaseCluster> = |p| p;
        let _: fn(Pipeline<ApiCluster>, _, _, _, _) -> Stack = stack;
        fn handles<C: Cluster>()
        where
            Pipeline<C>: Handle,
        {
        }
        handles::<CaseCluster>();
        handles::<ApiCluster>();
    }
}
