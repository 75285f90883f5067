//! Per-plugin resource limits.

use std::time::Duration;

/// Limits applied to every call into a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Deadline of one call, in guest execution time: the CPU time the call's thread
    /// spent running it (guest code and the host functions it called), not time spent
    /// waiting for a tokio worker or a CPU. A wall-clock backstop of
    /// [`WALL_CLOCK_FACTOR`] times this catches a call that waits instead of running.
    pub deadline: Duration,
    /// Maximum memory of an instance, in bytes: all of its linear memories and tables
    /// together.
    pub memory: usize,
    /// Maximum number of intents one call may return.
    pub max_intents: usize,
    /// Maximum size of one intent's JSON, in bytes.
    pub max_intent_bytes: usize,
    /// Maximum log lines per call; further lines are dropped and counted.
    pub max_log_lines: usize,
    /// A pooled instance is recycled (dropped, and a fresh one instantiated when needed)
    /// after this many calls, so state a plugin accumulates (heap fragmentation, caches,
    /// leaks) does not live forever.
    pub recycle_after_calls: u64,
    /// Memory all of a plugin's pooled (idle) instances may hold together, in bytes. An
    /// instance that would take the pool over it is dropped instead of pooled.
    pub pool_memory: usize,
}

/// Wall-clock time a call may take, as a multiple of its deadline, however little of it
/// was spent executing (a plugin sleeping or polling in WASI does not execute).
pub const WALL_CLOCK_FACTOR: u32 = 10;

/// An instance whose memory exceeds `memory / RECYCLE_MEMORY_DIVISOR` when a call returns
/// is not pooled: linear memory never shrinks, so keeping it would keep its peak.
pub const RECYCLE_MEMORY_DIVISOR: usize = 2;

impl Limits {
    /// The wall-clock backstop of one call.
    pub fn wall_clock(&self) -> Duration {
        self.deadline.saturating_mul(WALL_CLOCK_FACTOR)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(2),
            memory: 256 << 20,
            max_intents: 256,
            max_intent_bytes: 1 << 20,
            max_log_lines: 100,
            recycle_after_calls: 1000,
            pool_memory: 256 << 20,
        }
    }
}
