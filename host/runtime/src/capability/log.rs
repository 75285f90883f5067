//! `host.log`: the plugin's log lines, written through `tracing` with a per-call line cap
//! and a per-line byte cap, inside the handler's span (which names plugin and object).
//! Each line is an [`excerpt`]: control characters (newlines that would forge lines of
//! their own, terminal escapes) escaped.
//!
//! The import is linked by hand ([`link`]) rather than through the generated bindings,
//! which would copy the whole message first: it takes the message as a `WasmStr` (a
//! checked pointer and length into the guest's memory) and copies only the
//! [`MAX_LOG_LINE_BYTES`] it keeps, so a plugin logging one 16 MiB buffer a hundred times
//! costs the host 4 KiB a line.

use kubewasm_core::excerpt::excerpt;
use wasmtime::AsContext;
use wasmtime::component::{Linker, WasmStr};

use crate::bindings::types::LogLevel;
use crate::state::PluginState;

/// Define the `log` import over the generated one (which must be linked first, for the
/// interface's other functions).
pub(crate) fn link(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    // Every version of the interface: the functions are the same.
    let defined = crate::bindings::HOST_INTERFACES
        .iter()
        .try_for_each(|interface| {
            let mut host = linker.instance(interface)?;
            host.func_wrap(
                "log",
                |mut store: wasmtime::StoreContextMut<'_, PluginState>,
                 (level, message): (LogLevel, WasmStr)| {
                    // Validates the string (no copy for UTF-8) and keeps the line's prefix.
                    let line = excerpt(&message.to_str(store.as_context())?, MAX_LOG_LINE_BYTES)
                        .into_owned();
                    store.data_mut().log.emit(level, line);
                    Ok(())
                },
            )
        });
    linker.allow_shadowing(false);
    defined
}

/// Longest log line a plugin may write; longer lines are truncated.
pub(crate) const MAX_LOG_LINE_BYTES: usize = 4096;

/// Per-store state of the log capability.
pub(crate) struct LogState {
    plugin: String,
    object: String,
    lines: usize,
    dropped: usize,
    max_lines: usize,
}

impl LogState {
    /// Instantiate: a fresh state for `plugin`, at most `max_lines` lines per call.
    pub(crate) fn new(plugin: &str, max_lines: usize) -> Self {
        LogState {
            plugin: plugin.to_string(),
            object: String::new(),
            lines: 0,
            dropped: 0,
            max_lines,
        }
    }

    /// Start of a call: the object it handles (`Kind namespace/name`), counts reset.
    pub(crate) fn begin_call(&mut self, object: &str) {
        self.object = object.to_string();
        self.lines = 0;
        self.dropped = 0;
    }

    /// End of a call: how many lines were dropped over the cap.
    pub(crate) fn end_call(&self) -> usize {
        self.dropped
    }

    /// Write a line, excerpted to [`MAX_LOG_LINE_BYTES`].
    pub(crate) fn write(&mut self, level: LogLevel, message: String) {
        let line = excerpt(&message, MAX_LOG_LINE_BYTES).into_owned();
        self.emit(level, line);
    }

    /// Write a line already cut to size, unless the call's line cap is reached.
    fn emit(&mut self, level: LogLevel, message: String) {
        if self.lines >= self.max_lines {
            self.dropped += 1;
            return;
        }
        self.lines += 1;
        let (plugin, object) = (self.plugin.as_str(), self.object.as_str());
        match level {
            LogLevel::Trace => tracing::trace!(target: "plugin", plugin, object, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "plugin", plugin, object, "{message}"),
            LogLevel::Info => tracing::info!(target: "plugin", plugin, object, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "plugin", plugin, object, "{message}"),
            LogLevel::Error => tracing::error!(target: "plugin", plugin, object, "{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_control_characters_escaped() {
        // What `emit` gets from the import: an excerpt of a borrowed line.
        let long = "x".repeat(1 << 20);
        let cut = excerpt(&long, MAX_LOG_LINE_BYTES);
        assert!(cut.len() < MAX_LOG_LINE_BYTES + 64, "{}", cut.len());
        assert!(cut.ends_with(&format!("({} bytes truncated)", (1 << 20) - 4096)));
        assert_eq!(
            excerpt("ok\n\u{1b}[2Jforged", MAX_LOG_LINE_BYTES),
            "ok\\n\\u{1b}[2Jforged"
        );
    }

    #[test]
    fn lines_over_the_cap_are_counted_not_written() {
        let mut log = LogState::new("p", 2);
        for _ in 0..5 {
            log.write(LogLevel::Info, "x".into());
        }
        assert_eq!(log.end_call(), 3);
        log.begin_call("ConfigMap a/b");
        assert_eq!(log.end_call(), 0);
    }
}
