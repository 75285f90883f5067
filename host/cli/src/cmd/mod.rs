//! One module per subcommand.

pub mod approve;
pub mod build;
pub mod compile_worker;
pub mod componentize;
pub mod copy_plugins;
pub mod dev;
pub mod inspect;
pub mod new;
pub mod plan;
pub mod preview;
pub mod push;
pub mod rbac;
pub(crate) mod registry_args;
pub mod run;
pub mod test;
pub mod usercache;

/// The hidden subcommand a compile worker runs (see `compile_worker`).
pub const COMPILE_WORKER: &str = "compile-worker";

/// How every command that loads plugins others wrote (`run`, `dev`, `rbac`, `inspect`)
/// compiles them: in a worker process ([`COMPILE_WORKER`]) stopped after `timeout` and
/// limited to `address_space` bytes, so a crafted file costs a refused file, not the
/// command.
pub fn worker_compiler(
    timeout: std::time::Duration,
    address_space: u64,
) -> Result<kubewasm::runtime::compiler::Compiler, kubewasm::runtime::Error> {
    use kubewasm::runtime::compiler::{Compiler, Worker, landlock};
    // Said once, at start: what the kernel lets the worker give up.
    match landlock::support() {
        landlock::Support::Abi(abi) => tracing::info!(
            landlock_abi = abi,
            denied = landlock::Support::Abi(abi).denied(),
            "compile worker sandbox: Landlock"
        ),
        landlock::Support::None => tracing::warn!(
            "compile worker sandbox: this kernel offers no Landlock; the worker runs with an \
             empty environment, no inherited descriptors and its rlimits, but could open any \
             file the host's user may read"
        ),
    }
    Ok(Compiler::Worker(
        Worker::this_executable([COMPILE_WORKER])?
            .with_timeout(timeout)
            .with_address_space(address_space),
    ))
}
