//! One module per subcommand.

pub mod build;
pub mod dev;
pub mod inspect;
pub mod new;
pub mod rbac;
pub mod run;
pub mod test;
