//! Running test cases offline (`kubewasm test`), through the call path of `run`: the
//! plugin loaded and bounded by the operator's approval as `run` loads it
//! ([`Loader::load_approved_as`]; without one, by what it asks for), its reads answered by the scoped view `run` gives it
//! ([`PluginView`], over caches filled with the case's `cluster:` objects), and its
//! intents admitted by the same pipeline (`kubewasm_core::admit::admit`, with kinds
//! resolved offline). So a case passes exactly when `run` would apply its intents.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::api::DynamicObject;
use kubewasm_core::admit::{self, Trigger};
use kubewasm_core::event::EventType;
use kubewasm_core::kind::{self, KindInfo, ResolveError, Resolver};
use kubewasm_core::manifest::{Manifest, Watch};
use kubewasm_core::resource::{ResourceArg, ResourceRef, TypeRef};
use kubewasm_runtime::approval::Approvals;
use kubewasm_runtime::plugin::InstancePolicy;
use kubewasm_runtime::{
    CallError, CompiledPlugin, LoadOptions, Loader, PluginEngine, PluginEvent, PluginFile,
    ReadScope,
};
use serde_json::{Value, json};

use super::format::{self, TestCase, intent_json, show_owner_references};
use crate::Error;
use crate::apply::manifests::files_with_extensions;
use crate::watch::cache::{CachedObject, Caches, PluginView, ResourceCache};

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

/// Offline kind resolution for a case: a CustomResourceDefinition among the case's
/// `cluster:` objects gives the kind's real plural and scope, as discovery would on a
/// cluster; anything else is [`kind::guess`]ed.
struct FixtureResolver<'a> {
    objects: &'a [Value],
}

impl FixtureResolver<'_> {
    /// The CRDs among the case's objects, with their spec.
    fn crds(&self) -> impl Iterator<Item = &Value> {
        self.objects
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .filter_map(|o| o.get("spec"))
    }

    /// The kind of a CRD's `spec` in one of its versions (the first served, when `version`
    /// is None).
    fn crd_info(spec: &Value, version: Option<&str>) -> Option<KindInfo> {
        let v = spec["versions"]
            .as_array()?
            .iter()
            .find(|v| match version {
                Some(want) => v["name"].as_str() == Some(want),
                None => v["served"].as_bool() != Some(false),
            })?;
        Some(KindInfo {
            group: spec["group"].as_str()?.to_string(),
            version: v["name"].as_str()?.to_string(),
            kind: spec.pointer("/names/kind")?.as_str()?.to_string(),
            plural: spec.pointer("/names/plural")?.as_str()?.to_string(),
            namespaced: spec["scope"].as_str() != Some("Cluster"),
            has_status: v.pointer("/subresources/status").is_some(),
            guessed: false,
        })
    }

    fn crd_kind(&self, t: &TypeRef) -> Option<KindInfo> {
        self.crds()
            .filter(|spec| {
                spec["group"].as_str() == Some(t.group())
                    && spec.pointer("/names/kind").and_then(Value::as_str) == Some(&t.kind)
            })
            .find_map(|spec| Self::crd_info(spec, Some(t.version())))
    }

    /// A kind as discovery would resolve it: the case's CRD, or the offline guess.
    fn kind(&self, t: &TypeRef) -> KindInfo {
        self.crd_kind(t)
            .unwrap_or_else(|| kind::guess(&ResourceRef::Kind(t.clone())))
    }

    /// The kind a resource argument names, when known offline: from the case's CRD or the
    /// built-in table.
    fn resource_kind(&self, arg: &ResourceArg) -> Option<KindInfo> {
        let crd = self
            .crds()
            .filter(|spec| {
                spec["group"].as_str() == Some(arg.group.as_str())
                    && spec.pointer("/names/plural").and_then(Value::as_str)
                        == Some(arg.plural.as_str())
            })
            .find_map(|spec| Self::crd_info(spec, arg.version.as_deref()));
        crd.or_else(|| {
            let k = kind::guess(&ResourceRef::Resource(arg.clone()));
            (!k.guessed).then_some(k)
        })
    }
}

impl Resolver for FixtureResolver<'_> {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        Ok(self.kind(t))
    }
}

/// The case's `cluster:` objects as `run`'s watch caches would hold them: one cache per
/// kind (resolved as admission resolves it), and an empty one for every kind the plugin
/// may read. The plugin reads them through [`PluginView`], and admission checks owner
/// references against them, as in `run`.
struct Fixture {
    caches: Arc<Caches>,
    /// The kinds the plugin may read, resolved offline.
    readable: HashSet<TypeRef>,
}

impl Fixture {
    fn new(
        case: &TestCase,
        manifest: &Manifest,
        resolver: &FixtureResolver,
    ) -> Result<Self, String> {
        let caches = Arc::new(Caches::default());
        let cache = |t: &TypeRef| -> Arc<ResourceCache> {
            caches.get(t).unwrap_or_else(|| {
                let k = resolver.kind(t);
                let c = Arc::new(ResourceCache::new(k.key(), t.clone(), k.namespaced));
                caches.insert(c.clone());
                c
            })
        };
        for (i, o) in case.cluster.iter().enumerate() {
            let mut object: DynamicObject = serde_json::from_value(o.clone())
                .map_err(|e| format!("cluster object #{i}: {e}"))?;
            let Some(types) = &object.types else {
                return Err(format!(
                    "cluster object #{i}: apiVersion and kind are required"
                ));
            };
            let c = cache(&TypeRef::new(&types.api_version, &types.kind));
            if !c.namespaced {
                // The API server has no namespace for it; neither do `run`'s caches.
                object.metadata.namespace = None;
            }
            c.insert(CachedObject::new(object));
        }
        let readable = Self::readable(case, manifest, resolver);
        for t in &readable {
            cache(t);
        }
        Ok(Fixture { caches, readable })
    }

    /// The kinds of the plugin's watches and reads, resolved offline. A resource argument
    /// whose kind neither a CRD of the case nor the built-in table gives names the kinds
    /// of the case's objects its guessed plural matches.
    fn readable(
        case: &TestCase,
        manifest: &Manifest,
        resolver: &FixtureResolver,
    ) -> HashSet<TypeRef> {
        let present: HashSet<TypeRef> = case
            .cluster
            .iter()
            .chain([&case.event.object])
            .chain(&case.event.old_object)
            .filter_map(|o| Some(TypeRef::new(o["apiVersion"].as_str()?, o["kind"].as_str()?)))
            .collect();
        manifest
            .read_resources()
            .flat_map(|r| match r {
                ResourceRef::Kind(t) => vec![t.clone()],
                ResourceRef::Resource(arg) => match resolver.resource_kind(arg) {
                    Some(k) => vec![k.type_ref()],
                    None => present
                        .iter()
                        .filter(|t| kind::resource_names_kind(arg, t))
                        .cloned()
                        .collect(),
                },
            })
            .collect()
    }

    /// The view `run` gives the plugin: its readable kinds, in its read scope, within its
    /// memory cap.
    fn view(&self, plugin: &CompiledPlugin) -> Arc<PluginView> {
        Arc::new(PluginView::new(
            self.caches.clone(),
            self.readable.clone(),
            ReadScope::of(&plugin.manifest),
            plugin.limits.memory,
        ))
    }
}

/// Loads the plugins of the cases as `run` loads them ([`Loader::load_approved_as`]):
/// compiled once (and through the code cache); a fresh `CompiledPlugin` per case for
/// fresh instances, one per plugin file and settings, kept for the whole run, for the
/// reused instance.
struct Plugins {
    loader: Loader,
    /// `--approvals`, read once.
    approvals: Option<Approvals>,
    reused: HashMap<(PathBuf, String), Arc<CompiledPlugin>>,
}

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
    ) -> Result<Arc<CompiledPlugin>, Error> {
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
        let plugin = Arc::new(loaded.plugin);
        if reuse {
            self.reused.insert(key, plugin.clone());
        }
        Ok(plugin)
    }
}

/// What came out of one case: the intents as cases write them, and the error (the
/// plugin's, or admission's refusal of the call).
type Outcome = (Vec<Value>, Option<String>);

async fn run_case(
    plugins: &mut Plugins,
    file: &Path,
    case: &TestCase,
    opts: &RunOptions,
    reuse: bool,
    watch: &mut Option<String>,
) -> Result<Outcome, String> {
    let plugin_path = match (&opts.plugin, &case.plugin) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => file.parent().unwrap_or(Path::new(".")).join(p),
        (None, None) => return Err("no plugin: give `plugin:` in the case or --plugin".into()),
    };
    // Worded as `run` logs a plugin it does not load.
    let plugin = plugins
        .get(&plugin_path, file, case, reuse)
        .await
        .map_err(|e| format!("plugin rejected: {e}"))?;
    let m = &plugin.manifest;
    let resolver = FixtureResolver {
        objects: &case.cluster,
    };
    let watch_id = match &case.event.watch {
        Some(id) => id.clone(),
        None => infer_watch(m, &case.event.object, &resolver)?,
    };
    if m.watch(&watch_id).is_none() {
        return Err(format!(
            "watch {watch_id:?} is not in the manifest of {} (its watches: {})",
            m.name,
            watches_list(m.watches.iter())
        ));
    }
    *watch = Some(watch_id.clone());
    let event_type = &case.event.event_type;
    let event = PluginEvent {
        event_type: EventType::parse(event_type)
            .ok_or_else(|| format!("unknown event type {event_type:?}"))?,
        watch_id,
        object: case.event.object.to_string().into(),
        old_object: case.event.old_object.as_ref().map(|o| o.to_string().into()),
    };
    let fixture = Fixture::new(case, m, &resolver)?;
    let trigger = Trigger::from_json(&case.event.object);
    let label = trigger.describe();
    match plugin.handle(&event, &label, fixture.view(&plugin)).await {
        Ok(raw) => {
            let mut intents: Vec<Value> = raw.iter().map(intent_json).collect();
            let admitted = admit::admit(
                m,
                raw,
                plugin.limits.max_intent_bytes,
                &trigger,
                &resolver,
                fixture.caches.as_ref(),
            )
            .await;
            match admitted.and_then(|prepared| {
                check_adoptions(m, &prepared, &case.cluster)?;
                Ok(prepared)
            }) {
                Ok(prepared) => {
                    show_owner_references(&mut intents, &prepared);
                    Ok((intents, None))
                }
                Err(refused) => Ok((intents, Some(refused.to_string()))),
            }
        }
        Err(CallError::Plugin { message, retry }) => Ok((
            vec![],
            Some(format!("plugin error (retry: {retry}): {message}")),
        )),
        Err(e) => Ok((vec![], Some(e.to_string()))),
    }
}

/// What `run` checks against the cluster before a create that writes owner references
/// where the plugin may not delete ([`admit::check_adoption`]), checked here against the
/// case's `cluster:` objects: one of them that the create would adopt refuses the call.
fn check_adoptions(
    manifest: &Manifest,
    prepared: &[admit::Prepared],
    cluster: &[Value],
) -> Result<(), admit::Rejection> {
    for (index, p) in prepared.iter().enumerate() {
        if !admit::adoption_matters(manifest, p) {
            continue;
        }
        let Some(live) = cluster.iter().find(|o| is_target(o, p)) else {
            continue;
        };
        admit::check_adoption(manifest, p, live).map_err(|e| admit::Rejection {
            index,
            error: e.into(),
        })?;
    }
    Ok(())
}

/// Whether a case's object is the object `p` writes.
fn is_target(o: &Value, p: &admit::Prepared) -> bool {
    let text = |ptr: &str| o.pointer(ptr).and_then(Value::as_str);
    let t = TypeRef::new(
        text("/apiVersion").unwrap_or(""),
        text("/kind").unwrap_or(""),
    );
    t.group() == p.kind.group
        && t.kind == p.kind.kind
        && text("/metadata/name") == Some(p.intent.target.name.as_str())
        && (!p.kind.namespaced || text("/metadata/namespace") == p.namespace.as_deref())
}

/// Watches as an error names them: `id (what it watches)`.
fn watches_list<'a>(watches: impl Iterator<Item = &'a Watch>) -> String {
    let shown: Vec<String> = watches
        .map(|w| format!("{} ({})", w.id, w.resource))
        .collect();
    match shown.is_empty() {
        true => "none".into(),
        false => shown.join(", "),
    }
}

/// Whether a watch on `r` delivers objects of kind `t`, judged offline: a kind by its
/// apiVersion and kind, a resource argument by the kind the case's CRD or the built-in
/// table gives it, else by its guessed plural.
fn watch_delivers(r: &ResourceRef, t: &TypeRef, resolver: &FixtureResolver) -> bool {
    match r {
        ResourceRef::Kind(w) => w == t,
        ResourceRef::Resource(arg) => match resolver.resource_kind(arg) {
            Some(k) => {
                k.group == t.group()
                    && k.kind == t.kind
                    && arg.version.as_deref().is_none_or(|v| v == t.version())
            }
            None => kind::resource_names_kind(arg, t),
        },
    }
}

/// The watch a case without `watch:` is delivered to: the one watch whose resource is the
/// object's kind. Delivering it to another watch would show the plugin an event `run`
/// never sends (a Certificate as an Ingress event), so anything but exactly one match is
/// an error naming the candidates.
fn infer_watch(m: &Manifest, object: &Value, resolver: &FixtureResolver) -> Result<String, String> {
    let api_version = object["apiVersion"].as_str();
    let object_kind = object["kind"].as_str();
    let (Some(api_version), Some(object_kind)) = (api_version, object_kind) else {
        // Nothing to contradict: a lone watch is the one.
        return match m.watches.as_slice() {
            [w] => Ok(w.id.clone()),
            _ => Err(format!(
                "the event's object has no apiVersion and kind to pick a watch by: give \
                 `event.watch:` (the watches of {}: {})",
                m.name,
                watches_list(m.watches.iter())
            )),
        };
    };
    let t = TypeRef::new(api_version, object_kind);
    let matching: Vec<&Watch> = m
        .watches
        .iter()
        .filter(|w| watch_delivers(&w.resource, &t, resolver))
        .collect();
    match matching.as_slice() {
        [w] => Ok(w.id.clone()),
        [] => Err(format!(
            "the event's object ({t}) is of no kind {} watches: fix its apiVersion/kind or \
             give `event.watch:` (its watches: {})",
            m.name,
            watches_list(m.watches.iter())
        )),
        several => Err(format!(
            "the event's object ({t}) matches several watches of {}: give `event.watch:` \
             (one of {})",
            m.name,
            watches_list(several.iter().copied())
        )),
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

/// What is wrong with a case's outcome, as report lines; None when it passes.
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
    // --update records one output: the first mode's.
    let modes = match opts.update {
        true => &opts.instances.modes()[..1],
        false => opts.instances.modes(),
    };
    let both = modes.len() > 1;
    let mut report = Report::default();
    let out = &mut report.text;
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
                // Every failure names the watch the event went to.
                let mut watch = None;
                let outcome = run_case(&mut plugins, &file, &case, opts, reuse, &mut watch).await;
                let mode = match &watch {
                    Some(w) => format!("{mode}, watch {w}"),
                    None => mode.to_string(),
                };
                match outcome {
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
                report.passed += 1;
                let _ = writeln!(out, "updated {label}");
                continue;
            }
            if failures.is_empty() {
                report.passed += 1;
                let _ = writeln!(out, "ok   {label}");
            } else {
                report.failed += 1;
                let only_reused =
                    both && failures.len() == 1 && failures[0].0.starts_with("reused instance");
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
            std::fs::write(&file, format::to_yaml(&updated)).map_err(|source| Error::Io {
                context: format!("writing {}", file.display()),
                source,
            })?;
        }
    }
    let _ = writeln!(out, "{} passed, {} failed", report.passed, report.failed);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::{ClusterView, ListLimit, ReadError};

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

    fn case(cluster: Value, object: Value) -> TestCase {
        serde_json::from_value(json!({
            "name": "c", "cluster": cluster,
            "event": {"type": "added", "object": object},
            "expect": {"intents": []},
        }))
        .unwrap()
    }

    fn manifest(watch: ResourceRef, reads: Vec<ResourceRef>, namespace: Option<&str>) -> Manifest {
        Manifest {
            name: "p".into(),
            version: "1".into(),
            watches: vec![kubewasm_core::manifest::Watch {
                id: "w".into(),
                resource: watch,
                namespace: namespace.map(str::to_string),
                label_selector: None,
                field_selector: None,
            }],
            grants: vec![],
            reads,
        }
    }

    /// A case without `watch:` goes to the one watch of its object's kind (a kind or a
    /// resource argument); none or several matching is an error naming the candidates.
    #[test]
    fn the_watch_is_inferred_from_the_object_s_kind() {
        let watch = |id: &str, resource: ResourceRef| kubewasm_core::manifest::Watch {
            id: id.into(),
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
        };
        let kind = |av: &str, k: &str| ResourceRef::Kind(TypeRef::new(av, k));
        let arg = |s: &str| ResourceRef::Resource(ResourceArg::parse(s).unwrap());
        let mut m = manifest(kind("networking.k8s.io/v1", "Ingress"), vec![], None);
        m.watches[0].id = "ingresses".into();
        m.watches
            .push(watch("certs", arg("certificates.cert-manager.io")));
        m.watches.push(watch("cms", kind("v1", "ConfigMap")));
        m.watches.push(watch("cms-too", arg("configmaps")));
        let r = FixtureResolver { objects: &[] };
        let obj =
            |av: &str, k: &str| json!({"apiVersion": av, "kind": k, "metadata": {"name": "x"}});

        let got = infer_watch(&m, &obj("cert-manager.io/v1", "Certificate"), &r);
        assert_eq!(got.as_deref(), Ok("certs"));
        let got = infer_watch(&m, &obj("networking.k8s.io/v1", "Ingress"), &r);
        assert_eq!(got.as_deref(), Ok("ingresses"));

        let err = infer_watch(&m, &obj("v1", "ConfigMap"), &r).unwrap_err();
        assert!(err.contains("matches several watches"), "{err}");
        assert!(
            err.contains("cms (v1/ConfigMap), cms-too (configmaps)"),
            "{err}"
        );
        assert!(!err.contains("ingresses"), "{err}");

        let err = infer_watch(&m, &obj("v1", "Secret"), &r).unwrap_err();
        assert!(err.contains("(v1/Secret) is of no kind p watches"), "{err}");
        assert!(
            err.contains("ingresses (networking.k8s.io/v1/Ingress)"),
            "{err}"
        );

        let err = infer_watch(&m, &json!({}), &r).unwrap_err();
        assert!(err.contains("no apiVersion and kind"), "{err}");
        // A lone watch takes an object that names no kind.
        let one = manifest(kind("v1", "ConfigMap"), vec![], None);
        assert_eq!(infer_watch(&one, &json!({}), &r).as_deref(), Ok("w"));
    }

    const LIMIT: ListLimit = ListLimit {
        items: 100,
        bytes: 1 << 20,
    };

    /// A resource argument's kind comes from the case's CRD, the built-in table, or the
    /// kinds of the case's objects its plural names; the guess matches one version only.
    #[test]
    fn resource_watches_name_their_kinds_offline() {
        let sd = json!({"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
                        "metadata": {"name": "m", "namespace": "a"}});
        let c = case(json!([]), sd);
        let r = FixtureResolver {
            objects: &c.cluster,
        };
        let arg = |s: &str| ResourceRef::Resource(ResourceArg::parse(s).unwrap());
        let readable =
            |w: &str| Fixture::readable(&c, &manifest(arg(w), vec![arg("secrets")], None), &r);
        let got = readable("seldondeployments.v1.machinelearning.seldon.io");
        assert!(got.contains(&TypeRef::new(
            "machinelearning.seldon.io/v1",
            "SeldonDeployment"
        )));
        assert!(got.contains(&TypeRef::new("v1", "Secret")), "{got:?}");
        let got = readable("seldondeployments.v2.machinelearning.seldon.io");
        assert_eq!(got, [TypeRef::new("v1", "Secret")].into());

        // A CRD in the case gives the real plural (MongoDB's is `mongodb`) and scope.
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "mongodb.mongodb.com"},
            "spec": {"group": "mongodb.com", "scope": "Namespaced",
                     "names": {"kind": "MongoDB", "plural": "mongodb"},
                     "versions": [{"name": "v1", "served": true, "subresources": {"status": {}}}]}});
        let c = case(json!([crd]), json!({}));
        let r = FixtureResolver {
            objects: &c.cluster,
        };
        let got = Fixture::readable(&c, &manifest(arg("mongodb.mongodb.com"), vec![], None), &r);
        assert_eq!(got, [TypeRef::new("mongodb.com/v1", "MongoDB")].into());
        assert_eq!(
            r.kind(&TypeRef::new("mongodb.com/v1", "MongoDB")).plural,
            "mongodb"
        );
    }

    /// The case's objects are read through `run`'s view: readable kinds only, in the
    /// watches' namespaces, by label selector, an allowed kind with no object answering
    /// empty.
    #[test]
    fn the_case_s_cluster_is_read_through_the_plugin_s_view() {
        let cm = |ns: &str, name: &str, app: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": ns, "labels": {"app": app}}})
        };
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "s", "namespace": "a", "uid": "u-s"}});
        let node = json!({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": "n1", "namespace": "stray"}});
        let c = case(
            json!([
                cm("a", "two", "x"),
                cm("a", "one", "y"),
                cm("b", "three", "x"),
                secret,
                node
            ]),
            cm("a", "trigger", "x"),
        );
        let r = FixtureResolver {
            objects: &c.cluster,
        };
        let kind = |av: &str, k: &str| ResourceRef::Kind(TypeRef::new(av, k));
        let m = manifest(
            kind("v1", "ConfigMap"),
            vec![kind("v1", "Node"), kind("v1", "Pod")],
            Some("a"),
        );
        let f = Fixture::new(&c, &m, &r).unwrap();
        let view = PluginView::new(
            f.caches.clone(),
            f.readable.clone(),
            ReadScope::of(&m),
            1 << 20,
        );
        let names = |listed: Vec<String>| -> Vec<String> {
            listed
                .iter()
                .map(|o| serde_json::from_str::<Value>(o).unwrap()["metadata"]["name"].to_string())
                .collect()
        };
        // Sorted by key, as `run`'s caches answer.
        assert_eq!(
            names(
                view.list("v1", "ConfigMap", Some("a"), None, LIMIT)
                    .unwrap()
            ),
            ["\"one\"", "\"two\""]
        );
        assert_eq!(
            names(
                view.list("v1", "ConfigMap", Some("a"), Some("app=x"), LIMIT)
                    .unwrap()
            ),
            ["\"two\""]
        );
        assert!(matches!(
            view.get("v1", "ConfigMap", Some("b"), "three"),
            Err(ReadError::OutsideScope { .. })
        ));
        assert!(matches!(
            view.get("v1", "Secret", Some("a"), "s"),
            Err(ReadError::NotAllowed(_))
        ));
        // Cluster-scoped: found without a namespace, whatever the case wrote.
        assert!(view.get("v1", "Node", None, "n1").unwrap().is_some());
        assert_eq!(
            view.list("v1", "Pod", Some("a"), None, LIMIT).unwrap(),
            Vec::<String>::new()
        );
        // Owners are checked against the same objects, readable or not.
        let k = r.kind(&TypeRef::new("v1", "Secret"));
        assert_eq!(
            admit::Owners::uid(f.caches.as_ref(), &k, Some("a"), "s").as_deref(),
            Some("u-s")
        );

        let bad = case(json!([{"metadata": {"name": "x"}}]), json!({}));
        let err = Fixture::new(&bad, &m, &r).err().unwrap();
        assert!(err.contains("cluster object #0"), "{err}");
    }
}
