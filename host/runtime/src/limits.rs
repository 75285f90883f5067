//! Per-plugin resource limits.

use std::time::Duration;

/// Limits applied to every call into a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Deadline of one call, in guest execution time: the CPU time the call's thread
    /// spent running it (guest code and the host functions it called), not time spent
    /// waiting for a tokio worker or a CPU. A wall-clock backstop of
    /// `WALL_CLOCK_FACTOR` (10) times this catches a call that waits instead of running.
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
    /// Instances of a plugin alive at once (running a call or pooled); a call that finds
    /// none free waits for one instead of instantiating another. 0 derives the cap from
    /// memory (`Limits::live_instances`).
    pub max_instances: usize,
    /// The tenant namespace the plugin belongs to (a `NamespacedPlugin`'s): its calls
    /// take that namespace's part of the call budget (`--tenant-budget-share`) before
    /// the global budget, and its memory cap is clamped to that part. None: a cluster
    /// plugin. Set by the loader from [`PluginFile::tenant`](crate::loader::PluginFile).
    pub tenant: Option<String>,
}

/// Wall-clock time a call may take, as a multiple of its deadline, however little of it
/// was spent executing (a plugin sleeping or polling in WASI does not execute).
pub(crate) const WALL_CLOCK_FACTOR: u32 = 10;

/// An instance whose memory exceeds `memory / RECYCLE_MEMORY_DIVISOR` when a call returns
/// is not pooled: linear memory never shrinks, so keeping it would keep its peak.
pub(crate) const RECYCLE_MEMORY_DIVISOR: usize = 2;

/// Derived live-instance cap per CPU. A call only computes: the host functions it imports
/// answer from memory (reads come from the watch cache) and the intents are applied after
/// it returned its instance, so calls beyond the CPUs that can run them only interleave
/// and hold one more instance's memory each. Two per CPU leaves room for a call that has
/// just been preempted at an epoch tick.
pub(crate) const LIVE_INSTANCES_PER_CPU: usize = 2;

impl Limits {
    /// Live instances a plugin may have: `max_instances` if set, else as many as
    /// `pool_memory` holds at `instance_memory` bytes each (the memory an instance was
    /// seen to hold), at most [`LIVE_INSTANCES_PER_CPU`] per CPU of this process (cgroup
    /// quotas included), at least one; never more than `concurrency`.
    pub(crate) fn live_instances(&self, instance_memory: usize, concurrency: usize) -> usize {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.live_instances_on(instance_memory, concurrency, cpus)
    }

    /// [`Limits::live_instances`] for a machine with `cpus` CPUs.
    pub(crate) fn live_instances_on(
        &self,
        instance_memory: usize,
        concurrency: usize,
        cpus: usize,
    ) -> usize {
        let concurrency = concurrency.max(1);
        if self.max_instances > 0 {
            return self.max_instances.min(concurrency);
        }
        let by_cpu = cpus.max(1).saturating_mul(LIVE_INSTANCES_PER_CPU);
        (self.pool_memory / instance_memory.max(1)).clamp(1, concurrency.min(by_cpu))
    }

    /// The wall-clock backstop of one call.
    pub(crate) fn wall_clock(&self) -> Duration {
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
            max_instances: 0,
            tenant: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_instances_follow_memory_unless_set() {
        let limits = Limits {
            pool_memory: 64 << 20,
            ..Limits::default()
        };
        // Big instances (an interpreter): the budget bites.
        assert_eq!(limits.live_instances_on(13 << 20, 16, 16), 4);
        // Small ones (Rust): one per concurrent call, on CPUs enough to run them.
        assert_eq!(limits.live_instances_on(1 << 20, 16, 16), 16);
        // Two CPUs run two calls: four instances are enough whatever their size.
        assert_eq!(limits.live_instances_on(1 << 20, 16, 2), 4);
        // Bigger than the budget: still one.
        assert_eq!(limits.live_instances_on(100 << 20, 16, 16), 1);
        assert_eq!(limits.live_instances_on(0, 0, 0), 1);
        let set = Limits {
            max_instances: 3,
            ..limits
        };
        // Set explicitly: taken as is (up to the concurrency), whatever the CPUs.
        assert_eq!(set.live_instances_on(1 << 20, 16, 1), 3);
        assert_eq!(set.live_instances_on(1 << 20, 2, 16), 2);
    }
}
