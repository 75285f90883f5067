//! `kubewasm plan FILE.wasm|--module oci://…`: what a plugin would do to a live cluster,
//! for CI and for an operator before an apply. The plugin is loaded as `run` loads it,
//! called once per watched object as a resync would, and every admitted write is sent
//! with `dryRun=All` through `run`'s pipeline (`kubewasm::plan`); nothing is written.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kubewasm::apply::WriteIdentity;
use kubewasm::plan::{Plan, PlanOptions};
use kubewasm::runtime::{Approvals, Loader, ManifestRejection, PluginFile};

use super::registry_args::RegistryArgs;
use super::usercache::CodeCache;

/// The exit code of a plan that would change something (a refusal included).
pub const EXIT_CHANGES: i32 = 2;

/// What `kubewasm plan --help` ends with.
const HELP: &str = "\
Exit codes (as `terraform plan -detailed-exitcode` and `kubectl diff`):
  0  nothing would change: every write the plugin returns would leave its object as it is
  2  something would: an object created, changed or deleted, or a write the API server
     refuses (`!`). A refusal counts as a change: applying would send that write and
     fail, which a CI gate must not pass as clean; 1 stays for a plan that could not be
     made
  1  error: the plugin does not load or is not approved, the cluster cannot be reached
     or listed, or a plugin call fails (each printed with the plugin, the object and
     the reason; the rest of the plan is still printed)

Identity: the writes are sent as the plugin's own ServiceAccount, kubewasm-<plugin> in
--plugin-namespace, impersonated, exactly as `kubewasm run` sends them, so the API
server's RBAC judges them as it will on apply; the kubeconfig's user must be allowed to
impersonate it (`kubewasm rbac` grants the host that). --no-impersonation sends them as
the kubeconfig's user. Lists and the plugin's reads use the kubeconfig's user.

Nothing is written: every write goes with dryRun=All; the API server validates it
(schema, admission, RBAC, field conflicts) and stores nothing.

Output: `+` create, `~` update (each field `path: from → to`), `-` delete, `!` refused
(with the API server's code and reason); writes that change nothing are only counted:
  Plan: 2 to create, 1 to change, 0 to delete, 1 refused; 7 objects unchanged
--output json prints the same as one JSON object: plugin, version, calls, notServed,
changes[{object, verb, trigger, change{action, fields[{path, from, to}], more, code,
reason}}], summary{create, update, delete, refused, unchanged}, errors[{trigger, watch,
error}].

Examples:
  kubewasm plan plugins/contentsite-provisioner.wasm --approvals plugins/approvals.yaml
  kubewasm plan --module oci://registry.example.com/plugins/site@sha256:... \\
      --settings site.yaml --approvals approvals/ --output json
  kubewasm dev --kubeconfig-out /tmp/dev.kubeconfig ... &
  kubewasm plan my-plugin.wasm --kubeconfig /tmp/dev.kubeconfig";

/// Flags of `kubewasm plan`.
#[derive(Args, Debug)]
#[command(after_long_help = HELP)]
pub struct PlanArgs {
    /// The plugin file (its settings file NAME.yaml beside it is used, as `run` uses it).
    #[arg(required_unless_present = "module", conflicts_with = "module")]
    file: Option<PathBuf>,
    /// Pull the plugin from an OCI registry instead: `oci://HOST[:PORT]/REPO@sha256:…`
    /// (as `kubewasm push` prints it) or `oci://…:TAG`, with the registry flags below.
    #[arg(long, value_name = "oci://REF")]
    module: Option<String>,
    /// The plugin's settings (YAML or JSON), in place of its settings file's (as a
    /// Plugin object's spec.settings).
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// The operator's approvals, as `kubewasm run --approvals` takes them: the plugin is
    /// bounded by its approval there, and refused (exit 1) without one. Without this
    /// flag, it is planned approving exactly what it asks for.
    #[arg(long, value_name = "PATH")]
    approvals: Option<PathBuf>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    context: Option<String>,
    /// List namespaced kinds only in these namespaces (repeatable, or comma-separated),
    /// as `kubewasm run --namespace`; default: every namespace.
    #[arg(long = "namespace", value_name = "NS", value_delimiter = ',')]
    namespaces: Vec<String>,
    /// Namespace of the plugins' ServiceAccounts, as `kubewasm run` (default: the pod's
    /// namespace, else `kubewasm-system`, where `kubewasm approve` puts them).
    #[arg(long, env = "POD_NAMESPACE")]
    plugin_namespace: Option<String>,
    /// Send the dry-run writes as the kubeconfig's user instead of impersonating the
    /// plugin's ServiceAccount `kubewasm-<plugin>` (as `kubewasm run --no-impersonation`).
    #[arg(long)]
    no_impersonation: bool,
    /// How the plan is printed.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR", help = super::usercache::CACHE_DIR_HELP)]
    cache_dir: Option<PathBuf>,
    /// Longest time compiling the plugin may take (in a worker process, as `run`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    compile_timeout: Duration,
    /// Largest module pulled with --module, in MiB.
    #[arg(long, default_value_t = 128)]
    max_module_mib: u64,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// How the plan is printed.
#[derive(Copy, Clone, Debug, ValueEnum)]
enum Output {
    /// A terraform-style diff and a summary line.
    Text,
    /// One JSON object.
    Json,
}

/// `kubewasm plan`: print the plan; exit 0 (no change), 2 (changes) or 1 (error).
pub async fn command(args: PlanArgs) -> Result<()> {
    let namespaces = super::run::namespaces_flag(&args.namespaces)?;
    let client = super::run::client_for(args.kubeconfig.as_ref(), args.context.as_ref()).await?;
    let loader = CodeCache::choose(args.cache_dir.clone()).loader(args.compile_timeout)?;
    let file = plugin_file(&args, &loader).await?;
    let source = file.path.clone();
    let loaded = match &args.approvals {
        Some(path) => loader.load_approved(file, &Approvals::read(path)?).await?,
        None => loader.load(file).await?,
    };
    let identity = if args.no_impersonation {
        WriteIdentity::Host
    } else {
        WriteIdentity::PluginServiceAccounts {
            namespace: args
                .plugin_namespace
                .clone()
                .unwrap_or_else(super::run::home_namespace),
        }
    };
    // As `run` checks before it loads a plugin: a host that may not impersonate would see
    // every write refused for that, which says nothing of the plugin.
    kubewasm::apply::identity::check_impersonation(&client, &identity, &loaded.plugin.manifest)
        .await
        .map_err(|why| anyhow::anyhow!(why))?;
    let options = PlanOptions {
        identity,
        namespaces,
    };
    let plan = kubewasm::plan::plan(client, loaded.plugin, loaded.approval, &source, &options)
        .await
        .context("making the plan")?;
    print(&plan, args.output)?;
    if plan.failed() {
        for line in plan.failures() {
            eprintln!("error: {line}");
        }
        bail!("the plan is incomplete: some plugin calls failed");
    }
    if plan.changes() {
        std::process::exit(EXIT_CHANGES);
    }
    Ok(())
}

/// The plan on stdout, flushed (`exit` skips stdout's destructor).
fn print(plan: &Plan, output: Output) -> Result<()> {
    let text = match output {
        Output::Text => plan.text(),
        Output::Json => format!("{:#}\n", plan.json()),
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// The plugin to plan: the file, or the module pulled; `--settings` in place of its own.
async fn plugin_file(args: &PlanArgs, loader: &Loader) -> Result<PluginFile> {
    let mut file = match (&args.file, &args.module) {
        (Some(path), _) => PluginFile::read(path)?,
        (None, Some(module)) => pull(args, module, loader).await?,
        (None, None) => bail!("give the plugin file, or --module oci://…"),
    };
    if let Some(path) = &args.settings {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --settings {}", path.display()))?;
        let value: serde_json::Value = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("--settings {}: not YAML or JSON", path.display()))?;
        file.set_settings(&value, path)?;
    }
    Ok(file)
}

/// The module of `--module`, pulled (a tag resolved to its digest first) and checked as
/// `run` pulls a Plugin object's, named after the plugin it describes itself as (its
/// approval is looked up by that name, as a Plugin object's by the object's).
async fn pull(args: &PlanArgs, module: &str, loader: &Loader) -> Result<PluginFile> {
    let reference: kubewasm_oci::Reference = module.parse()?;
    let oci = kubewasm_oci::Client::new(&args.registry.config())?;
    let creds = args.registry.auths()?.for_registry(reference.registry());
    let digest = match reference.digest() {
        Some(d) => d.to_string(),
        None => oci.resolve(&reference, &creds).await?,
    };
    let store_dir = tempfile_dir()?;
    let store = kubewasm_oci::Store::open(&store_dir)?;
    let pinned = reference.pinned(&digest);
    let pulled = oci
        .pull_wasm(&pinned, &creds, &store, args.max_module_mib << 20)
        .await;
    let _ = std::fs::remove_dir_all(&store_dir);
    let pulled = pulled?;
    let digest = pulled
        .layer_digest
        .trim_start_matches("sha256:")
        .to_string();
    // Named after the pinned reference, so messages say where it came from.
    let file = |name: &str| PluginFile {
        path: PathBuf::from(pinned.to_string()).join(format!("{name}.wasm")),
        bytes: pulled.bytes.clone(),
        digest: digest.clone(),
        settings: None,
        overrides: Default::default(),
        tenant: None,
    };
    // Described once under a placeholder name to learn its own (which it must be
    // loaded as); compiled once (the loader keeps the component).
    let name = match loader.load(file(PLACEHOLDER)).await {
        Ok(loaded) => loaded.plugin.manifest.name,
        Err(kubewasm::runtime::Error::Manifest { path, reason }) => match *reason {
            ManifestRejection::NameMismatch { name, .. } => name,
            reason => {
                let reason = Box::new(reason);
                return Err(kubewasm::runtime::Error::Manifest { path, reason }.into());
            }
        },
        Err(e) => return Err(e.into()),
    };
    Ok(file(&name))
}

/// The name a pulled module is described under before its own is known (no plugin name
/// has a dot, so it is never a plugin's own).
const PLACEHOLDER: &str = "module.pulled";

/// A fresh directory private to this process for the pulled module's store.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kubewasm-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
