//! The `kubewasm` command line. Each subcommand lives in `cmd/`; nothing here is library
//! API (the engine is the `kubewasm` crate).
// `deny`, not `forbid`: the allocator policy (`malloc_policy`) and giving back resident
// memory (`resident`) are audited libc calls.
#![deny(unsafe_code)]

mod cmd;
mod logfmt;
mod malloc_policy;
mod resident;
mod traces;

use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use cmd::{
    approve, build, compile_worker, componentize, copy_plugins, dev, inspect, new, plan, preview,
    push, rbac, run, test,
};

/// kubewasm: react to any Kubernetes resource with WebAssembly plugins.
///
/// Plugins (`NAME.wasm`, optional `NAME.yaml` settings) declare what they watch and what
/// they may write; the host watches those kinds, calls the plugins with each change as
/// JSON, and applies the intents they return with server-side apply.
#[derive(Parser, Debug)]
#[command(
    name = "kubewasm",
    version,
    propagate_version = true,
    args_override_self = true
)]
struct Cli {
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "KUBEWASM_LOG_FORMAT"
    )]
    log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax), e.g. `info`, `kubewasm=debug`.
    #[arg(long, global = true, default_value = "info", env = "KUBEWASM_LOG")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the host against a cluster (kubeconfig, else in-cluster configuration).
    ///
    /// Traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    /// set, one OpenTelemetry trace per event goes out over OTLP/HTTP (protobuf), and the
    /// event's log lines carry its trace_id; the other OTEL_* variables apply (README).
    Run(run::RunArgs),
    /// Start an embedded API server, apply manifests, and run the host on it: a demo and
    /// plugin sandbox that needs no cluster.
    Dev(dev::DevArgs),
    /// Print a plugin's WIT world and manifest (calls `describe`; needs no cluster).
    Inspect(inspect::InspectArgs),
    /// Print the least-privilege RBAC (ServiceAccounts, Roles/ClusterRoles, bindings) the
    /// host and its plugins need, derived from the operator's approvals (Plugin objects
    /// from files or the cluster, or --plugins DIR --approvals PATH), as YAML for
    /// `kubectl apply -f -`.
    Rbac(rbac::RbacArgs),
    /// Print, for review, a Plugin object (kubewasm.dev/v1alpha1) approving exactly what a
    /// plugin asks for, and its RBAC, as one YAML stream for `kubectl apply -f -` (or, without
    /// --module, for --approvals in directory mode); with --namespace NS, a team's
    /// NamespacedPlugin and its RBAC, all in NS.
    Approve(approve::ApproveArgs),
    /// Show what a plugin would do to a live cluster, writing nothing: calls it once per
    /// watched object (as a resync) and sends each write it returns with dryRun=All as
    /// its ServiceAccount, through `run`'s pipeline; prints `+` create, `~` update (field
    /// diff), `-` delete, `!` refused. Exits 0 when nothing would change, 2 when something
    /// would, 1 on error.
    Plan(plan::PlanArgs),
    /// Run plugins against YAML test cases through `run`'s pipeline, on an embedded API
    /// server per case (the case format ends `kubewasm test --help`).
    /// Prints a diff for each failing case and ends with `N passed, N failed`; exits 1 on
    /// any failure.
    Test(test::TestArgs),
    /// What a plugin in dry run (`spec.mode: DryRun`) or its shadow candidate would do:
    /// `preview report PLUGIN` prints a running host's report as a terraform-like diff.
    Preview(preview::PreviewArgs),
    /// Create a standalone plugin project (Rust, Go, Python, JavaScript or C) in a new
    /// folder: source with a watch, a grant and a handler, the vendored WIT and language
    /// layer, settings, its approval, two test cases and a README. `kubewasm build &&
    /// kubewasm test --approvals approvals tests/` in it builds and tests it.
    New(new::NewArgs),
    /// Build a plugin project made by `kubewasm new` (language detected) into
    /// dist/NAME.wasm and dist/NAME.yaml, installing the pinned toolchain when missing.
    Build(build::BuildArgs),
    /// Publish a plugin component to an OCI registry; prints its pinned reference last.
    ///
    /// The component goes out as a Wasm OCI artifact (config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer); the last line of
    /// stdout is its pinned reference, oci://HOST[:PORT]/REPO@sha256:..., for a Plugin's
    /// spec.module.
    Push(push::PushArgs),
    /// Copy a plugin directory's files into another, read-only: the init container of the
    /// plugin-image route (deploy/), whose images have no shell and no `cp`.
    CopyPlugins(copy_plugins::CopyPluginsArgs),
    /// Internal: compile the component on stdin for `run` and `dev`, which start this in a
    /// worker process so the compiler's memory never stays in the host.
    #[command(name = cmd::COMPILE_WORKER, hide = true)]
    CompileWorker(compile_worker::CompileWorkerArgs),
    /// Internal: write the Go or C bindings this binary carries (plugins/{go,c}/build.sh).
    #[command(hide = true)]
    Bindings(componentize::BindingsArgs),
    /// Internal: make a component of a core wasm module (plugins/{go,c}/build.sh).
    #[command(hide = true)]
    Componentize(componentize::ComponentizeArgs),
}

fn init_logging(cli: &Cli) -> Result<()> {
    let mut filter = EnvFilter::try_new(&cli.log).context("bad --log filter")?;
    // kube's watcher warns on every failed list with the error's debug form; the host
    // reports watch errors itself, once per change (unless asked for kube_runtime).
    if !cli.log.contains("kube_runtime") {
        filter = filter.add_directive(
            "kube_runtime::watcher=error"
                .parse()
                .context("the kube_runtime log directive")?,
        );
    }
    match cli.log_format {
        // Each field once: the event's own, then the spans' it does not name (logfmt).
        LogFormat::Text => tracing_subscriber::registry()
            .with(filter)
            .with(logfmt::SpanFields)
            .with(
                tracing_subscriber::fmt::layer()
                    .event_format(logfmt::Text)
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::stderr().is_terminal()),
            )
            .try_init()
            .context("installing the logger")?,
        LogFormat::Json => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .init(),
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    // Before any other thread exists.
    malloc_policy::apply();
    let cli = Cli::parse();
    // The worker needs neither logging nor an async runtime.
    if let Command::CompileWorker(args) = &cli.command {
        compile_worker::command(args);
    }
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
        .and_then(|runtime| runtime.block_on(run_command(cli)));
    // A replica that lost its Lease is not a crash: its own exit code (deploy/README.md).
    if let Err(e) = &result
        && let Some(lost @ kubewasm::Error::LostLease { lease }) = e.downcast_ref()
    {
        tracing::error!(lease = %lease, exit_code = run::EXIT_LOST_LEASE, "{lost}");
        std::process::exit(run::EXIT_LOST_LEASE);
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprint!("{}", error_report(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// A failed command's message for its user: the error and its causes, as anyhow prints
/// them, but never a backtrace (even with RUST_BACKTRACE set): the failure is the user's to
/// fix (a build step, a missing file), not a bug in kubewasm; panics still print theirs.
fn error_report(err: &anyhow::Error) -> String {
    let mut out = format!("Error: {err}\n");
    let causes: Vec<String> = err.chain().skip(1).map(ToString::to_string).collect();
    if !causes.is_empty() {
        out.push_str("\nCaused by:\n");
        for (i, cause) in causes.iter().enumerate() {
            out.push_str(&format!("    {i}: {cause}\n"));
        }
    }
    out
}

async fn run_command(cli: Cli) -> Result<()> {
    init_logging(&cli)?;
    // The hosts' events as OpenTelemetry traces, when OTEL_* names an endpoint.
    let traces = match &cli.command {
        Command::Run(_) | Command::Dev(_) => traces::Traces::from_env()?,
        _ => None,
    };
    let result = match cli.command {
        Command::Run(args) => run::command(args).await,
        Command::Dev(args) => dev::command(args).await,
        Command::Test(args) => test::command(args).await,
        Command::Rbac(args) => rbac::command(args).await,
        Command::Approve(args) => approve::command(args).await,
        Command::Plan(args) => plan::command(args).await,
        Command::Inspect(args) => inspect::command(args).await,
        Command::Preview(args) => preview::command(args).await,
        Command::New(args) => new::command(args),
        Command::Build(args) => build::command(args).await,
        Command::Push(args) => push::command(args).await,
        Command::CopyPlugins(args) => copy_plugins::command(args),
        Command::Bindings(args) => componentize::bindings_command(args),
        Command::Componentize(args) => componentize::componentize_command(args),
        Command::CompileWorker(_) => unreachable!("handled before the runtime starts"),
    };
    if let Some(traces) = traces {
        traces.shutdown().await;
    }
    result
}
