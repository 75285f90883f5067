//! `kubewasm rbac`: the least-privilege RBAC for a plugin directory (rules derived by
//! `kubewasm::rbac`), with kinds resolved through a cluster's discovery when given one.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

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
    /// Resolve kinds to resources through this cluster's discovery instead of guessing
    /// plurals offline.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

/// `kubewasm rbac`.
pub async fn rbac(args: RbacArgs) -> Result<()> {
    use kubewasm::rbac::{self, RbacOptions};
    use kubewasm::runtime::loader::plugin_files;
    use kubewasm::runtime::{LoadOptions, PluginEngine, load_plugin};
    let engine = PluginEngine::new()?;
    let mut plugins = Vec::new();
    for path in plugin_files(&args.plugins)? {
        match load_plugin(&engine, &path, &LoadOptions::default()).await {
            Ok(p) => plugins.push(p),
            Err(e) => anyhow::bail!("{e}"),
        }
    }
    let mut resolved = std::collections::HashMap::new();
    if let Some(path) = &args.kubeconfig {
        let client = client_for(Some(path), None).await?;
        let discovery = kubewasm::watch::discovery::Discovery::new(client);
        for p in &plugins {
            for r in p.manifest.read_resources() {
                if let Ok(res) = discovery.resolve(r).await {
                    resolved.insert(r.clone(), (*res).clone());
                }
            }
        }
    }
    let manifests: Vec<_> = plugins.iter().map(|p| &p.manifest).collect();
    let opts = RbacOptions {
        namespace: args.namespace,
        name: args.name,
        service_account: args.service_account,
        service_account_namespace: args.service_account_namespace,
    };
    let objects = rbac::render(&manifests, |r| resolved.get(r).cloned(), &opts);
    print!("{}", rbac::to_yaml(&objects));
    Ok(())
}
