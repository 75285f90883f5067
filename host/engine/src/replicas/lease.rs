//! One `coordination.k8s.io/v1` Lease as a lock, the machinery of client-go's
//! `leaderelection` shared by the single-leader election ([`super::leader`]) and the shard
//! set ([`super::shards`]): create, renew or take over with a resourceVersion
//! precondition, judge expiry by the observer's own clock, release by clearing the holder.
//! The protocol and its reasons are told in [`super::leader`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

/// What of a Lease counts as a change: any of these differing from the last sight
/// restarts the observer's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) holder: Option<String>,
    pub(crate) renew_time: Option<Timestamp>,
    pub(crate) acquire_time: Option<Timestamp>,
    pub(crate) duration_seconds: Option<i32>,
    pub(crate) transitions: Option<i32>,
    pub(crate) resource_version: Option<String>,
}

impl Record {
    pub(crate) fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.map(|t| t.0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            duration_seconds: spec.lease_duration_seconds,
            transitions: spec.lease_transitions,
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// The last Lease record seen and the local instant it was first seen as such.
#[derive(Debug, Default)]
pub(crate) struct Observer {
    last: Option<(Record, Instant)>,
}

impl Observer {
    /// Records a sight of `record` at `now`; the clock restarts only when it changed.
    pub(crate) fn observe(&mut self, record: Record, now: Instant) {
        match &self.last {
            Some((seen, _)) if *seen == record => {}
            _ => self.last = Some((record, now)),
        }
    }

    /// The holder of a lease still valid at `now` by this observer's clock: held, and
    /// changed less than its duration (`default_seconds` when unset) ago.
    pub(crate) fn valid_holder(&self, now: Instant, default_seconds: i32) -> Option<&str> {
        let (record, at) = self.last.as_ref()?;
        let holder = record.holder.as_deref()?;
        let secs = record.duration_seconds.unwrap_or(default_seconds).max(0);
        let until = *at + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
        (until > now).then_some(holder)
    }

    /// The holder last seen, valid or not.
    pub(crate) fn holder(&self) -> Option<&str> {
        self.last.as_ref().and_then(|(r, _)| r.holder.as_deref())
    }

    /// How long the record has not changed, at `now` (None: never seen).
    pub(crate) fn unchanged_for(&self, now: Instant) -> Option<Duration> {
        self.last.as_ref().map(|(_, at)| now.duration_since(*at))
    }

    /// The resourceVersion last seen.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.last
            .as_ref()
            .and_then(|(r, _)| r.resource_version.as_deref())
    }
}

/// Outcome of one acquire-or-renew round.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// We hold the lease (acquired or renewed).
    Held,
    /// Someone else holds a valid lease.
    Other(String),
    /// Our update lost a race (`409`): read again next round.
    Conflict,
}

/// One Lease, held (or sought) under one identity.
pub(crate) struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    lease_seconds: i32,
    labels: BTreeMap<String, String>,
    /// The Lease as we last wrote it, or as a list just returned it: the next attempt
    /// starts from it instead of a GET.
    current: Option<Lease>,
    /// When the Lease record last changed, by our clock.
    observed: Observer,
}

impl LeaseLock {
    /// The lock of Lease `namespace/name`, sought as `identity`, written with
    /// `lease_seconds` and carrying `labels`.
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        lease_seconds: i32,
        labels: BTreeMap<String, String>,
    ) -> Self {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_seconds,
            labels,
            current: None,
            observed: Observer::default(),
        }
    }

    /// The Lease's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A fresh read of the Lease (from a list): observed now, and the next attempt starts
    /// from it.
    pub(crate) fn offer(&mut self, lease: Lease) {
        self.observed.observe(Record::of(&lease), Instant::now());
        self.current = Some(lease);
    }

    /// The Lease was not in a complete list: it does not exist (any more).
    pub(crate) fn absent(&mut self) {
        self.current = None;
        self.observed = Observer::default();
    }

    /// The holder last seen in the Lease, valid or not (None: released or never seen).
    pub(crate) fn last_holder(&self) -> Option<&str> {
        self.observed.holder()
    }

    /// The holder of the Lease, valid by our clock at `now`.
    pub(crate) fn valid_holder(&self, now: Instant) -> Option<&str> {
        self.observed.valid_holder(now, self.lease_seconds)
    }

    /// One round: create the lease, renew ours, or take over a released/expired one.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = Timestamp::now();
        let current = match self.current.take() {
            Some(lease) => Some(lease),
            None => {
                let read = self.api.get_opt(&self.name).await?;
                if let Some(lease) = &read {
                    self.observed.observe(Record::of(lease), Instant::now());
                }
                read
            }
        };
        let Some(lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(self.lease_seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observed.observe(Record::of(&created), Instant::now());
                    self.current = Some(created);
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(self.identity.as_str());
        if !mine && let Some(holder) = self.valid_holder(Instant::now()) {
            let holder = holder.to_string();
            // Read again next time: the holder's renewals change the record.
            return Ok(Attempt::Other(holder));
        }
        let mut next = lease;
        if !self.labels.is_empty() {
            let labels = next.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in &self.labels {
                labels.insert(k.clone(), v.clone());
            }
        }
        let s = next.spec.get_or_insert_with(Default::default);
        s.holder_identity = Some(self.identity.clone());
        s.lease_duration_seconds = Some(self.lease_seconds);
        s.renew_time = Some(MicroTime(now));
        if !mine {
            s.acquire_time = Some(MicroTime(now));
            s.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        // `next` carries the resourceVersion we read: a concurrent writer makes this 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                self.observed.observe(Record::of(&written), Instant::now());
                self.current = Some(written);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up if we hold it (within `timeout`), so another replica can take
    /// it at once; `what` names it in logs. Whether it was released.
    pub(crate) async fn release(&mut self, timeout: Duration, what: &str) -> bool {
        self.current = None;
        let name = self.name.clone();
        let identity = self.identity.clone();
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
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(true)) => {
                tracing::debug!(lease = %what, "lease released");
                true
            }
            Ok(Ok(false)) => false,
            Ok(Err(e)) => {
                tracing::debug!(lease = %what, error = %e, "could not release the lease");
                false
            }
            Err(_) => {
                tracing::debug!(lease = %what, "releasing the lease timed out");
                false
            }
        }
    }
}
