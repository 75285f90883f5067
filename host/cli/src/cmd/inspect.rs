//! `kubewasm inspect`: what a plugin file is, without a cluster.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use kubewasm::core::manifest::Manifest;
use kubewasm::core::resource::ResourceRef;
use kubewasm::runtime::plugin::compile;
use kubewasm::runtime::{Error, LoadOptions, PluginEngine, load_plugin};
use serde_json::{Value, json};

/// Flags of `kubewasm inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The plugin file.
    file: PathBuf,
}

/// `kubewasm inspect`: print the plugin's world and manifest as YAML; exit 1 when it
/// cannot be loaded.
pub async fn command(args: InspectArgs) -> Result<()> {
    let out = inspect(&args.file).await?;
    print!("{}", serde_yaml_ng::to_string(&out)?);
    if out.get("error").is_some() {
        std::process::exit(1);
    }
    Ok(())
}

/// The component's imports and exports (its WIT world), and its manifest when it
/// implements the kubewasm world. A component of another world still gets its
/// world printed, with the reason it cannot be loaded.
async fn inspect(path: &Path) -> Result<Value, Error> {
    let engine = PluginEngine::new()?;
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let size = bytes.len();
    let component = compile(&engine, path, bytes).await?;
    let ty = component.component_type();
    let imports: Vec<&str> = ty.imports(engine.engine()).map(|(n, _)| n).collect();
    let exports: Vec<&str> = ty.exports(engine.engine()).map(|(n, _)| n).collect();
    let mut out = json!({
        "file": path.display().to_string(),
        "size": size,
        "world": { "imports": imports, "exports": exports },
    });
    match load_plugin(&engine, path, &LoadOptions::default()).await {
        Ok(p) => {
            out["digest"] = json!(p.digest);
            out["settings"] = match &p.settings {
                Some(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                None => Value::Null,
            };
            out["manifest"] = manifest_json(&p.manifest);
            out["fieldManager"] = json!(p.manifest.field_manager());
        }
        Err(e) => out["error"] = json!(e.to_string()),
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
            v
        }).collect::<Vec<_>>(),
        "grants": m.grants.iter().map(|g| json!({
            "apiGroups": g.api_groups,
            "kinds": g.kinds,
            "namespaces": g.namespaces,
            "verbs": g.verbs.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            "allowForce": g.allow_force,
        })).collect::<Vec<_>>(),
        "reads": m.reads.iter().map(resource_json).collect::<Vec<_>>(),
    })
}
