//! The per-store state of a plugin instance: one field per capability, plus the call's
//! deadline and the memory cap. The `kubewasm:plugin/host` imports delegate to the
//! capability modules.

use std::time::Instant;

use wasmtime_wasi::{WasiCtxView, WasiView};

use crate::bindings::kubewasm::plugin::{host, types};
use crate::capability::cluster::ClusterState;
use crate::capability::log::LogState;
use crate::capability::wasi::WasiState;
use crate::limits::Limits;

/// Data of one plugin store.
pub struct PluginState {
    pub(crate) wasi: WasiState,
    pub(crate) log: LogState,
    pub(crate) cluster: ClusterState,
    pub(crate) memory: MemoryCap,
    pub(crate) deadline: Instant,
}

impl PluginState {
    /// A fresh state: deny-all WASI, no cluster view, the memory cap applied.
    pub(crate) fn new(plugin: &str, limits: &Limits) -> Self {
        PluginState {
            wasi: WasiState::new(),
            log: LogState::new(plugin, limits.max_log_lines),
            cluster: ClusterState::new(plugin),
            memory: MemoryCap {
                max: limits.memory,
                exceeded: false,
            },
            deadline: Instant::now(),
        }
    }
}

/// Caps an instance's memory and remembers that it refused to grow, so a failed call
/// is classified as "memory limit" by a flag rather than by parsing a message.
pub(crate) struct MemoryCap {
    pub(crate) max: usize,
    pub(crate) exceeded: bool,
}

/// Table elements an instance may have; generous, only a guard against runaway growth.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.exceeded = true;
            return Err(wasmtime::Error::msg(format!(
                "memory limit of {} bytes exceeded (wanted {desired})",
                self.max
            )));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi.view()
    }
}

impl types::Host for PluginState {}

impl host::Host for PluginState {
    fn log(&mut self, level: types::LogLevel, message: String) {
        self.log.write(level, message);
    }

    fn get(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, String> {
        self.cluster
            .get(&api_version, &kind, namespace.as_deref(), &name)
    }

    fn list(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, String> {
        self.cluster.list(
            &api_version,
            &kind,
            namespace.as_deref(),
            label_selector.as_deref(),
        )
    }
}
