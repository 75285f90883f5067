//! `kubewasm inspect`: what a plugin file is, without a cluster: its world, its manifest,
//! what it asks for (in the spelling of a Plugin object's `spec.permissions`) and, with
//! `--approvals`, what the operator approved and the verdict `run` would give.
//! `--approval` prints the Plugin object approving exactly what it asks for (`kubewasm
//! approve` prints the same with its RBAC).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use kubewasm::core::grant::check_approval;
use kubewasm::core::manifest::Manifest;
use kubewasm::core::plugin_object::{self, Permissions};
use kubewasm::core::resource::ResourceRef;
use kubewasm::runtime::Approvals;
use kubewasm::runtime::{Error, PluginFile};
use serde_json::{Value, json};

use super::usercache::CodeCache;

/// Flags of `kubewasm inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The plugin file.
    file: PathBuf,
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR", help = super::usercache::CACHE_DIR_HELP)]
    cache_dir: Option<PathBuf>,
    /// Print only the Plugin object (kubewasm.dev/v1alpha1, without spec.module) that
    /// approves exactly what the plugin asks for: a directory-mode approval for
    /// --approvals. `kubewasm approve` prints it with its RBAC and a module.
    #[arg(long, conflicts_with = "approvals")]
    approval: bool,
    /// The operator's approvals (as `kubewasm run --approvals` takes them): show what they
    /// approve for this plugin, and whether `run` would load it.
    #[arg(long, value_name = "PATH")]
    approvals: Option<PathBuf>,
    /// Longest time compiling the plugin may take (in a worker process, as `run`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    compile_timeout: Duration,
}

/// A Plugin object approving `requested` for plugin `name` (no module: directory mode).
fn approval_object(name: &str, requested: &Value) -> Value {
    json!({
        "apiVersion": plugin_object::API_VERSION,
        "kind": plugin_object::KIND,
        "metadata": {"name": name},
        "spec": {"permissions": requested},
    })
}

/// `kubewasm inspect`: print the plugin's world and manifest as YAML; exit 1 when it
/// cannot be loaded.
pub async fn command(args: InspectArgs) -> Result<()> {
    let cache = super::usercache::CodeCache::choose(args.cache_dir);
    let approvals = args.approvals.as_deref().map(Approvals::read).transpose()?;
    let out = inspect(&args.file, &cache, approvals.as_ref(), args.compile_timeout).await?;
    let name = out
        .pointer("/manifest/name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| PluginFile::name_of(&args.file));
    if args.approval && out.get("manifest").is_some() {
        let block = approval_object(&name, &out["requested"]);
        println!(
            "# What {} asks for, approved: review it, then add it to the file or directory \
             given to --approvals\n# (`kubewasm approve` prints it for a cluster, with its RBAC).",
            args.file.display()
        );
        print!("{}", serde_yaml_ng::to_string(&block)?);
        return Ok(());
    }
    // Settings the plugin refuses (leftovers of an older version) must not hide what it
    // asks for: print that, as described without settings, with the error beside it.
    if args.approval
        && let Some(requested) = out.pointer("/withoutSettings/requested")
    {
        let error = out["error"].as_str().unwrap_or_default();
        eprintln!("error: {error}");
        let block = approval_object(&name, requested);
        println!(
            "# What {} asks for when described WITHOUT settings: its settings are invalid:",
            args.file.display()
        );
        for line in error.lines() {
            println!("#   {line}");
        }
        println!("# Fix them, then run this again: what it asks for may depend on them.");
        print!("{}", serde_yaml_ng::to_string(&block)?);
        std::process::exit(1);
    }
    print!("{}", serde_yaml_ng::to_string(&out)?);
    if out.get("error").is_some() {
        std::process::exit(1);
    }
    Ok(())
}

/// What each import and export of a component means to kubewasm.
fn explain(name: &str, import: bool) -> &'static str {
    match name {
        n if n.starts_with("kubewasm:plugin/handler") => {
            "the plugin's handler: describe (its manifest) and handle (one event), what the host calls"
        }
        n if n.starts_with("kubewasm:plugin/host") => {
            "the host's functions: log, and get/list from the host's caches of what the plugin watches or reads"
        }
        n if n.starts_with("kubewasm:plugin/types") => "the contract's data types",
        n if n.starts_with("wasi:") && import => {
            "WASI, which this language's toolchain imports: linked with an empty context (no files, environment or network; argv[0] is the plugin's name; stderr only reaches the error of a trap), so its calls fail as on an empty system"
        }
        _ if import => "not provided by kubewasm: the component does not link",
        _ => "not used by kubewasm (the toolchain's own export)",
    }
}

/// The component's imports and exports (its WIT world, each explained), and its manifest
/// when it implements the kubewasm world. A component of another world still gets its
/// world printed, with the reason it cannot be loaded.
async fn inspect(
    path: &Path,
    cache: &CodeCache,
    approvals: Option<&Approvals>,
    compile_timeout: Duration,
) -> Result<Value, Error> {
    // The operator inspects plugins others wrote: compiled in a worker, as `run` does.
    let loader = cache.loader(compile_timeout)?;
    let engine = loader.engine().clone();
    let mut file = PluginFile::read(path)?;
    let size = file.bytes.len();
    let (component, source) = {
        let compiling = loader.component(&mut file);
        tokio::pin!(compiling);
        tokio::select! {
            done = &mut compiling => done?,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                // Big components (Python, JavaScript) take seconds: say what is happening.
                // Entries written under a per-process key never verify in the next
                // process: only a key file makes the on-disk cache serve the next run.
                let hint = match (cache.dir.is_some(), cache.persistent()) {
                    (true, true) => "; the cache makes the next run fast",
                    (true, false) => {
                        "; without KUBEWASM_CACHE_KEY_FILE the cache serves this run only"
                    }
                    (false, _) => {
                        "; --cache-dir with KUBEWASM_CACHE_KEY_FILE makes the next run fast"
                    }
                };
                eprintln!(
                    "compiling {} ({} KiB) to native code{hint}...",
                    path.display(),
                    size >> 10,
                );
                compiling.await?
            }
        }
    };
    tracing::info!(file = %path.display(), how = source.as_str(), "component ready");
    let ty = component.component_type();
    let world = |names: Vec<&str>, import: bool| -> Vec<Value> {
        names
            .into_iter()
            .map(|n| json!({"name": n, "means": explain(n, import)}))
            .collect()
    };
    let imports: Vec<&str> = ty.imports(engine.engine()).map(|(n, _)| n).collect();
    let exports: Vec<&str> = ty.exports(engine.engine()).map(|(n, _)| n).collect();
    let mut out = json!({
        "file": path.display().to_string(),
        "size": size,
        "world": { "imports": world(imports, true), "exports": world(exports, false) },
    });
    let settings = file.settings.is_some();
    match loader.load(file).await {
        Ok(loaded) => {
            let p = loaded.plugin;
            // What the plugin asks for, what the operator approved, and the verdict `run`
            // would give.
            out["requested"] = json!(Permissions::requested_by(&p.manifest));
            if let Some(approvals) = approvals {
                let approved = approvals.get(p.name());
                out["approved"] = match approved {
                    Some(a) => json!(Permissions::from_approval(a)),
                    None => Value::Null,
                };
                out["approval"] = match (approvals.problem(p.name()), approved) {
                    (Some(problem), _) => {
                        json!(format!("refused: its approval is unusable: {problem}"))
                    }
                    (None, approved) => match check_approval(&p.manifest, approved) {
                        Ok(()) => json!("ok: everything requested is approved"),
                        Err(e) => json!(format!("refused: {e}")),
                    },
                };
            }
            out["digest"] = json!(p.digest);
            out["settings"] = match &p.settings {
                Some(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                None => Value::Null,
            };
            out["manifest"] = manifest_json(&p.manifest);
            out["fieldManager"] = json!(p.manifest.field_manager());
        }
        Err(e) => {
            out["error"] = json!(e.to_string());
            // Refused by describe with settings: what it asks for without them.
            if settings && matches!(e, Error::Manifest { .. }) {
                let mut bare = PluginFile::read(path)?;
                bare.settings = None;
                if let Ok(loaded) = loader.load(bare).await {
                    let m = &loaded.plugin.manifest;
                    out["withoutSettings"] = json!({
                        "requested": Permissions::requested_by(m),
                    });
                }
            }
        }
    }
    Ok(out)
}

fn resource_json(r: &ResourceRef) -> Value {
    match r {
        ResourceRef::Kind(t) => json!({"apiVersion": t.api_version, "kind": t.kind}),
        ResourceRef::Resource(a) => json!({"resource": a.to_string()}),
    }
}

/// A manifest as JSON, for `inspect` and logs.
fn manifest_json(m: &Manifest) -> Value {
    json!({
        "name": m.name,
        "version": m.version,
        "watches": m.watches.iter().map(|w| {
            let mut v = json!({"id": w.id, "resource": resource_json(&w.resource)});
            if let Some(ns) = &w.namespace { v["namespace"] = json!(ns); }
            if let Some(s) = &w.label_selector { v["labelSelector"] = json!(s.to_string()); }
            if let Some(s) = &w.field_selector { v["fieldSelector"] = json!(s.to_string()); }
            if !w.fields.is_whole() { v["fields"] = json!(w.fields.paths()); }
            v
        }).collect::<Vec<_>>(),
        "grants": m.grants.iter().map(|g| json!({
            "apiGroups": g.api_groups,
            "kinds": g.kinds,
            "namespaces": g.namespaces,
            "verbs": g.verbs.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            "allowForce": g.allow_force,
        })).collect::<Vec<_>>(),
        "reads": m.reads.iter().map(|r| {
            let mut v = resource_json(&r.resource);
            if !r.fields.is_whole() { v["fields"] = json!(r.fields.paths()); }
            v
        }).collect::<Vec<_>>(),
    })
}
