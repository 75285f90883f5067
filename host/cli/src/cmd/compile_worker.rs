//! `kubewasm compile-worker` (hidden): the worker side of
//! [`Compiler::Worker`](kubewasm::runtime::compiler::Compiler). Enters its Landlock
//! sandbox ([`landlock`]), then reads a component on stdin, writes it compiled on stdout,
//! exits; a message on stderr when it fails.

use std::io::Write as _;
use std::path::PathBuf;

use kubewasm::runtime::compiler::{self, landlock};

/// The worker's arguments: none but a hidden test hook.
#[derive(clap::Args, Debug, Default)]
pub struct CompileWorkerArgs {
    /// Test hook (tests/limits.rs): after entering the sandbox, try to read this file
    /// instead of compiling, and say on stdout whether it could (`read N bytes` or
    /// `denied: ERROR`). The sandbox is the same; only what is tried differs.
    #[arg(long, hide = true)]
    pub read_probe: Option<PathBuf>,
}

/// Enter the sandbox, serve one compile, and exit with the protocol's status. Called
/// before any thread is started: Landlock restricts the calling thread and those it
/// starts afterwards.
pub fn command(args: &CompileWorkerArgs) -> ! {
    // A kernel that offers Landlock but refuses the restriction: no compile unconfined.
    if let Err(e) = landlock::restrict_self() {
        let _ = writeln!(std::io::stderr(), "entering the Landlock sandbox: {e}");
        std::process::exit(1);
    }
    if let Some(path) = &args.read_probe {
        match std::fs::read(path) {
            Ok(bytes) => println!("read {} bytes", bytes.len()),
            Err(e) => println!("denied: {e}"),
        }
        std::process::exit(0);
    }
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    match compiler::serve(stdin, std::io::BufWriter::new(stdout)) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{e}");
            std::process::exit(e.exit_code())
        }
    }
}
