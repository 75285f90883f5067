//! WASI, linked because components from most languages import it (Python, JavaScript, C,
//! Go), with a context that grants only what language runtimes need to start and run:
//!
//! | WASI interface | what a plugin gets |
//! | --- | --- |
//! | `wasi:clocks/wall-clock` | the host's real wall clock (timestamps in status, logs) |
//! | `wasi:clocks/monotonic-clock` | the host's monotonic clock; a sleep on it is a pollable the call's wall-clock backstop ([`crate::limits::WALL_CLOCK_FACTOR`] times the deadline) cuts, so no sleep outlives a call |
//! | `wasi:random/*` | seeded random bytes (hash seeds of Python, Go, JS), at most [`MAX_RANDOM_BYTES`] per request |
//! | `wasi:cli/environment` | no variables, no arguments, no working directory |
//! | `wasi:cli/std{in,out,err}` | stdin closed, output discarded (plugins log through `host.log`) |
//! | `wasi:filesystem/*` | no preopened directory: every path fails |
//! | `wasi:sockets/*` | TCP and UDP sockets refused at creation, every address denied, no name lookup |
//!
//! Both clocks are needed: Go's and Python's runtimes read them at start, and a plugin
//! stamping `lastTransitionTime` needs the wall clock. Neither gives more than the host's
//! `date`; there is no CPU-time or process clock in WASI 0.2 to leak the host's load.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Largest `get-random-bytes` request served (1 MiB); a larger one traps the call.
/// wasmtime-wasi's default (64 MiB) is allocated by the host outside the plugin's memory
/// cap, per request; language runtimes ask for a few KiB (JavaScript's `getRandomValues`
/// is limited to 64 KiB by its specification).
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Most WASI handles (streams, pollables, descriptors) one plugin instance may hold at
/// once. The table lives in the host's memory, outside the plugin's memory cap, and
/// wasmtime-wasi's default lets it grow to 1,000,000 entries (~100 MiB); language runtimes
/// hold a few dozen (stdio streams, a pollable per pending sleep). A plugin that opens
/// more gets WASI's resource-exhausted error.
pub const MAX_WASI_HANDLES: usize = 4096;

/// Per-store state of the WASI capability.
pub struct WasiState {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiState {
    /// Instantiate: a deny-all context but for the clocks and random. `WasiCtx::builder()`
    /// grants no directories, environment, arguments or stdio unless asked; sockets are
    /// refused at creation, so a plugin never holds an OS socket (a hostile one cannot
    /// exhaust the host's file descriptors), whatever wasmtime-wasi's defaults become.
    pub fn new() -> Self {
        WasiState {
            ctx: WasiCtx::builder()
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false)
                .socket_addr_check(|_, _| Box::pin(async { false }))
                .max_random_size(MAX_RANDOM_BYTES)
                .build(),
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(MAX_WASI_HANDLES);
                table
            },
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

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::p2::bindings::random::{insecure, random};

    #[test]
    fn the_handle_table_is_capped() {
        let mut state = WasiState::new();
        let table = state.view().table;
        for i in 0..MAX_WASI_HANDLES {
            assert!(table.push(i).is_ok(), "entry {i}");
        }
        let err = table.push(0usize).unwrap_err();
        assert!(
            matches!(err, wasmtime::component::ResourceTableError::Full),
            "{err}"
        );
    }

    #[test]
    fn random_requests_are_capped() {
        let mut state = WasiState::new();
        let r = state.ctx.random();
        let max = MAX_RANDOM_BYTES;
        assert_eq!(
            random::Host::get_random_bytes(r, max).unwrap().len() as u64,
            max
        );
        assert!(random::Host::get_random_bytes(r, max + 1).is_err());
        assert!(insecure::Host::get_insecure_random_bytes(r, max + 1).is_err());
        // Seeded: two requests differ.
        let a = random::Host::get_random_bytes(r, 32).unwrap();
        assert_ne!(a, random::Host::get_random_bytes(r, 32).unwrap());
    }
}
