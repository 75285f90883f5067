//! The watch of one resource as stream stages, composed the way kube-runtime composes its
//! watcher and reflector (`watcher(..).modify(..)`, then `reflector(writer, stream)`):
//!
//! 1. [`strip`]: each event of the scopes' watchers becomes a [`Step`] holding what the
//!    cache keeps of an object.
//! 2. [`shard_filter`]: with `--shards`, the objects of shards this replica does not hold
//!    are not listed into the cache, and their changes only take them out of it.
//! 3. [`relists`]: a (re)list, object by object, becomes one step with the scope's objects.
//! 4. [`Reflector::apply`]: each step into the cache; a relist is diffed against what the
//!    cache held ([`relist_diff`]), so changes made while the watch was broken (410 Gone,
//!    a disconnect) still become events.
//! 5. [`events`]: the changes as the [`WatchSignal`]s the router takes.
//!
//! Each stage is a function of a stream (or of one step), tested with `stream::iter`,
//! without a cluster; the task that runs them is [`super::task`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

use kubewasm_core::event::EventType;
use kubewasm_core::kind::KindInfo;
use kubewasm_core::projection::Projection;

use crate::replicas::shards::ShardSet;
use crate::watch::backoff::Failed;
use crate::watch::cache::{
    CachedObject, ObjectKey, ObjectType, Objects, ResourceCache, ResourceKey,
};
use crate::watch::manager::{WatchEvent, WatchSignal};

/// The namespace one watcher of a resource covers (`None`: cluster-wide).
pub(crate) type Scope = Option<String>;

/// One step of a scope's watcher, as the cache takes it.
#[derive(Debug)]
pub(crate) enum Step {
    /// A (re)list started.
    ListStarted,
    /// An object of the list in progress.
    Listed(Arc<CachedObject>),
    /// The list ended.
    ListDone,
    /// A list ended with these objects ([`relists`]): what the scope holds now.
    Relisted(Objects),
    /// An object was created or changed.
    Applied(Arc<CachedObject>),
    /// An object was deleted (kept as a tombstone even when of another replica's shard).
    Deleted(Arc<CachedObject>),
    /// An object of a shard this replica does not hold changed: not cached, not routed.
    Elsewhere(ObjectKey),
    /// The watch failed; its backoff waits before the next attempt.
    Failed(Failed),
}

impl Step {
    /// Whether the step shows the watch works: a list ended, or an object event arrived.
    pub(crate) fn works(&self) -> bool {
        !matches!(self, Step::ListStarted | Step::Listed(_) | Step::Failed(_))
    }
}

/// One change to the cache, as the router sees it.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub(crate) event_type: EventType,
    /// The object now (its last state for deletions).
    pub(crate) object: Arc<CachedObject>,
    /// The previous state, for modifications.
    pub(crate) old: Option<Arc<CachedObject>>,
}

impl Change {
    pub(crate) fn new(
        event_type: EventType,
        object: Arc<CachedObject>,
        old: Option<Arc<CachedObject>>,
    ) -> Self {
        Change {
            event_type,
            object,
            old,
        }
    }
}

/// Stage 1: the watchers' events as steps, each object as the cache keeps it ([`kept`]),
/// projected to `projection` (the union of what the resource's plugins declared).
pub(crate) fn strip<S>(
    events: S,
    res: Arc<KindInfo>,
    projection: Arc<Projection>,
) -> impl Stream<Item = (Scope, Step)>
where
    S: Stream<Item = (Scope, Result<Event<DynamicObject>, Failed>)>,
{
    // One apiVersion and kind for all the objects of the watch.
    let types = ObjectType::new(res.api_version(), res.kind.as_str());
    events.map(move |(scope, event)| {
        let kept = |o| keep(o, &types, &projection);
        let step = match event {
            Ok(Event::Init) => Step::ListStarted,
            Ok(Event::InitApply(o)) => Step::Listed(kept(o)),
            Ok(Event::InitDone) => Step::ListDone,
            Ok(Event::Apply(o)) => Step::Applied(kept(o)),
            Ok(Event::Delete(o)) => Step::Deleted(kept(o)),
            Err(failed) => Step::Failed(failed),
        };
        (scope, step)
    })
}

/// What the cache keeps of an object, whole. managedFields are the server's bookkeeping,
/// often larger than the object: caching them doubles what each object costs, and plugins
/// have no use for them. Objects from list responses may lack apiVersion and kind; plugins
/// always get them.
pub(crate) fn kept(obj: DynamicObject, res: &KindInfo) -> Arc<CachedObject> {
    let types = ObjectType::new(res.api_version(), res.kind.as_str());
    keep(obj, &types, &Projection::whole())
}

/// [`kept`], of a watch of `types`, projected to `projection` (identity always kept).
fn keep(
    mut obj: DynamicObject,
    types: &Arc<ObjectType>,
    projection: &Projection,
) -> Arc<CachedObject> {
    obj.metadata.managed_fields = None;
    CachedObject::kept(obj, types, projection)
}

/// Stage 2: only the objects `keeps` (the shards held, asked as each step passes) are
/// listed; a change to another one only takes it out of the cache ([`Step::Elsewhere`]).
/// Deletions pass: a follower keeps them as tombstones for a shard it may gain.
pub(crate) fn shard_filter<S, F>(steps: S, keeps: F) -> impl Stream<Item = (Scope, Step)>
where
    S: Stream<Item = (Scope, Step)>,
    F: Fn(&ObjectKey) -> bool,
{
    steps.filter_map(move |(scope, step)| {
        let step = match step {
            Step::Listed(o) if !keeps(&o.key()) => None,
            Step::Applied(o) if !keeps(&o.key()) => Some(Step::Elsewhere(o.key())),
            step => Some(step),
        };
        future::ready(step.map(|s| (scope, s)))
    })
}

/// Stage 3: each scope's list, gathered from its start to its end into one
/// [`Step::Relisted`]; an object listed outside a list is dropped. A new stream starts
/// with no list in progress.
pub(crate) fn relists<S>(steps: S) -> impl Stream<Item = (Scope, Step)>
where
    S: Stream<Item = (Scope, Step)>,
{
    let mut lists: HashMap<Scope, Objects> = HashMap::new();
    steps.filter_map(move |(scope, step)| {
        let step = match step {
            Step::ListStarted => {
                lists.insert(scope.clone(), Objects::new());
                None
            }
            Step::Listed(o) => {
                if let Some(list) = lists.get_mut(&scope) {
                    list.insert(o);
                }
                None
            }
            Step::ListDone => Some(Step::Relisted(lists.remove(&scope).unwrap_or_default())),
            step => Some(step),
        };
        future::ready(step.map(|s| (scope, s)))
    })
}

/// The changes a relist makes: `fresh` against what the scope held `before`. An object
/// new here is `added` (a `resync` when of a shard just `gained`: it is not new, only new
/// to this replica), one whose resourceVersion differs `modified`, one gone `deleted`
/// (when still of a shard this replica `keeps`).
pub(crate) fn relist_diff(
    before: Objects,
    fresh: &Objects,
    gained: impl Fn(&ObjectKey) -> bool,
    keeps: impl Fn(&ObjectKey) -> bool,
) -> Vec<Change> {
    let mut changes = Vec::new();
    for obj in fresh.iter() {
        let change = match before.get_like(obj) {
            None if gained(&obj.key()) => Change::new(EventType::Resync, obj.clone(), None),
            None => Change::new(EventType::Added, obj.clone(), None),
            Some(old) if old.resource_version() != obj.resource_version() => {
                Change::new(EventType::Modified, obj.clone(), Some(old.clone()))
            }
            Some(_) => continue,
        };
        changes.push(change);
    }
    let gone = before
        .into_iter()
        .filter(|old| !fresh.contains_like(old) && keeps(&old.key()));
    changes.extend(gone.map(|old| Change::new(EventType::Deleted, old, None)));
    changes
}

/// How a list of a scope counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// The scope's first list since the watch started; `all`: every scope is listed now.
    First { all: bool },
    /// A list for the shards gained.
    Refill,
    /// A relist after the watch broke.
    Relist,
}

/// Stage 4: keeps one resource's cache (its shards held, and the lists still to bring
/// the objects of shards gained) and applies each step to it.
pub(crate) struct Reflector {
    cache: Arc<ResourceCache>,
    /// Some: the cache keeps only the objects of these held shards.
    shards: Option<ShardSet>,
    scopes: Vec<Scope>,
    /// Scopes listed since the watch started.
    listed: HashSet<Scope>,
    /// Scopes still to list since the last shards were gained.
    to_refill: HashSet<Scope>,
    /// Shards gained whose objects a list still has to bring.
    refilling: BTreeSet<u32>,
}

impl Reflector {
    pub(crate) fn new(
        cache: Arc<ResourceCache>,
        shards: Option<ShardSet>,
        scopes: Vec<Scope>,
    ) -> Self {
        Reflector {
            cache,
            shards,
            scopes,
            listed: HashSet::new(),
            to_refill: HashSet::new(),
            refilling: BTreeSet::new(),
        }
    }

    /// Whether the cache keeps `key` (always, unless it is cached by shard).
    pub(crate) fn keeps(&self, key: &ObjectKey) -> bool {
        self.shards.as_ref().is_none_or(|s| s.owns(key))
    }

    /// Shards lost: their objects leave the cache (their new holder handles them); how
    /// many did.
    pub(crate) fn lose(&mut self, lost: &BTreeSet<u32>) -> usize {
        let Some(shards) = &self.shards else {
            return 0;
        };
        let dropped = self.cache.retain(|k| !lost.contains(&shards.shard_of(k)));
        self.refilling.retain(|s| !lost.contains(s));
        dropped
    }

    /// Shards gained: the next list of every scope brings their objects (the caller
    /// starts it).
    pub(crate) fn gain(&mut self, gained: &BTreeSet<u32>) {
        self.refilling.extend(gained.iter().copied());
        self.to_refill = self.scopes.iter().cloned().collect();
    }

    /// Apply one step of `scope` to the cache: the changes it made, in order, and how a
    /// list counted.
    pub(crate) fn apply(&mut self, scope: &Scope, step: Step) -> (Vec<Change>, Option<Listing>) {
        match step {
            Step::Relisted(fresh) => {
                let (changes, listing) = self.relisted(scope, fresh);
                (changes, Some(listing))
            }
            Step::Applied(o) => (self.applied(o).into_iter().collect(), None),
            Step::Deleted(o) => {
                self.cache.remove(&o.key());
                (vec![Change::new(EventType::Deleted, o, None)], None)
            }
            Step::Elsewhere(key) => {
                self.cache.remove(&key);
                (Vec::new(), None)
            }
            // Gathered by `relists`, or the task's: nothing in the cache changes.
            Step::ListStarted | Step::Listed(_) | Step::ListDone | Step::Failed(_) => {
                (Vec::new(), None)
            }
        }
    }

    fn applied(&self, o: Arc<CachedObject>) -> Option<Change> {
        match self.cache.insert(o.clone()) {
            None => Some(Change::new(EventType::Added, o, None)),
            Some(old) if old.resource_version() == o.resource_version() => None,
            Some(old) => Some(Change::new(EventType::Modified, o, Some(old))),
        }
    }

    fn relisted(&mut self, scope: &Scope, mut fresh: Objects) -> (Vec<Change>, Listing) {
        // A shard may have been lost while the list ran.
        fresh.retain(|o| self.keeps(&o.key()));
        let first = !self.listed.contains(scope);
        let before = self.cache.replace_scope(scope.as_deref(), fresh.clone());
        let refill = self.to_refill.remove(scope);
        let gained = |k: &ObjectKey| {
            refill
                && self
                    .shards
                    .as_ref()
                    .is_some_and(|s| self.refilling.contains(&s.shard_of(k)))
        };
        let changes = relist_diff(before, &fresh, gained, |k| self.keeps(k));
        if refill && self.to_refill.is_empty() {
            self.refilling.clear();
        }
        self.listed.insert(scope.clone());
        let listing = match (first, refill) {
            (true, _) => Listing::First {
                all: self.listed.len() == self.scopes.len(),
            },
            (false, true) => Listing::Refill,
            (false, false) => Listing::Relist,
        };
        (changes, listing)
    }
}

/// Stage 5: the changes to `resource`'s cache as the signals the router takes.
pub(crate) fn events<S>(resource: ResourceKey, changes: S) -> impl Stream<Item = WatchSignal>
where
    S: Stream<Item = Change>,
{
    changes.map(move |c| {
        WatchSignal::Event(WatchEvent {
            resource: resource.clone(),
            event_type: c.event_type,
            object: c.object,
            old: c.old,
        })
    })
}

#[cfg(test)]
mod tests;
