//! The watch manager: resolves what plugins watch through discovery, runs one watcher and
//! cache per served resource (shared by every plugin, [`super::task`]), whose stream of
//! changes becomes added / modified(old, new) / deleted / resync events
//! ([`super::stages`]).
//!
//! A resource that is not served yet (a CRD not installed) is retried on an interval and
//! started when it appears. A watch broken by `410 Gone` is relisted by kube's watcher; the
//! relist is diffed against the cache so changes made during the break become events.
//! Before a watch starts, the host asks whether its RBAC allows the list and watch
//! ([`Access`]); a failing watch backs off by the class of its error ([`super::backoff`]),
//! logged once per change of state.
//!
//! A namespaced resource that only tenant plugins (`NamespacedPlugin`s) need is watched
//! only in their namespaces ([`WatchManager::set_tenant_scopes`]), so the host needs the
//! right to list and watch it only there; a change of those namespaces restarts its
//! watch over its kept cache, like a change of its projection.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;
use tokio::sync::{mpsc, watch as tokio_watch};
use tokio_util::sync::CancellationToken;

use kubewasm_core::event::EventType;
use kubewasm_core::kind::{KindInfo, ResolveError};
use kubewasm_core::projection::Projection;
use kubewasm_core::resource::{ResourceRef, TypeRef};

use crate::replicas::shards::ShardSet;
use crate::serve::access::{Access, Need, Rule};
use crate::serve::metrics::{Metrics, ResourceLabel};
use crate::watch::backoff::Policy;
use crate::watch::cache::{CachedObject, Caches, ResourceCache, ResourceKey};
use crate::watch::discovery::Discovery;
use crate::watch::initial::{InitialSync, Lister};
use crate::watch::task::WatchTask;

/// A served resource being watched.
type Resolved = KindInfo;

/// The cache of a watch stopped to restart, and the namespaces it watched.
type Kept = (Arc<ResourceCache>, Vec<Option<String>>);

/// Per served resource: what it resolves from, and its consumers' demands.
type Wanted = HashMap<ResourceKey, (Arc<Resolved>, BTreeSet<Demand>)>;

/// A change to one cached object.
#[derive(Debug, Clone)]
pub(crate) struct WatchEvent {
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
pub(crate) enum WatchSignal {
    /// A change to a cached object.
    Event(WatchEvent),
    /// A watch target (one spelling of a resource) now resolves to a served resource.
    /// Routes naming it were not replayed before (they did not resolve); when its cache is
    /// already synced (another spelling watched it first) they must be replayed now.
    Resolved(ResourceRef),
}

/// Where the desired resources stand (see [`WatchManager::readiness`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WatchReadiness {
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
    /// How watches list the objects that exist when they start (and on every relist).
    pub initial_sync: InitialSync,
    /// Objects per page of a paged list (0: the whole list in one response).
    pub list_page_size: u32,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            resync: Some(Duration::from_secs(600)),
            discovery_interval: Duration::from_secs(5),
            namespaces: Vec::new(),
            initial_sync: InitialSync::Auto,
            list_page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

/// Objects per page of a paged list: client-go's (and kube's) default.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// What the consumers of one watch target ask of it: the label selector every one of them
/// uses (sent to the server), or `None` when some consumer needs every object.
pub(crate) type Demand = Option<String>;

/// What consumers with these demands share: the one label selector they all ask for, or
/// `None` (every object) as soon as two differ or one needs every object. The one rule
/// for a spelling's plugins and for a resource's spellings alike.
pub(crate) fn shared_demand(demands: &BTreeSet<Demand>) -> Demand {
    match demands.iter().collect::<Vec<_>>().as_slice() {
        [Some(s)] => Some(s.clone()),
        _ => None,
    }
}

/// What the host itself reads of a cached object beyond its identity: its labels (the
/// label selectors of routes and of `host.list`).
const HOST_READS: [&str; 1] = ["metadata.labels"];

/// What a cache keeps for plugins declaring `union`: that, and what the host reads.
pub(crate) fn cache_projection(union: &Projection) -> Projection {
    match Projection::parse(&HOST_READS) {
        Ok(host) => union.union(&host),
        Err(_) => Projection::whole(),
    }
}

struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// The label selector sent to the server.
    selector: Demand,
    /// Whether its cache keeps only the held shards' objects.
    sharded: bool,
    /// What its cache keeps of each object.
    projection: Projection,
    /// The namespaces it watches (`None`: cluster-wide).
    scopes: Vec<Option<String>>,
    cache: Arc<ResourceCache>,
    /// The kind its cache is registered under in [`Caches`].
    kind: TypeRef,
}

/// Owns the watchers. Cheap to share.
pub(crate) struct WatchManager {
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
    /// How watches list: one per manager, which has one API server.
    lister: Arc<Lister>,
    /// With `--shards`: the held shards, which the caches of resources not read whole follow.
    shards: std::sync::OnceLock<ShardSet>,
    /// Targets some plugin reads whole (declared `reads`, the Plugin objects): their
    /// resources are cached whole even with shards.
    whole: RwLock<BTreeSet<ResourceRef>>,
    /// Per target, the union of what its plugins declared of it (absent: whole objects).
    projections: RwLock<BTreeMap<ResourceRef, Projection>>,
    /// Per target only tenant plugins need, their namespaces: its resource is watched
    /// only there (absent: a cluster plugin or the host needs it, see
    /// [`WatchManager::scopes`]).
    tenant_scopes: RwLock<BTreeMap<ResourceRef, BTreeSet<String>>>,
    /// Counts resources settling (a cache synced, or discovery found one not served):
    /// what waits for one watches it change.
    settled: Arc<tokio_watch::Sender<u64>>,
}

impl WatchManager {
    /// A manager sending events to `events`.
    pub(crate) fn new(
        client: Client,
        discovery: Arc<Discovery>,
        caches: Arc<Caches>,
        config: WatchConfig,
        events: mpsc::Sender<WatchSignal>,
        metrics: Arc<Metrics>,
        access: Arc<Access>,
    ) -> Arc<Self> {
        let lister = Arc::new(Lister::new(config.initial_sync, config.list_page_size));
        Arc::new(WatchManager {
            lister,
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
            projections: RwLock::new(BTreeMap::new()),
            tenant_scopes: RwLock::new(BTreeMap::new()),
            settled: Arc::new(tokio_watch::Sender::new(0)),
        })
    }

    /// Whether `r` has settled for a plugin whose projection of it is `needs`: served with
    /// its cache synced and holding at least those fields (a watch restarted for a wider
    /// projection holds them once its list is done), or looked up and not served (nothing
    /// to wait for: what reads it is told so). A version waiting to be swapped in waits for
    /// this of everything it watches and reads.
    pub(crate) fn settled(&self, r: &ResourceRef, needs: &Projection) -> bool {
        let resolved = kubewasm_core::sync::read(&self.resolved).get(r).cloned();
        match resolved {
            Some(k) => self
                .caches
                .get(&k.type_ref())
                .is_some_and(|c| c.is_synced() && c.holds().covers(needs)),
            None => kubewasm_core::sync::read(&self.looked_up).contains(r),
        }
    }

    /// Follows resources settling: changes each time one does (see
    /// [`WatchManager::settled`]).
    pub(crate) fn settling(&self) -> tokio_watch::Receiver<u64> {
        self.settled.subscribe()
    }

    /// Wait until every resource of `needs` has settled for its projection.
    pub(crate) async fn until_settled(&self, needs: &[(ResourceRef, Projection)]) {
        let mut rx = self.settling();
        while !needs.iter().all(|(r, p)| self.settled(r, p)) {
            if rx.changed().await.is_err() {
                return;
            }
        }
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

    /// What each target's plugins declared of it, united (see [`kubewasm_core::projection`]);
    /// takes effect with the next [`WatchManager::set_desired`].
    pub(crate) fn set_projections(&self, projections: BTreeMap<ResourceRef, Projection>) {
        *kubewasm_core::sync::write(&self.projections) = projections;
    }

    /// The namespaces of the tenant plugins that alone need each target (see
    /// `Environment::tenant_scopes`); takes effect with the next
    /// [`WatchManager::set_desired`]: a resource whose set changes is watched again over
    /// its kept cache, like one whose projection changed.
    pub(crate) fn set_tenant_scopes(&self, scopes: BTreeMap<ResourceRef, BTreeSet<String>>) {
        *kubewasm_core::sync::write(&self.tenant_scopes) = scopes;
    }

    /// The tenant namespaces `key` is watched in: the union over the targets resolving to
    /// it, None when one of them is needed beyond tenants (or none resolves to it).
    fn tenant_namespaces(&self, key: &ResourceKey) -> Option<BTreeSet<String>> {
        let scopes = kubewasm_core::sync::read(&self.tenant_scopes);
        let resolved = kubewasm_core::sync::read(&self.resolved);
        let mut union: Option<BTreeSet<String>> = None;
        for (r, _) in resolved.iter().filter(|(_, res)| res.key() == *key) {
            union
                .get_or_insert_default()
                .extend(scopes.get(r)?.iter().cloned());
        }
        union
    }

    /// What the cache of `key` must keep: the union of the projections of every target
    /// resolving to it (whole objects for a target with none).
    fn projection_of(&self, key: &ResourceKey) -> Projection {
        let projections = kubewasm_core::sync::read(&self.projections);
        let union = kubewasm_core::sync::read(&self.resolved)
            .iter()
            .filter(|(_, res)| res.key() == *key)
            .map(|(r, _)| projections.get(r).cloned().unwrap_or_default())
            .reduce(|a, b| a.union(&b))
            .unwrap_or_default();
        cache_projection(&union)
    }

    /// Set what must be watched, each target with its [`Demand`]; the manager converges to
    /// it in the background.
    pub(crate) fn set_desired(&self, refs: BTreeMap<ResourceRef, Demand>) {
        self.desired.send_replace(refs);
    }

    /// The served resource a watch target resolved to, if it is being watched.
    pub(crate) fn resolved(&self, r: &ResourceRef) -> Option<Arc<Resolved>> {
        kubewasm_core::sync::read(&self.resolved).get(r).cloned()
    }

    /// Where each desired resource stands: served and synced, served and still syncing,
    /// or not served (yet). Only syncing resources hold readiness back: a resource that is
    /// not served (a CRD not installed) may never be, and must not keep a host unready.
    pub(crate) fn readiness(&self) -> WatchReadiness {
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
    pub(crate) async fn run(self: Arc<Self>, cancel: CancellationToken) {
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

    /// The namespaces a resource is watched in (`None`: cluster-wide): a namespaced one
    /// that only tenant plugins need, in their namespaces (within `--namespace`, if
    /// set; if none is, in `--namespace`, where those tenants see nothing); else in
    /// `--namespace`, or cluster-wide.
    fn scopes(&self, res: &Resolved) -> Vec<Option<String>> {
        if !res.namespaced {
            return vec![None];
        }
        let within =
            |ns: &String| self.config.namespaces.is_empty() || self.config.namespaces.contains(ns);
        let tenants: Vec<Option<String>> = self
            .tenant_namespaces(&res.key())
            .unwrap_or_default()
            .into_iter()
            .filter(within)
            .map(Some)
            .collect();
        if !tenants.is_empty() {
            tenants
        } else if !self.config.namespaces.is_empty() {
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
        &self,
        desired: &BTreeMap<ResourceRef, Demand>,
        running: &mut HashMap<ResourceKey, Running>,
        waiting_logged: &mut HashSet<ResourceRef>,
    ) {
        for r in desired.keys() {
            if self.resolved(r).is_none() {
                self.look_up(r, waiting_logged).await;
            }
        }
        self.forget_unwanted(desired);
        let wanted = self.wanted(desired);
        let sharded = self.sharded(&wanted);
        let mut kept = self.stop_stale(running, &wanted, &sharded).await;
        waiting_logged.retain(|r| desired.contains_key(r));
        self.require_access(&wanted).await;
        for (key, (res, demands)) in wanted {
            if let std::collections::hash_map::Entry::Vacant(slot) = running.entry(key) {
                let key = slot.key();
                let cache = kept.remove(key);
                let started = self.start(key, res, &demands, sharded.contains(key), cache);
                slot.insert(started);
            }
        }
    }

    /// Ask discovery what `r` resolves to: a served resource is watched from now on (the
    /// router is told), one not served yet is waited for (said once).
    async fn look_up(&self, r: &ResourceRef, waiting_logged: &mut HashSet<ResourceRef>) {
        let lookup = self.discovery.resolve(r).await;
        {
            let mut looked_up = kubewasm_core::sync::write(&self.looked_up);
            if lookup.is_ok() {
                looked_up.remove(r);
            } else {
                looked_up.insert(r.clone());
            }
        }
        let label = ResourceLabel {
            resource: r.to_string(),
        };
        match lookup {
            Ok(res) => {
                // 0, not removed: a kind's series is there before it goes missing.
                self.metrics.unserved.get_or_create(&label).set(0);
                if waiting_logged.remove(r) {
                    tracing::info!(resource = %r, "resource is now served; starting its watch");
                }
                kubewasm_core::sync::write(&self.resolved).insert(r.clone(), res);
                let _ = self.events.send(WatchSignal::Resolved(r.clone())).await;
            }
            Err(ResolveError::NotServed(_)) => {
                self.metrics.unserved.get_or_create(&label).set(1);
                self.settled.send_modify(|n| *n += 1);
                if waiting_logged.insert(r.clone()) {
                    tracing::warn!(resource = %r, "not served by the API server yet; the watch starts when it appears");
                }
            }
            Err(e) => tracing::warn!(resource = %r, error = %e, "discovery failed; will retry"),
        }
    }

    /// Forget resolutions nobody wants any more.
    fn forget_unwanted(&self, desired: &BTreeMap<ResourceRef, Demand>) {
        let mut m = kubewasm_core::sync::write(&self.resolved);
        m.retain(|r, _| desired.contains_key(r));
        kubewasm_core::sync::write(&self.looked_up).retain(|r| desired.contains_key(r));
    }

    /// Per served resource: what it resolves from, and the demands of every spelling of it
    /// (their shared selector is sent to the server, if any).
    fn wanted(&self, desired: &BTreeMap<ResourceRef, Demand>) -> Wanted {
        let mut wanted = Wanted::new();
        for (r, res) in kubewasm_core::sync::read(&self.resolved).iter() {
            let demand = desired.get(r).cloned().flatten();
            wanted
                .entry(res.key())
                .or_insert_with(|| (res.clone(), BTreeSet::new()))
                .1
                .insert(demand);
        }
        wanted
    }

    /// The resources cached by shard: with shards, those no plugin reads whole.
    fn sharded(&self, wanted: &Wanted) -> HashSet<ResourceKey> {
        if self.shards.get().is_none() {
            return HashSet::new();
        }
        let whole = kubewasm_core::sync::read(&self.whole);
        let whole_keys: HashSet<ResourceKey> = kubewasm_core::sync::read(&self.resolved)
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

    /// Stop the watchers no longer needed, or whose server-side selector or sharding
    /// changed; the caches of those to restart are kept (the new watcher's first list is
    /// diffed against them) and returned.
    async fn stop_stale(
        &self,
        running: &mut HashMap<ResourceKey, Running>,
        wanted: &Wanted,
        sharded: &HashSet<ResourceKey>,
    ) -> HashMap<ResourceKey, Kept> {
        let stale: Vec<ResourceKey> = running
            .iter()
            .filter(|(k, r)| {
                wanted.get(*k).is_none_or(|(res, demands)| {
                    shared_demand(demands) != r.selector
                        || sharded.contains(*k) != r.sharded
                        || self.projection_of(k) != r.projection
                        || self.scopes(res) != r.scopes
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut kept = HashMap::new();
        for key in stale {
            let Some(r) = running.remove(&key) else {
                continue;
            };
            r.cancel.cancel();
            let _ = r.task.await;
            if wanted.contains_key(&key) {
                tracing::info!(resource = %key, "restarting the watch: its consumers' shared label selector, whether it is read whole, the fields they declared, or the namespaces it is watched in changed");
                kept.insert(key, (r.cache, r.scopes));
            } else {
                self.caches.remove(&r.kind);
                tracing::info!(resource = %key, "watch stopped: no plugin needs it");
            }
        }
        kept
    }

    /// What every watch needs of RBAC, asked once per rule (one error line for those
    /// denied); the watches start anyway, and back off while forbidden.
    async fn require_access(&self, wanted: &Wanted) {
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
    }

    /// Start the watch of `res` into its cache: `kept` from a watcher stopped to restart
    /// (with the namespaces it watched), or a new one.
    fn start(
        &self,
        key: &ResourceKey,
        res: Arc<Resolved>,
        demands: &BTreeSet<Demand>,
        sharded: bool,
        kept: Option<Kept>,
    ) -> Running {
        let selector = shared_demand(demands);
        let projection = self.projection_of(key);
        let scopes = self.scopes(&res);
        let shards = sharded.then(|| self.shards.get().cloned()).flatten();
        // Watched in namespaces it did not hold (a tenant's arrived, or a cluster plugin
        // needs it now): what waits for the cache to sync waits for their lists too.
        if let Some((cache, before)) = &kept
            && !before.contains(&None)
            && scopes.iter().any(|s| !before.contains(s))
        {
            cache.mark_unsynced();
        }
        let cache = kept.map(|(cache, _)| cache).unwrap_or_else(|| {
            Arc::new(ResourceCache::new(
                res.key(),
                res.type_ref(),
                res.namespaced,
            ))
        });
        cache.set_by_shard(shards.clone());
        // Namespaces no longer watched leave the cache, without events: nothing happened
        // to their objects, and no plugin watching it is served there any more.
        if !scopes.contains(&None) {
            cache.retain(|k| scopes.contains(&k.namespace));
        }
        self.caches.insert(cache.clone());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(
            WatchTask {
                client: self.client.clone(),
                res: res.clone(),
                cache: cache.clone(),
                tx: self.events.clone(),
                settled: self.settled.clone(),
                resync: self.config.resync,
                metrics: self.metrics.clone(),
                scopes: scopes.clone(),
                selector: selector.clone(),
                rules: self.rules(&res),
                access: self.access.clone(),
                backoff: self.backoff,
                shards,
                lister: self.lister.clone(),
                projection: Arc::new(projection.clone()),
            }
            .run(cancel.clone()),
        );
        let fields = projection.to_string();
        match &selector {
            Some(s) => {
                tracing::info!(resource = %key, kind = %res.type_ref(), label_selector = %s, fields, "watch started")
            }
            None => {
                tracing::info!(resource = %key, kind = %res.type_ref(), fields, "watch started")
            }
        }
        Running {
            cancel,
            task,
            selector,
            sharded,
            projection,
            scopes,
            cache,
            kind: res.type_ref(),
        }
    }
}

#[cfg(test)]
mod tests;
