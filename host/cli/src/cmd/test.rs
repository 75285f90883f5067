//! `kubewasm test`: run a plugin's real `.wasm` offline against YAML test cases, through
//! the same runtime, intent decoding and grant check as `kubewasm run`.
//!
//! The file format is documented in `plugins/conformance/README.md`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, ValueEnum};
use kubewasm::Error;
use kubewasm::apply::manifests::files_with_extensions;
use kubewasm::core::admit::{self, AdmitError, Prepared, Trigger};
use kubewasm::core::event::EventType;
use kubewasm::core::intent::RawIntent;
use kubewasm::core::kind::{self, KindInfo, ResolveError, Resolver};
use kubewasm::core::resource::{ResourceRef, TypeRef};
use kubewasm::core::selector::LabelSelector;
use kubewasm::record::{TestCase, intent_json, show_owner_references};
use kubewasm::runtime::plugin::InstancePolicy;
use kubewasm::runtime::{
    CallError, ClusterView, CompiledPlugin, ListAnswer, ListLimit, LoadOptions, Loader,
    PluginEngine, PluginEvent, PluginFile, ReadError, ReadScope,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// Flags of `kubewasm test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// Test-case files or directories (every .yaml/.yml, recursively).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Run every case against this plugin file instead of the case's `plugin:`.
    #[arg(long, value_name = "FILE")]
    plugin: Option<PathBuf>,
    /// Rewrite each case's expectation with the plugin's actual output.
    #[arg(long)]
    update: bool,
    /// Keep compiled plugins here between runs: a big component (Python, JavaScript)
    /// then loads in milliseconds instead of compiling for seconds on every run.
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Which instances run the cases: `fresh` (a new instance per case), `reused` (all
    /// cases of a plugin and settings through one instance, in order, as `run` reuses
    /// its pooled instances), or `both` (each case both ways; catches a plugin that keeps
    /// state between calls, for the cost of one warm call per case).
    #[arg(long, value_enum, default_value = "both")]
    instances: Instances,
}

/// Which instances run the cases.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, ValueEnum)]
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

/// `kubewasm test`: print the report; exit 1 when any case failed.
pub async fn command(args: TestArgs) -> Result<()> {
    let mut report = String::new();
    let opts = RunOptions {
        plugin: args.plugin,
        update: args.update,
        cache_dir: args.cache_dir,
        instances: args.instances,
    };
    let (_, failed) = run(&args.paths, &opts, &mut report).await?;
    print!("{report}");
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
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
    /// Fresh, reused or both.
    pub instances: Instances,
}

/// The objects of a case, scoped like `run` scopes reads: watched kinds and `reads` only.
struct FixtureCluster {
    objects: Vec<Value>,
    allowed: Vec<ResourceRef>,
    /// The namespaces `run` would let the plugin read in.
    scope: ReadScope,
    /// What one call may read, as in `run`: the plugin's memory cap.
    budget: usize,
}

fn allows(refs: &[ResourceRef], api_version: &str, kind: &str) -> bool {
    let t = TypeRef::new(api_version, kind);
    refs.iter().any(|r| match r {
        ResourceRef::Kind(k) => *k == t,
        ResourceRef::Resource(a) => kind::resource_names_kind(a, &t),
    })
}

/// Offline kind resolution for a case: a CustomResourceDefinition among the case's
/// `cluster:` objects gives the kind's real plural and scope, as discovery would on a
/// cluster; anything else is [`kind::guess`]ed.
struct FixtureResolver<'a> {
    objects: &'a [Value],
}

impl FixtureResolver<'_> {
    fn crd_kind(&self, t: &TypeRef) -> Option<KindInfo> {
        self.objects.iter().find_map(|o| {
            let spec = o.get("spec")?;
            let crd = o["kind"] == "CustomResourceDefinition"
                && spec["group"].as_str() == Some(t.group())
                && spec.pointer("/names/kind").and_then(Value::as_str) == Some(&t.kind);
            if !crd {
                return None;
            }
            let version = spec["versions"]
                .as_array()?
                .iter()
                .find(|v| v["name"].as_str() == Some(t.version()))?;
            Some(KindInfo {
                group: t.group().to_string(),
                version: t.version().to_string(),
                kind: t.kind.clone(),
                plural: spec.pointer("/names/plural")?.as_str()?.to_string(),
                namespaced: spec["scope"].as_str() != Some("Cluster"),
                has_status: version.pointer("/subresources/status").is_some(),
                guessed: false,
            })
        })
    }
}

/// Owner references are checked against the case's `cluster:` objects, as `run` checks
/// them against its caches.
impl admit::Owners for FixtureResolver<'_> {
    fn uid(&self, k: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
        let api_version = k.api_version();
        self.objects
            .iter()
            .find(|o| {
                o["apiVersion"].as_str() == Some(api_version.as_str())
                    && o["kind"].as_str() == Some(k.kind.as_str())
                    && o["metadata"]["name"].as_str() == Some(name)
                    && (!k.namespaced || o["metadata"]["namespace"].as_str() == namespace)
            })
            .and_then(|o| o["metadata"]["uid"].as_str())
            .map(str::to_string)
    }
}

impl Resolver for FixtureResolver<'_> {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        Ok(self
            .crd_kind(t)
            .unwrap_or_else(|| kind::guess(&ResourceRef::Kind(t.clone()))))
    }
}

impl FixtureCluster {
    fn matching<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> Result<impl Iterator<Item = &'a Value> + 'a, ReadError> {
        if !allows(&self.allowed, api_version, kind) {
            return Err(ReadError::NotAllowed(format!("{api_version}/{kind}")));
        }
        Ok(self.objects.iter().filter(move |o| {
            o["apiVersion"].as_str() == Some(api_version) && o["kind"].as_str() == Some(kind)
        }))
    }
}

impl ClusterView for FixtureCluster {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, ReadError> {
        let mut matching = self.matching(api_version, kind)?;
        self.check_scope(api_version, kind, namespace)?;
        Ok(matching
            .find(|o| {
                o["metadata"]["name"].as_str() == Some(name)
                    && o["metadata"]["namespace"].as_str() == namespace
            })
            .map(Value::to_string))
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: ListLimit,
    ) -> Result<Vec<String>, ReadError> {
        let matching = self.matching(api_version, kind)?;
        self.check_scope(api_version, kind, namespace)?;
        let selector = match label_selector {
            Some(s) => LabelSelector::parse(s)?,
            None => LabelSelector::default(),
        };
        let mut answer = ListAnswer::new(format!("{api_version}/{kind}"), limit);
        for o in matching
            .filter(|o| namespace.is_none() || o["metadata"]["namespace"].as_str() == namespace)
            .filter(|o| selector.matches_object(o))
        {
            answer.check_count()?;
            answer.push(o.to_string())?;
        }
        Ok(answer.finish())
    }

    fn read_budget(&self) -> usize {
        self.budget
    }
}

impl FixtureCluster {
    /// Namespaced kinds (as the case's CRDs or the built-in table say) are read only in
    /// the plugin's read scope, as in `run`.
    fn check_scope(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(), ReadError> {
        let t = TypeRef::new(api_version, kind);
        let resolver = FixtureResolver {
            objects: &self.objects,
        };
        let namespaced = resolver
            .crd_kind(&t)
            .unwrap_or_else(|| kind::guess(&ResourceRef::Kind(t.clone())))
            .namespaced;
        if namespaced {
            self.scope.check(&t.to_string(), namespace)?;
        }
        Ok(())
    }
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

fn event_type(s: &str) -> Result<EventType, String> {
    EventType::parse(s).ok_or_else(|| format!("unknown event type {s:?}"))
}

/// Admit the intents exactly as `run` does before applying (the same pipeline), with
/// kinds resolved offline. The error reads as `run` reports it.
async fn validate(
    plugin: &CompiledPlugin,
    raw: &[RawIntent],
    case: &TestCase,
) -> Result<Vec<Prepared>, String> {
    let resolver = FixtureResolver {
        objects: &case.cluster,
    };
    admit::admit(
        &plugin.manifest,
        raw.to_vec(),
        plugin.limits.max_intent_bytes,
        &Trigger::from_json(&case.event.object),
        &resolver,
        &resolver,
    )
    .await
    .map_err(|r| match r.error {
        AdmitError::Refused(e) => format!("intent #{} refused: {e}", r.index),
        e => format!("invalid intent #{}: {e}", r.index),
    })
}

/// Loads the plugins of the cases: compiled once through the loader (and its code cache);
/// a fresh `CompiledPlugin` per case for fresh instances, one per plugin and settings,
/// kept for the whole run, for the reused instance.
struct Plugins {
    loader: Loader,
    reused: HashMap<(PathBuf, Option<String>), Arc<CompiledPlugin>>,
}

impl Plugins {
    /// The case's plugin file with the case's settings in place of the file's.
    async fn get(
        &mut self,
        path: &Path,
        settings: Option<String>,
        reuse: bool,
    ) -> Result<Arc<CompiledPlugin>, Error> {
        let key = (path.to_path_buf(), settings.clone());
        if reuse && let Some(p) = self.reused.get(&key) {
            return Ok(p.clone());
        }
        let mut file = PluginFile::read(path)?;
        if settings.is_some() {
            file.settings = settings;
        }
        let (component, _) = self.loader.component(&mut file).await?;
        let plugin = Arc::new(
            CompiledPlugin::new(
                self.loader.engine(),
                &file.path,
                component,
                file.digest,
                file.settings,
                file.overrides.apply(&LoadOptions::default().limits),
                InstancePolicy {
                    reuse,
                    pool_size: 1,
                },
            )
            .await?,
        );
        if reuse {
            self.reused.insert(key, plugin.clone());
        }
        Ok(plugin)
    }
}

async fn run_case(
    plugins: &mut Plugins,
    file: &Path,
    case: &TestCase,
    opts: &RunOptions,
    reuse: bool,
) -> Result<(Vec<Value>, Option<String>), String> {
    let plugin_path = match (&opts.plugin, &case.plugin) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => file.parent().unwrap_or(Path::new(".")).join(p),
        (None, None) => return Err("no plugin: give `plugin:` in the case or --plugin".into()),
    };
    let settings = case.settings.as_ref().map(Value::to_string);
    let plugin = plugins
        .get(&plugin_path, settings, reuse)
        .await
        .map_err(|e| e.to_string())?;
    let m = &plugin.manifest;
    let watch_id = case
        .event
        .watch
        .clone()
        .or_else(|| m.watches.first().map(|w| w.id.clone()))
        .ok_or("the plugin declares no watches")?;
    if m.watch(&watch_id).is_none() {
        let ids: Vec<&str> = m.watches.iter().map(|w| w.id.as_str()).collect();
        return Err(format!(
            "watch {watch_id:?} is not in the manifest of {} (its watches: {})",
            m.name,
            ids.join(", ")
        ));
    }
    let allowed: Vec<ResourceRef> = m.read_resources().cloned().collect();
    let event = PluginEvent {
        event_type: event_type(&case.event.event_type)?,
        watch_id,
        object: case.event.object.to_string().into(),
        old_object: case.event.old_object.as_ref().map(|o| o.to_string().into()),
    };
    let cluster = Arc::new(FixtureCluster {
        objects: case.cluster.clone(),
        allowed,
        scope: ReadScope::of(m),
        budget: plugin.limits.memory,
    });
    let label = format!(
        "{} {}",
        case.event.object["kind"].as_str().unwrap_or("object"),
        case.event.object["metadata"]["name"]
            .as_str()
            .unwrap_or("?")
    );
    match plugin.handle(&event, &label, cluster).await {
        Ok(raw) => {
            let mut intents: Vec<Value> = raw.iter().map(intent_json).collect();
            match validate(&plugin, &raw, case).await {
                Ok(prepared) => {
                    show_owner_references(&mut intents, &prepared);
                    Ok((intents, None))
                }
                Err(refused) => Ok((intents, Some(refused))),
            }
        }
        Err(CallError::Plugin { message, retry }) => Ok((
            vec![],
            Some(format!("plugin error (retry: {retry}): {message}")),
        )),
        Err(e) => Ok((vec![], Some(e.to_string()))),
    }
}

fn check(case: &TestCase, intents: &[Value], error: &Option<String>) -> Option<String> {
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
    } else if case.expect.error.is_none() {
        let _ = writeln!(report, "  the case expects neither intents nor an error");
    }
    (!report.is_empty()).then_some(report)
}

/// Test-case files under `paths` (directories: every .yaml/.yml, sorted, recursively).
fn case_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    files_with_extensions(paths, &["yaml", "yml"])
}

/// Run every case in `paths`, printing a report to `out`. Returns (passed, failed).
async fn run(
    paths: &[PathBuf],
    opts: &RunOptions,
    out: &mut String,
) -> Result<(usize, usize), Error> {
    let loader = Loader::new(
        PluginEngine::new()?,
        LoadOptions::default(),
        opts.cache_dir.as_deref(),
    )?;
    let mut plugins = Plugins {
        loader,
        reused: HashMap::new(),
    };
    // --update records one output: the first mode's.
    let modes = match opts.update {
        true => &opts.instances.modes()[..1],
        false => opts.instances.modes(),
    };
    let both = modes.len() > 1;
    let (mut passed, mut failed) = (0, 0);
    let mut seen = HashSet::new();
    for file in case_files(paths)? {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            context: format!("reading {}", file.display()),
            source,
        })?;
        let mut cases = Vec::new();
        for de in serde_yaml_ng::Deserializer::from_str(&text) {
            match serde_yaml_ng::Value::deserialize(de) {
                Ok(serde_yaml_ng::Value::Null) => {}
                Ok(doc) => cases
                    .push(serde_yaml_ng::from_value::<TestCase>(doc).map_err(|e| e.to_string())),
                Err(e) => {
                    // Malformed YAML (the message gives line and column): the rest of the
                    // stream cannot be read, and the parser would report it again forever.
                    cases.push(Err(format!("malformed YAML: {e}")));
                    break;
                }
            }
        }
        let mut updated = Vec::new();
        for case in cases {
            let case = match case {
                Ok(c) => c,
                Err(e) => {
                    failed += 1;
                    let _ = writeln!(out, "FAIL {}: not a test case: {e}", file.display());
                    continue;
                }
            };
            let label = format!("{}: {}", file.display(), case.name);
            if !seen.insert(label.clone()) {
                let _ = writeln!(out, "note: duplicate case name {label}");
            }
            let mut failures = Vec::new();
            let mut record = None;
            for &reuse in modes {
                let mode = if reuse {
                    "reused instance"
                } else {
                    "fresh instance"
                };
                match run_case(&mut plugins, &file, &case, opts, reuse).await {
                    Err(e) => failures.push((mode, format!("  {e}\n"))),
                    Ok((intents, error)) if opts.update => record = Some((intents, error)),
                    Ok((intents, error)) => {
                        if let Some(report) = check(&case, &intents, &error) {
                            failures.push((mode, report));
                        }
                    }
                }
            }
            if let Some((intents, error)) = record {
                let mut c = case.clone();
                c.expect.intents = error.is_none().then_some(intents);
                c.expect.error = error;
                updated.push(c);
                passed += 1;
                let _ = writeln!(out, "updated {label}");
                continue;
            }
            if failures.is_empty() {
                passed += 1;
                let _ = writeln!(out, "ok   {label}");
            } else {
                failed += 1;
                let only_reused = both && failures.len() == 1 && failures[0].0 == "reused instance";
                for (mode, report) in &failures {
                    let why = if only_reused {
                        " (passes on a fresh instance: the plugin keeps state between calls)"
                    } else {
                        ""
                    };
                    let _ = write!(out, "FAIL {label} [{mode}]{why}\n{report}");
                }
            }
            updated.push(case);
        }
        if opts.update {
            let docs: Vec<String> = updated
                .iter()
                .filter_map(|c| serde_yaml_ng::to_string(c).ok())
                .collect();
            std::fs::write(&file, docs.join("---\n")).map_err(|source| Error::Io {
                context: format!("writing {}", file.display()),
                source,
            })?;
        }
    }
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    Ok((passed, failed))
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

    #[test]
    fn plural_guess_matches_resource_watches() {
        let refs = vec![ResourceRef::Resource(
            kubewasm::core::resource::ResourceArg::parse(
                "seldondeployments.v1.machinelearning.seldon.io",
            )
            .unwrap(),
        )];
        assert!(allows(
            &refs,
            "machinelearning.seldon.io/v1",
            "SeldonDeployment"
        ));
        assert!(!allows(
            &refs,
            "machinelearning.seldon.io/v2",
            "SeldonDeployment"
        ));
    }
}
