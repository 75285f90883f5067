//! `kubewasm dev`: an embedded API server serving the Plugin kinds, example manifests
//! applied to it, and the host running on it; a demo and plugin sandbox that needs no
//! cluster.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use kubewasm::apply::manifests;
use kubewasm::host::PluginStatus;

use super::run::{HostArgs, run_host, shutdown_signal};

/// The CRDs of the Plugin kinds as `deploy/` installs them (where they are read from, and
/// the text), applied to the embedded API server before anything else: Plugin, and
/// NamespacedPlugin (`--tenant-registry`, and `approve --namespace`'s output to apply).
const PLUGIN_CRDS: [(&str, &str); 2] = [
    (
        "deploy/kubernetes/base/crd-plugins.yaml",
        include_str!("../../../../deploy/kubernetes/base/crd-plugins.yaml"),
    ),
    (
        "deploy/kubernetes/base/crd-namespacedplugins.yaml",
        include_str!("../../../../deploy/kubernetes/base/crd-namespacedplugins.yaml"),
    ),
];

/// Flags of `kubewasm dev`.
#[derive(Args, Debug)]
pub struct DevArgs {
    #[command(flatten)]
    host: HostArgs,
    /// Manifests (files or directories) to apply before the host starts; CRDs go first.
    #[arg(long, value_name = "PATH")]
    apply: Vec<PathBuf>,
    /// Port of the embedded API server on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write a kubeconfig for the embedded API server here (for kubectl).
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,
}

/// `kubewasm dev`.
pub async fn command(mut args: DevArgs) -> Result<()> {
    // The user's code cache, as every other command on this machine: a plugin `build`,
    // `test` or `approve` compiled loads without compiling again.
    args.host.code_cache = Some(super::usercache::CodeCache::choose(
        args.host.cache_dir.clone(),
    ));
    let server = kubewasm_apiserver::ApiServer::start(kubewasm_apiserver::Config {
        bind: SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)),
        ..Default::default()
    })
    .await
    .context("starting the embedded API server")?;
    if let Some(path) = &args.kubeconfig_out {
        server
            .write_kubeconfig(path)
            .with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(
            "kubeconfig written: kubectl --kubeconfig {} get all",
            path.display()
        );
    }
    let client = kube::Client::try_from(server.client_config())
        .context("client for the embedded API server")?;
    // The Plugin kinds first, so --apply may hold Plugin and NamespacedPlugin objects
    // (`kubewasm approve`'s).
    let mut docs = Vec::new();
    for (source, text) in PLUGIN_CRDS {
        docs.push(manifests::Document {
            source: PathBuf::from(source),
            object: serde_yaml_ng::from_str(text)
                .with_context(|| format!("the CRD carried by kubewasm ({source})"))?,
        });
    }
    // The namespace of the plugins' ServiceAccounts too, so `kubewasm approve`'s output
    // applies as it is (it names that namespace; a cluster has it from deploy/).
    docs.push(manifests::Document {
        source: PathBuf::from("(the plugins' namespace)"),
        object: serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": args.host.plugin_namespace()}}),
    });
    docs.extend(manifests::read_manifests(&args.apply)?);
    let n = manifests::apply_manifests(&client, &docs, Duration::from_secs(30)).await?;
    tracing::info!(objects = n, "manifests applied (the Plugin CRDs first)");
    if args.host.plugins.is_none() && args.host.no_plugin_objects {
        tracing::info!(
            "no --plugins and --no-plugin-objects: serving the API only; Ctrl-C to stop"
        );
        shutdown_signal().await;
    } else {
        let url = server.url();
        let kubeconfig = args.kubeconfig_out.clone();
        run_host(client, &args.host, |host| {
            eprint!("{}", banner(&url, kubeconfig.as_deref(), &host.status()));
        })
        .await?
    }
    server.shutdown().await;
    Ok(())
}

/// The start-up banner, ending with what an author looks for first: which plugins run,
/// and why the others were refused (otherwise one ERROR line in a busy log).
fn banner(url: &str, kubeconfig: Option<&Path>, status: &PluginStatus) -> String {
    let mut out = String::from("\n--- kubewasm dev ---\n");
    let _ = writeln!(out, "API server: {url}");
    if let Some(path) = kubeconfig {
        let _ = writeln!(
            out,
            "kubectl:    kubectl --kubeconfig {} get all",
            path.display()
        );
    }
    let _ = writeln!(out, "plugins loaded: {}", status.loaded.len());
    for (name, (version, from)) in &status.loaded {
        let _ = writeln!(out, "  {name} {version} ({from})");
    }
    let _ = writeln!(out, "plugins refused: {}", status.rejected.len());
    for (source, reason) in &status.rejected {
        let reason = reason.replace('\n', "\n    ");
        let _ = writeln!(out, "  {source}: {reason}");
    }
    out.push_str("--- Ctrl-C to stop ---\n");
    out
}
