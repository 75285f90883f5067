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
//! With `--namespace NS` it prints a team's plugin instead, all in NS: the
//! `NamespacedPlugin` (every watch, read and grant bound to NS; a cluster-scoped kind or
//! another namespace is an error naming it), its ServiceAccount `kubewasm-<plugin>`, Role
//! and RoleBinding `kubewasm-<plugin>` (its reads and grants), and Role and RoleBinding
//! `kubewasm-host-<plugin>` for the host's ServiceAccount (get/list/watch on what it
//! watches and reads, `impersonate` on its ServiceAccount, `get` on its `--pull-secret`).
//!
//! Without `--module` the object has no `spec.module`: it is then a directory-mode
//! approval (`kubewasm run --plugins DIR --approvals FILE`), not an object for a cluster
//! (the CRD requires the module); a comment says so.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use kubewasm::core::grant::Approval;
use kubewasm::core::manifest::Manifest;
use kubewasm::core::plugin_object::{
    self, LocalObjectReference, Permissions, PluginObject, PluginSpec,
};
use kubewasm::core::rbac;
use kubewasm::core::resource::ResourceRef;
use kubewasm::core::tenant;
use kubewasm::runtime::PluginFile;

use super::rbac::{RbacFlags, render};
use super::usercache::CodeCache;

/// Flags of `kubewasm approve`.
#[derive(Args, Debug)]
#[command(after_help = AFTER_HELP)]
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
    /// Print a team's NamespacedPlugin in this namespace and its RBAC, all in it (see
    /// `kubewasm approve --help`). Needs --module (a NamespacedPlugin has no directory
    /// mode); the host's own RBAC flags do not apply to it.
    #[arg(long, value_name = "NS", requires = "module", conflicts_with_all = [
        "no_impersonation", "no_plugin_objects", "allowed_pull_secret", "sharded",
        "metrics_secure", "take_over",
    ])]
    namespace: Option<String>,
    /// A `kubernetes.io/dockerconfigjson` Secret holding the registry's credentials, as
    /// spec.pullSecretRef: in the host's namespace for a Plugin (the host must run with
    /// `--allowed-pull-secret NAME`, and its Role gets `get` on it), in NS with
    /// --namespace (the host's Role there gets `get` on it, by name).
    #[arg(long, value_name = "NAME")]
    pull_secret: Option<String>,
    #[command(flatten)]
    rbac: RbacFlags,
}

/// `kubewasm approve --help`: what `--namespace` prints, and what a team needs to hold.
const AFTER_HELP: &str = "\
With --namespace NS (a team's plugin, for a host run with --tenant-registry), everything \
printed lives in NS: the NamespacedPlugin (kubewasm.dev/v1alpha1) with every watch, read \
and grant bound to NS (a cluster-scoped kind or another namespace is an error naming it; \
kinds are resolved through --kubeconfig's discovery, or guessed); ServiceAccount \
kubewasm-P; Role and RoleBinding kubewasm-P (the plugin's reads and grants); Role and \
RoleBinding kubewasm-host-P for the host's ServiceAccount (--service-account-namespace, \
--service-account): get/list/watch on what P watches and reads, impersonate on \
kubewasm-P, get on --pull-secret. To apply it a team needs, in NS: create on \
namespacedplugins, serviceaccounts, roles and rolebindings (the ClusterRole \
kubewasm-tenant that `kubewasm rbac --tenants` prints), and itself every right the Roles \
grant (the API server refuses a Role granting more than its author holds): \
get/list/watch and the plugin's write verbs on its kinds, impersonate on serviceaccounts \
and get on the pull secret, as `edit` holds them for built-in kinds (a CRD's kinds need a \
ClusterRole aggregated to edit, and update on <plural>/finalizers, which a plugin creating \
objects owned by its trigger needs, is not in edit).";

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
    if let Some(ns) = &args.namespace {
        return namespaced(&args, ns, manifest, settings, limits).await;
    }
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
            pull_secret_ref: pull_secret_ref(&args),
            ..PluginSpec::default()
        },
        status: None,
    };
    // The RBAC derives from the approval, as for any Plugin object, not from the module.
    let approval = permissions
        .to_approval()
        .map_err(|e| anyhow::anyhow!("plugin {}: {e}", manifest.name))?;
    let mut flags = args.rbac.clone();
    flags.allow_pull_secret(args.pull_secret.as_deref());
    let rbac = render(&[(manifest.name.clone(), approval)], &flags, None, true).await?;

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

fn pull_secret_ref(args: &ApproveArgs) -> Option<LocalObjectReference> {
    args.pull_secret
        .as_ref()
        .map(|name| LocalObjectReference { name: name.clone() })
}

/// `--namespace NS`: the team's NamespacedPlugin and its RBAC, all in NS.
async fn namespaced(
    args: &ApproveArgs,
    ns: &str,
    manifest: &Manifest,
    settings: Option<serde_json::Value>,
    limits: Option<serde_json::Value>,
) -> Result<()> {
    let (_, resolved) = args.rbac.resolve(&[manifest]).await?;
    let resolve = |r: &ResourceRef| resolved.get(r).cloned();
    let mut approval = Approval::asked_by(manifest);
    tenant::confine_approval(ns, &mut approval, &resolve).map_err(|e| {
        anyhow::anyhow!("plugin {} cannot run in namespace {ns}: {e}", manifest.name)
    })?;
    let object = PluginObject {
        api_version: plugin_object::API_VERSION.into(),
        kind: plugin_object::NAMESPACED_KIND.into(),
        metadata: serde_json::json!({"name": manifest.name, "namespace": ns}),
        spec: PluginSpec {
            module: args.module.clone(),
            settings,
            permissions: Permissions::from_approval(&approval),
            limits,
            pull_secret_ref: pull_secret_ref(args),
            ..PluginSpec::default()
        },
        status: None,
    };
    let objects = rbac::render_tenant(
        &manifest.name,
        ns,
        &approval,
        &resolve,
        &args.rbac.host_account(),
        args.pull_secret.as_deref(),
    );
    let host = args.rbac.host_account();
    let mut out = format!(
        "# `kubewasm approve --namespace {ns} {}`:\n\
         # the NamespacedPlugin approving exactly what {} {} asks for, confined to\n\
         # namespace {ns}, and its RBAC there (the host's ServiceAccount: {}/{}).\n\
         # Review them, then `kubectl apply -f` them.\n---\n",
        args.file.display(),
        manifest.name,
        manifest.version,
        host.namespace,
        host.name,
    );
    out.push_str(&serde_yaml_ng::to_string(&object)?);
    out.push_str(&rbac::to_yaml(&objects));
    print!("{out}");
    Ok(())
}
