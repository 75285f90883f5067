//! `kubewasm rbac`: the least-privilege RBAC for a plugin directory (rules derived by
//! `kubewasm::core::rbac`). With `--kubeconfig` every watched, read and granted kind is resolved
//! through the cluster's discovery (the real plural and scope: MongoDB's plural is
//! `mongodb`, not a guess); a kind the cluster does not serve is an error, unless
//! `--allow-guess`. Without a cluster every plural and scope is guessed, and it says so.
//!
//! The rules come from what the operator approved (`kubewasm.approved` in each plugin's
//! settings file), not from what the plugin asks for: a plugin asking for more than its
//! approval is an error here, as it is refused by `run`. Each plugin gets its own
//! ServiceAccount `kubewasm-<plugin>` holding its grants, which the host impersonates
//! (`--no-impersonation`: everything on the host's ServiceAccount, for `run
//! --no-impersonation`).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use kubewasm::core::grant::check_approval;
use kubewasm::core::kind::{KindInfo, ResolveError};
use kubewasm::core::rbac::{self, RbacOptions};
use kubewasm::core::resource::ResourceRef;
use kubewasm::runtime::compiler::DEFAULT_COMPILE_ADDRESS_SPACE;
use kubewasm::runtime::loader::plugin_files;
use kubewasm::runtime::{LoadOptions, Loader, PluginEngine, PluginFile};
use kubewasm::watch::discovery::Discovery;

use super::run::client_for;

/// Flags of `kubewasm rbac`.
#[derive(Args, Debug)]
pub struct RbacArgs {
    /// Plugin directory.
    #[arg(long, value_name = "DIR")]
    plugins: PathBuf,
    /// Put the namespaced permissions in Roles in this namespace (watches and grants
    /// must all stay inside it) instead of a ClusterRole.
    #[arg(long)]
    namespace: Option<String>,
    /// Name of the roles and bindings.
    #[arg(long, default_value = "kubewasm")]
    name: String,
    /// The host's ServiceAccount.
    #[arg(long, default_value = "kubewasm")]
    service_account: String,
    /// Namespace the host runs in (its ServiceAccount, Events and Lease).
    #[arg(long, default_value = "kubewasm")]
    service_account_namespace: String,
    /// Resolve every kind through this cluster's discovery (exact plurals and scopes).
    /// Without it, plurals and scopes are guessed offline.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: guess kinds the cluster does not serve (yet) instead of failing;
    /// the roles holding guessed rules list them in the annotation kubewasm.dev/guessed.
    #[arg(long, requires = "kubeconfig")]
    allow_guess: bool,
    /// Put every plugin's grants on the host's ServiceAccount (for `kubewasm run
    /// --no-impersonation`) instead of one ServiceAccount per plugin.
    #[arg(long)]
    no_impersonation: bool,
    /// Longest time compiling one plugin may take (in a worker process, as `run`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    compile_timeout: std::time::Duration,
}

/// `kubewasm rbac`.
pub async fn command(args: RbacArgs) -> Result<()> {
    // The operator runs this on plugins others wrote: compiled in a worker, as `run` does.
    let options = LoadOptions {
        compiler: super::worker_compiler(args.compile_timeout, DEFAULT_COMPILE_ADDRESS_SPACE)?,
        ..LoadOptions::default()
    };
    let loader = Loader::new(PluginEngine::new()?, options, None)?;
    let mut approved = Vec::new();
    for path in plugin_files(&args.plugins)? {
        let loaded = match loader.load(PluginFile::read(&path)?).await {
            Ok(l) => l,
            Err(e) => bail!("{e}"),
        };
        let mut m = loaded.plugin.manifest.clone();
        if let Err(e) = check_approval(&m, loaded.approval.as_ref()) {
            bail!("{}: {e}", path.display());
        }
        // The approved set, so the RBAC stays valid for any version within it.
        let approval = loaded.approval.unwrap_or_default();
        m.grants = approval.grants;
        m.reads = approval.reads;
        approved.push(m);
    }
    let manifests: Vec<_> = approved.iter().collect();
    let resolved = match &args.kubeconfig {
        Some(path) => {
            let discovery = Discovery::new(client_for(Some(path), None).await?);
            resolve_all(&discovery, &manifests, args.allow_guess).await?
        }
        None => {
            tracing::warn!(
                "no --kubeconfig: every plural and scope is guessed (a CRD may choose another \
                 plural, e.g. MongoDB's is `mongodb`); resolve them on the cluster with \
                 --kubeconfig"
            );
            HashMap::new()
        }
    };
    let opts = RbacOptions {
        namespace: args.namespace,
        name: args.name,
        service_account: args.service_account,
        service_account_namespace: args.service_account_namespace,
        impersonation: !args.no_impersonation,
    };
    let objects = rbac::render(&manifests, |r| resolved.get(r).cloned(), &opts);
    print!("{}", rbac::to_yaml(&objects));
    Ok(())
}

/// Every kind the manifests watch, read or are granted, resolved on the cluster. A kind the
/// cluster does not serve is an error naming the plugins and kinds, unless `allow_guess`
/// (then it is left out, and the renderer guesses and marks it).
async fn resolve_all(
    discovery: &Discovery,
    manifests: &[&kubewasm::core::manifest::Manifest],
    allow_guess: bool,
) -> Result<HashMap<ResourceRef, KindInfo>> {
    let mut wanted: Vec<(&str, ResourceRef)> = Vec::new();
    for m in manifests {
        wanted.extend(m.read_resources().map(|r| (m.name.as_str(), r.clone())));
        for g in &m.grants {
            for group in g.api_groups.iter().filter(|g| *g != "*") {
                for kind in g.kinds.iter().filter(|k| *k != "*") {
                    wanted.push((m.name.as_str(), rbac::grant_ref(group, kind)));
                }
            }
        }
    }
    let mut resolved = HashMap::new();
    let mut missing = BTreeSet::new();
    for (plugin, r) in wanted {
        if resolved.contains_key(&r) {
            continue;
        }
        match discovery.resolve(&r).await {
            Ok(k) => {
                resolved.insert(r, (*k).clone());
            }
            Err(ResolveError::NotServed(what)) => {
                missing.insert(format!("plugin {plugin}: {what}"));
            }
            Err(e) => bail!("plugin {plugin}: {e}"),
        }
    }
    if !missing.is_empty() {
        let list = missing.into_iter().collect::<Vec<_>>().join("; ");
        if !allow_guess {
            bail!(
                "the cluster does not serve {list}. Install the CRDs first, or pass \
                 --allow-guess to guess their plurals and scopes (the roles then list them \
                 in kubewasm.dev/guessed)"
            );
        }
        tracing::warn!("not served by the cluster, guessed: {list}");
    }
    Ok(resolved)
}
