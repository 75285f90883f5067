//! Per-plugin resource limits.

use std::time::Duration;

/// Limits applied to every call into a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one call (enforced with epoch interruption).
    pub deadline: Duration,
    /// Maximum linear memory of an instance, in bytes.
    pub memory: usize,
    /// Maximum number of intents one call may return.
    pub max_intents: usize,
    /// Maximum size of one intent's JSON, in bytes.
    pub max_intent_bytes: usize,
    /// Maximum log lines per call; further lines are dropped and counted.
    pub max_log_lines: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(2),
            memory: 256 << 20,
            max_intents: 256,
            max_intent_bytes: 1 << 20,
            max_log_lines: 100,
        }
    }
}
