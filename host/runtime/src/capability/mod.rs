//! The host capabilities a plugin imports, one module each (Spin-style), each with the
//! same lifecycle:
//!
//! 1. **link**: added to the engine's one `Linker` when [`PluginEngine`](crate::PluginEngine)
//!    is built (`wasi::link`, and the `kubewasm:plugin/host` interface whose functions are
//!    implemented by `log` and [`cluster`]);
//! 2. **instantiate**: each store gets the capability's state, fresh (`*::new`);
//! 3. **call**: before each call the state is pointed at the call (`begin_call`); after it
//!    the host reads what it must report (`end_call`) and drops what the call lent it.
//!
//! Nothing else in the runtime touches a capability's state.

pub(crate) mod cluster;
pub(crate) mod log;
pub(crate) mod wasi;
