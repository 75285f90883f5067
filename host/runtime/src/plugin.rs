//! A compiled plugin: its component linked into an `InstancePre`, its manifest, and a
//! small pool of instances reused across calls.

use kubewasm_core::sync::lock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::{Store, Trap, UpdateDeadline};

use kubewasm_core::event::EventType;
use kubewasm_core::intent::RawIntent;
use kubewasm_core::manifest::Manifest;

use crate::bindings::{Bindings, Pre, types as wit};
use crate::budget::{CallBudget, Reclaim, Share, Tenant, Waited};
use crate::capability::cluster::ClusterView;
use crate::convert;
use crate::engine::PluginEngine;
use crate::error::{CallError, Error, LimitExceeded, ManifestRejection};
use crate::limits::{Limits, RECYCLE_MEMORY_DIVISOR};
use crate::state::{Accrue, Budget, PluginState};

/// One event as handed to a plugin.
#[derive(Debug, Clone)]
pub struct PluginEvent {
    /// The event type.
    pub event_type: EventType,
    /// Which of the plugin's watches matched.
    pub watch_id: String,
    /// The object, JSON.
    pub object: Arc<str>,
    /// The previous object for `Modified`, JSON.
    pub old_object: Option<Arc<str>>,
}

/// Whether instances are reused between calls, and how many are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstancePolicy {
    /// Keep instances after a successful call (a trapped one is always dropped).
    pub reuse: bool,
    /// Instances kept at most (one per concurrent call is enough).
    pub pool_size: usize,
}

struct Instance {
    store: Store<PluginState>,
    bindings: Bindings,
    /// Calls it has handled.
    calls: u64,
    /// Its share of the host's call budget: the memory cap while it runs a call, the
    /// memory it holds while pooled.
    share: Share,
}

/// A plugin's idle instances. Shared with the call budget, which drops them when a call
/// of any plugin would otherwise wait for memory.
struct Pool(Mutex<Vec<Instance>>);

impl Reclaim for Pool {
    fn reclaim(&self) {
        let idle = std::mem::take(&mut *lock(&self.0));
        if !idle.is_empty() {
            tracing::debug!(
                instances = idle.len(),
                "idle plugin instances dropped for a call waiting for memory"
            );
        }
    }
}

impl Instance {
    /// Memory and tables it holds, in bytes.
    fn memory(&self) -> usize {
        self.store.data().memory.total()
    }
}

/// Why an instance that returned normally was not put back in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recycle {
    /// It handled `recycle_after_calls` calls.
    Calls,
    /// Its memory is over the recycling fraction of the cap.
    Memory,
    /// Pooling it would take the plugin's pooled instances over their budget.
    Budget,
    /// The pool is full.
    Full,
}

impl Recycle {
    fn as_str(self) -> &'static str {
        match self {
            Recycle::Calls => "calls",
            Recycle::Memory => "memory",
            Recycle::Budget => "pool-budget",
            Recycle::Full => "pool-full",
        }
    }
}

/// Counters of a plugin's instance pool, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Instances created (including the one `describe` ran in).
    pub instantiated: u64,
    /// Instances that returned normally and were dropped instead of pooled, by reason:
    /// after `recycle_after_calls` calls.
    pub recycled_calls: u64,
    /// ... over the memory fraction of the cap.
    pub recycled_memory: u64,
    /// ... over the pool's memory budget.
    pub recycled_budget: u64,
    /// Instances pooled now.
    pub pooled: usize,
    /// Memory they hold together, in bytes.
    pub pooled_bytes: usize,
    /// Instances allowed alive at once (running or pooled), from `Limits::live_instances`.
    pub live_cap: usize,
    /// Calls that found every live instance busy and waited for one.
    pub waited: u64,
}

/// Caps a plugin's live instances (running a call or pooled). A call enters before it
/// takes a pooled instance or instantiates one, and leaves once its instance is pooled or
/// dropped; one that finds the cap reached waits, in arrival order (tokio's semaphore is
/// fair), without a thread and before its call clock starts, so waiting is charged to
/// neither the guest-time deadline nor the wall-clock backstop. With instantiation only
/// when the pool is empty, running + pooled never exceeds the cap.
struct LiveGate {
    permits: tokio::sync::Semaphore,
    cap: usize,
    waited: AtomicU64,
}

impl LiveGate {
    /// Closed until [`LiveGate::open`]: the cap is known once an instance was seen.
    fn new() -> Self {
        LiveGate {
            permits: tokio::sync::Semaphore::new(0),
            cap: 0,
            waited: AtomicU64::new(0),
        }
    }

    fn open(&mut self, cap: usize) {
        self.permits.add_permits(cap);
        self.cap = cap;
    }

    /// Wait for a live instance's place; held until the instance is pooled or dropped.
    async fn enter(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match self.permits.try_acquire() {
            Ok(permit) => Some(permit),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                self.waited.fetch_add(1, Ordering::Relaxed);
                // Never closed, so this cannot fail; a closed gate would let the call in.
                self.permits.acquire().await.ok()
            }
            Err(tokio::sync::TryAcquireError::Closed) => None,
        }
    }
}

#[derive(Default)]
struct PoolCounters {
    instantiated: AtomicU64,
    recycled_calls: AtomicU64,
    recycled_memory: AtomicU64,
    recycled_budget: AtomicU64,
}

/// A loaded, validated plugin, ready to handle events. Immutable once built: a new version
/// of the file becomes a new `CompiledPlugin`.
pub struct CompiledPlugin {
    /// The file it was loaded from.
    pub path: PathBuf,
    /// The manifest `describe` returned, validated.
    pub manifest: Manifest,
    /// Settings JSON passed to `describe` and `handle`.
    pub settings: Option<String>,
    /// sha256 of the component bytes, hex.
    pub digest: String,
    /// Limits applied to calls.
    pub limits: Limits,
    engine: PluginEngine,
    pre: Pre<PluginState>,
    pool: Arc<Pool>,
    pool_size: usize,
    reuse: bool,
    counters: PoolCounters,
    live: LiveGate,
    /// The part of the call budget of its tenant namespace (`limits.tenant`), which its
    /// calls take before the global budget.
    tenant: Option<Arc<Tenant>>,
}

/// Check the wasm header before handing bytes to the compiler, for a clear message.
fn check_header(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(Error::NotWasm {
            path: path.to_path_buf(),
            reason: "missing the \\0asm header".into(),
        });
    }
    // Core modules have version 1 with layer 0; components use layer 1.
    if bytes[6..8] != [1, 0] {
        return Err(Error::NotWasm {
            path: path.to_path_buf(),
            reason: "this is a core wasm module; kubewasm needs a component \
                     (build for wasm32-wasip2, or run `wasm-tools component new`)"
                .into(),
        });
    }
    Ok(())
}

/// A compiled component, where it was compiled, and the worker's artifact if any.
pub(crate) type CompileOutput = (
    Component,
    crate::codecache::Source,
    Option<crate::artifact::Artifact>,
);

/// Check the header and compile component bytes with `compiler` (CPU-heavy: seconds for
/// big components, never on the async runtime's threads). `code_dir`: see
/// [`Compiler::compile`](crate::compiler::Compiler).
pub(crate) async fn compile(
    compiler: &crate::compiler::Compiler,
    engine: &PluginEngine,
    path: &Path,
    bytes: Vec<u8>,
    code_dir: Option<&Path>,
) -> Result<CompileOutput, Error> {
    check_header(path, &bytes)?;
    compiler.compile(engine, path, bytes, code_dir).await
}

impl CompiledPlugin {
    /// Link a compiled component against the host world, call `describe` and validate the
    /// manifest. `reuse` keeps instances between calls (see the call-path bench).
    pub async fn new(
        engine: &PluginEngine,
        path: &Path,
        component: Component,
        digest: String,
        settings: Option<String>,
        limits: Limits,
        instances: InstancePolicy,
    ) -> Result<Self, Error> {
        let InstancePolicy { reuse, pool_size } = instances;
        let limits = clamp_to_budget(path, limits, &engine.budget);
        let tenant = limits
            .tenant
            .as_deref()
            .and_then(|ns| engine.budget.tenant(ns));
        let world_err = |reason: String| Error::World {
            path: path.to_path_buf(),
            reason,
        };
        let instance_pre = engine
            .linker
            .instantiate_pre(&component)
            .map_err(|e| world_err(plugin_text(&format!("{e:#}"))))?;
        let pre = Pre::new(instance_pre).map_err(|e| world_err(plugin_text(&format!("{e:#}"))))?;

        let mut plugin = CompiledPlugin {
            path: path.to_path_buf(),
            manifest: Manifest {
                name: file_stem(path),
                version: String::new(),
                watches: vec![],
                grants: vec![],
                reads: vec![],
            },
            settings,
            digest,
            limits,
            engine: engine.clone(),
            pre,
            pool: Arc::new(Pool(Mutex::new(Vec::new()))),
            pool_size: pool_size.max(1),
            reuse,
            counters: PoolCounters::default(),
            live: LiveGate::new(),
            tenant,
        };
        if engine.budget.is_bounded() {
            let pool: Arc<dyn Reclaim> = plugin.pool.clone();
            engine
                .budget
                .register(Arc::downgrade(&pool), plugin.tenant.as_deref());
        }
        let (manifest, memory) = plugin.describe().await?;
        plugin.manifest = manifest;
        // The describe instance's memory (its heap after start-up) sizes the cap: an
        // interpreter's instance holds megabytes, so a pool of them is held to the budget.
        let cap = plugin.limits.live_instances(memory, plugin.pool_size);
        plugin.pool_size = plugin.pool_size.min(cap);
        plugin.live.open(cap);
        tracing::debug!(
            plugin = plugin.name(),
            wit = plugin.pre.version(),
            instance_memory = memory,
            live_instances = cap,
            "instance cap"
        );
        Ok(plugin)
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The validated manifest, and the memory the instance held afterwards.
    async fn describe(&self) -> Result<(Manifest, usize), Error> {
        let reject = |reason: ManifestRejection| Error::Manifest {
            path: self.path.clone(),
            reason: Box::new(reason),
        };
        // No wait limit at load: the wait is bounded anyway (see `crate::budget`), and a
        // load refused for a busy budget would stay refused until its source changes.
        let share = match self
            .engine
            .budget
            .acquire(self.tenant.as_deref(), self.limits.memory, None)
            .await
        {
            Ok((share, _)) => share,
            Err(_) => Share::none(),
        };
        let mut inst = self
            .instantiate(share)
            .await
            .map_err(|e| reject(ManifestRejection::Instantiate(e)))?;
        let clock = inst.store.data().clock.clone();
        clock.reset();
        inst.store.set_epoch_deadline(1);
        let settings = self.settings.as_deref();
        let result = match &inst.bindings {
            Bindings::Current(b) => {
                let call = b
                    .kubewasm_plugin_handler()
                    .call_describe(&mut inst.store, settings);
                self.metered(Box::pin(call), clock).await
            }
            Bindings::V01(b) => {
                let call = async {
                    let m = b
                        .kubewasm_plugin_handler()
                        .call_describe(&mut inst.store, settings)
                        .await?;
                    Ok(m.map(convert::v01::manifest))
                };
                self.metered(Box::pin(call), clock).await
            }
        };
        let wit_manifest = match result {
            Ok(Ok(m)) => m,
            Ok(Err(msg)) => return Err(reject(ManifestRejection::Refused(plugin_text(&msg)))),
            Err(e) => {
                let kind = crate::lift::refused_transfer(&e, &inst.store)
                    .unwrap_or_else(|| classify(&e, &inst.store, self.limits.deadline));
                return Err(reject(ManifestRejection::Failed(kind)));
            }
        };
        let manifest =
            convert::manifest(wit_manifest).map_err(|e| reject(ManifestRejection::Invalid(e)))?;
        manifest
            .validate()
            .map_err(|e| reject(ManifestRejection::Invalid(e)))?;
        let file = file_stem(&self.path);
        if manifest.name != file {
            return Err(reject(ManifestRejection::NameMismatch {
                name: manifest.name,
                file,
            }));
        }
        Ok((manifest, inst.memory()))
    }

    /// A fresh instance, holding `share` of the call budget.
    async fn instantiate(&self, share: Share) -> Result<Instance, CallError> {
        self.counters.instantiated.fetch_add(1, Ordering::Relaxed);
        let state = PluginState::new(self.name(), &self.limits);
        let clock = state.clock.clone();
        let mut store = Store::new(&self.engine.engine, state);
        store.limiter(|s| &mut s.memory);
        crate::lift::bound_transfers(&mut store, &self.limits);
        // Every tick past the deadline check: yield to tokio so a busy plugin never
        // starves the runtime, and trap once the call has executed for its deadline (or
        // outlived the wall-clock backstop).
        store.epoch_deadline_callback(|ctx| match ctx.data().clock.check() {
            Budget::Left => Ok(UpdateDeadline::Yield(1)),
            Budget::Spent | Budget::WallClock => Ok(UpdateDeadline::Interrupt),
        });
        store.set_epoch_deadline(1);
        let instantiated = {
            let call = self.pre.instantiate_async(&mut store);
            self.metered(Box::pin(call), clock).await
        };
        match instantiated {
            Ok(bindings) => Ok(Instance {
                store,
                bindings,
                calls: 0,
                share,
            }),
            Err(e) => Err(classify(&e, &store, self.limits.deadline)),
        }
    }

    /// Run a call future charged to the instance's clock (reset by the caller), under the
    /// wall-clock backstop too: a call that waits rather than executes (a WASI sleep) is
    /// dropped once the backstop passes, which the epoch callback cannot see.
    async fn metered<T>(
        &self,
        call: std::pin::Pin<Box<dyn Future<Output = wasmtime::Result<T>> + Send + '_>>,
        clock: Arc<crate::state::CallClock>,
    ) -> wasmtime::Result<T> {
        match tokio::time::timeout(self.limits.wall_clock(), Accrue::new(call, clock)).await {
            Ok(r) => r,
            Err(_) => Err(wasmtime::Error::new(Trap::Interrupt)),
        }
    }

    /// The pool's counters.
    pub fn pool_stats(&self) -> PoolStats {
        let (pooled, pooled_bytes) = {
            let p = lock(&self.pool.0);
            (p.len(), p.iter().map(Instance::memory).sum())
        };
        PoolStats {
            instantiated: self.counters.instantiated.load(Ordering::Relaxed),
            recycled_calls: self.counters.recycled_calls.load(Ordering::Relaxed),
            recycled_memory: self.counters.recycled_memory.load(Ordering::Relaxed),
            recycled_budget: self.counters.recycled_budget.load(Ordering::Relaxed),
            pooled,
            pooled_bytes,
            live_cap: self.live.cap,
            waited: self.live.waited.load(Ordering::Relaxed),
        }
    }

    /// Put an instance that returned normally back in the pool, unless it has served its
    /// calls, holds too much memory, or the pool is full or over its memory budget.
    fn give_back(&self, mut inst: Instance) {
        let memory = inst.memory();
        let reason = if inst.calls >= self.limits.recycle_after_calls {
            Some(Recycle::Calls)
        } else if memory > self.limits.memory / RECYCLE_MEMORY_DIVISOR {
            Some(Recycle::Memory)
        } else {
            None
        };
        let reason = reason.or_else(|| {
            {
                let mut pool = lock(&self.pool.0);
                if pool.len() >= self.pool_size {
                    return Some(Recycle::Full);
                }
                let pooled: usize = pool.iter().map(Instance::memory).sum();
                if pooled.saturating_add(memory) > self.limits.pool_memory {
                    return Some(Recycle::Budget);
                }
                // Idle, it holds only what it has.
                inst.share.shrink_to(memory);
                pool.push(inst);
            }
            self.no_idle_while_waited_for();
            None
        });
        let Some(reason) = reason else { return };
        let counter = match reason {
            Recycle::Calls => &self.counters.recycled_calls,
            Recycle::Memory => &self.counters.recycled_memory,
            Recycle::Budget => &self.counters.recycled_budget,
            Recycle::Full => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            plugin = self.name(),
            reason = reason.as_str(),
            memory,
            "plugin instance recycled"
        );
    }

    /// Run `handle` for one event. `object` names the object for the plugin's log lines.
    /// On any failure the instance is dropped (a trapped instance cannot be re-entered).
    pub async fn handle(
        &self,
        event: &PluginEvent,
        object: &str,
        cluster: Arc<dyn ClusterView>,
    ) -> Result<Vec<RawIntent>, CallError> {
        // Held until the instance is pooled or dropped (the end of this function).
        let _live = self.live.enter().await;
        let mut inst = self.instance_for_call(object).await?;
        {
            let state = inst.store.data_mut();
            state.cluster.begin_call(cluster, object);
            state.log.begin_call(object);
            // A trap's error carries what this call wrote to stderr, not earlier calls'.
            state.wasi.stderr().clear();
            state.clock.reset();
        }
        inst.calls += 1;
        inst.store.set_epoch_deadline(1);
        let wit_event = wit::Event {
            event_type: match event.event_type {
                EventType::Added => wit::EventType::Added,
                EventType::Modified => wit::EventType::Modified,
                EventType::Deleted => wit::EventType::Deleted,
                EventType::Resync => wit::EventType::Resync,
            },
            watch_id: event.watch_id.clone(),
            object: event.object.to_string(),
            old_object: event.old_object.as_ref().map(|o| o.to_string()),
        };
        let clock = inst.store.data().clock.clone();
        let settings = self.settings.as_deref();
        let result = match &inst.bindings {
            Bindings::Current(b) => {
                let call =
                    b.kubewasm_plugin_handler()
                        .call_handle(&mut inst.store, &wit_event, settings);
                self.metered(Box::pin(call), clock).await
            }
            Bindings::V01(b) => {
                let event = convert::v01::event(&wit_event);
                let call = async {
                    let r = b
                        .kubewasm_plugin_handler()
                        .call_handle(&mut inst.store, &event, settings)
                        .await?;
                    Ok(convert::v01::handled(r))
                };
                self.metered(Box::pin(call), clock).await
            }
        };
        let refusals = inst.store.data_mut().cluster.end_call();
        if refusals > 0 {
            tracing::warn!(
                plugin = self.name(),
                object,
                refusals,
                "more reads refused than logged (the first {} of a call are)",
                crate::capability::cluster::LOGGED_REFUSALS
            );
        }
        let dropped = inst.store.data().log.end_call();
        if dropped > 0 {
            tracing::warn!(
                plugin = self.name(),
                object,
                dropped,
                "plugin log lines dropped (cap {} per call)",
                self.limits.max_log_lines
            );
        }
        let outcome = match result {
            Err(e) => {
                return Err(crate::lift::refused_transfer(&e, &inst.store)
                    .unwrap_or_else(|| classify(&e, &inst.store, self.limits.deadline)));
            }
            // The message reaches log lines and Events: excerpted like a log line.
            Ok(Err(err)) => Err(CallError::Plugin {
                message: plugin_text(&err.message),
                retry: err.retry,
            }),
            Ok(Ok(intents)) => self
                .check_limits(&intents)
                .map(|()| intents.into_iter().map(convert::intent).collect::<Vec<_>>()),
        };
        // The call returned normally, so the instance is healthy and can be reused.
        if self.reuse {
            self.give_back(inst);
        }
        outcome
    }

    /// An instance holding the whole memory cap of the host's budget, what the call may
    /// use: a pooled one whose share tops up at once, else one taken (or instantiated)
    /// after waiting for the whole cap with nothing held, at most the budget's wait limit
    /// (see [`crate::budget`]: no call holds budget while it waits for more).
    async fn instance_for_call(&self, object: &str) -> Result<Instance, CallError> {
        let budget = &self.engine.budget;
        let cap = self.limits.memory;
        if self.reuse {
            let pooled = lock(&self.pool.0).pop();
            if let Some(mut inst) = pooled {
                if budget.top_up(self.tenant.as_deref(), cap, &mut inst.share) {
                    return Ok(inst);
                }
                // Not free at once: back to the pool, idle, where the wait below (or any
                // other call's) reclaims it, or a call finds it once the budget is free.
                self.park(inst);
            }
        }
        let share = match budget
            .acquire(self.tenant.as_deref(), cap, Some(budget.wait_limit()))
            .await
        {
            Ok((share, waited)) => {
                if let Some(w) = waited {
                    self.waited(object, budget, &w);
                }
                share
            }
            Err(w) => {
                self.waited(object, budget, &w);
                return Err(CallError::BudgetWait {
                    waited: w.took,
                    wanted_mib: w.wanted_mib,
                    available_mib: w.available_mib,
                });
            }
        };
        // An instance pooled meanwhile serves the call: the share replaces its idle one.
        let pooled = if self.reuse {
            lock(&self.pool.0).pop()
        } else {
            None
        };
        match pooled {
            Some(mut inst) => {
                inst.share = share;
                Ok(inst)
            }
            None => self.instantiate(share).await,
        }
    }

    /// Say that a call waited for the budget (a WARN line, the host's metrics).
    fn waited(&self, object: &str, budget: &CallBudget, w: &Waited) {
        tracing::warn!(
            plugin = self.name(),
            object,
            waited_ms = u64::try_from(w.took.as_millis()).unwrap_or(u64::MAX),
            wanted_mib = w.wanted_mib,
            available_mib = w.available_mib,
            budget_mib = budget.bytes().map_or(0, |b| b >> 20),
            timed_out = w.timed_out,
            "plugin call waited for the call memory budget"
        );
        budget.report(self.name(), w);
    }

    /// Put an instance whose call could not top its share up back in the pool, as it was
    /// (idle); dropped if the pool filled meanwhile.
    fn park(&self, inst: Instance) {
        {
            let mut pool = lock(&self.pool.0);
            if pool.len() >= self.pool_size {
                return;
            }
            pool.push(inst);
        }
        self.no_idle_while_waited_for();
    }

    /// While a call waits for the budget no instance is kept idle: one just pooled is
    /// dropped (checked after the push; see `CallBudget::has_waiters`).
    fn no_idle_while_waited_for(&self) {
        if self.engine.budget.has_waiters(self.tenant.as_deref()) {
            self.pool.reclaim();
        }
    }

    fn check_limits(&self, intents: &[wit::Intent]) -> Result<(), CallError> {
        if intents.len() > self.limits.max_intents {
            return Err(LimitExceeded::Intents {
                count: intents.len(),
                max: self.limits.max_intents,
            }
            .into());
        }
        if let Some((i, size)) = intents
            .iter()
            .map(convert::intent_bytes)
            .enumerate()
            .find(|(_, s)| *s > self.limits.max_intent_bytes)
        {
            return Err(LimitExceeded::IntentBytes {
                index: i,
                size,
                max: self.limits.max_intent_bytes,
            }
            .into());
        }
        call_budget(intents.iter().map(convert::intent_bytes), &self.limits)?;
        Ok(())
    }
}

/// `limits` with the memory cap clamped to the whole call budget, a tenant plugin's to
/// its namespace's part (said once, at load): a cap over it could never be held whole,
/// and was charged the whole budget silently.
fn clamp_to_budget(path: &Path, mut limits: Limits, budget: &CallBudget) -> Limits {
    let (most, of) = match &limits.tenant {
        Some(_) => (
            budget.tenant_bytes(),
            "its tenant namespace's part of the call memory budget (--tenant-budget-share)",
        ),
        None => (budget.bytes(), "the whole call memory budget"),
    };
    if let Some(bytes) = most
        && limits.memory as u64 > bytes
    {
        tracing::warn!(
            plugin = %file_stem(path),
            tenant = limits.tenant.as_deref(),
            memory_mib = limits.memory >> 20,
            budget_mib = bytes >> 20,
            "plugin memory cap over {of}: clamped to it \
             (raise --call-memory-budget, or lower the plugin's memoryMiB)"
        );
        limits.memory = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    limits
}

/// The total size of one call's intents, held to a quarter of the memory cap (see
/// [`LimitExceeded::CallBytes`]).
fn call_budget(sizes: impl Iterator<Item = usize>, limits: &Limits) -> Result<(), CallError> {
    let max = limits.memory / 4;
    let total = sizes.fold(0usize, usize::saturating_add);
    if total > max {
        return Err(LimitExceeded::CallBytes { total, max }.into());
    }
    Ok(())
}

#[cfg(test)]
mod call_budget_tests {
    use super::*;

    #[test]
    fn one_calls_intents_are_held_to_a_quarter_of_the_memory_cap() {
        let limits = Limits {
            memory: 64 << 20,
            ..Limits::default()
        };
        assert!(call_budget([8 << 20, 8 << 20].into_iter(), &limits).is_ok());
        let over = call_budget([8 << 20, 8 << 20, 1].into_iter(), &limits);
        assert!(
            matches!(
                over,
                Err(CallError::Limit(LimitExceeded::CallBytes { total, max }))
                    if total == (16 << 20) + 1 && max == 16 << 20
            ),
            "{over:?}"
        );
        assert!(call_budget([usize::MAX, 1].into_iter(), &limits).is_err());
    }

    #[test]
    fn a_tenant_plugins_cap_is_clamped_to_its_namespaces_part() {
        let budget = CallBudget::new(400 << 20).with_tenant_share(25);
        let path = Path::new("backup.wasm");
        let cluster = clamp_to_budget(path, Limits::default(), &budget);
        assert_eq!(cluster.memory, 256 << 20);
        let tenant = Limits {
            tenant: Some("team-a".into()),
            ..Limits::default()
        };
        assert_eq!(clamp_to_budget(path, tenant, &budget).memory, 100 << 20);
        let unbounded = Limits {
            tenant: Some("team-a".into()),
            ..Limits::default()
        };
        let kept = clamp_to_budget(path, unbounded, &CallBudget::unbounded());
        assert_eq!(kept.memory, 256 << 20);
    }
}

/// A plugin's text (an error message, a trap's backtrace of its symbol names) as the
/// host keeps it: excerpted like a log line.
pub(crate) fn plugin_text(text: &str) -> String {
    kubewasm_core::excerpt::excerpt(text, crate::capability::log::MAX_LOG_LINE_BYTES).into_owned()
}

/// Turn a wasmtime error into a classified call error, using the trap code and the
/// memory cap's flag rather than message text. A trap carries what the guest wrote to
/// stderr (a Go panic in `init` is otherwise a bare `unreachable`).
fn classify(err: &wasmtime::Error, store: &Store<PluginState>, deadline: Duration) -> CallError {
    if store.data().memory.exceeded {
        return CallError::Memory(store.data().memory.max);
    }
    let stderr = match store.data().wasi.stderr().excerpt() {
        Some(text) => format!("; the plugin's stderr: {text}"),
        None => String::new(),
    };
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Deadline(deadline),
        // Each part bounded on its own, so a long backtrace never cuts the stderr off.
        Some(trap) => CallError::Trap(format!(
            "{}{stderr}",
            plugin_text(&format!("{trap}: {err:#}"))
        )),
        None => CallError::Trap(format!("{}{stderr}", plugin_text(&format!("{err:#}")))),
    }
}

pub(crate) fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn calls_past_the_live_cap_wait_in_arrival_order() {
        let mut gate = LiveGate::new();
        gate.open(2);
        let Poll::Ready(Some(a)) = poll(pin!(gate.enter())) else {
            panic!("a place was free")
        };
        let Poll::Ready(Some(b)) = poll(pin!(gate.enter())) else {
            panic!("a place was free")
        };
        // Both places taken: the third and fourth calls wait.
        let mut c = pin!(gate.enter());
        let mut d = pin!(gate.enter());
        assert!(poll(c.as_mut()).is_pending());
        assert!(poll(d.as_mut()).is_pending());
        assert_eq!(gate.waited.load(Ordering::Relaxed), 2);
        // `a`'s instance is pooled: its place goes to `c`, the first in line, not `d`.
        drop(a);
        assert!(poll(d.as_mut()).is_pending());
        let Poll::Ready(Some(c)) = poll(c.as_mut()) else {
            panic!("c was first in line")
        };
        assert!(poll(d.as_mut()).is_pending());
        drop(b);
        assert!(matches!(poll(d.as_mut()), Poll::Ready(Some(_)))); // (its place is released with the output)
        drop(c);
        assert_eq!(gate.permits.available_permits(), 2);
    }

    #[test]
    fn header_check_names_the_problem() {
        let p = Path::new("x.wasm");
        let err = check_header(p, b"hello world").unwrap_err().to_string();
        assert!(err.contains("\\0asm"), "{err}");
        let core = [0, b'a', b's', b'm', 1, 0, 0, 0];
        let err = check_header(p, &core).unwrap_err().to_string();
        assert!(err.contains("core wasm module"), "{err}");
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        assert!(check_header(p, &component).is_ok());
    }
}
