//! The watcher of one served resource: its scopes' watchers through the stages of
//! [`super::stages`] into its cache, the changes out as [`WatchSignal`]s; a resync now and
//! then, and with `--shards`, the cache following the shards held.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use kubewasm_core::event::EventType;
use kubewasm_core::kind::KindInfo;

use crate::replicas::shards::ShardSet;
use crate::serve::access::{Access, Rule};
use crate::serve::metrics::{Metrics, ResourceLabel};
use crate::watch::backoff::{self, Class, Failed, Policy};
use crate::watch::cache::{ObjectKey, ResourceCache, ResourceKey};
use crate::watch::discovery::api_resource;
use crate::watch::manager::{Demand, WatchSignal};
use crate::watch::stages::{
    Change, Listing, Reflector, Scope, Step, events, relists, shard_filter, strip,
};

/// The watchers of one resource's scopes, merged: each item says its scope.
type Source = SelectAll<BoxStream<'static, (Scope, Result<Event<DynamicObject>, Failed>)>>;

/// The watcher of one resource.
pub(super) struct WatchTask {
    pub(super) client: Client,
    pub(super) res: Arc<KindInfo>,
    pub(super) cache: Arc<ResourceCache>,
    pub(super) tx: mpsc::Sender<WatchSignal>,
    /// Counts resources settling: told when the cache first syncs.
    pub(super) settled: Arc<tokio::sync::watch::Sender<u64>>,
    pub(super) resync: Option<Duration>,
    pub(super) metrics: Arc<Metrics>,
    /// Namespaces to watch (`None`: cluster-wide), one watcher each.
    pub(super) scopes: Vec<Scope>,
    /// The label selector sent to the server.
    pub(super) selector: Demand,
    /// The RBAC rules it needs: shown to be granted once it syncs.
    pub(super) rules: Vec<Rule>,
    pub(super) access: Arc<Access>,
    pub(super) backoff: Policy,
    /// Some: the cache keeps only the objects of these held shards.
    pub(super) shards: Option<ShardSet>,
    /// What the cache keeps of each object: the union of its plugins' projections.
    pub(super) projection: Arc<kubewasm_core::projection::Projection>,
}

/// What the task keeps while it runs.
struct Running {
    reflector: Reflector,
    /// Per scope, the failure last logged (class, message): logged again only when it
    /// changes, and its end once.
    failing: HashMap<Scope, (Class, String)>,
    /// Cached by shard: the held shards as last seen, and their changes.
    held: BTreeSet<u32>,
    held_rx: Option<watch::Receiver<BTreeSet<u32>>>,
    restarts: Counter,
}

impl WatchTask {
    /// The merged stream of the watchers of every scope (one per namespace, or one
    /// cluster-wide); each item says which scope it is from.
    fn source(&self) -> Source {
        let key = self.res.key();
        let ar = api_resource(&self.res);
        let mut config = watcher::Config::default();
        if let Some(s) = &self.selector {
            config = config.labels(s);
        }
        let streams = self.scopes.iter().map(|scope| {
            let api: Api<DynamicObject> = match scope {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                None => Api::all_with(self.client.clone(), &ar),
            };
            let scope = scope.clone();
            let config = config.clone();
            let make = move || watcher::watcher(api.clone(), config.clone()).boxed();
            let target = match &scope {
                Some(ns) => format!("{key} in namespace {ns}"),
                None => key.to_string(),
            };
            backoff::with_backoff(make, target, self.backoff, self.access.granted())
                .map(move |item| (scope.clone(), item))
                .boxed()
        });
        futures::stream::select_all(streams)
    }

    /// The source through the stages before the cache: a new one lists every scope again.
    fn steps(&self) -> BoxStream<'static, (Scope, Step)> {
        let shards = self.shards.clone();
        let keeps = move |k: &ObjectKey| shards.as_ref().is_none_or(|s| s.owns(k));
        let stripped = strip(self.source(), self.res.clone(), self.projection.clone());
        relists(shard_filter(stripped, keeps)).boxed()
    }

    /// Watch until cancelled, keeping the cache current and emitting events.
    pub(super) async fn run(self, cancel: CancellationToken) {
        let mut held_rx = self.shards.as_ref().map(ShardSet::subscribe);
        let held = held_rx
            .as_mut()
            .map(|rx| rx.borrow_and_update().clone())
            .unwrap_or_default();
        // A clone shares the value: no registry lock is held across awaits.
        let restarts = self
            .metrics
            .watch_restarts
            .get_or_create(&ResourceLabel {
                resource: self.res.key().to_string(),
            })
            .clone();
        let reflector =
            Reflector::new(self.cache.clone(), self.shards.clone(), self.scopes.clone());
        let mut state = Running {
            reflector,
            failing: HashMap::new(),
            held,
            held_rx,
            restarts,
        };
        let mut steps = self.steps();
        let resync_every = self.resync.unwrap_or(Duration::from_secs(u64::MAX / 4));
        let mut resync_timer =
            tokio::time::interval_at(tokio::time::Instant::now() + resync_every, resync_every);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = resync_timer.tick() => self.resync().await,
                changed = held_changed(state.held_rx.as_mut()) => {
                    if self.shards_changed(&mut state, changed.is_ok()) {
                        steps = self.steps();
                    }
                }
                step = steps.next() => match step {
                    Some((scope, step)) => self.take(&mut state, scope, step).await,
                    None => break,
                },
            }
        }
        // The manager takes the cache out of `caches` when the watch stops for good; a
        // restarted watch keeps it there, so readers and readiness see no gap.
    }

    /// Send every cached object again, as `resync`.
    async fn resync(&self) {
        if self.resync.is_some() && self.cache.is_synced() {
            let changes = self.cache.snapshot().into_iter();
            let changes = changes.map(|o| Change::new(EventType::Resync, o, None));
            self.send(futures::stream::iter(changes)).await;
        }
    }

    /// Send `changes` to the router, in order.
    async fn send(&self, changes: impl Stream<Item = Change>) {
        let mut signals = std::pin::pin!(events(self.res.key(), changes));
        while let Some(signal) = signals.next().await {
            let _ = self.tx.send(signal).await;
        }
    }

    /// The held shards changed (`open`: else their sender is gone). Lost shards' objects
    /// leave the cache; gained ones' are listed again: true when the watch must list
    /// every scope again (a fresh list, diffed against the cache as any relist is).
    fn shards_changed(&self, state: &mut Running, open: bool) -> bool {
        let Some(rx) = state.held_rx.as_mut() else {
            return false;
        };
        if !open {
            state.held_rx = None;
            return false;
        }
        let now = rx.borrow_and_update().clone();
        let key = self.res.key();
        let lost: BTreeSet<u32> = state.held.difference(&now).copied().collect();
        if !lost.is_empty() && self.shards.is_some() {
            let dropped = state.reflector.lose(&lost);
            tracing::debug!(resource = %key, shards = ?lost, dropped, "shards lost: their objects dropped from the cache");
        }
        let gained: BTreeSet<u32> = now.difference(&state.held).copied().collect();
        state.held = now;
        if gained.is_empty() {
            return false;
        }
        state.reflector.gain(&gained);
        tracing::debug!(resource = %key, shards = ?gained, "shards gained: relisting their objects");
        true
    }

    /// One step of `scope`'s watcher: into the cache, its changes to the router.
    async fn take(&self, state: &mut Running, scope: Scope, step: Step) {
        if step.works() {
            self.cache.watch_works();
            if let Some((_, error)) = state.failing.remove(&scope) {
                tracing::info!(resource = %self.res.key(), scope = scope.as_deref().unwrap_or("cluster-wide"),
                    last_error = %error, "watch recovered");
            }
        }
        if let Step::Failed(failed) = step {
            self.failed(state, scope, failed);
            return;
        }
        let (changes, listing) = state.reflector.apply(&scope, step);
        self.send(futures::stream::iter(changes)).await;
        if let Some(listing) = listing {
            self.listed(listing, &state.restarts);
        }
    }

    /// A list ended (its changes sent): the cache is synced once every scope is listed.
    fn listed(&self, listing: Listing, restarts: &Counter) {
        let (key, objects) = (self.res.key(), self.cache.len());
        match listing {
            Listing::First { all } => {
                if all && self.cache.holds() != *self.projection {
                    // Every object is now projected to this watch's projection.
                    self.cache.set_holds((*self.projection).clone());
                    self.settled.send_modify(|n| *n += 1);
                }
                if all && !self.cache.is_synced() {
                    // Listed and watching: the RBAC it needs is there.
                    self.access.allowed(&self.rules);
                    self.cache.mark_synced();
                    self.settled.send_modify(|n| *n += 1);
                    tracing::info!(resource = %key, objects, "cache synced");
                }
            }
            Listing::Refill => {
                tracing::info!(resource = %key, objects, "refilled for the shards gained")
            }
            Listing::Relist => {
                restarts.inc();
                tracing::info!(resource = %key, objects, "relisted");
            }
        }
    }

    /// A watcher of `scope` failed: logged once per change of its failure.
    fn failed(&self, state: &mut Running, scope: Scope, failed: Failed) {
        state.restarts.inc();
        if failed.class != Class::Desync {
            self.cache.watch_failed();
        }
        let key: ResourceKey = self.res.key();
        let state_now = (failed.class, failed.message);
        let retry_in = format!("{:.1}s", failed.delay.as_secs_f64());
        let scope_name = scope.as_deref().unwrap_or("cluster-wide");
        if failed.class == Class::Desync {
            tracing::debug!(resource = %key, scope = scope_name, error = %state_now.1, "watch fell behind; relisting");
        } else if state.failing.get(&scope) != Some(&state_now) {
            tracing::warn!(resource = %key, scope = scope_name, error = %state_now.1,
                class = failed.class.as_str(), retry_in,
                "watch error; retrying with backoff by error class (logged again when it changes)");
            state.failing.insert(scope, state_now);
        } else {
            tracing::debug!(resource = %key, scope = scope_name, error = %state_now.1,
                class = failed.class.as_str(), retry_in, "watch error again");
        }
    }
}

/// A change of the held shards (never, when the cache is not kept by shard).
async fn held_changed(
    rx: Option<&mut watch::Receiver<BTreeSet<u32>>>,
) -> Result<(), watch::error::RecvError> {
    match rx {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}
