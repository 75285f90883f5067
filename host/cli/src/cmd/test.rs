//! `kubewasm test`: run a plugin's real `.wasm` against YAML test cases, through `run`'s
//! pipeline on an embedded API server per case (`kubewasm::cases::replay`).
//!
//! The file format: [`FORMAT`], shown by `kubewasm test --help` and written into every
//! project `kubewasm new` makes (as `tests/README.md`); the full account is
//! `plugins/conformance/README.md`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use kubewasm::cases::replay::{self, RunOptions};

/// The test-case format, short: the long help of `kubewasm test` and a generated
/// project's `tests/README.md`.
pub const FORMAT: &str = include_str!("../../templates/common/tests-README.md");

/// Flags of `kubewasm test`.
#[derive(Args, Debug)]
#[command(after_long_help = FORMAT)]
pub struct TestArgs {
    /// Test-case files or directories (every .yaml/.yml, recursively).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Run every case against this plugin file instead of the case's `plugin:`.
    #[arg(long, value_name = "FILE")]
    plugin: Option<PathBuf>,
    /// The operator's approvals, as `kubewasm run --approvals` takes them (Plugin objects):
    /// each case runs under its plugin's approval there, unless it has its own
    /// `approval:`. Without it, a case without `approval:` approves exactly what the
    /// plugin asks for.
    #[arg(long, value_name = "PATH")]
    approvals: Option<PathBuf>,
    /// CustomResourceDefinitions (every .yaml/.yml in DIR) every case's embedded API
    /// server holds before the case's own objects; a case's CRD of the same name wins.
    #[arg(long, value_name = "DIR")]
    crds: Option<PathBuf>,
    /// Rewrite each case's expectation with the plugin's actual output.
    #[arg(long)]
    update: bool,
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR", help = super::usercache::CACHE_DIR_HELP)]
    cache_dir: Option<PathBuf>,
    /// Which instances run the cases: `fresh` (a new instance per case), `reused` (all
    /// cases of a plugin and settings through one instance, in order, as `run` reuses
    /// its pooled instances), or `both` (each case both ways; catches a plugin that keeps
    /// state between calls, for the cost of one warm call per case).
    #[arg(long, value_enum, default_value = "both")]
    instances: Instances,
}

/// Which instances run the cases.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Instances {
    /// A new instance for every case.
    Fresh,
    /// One instance per plugin and settings, reused by every case in order.
    Reused,
    /// Every case on a fresh instance and on the reused one.
    #[default]
    Both,
}

impl From<Instances> for replay::Instances {
    fn from(i: Instances) -> Self {
        match i {
            Instances::Fresh => replay::Instances::Fresh,
            Instances::Reused => replay::Instances::Reused,
            Instances::Both => replay::Instances::Both,
        }
    }
}

/// `kubewasm test`: print the report; exit 1 when any case failed.
pub async fn command(args: TestArgs) -> Result<()> {
    let cache = super::usercache::CodeCache::choose(args.cache_dir);
    let opts = RunOptions {
        plugin: args.plugin,
        update: args.update,
        cache_dir: cache.dir,
        cache_key_file: cache.key_file,
        instances: args.instances.into(),
        approvals: args.approvals,
        crds: args.crds,
    };
    let report = replay::run(&args.paths, &opts).await?;
    // The summary ends the output with a newline, so a shell prompt starts on its own
    // line; flushed by hand since `exit` skips stdout's destructor.
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(report.text.as_bytes())?;
    if !report.text.ends_with('\n') {
        stdout.write_all(b"\n")?;
    }
    stdout.flush()?;
    if report.failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
