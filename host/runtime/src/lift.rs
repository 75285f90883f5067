//! How much the host copies out of a plugin in one call, bounded whatever the plugin
//! returns.
//!
//! Canonical-ABI strings and lists are pointer + length into the guest's memory, so a
//! plugin can return 100 strings that all point at one 16 MiB buffer: 16 MiB for the
//! guest, 1.6 GiB for a host that copies each one. The bound is wasmtime's hostcall fuel
//! ([`Store::set_hostcall_fuel`]): every lift from the guest (the results of `describe`
//! and `handle`, `handle-error.message` with them, and the arguments of every host
//! import) is charged the bytes of each string and the host size of each list *before*
//! that string or list is copied, and fails once the fuel is spent. The fuel is the
//! plugin's memory cap: a plugin that does not alias cannot hand over more than its
//! memory holds, so no honest plugin is refused, and a single lift never costs the host
//! more than one cap.
//!
//! Why not lift lazily (`WasmStr`/`WasmList` results through a `TypedFunc`, lengths
//! checked before copying): in wasmtime 48 a typed call runs the export's post-return
//! function before it returns, and post-return frees the result in the guest, whose
//! allocator then writes its free-list links into those bytes; reading a `WasmStr` after
//! the call reads freed, partly overwritten memory. Fuel is checked inside the lift, while
//! the result is still intact. Host imports are different: their arguments stay valid
//! while the import runs, so the `log` import takes a `WasmStr` and copies only the part
//! of the line it keeps (see [`crate::capability::log`]).

use wasmtime::{Store, Trap};

use crate::error::{CallError, LimitExceeded};
use crate::limits::Limits;
use crate::state::PluginState;

/// Bytes the host copies out of the plugin in one lift (a call's results, or one import's
/// arguments): the plugin's memory cap.
pub(crate) fn transfer_budget(limits: &Limits) -> usize {
    limits.memory
}

/// Give a new store its transfer budget (the fuel is a per-store setting, applied afresh
/// to every lift).
pub(crate) fn bound_transfers(store: &mut Store<PluginState>, limits: &Limits) {
    store.set_hostcall_fuel(transfer_budget(limits));
}

/// A failed `describe` or `handle` call that is neither a trap, the memory cap nor the
/// guest exiting: the canonical ABI refused what the plugin passed the host (over the
/// transfer budget, or malformed: out-of-bounds pointers, invalid UTF-8, bad
/// discriminants). Those are the only errors a call raises without a trap, since the host
/// imports return their failures to the guest as values. Not retried hot: the same
/// event gets the same result.
pub(crate) fn refused_transfer(
    err: &wasmtime::Error,
    store: &Store<PluginState>,
) -> Option<CallError> {
    if store.data().memory.exceeded
        || err.downcast_ref::<Trap>().is_some()
        || err.downcast_ref::<wasmtime_wasi::I32Exit>().is_some()
    {
        return None;
    }
    Some(
        LimitExceeded::Transfer {
            max: store.hostcall_fuel(),
            detail: kubewasm_core::excerpt::excerpt(
                &format!("{err:#}"),
                crate::capability::log::MAX_LOG_LINE_BYTES,
            )
            .into_owned(),
        }
        .into(),
    )
}
