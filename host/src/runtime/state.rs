//! The per-store state of a plugin instance and the host functions it imports.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::kubewasm::plugin::{host, types};
use super::limits::Limits;

/// Why a cache read was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The plugin neither watches nor declared reading this kind.
    #[error("{0} is not watched or declared in `reads` by this plugin")]
    NotAllowed(String),
    /// The kind is allowed but its cache is not available (resource not served yet).
    #[error("{0} is not cached (is the resource served?)")]
    NotCached(String),
    /// The label selector does not parse.
    #[error("label selector: {0}")]
    Selector(String),
}

/// Read-only view of the cluster a plugin may use through `host.get`/`host.list`,
/// already scoped to what that plugin may read. Implemented by the watch caches in
/// `run`, and by fixtures in `kubewasm test`.
pub trait ClusterView: Send + Sync {
    /// One object as JSON, or None if absent.
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, ReadError>;

    /// Objects of a kind as JSON.
    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ReadError>;
}

/// A view that refuses every read (used while describing a plugin).
pub struct NoCluster;

impl ClusterView for NoCluster {
    fn get(&self, v: &str, k: &str, _: Option<&str>, _: &str) -> Result<Option<String>, ReadError> {
        Err(ReadError::NotAllowed(format!("{v}/{k}")))
    }
    fn list(
        &self,
        v: &str,
        k: &str,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ReadError> {
        Err(ReadError::NotAllowed(format!("{v}/{k}")))
    }
}

/// Data of one plugin store.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) memory: MemoryCap,
    pub(crate) plugin: String,
    pub(crate) cluster: Arc<dyn ClusterView>,
    /// The object being handled, for log lines (`namespace/name`).
    pub(crate) object: String,
    pub(crate) deadline: Instant,
    pub(crate) log_lines: usize,
    pub(crate) logs_dropped: usize,
    pub(crate) max_log_lines: usize,
}

impl PluginState {
    /// A fresh state with a deny-all WASI context and the memory cap applied.
    pub(crate) fn new(plugin: &str, limits: &Limits, cluster: Arc<dyn ClusterView>) -> Self {
        PluginState {
            // No preopened dirs, env, args, stdio or network: WasiCtx::builder() grants none
            // of them unless asked, and sockets/name lookup are denied by default.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            memory: MemoryCap {
                max: limits.memory,
                exceeded: false,
            },
            plugin: plugin.to_string(),
            cluster,
            object: String::new(),
            deadline: Instant::now(),
            log_lines: 0,
            logs_dropped: 0,
            max_log_lines: limits.max_log_lines,
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
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for PluginState {}

impl host::Host for PluginState {
    fn log(&mut self, level: types::LogLevel, message: String) {
        if self.log_lines >= self.max_log_lines {
            self.logs_dropped += 1;
            return;
        }
        self.log_lines += 1;
        let message = truncate(message, super::limits::MAX_LOG_LINE_BYTES);
        let (plugin, object) = (self.plugin.as_str(), self.object.as_str());
        match level {
            types::LogLevel::Trace => {
                tracing::trace!(target: "plugin", plugin, object, "{message}")
            }
            types::LogLevel::Debug => {
                tracing::debug!(target: "plugin", plugin, object, "{message}")
            }
            types::LogLevel::Info => tracing::info!(target: "plugin", plugin, object, "{message}"),
            types::LogLevel::Warn => tracing::warn!(target: "plugin", plugin, object, "{message}"),
            types::LogLevel::Error => {
                tracing::error!(target: "plugin", plugin, object, "{message}")
            }
        }
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
            .map_err(|e| self.refused_read(e))
    }

    fn list(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, String> {
        self.cluster
            .list(
                &api_version,
                &kind,
                namespace.as_deref(),
                label_selector.as_deref(),
            )
            .map_err(|e| self.refused_read(e))
    }
}

impl PluginState {
    /// A refused read is the plugin's to handle, but the operator sees it too.
    fn refused_read(&self, e: ReadError) -> String {
        tracing::warn!(plugin = %self.plugin, object = %self.object, reason = %e, "read refused");
        e.to_string()
    }
}

/// Cut `s` to at most `max` bytes (on a char boundary), saying how much was cut.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = s.len() - cut;
    s.truncate(cut);
    s.push_str(&format!("… ({dropped} bytes truncated)"));
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_lines_are_truncated_on_char_boundaries() {
        assert_eq!(super::truncate("short".into(), 10), "short");
        let t = super::truncate("ééééé".into(), 5);
        assert!(
            t.starts_with("éé") && t.ends_with("(6 bytes truncated)"),
            "{t}"
        );
    }
}
