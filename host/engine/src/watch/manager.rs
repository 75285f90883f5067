//! The watch manager: resolves what plugins watch through discovery, runs one watcher and
//! cache per served resource (shared by every plugin), and turns the watcher's stream into
//! added / modified(old, new) / deleted / resync events.
//!
//! A resource that is not served yet (a CRD not installed) is retried on an interval and
//! started when it appears. A watch broken by `410 Gone` is relisted by kube's watcher; the
//! relist is diffed against the cache so changes made during the break become events.
//! Before a watch starts, the host asks whether its RBAC allows the list and watch
//! ([`Access`]); a failing watch backs off by the class of its error ([`super::backoff`]),
//! logged once per change of state.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{mpsc, watch as tokio_watch};
use tokio_util::sync::CancellationToken;

use kubewasm_core::event::EventType;
use kubewasm_core::kind::{KindInfo, ResolveError};
use kubewasm_core::resource::{ResourceRef, TypeRef};

use crate::replicas::shards::ShardSet;
use crate::serve::access::{Access, Need, Rule};
use crate::serve::metrics::{Metrics, ResourceLabel};
use crate::watch::backoff::{self, Class, Policy};
use crate::watch::cache::{CachedObject, Caches, ObjectKey, ResourceCache, ResourceKey};
use crate::watch::discovery::{Discovery, api_resource};

/// A served resource being watched.
type Resolved = KindInfo;

/// A change to one cached object.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// The resource it belongs to.
    pub resource: ResourceKey,
    /// What happened.
    pub event_type: EventType,
    /// The object now (last state for deletions).
    pub object: Arc<CachedObject>,
    /// The previous state, for modifications.
    pub old: Option<Arc<CachedObject>>,
}

/// What the watch manager tells the router, in order.
#[derive(Debug, Clone)]
pub enum WatchSignal {
    /// A change to a cached object.
    Event(WatchEvent),
    /// A watch target (one spelling of a resource) now resolves to a served resource.
    /// Routes naming it were not replayed before (they did not resolve); when its cache is
    /// already synced (another spelling watched it first) they must be replayed now.
    Resolved(ResourceRef),
}

/// Where the desired resources stand (see [`WatchManager::readiness`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchReadiness {
    /// Served, cache synced.
    pub synced: Vec<String>,
    /// Served, first list not done yet.
    pub syncing: Vec<String>,
    /// Not served by the API server (yet): the watch starts when it appears.
    pub unserved: Vec<String>,
}

/// Settings of the watch manager.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Re-deliver every cached object this often (None: never).
    pub resync: Option<Duration>,
    /// How often to retry discovery for resources that are not served yet.
    pub discovery_interval: Duration,
    /// Watch namespaced resources only in these namespaces (one watcher per namespace,
    /// feeding one cache); empty: cluster-wide. Cluster-scoped resources are always watched
    /// cluster-wide.
    pub namespaces: Vec<String>,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            resync: Some(Duration::from_secs(600)),
            discovery_interval: Duration::from_secs(5),
            namespaces: Vec::new(),
        }
    }
}

/// What the consumers of one watch target ask of it: the label selector every one of them
/// uses (sent to the server), or `None` when some consumer needs every object.
pub type Demand = Option<String>;

/// What consumers with these demands share: the one label selector they all ask for, or
/// `None` (every object) as soon as two differ or one needs every object. The one rule
/// for a spelling's plugins and for a resource's spellings alike.
pub(crate) fn shared_demand(demands: &BTreeSet<Demand>) -> Demand {
    match demands.iter().collect::<Vec<_>>().as_slice() {
        [Some(s)] => Some(s.clone()),
        _ => None,
    }
}

struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// The label selector sent to the server.
    selector: Demand,
    /// Whether its cache keeps only the held shards' objects.
    sharded: bool,
    cache: Arc<ResourceCache>,
    /// The kind its cache is registered under in [`Caches`].
    kind: TypeRef,
}

/// Owns the watchers. Cheap to share.
pub struct WatchManager {
    client: Client,
    discovery: Arc<Discovery>,
    caches: Arc<Caches>,
    config: WatchConfig,
    events: mpsc::Sender<WatchSignal>,
    desired: tokio_watch::Sender<BTreeMap<ResourceRef, Demand>>,
    resolved: RwLock<HashMap<ResourceRef, Arc<Resolved>>>,
    /// Desired resources discovery was asked about and did not resolve (not served, or
    /// discovery failed). One not asked about yet is neither served nor unserved: until
    /// its first lookup it holds readiness back like a cache still syncing.
    looked_up: RwLock<HashSet<ResourceRef>>,
    metrics: Arc<Metrics>,
    /// The host's own permissions: each watch's list and watch are asked before it starts.
    access: Arc<Access>,
    /// How failing watches back off.
    backoff: Policy,
    /// With `--shards`: the held shards, which the caches of resources not read whole follow.
    shards: std::sync::OnceLock<ShardSet>,
    /// Targets some plugin reads whole (declared `reads`, the Plugin objects): their
    /// resources are cached whole even with shards.
    whole: RwLock<BTreeSet<ResourceRef>>,
}

impl WatchManager {
    /// A manager sending events to `events`.
    pub fn new(
        client: Client,
        discovery: Arc<Discovery>,
        caches: Arc<Caches>,
        config: WatchConfig,
        events: mpsc::Sender<WatchSignal>,
        metrics: Arc<Metrics>,
        access: Arc<Access>,
    ) -> Arc<Self> {
        Arc::new(WatchManager {
            client,
            discovery,
            caches,
            config,
            events,
            desired: tokio_watch::Sender::new(BTreeMap::new()),
            resolved: RwLock::new(HashMap::new()),
            looked_up: RwLock::new(HashSet::new()),
            metrics,
            access,
            backoff: Policy::default(),
            shards: std::sync::OnceLock::new(),
            whole: RwLock::new(BTreeSet::new()),
        })
    }

    /// Cache by shard: the caches of resources no plugin reads whole keep only the objects
    /// of the shards `shards` holds, refilled (relisted) when it gains some. Set before
    /// [`WatchManager::run`].
    pub(crate) fn shard_caches(&self, shards: ShardSet) {
        let _ = self.shards.set(shards);
    }

    /// The targets read whole (see [`WatchManager::shard_caches`]); takes effect with the
    /// next [`WatchManager::set_desired`].
    pub(crate) fn set_whole(&self, whole: BTreeSet<ResourceRef>) {
        *kubewasm_core::sync::write(&self.whole) = whole;
    }

    /// Set what must be watched, each target with its [`Demand`]; the manager converges to
    /// it in the background.
    pub fn set_desired(&self, refs: BTreeMap<ResourceRef, Demand>) {
        self.desired.send_replace(refs);
    }

    /// The served resource a watch target resolved to, if it is being watched.
    pub fn resolved(&self, r: &ResourceRef) -> Option<Arc<Resolved>> {
        kubewasm_core::sync::read(&self.resolved).get(r).cloned()
    }

    /// Where each desired resource stands: served and synced, served and still syncing,
    /// or not served (yet). Only syncing resources hold readiness back: a resource that is
    /// not served (a CRD not installed) may never be, and must not keep a host unready.
    pub fn readiness(&self) -> WatchReadiness {
        let desired = self.desired.borrow().clone();
        let mut report = WatchReadiness::default();
        let resolved = kubewasm_core::sync::read(&self.resolved);
        let looked_up = kubewasm_core::sync::read(&self.looked_up);
        for r in desired.keys() {
            match resolved.get(r) {
                None if looked_up.contains(r) => report.unserved.push(r.to_string()),
                None => report.syncing.push(r.to_string()),
                Some(k)
                    if self
                        .caches
                        .get(&k.type_ref())
                        .is_some_and(|c| c.is_synced()) =>
                {
                    report.synced.push(r.to_string())
                }
                Some(_) => report.syncing.push(r.to_string()),
            }
        }
        report
    }

    /// Converge until cancelled; stops every watcher on the way out.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let mut desired_rx = self.desired.subscribe();
        let mut running: HashMap<ResourceKey, Running> = HashMap::new();
        let mut waiting_logged: HashSet<ResourceRef> = HashSet::new();
        loop {
            let desired = desired_rx.borrow_and_update().clone();
            self.reconcile(&desired, &mut running, &mut waiting_logged)
                .await;
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = desired_rx.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep(self.config.discovery_interval) => {}
            }
        }
        for (_, r) in running.drain() {
            r.cancel.cancel();
            let _ = r.task.await;
            self.caches.remove(&r.kind);
        }
    }

    /// The namespaces a resource is watched in (`None`: cluster-wide).
    fn scopes(&self, res: &Resolved) -> Vec<Option<String>> {
        if res.namespaced && !self.config.namespaces.is_empty() {
            self.config.namespaces.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        }
    }

    /// The RBAC rules the watch of `res` needs: list and watch in each of its scopes.
    fn rules(&self, res: &Resolved) -> Vec<Rule> {
        self.scopes(res)
            .iter()
            .flat_map(|scope| {
                ["list", "watch"]
                    .map(|verb| Rule::new(verb, &res.group, &res.plural, scope.as_deref()))
            })
            .collect()
    }

    async fn reconcile(
        self: &Arc<Self>,
        desired: &BTreeMap<ResourceRef, Demand>,
        running: &mut HashMap<ResourceKey, Running>,
        waiting_logged: &mut HashSet<ResourceRef>,
    ) {
        // Resolve what is not resolved yet.
        for r in desired.keys() {
            if self.resolved(r).is_some() {
                continue;
            }
            let lookup = self.discovery.resolve(r).await;
            {
                let mut looked_up = kubewasm_core::sync::write(&self.looked_up);
                if lookup.is_ok() {
                    looked_up.remove(r);
                } else {
                    looked_up.insert(r.clone());
                }
            }
            match lookup {
                Ok(res) => {
                    self.metrics.unserved.remove(&ResourceLabel {
                        resource: r.to_string(),
                    });
                    if waiting_logged.remove(r) {
                        tracing::info!(resource = %r, "resource is now served; starting its watch");
                    }
                    {
                        let mut m = kubewasm_core::sync::write(&self.resolved);
                        m.insert(r.clone(), res);
                    }
                    let _ = self.events.send(WatchSignal::Resolved(r.clone())).await;
                }
                Err(ResolveError::NotServed(_)) => {
                    self.metrics
                        .unserved
                        .get_or_create(&ResourceLabel {
                            resource: r.to_string(),
                        })
                        .set(1);
                    if waiting_logged.insert(r.clone()) {
                        tracing::warn!(resource = %r, "not served by the API server yet; the watch starts when it appears");
                    }
                }
                Err(e) => tracing::warn!(resource = %r, error = %e, "discovery failed; will retry"),
            }
        }
        // Forget resolutions nobody wants any more.
        {
            let mut m = kubewasm_core::sync::write(&self.resolved);
            m.retain(|r, _| desired.contains_key(r));
            kubewasm_core::sync::write(&self.looked_up).retain(|r| desired.contains_key(r));
        }
        // Per served resource: what it resolves from, and the selector every consumer of
        // every spelling shares (sent to the server), if any.
        let mut wanted: HashMap<ResourceKey, (Arc<Resolved>, BTreeSet<Demand>)> = HashMap::new();
        {
            let m = kubewasm_core::sync::read(&self.resolved);
            for (r, res) in m.iter() {
                let demand = desired.get(r).cloned().flatten();
                wanted
                    .entry(res.key())
                    .or_insert_with(|| (res.clone(), BTreeSet::new()))
                    .1
                    .insert(demand);
            }
        }
        // Resources some plugin reads whole are cached whole; with shards, the others by shard.
        let sharded_keys: HashSet<ResourceKey> = match self.shards.get() {
            None => HashSet::new(),
            Some(_) => {
                let whole = kubewasm_core::sync::read(&self.whole);
                let m = kubewasm_core::sync::read(&self.resolved);
                let whole_keys: HashSet<ResourceKey> = m
                    .iter()
                    .filter(|(r, _)| whole.contains(*r))
                    .map(|(_, res)| res.key())
                    .collect();
                wanted
                    .keys()
                    .filter(|k| !whole_keys.contains(*k))
                    .cloned()
                    .collect()
            }
        };
        // Stop watchers no longer needed, or whose server-side selector or sharding changed
        // (the cache is kept: the new watcher's first list is diffed against it).
        let mut kept: HashMap<ResourceKey, Arc<ResourceCache>> = HashMap::new();
        let stale: Vec<ResourceKey> = running
            .iter()
            .filter(|(k, r)| {
                wanted.get(*k).is_none_or(|(_, demands)| {
                    shared_demand(demands) != r.selector || sharded_keys.contains(*k) != r.sharded
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            if let Some(r) = running.remove(&key) {
                r.cancel.cancel();
                let _ = r.task.await;
                if wanted.contains_key(&key) {
                    tracing::info!(resource = %key, "restarting the watch: its consumers' shared label selector, or whether it is read whole, changed");
                    kept.insert(key, r.cache);
                } else {
                    self.caches.remove(&r.kind);
                    tracing::info!(resource = %key, "watch stopped: no plugin needs it");
                }
            }
        }
        waiting_logged.retain(|r| desired.contains_key(r));
        // What every watch needs of RBAC, asked once per rule (one error line for those
        // denied); the watches start anyway, and back off while forbidden.
        let needs = wanted
            .values()
            .flat_map(|(res, _)| {
                let purpose = format!("the watch of {}", res.type_ref());
                self.rules(res).into_iter().map(move |rule| Need {
                    rule,
                    purpose: purpose.clone(),
                    blocking: true,
                })
            })
            .collect();
        self.access.require(&self.client, "watches", needs).await;
        // Start the new ones.
        for (key, (res, demands)) in wanted {
            if running.contains_key(&key) {
                continue;
            }
            let selector = shared_demand(&demands);
            let sharded = sharded_keys.contains(&key);
            let cache = kept.remove(&key).unwrap_or_else(|| {
                Arc::new(ResourceCache::new(
                    res.key(),
                    res.type_ref(),
                    res.namespaced,
                ))
            });
            cache.set_by_shard(sharded.then(|| self.shards.get().cloned()).flatten());
            self.caches.insert(cache.clone());
            let scopes = self.scopes(&res);
            let cancel = CancellationToken::new();
            let task = tokio::spawn(
                WatchTask {
                    client: self.client.clone(),
                    res: res.clone(),
                    cache: cache.clone(),
                    tx: self.events.clone(),
                    resync: self.config.resync,
                    metrics: self.metrics.clone(),
                    scopes,
                    selector: selector.clone(),
                    rules: self.rules(&res),
                    access: self.access.clone(),
                    backoff: self.backoff,
                    shards: sharded.then(|| self.shards.get().cloned()).flatten(),
                }
                .run(cancel.clone()),
            );
            match &selector {
                Some(s) => {
                    tracing::info!(resource = %key, kind = %res.type_ref(), label_selector = %s, "watch started")
                }
                None => tracing::info!(resource = %key, kind = %res.type_ref(), "watch started"),
            }
            running.insert(
                key,
                Running {
                    cancel,
                    task,
                    selector,
                    sharded,
                    cache,
                    kind: res.type_ref(),
                },
            );
        }
    }
}

async fn emit(
    tx: &mpsc::Sender<WatchSignal>,
    key: &ResourceKey,
    event_type: EventType,
    object: Arc<CachedObject>,
    old: Option<Arc<CachedObject>>,
) {
    let _ = tx
        .send(WatchSignal::Event(WatchEvent {
            resource: key.clone(),
            event_type,
            object,
            old,
        }))
        .await;
}

/// The watchers of one resource's scopes, merged: each item says its scope.
type Streams = futures::stream::SelectAll<
    futures::stream::BoxStream<
        'static,
        (
            Option<String>,
            Result<Event<DynamicObject>, backoff::Failed>,
        ),
    >,
>;

/// The watcher of one resource.
struct WatchTask {
    client: Client,
    res: Arc<Resolved>,
    cache: Arc<ResourceCache>,
    tx: mpsc::Sender<WatchSignal>,
    resync: Option<Duration>,
    metrics: Arc<Metrics>,
    /// Namespaces to watch (`None`: cluster-wide), one watcher each.
    scopes: Vec<Option<String>>,
    /// The label selector sent to the server.
    selector: Demand,
    /// The RBAC rules it needs: shown to be granted once it syncs.
    rules: Vec<Rule>,
    access: Arc<Access>,
    backoff: Policy,
    /// Some: the cache keeps only the objects of these held shards.
    shards: Option<ShardSet>,
}

impl WatchTask {
    /// The merged stream of the watchers of every scope (one per namespace, or one
    /// cluster-wide); each item says which scope it is from.
    fn streams(&self) -> Streams {
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
            // managedFields are the server's bookkeeping, often larger than the object:
            // caching them doubles what each object costs, and plugins have no use for them.
            let config = config.clone();
            let make = move || {
                watcher::watcher(api.clone(), config.clone())
                    .modify(|o: &mut DynamicObject| o.metadata.managed_fields = None)
                    .boxed()
            };
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

    /// Whether the cache keeps `key` (always, unless it is cached by shard).
    fn keeps(&self, key: &ObjectKey) -> bool {
        self.shards.as_ref().is_none_or(|s| s.owns(key))
    }

    /// Watch until cancelled, keeping the cache current and emitting events.
    async fn run(self, cancel: CancellationToken) {
        let key = self.res.key();
        let (tx, cache) = (self.tx.clone(), self.cache.clone());
        // A clone shares the value: no registry lock is held across awaits.
        let restarts = self
            .metrics
            .watch_restarts
            .get_or_create(&ResourceLabel {
                resource: key.to_string(),
            })
            .clone();
        let mut stream = self.streams();
        // Cached by shard: the held shards as last seen, and those gained whose objects a
        // relist still has to bring (they arrive as `resync`: not new, new here).
        let mut held_rx = self.shards.as_ref().map(ShardSet::subscribe);
        let mut held: BTreeSet<u32> = held_rx
            .as_mut()
            .map(|rx| rx.borrow_and_update().clone())
            .unwrap_or_default();
        let mut refilling: BTreeSet<u32> = BTreeSet::new();
        // A relist in progress, per scope.
        let mut relist: HashMap<Option<String>, HashMap<ObjectKey, Arc<CachedObject>>> =
            HashMap::new();
        let mut listed: HashSet<Option<String>> = HashSet::new();
        // Scopes still to list since the last refill started.
        let mut to_refill: HashSet<Option<String>> = HashSet::new();
        // Per scope, the failure last logged (class, message): logged again only when it
        // changes, and its end once.
        let mut failing: HashMap<Option<String>, (Class, String)> = HashMap::new();
        let resync_every = self.resync.unwrap_or(Duration::from_secs(u64::MAX / 4));
        let mut resync_timer =
            tokio::time::interval_at(tokio::time::Instant::now() + resync_every, resync_every);
        loop {
            let item = tokio::select! {
                _ = cancel.cancelled() => break,
                _ = resync_timer.tick() => {
                    if self.resync.is_some() && cache.is_synced() {
                        for obj in cache.snapshot() {
                            emit(&tx, &key, EventType::Resync, obj, None).await;
                        }
                    }
                    continue;
                }
                changed = async {
                    match held_rx.as_mut() {
                        Some(rx) => rx.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    let Some(rx) = held_rx.as_mut() else { continue };
                    if changed.is_err() {
                        held_rx = None;
                        continue;
                    }
                    let now = rx.borrow_and_update().clone();
                    // Lost shards' objects leave the cache (their new holder handles them).
                    let lost: BTreeSet<u32> = held.difference(&now).copied().collect();
                    if !lost.is_empty()
                        && let Some(shards) = &self.shards
                    {
                        let dropped = cache.retain(|k| !lost.contains(&shards.shard_of(k)));
                        refilling.retain(|s| !lost.contains(s));
                        tracing::debug!(resource = %key, shards = ?lost, dropped, "shards lost: their objects dropped from the cache");
                    }
                    // Gained shards' objects are listed again (a fresh list of every scope,
                    // diffed against the cache as any relist is).
                    let gained: BTreeSet<u32> = now.difference(&held).copied().collect();
                    held = now;
                    if !gained.is_empty() {
                        refilling.extend(gained.iter().copied());
                        to_refill = self.scopes.iter().cloned().collect();
                        relist.clear();
                        stream = self.streams();
                        tracing::debug!(resource = %key, shards = ?gained, "shards gained: relisting their objects");
                    }
                    continue;
                }
                item = stream.next() => item,
            };
            let Some((scope, item)) = item else { break };
            if let Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) = &item {
                cache.watch_works();
            }
            if let Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) = &item
                && let Some((_, error)) = failing.remove(&scope)
            {
                tracing::info!(resource = %key, scope = scope.as_deref().unwrap_or("cluster-wide"),
                    last_error = %error, "watch recovered");
            }
            match item {
                Ok(Event::Init) => {
                    relist.insert(scope, HashMap::new());
                }
                Ok(Event::InitApply(obj)) => {
                    let o = with_types(obj, &self.res);
                    if let Some(buf) = relist.get_mut(&scope)
                        && self.keeps(&o.key())
                    {
                        buf.insert(o.key(), o);
                    }
                }
                Ok(Event::InitDone) => {
                    let mut fresh = relist.remove(&scope).unwrap_or_default();
                    // A shard may have been lost while the list ran.
                    fresh.retain(|k, _| self.keeps(k));
                    let first = !listed.contains(&scope);
                    let before = cache.replace_scope(scope.as_deref(), fresh.clone());
                    let refill = to_refill.remove(&scope);
                    let gained = |k: &ObjectKey| {
                        refill
                            && self
                                .shards
                                .as_ref()
                                .is_some_and(|s| refilling.contains(&s.shard_of(k)))
                    };
                    // Diff the relist against what we had: this is how changes made while the
                    // watch was broken (410 Gone, disconnects) still become events.
                    for (k, obj) in &fresh {
                        match before.get(k) {
                            // An object of a shard just gained is not new: new here.
                            None if gained(k) => {
                                emit(&tx, &key, EventType::Resync, obj.clone(), None).await
                            }
                            None => emit(&tx, &key, EventType::Added, obj.clone(), None).await,
                            Some(old) if old.resource_version() != obj.resource_version() => {
                                emit(
                                    &tx,
                                    &key,
                                    EventType::Modified,
                                    obj.clone(),
                                    Some(old.clone()),
                                )
                                .await
                            }
                            Some(_) => {}
                        }
                    }
                    for (k, old) in before {
                        if !fresh.contains_key(&k) && self.keeps(&k) {
                            emit(&tx, &key, EventType::Deleted, old, None).await;
                        }
                    }
                    if refill && to_refill.is_empty() {
                        refilling.clear();
                    }
                    listed.insert(scope);
                    if first {
                        if listed.len() == self.scopes.len() && !cache.is_synced() {
                            // Listed and watching: the RBAC it needs is there.
                            self.access.allowed(&self.rules);
                            cache.mark_synced();
                            tracing::info!(resource = %key, objects = cache.len(), "cache synced");
                        }
                    } else if refill {
                        tracing::info!(resource = %key, objects = cache.len(), "refilled for the shards gained");
                    } else {
                        restarts.inc();
                        tracing::info!(resource = %key, objects = cache.len(), "relisted");
                    }
                }
                Ok(Event::Apply(obj)) => {
                    let o = with_types(obj, &self.res);
                    if !self.keeps(&o.key()) {
                        // Another replica's shard: not cached, not routed.
                        cache.remove(&o.key());
                        continue;
                    }
                    match cache.insert(o.clone()) {
                        None => emit(&tx, &key, EventType::Added, o, None).await,
                        Some(old) if old.resource_version() == o.resource_version() => {}
                        Some(old) => emit(&tx, &key, EventType::Modified, o, Some(old)).await,
                    }
                }
                Ok(Event::Delete(obj)) => {
                    let o = with_types(obj, &self.res);
                    cache.remove(&o.key());
                    // Also another replica's: kept as a tombstone, for when this one gains
                    // the shard during a move.
                    emit(&tx, &key, EventType::Deleted, o, None).await;
                }
                Err(failed) => {
                    restarts.inc();
                    if failed.class != Class::Desync {
                        cache.watch_failed();
                    }
                    let state = (failed.class, failed.message);
                    let retry_in = format!("{:.1}s", failed.delay.as_secs_f64());
                    let scope_name = scope.as_deref().unwrap_or("cluster-wide");
                    if failed.class == Class::Desync {
                        tracing::debug!(resource = %key, scope = scope_name, error = %state.1, "watch fell behind; relisting");
                    } else if failing.get(&scope) != Some(&state) {
                        tracing::warn!(resource = %key, scope = scope_name, error = %state.1,
                            class = failed.class.as_str(), retry_in,
                            "watch error; retrying with backoff by error class (logged again when it changes)");
                        failing.insert(scope, state);
                    } else {
                        tracing::debug!(resource = %key, scope = scope_name, error = %state.1,
                            class = failed.class.as_str(), retry_in, "watch error again");
                    }
                }
            }
        }
        // The manager takes the cache out of `caches` when the watch stops for good; a
        // restarted watch keeps it there, so readers and readiness see no gap.
    }
}

/// Objects from list responses may lack apiVersion/kind; plugins always get them.
fn with_types(mut obj: DynamicObject, res: &Resolved) -> Arc<CachedObject> {
    if obj.types.is_none() {
        obj.types = Some(kube::api::TypeMeta {
            api_version: res.api_version(),
            kind: res.kind.clone(),
        });
    }
    CachedObject::new(obj)
}

#[cfg(test)]
mod tests;
