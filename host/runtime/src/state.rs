//! The per-store state of a plugin instance: one field per capability, plus the call's
//! execution clock and the memory cap. The `kubewasm:plugin/host` imports delegate to the
//! capability modules.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use wasmtime_wasi::{WasiCtxView, WasiView};

use crate::bindings::current::kubewasm::plugin::{host, types};
use crate::bindings::v01::kubewasm::plugin as v01;
use crate::capability::cluster::ClusterState;
use crate::capability::log::LogState;
use crate::capability::wasi::WasiState;
use crate::limits::Limits;

/// Data of one plugin store.
pub(crate) struct PluginState {
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

/// Core instances one plugin instance may create. A component instantiates a handful of
/// core modules (its code, the WASI adapter, the shims and fix-ups `wit-component`
/// generates; a dynamically linked Python component one per shared library); wasmtime's
/// default (10,000) lets a crafted one make the host allocate 10,000 instances' metadata
/// per call, outside the memory cap.
pub(crate) const MAX_INSTANCES: usize = 64;
/// Linear memories one plugin instance may create. Toolchains emit one (a dynamically
/// linked component shares it); each reserves `engine::MEMORY_RESERVATION` plus its guard
/// of the host's address space (~4 GiB), so the default of 10,000 lets one instance
/// reserve 40 TiB of the 128 TiB a process has.
pub(crate) const MAX_MEMORIES: usize = 8;
/// Tables one plugin instance may create: one per core module that calls indirectly, and
/// the shims' (a dynamically linked component has a few more).
pub(crate) const MAX_TABLES: usize = 64;

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
    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

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

impl v01::types::Host for PluginState {}

/// `kubewasm:plugin@0.1.0`'s host interface: the same functions (linked over by the
/// capabilities, as the current version's are).
impl v01::host::Host for PluginState {
    fn log(&mut self, level: v01::types::LogLevel, message: String) {
        let level = match level {
            v01::types::LogLevel::Trace => types::LogLevel::Trace,
            v01::types::LogLevel::Debug => types::LogLevel::Debug,
            v01::types::LogLevel::Info => types::LogLevel::Info,
            v01::types::LogLevel::Warn => types::LogLevel::Warn,
            v01::types::LogLevel::Error => types::LogLevel::Error,
        };
        host::Host::log(self, level, message);
    }

    fn get(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, String> {
        host::Host::get(self, api_version, kind, namespace, name)
    }

    fn list(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, String> {
        host::Host::list(self, api_version, kind, namespace, label_selector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Store;
    use wasmtime::component::{Component, Linker};

    /// A component that creates `outer × inner` core instances of a module holding
    /// `memories` memories and `tables` tables (nested, to stay within wasmparser's
    /// per-component limits: 1,000 instances, 100 memories and tables per module).
    fn crafted(outer: usize, inner: usize, memories: usize, tables: usize) -> Vec<u8> {
        let mut m = String::from("(core module $m");
        m.push_str(&" (memory 0)".repeat(memories));
        m.push_str(&" (table 0 funcref)".repeat(tables));
        m.push(')');
        let mut wat = format!("(component (component $c {m}");
        wat.push_str(&" (core instance (instantiate $m))".repeat(inner));
        wat.push(')');
        wat.push_str(&" (instance (instantiate $c))".repeat(outer));
        wat.push(')');
        wat::parse_str(&wat).expect("crafted component")
    }

    async fn instantiate(engine: &crate::PluginEngine, wasm: &[u8]) -> wasmtime::Result<()> {
        let component = Component::new(&engine.engine, wasm)?;
        let mut store = Store::new(&engine.engine, PluginState::new("p", &Limits::default()));
        store.limiter(|s| &mut s.memory);
        let linker = Linker::<PluginState>::new(&engine.engine);
        linker.instantiate_async(&mut store, &component).await?;
        Ok(())
    }

    /// 20,000 core instances, memories or tables (what wasmtime's default limits of 10,000
    /// per store would let through half-way: 10,000 memories reserve 40 TiB of address
    /// space) are refused at instantiation; a component within the limits instantiates.
    #[tokio::test]
    async fn crafted_components_past_the_store_limits_are_refused() {
        let engine = crate::PluginEngine::new().unwrap();
        let cases = [
            ("instances", crafted(200, 100, 0, 0), "instance"),
            ("memories", crafted(2, 100, 100, 0), "memor"),
            ("tables", crafted(2, 100, 0, 100), "table"),
        ];
        for (what, wasm, needle) in cases {
            let started = std::time::Instant::now();
            let err = instantiate(&engine, &wasm).await.unwrap_err();
            let text = format!("{err:#}");
            eprintln!("20,000 {what}: refused in {:?}: {text}", started.elapsed());
            assert!(
                text.contains(needle) && text.contains("limit"),
                "{what}: {text}"
            );
        }
        // At the limits: accepted.
        instantiate(&engine, &crafted(1, MAX_INSTANCES, 0, 0))
            .await
            .unwrap();
        instantiate(&engine, &crafted(1, 1, MAX_MEMORIES, MAX_TABLES.min(100)))
            .await
            .unwrap();
    }
}
