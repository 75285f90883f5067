//! One host-wide budget of plugin memory: the sum over every plugin of the memory its
//! calls in flight may use and its idle pooled instances hold stays within one figure,
//! sized from the container's memory limit, so that no set of plugins, each within its
//! own cap, can together take the host past its limit (an OOM kill, a restart, a replay
//! of the same events: a crash loop).
//!
//! Within it, every tenant namespace (the namespace of `NamespacedPlugin`s) has its own
//! part, `--tenant-budget-share` percent of the whole ([`Tenant`]): the plugins of one
//! namespace together hold at most that much, so a namespace whose plugins are slow or
//! grow to their cap leaves the rest of the budget to the cluster's plugins and the other
//! namespaces. A tenant call holds its namespace's part and the global budget, the same
//! MiB in both.
//!
//! How it is held, in units of MiB ([`CallBudget`]):
//! - a call holds its plugin's whole memory cap from before its instance is taken or
//!   instantiated until the instance is pooled or dropped: what the instance may grow to
//!   while it runs. A call that finds the budget spent waits (fairly, in arrival order,
//!   before its call clock starts) for others to finish, at most the budget's wait limit
//!   (`--call-budget-wait`, for both levels together), after which it fails with
//!   [`CallError::BudgetWait`] (retried with backoff);
//! - an instance put back in the pool keeps only the memory it holds (linear memory never
//!   shrinks), and gives that back when it is dropped;
//! - a call that would wait first drops the idle pooled instances that hold what it waits
//!   for (every plugin's for the global budget, its namespace's plugins' for its
//!   namespace's part), and while any call waits no instance that holds what it waits
//!   for is kept idle: idle instances are a cache, calls are work, and a budget held by
//!   idle instances would otherwise never be released to a call of another plugin.
//!
//! # No hold-and-wait
//!
//! The two levels are taken in one order: a tenant call takes its namespace's part first,
//! then the global budget. So a call waiting for a namespace's part holds nothing of the
//! global budget, and a call waiting for the global budget may hold its namespace's part
//! but never waits for a namespace's part again. A pooled instance's next call tops its
//! share up to the cap, at both levels, only if that much is free at once
//! ([`CallBudget::top_up`]); otherwise the instance goes back to the pool, idle and
//! reclaimable, and the call waits for the whole cap holding nothing
//! ([`CallBudget::acquire`]).
//!
//! Whatever a call waiting for the **global** budget waits for is held by:
//! - calls running: they hold their whole cap and wait for nothing more, and end within
//!   their wall-clock backstop (ten times the call deadline);
//! - idle instances: dropped by the waiter before it waits, and any instance pooled
//!   while a call waits is dropped at once (the waiter registers before it reclaims, the
//!   pool checks after it pushes, so one of the two sees the other);
//! - the first waiter in line: tokio's fair semaphore hands released permits to the head
//!   of its queue even when they are fewer than it asked for, so the head may hold part
//!   of its share while it waits. It is the only global waiter holding global budget, and
//!   it waits only for running calls, so no two waiters hold what the other needs: the
//!   head gets its share once enough running calls end, then the next in line is the
//!   head. (Global waiters may hold their namespaces' parts: no global waiter waits for
//!   those.)
//!
//! Whatever a call waiting for its **namespace's** part waits for is held by the same
//! three, restricted to that namespace (its running calls, its idle instances, the head
//! of its queue), and by the namespace's calls waiting for the global budget, which get
//! it in bounded time by the paragraph above, holding nothing a global waiter needs.
//!
//! No cycle: each share a waiter needs is released in bounded time. (Before the first
//! rule, a pooled instance's call kept its idle share while waiting for the rest; two
//! such calls, each partly served by the queue, each held what the other waited for,
//! forever.)
//!
//! A plugin's memory cap is clamped to the whole budget at load, a tenant plugin's to its
//! namespace's part, so every call can be served once the budget is free.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

#[cfg(doc)]
use crate::error::CallError;

/// One MiB, the budget's unit.
const MIB: u64 = 1 << 20;

/// How long a call waits for the budget by default before it fails and is retried with
/// backoff (`--call-budget-wait`).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The part of the budget, in percent, the plugins of one tenant namespace may hold
/// together by default (`--tenant-budget-share`).
pub const DEFAULT_TENANT_SHARE_PERCENT: u8 = 25;

/// A share of the call budget held by a call or a pooled instance; given back when
/// dropped. A tenant's holds the same MiB of its namespace's part too.
#[derive(Debug)]
pub(crate) struct Share {
    global: Option<OwnedSemaphorePermit>,
    tenant: Option<OwnedSemaphorePermit>,
}

impl Share {
    /// Nothing held (an unbounded budget).
    pub(crate) fn none() -> Self {
        Share {
            global: None,
            tenant: None,
        }
    }

    /// Keep only `bytes` (rounded up to MiB) of what is held, giving the rest back.
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        for permit in [&mut self.global, &mut self.tenant].into_iter().flatten() {
            let keep = mib(bytes as u64).min(permit.num_permits());
            let excess = permit.num_permits() - keep;
            if excess > 0 {
                drop(permit.split(excess));
            }
        }
    }

    /// MiB held (of the global budget).
    #[cfg(test)]
    pub(crate) fn mib(&self) -> usize {
        held(&self.global)
    }
}

/// MiB a permit holds.
fn held(permit: &Option<OwnedSemaphorePermit>) -> usize {
    permit.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
}

/// Add `more` to what `held` holds.
fn merge(held: &mut Option<OwnedSemaphorePermit>, more: OwnedSemaphorePermit) {
    match held {
        Some(h) => h.merge(more),
        None => *held = Some(more),
    }
}

/// Something holding shares it can give back at once: a plugin's pool of idle instances.
pub(crate) trait Reclaim: Send + Sync {
    /// Drop every idle instance (and so the shares they hold).
    fn reclaim(&self);
}

/// A call's wait for the budget: how long, for how much, and how much was free when it
/// began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    /// How long it waited.
    pub took: Duration,
    /// MiB it waited for.
    pub wanted_mib: usize,
    /// MiB free when it began to wait (idle instances already dropped), in the part it
    /// waited for first.
    pub available_mib: usize,
    /// It waited its whole limit and gave up.
    pub timed_out: bool,
    /// It waited for its namespace's part (`--tenant-budget-share`), not only for the
    /// global budget.
    pub tenant: bool,
}

/// Told of every call that waited for the budget (the host's metrics).
pub trait WaitObserver: Send + Sync {
    /// `plugin`'s call waited as `wait` says.
    fn waited(&self, plugin: &str, wait: &Waited);
}

/// The host-wide memory budget of plugin calls (see the module documentation). Cloning
/// shares it. The default is unbounded (one-shot commands: `test`, `inspect`, `rbac`).
#[derive(Clone)]
pub struct CallBudget {
    inner: Option<Arc<Inner>>,
    /// How long a call waits for its share at most.
    wait: Duration,
    /// The percent of the budget one tenant namespace's plugins may hold together.
    tenant_percent: u8,
}

impl Default for CallBudget {
    fn default() -> Self {
        CallBudget::unbounded()
    }
}

/// One level of the budget: the whole host's, or one tenant namespace's part.
struct Level {
    permits: Arc<Semaphore>,
    mib: usize,
    /// Calls registered as waiting (from just before they reclaim idle instances).
    waiting: AtomicUsize,
}

impl Level {
    fn new(mib: usize) -> Self {
        Level {
            permits: Arc::new(Semaphore::new(mib)),
            mib,
            waiting: AtomicUsize::new(0),
        }
    }
}

/// One tenant namespace's part of the budget, shared by its plugins (each holds it from
/// load, [`CallBudget::tenant`]; it lives while one of them does).
pub(crate) struct Tenant {
    namespace: String,
    level: Level,
}

impl Tenant {
    /// MiB of the budget the namespace's plugins may hold together.
    #[cfg(test)]
    pub(crate) fn mib(&self) -> usize {
        self.level.mib
    }

    /// MiB of it free now.
    #[cfg(test)]
    pub(crate) fn available_mib(&self) -> usize {
        self.level.permits.available_permits()
    }
}

/// A registered pool, with the tenant namespace of its plugin (None: a cluster plugin).
type Pooled = (Option<String>, Weak<dyn Reclaim>);

struct Inner {
    global: Level,
    waited: AtomicU64,
    timed_out: AtomicU64,
    /// Every pool of idle instances, with the tenant namespace its plugin belongs to.
    pools: Mutex<Vec<Pooled>>,
    /// Each tenant namespace's part, while one of its plugins is loaded.
    tenants: Mutex<HashMap<String, Weak<Tenant>>>,
    observer: OnceLock<Arc<dyn WaitObserver>>,
}

impl std::fmt::Debug for CallBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            None => write!(f, "CallBudget(unbounded)"),
            Some(i) => write!(
                f,
                "CallBudget({} MiB, {}% per tenant namespace, wait {:?})",
                i.global.mib, self.tenant_percent, self.wait
            ),
        }
    }
}

/// MiB in `bytes`, rounded up.
fn mib(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(MIB)).unwrap_or(usize::MAX)
}

/// Counts a call as waiting while it lives (a wait that times out or is cancelled
/// included).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        // SeqCst, paired with the load in `has_waiters`: see `CallBudget::has_waiters`.
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How one level's permits were taken.
enum Took {
    /// At once (idle instances reclaimed first, maybe).
    Now(OwnedSemaphorePermit),
    /// After waiting; MiB free when the wait began.
    Waited(OwnedSemaphorePermit, usize),
    /// Not before the deadline; MiB free when the wait began.
    TimedOut(usize),
}

impl CallBudget {
    /// No budget: calls never wait for memory.
    pub fn unbounded() -> Self {
        CallBudget {
            inner: None,
            wait: DEFAULT_WAIT,
            tenant_percent: DEFAULT_TENANT_SHARE_PERCENT,
        }
    }

    /// A budget of `bytes` (rounded down to MiB, at least 1 MiB); a call waits for its
    /// share at most [`DEFAULT_WAIT`] (see [`CallBudget::with_wait`]), a tenant
    /// namespace holds at most [`DEFAULT_TENANT_SHARE_PERCENT`] of it (see
    /// [`CallBudget::with_tenant_share`]).
    pub fn new(bytes: u64) -> Self {
        // tokio's semaphores hold at most `usize::MAX >> 3` permits; `acquire_many_owned`
        // takes a u32: a budget of 4 PiB is unbounded for any purpose.
        let mib = usize::try_from(bytes / MIB)
            .unwrap_or(usize::MAX)
            .clamp(1, u32::MAX as usize);
        CallBudget {
            inner: Some(Arc::new(Inner {
                global: Level::new(mib),
                waited: AtomicU64::new(0),
                timed_out: AtomicU64::new(0),
                pools: Mutex::new(Vec::new()),
                tenants: Mutex::new(HashMap::new()),
                observer: OnceLock::new(),
            })),
            wait: DEFAULT_WAIT,
            tenant_percent: DEFAULT_TENANT_SHARE_PERCENT,
        }
    }

    /// This budget with calls waiting at most `wait` for their share.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// This budget with the plugins of one tenant namespace holding at most `percent`
    /// (1 to 100) of it together. Set before any plugin is loaded: a namespace's part is
    /// sized when its first plugin loads.
    pub fn with_tenant_share(mut self, percent: u8) -> Self {
        self.tenant_percent = percent.clamp(1, 100);
        self
    }

    /// The percent of the budget one tenant namespace may hold.
    pub fn tenant_share_percent(&self) -> u8 {
        self.tenant_percent
    }

    /// How long a call waits for its share at most.
    pub fn wait_limit(&self) -> Duration {
        self.wait
    }

    /// Tell `observer` of every call that waits from now on (the first observer set
    /// stays; an unbounded budget has no waits to tell).
    pub fn observe(&self, observer: Arc<dyn WaitObserver>) {
        if let Some(i) = &self.inner {
            let _ = i.observer.set(observer);
        }
    }

    /// The budget in bytes (None: unbounded).
    pub fn bytes(&self) -> Option<u64> {
        self.inner.as_ref().map(|i| i.global.mib as u64 * MIB)
    }

    /// The part of it one tenant namespace may hold, in bytes (None: unbounded).
    pub fn tenant_bytes(&self) -> Option<u64> {
        self.inner.as_ref().map(|i| self.tenant_mib(i) as u64 * MIB)
    }

    /// MiB available now (None: unbounded).
    pub fn available_mib(&self) -> Option<usize> {
        self.inner
            .as_ref()
            .map(|i| i.global.permits.available_permits())
    }

    /// Calls that waited for the budget.
    pub fn waited(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.waited.load(Ordering::Relaxed))
    }

    /// Calls that waited their whole limit and gave up.
    pub fn timed_out(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.timed_out.load(Ordering::Relaxed))
    }

    /// Whether it bounds anything.
    pub(crate) fn is_bounded(&self) -> bool {
        self.inner.is_some()
    }

    /// MiB of a tenant namespace's part: the percent of the budget, at least 1 MiB.
    fn tenant_mib(&self, i: &Inner) -> usize {
        (i.global
            .mib
            .saturating_mul(usize::from(self.tenant_percent))
            / 100)
            .max(1)
    }

    /// The part of `namespace`, shared by every plugin of it loaded (None: unbounded).
    /// A plugin holds it from load on, so the part lives while one of them does.
    pub(crate) fn tenant(&self, namespace: &str) -> Option<Arc<Tenant>> {
        let i = self.inner.as_ref()?;
        let mut tenants = kubewasm_core::sync::lock(&i.tenants);
        if let Some(t) = tenants.get(namespace).and_then(Weak::upgrade) {
            return Some(t);
        }
        tenants.retain(|_, t| t.strong_count() > 0);
        let t = Arc::new(Tenant {
            namespace: namespace.to_string(),
            level: Level::new(self.tenant_mib(i)),
        });
        tenants.insert(namespace.to_string(), Arc::downgrade(&t));
        Some(t)
    }

    /// Whether a call is waiting (or about to) for what an instance of a plugin of
    /// `tenant` (None: a cluster plugin) holds: an instance pooled now must not keep its
    /// share. A waiter counts itself before it reclaims idle instances, a pool checks
    /// after it pushed one (both SeqCst, the push under the pool's lock, which the
    /// reclaim takes too): either the reclaim finds the instance, or the pool sees the
    /// waiter and drops it.
    pub(crate) fn has_waiters(&self, tenant: Option<&Tenant>) -> bool {
        self.inner.as_ref().is_some_and(|i| {
            i.global.waiting.load(Ordering::SeqCst) > 0
                || tenant.is_some_and(|t| t.level.waiting.load(Ordering::SeqCst) > 0)
        })
    }

    /// Tell the observer (the host's metrics) that `plugin`'s call waited.
    pub(crate) fn report(&self, plugin: &str, wait: &Waited) {
        if let Some(o) = self.inner.as_ref().and_then(|i| i.observer.get()) {
            o.waited(plugin, wait);
        }
    }

    /// Register a pool, of a plugin of `tenant` (None: a cluster plugin), whose idle
    /// instances hold shares, to be reclaimed when a call would otherwise wait.
    pub(crate) fn register(&self, pool: Weak<dyn Reclaim>, tenant: Option<&Tenant>) {
        if let Some(i) = &self.inner {
            let mut pools = kubewasm_core::sync::lock(&i.pools);
            pools.retain(|(_, p)| p.strong_count() > 0);
            pools.push((tenant.map(|t| t.namespace.clone()), pool));
        }
    }

    /// Drop the idle instances of every pool (`namespace` None), or of the plugins of
    /// `namespace`: what holds a share of the level a call would wait for.
    fn reclaim(i: &Inner, namespace: Option<&str>) {
        let pools: Vec<_> = kubewasm_core::sync::lock(&i.pools)
            .iter()
            .filter(|(ns, _)| namespace.is_none() || ns.as_deref() == namespace)
            .filter_map(|(_, p)| p.upgrade())
            .collect();
        for pool in pools {
            pool.reclaim();
        }
    }

    /// MiB a call of `bytes` holds: whole MiB, at most the whole budget (a tenant's, at
    /// most its namespace's part).
    fn want(i: &Inner, tenant: Option<&Tenant>, bytes: usize) -> usize {
        let most = tenant.map_or(i.global.mib, |t| t.level.mib.min(i.global.mib));
        mib(bytes as u64).min(most)
    }

    /// Top `share` (a pooled instance's, of a plugin of `tenant`) up to `bytes` in all,
    /// at both levels, only if that much is free now; false, `share` unchanged,
    /// otherwise. Never waits: a call holding a share must not wait for more (see the
    /// module documentation).
    pub(crate) fn top_up(&self, tenant: Option<&Tenant>, bytes: usize, share: &mut Share) -> bool {
        let Some(i) = &self.inner else { return true };
        let want = Self::want(i, tenant, bytes);
        let try_take = |level: &Level, held: usize| {
            let n = want.saturating_sub(held);
            // `n` ≤ the budget, itself ≤ u32::MAX.
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            match n {
                0 => Ok(None),
                n => level.permits.clone().try_acquire_many_owned(n).map(Some),
            }
        };
        // The namespace's part first, as `acquire` takes them; given back if the global
        // budget has not enough free.
        let more_tenant = match tenant {
            Some(t) => match try_take(&t.level, held(&share.tenant)) {
                Ok(p) => p,
                Err(_) => return false,
            },
            None => None,
        };
        let Ok(more_global) = try_take(&i.global, held(&share.global)) else {
            return false;
        };
        if let Some(p) = more_tenant {
            merge(&mut share.tenant, p);
        }
        if let Some(p) = more_global {
            merge(&mut share.global, p);
        }
        true
    }

    /// Take a share of `bytes` (whole MiB, at most the whole budget; a tenant's, at most
    /// its namespace's part) for a plugin of `tenant`, holding nothing else of the
    /// budget: its namespace's part first, then the global budget, each immediately if
    /// free, else after idle instances were reclaimed, else waiting in line for running
    /// calls to finish; both within `limit` (None: as long as it takes). With the wait,
    /// if there was one; `Err` when the limit passed first (nothing is held then: tokio
    /// gives back what the queue had assigned to a wait that is dropped, and the
    /// namespace's part taken is dropped with it).
    pub(crate) async fn acquire(
        &self,
        tenant: Option<&Tenant>,
        bytes: usize,
        limit: Option<Duration>,
    ) -> Result<(Share, Option<Waited>), Waited> {
        let Some(i) = &self.inner else {
            return Ok((Share::none(), None));
        };
        let want = Self::want(i, tenant, bytes);
        if want == 0 {
            return Ok((Share::none(), None));
        }
        // `want` ≤ the budget, itself ≤ u32::MAX.
        let n = u32::try_from(want).unwrap_or(u32::MAX);
        let started = Instant::now();
        let deadline = limit.map(|l| started + l);
        let mut share = Share::none();
        // The first wait's free MiB, and whether it was the namespace's.
        let mut first: Option<(usize, bool)> = None;
        let mut timed_out = false;
        let mut counted = false;
        if let Some(t) = tenant {
            let level = (&t.level, Some(t.namespace.as_str()));
            match Self::take(i, level, n, deadline, &mut counted).await {
                Took::Now(p) => share.tenant = Some(p),
                Took::Waited(p, free) => {
                    share.tenant = Some(p);
                    first = Some((free, true));
                }
                Took::TimedOut(free) => {
                    first = Some((free, true));
                    timed_out = true;
                }
            }
        }
        if !timed_out {
            match Self::take(i, (&i.global, None), n, deadline, &mut counted).await {
                Took::Now(p) => share.global = Some(p),
                Took::Waited(p, free) => {
                    share.global = Some(p);
                    first = first.or(Some((free, false)));
                }
                Took::TimedOut(free) => {
                    first = first.or(Some((free, false)));
                    timed_out = true;
                }
            }
        }
        let Some((available_mib, tenant_wait)) = first else {
            return Ok((share, None));
        };
        let waited = Waited {
            took: started.elapsed(),
            wanted_mib: want,
            available_mib,
            timed_out,
            tenant: tenant_wait,
        };
        if timed_out {
            i.timed_out.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                mib = want,
                "plugin call gave up waiting for the call memory budget"
            );
            return Err(waited);
        }
        Ok((share, Some(waited)))
    }

    /// `n` MiB of `level`: at once if free; else, counted as waiting first (so an
    /// instance pooled from here on is dropped rather than kept idle, `has_waiters`),
    /// after the idle instances holding it (of `namespace`'s plugins, or of every plugin
    /// for the global level) were dropped; else in line until `deadline`. The first wait
    /// of a call (`counted` false) counts it in [`CallBudget::waited`].
    async fn take(
        i: &Inner,
        (level, namespace): (&Level, Option<&str>),
        n: u32,
        deadline: Option<Instant>,
        counted: &mut bool,
    ) -> Took {
        if let Ok(p) = level.permits.clone().try_acquire_many_owned(n) {
            return Took::Now(p);
        }
        let _waiting = Waiting::new(&level.waiting);
        Self::reclaim(i, namespace);
        if let Ok(p) = level.permits.clone().try_acquire_many_owned(n) {
            return Took::Now(p);
        }
        if !std::mem::replace(counted, true) {
            i.waited.fetch_add(1, Ordering::Relaxed);
        }
        let available = level.permits.available_permits();
        tracing::debug!(
            mib = n,
            available,
            namespace,
            "plugin call waits for the call memory budget"
        );
        let permits = level.permits.clone().acquire_many_owned(n);
        let got = match deadline {
            Some(at) => tokio::time::timeout_at(at, permits).await.ok(),
            None => Some(permits.await),
        };
        match got {
            Some(Ok(p)) => Took::Waited(p, available),
            // The semaphore is never closed.
            Some(Err(_)) | None => Took::TimedOut(available),
        }
    }
}

/// A memory limit and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    /// The limit, in bytes.
    pub bytes: u64,
    /// Where it was read: the file, and what kind of limit it is.
    pub source: String,
}

/// A cgroup v1 memory limit at or above this is no limit: the kernel reports "unlimited"
/// as the largest page-aligned `i64` (9223372036854771712, just under 2^63).
const V1_UNLIMITED: u64 = 1 << 62;

/// The memory limit of the cgroup this process runs in: the smallest `memory.max` (cgroup
/// v2) or `memory.limit_in_bytes` (cgroup v1, the `memory` controller's hierarchy at
/// `/sys/fs/cgroup/memory`) from its own cgroup up to the root of the hierarchy it can
/// see. None when there is no cgroup hierarchy or no limit (`max`, or v1's unlimited).
pub fn cgroup_memory_limit() -> Option<MemoryLimit> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroup_limit_from(&own, std::path::Path::new("/sys/fs/cgroup"))
}

/// [`cgroup_memory_limit`] for `/proc/self/cgroup` reading `own`, cgroups mounted at
/// `root`. v2 first (the one line `0::/path`); on a v1 node (or a hybrid one, whose v2
/// hierarchy has no memory controller) the `N:memory:/path` line (the controller may
/// share its line with others: `N:cpu,memory:/path`).
fn cgroup_limit_from(own: &str, root: &std::path::Path) -> Option<MemoryLimit> {
    let v2 = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(|rel| cgroup_limit_under(root, rel, "memory.max", "cgroup v2"));
    v2.or_else(|| {
        let rel = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then_some(path)
        })?;
        cgroup_limit_under(
            &root.join("memory"),
            rel,
            "memory.limit_in_bytes",
            "cgroup v1",
        )
    })
}

/// The smallest limit in `file` from `root`/`rel` up to `root` (a directory or file that
/// is not there is skipped: a container sees its own cgroup at the root of the mount,
/// not at the path `/proc/self/cgroup` names), and the file it was read from.
fn cgroup_limit_under(
    root: &std::path::Path,
    rel: &str,
    file: &str,
    kind: &str,
) -> Option<MemoryLimit> {
    let mut dir = root.join(rel.trim_start_matches('/'));
    let mut limit: Option<(u64, std::path::PathBuf)> = None;
    loop {
        let path = dir.join(file);
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(v) = text.trim().parse::<u64>()
            && v < V1_UNLIMITED
            && limit.as_ref().is_none_or(|(l, _)| v < *l)
        {
            limit = Some((v, path));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            break;
        }
    }
    limit.map(|(bytes, path)| MemoryLimit {
        bytes,
        source: format!("{kind} {}", path.display()),
    })
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`), in bytes.
pub fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// The share of the host's memory limit given to plugin calls by default: a half. The
/// other half is the host's own: its code and heap (~20–40 MiB), the watch caches (they
/// grow with the cluster), and what a call's results cost the host on top of the plugin's
/// memory (at most one memory cap of copies per lift, see `lift`, and the parsed intents).
pub const DEFAULT_BUDGET_FRACTION: (u64, u64) = (1, 2);

/// The default budget: [`DEFAULT_BUDGET_FRACTION`] of the cgroup's memory limit, or of
/// the machine's memory when there is no limit; with the limit it was sized from (None:
/// neither was found, and the budget is unbounded).
pub fn default_budget() -> (CallBudget, Option<MemoryLimit>) {
    let (num, den) = DEFAULT_BUDGET_FRACTION;
    let limit = cgroup_memory_limit().or_else(|| {
        physical_memory().map(|bytes| MemoryLimit {
            bytes,
            source: "the machine's memory (/proc/meminfo MemTotal): no cgroup memory limit".into(),
        })
    });
    match limit {
        Some(l) => (CallBudget::new(l.bytes / den * num), Some(l)),
        None => (CallBudget::unbounded(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A share taken at once, without waiting.
    fn now(b: &CallBudget, bytes: usize) -> Share {
        match poll(pin!(b.acquire(None, bytes, None))) {
            Poll::Ready(Ok((s, None))) => s,
            Poll::Ready(other) => panic!("waited: {other:?}"),
            Poll::Pending => panic!("waited"),
        }
    }

    #[test]
    fn calls_past_the_budget_wait_until_one_finishes() {
        let b = CallBudget::new(600 << 20);
        let a = now(&b, 256 << 20);
        let c = now(&b, 256 << 20);
        assert_eq!(b.available_mib(), Some(88));
        let mut third = pin!(b.acquire(None, 256 << 20, None));
        assert!(poll(third.as_mut()).is_pending());
        assert_eq!(b.waited(), 1);
        assert!(b.has_waiters(None));
        drop(a);
        let Poll::Ready(Ok((s, Some(w)))) = poll(third.as_mut()) else {
            panic!("a share was given back")
        };
        assert_eq!(
            (w.wanted_mib, w.available_mib, w.timed_out),
            (256, 88, false)
        );
        assert_eq!(s.mib(), 256);
        assert!(!b.has_waiters(None));
        drop((c, s));
        assert_eq!(b.available_mib(), Some(600));
    }

    #[test]
    fn a_pooled_instance_keeps_what_it_holds_and_tops_up_for_its_next_call() {
        let b = CallBudget::new(1 << 30);
        let mut s = now(&b, 256 << 20);
        // Pooled holding 3.5 MiB: 4 MiB kept.
        s.shrink_to((7 << 20) / 2);
        assert_eq!(s.mib(), 4);
        assert_eq!(b.available_mib(), Some(1020));
        // Its next call takes it back to the whole cap, at once.
        assert!(b.top_up(None, 256 << 20, &mut s));
        assert_eq!(s.mib(), 256);
        drop(s);
        assert_eq!(b.available_mib(), Some(1024));
    }

    #[test]
    fn a_top_up_that_does_not_fit_at_once_takes_nothing() {
        let b = CallBudget::new(300 << 20);
        let mut s = now(&b, 256 << 20);
        s.shrink_to(101 << 20);
        let other = now(&b, 150 << 20);
        assert_eq!(b.available_mib(), Some(49));
        assert!(!b.top_up(None, 256 << 20, &mut s));
        assert_eq!(s.mib(), 101);
        assert_eq!(b.available_mib(), Some(49));
        assert_eq!(b.waited(), 0);
        drop((s, other));
        assert_eq!(b.available_mib(), Some(300));
    }

    struct Pool(Mutex<Vec<Share>>);
    impl Reclaim for Pool {
        fn reclaim(&self) {
            self.0.lock().unwrap().clear();
        }
    }

    fn registered(b: &CallBudget) -> Arc<Pool> {
        registered_as(b, None)
    }

    fn registered_as(b: &CallBudget, tenant: Option<&Tenant>) -> Arc<Pool> {
        let pool = Arc::new(Pool(Mutex::new(Vec::new())));
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(pool.clone() as Arc<dyn Reclaim>));
        b.register(weak, tenant);
        pool
    }

    #[test]
    fn idle_instances_give_their_share_back_before_a_call_waits() {
        let b = CallBudget::new(512 << 20);
        let pool = registered(&b);
        for _ in 0..2 {
            let mut s = now(&b, 256 << 20);
            s.shrink_to(200 << 20);
            pool.0.lock().unwrap().push(s);
        }
        assert_eq!(b.available_mib(), Some(112));
        // Not enough free: the idle ones are dropped, and the call goes on at once.
        let s = now(&b, 256 << 20);
        assert!(pool.0.lock().unwrap().is_empty());
        assert_eq!(b.waited(), 0);
        assert_eq!(s.mib(), 256);
    }

    /// The deadlock of issue 30, step by step: a 300 MiB budget, a plugin at a 256 MiB cap
    /// whose instances hold 101 MiB idle, two of its calls each taking a pooled instance.
    /// Before, each kept its instance's 101 MiB while waiting for 155 more, the queue
    /// handed the first what was free, and neither could ever finish. Now a top-up that
    /// does not fit at once puts its instance back (idle, reclaimable) and waits with
    /// nothing held; both calls run, one after the other.
    #[test]
    fn two_pooled_instances_topping_up_both_complete() {
        let b = CallBudget::new(300 << 20);
        let pool = registered(&b);
        // Two pooled instances, each holding the 101 MiB its last call left it.
        let mut one = now(&b, 101 << 20);
        let mut two = now(&b, 101 << 20);
        assert_eq!(b.available_mib(), Some(98));
        // Both calls find 98 MiB free: neither top-up fits.
        assert!(!b.top_up(None, 256 << 20, &mut one));
        assert!(!b.top_up(None, 256 << 20, &mut two));
        // The first puts its instance back and waits with nothing held: it reclaims its
        // own instance (199 MiB free, still short of 256) and waits at the head of the
        // queue, which hands it the 199 MiB.
        pool.0.lock().unwrap().push(one);
        let mut first = pin!(b.acquire(None, 256 << 20, None));
        assert!(poll(first.as_mut()).is_pending());
        assert_eq!(b.available_mib(), Some(0));
        // The second, still holding its instance's 101 MiB, does not wait for more: it
        // puts the instance back too, and the queue's head gets what it needs.
        pool.0.lock().unwrap().push(two);
        let mut second = pin!(b.acquire(None, 256 << 20, None));
        assert!(poll(second.as_mut()).is_pending());
        let Poll::Ready(Ok((a, Some(_)))) = poll(first.as_mut()) else {
            panic!("the first call is served once the second gave its share back")
        };
        assert_eq!(a.mib(), 256);
        assert!(poll(second.as_mut()).is_pending());
        // The first call ends: the second runs.
        drop(a);
        let Poll::Ready(Ok((c, Some(_)))) = poll(second.as_mut()) else {
            panic!("the second call is served once the first ended")
        };
        assert_eq!(c.mib(), 256);
        drop(c);
        assert_eq!(b.available_mib(), Some(300));
        assert_eq!(b.waited(), 2);
    }

    /// A wait past its limit fails, counted, and gives back what the queue had already
    /// handed it: the next call in line is served with it.
    #[tokio::test(start_paused = true)]
    async fn a_wait_past_its_limit_fails_and_keeps_nothing() {
        let b = CallBudget::new(300 << 20).with_wait(Duration::from_secs(30));
        let running = now(&b, 200 << 20);
        // Head of the queue: handed the 100 MiB free, waits for 156 more.
        let head = b.acquire(None, 256 << 20, Some(b.wait_limit()));
        let next = tokio::spawn({
            let b = b.clone();
            async move { b.acquire(None, 100 << 20, None).await }
        });
        let started = tokio::time::Instant::now();
        let Err(w) = head.await else {
            panic!("served while 200 MiB of 300 were held")
        };
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(
            w,
            Waited {
                took: Duration::from_secs(30),
                wanted_mib: 256,
                available_mib: 100,
                timed_out: true,
                tenant: false,
            }
        );
        assert_eq!((b.waited(), b.timed_out()), (2, 1));
        // What the head had been handed went to the next in line.
        let Ok(Ok((s, Some(_)))) = next.await else {
            panic!("the next call is served with what the timed-out wait gave back")
        };
        assert_eq!(s.mib(), 100);
        drop((s, running));
        assert_eq!(b.available_mib(), Some(300));
        assert!(!b.has_waiters(None));
    }

    #[test]
    fn a_cap_over_the_budget_takes_all_of_it_and_unbounded_takes_nothing() {
        let b = CallBudget::new(100 << 20);
        let s = now(&b, 1 << 30);
        assert_eq!(s.mib(), 100);
        let u = CallBudget::unbounded();
        assert_eq!(now(&u, 1 << 30).mib(), 0);
        let mut held = Share::none();
        assert!(u.top_up(None, 1 << 30, &mut held));
        assert_eq!(u.bytes(), None);
        assert_eq!(CallBudget::new(0).bytes(), Some(1 << 20));
    }

    /// A share of `tenant`'s part and the global budget, taken at once.
    fn tenant_now(b: &CallBudget, tenant: &Tenant, bytes: usize) -> Share {
        match poll(pin!(b.acquire(Some(tenant), bytes, None))) {
            Poll::Ready(Ok((s, None))) => s,
            Poll::Ready(other) => panic!("waited: {other:?}"),
            Poll::Pending => panic!("waited"),
        }
    }

    #[test]
    fn a_tenant_namespace_holds_its_percent_of_the_budget() {
        let b = CallBudget::new(400 << 20);
        assert_eq!(b.tenant_bytes(), Some(100 << 20));
        let b = b.with_tenant_share(50);
        assert_eq!(b.tenant_bytes(), Some(200 << 20));
        let a = b.tenant("team-a").unwrap();
        // One part per namespace, shared by its plugins while one of them is loaded.
        assert!(Arc::ptr_eq(&a, &b.tenant("team-a").unwrap()));
        assert!(!Arc::ptr_eq(&a, &b.tenant("team-b").unwrap()));
        assert_eq!(a.mib(), 200);
        // A call asking more than the part is held to it.
        let s = tenant_now(&b, &a, 1 << 30);
        assert_eq!((s.mib(), a.available_mib()), (200, 0));
        assert_eq!(b.available_mib(), Some(200));
        drop(s);
        assert_eq!((a.available_mib(), b.available_mib()), (200, Some(400)));
        // At least 1 MiB, whatever the percent; none when unbounded.
        assert_eq!(
            CallBudget::new(10 << 20)
                .with_tenant_share(1)
                .tenant_bytes(),
            Some(1 << 20)
        );
        assert!(CallBudget::unbounded().tenant("team-a").is_none());
    }

    /// The isolation: namespace a's plugins hold all of its part; its next call
    /// waits on that part alone, and namespace b's call and a cluster plugin's call are
    /// served at once from what a cannot take.
    #[test]
    fn a_namespace_spending_its_part_delays_no_other_namespace() {
        let b = CallBudget::new(400 << 20);
        let (a, other) = (b.tenant("team-a").unwrap(), b.tenant("team-b").unwrap());
        let first = tenant_now(&b, &a, 60 << 20);
        let mut second = pin!(b.acquire(Some(&a), 60 << 20, None));
        assert!(poll(second.as_mut()).is_pending());
        // It waits for a's part, holding nothing of the global budget.
        assert_eq!(b.available_mib(), Some(340));
        assert!(b.has_waiters(Some(&a)));
        assert!(!b.has_waiters(Some(&other)) && !b.has_waiters(None));
        let theirs = tenant_now(&b, &other, 60 << 20);
        let cluster = now(&b, 200 << 20);
        assert_eq!(b.available_mib(), Some(80));
        drop(first);
        let Poll::Ready(Ok((s, Some(w)))) = poll(second.as_mut()) else {
            panic!("a's part was given back")
        };
        assert_eq!(
            (w.wanted_mib, w.available_mib, w.tenant, w.timed_out),
            (60, 40, true, false)
        );
        assert_eq!(b.waited(), 1);
        drop((s, theirs, cluster));
        assert_eq!(b.available_mib(), Some(400));
        assert_eq!((a.available_mib(), other.available_mib()), (100, 100));
    }

    /// The two levels in their one order: a tenant call waiting for the global budget
    /// holds its namespace's part; its namespace's next call waits for that part holding
    /// nothing global; a pooled tenant instance whose top-up does not fit at both levels
    /// takes nothing at either, and the global waiter reclaims it. Everything is served
    /// once the running cluster call ends.
    #[test]
    fn tenant_calls_and_pooled_instances_topping_up_all_complete() {
        let b = CallBudget::new(300 << 20).with_tenant_share(50);
        let a = b.tenant("team-a").unwrap();
        let pool = registered_as(&b, Some(&a));
        // An idle instance of a's, holding 30 MiB at both levels.
        let mut idle = tenant_now(&b, &a, 30 << 20);
        let running = now(&b, 230 << 20);
        assert_eq!((b.available_mib(), a.available_mib()), (Some(40), 120));
        // Its next call: 70 more of a's part is free, 70 more of the global is not. Nothing
        // taken at either level.
        assert!(!b.top_up(Some(&a), 100 << 20, &mut idle));
        assert_eq!((b.available_mib(), a.available_mib()), (Some(40), 120));
        // Back to the pool; the call waits for its whole cap: a's part at once, then the
        // global, reclaiming the idle instance (70 free), handed to it at the head.
        pool.0.lock().unwrap().push(idle);
        let mut first = pin!(b.acquire(Some(&a), 100 << 20, None));
        assert!(poll(first.as_mut()).is_pending());
        assert!(pool.0.lock().unwrap().is_empty());
        assert_eq!((b.available_mib(), a.available_mib()), (Some(0), 50));
        // a's next call waits on a's part, holding nothing; a cluster call waits for the
        // global budget behind the first.
        let mut second = pin!(b.acquire(Some(&a), 100 << 20, None));
        assert!(poll(second.as_mut()).is_pending());
        let mut cluster = pin!(b.acquire(None, 50 << 20, None));
        assert!(poll(cluster.as_mut()).is_pending());
        assert_eq!((b.available_mib(), a.available_mib()), (Some(0), 0));
        drop(running);
        let Poll::Ready(Ok((one, Some(w)))) = poll(first.as_mut()) else {
            panic!("the global budget was given back")
        };
        assert!(!w.tenant);
        let Poll::Ready(Ok((c, Some(_)))) = poll(cluster.as_mut()) else {
            panic!("200 MiB are free")
        };
        assert!(poll(second.as_mut()).is_pending());
        drop(one);
        let Poll::Ready(Ok((two, Some(w)))) = poll(second.as_mut()) else {
            panic!("a's part was given back")
        };
        assert!(w.tenant);
        assert_eq!(two.mib(), 100);
        drop((two, c));
        assert_eq!((b.available_mib(), a.available_mib()), (Some(300), 150));
        assert_eq!(b.waited(), 3);
        assert!(!b.has_waiters(Some(&a)));
    }

    /// The wait limit covers both levels together: 20 s for the namespace's part, then
    /// 10 s for the global budget, and the call gives up at 30 s holding nothing (the
    /// part it had taken given back).
    #[tokio::test(start_paused = true)]
    async fn the_wait_limit_covers_both_levels() {
        let b = CallBudget::new(300 << 20)
            .with_tenant_share(50)
            .with_wait(Duration::from_secs(30));
        let a = b.tenant("team-a").unwrap();
        let held = tenant_now(&b, &a, 100 << 20);
        let cluster = now(&b, 150 << 20);
        // At 20 s a's part is given back, and a cluster call takes most of the global
        // budget it freed before the waiter gets there.
        let release = tokio::spawn({
            let b = b.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(20)).await;
                drop(held);
                now(&b, 120 << 20)
            }
        });
        let started = tokio::time::Instant::now();
        let Err(w) = b.acquire(Some(&a), 100 << 20, Some(b.wait_limit())).await else {
            panic!("served while 250 MiB of 300 were held")
        };
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(
            w,
            Waited {
                took: Duration::from_secs(30),
                wanted_mib: 100,
                available_mib: 50,
                timed_out: true,
                tenant: true,
            }
        );
        let late = release.await.unwrap();
        assert_eq!((b.waited(), b.timed_out()), (1, 1));
        // Nothing kept at either level.
        assert_eq!((b.available_mib(), a.available_mib()), (Some(30), 150));
        drop((cluster, late));
        assert_eq!((b.available_mib(), a.available_mib()), (Some(300), 150));
    }

    #[test]
    fn the_cgroup_limit_is_the_smallest_on_the_way_up() {
        let root = tempfile::tempdir().unwrap();
        let pod = root.path().join("kubepods/pod1");
        let ctr = pod.join("ctr");
        std::fs::create_dir_all(&ctr).unwrap();
        std::fs::write(ctr.join("memory.max"), "max\n").unwrap();
        std::fs::write(pod.join("memory.max"), "1073741824\n").unwrap();
        std::fs::write(root.path().join("memory.max"), "4294967296\n").unwrap();
        let own = "0::/kubepods/pod1/ctr\n";
        let found = cgroup_limit_from(own, root.path()).unwrap();
        assert_eq!(found.bytes, 1 << 30);
        assert_eq!(
            found.source,
            format!("cgroup v2 {}", pod.join("memory.max").display())
        );
        std::fs::write(ctr.join("memory.max"), "536870912\n").unwrap();
        assert_eq!(
            cgroup_limit_from(own, root.path()).map(|l| l.bytes),
            Some(512 << 20)
        );
        let none = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_limit_from("0::/\n", none.path()), None);
    }

    /// A cgroup v1 node (the issue's: a container limit of 1536 MiB, where `auto` found
    /// no `memory.max` and took half the machine): the memory controller's line, its
    /// hierarchy under `memory/`, unlimited levels (just under 2^63) skipped.
    #[test]
    fn a_cgroup_v1_limit_is_read_from_the_memory_controller() {
        let root = tempfile::tempdir().unwrap();
        let memory = root.path().join("memory");
        let pod = memory.join("kubepods/burstable/pod1");
        let ctr = pod.join("ctr");
        std::fs::create_dir_all(&ctr).unwrap();
        let unlimited = "9223372036854771712\n";
        std::fs::write(memory.join("memory.limit_in_bytes"), unlimited).unwrap();
        std::fs::write(pod.join("memory.limit_in_bytes"), unlimited).unwrap();
        std::fs::write(ctr.join("memory.limit_in_bytes"), "1610612736\n").unwrap();
        // A v1 node's /proc/self/cgroup: one line per hierarchy, no `0::` line.
        let own = "12:pids:/kubepods/burstable/pod1/ctr\n\
                   7:memory:/kubepods/burstable/pod1/ctr\n\
                   3:cpu,cpuacct:/kubepods/burstable/pod1/ctr\n\
                   1:name=systemd:/kubepods/burstable/pod1/ctr\n";
        let found = cgroup_limit_from(own, root.path()).unwrap();
        assert_eq!(found.bytes, 1536 << 20);
        assert_eq!(
            found.source,
            format!("cgroup v1 {}", ctr.join("memory.limit_in_bytes").display())
        );
        // Inside the container the mount's root is its own cgroup: the path of
        // /proc/self/cgroup is not there, and the root's file is the limit.
        let inside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(inside.path().join("memory")).unwrap();
        std::fs::write(
            inside.path().join("memory/memory.limit_in_bytes"),
            "1610612736\n",
        )
        .unwrap();
        assert_eq!(
            cgroup_limit_from(own, inside.path()).map(|l| l.bytes),
            Some(1536 << 20)
        );
        // A hybrid node: the `0::` line's hierarchy has no memory.max; v1 answers.
        let hybrid = format!("0::/kubepods/burstable/pod1/ctr\n{own}");
        assert_eq!(
            cgroup_limit_from(&hybrid, root.path()).map(|l| l.bytes),
            Some(1536 << 20)
        );
        // Unlimited all the way up: no limit.
        std::fs::write(ctr.join("memory.limit_in_bytes"), unlimited).unwrap();
        assert_eq!(cgroup_limit_from(own, root.path()), None);
        // Co-mounted with another controller on one line.
        assert!(cgroup_limit_from("4:cpu,memory:/x\n", inside.path()).is_some());
        assert_eq!(cgroup_limit_from("4:cpu:/x\n", inside.path()), None);
    }
}
