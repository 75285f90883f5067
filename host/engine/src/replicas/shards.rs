//! Sharding: every object key hashes to one of S shards, each shard is a Lease, and the
//! replicas split the shard Leases among themselves (`kubewasm run --shards S`).
//!
//! - **The shard of a key** is FNV-1a (64-bit) of `namespace/name` (`name` when
//!   cluster-scoped), modulo S ([`shard_of`]). The key, not the uid: the queues work on
//!   keys, an object deleted and created again under the same name is the same key (its
//!   `deleted` and its `added` must reach the same replica, in order), and a key's shard
//!   is known before its object exists. FNV-1a is fixed by its definition, so every
//!   replica and every version agrees (Rust's `DefaultHasher` is not stable).
//! - **Each shard is a Lease** `<name>-shard-<i>`, held with the single leader's machinery
//!   ([`super::lease::LeaseLock`]): expiry by the observer's clock, renewals with a
//!   resourceVersion precondition, a write deadline (start of the last successful renewal
//!   plus the renew deadline) after which the shard's term ends, and a guard
//!   ([`ShardSet::guard`]) that drops any call or write of that shard still running then.
//! - **Members**: each replica process holds a member Lease `<name>-member-<identity>`, so
//!   the replicas know how many they are (N) even when one holds no shard yet. A member
//!   Lease expired for three lease durations is deleted by whoever sees it.
//! - **Balance**: the live members ranked by identity, the member ranked r has the share
//!   ⌊S/N⌋, plus one if r < S mod N ([`share`]); a replica releases what it holds above
//!   its share and takes free shards up to it ([`plan`]). The shares add up to S and every
//!   replica seeing the same members computes the same ones, so a move settles in one
//!   round, each replica within one of S/N. A release ends the shard's term before the
//!   Lease is given up. A replica takes no shard in its first round: its member Lease must
//!   be seen by the others first. A round's Lease calls (renewals, acquisitions, releases)
//!   run together.
//! - All Leases carry `kubewasm.dev/lease-set=<name>` and `kubewasm.dev/lease-role`
//!   (`shard`, with `kubewasm.dev/shard=<i>`, or `member`); one list a round reads them.
//!
//! Losing a shard (not renewed by its deadline, or taken) is not fatal, unlike a lost
//! leader Lease: the term ends, its objects leave the caches, and the replica stands
//! again. RBAC: `get`, `list`, `create`, `update` and `delete` on `leases` in the Lease
//! namespace.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kubewasm_core::resource::ObjectKey;
use kubewasm_core::sync::lock;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::leader::{LeaderConfig, NotLeading};
use super::lease::{Attempt, LeaseLock, Observer, Record};

/// Label on every Lease of one installation: the Lease name prefix.
pub const LEASE_SET_LABEL: &str = "kubewasm.dev/lease-set";
/// Label saying what a Lease is for: `shard` or `member`.
pub const LEASE_ROLE_LABEL: &str = "kubewasm.dev/lease-role";
/// Label on a shard Lease: its shard number.
pub const SHARD_LABEL: &str = "kubewasm.dev/shard";

/// The most shards an installation may have.
pub const MAX_SHARDS: u32 = 1024;

/// The shard of an object key among `shards`: FNV-1a (64-bit) of `namespace/name`
/// (`name` for cluster-scoped objects), modulo `shards`.
pub fn shard_of(key: &ObjectKey, shards: u32) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    };
    if let Some(ns) = &key.namespace {
        eat(ns.as_bytes());
        eat(b"/");
    }
    eat(key.name.as_bytes());
    (h % u64::from(shards.max(1))) as u32
}

/// Parameters of the shard set: the election's (the Lease name is the prefix) and S.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Names, identity and durations, as for a single leader; `lease_name` is the prefix of
    /// every Lease of the set.
    pub lease: LeaderConfig,
    /// S: how many shards (fixed per installation).
    pub shards: u32,
}

impl ShardConfig {
    /// Checks the election's parameters and `1 <= shards <= MAX_SHARDS`.
    pub fn validate(&self) -> Result<(), crate::Error> {
        self.lease.validate()?;
        if self.shards == 0 || self.shards > MAX_SHARDS {
            return Err(crate::Error::LeaderElection {
                lease: self.describe(),
                reason: format!(
                    "--shards must be between 1 and {MAX_SHARDS}, not {}",
                    self.shards
                ),
            });
        }
        Ok(())
    }

    /// `namespace/prefix-shard-*` for logs.
    pub fn describe(&self) -> String {
        format!("{}/{}-shard-*", self.lease.namespace, self.lease.lease_name)
    }

    /// The Lease of shard `i`.
    pub fn shard_lease(&self, i: u32) -> String {
        format!("{}-shard-{i}", self.lease.lease_name)
    }

    /// This process's member Lease: the prefix and its identity, spelled as a name.
    pub fn member_lease(&self) -> String {
        let id: String = self
            .lease
            .identity
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
                _ => '-',
            })
            .collect();
        let mut name = format!("{}-member-{}", self.lease.lease_name, id.trim_matches('-'));
        name.truncate(253);
        name
    }

    /// The label selector of every Lease of the set.
    pub fn selector(&self) -> String {
        format!("{LEASE_SET_LABEL}={}", self.lease.lease_name)
    }

    fn labels(&self, role: &str, shard: Option<u32>) -> BTreeMap<String, String> {
        let mut l = BTreeMap::from([
            (LEASE_SET_LABEL.to_string(), self.lease.lease_name.clone()),
            (LEASE_ROLE_LABEL.to_string(), role.to_string()),
        ]);
        if let Some(i) = shard {
            l.insert(SHARD_LABEL.to_string(), i.to_string());
        }
        l
    }

    /// The RBAC rules the shard set needs: `get`, `list`, `create`, `update` and `delete`
    /// on leases in the Lease namespace. Without them this replica holds no shard.
    pub fn needs(&self) -> Vec<crate::serve::access::Need> {
        ["get", "list", "create", "update", "delete"]
            .into_iter()
            .map(|verb| crate::serve::access::Need {
                rule: crate::serve::access::Rule::new(
                    verb,
                    "coordination.k8s.io",
                    "leases",
                    Some(&self.lease.namespace),
                ),
                purpose: format!("shard Leases {}", self.describe()),
                blocking: true,
            })
            .collect()
    }
}

/// What one replica should do this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// Shards to give up.
    pub(crate) release: usize,
    /// Free shards to take, at most.
    pub(crate) acquire: usize,
}

/// The share of the member ranked `rank` (by identity) of `n` live members: ⌊S/N⌋, one
/// more for the first S mod N. The shares add up to `total`, and every member that sees
/// the same members computes the same shares, so free shards are taken in one round
/// without anyone taking another's share (a replica whose view is stale corrects itself
/// the round it sees the set as it is).
pub(crate) fn share(total: usize, n: usize, rank: usize) -> usize {
    let n = n.max(1);
    total / n + usize::from(rank < total % n)
}

/// The balancing rule: this replica, ranked `rank` of `n` live members and holding
/// `mine`, gives up what it holds above its share and takes free shards up to it.
pub(crate) fn plan(total: usize, n: usize, rank: usize, mine: usize) -> Plan {
    let share = share(total, n, rank);
    Plan {
        release: mine.saturating_sub(share),
        acquire: share.saturating_sub(mine),
    }
}

/// One shard's term, as the guards see it.
struct Term {
    /// Cancelled when the term ends (lost, released, shut down).
    end: CancellationToken,
    /// The write deadline; the watchdog ends the term when it passes unmoved.
    deadline: watch::Sender<Instant>,
}

/// Metrics of the shard set.
#[derive(Debug, Default, Clone)]
pub struct ShardMetrics {
    /// Shards this replica holds.
    pub held: Gauge,
    /// Shard moves seen by this replica: `acquired`, `released`, `lost`.
    pub moves: Family<MoveLabel, Counter>,
    /// Live members of the set, this replica included.
    pub members: Gauge,
}

/// Label of [`ShardMetrics::moves`].
#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct MoveLabel {
    /// `acquired`, `released` or `lost`.
    pub change: String,
}

struct Inner {
    total: u32,
    identity: String,
    held: watch::Sender<BTreeSet<u32>>,
    terms: Mutex<HashMap<u32, Term>>,
    members: AtomicUsize,
}

/// The shards this replica holds; cheap to clone and to query.
#[derive(Clone)]
pub struct ShardSet {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ShardSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardSet")
            .field("total", &self.inner.total)
            .field("held", &*self.inner.held.borrow())
            .finish()
    }
}

impl ShardSet {
    fn new(total: u32, identity: &str) -> ShardSet {
        ShardSet {
            inner: Arc::new(Inner {
                total,
                identity: identity.to_string(),
                held: watch::channel(BTreeSet::new()).0,
                terms: Mutex::new(HashMap::new()),
                members: AtomicUsize::new(1),
            }),
        }
    }

    /// S.
    pub fn total(&self) -> u32 {
        self.inner.total
    }

    /// This process's identity in the Leases.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The shard of `key`.
    pub fn shard_of(&self, key: &ObjectKey) -> u32 {
        shard_of(key, self.inner.total)
    }

    /// Whether this replica holds `shard` now.
    pub fn holds(&self, shard: u32) -> bool {
        self.inner.held.borrow().contains(&shard)
    }

    /// Whether this replica holds the shard of `key` now.
    pub fn owns(&self, key: &ObjectKey) -> bool {
        self.holds(self.shard_of(key))
    }

    /// The shards held now.
    pub fn held(&self) -> BTreeSet<u32> {
        self.inner.held.borrow().clone()
    }

    /// Live members seen in the last round, this replica included.
    pub fn members(&self) -> usize {
        self.inner.members.load(Ordering::Relaxed)
    }

    /// A receiver of changes to the held set.
    pub fn subscribe(&self) -> watch::Receiver<BTreeSet<u32>> {
        self.inner.held.subscribe()
    }

    /// Runs `fut` while this replica's term of `shard` lasts: `Err(NotLeading)` at once
    /// when it does not hold it, or as soon as the term ends (deadline passed without a
    /// renewal, taken, released, shutdown), dropping `fut` there. The end wins a tie.
    pub async fn guard<F: Future>(&self, shard: u32, fut: F) -> Result<F::Output, NotLeading> {
        let end = match lock(&self.inner.terms).get(&shard) {
            Some(t) if !t.end.is_cancelled() => t.end.clone(),
            _ => return Err(NotLeading),
        };
        tokio::select! {
            biased;
            _ = end.cancelled() => Err(NotLeading),
            out = fut => Ok(out),
        }
    }

    /// A term of `shard` starts: first the term, then the flag (see [`ShardSet::guard`]).
    fn start_term(&self, shard: u32, deadline: Instant) {
        let end = CancellationToken::new();
        let (tx, rx) = watch::channel(deadline);
        tokio::spawn(watchdog(
            Arc::downgrade(&self.inner),
            shard,
            end.clone(),
            rx,
        ));
        lock(&self.inner.terms).insert(shard, Term { end, deadline: tx });
        self.inner.held.send_modify(|h| {
            h.insert(shard);
        });
    }

    /// Moves the write deadline of `shard` on after a renewal.
    fn renewed(&self, shard: u32, deadline: Instant) {
        if let Some(t) = lock(&self.inner.terms).get(&shard) {
            t.deadline.send_replace(deadline);
        }
    }

    /// The term of `shard` ends: first the term (guards drop their work), then the flag.
    fn end_term(&self, shard: u32) {
        if let Some(t) = lock(&self.inner.terms).remove(&shard) {
            t.end.cancel();
        }
        self.inner.held.send_modify(|h| {
            h.remove(&shard);
        });
    }

    /// Whether the term of `shard` ended by itself (its deadline passed).
    fn term_ended(&self, shard: u32) -> bool {
        lock(&self.inner.terms)
            .get(&shard)
            .is_none_or(|t| t.end.is_cancelled())
    }
}

/// Ends a term when its deadline passes without having moved on: the guards drop their
/// work, then the flag goes down, even when the task that renews is stuck or gone.
async fn watchdog(
    set: std::sync::Weak<Inner>,
    shard: u32,
    end: CancellationToken,
    mut deadline: watch::Receiver<Instant>,
) {
    loop {
        let at = *deadline.borrow_and_update();
        tokio::select! {
            _ = end.cancelled() => return,
            changed = deadline.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep_until(at) => {
                if *deadline.borrow() <= Instant::now() {
                    break;
                }
            }
        }
    }
    end.cancel();
    if let Some(inner) = set.upgrade() {
        inner.held.send_modify(|h| {
            h.remove(&shard);
        });
    }
}

/// Starts the shard set's task, standing once `ready` resolves. Cancelling `cancel` ends
/// it: every held shard's term ends, its Lease is released, and the member Lease deleted.
pub fn spawn_when(
    client: kube::Client,
    config: ShardConfig,
    ready: impl Future<Output = ()> + Send + 'static,
    metrics: ShardMetrics,
    cancel: CancellationToken,
) -> (ShardSet, JoinHandle<()>) {
    // Every move exported from the start, at 0: a series that first appears at 1 has no
    // increase, and an alert on lost shards would miss the first.
    for change in ["acquired", "released", "lost"] {
        let _ = metrics.moves.get_or_create(&MoveLabel {
            change: change.to_string(),
        });
    }
    let set = ShardSet::new(config.shards, &config.lease.identity);
    let seconds = lease_seconds(&config.lease);
    let shards = (0..config.shards)
        .map(|i| {
            LeaseLock::new(
                client.clone(),
                &config.lease.namespace,
                &config.shard_lease(i),
                &config.lease.identity,
                seconds,
                config.labels("shard", Some(i)),
            )
        })
        .collect();
    let member = LeaseLock::new(
        client.clone(),
        &config.lease.namespace,
        &config.member_lease(),
        &config.lease.identity,
        seconds,
        config.labels("member", None),
    );
    let coordinator = Coordinator {
        api: Api::namespaced(client, &config.lease.namespace),
        what: config.describe(),
        config,
        set: set.clone(),
        shards,
        member,
        others: HashMap::new(),
        last_ok: HashMap::new(),
        metrics,
        cancel,
    };
    let handle = tokio::spawn(coordinator.run(ready));
    (set, handle)
}

fn lease_seconds(c: &LeaderConfig) -> i32 {
    let secs = c.lease_duration.as_secs_f64().ceil();
    secs.clamp(1.0, i32::MAX as f64) as i32
}

/// The task holding and balancing this replica's shards.
struct Coordinator {
    api: Api<Lease>,
    config: ShardConfig,
    what: String,
    set: ShardSet,
    /// One lock per shard, by shard number.
    shards: Vec<LeaseLock>,
    member: LeaseLock,
    /// Other members' Leases: name → (holder, observer).
    others: HashMap<String, (Option<String>, Observer)>,
    /// Per held shard, the start of its last successful renewal.
    last_ok: HashMap<u32, Instant>,
    metrics: ShardMetrics,
    cancel: CancellationToken,
}

impl Coordinator {
    async fn run(mut self, ready: impl Future<Output = ()>) {
        if let Err(e) = self.config.validate() {
            tracing::error!(error = %e, "shard set not started");
            return;
        }
        tokio::select! {
            _ = self.cancel.cancelled() => return,
            _ = ready => {}
        }
        tracing::info!(identity = %self.config.lease.identity, leases = %self.what,
            shards = self.config.shards, "ready to serve: standing for shards");
        let mut first = true;
        let cancel = self.cancel.clone();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.round(first) => {}
            }
            first = false;
            let jitter = 1.0 + 0.2 * rand::random::<f64>();
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                _ = tokio::time::sleep(self.config.lease.retry_period.mul_f64(jitter)) => {}
            }
        }
        self.shutdown().await;
    }

    /// One round: read the set, renew what is held, balance.
    async fn round(&mut self, first: bool) {
        let listed = tokio::time::timeout(
            self.config.lease.renew_deadline,
            self.api
                .list(&ListParams::default().labels(&self.config.selector())),
        )
        .await;
        let listed = match listed {
            Ok(Ok(list)) => Some(list.items),
            Ok(Err(e)) => {
                tracing::debug!(leases = %self.what, error = %e, "cannot list the shard Leases");
                None
            }
            Err(_) => {
                tracing::debug!(leases = %self.what, "listing the shard Leases timed out");
                None
            }
        };
        let complete = listed.is_some();
        if let Some(items) = listed {
            self.observe(items);
        }
        // Shards first: a replica that dies between the two leaves its member Lease older
        // than its shard Leases, never the other way round (see `balance`).
        self.renew_held().await;
        self.renew_member().await;
        // A replica takes nothing in its first round (the others must see its member Lease
        // first), nor on a stale view of the set.
        if !first && complete {
            self.balance().await;
        }
        self.metrics.held.set(self.set.held().len() as i64);
    }

    /// Takes in a complete list of the set's Leases.
    fn observe(&mut self, items: Vec<Lease>) {
        let now = Instant::now();
        let mut by_name: HashMap<String, Lease> = items
            .into_iter()
            .filter_map(|l| l.metadata.name.clone().map(|n| (n, l)))
            .collect();
        for lock in &mut self.shards {
            match by_name.remove(lock.name()) {
                Some(l) => lock.offer(l),
                None => lock.absent(),
            }
        }
        match by_name.remove(self.member.name()) {
            Some(l) => self.member.offer(l),
            None => self.member.absent(),
        }
        let prefix = format!("{}-member-", self.config.lease.lease_name);
        self.others.retain(|name, _| by_name.contains_key(name));
        for (name, lease) in by_name {
            if !name.starts_with(&prefix) {
                continue;
            }
            let record = Record::of(&lease);
            let entry = self
                .others
                .entry(name)
                .or_insert_with(|| (None, Observer::default()));
            entry.0 = record.holder.clone();
            entry.1.observe(record, now);
        }
    }

    async fn renew_member(&mut self) {
        let attempt = tokio::time::timeout(
            self.config.lease.renew_deadline,
            self.member.try_acquire_or_renew(),
        )
        .await;
        match attempt {
            Ok(Ok(Attempt::Held)) => {}
            Ok(Ok(other)) => {
                tracing::debug!(lease = %self.member.name(), outcome = ?other, "member Lease not renewed")
            }
            Ok(Err(e)) => {
                tracing::debug!(lease = %self.member.name(), error = %e, "member Lease not renewed")
            }
            Err(_) => {
                tracing::debug!(lease = %self.member.name(), "member Lease renewal timed out")
            }
        }
    }

    /// Renews every held shard, all at once; a shard not renewed by its deadline, or
    /// taken, is lost.
    async fn renew_held(&mut self) {
        // What this task holds: a term the watchdog ended is still here, to be reported.
        let renew_deadline = self.config.lease.renew_deadline;
        let now = Instant::now();
        let mut due: HashMap<u32, Instant> = HashMap::new();
        let mut late = Vec::new();
        for (shard, last_ok) in &self.last_ok {
            let deadline = *last_ok + renew_deadline;
            if now >= deadline || self.set.term_ended(*shard) {
                late.push(*shard);
            } else {
                due.insert(*shard, deadline);
            }
        }
        for shard in late {
            self.lose(shard, "not renewed within the renew deadline");
        }
        let attempts = join_all(
            self.shards
                .iter_mut()
                .enumerate()
                .filter_map(|(i, lock)| due.get(&(i as u32)).map(|d| (i as u32, *d, lock)))
                .map(|(shard, deadline, lock)| async move {
                    let start = Instant::now();
                    let attempt =
                        tokio::time::timeout_at(deadline, lock.try_acquire_or_renew()).await;
                    (shard, start, attempt)
                }),
        )
        .await;
        for (shard, start, attempt) in attempts {
            match attempt {
                Ok(Ok(Attempt::Held)) => {
                    self.last_ok.insert(shard, start);
                    self.set.renewed(shard, start + renew_deadline);
                }
                Ok(Ok(Attempt::Other(holder))) => {
                    self.lose(shard, &format!("taken by {holder}"));
                }
                Ok(Ok(Attempt::Conflict)) => {
                    tracing::debug!(shard, "shard Lease renewal conflicted; retrying")
                }
                Ok(Err(e)) => {
                    tracing::debug!(shard, error = %e, "shard Lease renewal failed; retrying")
                }
                Err(_) => self.lose(shard, "not renewed within the renew deadline"),
            }
        }
    }

    /// Releases the Leases of `shards` (their terms already ended), all at once.
    async fn release_all(&mut self, shards: &[u32]) {
        let timeout = self.config.lease.renew_deadline;
        let what = &self.what;
        join_all(
            self.shards
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| shards.contains(&(*i as u32)))
                .map(|(_, lock)| lock.release(timeout, what)),
        )
        .await;
    }

    fn lose(&mut self, shard: u32, why: &str) {
        self.set.end_term(shard);
        self.last_ok.remove(&shard);
        self.count_move("lost");
        tracing::warn!(shard, identity = %self.config.lease.identity, reason = why, "shard lost");
    }

    /// Releases surplus shards or takes free ones, by [`plan`].
    async fn balance(&mut self) {
        let now = Instant::now();
        let me = self.config.lease.identity.clone();
        let others = self.live_others(now, &me);
        let mut free: Vec<u32> = (0..self.shards.len() as u32)
            .filter(|i| self.shards[*i as usize].valid_holder(now).is_none() && !self.set.holds(*i))
            .collect();
        let n = others.len() + 1;
        self.set.inner.members.store(n, Ordering::Relaxed);
        self.metrics.members.set(n as i64);
        // Ranked by identity, as every member ranks them.
        let rank = others.iter().filter(|h| **h < me).count();
        let held = self.set.held();
        let p = plan(self.shards.len(), n, rank, held.len());
        // Give up the highest-numbered shards first: a stable, predictable choice.
        let releasing: Vec<u32> = held.iter().rev().take(p.release).copied().collect();
        self.release_shards(releasing, n).await;
        // Start the free ones at a random place, so replicas racing for them spread out.
        if p.acquire > 0 && !free.is_empty() {
            let offset = rand::random_range(0..free.len());
            free.rotate_left(offset);
        }
        self.acquire_shards(free, p.acquire, n).await;
        self.collect_members(now).await;
    }

    /// The live members other than this one (`me`), as last seen at `now`.
    fn live_others(&self, now: Instant, me: &str) -> BTreeSet<String> {
        // A member that let a shard Lease of its own expire without releasing it is gone,
        // whatever its member Lease still says: counted as holding nothing it would make
        // the others release shards for it.
        let gone: BTreeSet<String> = self
            .shards
            .iter()
            .filter(|l| l.valid_holder(now).is_none())
            .filter_map(|l| l.last_holder().map(str::to_string))
            .collect();
        let seconds = lease_seconds(&self.config.lease);
        self.others
            .values()
            .filter_map(|(holder, obs)| obs.valid_holder(now, seconds).and(holder.clone()))
            .filter(|h| h != me && !gone.contains(h))
            .collect()
    }

    /// Ends the terms of `releasing` and releases their Leases (`members`: for the log).
    async fn release_shards(&mut self, releasing: Vec<u32>, members: usize) {
        for shard in &releasing {
            self.set.end_term(*shard);
            self.last_ok.remove(shard);
        }
        self.release_all(&releasing).await;
        for shard in releasing {
            self.count_move("released");
            let me = &self.config.lease.identity;
            tracing::info!(shard, identity = %me, members, "shard released");
        }
    }

    /// Acquires `wanted` of the `free` shards, in order. Free shards are tried together,
    /// as many as wanted at a time; those lost to a faster replica are made up from the
    /// rest of the list.
    async fn acquire_shards(&mut self, free: Vec<u32>, wanted: usize, members: usize) {
        let mut free = free.into_iter();
        let mut taken = 0;
        while taken < wanted && !self.cancel.is_cancelled() {
            let batch: Vec<u32> = free.by_ref().take(wanted - taken).collect();
            if batch.is_empty() {
                break;
            }
            let timeout = self.config.lease.renew_deadline;
            let attempts = join_all(
                self.shards
                    .iter_mut()
                    .enumerate()
                    .filter(|(i, _)| batch.contains(&(*i as u32)))
                    .map(|(i, lock)| async move {
                        let start = Instant::now();
                        let attempt =
                            tokio::time::timeout(timeout, lock.try_acquire_or_renew()).await;
                        (i as u32, start, attempt)
                    }),
            )
            .await;
            for (shard, start, attempt) in attempts {
                match attempt {
                    Ok(Ok(Attempt::Held)) => {
                        taken += 1;
                        self.last_ok.insert(shard, start);
                        self.set.start_term(shard, start + timeout);
                        self.count_move("acquired");
                        let me = &self.config.lease.identity;
                        tracing::info!(shard, identity = %me, members, "shard acquired");
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::debug!(shard, error = %e, "cannot acquire the shard Lease")
                    }
                    Err(_) => tracing::debug!(shard, "acquiring the shard Lease timed out"),
                }
            }
        }
    }

    /// Counts one shard move (`acquired`, `released`, `lost`).
    fn count_move(&self, change: &str) {
        self.metrics
            .moves
            .get_or_create(&MoveLabel {
                change: change.into(),
            })
            .inc();
    }

    /// Deletes other members' Leases expired for three lease durations (a process that
    /// died without saying so), as last seen: a renewal since makes the delete fail.
    async fn collect_members(&mut self, now: Instant) {
        let stale_after = self.config.lease.lease_duration.saturating_mul(3);
        let stale: Vec<(String, String)> = self
            .others
            .iter()
            .filter(|(_, (_, obs))| obs.unchanged_for(now).is_some_and(|d| d > stale_after))
            .filter_map(|(name, (_, obs))| {
                obs.resource_version()
                    .map(|rv| (name.clone(), rv.to_string()))
            })
            .collect();
        for (name, rv) in stale {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }),
                ..Default::default()
            };
            match self.api.delete(&name, &dp).await {
                Ok(_) => {
                    tracing::info!(lease = %name, "deleted the member Lease of a replica gone for three lease durations");
                    self.others.remove(&name);
                }
                Err(e) => {
                    tracing::debug!(lease = %name, error = %e, "could not delete a stale member Lease")
                }
            }
        }
    }

    /// Shutdown: delete the member Lease (so no one makes room for this replica), end
    /// every term, release every held shard.
    async fn shutdown(&mut self) {
        let name = self.member.name().to_string();
        let _ = tokio::time::timeout(
            self.config.lease.renew_deadline,
            self.api.delete(&name, &DeleteParams::default()),
        )
        .await;
        let held = self.set.held();
        for shard in &held {
            self.set.end_term(*shard);
        }
        let held: Vec<u32> = held.into_iter().collect();
        self.release_all(&held).await;
        tracing::info!(identity = %self.config.lease.identity, "released every shard on shutdown");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(ns: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: ns.map(str::to_string),
            name: name.to_string(),
        }
    }

    #[test]
    fn the_shard_of_a_key_is_fnv1a_of_namespace_slash_name() {
        // FNV-1a 64 of "" is the offset basis; of "a" a published test vector.
        assert_eq!(
            shard_of(&key(None, ""), u32::MAX),
            (0xcbf2_9ce4_8422_2325u64 % u64::from(u32::MAX)) as u32
        );
        assert_eq!(
            shard_of(&key(None, "a"), u32::MAX),
            (0xaf63_dc4c_8601_ec8cu64 % u64::from(u32::MAX)) as u32
        );
        // Namespaced: the hash of "ns/name", not of the name alone.
        let spelled = key(None, "default/x");
        assert_eq!(
            shard_of(&key(Some("default"), "x"), 1000),
            shard_of(&spelled, 1000)
        );
        // Every shard is used, about evenly, by ordinary names.
        let mut counts = [0usize; 32];
        for i in 0..32_000 {
            counts[shard_of(&key(Some("team-a"), &format!("site-{i}")), 32) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
        assert_eq!(shard_of(&key(Some("a"), "b"), 1), 0);
    }

    /// Runs the balancing rule, round by round, for replicas (ranked in order) holding
    /// `start` of `total` shards, until nothing moves; the counts at the end and the rounds
    /// taken. Each round every replica plans on the counts as they stand, then releases,
    /// then takes free shards in order (as racing replicas would: a free shard goes to one
    /// of them).
    fn settle(total: usize, start: &[usize]) -> (Vec<usize>, usize) {
        let n = start.len();
        let mut counts = start.to_vec();
        for round in 0..10 * total + 10 {
            let before = counts.clone();
            let plans: Vec<Plan> = (0..n).map(|i| plan(total, n, i, counts[i])).collect();
            for (c, p) in counts.iter_mut().zip(&plans) {
                *c -= p.release;
            }
            let mut free = total - counts.iter().sum::<usize>();
            for (c, p) in counts.iter_mut().zip(&plans) {
                let take = p.acquire.min(free);
                *c += take;
                free -= take;
            }
            if counts == before {
                return (counts, round);
            }
        }
        panic!("no steady state from {start:?}: {counts:?}");
    }

    #[test]
    fn replicas_settle_within_one_of_s_over_n_in_one_round() {
        for total in [1, 2, 4, 7, 8, 32, 33, 100] {
            for n in 1..=6usize {
                for start in [
                    vec![0; n],
                    // One replica held everything; the others just joined.
                    std::iter::once(total)
                        .chain(std::iter::repeat_n(0, n - 1))
                        .collect(),
                ] {
                    let (end, rounds) = settle(total, &start);
                    let lo = total / n;
                    let hi = total.div_ceil(n);
                    assert_eq!(
                        end.iter().sum::<usize>(),
                        total,
                        "{total} among {n}: {end:?}"
                    );
                    assert!(
                        end.iter().all(|c| (lo..=hi).contains(c)),
                        "{total} among {n} from {start:?}: {end:?}"
                    );
                    // One round moves everything; the next finds nothing to do.
                    assert!(
                        rounds <= 1,
                        "{total} among {n} from {start:?}: {rounds} rounds"
                    );
                }
            }
        }
    }

    #[test]
    fn a_replica_gone_leaves_its_shards_to_the_others() {
        // Three replicas held 11, 11, 10 of 32; the third is gone: its 10 are taken at once.
        let (end, rounds) = settle(32, &[11, 11]);
        assert_eq!(end, vec![16, 16]);
        assert_eq!(rounds, 1);
    }

    #[test]
    fn shares_add_up_and_the_plan_moves_a_replica_to_its_share() {
        for total in [0, 1, 7, 32, 33] {
            for n in 1..=5 {
                let shares: Vec<usize> = (0..n).map(|r| share(total, n, r)).collect();
                assert_eq!(shares.iter().sum::<usize>(), total, "{total} among {n}");
                assert!(shares.windows(2).all(|w| w[0] >= w[1]), "{shares:?}");
            }
        }
        // 33 among 2: the first ranked takes 17.
        assert_eq!(share(33, 2, 0), 17);
        assert_eq!(share(33, 2, 1), 16);
        assert_eq!(
            plan(32, 2, 0, 32),
            Plan {
                release: 16,
                acquire: 0
            }
        );
        assert_eq!(
            plan(32, 3, 2, 8),
            Plan {
                release: 0,
                acquire: 2
            }
        );
        assert_eq!(
            plan(8, 1, 0, 0),
            Plan {
                release: 0,
                acquire: 8
            }
        );
        assert_eq!(plan(4, 3, 0, 2), Plan::default());
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_ends_at_its_deadline_unless_renewed_and_the_guard_drops_its_work() {
        let set = ShardSet::new(4, "me");
        let now = Instant::now();
        set.start_term(1, now + Duration::from_secs(10));
        assert!(set.holds(1) && !set.holds(0));
        assert_eq!(set.guard(1, async { 5 }).await, Ok(5));
        assert_eq!(set.guard(0, async { 5 }).await, Err(NotLeading));
        // Renewed at 8s: the deadline moves to 18s.
        tokio::time::sleep(Duration::from_secs(8)).await;
        set.renewed(1, Instant::now() + Duration::from_secs(10));
        let guarded = tokio::spawn({
            let set = set.clone();
            async move { set.guard(1, std::future::pending::<()>()).await }
        });
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(
            !guarded.is_finished(),
            "the term lasts until its moved deadline"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(guarded.await.expect("joined"), Err(NotLeading));
        assert!(set.term_ended(1), "ended by the watchdog at its deadline");
        assert_eq!(set.guard(1, async { 5 }).await, Err(NotLeading));
        // Ending it takes the flag down; a later term starts afresh.
        set.end_term(1);
        assert!(!set.holds(1));
        set.start_term(1, Instant::now() + Duration::from_secs(10));
        assert_eq!(set.guard(1, async { 6 }).await, Ok(6));
    }

    #[test]
    fn lease_names_and_labels() {
        let c = ShardConfig {
            lease: LeaderConfig::new("kubewasm", "ops", "pod-7_00ff00ff00ff00ff"),
            shards: 32,
        };
        c.validate().expect("valid");
        assert_eq!(c.shard_lease(31), "kubewasm-shard-31");
        assert_eq!(c.member_lease(), "kubewasm-member-pod-7-00ff00ff00ff00ff");
        assert_eq!(c.selector(), "kubewasm.dev/lease-set=kubewasm");
        assert_eq!(
            c.labels("shard", Some(3))
                .get(SHARD_LABEL)
                .map(String::as_str),
            Some("3")
        );
        let mut bad = c.clone();
        bad.shards = 0;
        assert!(bad.validate().is_err());
        bad.shards = MAX_SHARDS + 1;
        assert!(bad.validate().is_err());
    }
}
