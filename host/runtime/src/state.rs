//! The per-store state of a plugin instance: one field per capability, plus the call's
//! execution clock and the memory cap. The `kubewasm:plugin/host` imports delegate to the
//! capability modules.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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
    pub(crate) clock: Arc<CallClock>,
}

impl PluginState {
    /// A fresh state: deny-all WASI (but `argv[0]`, the plugin's name, and a stderr kept
    /// for errors), no cluster view, the memory cap applied.
    pub(crate) fn new(plugin: &str, limits: &Limits) -> Self {
        PluginState {
            wasi: WasiState::new(plugin),
            log: LogState::new(plugin, limits.max_log_lines),
            cluster: ClusterState::new(plugin),
            memory: MemoryCap::new(limits.memory),
            clock: Arc::new(CallClock::new(limits)),
        }
    }
}

/// Caps an instance's memory: every linear memory and table of the instance (a component
/// has one store, so all its core instances) counts against one total, so a component
/// with eight memories gets the cap once, not eight times. Remembers that it refused to
/// grow, so a failed call is classified as "memory limit" by a flag rather than by
/// parsing a message.
pub(crate) struct MemoryCap {
    pub(crate) max: usize,
    pub(crate) exceeded: bool,
    /// Bytes of linear memory the instance holds, all memories together.
    memories: usize,
    /// Bytes charged for table elements, all tables together.
    tables: usize,
    /// The last growth granted, taken back if wasmtime then fails to grow.
    last_memory_grant: usize,
    last_table_grant: usize,
}

/// What one table element is charged: a pointer-sized reference.
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

impl MemoryCap {
    fn new(max: usize) -> Self {
        MemoryCap {
            max,
            exceeded: false,
            memories: 0,
            tables: 0,
            last_memory_grant: 0,
            last_table_grant: 0,
        }
    }

    /// Memory and tables the instance holds now, in bytes (what the cap applies to).
    pub(crate) fn total(&self) -> usize {
        self.memories.saturating_add(self.tables)
    }

    fn refuse(&mut self, what: &str, desired_total: usize) -> wasmtime::Result<bool> {
        self.exceeded = true;
        Err(wasmtime::Error::msg(format!(
            "memory limit of {} bytes exceeded ({what}: the instance would hold {desired_total})",
            self.max
        )))
    }
}

impl wasmtime::ResourceLimiter for MemoryCap {
    // Called with `current == 0` when a memory is created, then for every growth.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        let total = self.total().saturating_add(growth);
        if total > self.max {
            return self.refuse("linear memory", total);
        }
        self.memories += growth;
        self.last_memory_grant = growth;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memories = self.memories.saturating_sub(self.last_memory_grant);
        self.last_memory_grant = 0;
        tracing::debug!(error = %error, "plugin memory growth failed");
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        let total = self.total().saturating_add(growth);
        if total > self.max {
            return self.refuse("tables", total);
        }
        self.tables += growth;
        self.last_table_grant = growth;
        Ok(true)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.tables = self.tables.saturating_sub(self.last_table_grant);
        self.last_table_grant = 0;
        tracing::debug!(error = %error, "plugin table growth failed");
        Ok(())
    }
}

/// The time a call has executed, against its deadline.
///
/// Only time spent inside the call future's `poll` counts, measured as the polling
/// thread's CPU time: time the task waits for a tokio worker, or its thread for a CPU, is
/// not the plugin's. [`Accrue`] wraps the call future and adds each poll's CPU time;
/// the epoch-deadline callback (which runs inside a poll) adds the current poll's so far.
pub(crate) struct CallClock {
    inner: Mutex<ClockState>,
}

struct ClockState {
    budget: Duration,
    wall_budget: Duration,
    /// CPU time of the polls that have finished.
    used: Duration,
    /// The polling thread's CPU time when the current poll started.
    poll_started: Option<Duration>,
    /// When the call started, for the wall-clock backstop.
    started: Instant,
}

/// The CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// Whether a call may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Budget {
    /// Within its deadline.
    Left,
    /// Executed for longer than its deadline.
    Spent,
    /// Took longer than the wall-clock backstop, executing or not.
    WallClock,
}

impl CallClock {
    fn new(limits: &Limits) -> Self {
        CallClock {
            inner: Mutex::new(ClockState {
                budget: limits.deadline,
                wall_budget: limits.wall_clock(),
                used: Duration::ZERO,
                poll_started: None,
                started: Instant::now(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        // The lock only guards plain numbers: a poisoned one is still consistent.
        kubewasm_core::sync::lock(&self.inner)
    }

    /// Start a call: nothing used yet.
    pub(crate) fn reset(&self) {
        let mut s = self.state();
        s.used = Duration::ZERO;
        s.poll_started = None;
        s.started = Instant::now();
    }

    /// Execution time of the current call so far.
    pub(crate) fn used(&self) -> Duration {
        let s = self.state();
        let current = s
            .poll_started
            .map(|at| thread_cpu().saturating_sub(at))
            .unwrap_or_default();
        s.used + current
    }

    /// Whether the call may go on (asked by the epoch callback, inside a poll).
    pub(crate) fn check(&self) -> Budget {
        let used = self.used();
        let s = self.state();
        if used >= s.budget {
            Budget::Spent
        } else if s.started.elapsed() >= s.wall_budget {
            Budget::WallClock
        } else {
            Budget::Left
        }
    }

    fn poll_begins(&self) -> Duration {
        let now = thread_cpu();
        self.state().poll_started = Some(now);
        now
    }

    fn poll_ends(&self, began: Duration) {
        let spent = thread_cpu().saturating_sub(began);
        let mut s = self.state();
        s.used += spent;
        s.poll_started = None;
    }
}

/// A call future whose polls are charged to a [`CallClock`] (boxed by the caller: the
/// call futures are large).
pub(crate) struct Accrue<F> {
    inner: F,
    clock: Arc<CallClock>,
}

impl<F> Accrue<F> {
    /// Charge `inner`'s polls to `clock`.
    pub(crate) fn new(inner: F, clock: Arc<CallClock>) -> Self {
        Accrue { inner, clock }
    }
}

impl<F: Future + Unpin> Future for Accrue<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let began = self.clock.poll_begins();
        let out = Pin::new(&mut self.inner).poll(cx);
        self.clock.poll_ends(began);
        out
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
