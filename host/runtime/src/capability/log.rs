//! `host.log`: the plugin's log lines, written through `tracing` with a per-call line cap
//! and a per-line byte cap, inside the handler's span (which names plugin and object).

use crate::bindings::kubewasm::plugin::types::LogLevel;

/// Longest log line a plugin may write; longer lines are truncated.
pub const MAX_LOG_LINE_BYTES: usize = 4096;

/// Per-store state of the log capability.
pub struct LogState {
    plugin: String,
    object: String,
    lines: usize,
    dropped: usize,
    max_lines: usize,
}

impl LogState {
    /// Instantiate: a fresh state for `plugin`, at most `max_lines` lines per call.
    pub fn new(plugin: &str, max_lines: usize) -> Self {
        LogState {
            plugin: plugin.to_string(),
            object: String::new(),
            lines: 0,
            dropped: 0,
            max_lines,
        }
    }

    /// Start of a call: the object it handles (`Kind namespace/name`), counts reset.
    pub fn begin_call(&mut self, object: &str) {
        self.object = object.to_string();
        self.lines = 0;
        self.dropped = 0;
    }

    /// End of a call: how many lines were dropped over the cap.
    pub fn end_call(&self) -> usize {
        self.dropped
    }

    /// The `log` import.
    pub fn write(&mut self, level: LogLevel, message: String) {
        if self.lines >= self.max_lines {
            self.dropped += 1;
            return;
        }
        self.lines += 1;
        let message = truncate(message, MAX_LOG_LINE_BYTES);
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

/// Cut `s` to at most `max` bytes (on a char boundary), saying how much was cut.
pub fn truncate(mut s: String, max: usize) -> String {
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

    #[test]
    fn lines_over_the_cap_are_counted_not_written() {
        let mut log = super::LogState::new("p", 2);
        for _ in 0..5 {
            log.write(super::LogLevel::Info, "x".into());
        }
        assert_eq!(log.end_call(), 3);
        log.begin_call("ConfigMap a/b");
        assert_eq!(log.end_call(), 0);
    }
}
