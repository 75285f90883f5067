//! `kubewasm rbac`: the least-privilege RBAC for approved plugins (rules derived by
//! `kubewasm::core::rbac`). With `--kubeconfig` every watched, read and granted kind is
//! resolved through the cluster's discovery (the real plural and scope: MongoDB's plural is
//! `mongodb`, not a guess); a kind the cluster does not serve is an error, unless
//! `--allow-guess`. Without a cluster every plural and scope is guessed, and it says so.
//!
//! The rules come from what the operator approved — `spec.permissions` of Plugin objects
//! (from files with `-f`, or the cluster's with `--from-cluster`) — never from what a
//! module declares: watches and reads become get/list/watch for the host, grants the
//! plugin's verbs. `--plugins DIR --approvals PATH` keeps the directory mode: each plugin
//! there is checked against its approval (more than approved is an error, as `run` refuses
//! it; no approval: nothing, and a warning), and its RBAC is the approval's. Each plugin
//! gets its own ServiceAccount `kubewasm-<plugin>` holding its grants, which the host
//! impersonates (`--no-impersonation`: everything on the host's ServiceAccount, for `run
//! --no-impersonation`). For Plugin objects the host's roles are one set per plugin,
//! `kubewasm:<plugin>`, as `kubewasm approve` prints them, so applying them plugin by
//! plugin adds up.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use kubewasm::core::grant::{Approval, check_approval};
use kubewasm::core::kind::{KindInfo, ResolveError};
use kubewasm::core::manifest::Manifest;
use kubewasm::core::plugin_object::{self, PluginObject};
use kubewasm::core::rbac::{self, RbacOptions};
use kubewasm::core::resource::ResourceRef;
use kubewasm::runtime::Approvals;
use kubewasm::runtime::PluginFile;
use kubewasm::runtime::plugin_files;
use kubewasm::watch::discovery::Discovery;
use serde_json::Value;

use super::run::client_for;
use super::usercache::CodeCache;

/// How the RBAC is rendered: shared by `rbac` and `approve`.
#[derive(Args, Debug, Clone)]
pub struct RbacFlags {
    /// Name of the roles and bindings.
    #[arg(long, default_value = "kubewasm")]
    name: String,
    /// The host's ServiceAccount.
    #[arg(long, default_value = "kubewasm")]
    service_account: String,
    /// Namespace the host runs in (its ServiceAccount, Events and Lease, and the plugins'
    /// ServiceAccounts); the default is the one `run`, `plan` and `dev` use out of a pod
    /// and `deploy/` installs into.
    #[arg(long, default_value = rbac::DEFAULT_NAMESPACE)]
    service_account_namespace: String,
    /// Resolve every kind through this cluster's discovery (exact plurals and scopes);
    /// also the cluster `--from-cluster` reads. Without it, plurals and scopes are guessed
    /// offline.
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
    /// Leave out what the host needs to follow Plugin objects (for `kubewasm run
    /// --no-plugin-objects`): reading plugins.kubewasm.dev, writing their status, reading
    /// the allowed pull secrets in its namespace.
    #[arg(long)]
    no_plugin_objects: bool,
    /// A pull secret Plugin objects may name, as given to `kubewasm run
    /// --allowed-pull-secret` (repeatable): the host's Role gets `get` on exactly these
    /// Secrets of its namespace (resourceNames); without it, on no Secret.
    #[arg(long = "allowed-pull-secret", value_name = "NAME")]
    allowed_pull_secret: Vec<String>,
    /// The host runs with `kubewasm run --shards S`: it also lists its Leases (the shard
    /// and member Leases, by label) and deletes its member Lease when it stops.
    #[arg(long)]
    sharded: bool,
    /// The host runs with `kubewasm run --metrics-secure`: it may create TokenReviews and
    /// SubjectAccessReviews (to review each request to its metrics listener), and the
    /// ClusterRole `NS:<name>-metrics-reader` (get on /metrics and /status) is printed for
    /// the scraper's ServiceAccount to be bound to (the binding is yours to write).
    #[arg(long)]
    metrics_secure: bool,
    /// With --kubeconfig: print the RBAC even where a role or binding of the same name
    /// exists on the cluster and belongs to another install (its label
    /// kubewasm.dev/install names another namespace, or it is not kubewasm's); applying it
    /// then takes that object over. Without it, that is an error naming them.
    #[arg(long, requires = "kubeconfig")]
    take_over: bool,
}

/// Flags of `kubewasm rbac`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").args(["filename", "from_cluster", "plugins"])))]
pub struct RbacArgs {
    /// Plugin objects (kubewasm.dev/v1alpha1): a YAML file or stream (`-` for stdin), or a
    /// directory of them (repeatable). Other documents in them are skipped.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    filename: Vec<PathBuf>,
    /// The cluster's Plugin objects (plugins.kubewasm.dev), through --kubeconfig or the
    /// default kubeconfig.
    #[arg(long)]
    from_cluster: bool,
    /// Directory mode: the plugins of DIR, each checked against its approval in
    /// --approvals.
    #[arg(long, value_name = "DIR", requires = "approvals")]
    plugins: Option<PathBuf>,
    /// With --plugins: the operator's approvals (as `kubewasm run --approvals` takes them).
    #[arg(long, value_name = "PATH", requires = "plugins")]
    approvals: Option<PathBuf>,
    /// Put the namespaced permissions in Roles in this namespace (watches and grants
    /// must all stay inside it) instead of a ClusterRole.
    #[arg(long)]
    namespace: Option<String>,
    /// Also print (alone, without -f, --from-cluster or --plugins: only print) what the
    /// host needs to serve teams' NamespacedPlugins (for `kubewasm run --tenant-registry`): a ClusterRole and binding `NS:<name>-tenants` (get/list/watch
    /// on namespacedplugins.kubewasm.dev, patch on their status, create/patch Events), and
    /// the ClusterRole `kubewasm-tenant` a platform binds to a team with a RoleBinding in
    /// the team's namespace (NamespacedPlugins, ServiceAccounts, Roles and RoleBindings
    /// there), beside `edit`.
    #[arg(long)]
    tenants: bool,
    #[command(flatten)]
    flags: RbacFlags,
    /// Longest time compiling one plugin may take, with --plugins (in a worker process, as `run`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    compile_timeout: std::time::Duration,
}

/// `kubewasm rbac`.
pub async fn command(args: RbacArgs) -> Result<()> {
    let no_source = args.filename.is_empty() && !args.from_cluster && args.plugins.is_none();
    if no_source {
        // `--tenants` alone: the host's part for teams' plugins, nothing about plugins.
        if !args.tenants {
            bail!(
                "give the approvals: -f PATH, --from-cluster or --plugins DIR (or --tenants alone)"
            );
        }
        print!(
            "{}",
            rbac::to_yaml(&rbac::tenant_cluster(&args.flags.options(None, false)))
        );
        return Ok(());
    }
    let per_plugin_host_roles = args.plugins.is_none();
    let approved = if let Some(dir) = &args.plugins {
        let approvals = args.approvals.as_deref().context("--approvals PATH")?;
        from_directory(dir, &Approvals::read(approvals)?, args.compile_timeout).await?
    } else {
        let approvals = if args.from_cluster {
            from_cluster(args.flags.kubeconfig.as_deref()).await?
        } else {
            from_files(&args.filename)?
        };
        approved_manifests(&approvals)?
    };
    if approved.is_empty() {
        tracing::warn!("no approved plugins: only the host's own RBAC is printed");
    }
    let mut out = render(
        &approved,
        &args.flags,
        args.namespace.as_deref(),
        per_plugin_host_roles,
    )
    .await?;
    if args.tenants {
        out.push_str(&rbac::to_yaml(&rbac::tenant_cluster(
            &args.flags.options(None, false),
        )));
    }
    print!("{out}");
    Ok(())
}

/// The approvals of Plugin objects in files, directories or stdin (`-`), read together:
/// a plugin approved twice is refused, as `run` refuses it.
fn from_files(paths: &[PathBuf]) -> Result<Approvals> {
    let mut approvals = Approvals::none();
    for p in paths {
        if p == Path::new("-") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
            approvals.add_text(&text, Path::new("stdin"))?;
        } else {
            approvals.add_path(p)?;
        }
    }
    Ok(approvals)
}

/// The approvals of the cluster's Plugin objects.
async fn from_cluster(kubeconfig: Option<&Path>) -> Result<Approvals> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let client = client_for(kubeconfig.map(Path::to_path_buf).as_ref(), None).await?;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            plugin_object::GROUP,
            plugin_object::VERSION,
            plugin_object::KIND,
        ),
        plugin_object::PLURAL,
    );
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let list = api
        .list(&ListParams::default())
        .await
        .context("listing plugins.kubewasm.dev (is the CRD installed?)")?;
    let mut objects = Vec::new();
    for o in list.items {
        let name = o.metadata.name.clone().unwrap_or_default();
        let value = serde_json::to_value(&o)?;
        let object: PluginObject = serde_json::from_value(value)
            .with_context(|| format!("Plugin {name} on the cluster"))?;
        objects.push(object);
    }
    Ok(Approvals::from_objects(
        objects,
        Path::new("plugins.kubewasm.dev"),
    )?)
}

/// Each approval, by plugin name: what the RBAC derives from (an unusable one is an
/// error).
fn approved_manifests(approvals: &Approvals) -> Result<Vec<(String, Approval)>> {
    let mut out = Vec::new();
    for name in approvals.names() {
        if let Some(problem) = approvals.problem(name) {
            bail!("{problem}");
        }
        if let Some(a) = approvals.get(name) {
            out.push((name.to_string(), a.clone()));
        }
    }
    Ok(out)
}

/// Directory mode: every plugin of `dir` loaded and checked against its approval; the
/// RBAC of each comes from the approval.
async fn from_directory(
    dir: &Path,
    approvals: &Approvals,
    compile_timeout: std::time::Duration,
) -> Result<Vec<(String, Approval)>> {
    // The operator runs this on plugins others wrote: compiled in a worker, as `run` does.
    let loader = CodeCache::choose(None).loader(compile_timeout)?;
    let mut out = Vec::new();
    for path in plugin_files(dir)? {
        let loaded = match loader.load(PluginFile::read(&path)?).await {
            Ok(l) => l,
            Err(e) => bail!("{e}"),
        };
        let m = &loaded.plugin.manifest;
        if let Some(problem) = approvals.problem(&m.name) {
            bail!("{}: {problem}", path.display());
        }
        let Some(approval) = approvals.get(&m.name) else {
            tracing::warn!(plugin = %m.name, file = %path.display(),
                "no approval: `run` refuses it, and it gets no RBAC");
            continue;
        };
        if let Err(e) = check_approval(m, Some(approval)) {
            bail!("{}: {e}", path.display());
        }
        // The approved set, so the RBAC stays valid for any version within it.
        out.push((m.name.clone(), approval.clone()));
    }
    Ok(out)
}

impl RbacFlags {
    /// `--allowed-pull-secret NAME` too (`approve --pull-secret NAME`).
    pub(super) fn allow_pull_secret(&mut self, name: Option<&str>) {
        self.allowed_pull_secret.extend(name.map(str::to_string));
    }

    /// The options these flags stand for, with `namespace` (`--namespace`, `rbac`'s) and
    /// the host's roles one set per plugin or not.
    fn options(&self, namespace: Option<&str>, host_roles_per_plugin: bool) -> RbacOptions {
        RbacOptions {
            namespace: namespace.map(str::to_string),
            name: self.name.clone(),
            service_account: self.service_account.clone(),
            service_account_namespace: self.service_account_namespace.clone(),
            impersonation: !self.no_impersonation,
            host_roles_per_plugin,
            plugin_objects: !self.no_plugin_objects,
            pull_secrets: self.allowed_pull_secret.clone(),
            sharded: self.sharded,
            metrics_secure: self.metrics_secure,
        }
    }

    /// The host's ServiceAccount (`--service-account`, `--service-account-namespace`).
    pub(super) fn host_account(&self) -> rbac::HostAccount {
        rbac::HostAccount {
            namespace: self.service_account_namespace.clone(),
            name: self.service_account.clone(),
        }
    }

    /// Every kind the manifests watch, read or are granted, resolved through the cluster
    /// of `--kubeconfig` (see [`resolve_all`]), with its client; without `--kubeconfig`
    /// nothing is resolved (every kind is guessed, and a warning says so).
    pub(super) async fn resolve(
        &self,
        manifests: &[&Manifest],
    ) -> Result<(Option<kube::Client>, HashMap<ResourceRef, KindInfo>)> {
        let Some(path) = &self.kubeconfig else {
            tracing::warn!(
                "no --kubeconfig: every plural and scope is guessed (a CRD may choose another \
                 plural, e.g. MongoDB's is `mongodb`); resolve them on the cluster with \
                 --kubeconfig"
            );
            return Ok((None, HashMap::new()));
        };
        let client = client_for(Some(path), None).await?;
        let discovery = Discovery::new(client.clone());
        let resolved = resolve_all(&discovery, manifests, self.allow_guess).await?;
        Ok((Some(client), resolved))
    }
}

/// The RBAC of the `approved` plugins (name, approval) as one YAML stream; `namespace`:
/// `rbac --namespace`.
pub async fn render(
    approved: &[(String, Approval)],
    flags: &RbacFlags,
    namespace: Option<&str>,
    host_roles_per_plugin: bool,
) -> Result<String> {
    let owned: Vec<Manifest> = approved.iter().map(|(n, a)| a.to_manifest(n)).collect();
    let manifests: Vec<&Manifest> = owned.iter().collect();
    let (client, resolved) = flags.resolve(&manifests).await?;
    let opts = flags.options(namespace, host_roles_per_plugin);
    let reader = rbac::metrics_reader_name(&opts);
    if let Some((name, _)) = approved.iter().find(|(n, _)| {
        opts.metrics_secure
            && rbac::qualified(
                &opts.service_account_namespace,
                &format!("{}-{n}", opts.name),
            ) == reader
    }) {
        bail!(
            "plugin {name}'s ClusterRole would be named {reader}, the name of the metrics \
             reader's ClusterRole (--metrics-secure): rename the plugin or give --name"
        );
    }
    let pairs: Vec<(&str, &Approval)> = approved.iter().map(|(n, a)| (n.as_str(), a)).collect();
    let objects = rbac::render_approved(&pairs, |r| resolved.get(r).cloned(), &opts);
    if let Some(client) = &client {
        let install = &flags.service_account_namespace;
        let foreign = foreign_objects(client, &objects, install).await;
        if !foreign.is_empty() {
            let list = foreign.join("; ");
            if !flags.take_over {
                bail!(
                    "{list}: applying this RBAC would take them over from another install. \
                     Give this install its own namespace (--service-account-namespace) or \
                     --name, or pass --take-over"
                );
            }
            tracing::warn!(objects = %list, "--take-over: applying this RBAC takes these over");
        }
    }
    Ok(rbac::to_yaml(&objects))
}

/// The roles and bindings among `objects` that live outside the install's namespace
/// (where other installs' objects live too), exist on the cluster, and are not this
/// install's (their `kubewasm.dev/install` label names another, or none): a server-side
/// apply would silently rewrite their rules and subjects. A lookup that fails (no `get`
/// on RBAC objects) proves nothing: logged, not reported.
async fn foreign_objects(client: &kube::Client, objects: &[Value], install: &str) -> Vec<String> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    let mut foreign = Vec::new();
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        if !matches!(
            kind,
            "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding"
        ) {
            continue;
        }
        let namespace = o["metadata"]["namespace"].as_str();
        if namespace == Some(install) {
            continue;
        }
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let plural = format!("{}s", kind.to_lowercase());
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
            &plural,
        );
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let what = match namespace {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        match api.get_opt(name).await {
            Ok(Some(existing)) => {
                let labels = existing.metadata.labels.unwrap_or_default();
                match labels.get(rbac::INSTALL_LABEL).map(String::as_str) {
                    Some(owner) if owner == install => {}
                    Some(owner) => foreign.push(format!(
                        "{what} exists and belongs to the install in namespace {owner}"
                    )),
                    None => foreign.push(format!(
                        "{what} exists and is not a kubewasm install's (no label {})",
                        rbac::INSTALL_LABEL
                    )),
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(object = %what, error = %e,
                    "cannot check whether this exists already; not checked for a takeover");
            }
        }
    }
    foreign
}

/// Every kind the manifests watch, read or are granted, resolved on the cluster. A kind the
/// cluster does not serve is an error naming the plugins and kinds, unless `allow_guess`
/// (then it is left out, and the renderer guesses and marks it).
async fn resolve_all(
    discovery: &Discovery,
    manifests: &[&Manifest],
    allow_guess: bool,
) -> Result<HashMap<ResourceRef, KindInfo>> {
    let mut wanted: Vec<(&str, ResourceRef)> = Vec::new();
    for m in manifests {
        wanted.extend(m.read_resources().map(|r| (m.name.as_str(), r.clone())));
        for g in &m.grants {
            for group in g.api_groups.iter().filter(|g| *g != "*") {
                for kind in g.kinds.iter().filter(|k| *k != "*") {
                    wanted.push((
                        m.name.as_str(),
                        kubewasm::core::kind::grant_ref(group, kind),
                    ));
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
