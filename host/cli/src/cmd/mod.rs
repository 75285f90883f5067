//! One module per subcommand.

pub mod dev;
pub mod inspect;
pub mod rbac;
pub mod run;
pub mod test;
