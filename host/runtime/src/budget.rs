//! One host-wide budget of plugin memory: the sum over every plugin of the memory its
//! calls in flight may use and its idle pooled instances hold stays within one figure,
//! sized from the container's memory limit, so that no set of plugins, each within its
//! own cap, can together take the host past its limit (an OOM kill, a restart, a replay
//! of the same events: a crash loop).
//!
//! How it is held, in units of MiB ([`CallBudget`]):
//! - a call holds its plugin's whole memory cap from before its instance is taken or
//!   instantiated until the instance is pooled or dropped: what the instance may grow to
//!   while it runs. A call that finds the budget spent waits (fairly, in arrival order,
//!   before its call clock starts) for others to finish;
//! - an instance put back in the pool keeps only the memory it holds (linear memory never
//!   shrinks), and gives that back when it is dropped;
//! - a call that would wait first drops every idle pooled instance of every plugin:
//!   idle instances are a cache, calls are work, and a budget held by idle instances
//!   would otherwise never be released to a call of another plugin.
//!
//! A plugin whose cap is over the whole budget is charged the whole budget: it runs
//! alone rather than never.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One MiB, the budget's unit.
const MIB: u64 = 1 << 20;

/// A share of the call budget held by a call or a pooled instance; given back when
/// dropped.
#[derive(Debug)]
pub(crate) struct Share(Option<OwnedSemaphorePermit>);

impl Share {
    /// Nothing held (an unbounded budget).
    pub(crate) fn none() -> Self {
        Share(None)
    }

    /// Keep only `bytes` (rounded up to MiB) of what is held, giving the rest back.
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        let Some(permit) = &mut self.0 else { return };
        let keep = mib(bytes as u64).min(permit.num_permits());
        let excess = permit.num_permits() - keep;
        if excess > 0 {
            drop(permit.split(excess));
        }
    }

    /// MiB held.
    pub(crate) fn mib(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

/// Something holding shares it can give back at once: a plugin's pool of idle instances.
pub(crate) trait Reclaim: Send + Sync {
    /// Drop every idle instance (and so the shares they hold).
    fn reclaim(&self);
}

/// The host-wide memory budget of plugin calls (see the module documentation). Cloning
/// shares it. The default is unbounded (one-shot commands: `test`, `inspect`, `rbac`).
#[derive(Clone, Default)]
pub struct CallBudget {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    permits: Arc<Semaphore>,
    mib: usize,
    waited: AtomicU64,
    pools: Mutex<Vec<Weak<dyn Reclaim>>>,
}

impl std::fmt::Debug for CallBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            None => write!(f, "CallBudget(unbounded)"),
            Some(i) => write!(f, "CallBudget({} MiB)", i.mib),
        }
    }
}

/// MiB in `bytes`, rounded up.
fn mib(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(MIB)).unwrap_or(usize::MAX)
}

impl CallBudget {
    /// No budget: calls never wait for memory.
    pub fn unbounded() -> Self {
        CallBudget { inner: None }
    }

    /// A budget of `bytes` (rounded down to MiB, at least 1 MiB).
    pub fn new(bytes: u64) -> Self {
        // tokio's semaphores hold at most `usize::MAX >> 3` permits; `acquire_many_owned`
        // takes a u32: a budget of 4 PiB is unbounded for any purpose.
        let mib = usize::try_from(bytes / MIB)
            .unwrap_or(usize::MAX)
            .clamp(1, u32::MAX as usize);
        CallBudget {
            inner: Some(Arc::new(Inner {
                permits: Arc::new(Semaphore::new(mib)),
                mib,
                waited: AtomicU64::new(0),
                pools: Mutex::new(Vec::new()),
            })),
        }
    }

    /// The budget in bytes (None: unbounded).
    pub fn bytes(&self) -> Option<u64> {
        self.inner.as_ref().map(|i| i.mib as u64 * MIB)
    }

    /// MiB available now (None: unbounded).
    pub fn available_mib(&self) -> Option<usize> {
        self.inner.as_ref().map(|i| i.permits.available_permits())
    }

    /// Calls that waited for the budget.
    pub fn waited(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.waited.load(Ordering::Relaxed))
    }

    /// Whether it bounds anything.
    pub(crate) fn is_bounded(&self) -> bool {
        self.inner.is_some()
    }

    /// Register a pool whose idle instances hold shares, to be reclaimed when a call
    /// would otherwise wait.
    pub(crate) fn register(&self, pool: Weak<dyn Reclaim>) {
        if let Some(i) = &self.inner {
            let mut pools = kubewasm_core::sync::lock(&i.pools);
            pools.retain(|p| p.strong_count() > 0);
            pools.push(pool);
        }
    }

    /// Take shares up to `bytes` in all (whole MiB, at most the whole budget), `held`
    /// being already held (a pooled instance's): immediately if free, else after idle
    /// instances were reclaimed, else waiting in line for running calls to finish.
    pub(crate) async fn acquire(&self, bytes: usize, mut held: Share) -> Share {
        let Some(i) = &self.inner else {
            return Share::none();
        };
        let want = mib(bytes as u64).min(i.mib).saturating_sub(held.mib());
        if want == 0 {
            return held;
        }
        // `want` ≤ the budget, itself ≤ u32::MAX.
        let n = u32::try_from(want).unwrap_or(u32::MAX);
        let permit = match i.permits.clone().try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(_) => {
                // Our own share first: the idle instances' turn to give theirs back.
                let pools: Vec<_> = kubewasm_core::sync::lock(&i.pools)
                    .iter()
                    .filter_map(Weak::upgrade)
                    .collect();
                for pool in pools {
                    pool.reclaim();
                }
                match i.permits.clone().try_acquire_many_owned(n) {
                    Ok(p) => p,
                    Err(_) => {
                        i.waited.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(
                            mib = want,
                            available = i.permits.available_permits(),
                            "plugin call waits for the call memory budget"
                        );
                        // The semaphore is never closed.
                        match i.permits.clone().acquire_many_owned(n).await {
                            Ok(p) => p,
                            Err(_) => return held,
                        }
                    }
                }
            }
        };
        match &mut held.0 {
            Some(h) => {
                h.merge(permit);
                held
            }
            None => Share(Some(permit)),
        }
    }
}

/// The memory limit of the cgroup (v2) this process runs in, in bytes: the smallest
/// `memory.max` from its own cgroup up to the root of the hierarchy it can see. None when
/// there is no cgroup v2 hierarchy or no limit (`max`).
pub fn cgroup_memory_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v2: the one line `0::/path`.
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    cgroup_limit_under(std::path::Path::new("/sys/fs/cgroup"), rel)
}

/// [`cgroup_memory_limit`] for a hierarchy mounted at `root`, the process in `rel`.
fn cgroup_limit_under(root: &std::path::Path, rel: &str) -> Option<u64> {
    let mut dir = root.join(rel.trim_start_matches('/'));
    let mut limit: Option<u64> = None;
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("memory.max"))
            && let Ok(v) = text.trim().parse::<u64>()
        {
            limit = Some(limit.map_or(v, |l| l.min(v)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            break;
        }
    }
    limit
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
/// the machine's memory when there is no limit; with where the figure came from.
pub fn default_budget() -> (CallBudget, &'static str) {
    let (num, den) = DEFAULT_BUDGET_FRACTION;
    match cgroup_memory_limit() {
        Some(limit) => (
            CallBudget::new(limit / den * num),
            "the cgroup's memory.max",
        ),
        None => match physical_memory() {
            Some(total) => (CallBudget::new(total / den * num), "the machine's memory"),
            None => (
                CallBudget::unbounded(),
                "nothing (no cgroup limit or /proc/meminfo)",
            ),
        },
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

    fn now(b: &CallBudget, bytes: usize, held: Share) -> Share {
        match poll(pin!(b.acquire(bytes, held))) {
            Poll::Ready(s) => s,
            Poll::Pending => panic!("waited"),
        }
    }

    #[test]
    fn calls_past_the_budget_wait_until_one_finishes() {
        let b = CallBudget::new(600 << 20);
        let a = now(&b, 256 << 20, Share::none());
        let c = now(&b, 256 << 20, Share::none());
        assert_eq!(b.available_mib(), Some(88));
        let mut third = pin!(b.acquire(256 << 20, Share::none()));
        assert!(poll(third.as_mut()).is_pending());
        assert_eq!(b.waited(), 1);
        drop(a);
        let Poll::Ready(s) = poll(third.as_mut()) else {
            panic!("a share was given back")
        };
        assert_eq!(s.mib(), 256);
        drop((c, s));
        assert_eq!(b.available_mib(), Some(600));
    }

    #[test]
    fn a_pooled_instance_keeps_what_it_holds_and_tops_up_for_its_next_call() {
        let b = CallBudget::new(1 << 30);
        let mut s = now(&b, 256 << 20, Share::none());
        // Pooled holding 3.5 MiB: 4 MiB kept.
        s.shrink_to((7 << 20) / 2);
        assert_eq!(s.mib(), 4);
        assert_eq!(b.available_mib(), Some(1020));
        // Its next call takes it back to the whole cap.
        let s = now(&b, 256 << 20, s);
        assert_eq!(s.mib(), 256);
        drop(s);
        assert_eq!(b.available_mib(), Some(1024));
    }

    struct Pool(Mutex<Vec<Share>>);
    impl Reclaim for Pool {
        fn reclaim(&self) {
            self.0.lock().unwrap().clear();
        }
    }

    #[test]
    fn idle_instances_give_their_share_back_before_a_call_waits() {
        let b = CallBudget::new(512 << 20);
        let pool = Arc::new(Pool(Mutex::new(Vec::new())));
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(pool.clone() as Arc<dyn Reclaim>));
        b.register(weak);
        for _ in 0..2 {
            let mut s = now(&b, 256 << 20, Share::none());
            s.shrink_to(200 << 20);
            pool.0.lock().unwrap().push(s);
        }
        assert_eq!(b.available_mib(), Some(112));
        // Not enough free: the idle ones are dropped, and the call goes on at once.
        let s = now(&b, 256 << 20, Share::none());
        assert!(pool.0.lock().unwrap().is_empty());
        assert_eq!(b.waited(), 0);
        assert_eq!(s.mib(), 256);
    }

    #[test]
    fn a_cap_over_the_budget_takes_all_of_it_and_unbounded_takes_nothing() {
        let b = CallBudget::new(100 << 20);
        let s = now(&b, 1 << 30, Share::none());
        assert_eq!(s.mib(), 100);
        let u = CallBudget::unbounded();
        assert_eq!(now(&u, 1 << 30, Share::none()).mib(), 0);
        assert_eq!(u.bytes(), None);
        assert_eq!(CallBudget::new(0).bytes(), Some(1 << 20));
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
        assert_eq!(
            cgroup_limit_under(root.path(), "/kubepods/pod1/ctr"),
            Some(1 << 30)
        );
        std::fs::write(ctr.join("memory.max"), "536870912\n").unwrap();
        assert_eq!(
            cgroup_limit_under(root.path(), "/kubepods/pod1/ctr"),
            Some(512 << 20)
        );
        let none = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_limit_under(none.path(), "/"), None);
    }
}
