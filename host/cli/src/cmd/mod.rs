//! One module per subcommand.

pub mod approve;
pub mod build;
pub mod compile_worker;
pub mod componentize;
pub mod copy_plugins;
pub mod dev;
pub mod inspect;
pub mod new;
pub mod push;
pub mod rbac;
pub(crate) mod registry_args;
pub mod run;
pub mod test;
pub mod usercache;

/// The hidden subcommand a compile worker runs (see `compile_worker`).
pub const COMPILE_WORKER: &str = "compile-worker";
