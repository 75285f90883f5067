//! Leader election on a `coordination.k8s.io/v1` Lease, for running more than one replica.
//!
//! Only the leader applies intents; followers keep their caches warm so a hand-over is
//! quick. The protocol is client-go's `leaderelection` with a Lease lock:
//!
//! - a candidate **acquires** the lease when it is absent (create: exactly one create
//!   wins, the others get `409 AlreadyExists`), released (no `holderIdentity`) or expired
//!   (`renewTime + leaseDurationSeconds` is in the past). A takeover is an update carrying
//!   the resourceVersion that was read, so of two candidates racing for the same expired
//!   lease one gets `409 Conflict` and stays a follower. `leaseTransitions` counts
//!   changes of holder;
//! - the leader **renews** every `retry_period` (an update of `renewTime`, again with the
//!   resourceVersion precondition);
//! - the leader **steps down** as soon as it finds another holder in the lease, or when
//!   its renewals have failed for `renew_deadline` counted from the start of the last
//!   successful renewal. As `renew_deadline < lease_duration`, a leader cut off from the
//!   API server stops before any other candidate can consider the lease expired;
//! - on cancellation the leader first stops leading (the flag turns false), then
//!   **releases** the lease (clears `holderIdentity`) so another replica takes over at
//!   once instead of waiting for expiry.
//!
//! After stepping down a replica becomes a candidate again. Expiry compares the
//! holder's `renewTime` with the local clock, so replicas' clocks must agree to well
//! within `lease_duration - renew_deadline`, as for any Kubernetes controller.
//!
//! RBAC: `get`, `create` and `update` on `leases` (group `coordination.k8s.io`) in the
//! lease's namespace.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
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
    /// This replica's identity (unique per replica, e.g. the pod name).
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

    fn lease_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        secs.clamp(1.0, i32::MAX as f64) as i32
    }
}

/// Whether this replica currently leads; cheap to clone and to query.
#[derive(Debug, Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    /// Keeps the channel open for [`Leadership::always`], so `changed()` pends forever.
    _always: Option<Arc<watch::Sender<bool>>>,
}

impl Leadership {
    /// Leadership for a single replica: leader from the start, forever.
    pub fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        Leadership {
            rx,
            _always: Some(Arc::new(tx)),
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
    let (tx, rx) = watch::channel(false);
    let elector = Elector {
        api: Api::namespaced(client, &config.namespace),
        lease: format!("{}/{}", config.namespace, config.lease_name),
        config,
        tx,
        cancel,
        cached: None,
    };
    let handle = tokio::spawn(elector.run());
    (Leadership { rx, _always: None }, handle)
}

/// Outcome of one acquire-or-renew round.
enum Attempt {
    /// We hold the lease (acquired or renewed).
    Held,
    /// Someone else holds a valid lease.
    Other(String),
    /// Our update lost a race (`409`): read again next round.
    Conflict,
}

struct Elector {
    api: Api<Lease>,
    config: LeaderConfig,
    lease: String,
    tx: watch::Sender<bool>,
    cancel: CancellationToken,
    /// The Lease as we last wrote it while holding it (saves a GET per renewal).
    cached: Option<Lease>,
}

impl Elector {
    async fn run(mut self) {
        if let Err(e) = self.config.validate() {
            tracing::error!(error = %e, "leader election not started");
            return;
        }
        loop {
            let Some(acquired_at) = self.acquire().await else {
                // Cancelled as a candidate; an attempt cut short may still have won.
                self.release().await;
                return;
            };
            self.tx.send_replace(true);
            tracing::info!(identity = %self.config.identity, lease = %self.lease, "became leader");
            let cancelled = self.hold(acquired_at).await;
            self.tx.send_replace(false);
            if cancelled {
                self.release().await;
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
        loop {
            if self.cancel.is_cancelled() {
                return None;
            }
            let start = Instant::now();
            let cancel = self.cancel.clone();
            let renew_deadline = self.config.renew_deadline;
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return None,
                r = tokio::time::timeout(renew_deadline, self.try_acquire_or_renew()) => r,
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
                    tracing::debug!(lease = %self.lease, error = %e, "cannot acquire lease");
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
                    r = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => r,
                };
                match attempt {
                    Ok(Ok(Attempt::Held)) => {
                        last_ok = start;
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

    /// One round: create the lease, renew ours, or take over a released/expired one.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = Timestamp::now();
        let current = match self.cached.take() {
            Some(lease) => Some(lease),
            None => self.api.get_opt(&self.config.lease_name).await?,
        };
        let Some(lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(self.config.lease_seconds()),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.cached = Some(created);
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(self.config.identity.as_str());
        if !mine
            && let Some(holder) = holder
            && !expired(&spec, now, self.config.lease_seconds())
        {
            return Ok(Attempt::Other(holder));
        }
        let mut next = lease;
        let s = next.spec.get_or_insert_with(Default::default);
        s.holder_identity = Some(self.config.identity.clone());
        s.lease_duration_seconds = Some(self.config.lease_seconds());
        s.renew_time = Some(MicroTime(now));
        if !mine {
            s.acquire_time = Some(MicroTime(now));
            s.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        // `next` carries the resourceVersion we read: a concurrent writer makes this 409.
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                self.cached = Some(written);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up if we hold it, so another replica can take it at once.
    async fn release(&mut self) {
        self.cached = None;
        let name = self.config.lease_name.clone();
        let identity = self.config.identity.clone();
        let api = self.api.clone();
        let work = async move {
            let Some(mut lease) = api.get_opt(&name).await? else {
                return Ok::<bool, kube::Error>(false);
            };
            let Some(spec) = lease.spec.as_mut() else {
                return Ok(false);
            };
            if spec.holder_identity.as_deref() != Some(identity.as_str()) {
                return Ok(false);
            }
            let now = Timestamp::now();
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(now));
            spec.acquire_time = Some(MicroTime(now));
            api.replace(&name, &PostParams::default(), &lease).await?;
            Ok(true)
        };
        match tokio::time::timeout(self.config.renew_deadline, work).await {
            Ok(Ok(true)) => tracing::debug!(lease = %self.lease, "lease released"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::debug!(lease = %self.lease, error = %e, "could not release the lease")
            }
            Err(_) => tracing::debug!(lease = %self.lease, "releasing the lease timed out"),
        }
    }
}

/// Whether a held lease has expired: `renewTime + leaseDurationSeconds < now`. A lease
/// without a renew time counts as expired.
fn expired(spec: &LeaseSpec, now: Timestamp, default_seconds: i32) -> bool {
    let Some(renewed) = spec.renew_time.as_ref() else {
        return true;
    };
    let secs = spec
        .lease_duration_seconds
        .unwrap_or(default_seconds)
        .max(0);
    match renewed
        .0
        .checked_add(SignedDuration::from_secs(i64::from(secs)))
    {
        Ok(until) => until < now,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        let now = Timestamp::now();
        LeaseSpec {
            holder_identity: Some("a".into()),
            renew_time: Some(MicroTime(
                now.checked_sub(SignedDuration::from_secs(renewed_secs_ago))
                    .unwrap(),
            )),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }
    }

    #[test]
    fn expiry_uses_renew_time_and_duration() {
        let now = Timestamp::now();
        assert!(!expired(&spec(1, 15), now, 15));
        assert!(!expired(&spec(14, 15), now, 15));
        assert!(expired(&spec(16, 15), now, 15));
        let mut s = spec(0, 15);
        s.renew_time = None;
        assert!(expired(&s, now, 15));
        let mut s = spec(5, 15);
        s.lease_duration_seconds = None;
        assert!(expired(&s, now, 2));
        assert!(!expired(&s, now, 15));
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
