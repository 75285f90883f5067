//! WASI, linked because components from most languages import it (Python, JavaScript, C,
//! Go), with an empty context: no preopened directories, environment, arguments, stdio or
//! network. Calls into it fail as an empty system would answer them.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Per-store state of the WASI capability.
pub struct WasiState {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiState {
    /// Instantiate: a deny-all context. `WasiCtx::builder()` grants no directories,
    /// environment, arguments or stdio unless asked; sockets are refused at creation, so a
    /// plugin never holds an OS socket (a hostile one cannot exhaust the host's file
    /// descriptors), whatever wasmtime-wasi's defaults become.
    pub fn new() -> Self {
        WasiState {
            ctx: WasiCtx::builder()
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false)
                .socket_addr_check(|_, _| Box::pin(async { false }))
                .build(),
            table: ResourceTable::new(),
        }
    }

    /// The view wasmtime-wasi's host functions use.
    pub fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

impl Default for WasiState {
    fn default() -> Self {
        Self::new()
    }
}

/// Link: add WASI p2 to the engine's linker.
pub fn link<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}
