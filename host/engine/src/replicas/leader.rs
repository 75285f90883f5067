//! Leader election on a `coordination.k8s.io/v1` Lease, for running more than one replica.
//!
//! Only the leader applies intents; followers keep their caches warm so a hand-over is
//! quick. The protocol is client-go's `leaderelection` with a Lease lock:
//!
//! - a candidate **acquires** the lease when it is absent (create: exactly one create
//!   wins, the others get `409 AlreadyExists`), released (no `holderIdentity`: taken at
//!   once) or expired. A takeover is an update carrying the resourceVersion that was
//!   read, so of two candidates racing for the same expired lease one gets
//!   `409 Conflict` and stays a follower. `leaseTransitions` counts changes of holder;
//! - **expiry is judged by the observer's own clock**, as client-go does: each candidate
//!   remembers the local monotonic instant at which it last saw the lease record change
//!   (holder, renew or acquire time, duration, transitions or resourceVersion). A held
//!   lease is valid while `observed_at + leaseDurationSeconds > now`, whatever its
//!   `renewTime` says, so clock skew between replicas does not matter: a holder whose
//!   clock is far behind but who keeps renewing stays valid, and one whose `renewTime`
//!   is in the future but who stopped renewing expires after `leaseDurationSeconds` of
//!   no change. The first sight of a held lease counts from the moment it is seen, so a
//!   replica that starts next to a live leader waits a full lease duration;
//! - the leader **renews** every `retry_period` (an update of `renewTime`, again with the
//!   resourceVersion precondition);
//! - the leader **loses** the lease as soon as it finds another holder in it, or when its
//!   renewals have failed until its **write deadline**: the start of the last successful
//!   renewal plus `renew_deadline`. As `renew_deadline < lease_duration`, a leader cut
//!   off from the API server stops before any other candidate can consider the lease
//!   expired. [`Leadership::guard`] races a call or an apply against the end of the term,
//!   so work in flight at the deadline is abandoned (its request dropped) and none starts
//!   after; [`Leadership::lost`] resolves, and `kubewasm run` exits non-zero so the new
//!   leader takes over from a fresh process, as controller-runtime does;
//! - on cancellation the leader first stops leading (the flag turns false), then
//!   **releases** the lease (clears `holderIdentity`) so another replica takes over at
//!   once instead of waiting for expiry. A release is not a loss: `lost()` stays pending.
//!
//! After losing, a replica that keeps running becomes a candidate again.
//!
//! **Identity per process**: a container restarted in the same pod keeps its pod name,
//! and a lease held under that name would be taken back at once by the new process (it
//! is "ours"), before its plugins are loaded and without counting a transition.
//! [`process_identity`] adds a random suffix to the name, as controller-runtime does
//! (`hostname_uuid`), so each process is its own candidate. And a replica stands only
//! once it is ready to serve ([`spawn_when`]): plugins loaded, caches synced.
//!
//! RBAC: `get`, `create` and `update` on `leases` (group `coordination.k8s.io`) in the
//! lease's namespace.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::lease::{Attempt, LeaseLock};
use super::shards::MoveLabel;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Parameters of the election; [`LeaderConfig::new`] fills in client-go's defaults.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Name of the Lease object.
    pub lease_name: String,
    /// Namespace of the Lease object.
    pub namespace: String,
    /// This process's identity (unique per process: [`process_identity`]).
    pub identity: String,
    /// How long a lease stays valid after its last renewal (written to the Lease,
    /// rounded up to whole seconds). Default 15s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down; must be shorter
    /// than `lease_duration`. Default 10s.
    pub renew_deadline: Duration,
    /// Interval between renewals, and between acquisition attempts. Default 2s.
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// A configuration with the default durations (15s lease, 10s renew deadline, 2s
    /// retry period).
    pub fn new(
        lease_name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderConfig {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks `lease_duration > renew_deadline > retry_period > 0` and that names are
    /// set; [`spawn`] requires a valid configuration.
    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |reason: String| {
            Err(crate::Error::LeaderElection {
                lease: format!("{}/{}", self.namespace, self.lease_name),
                reason,
            })
        };
        if self.lease_name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            return bad("lease name, namespace and identity must all be set".into());
        }
        if self.retry_period.is_zero()
            || self.renew_deadline <= self.retry_period
            || self.lease_duration <= self.renew_deadline
        {
            return bad(format!(
                "need lease duration ({:?}) > renew deadline ({:?}) > retry period ({:?}) > 0",
                self.lease_duration, self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }

    /// The RBAC rules the election needs, for [`crate::serve::access::Access::require`]:
    /// `get`, `create` and `update` on its Lease's namespace's leases. Without them this
    /// replica never leads, so the host is not ready.
    pub fn needs(&self) -> Vec<crate::serve::access::Need> {
        ["get", "create", "update"]
            .into_iter()
            .map(|verb| crate::serve::access::Need {
                rule: crate::serve::access::Rule::new(
                    verb,
                    "coordination.k8s.io",
                    "leases",
                    Some(&self.namespace),
                ),
                purpose: format!(
                    "leader election on Lease {}/{}",
                    self.namespace, self.lease_name
                ),
                blocking: true,
            })
            .collect()
    }

    fn lease_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        secs.clamp(1.0, i32::MAX as f64) as i32
    }
}

/// A holder identity for this process: `base` (the pod name, or the hostname) and a
/// random suffix, `base_1a2b3c4d5e6f7a8b`, so a restarted container is a new candidate
/// and never takes over its predecessor's lease as its own.
pub fn process_identity(base: &str) -> String {
    format!("{base}_{:016x}", rand::random::<u64>())
}

/// One term of leadership as the guards see it.
#[derive(Debug, Clone)]
struct Term {
    /// Cancelled when the term ends (lost, or stepping down on shutdown).
    end: CancellationToken,
    /// The write deadline: start of the last successful renewal + renew deadline
    /// (`None` for [`Leadership::always`] and between terms).
    deadline: Option<Instant>,
}

impl Term {
    fn ended() -> Term {
        let end = CancellationToken::new();
        end.cancel();
        Term {
            end,
            deadline: None,
        }
    }
}

/// The end of a term of leadership, as reported by [`Leadership::guard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotLeading;

/// Whether this replica currently leads; cheap to clone and to query.
#[derive(Debug, Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    term: watch::Receiver<Term>,
    /// Cancelled the first time this replica loses the lease (never on a release).
    lost: CancellationToken,
    /// Keeps the channels open for [`Leadership::always`], so `changed()` pends forever.
    _always: Option<Arc<(watch::Sender<bool>, watch::Sender<Term>)>>,
}

impl Leadership {
    /// Leadership for a single replica: leader from the start, forever.
    pub fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        let (term_tx, term) = watch::channel(Term {
            end: CancellationToken::new(),
            deadline: None,
        });
        Leadership {
            rx,
            term,
            lost: CancellationToken::new(),
            _always: Some(Arc::new((tx, term_tx))),
        }
    }

    /// Whether this replica leads right now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// A receiver of leadership changes. After the election task ends (cancelled) the
    /// value is `false` and `changed()` returns an error.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Waits until this replica leads; `false` when the election ended first.
    pub async fn until_leader(&self) -> bool {
        let mut rx = self.rx.clone();
        rx.wait_for(|leading| *leading).await.is_ok()
    }

    /// The current write deadline while leading: no write may land after it unless a
    /// renewal succeeds first (it then moves on). `None` when not leading, and for
    /// [`Leadership::always`].
    pub fn deadline(&self) -> Option<Instant> {
        let term = self.term.borrow();
        (!term.end.is_cancelled())
            .then_some(term.deadline)
            .flatten()
    }

    /// Resolves when this replica loses the lease: its renewals failed until the write
    /// deadline, or another replica holds it. Pends forever for [`Leadership::always`]
    /// and when the election ends by release (shutdown). Once resolved it stays so, even
    /// if the replica leads again later.
    pub async fn lost(&self) {
        self.lost.cancelled().await
    }

    /// Whether [`Leadership::lost`] has resolved.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Runs `fut` while this term of leadership lasts: `Err(NotLeading)` at once when
    /// not leading, or as soon as the term ends (the write deadline passed without a
    /// renewal, another holder, shutdown), dropping `fut` there, so an HTTP request in
    /// flight is abandoned. The end of the term wins a tie.
    pub async fn guard<F: Future>(&self, fut: F) -> Result<F::Output, NotLeading> {
        // Read the term before the flag: the elector starts a term before raising the
        // flag and ends it before lowering it, so a stale term is seen as ended.
        let end = self.term.borrow().end.clone();
        if end.is_cancelled() || !self.is_leader() {
            return Err(NotLeading);
        }
        tokio::select! {
            biased;
            _ = end.cancelled() => Err(NotLeading),
            out = fut => Ok(out),
        }
    }
}

/// Metrics of the election: `kubewasm_leader_changes_total`.
#[derive(Debug, Default, Clone)]
pub struct LeaderMetrics {
    /// Terms this replica began and ended: `acquired`, `lost`, `released`.
    pub changes: Family<MoveLabel, Counter>,
}

impl LeaderMetrics {
    /// How many terms ended or began with `change` (`acquired`, `lost`, `released`).
    pub fn count(&self, change: &str) -> u64 {
        self.changes.get_or_create(&label(change)).get()
    }

    fn inc(&self, change: &str) {
        self.changes.get_or_create(&label(change)).inc();
    }
}

fn label(change: &str) -> MoveLabel {
    MoveLabel {
        change: change.to_string(),
    }
}

/// Starts the election task. The returned [`Leadership`] turns true while this replica
/// holds the lease. Cancelling `cancel` ends the task: a leader stops leading, then
/// releases the lease. An invalid `config` is reported (error log) and the task ends at
/// once, never leading.
pub fn spawn(
    client: kube::Client,
    config: LeaderConfig,
    cancel: CancellationToken,
) -> (Leadership, JoinHandle<()>) {
    let metrics = LeaderMetrics::default();
    spawn_when(client, config, std::future::ready(()), metrics, cancel)
}

/// [`spawn`], standing for leader only once `ready` resolves (the host loaded its plugins
/// and synced its caches): a replica that cannot serve yet never takes the lease from
/// one that can, nor holds it while it starts. Until then it is a follower. Each term
/// begun and ended is counted in `metrics`.
pub fn spawn_when(
    client: kube::Client,
    config: LeaderConfig,
    ready: impl Future<Output = ()> + Send + 'static,
    metrics: LeaderMetrics,
    cancel: CancellationToken,
) -> (Leadership, JoinHandle<()>) {
    // Every change exported from the start, at 0, so a rate has a series to start from.
    for change in ["acquired", "lost", "released"] {
        let _ = metrics.changes.get_or_create(&label(change));
    }
    let (tx, rx) = watch::channel(false);
    let (term_tx, term) = watch::channel(Term::ended());
    let lost = CancellationToken::new();
    let elector = Elector {
        lock: LeaseLock::new(
            client,
            &config.namespace,
            &config.lease_name,
            &config.identity,
            config.lease_seconds(),
            Default::default(),
        ),
        lease: format!("{}/{}", config.namespace, config.lease_name),
        config,
        tx,
        term: term_tx,
        lost: lost.clone(),
        cancel,
        metrics,
    };
    let handle = tokio::spawn(elector.run(ready));
    (
        Leadership {
            rx,
            term,
            lost,
            _always: None,
        },
        handle,
    )
}

struct Elector {
    lock: LeaseLock,
    config: LeaderConfig,
    lease: String,
    tx: watch::Sender<bool>,
    term: watch::Sender<Term>,
    lost: CancellationToken,
    cancel: CancellationToken,
    metrics: LeaderMetrics,
}

impl Elector {
    async fn run(mut self, ready: impl Future<Output = ()>) {
        if let Err(e) = self.config.validate() {
            tracing::error!(error = %e, "leader election not started");
            return;
        }
        tokio::select! {
            _ = self.cancel.cancelled() => return,
            _ = ready => {}
        }
        tracing::info!(identity = %self.config.identity, lease = %self.lease, "ready to serve: standing for leader");
        loop {
            let Some(acquired_at) = self.acquire().await else {
                // Cancelled as a candidate; an attempt cut short may still have won.
                self.release().await;
                return;
            };
            // The term starts before the flag rises and ends before it falls (see guard).
            let end = CancellationToken::new();
            self.term.send_replace(Term {
                end: end.clone(),
                deadline: Some(acquired_at + self.config.renew_deadline),
            });
            self.metrics.inc("acquired");
            self.tx.send_replace(true);
            tracing::info!(identity = %self.config.identity, lease = %self.lease, "became leader");
            let cancelled = self.hold(acquired_at).await;
            end.cancel();
            self.tx.send_replace(false);
            if !cancelled {
                self.metrics.inc("lost");
                self.lost.cancel();
            }
            if cancelled {
                self.release().await;
                self.metrics.inc("released");
                tracing::info!(identity = %self.config.identity, lease = %self.lease, "released leadership on shutdown");
                return;
            }
            tracing::info!(identity = %self.config.identity, lease = %self.lease, "lost leadership");
        }
    }

    /// Tries until the lease is ours (the start of the winning attempt: the lease's
    /// `renewTime` is no earlier) or the task is cancelled (`None`).
    async fn acquire(&mut self) -> Option<Instant> {
        let mut last_holder = None::<String>;
        // An error that keeps the host from ever leading (its namespace missing, no RBAC
        // for Leases) is said once at WARN, again only when it changes: otherwise a
        // replica waits forever with nothing in the log to say why.
        let mut last_error = None::<String>;
        loop {
            if self.cancel.is_cancelled() {
                return None;
            }
            let start = Instant::now();
            let cancel = self.cancel.clone();
            let renew_deadline = self.config.renew_deadline;
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return None,
                r = tokio::time::timeout(renew_deadline, self.lock.try_acquire_or_renew()) => r,
            };
            match attempt {
                Ok(Ok(Attempt::Held)) => return Some(start),
                Ok(Ok(Attempt::Other(holder))) => {
                    if last_holder.as_ref() != Some(&holder) {
                        tracing::debug!(identity = %self.config.identity, lease = %self.lease, %holder, "lease held by another replica");
                        last_holder = Some(holder);
                    }
                }
                Ok(Ok(Attempt::Conflict)) => {
                    tracing::debug!(lease = %self.lease, "lost a race for the lease");
                }
                Ok(Err(e)) => {
                    let error = e.to_string();
                    if last_error.as_ref() != Some(&error) {
                        tracing::warn!(identity = %self.config.identity, lease = %self.lease, %error,
                            "cannot acquire the lease; retrying (its namespace is --lease-namespace)");
                        last_error = Some(error);
                    } else {
                        tracing::debug!(lease = %self.lease, %error, "cannot acquire lease");
                    }
                }
                Err(_) => tracing::debug!(lease = %self.lease, "lease acquisition timed out"),
            }
            let jitter = 1.0 + 0.2 * rand::random::<f64>();
            tokio::select! {
                _ = self.cancel.cancelled() => return None,
                _ = tokio::time::sleep(self.config.retry_period.mul_f64(jitter)) => {}
            }
        }
    }

    /// Renews while leading. Returns `true` when cancelled, `false` when leadership is
    /// lost (another holder, or no successful renewal within the renew deadline).
    async fn hold(&mut self, acquired_at: Instant) -> bool {
        let mut last_ok = acquired_at;
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return true,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let deadline = last_ok + self.config.renew_deadline;
            loop {
                let start = Instant::now();
                if start >= deadline {
                    tracing::warn!(identity = %self.config.identity, lease = %self.lease,
                        "could not renew the lease within the renew deadline");
                    return false;
                }
                let cancel = self.cancel.clone();
                let attempt = tokio::select! {
                    _ = cancel.cancelled() => return true,
                    r = tokio::time::timeout_at(deadline, self.lock.try_acquire_or_renew()) => r,
                };
                match attempt {
                    Ok(Ok(Attempt::Held)) => {
                        last_ok = start;
                        let deadline = last_ok + self.config.renew_deadline;
                        self.term.send_modify(|t| t.deadline = Some(deadline));
                        break;
                    }
                    Ok(Ok(Attempt::Other(holder))) => {
                        tracing::warn!(identity = %self.config.identity, lease = %self.lease, %holder,
                            "lease taken over by another replica");
                        return false;
                    }
                    Ok(Ok(Attempt::Conflict)) => {
                        tracing::debug!(lease = %self.lease, "lease renewal conflicted; retrying");
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(lease = %self.lease, error = %e, "lease renewal failed; retrying");
                    }
                    Err(_) => continue, // deadline reached: reported at the top
                }
                let pause = (Instant::now() + self.config.retry_period).min(deadline);
                tokio::select! {
                    _ = self.cancel.cancelled() => return true,
                    _ = tokio::time::sleep_until(pause) => {}
                }
            }
        }
    }

    /// Gives the lease up if we hold it, so another replica can take it at once.
    async fn release(&mut self) {
        self.lock
            .release(self.config.renew_deadline, &self.lease)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::lease::{Observer, Record};
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::jiff::SignedDuration;
    use k8s_openapi::jiff::Timestamp;

    const LEASE_SECONDS: i32 = 15;

    /// A record of holder `a` with `renew_time` offset from the real wall clock and a
    /// resourceVersion (each renewal writes a new one).
    fn record(holder: Option<&str>, renew_offset_secs: i64, rv: u32) -> Record {
        let now = Timestamp::now();
        Record {
            holder: holder.map(str::to_string),
            renew_time: now
                .checked_add(SignedDuration::from_secs(renew_offset_secs))
                .ok(),
            acquire_time: None,
            duration_seconds: Some(LEASE_SECONDS),
            transitions: Some(0),
            resource_version: Some(rv.to_string()),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_holder_whose_clock_is_far_behind_stays_valid_while_it_renews() {
        let base = Instant::now();
        let mut o = Observer::default();
        // Its renewTime is an hour old every time: its clock is an hour behind ours.
        let mut last_record = None;
        for i in 0..30u32 {
            let at = base + secs(u64::from(i) * 2);
            let r = record(Some("a"), -3600, i);
            o.observe(r.clone(), at);
            last_record = Some(r);
            assert_eq!(
                o.valid_holder(at + secs(14), LEASE_SECONDS),
                Some("a"),
                "renewal {i}"
            );
        }
        // It stops renewing: valid for one lease duration after the last change seen.
        let last = base + secs(58);
        o.observe(last_record.expect("renewed"), last + secs(10));
        assert_eq!(o.valid_holder(last + secs(14), LEASE_SECONDS), Some("a"));
        assert_eq!(o.valid_holder(last + secs(15), LEASE_SECONDS), None);
    }

    #[test]
    fn a_holder_whose_renew_time_is_in_the_future_expires_when_it_stops_renewing() {
        let base = Instant::now();
        let mut o = Observer::default();
        let stuck = record(Some("a"), 3600, 7);
        // The same record, seen again and again: no change, so the clock keeps running.
        for t in [0, 5, 10, 14] {
            o.observe(stuck.clone(), base + secs(t));
        }
        assert_eq!(o.valid_holder(base + secs(14), LEASE_SECONDS), Some("a"));
        assert_eq!(o.valid_holder(base + secs(15), LEASE_SECONDS), None);
        assert_eq!(o.valid_holder(base + secs(3600), LEASE_SECONDS), None);
    }

    #[test]
    fn the_first_sight_of_a_held_lease_counts_from_when_it_is_seen() {
        let base = Instant::now();
        let mut o = Observer::default();
        assert_eq!(o.valid_holder(base, LEASE_SECONDS), None, "nothing seen");
        // A lease renewed long ago by the wall clock, first seen now: a full duration.
        let seen = base + secs(100);
        o.observe(record(Some("a"), -86_400, 1), seen);
        assert_eq!(o.valid_holder(seen + secs(14), LEASE_SECONDS), Some("a"));
        assert_eq!(o.valid_holder(seen + secs(15), LEASE_SECONDS), None);
        // Any change restarts the clock, also one of the resourceVersion only.
        o.observe(record(Some("a"), -86_400, 2), seen + secs(14));
        assert_eq!(o.valid_holder(seen + secs(28), LEASE_SECONDS), Some("a"));
    }

    #[test]
    fn a_released_lease_can_be_taken_at_once() {
        let base = Instant::now();
        let mut o = Observer::default();
        o.observe(record(Some("a"), 0, 1), base);
        assert_eq!(o.valid_holder(base, LEASE_SECONDS), Some("a"));
        o.observe(record(None, 0, 2), base + secs(1));
        assert_eq!(o.valid_holder(base + secs(1), LEASE_SECONDS), None);
        let lease = Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(String::new()),
                ..Default::default()
            }),
        };
        assert_eq!(
            Record::of(&lease).holder,
            None,
            "an empty holder is no holder"
        );
    }

    #[test]
    fn a_duration_missing_from_the_lease_falls_back_to_ours() {
        let base = Instant::now();
        let mut o = Observer::default();
        let mut r = record(Some("a"), 0, 1);
        r.duration_seconds = None;
        o.observe(r, base);
        assert_eq!(o.valid_holder(base + secs(4), 5), Some("a"));
        assert_eq!(o.valid_holder(base + secs(5), 5), None);
    }

    /// A leadership in its first term, with the sender side the elector would hold.
    fn leading() -> (Leadership, watch::Sender<bool>, watch::Sender<Term>) {
        let (tx, rx) = watch::channel(true);
        let (term_tx, term) = watch::channel(Term {
            end: CancellationToken::new(),
            deadline: Some(Instant::now() + secs(10)),
        });
        let l = Leadership {
            rx,
            term,
            lost: CancellationToken::new(),
            _always: None,
        };
        (l, tx, term_tx)
    }

    #[tokio::test(start_paused = true)]
    async fn a_guarded_future_is_dropped_when_the_term_ends() {
        let (l, tx, term) = leading();
        assert!(l.deadline().is_some());
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        struct OnDrop(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let in_flight = {
            let flag = OnDrop(dropped.clone());
            async move {
                let _flag = flag;
                std::future::pending::<()>().await
            }
        };
        let guarded = tokio::spawn({
            let l = l.clone();
            async move { l.guard(in_flight).await }
        });
        tokio::task::yield_now().await;
        assert!(!guarded.is_finished(), "runs while the term lasts");
        // The elector's order at the deadline: end the term, then lower the flag.
        term.borrow().end.cancel();
        tx.send_replace(false);
        assert_eq!(guarded.await.unwrap(), Err(NotLeading));
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(l.deadline(), None);
        // Nothing starts after the end.
        assert_eq!(l.guard(async { 1 }).await, Err(NotLeading));
    }

    #[tokio::test(start_paused = true)]
    async fn a_guard_refuses_before_the_term_starts_and_passes_results_through() {
        let (l, tx, term) = leading();
        assert_eq!(l.guard(async { 7 }).await, Ok(7));
        // A new term whose flag is not raised yet: refused (conservative).
        tx.send_replace(false);
        assert_eq!(l.guard(async { 7 }).await, Err(NotLeading));
        tx.send_replace(true);
        // The flag of a new term raised while the old term is still the one visible.
        term.borrow().end.cancel();
        assert_eq!(l.guard(async { 7 }).await, Err(NotLeading));
        term.send_replace(Term {
            end: CancellationToken::new(),
            deadline: None,
        });
        assert_eq!(l.guard(async { 8 }).await, Ok(8));
    }

    #[tokio::test(start_paused = true)]
    async fn always_guards_nothing_and_is_never_lost() {
        let l = Leadership::always();
        assert_eq!(l.guard(async { 3 }).await, Ok(3));
        assert_eq!(l.deadline(), None);
        assert!(!l.is_lost());
        let lost = tokio::time::timeout(secs(3600), l.lost()).await;
        assert!(lost.is_err(), "always() is never lost");
    }

    #[test]
    fn config_validation() {
        let c = LeaderConfig::new("kubewasm", "ns", "pod-0");
        c.validate().unwrap();
        assert_eq!(c.lease_seconds(), 15);
        let mut bad = c.clone();
        bad.renew_deadline = bad.lease_duration;
        assert!(bad.validate().is_err());
        let mut bad = c.clone();
        bad.retry_period = Duration::ZERO;
        assert!(bad.validate().is_err());
        let mut bad = c.clone();
        bad.identity.clear();
        assert!(bad.validate().is_err());
        let mut odd = c;
        odd.lease_duration = Duration::from_millis(1500);
        odd.renew_deadline = Duration::from_secs(1);
        odd.retry_period = Duration::from_millis(200);
        assert_eq!(odd.lease_seconds(), 2);
    }

    #[tokio::test]
    async fn always_leads_and_never_changes() {
        let l = Leadership::always();
        assert!(l.is_leader());
        assert!(l.until_leader().await);
        let mut rx = l.subscribe();
        let changed = tokio::time::timeout(Duration::from_millis(50), rx.changed()).await;
        assert!(changed.is_err(), "always() must never change");
    }
}
