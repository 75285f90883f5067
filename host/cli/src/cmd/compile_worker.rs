//! `kubewasm compile-worker` (hidden): the worker side of
//! [`Compiler::Worker`](kubewasm::runtime::compiler::Compiler). Reads a component on
//! stdin, writes it compiled on stdout, exits; a message on stderr when it fails.

use std::io::Write as _;

use kubewasm::runtime::compiler;

/// Serve one compile and exit with the protocol's status.
pub fn command() -> ! {
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
