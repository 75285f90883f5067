//! `kubewasm approve FILE.wasm --module oci://…`: one reviewed YAML per plugin. Prints, as
//! one YAML stream, the Plugin object (`kubewasm.dev/v1alpha1`) whose `spec.permissions`
//! approve exactly what the plugin asks for (its `describe()` answer, with its settings),
//! then its RBAC, derived from those permissions by the code `kubewasm rbac` uses: the
//! plugin's ServiceAccount, its roles and bindings (its grants, and get/list/watch where
//! the permissions let it read: the host checks that account before it loads the plugin),
//! and the host's roles for it
//! (`kubewasm:<plugin>`: its reads, Events, the Lease and `impersonate` on the plugin's
//! ServiceAccount), which add up when several plugins' YAMLs are applied.
//!
//! Without `--module` the object has no `spec.module`: it is then a directory-mode
//! approval (`kubewasm run --plugins DIR --approvals FILE`), not an object for a cluster
//! (the CRD requires the module); a comment says so.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use kubewasm::core::plugin_object::{self, Permissions, PluginObject, PluginSpec};
use kubewasm::runtime::PluginFile;

use super::rbac::{RbacFlags, render};
use super::usercache::CodeCache;

/// Flags of `kubewasm approve`.
#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// The plugin file.
    file: PathBuf,
    /// Where a cluster pulls the component from: `oci://HOST[:PORT]/REPO@sha256:…` (as
    /// `kubewasm push` prints it; recommended) or `oci://…:TAG`. Without it spec.module is
    /// left out, and the object serves as a directory-mode approval (`--approvals`).
    #[arg(long, value_name = "oci://REF")]
    module: Option<String>,
    /// The plugin's settings (YAML or JSON): it is described with them, and they become
    /// spec.settings (their `kubewasm:` limits spec.limits). Default: the settings file
    /// beside the plugin, if any.
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR", help = super::usercache::CACHE_DIR_HELP)]
    cache_dir: Option<PathBuf>,
    /// Longest time compiling the plugin may take (in a worker process, as `run`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    compile_timeout: std::time::Duration,
    #[command(flatten)]
    rbac: RbacFlags,
}

/// `kubewasm approve`.
pub async fn command(args: ApproveArgs) -> Result<()> {
    if let Some(m) = &args.module
        && !m.starts_with("oci://")
    {
        bail!(
            "--module {m:?}: an OCI reference starts with oci:// (oci://HOST[:PORT]/REPO@sha256:…)"
        );
    }
    let loader = CodeCache::choose(args.cache_dir.clone()).loader(args.compile_timeout)?;
    let mut file = PluginFile::read(&args.file)?;
    if let Some(path) = &args.settings {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --settings {}", path.display()))?;
        let value: serde_json::Value = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("--settings {}: not YAML or JSON", path.display()))?;
        file.set_settings(&value, path)?;
    }
    let settings = file
        .settings
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()
        .context("the plugin's settings")?;
    let limits = (file.overrides != Default::default())
        .then(|| serde_json::to_value(&file.overrides))
        .transpose()?;
    let loaded = loader.load(file).await?;
    tracing::info!(file = %args.file.display(), how = loaded.source.as_str(), "component ready");
    let manifest = &loaded.plugin.manifest;
    let permissions = Permissions::requested_by(manifest);
    let object = PluginObject {
        api_version: plugin_object::API_VERSION.into(),
        kind: plugin_object::KIND.into(),
        metadata: serde_json::json!({"name": manifest.name}),
        spec: PluginSpec {
            module: args.module.clone(),
            settings,
            permissions: permissions.clone(),
            limits,
            pull_secret_ref: None,
            ..PluginSpec::default()
        },
        status: None,
    };
    // The RBAC derives from the approval, as for any Plugin object, not from the module.
    let approval = permissions
        .to_approval()
        .map_err(|e| anyhow::anyhow!("plugin {}: {e}", manifest.name))?;
    let rbac = render(&[(manifest.name.clone(), approval)], &args.rbac, true).await?;

    let mut out = format!(
        "# `kubewasm approve {}`: the Plugin object approving exactly what {} {} asks for,\n\
         # and its RBAC. Review both, then `kubectl apply -f` them.\n",
        args.file.display(),
        manifest.name,
        manifest.version
    );
    if args.module.is_none() {
        out.push_str(
            "# No --module: spec.module is left out, so this object is a directory-mode\n\
             # approval (kubewasm run/dev --plugins DIR --approvals FILE); a cluster needs\n\
             # spec.module: oci://HOST[:PORT]/REPO@sha256:... (`kubewasm push` prints it).\n",
        );
    }
    out.push_str("---\n");
    out.push_str(&serde_yaml_ng::to_string(&object)?);
    out.push_str(&rbac);
    print!("{out}");
    Ok(())
}
