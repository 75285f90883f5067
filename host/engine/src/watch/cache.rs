//! The host's caches of watched resources: one per resource, shared by every plugin,
//! filled by `watch` and read by plugins through `host.get`/`host.list`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use kube::api::DynamicObject;

use kubewasm_core::admit::{Owners, Trigger};
use kubewasm_core::kind::KindInfo;
use kubewasm_core::projection::Projection;
use kubewasm_core::resource::TypeRef;
pub(crate) use kubewasm_core::resource::{ObjectKey, ResourceKey};
use kubewasm_core::selector::LabelSelector;
use kubewasm_runtime::{ClusterView, ListAnswer, ListLimit, ReadError, ReadScope};

mod meta;
mod objects;

pub(crate) use meta::ObjectType;
use meta::{Meta, Parts};
pub(crate) use objects::Objects;

/// An object as cached, shared by every plugin and event that refers to it: its JSON text
/// (managedFields already stripped by the watcher), which is what plugins are handed and
/// read, and the few fields the host itself routes on, parsed once and kept compact
/// ([`meta`]). Text rather than a parsed `DynamicObject`: a `serde_json::Value` tree costs
/// several times its text (a node, a map entry and an allocation per field), and the text
/// is made once per change instead of once per delivery or read.
#[derive(Debug)]
pub(crate) struct CachedObject {
    json: Arc<str>,
    meta: Meta,
}

/// The annotation KEP-5915 proposes for an object's trace context (read by the event
/// pipeline's tracing).
pub(crate) const TRACEPARENT: &str = "tracing.k8s.io/traceparent";

impl CachedObject {
    /// Keep an object, of its own type (see [`CachedObject::kept`] for a watch's objects).
    pub(crate) fn new(object: DynamicObject) -> Arc<Self> {
        let types = object
            .types
            .as_ref()
            .map(|t| ObjectType::new(&*t.api_version, &*t.kind))
            .unwrap_or_else(|| ObjectType::new("", ""));
        Self::whole(object, types)
    }

    /// Keep an object of a watch whose objects are of type `types` (shared with them when
    /// the object is of it), projected to `projection`; an object without apiVersion and
    /// kind (as list responses may give) gets `types`'.
    pub(crate) fn kept(
        mut object: DynamicObject,
        types: &Arc<ObjectType>,
        projection: &Projection,
    ) -> Arc<Self> {
        let types = match &object.types {
            Some(t) => ObjectType::shared_or_new(types, &t.api_version, &t.kind),
            None => {
                object.types = Some(kube::api::TypeMeta {
                    api_version: types.api_version.to_string(),
                    kind: types.kind.to_string(),
                });
                types.clone()
            }
        };
        if projection.is_whole() {
            return Self::whole(object, types);
        }
        // A `DynamicObject` always converts (it came from JSON); whole if not.
        let Ok(mut value) = serde_json::to_value(&object) else {
            return Self::whole(object, types);
        };
        drop(object);
        projection.apply(&mut value);
        let meta = Meta::new(types, Parts::of_value(&value));
        let json = value.to_string();
        // The tree freed first: the text kept takes its place in the heap instead of
        // leaving it a hole between cached objects.
        drop(value);
        Arc::new(CachedObject {
            json: json.into(),
            meta,
        })
    }

    /// `object` whole. A `DynamicObject` always serialises (string keys, finite numbers
    /// from JSON), so the empty-object fallback is never taken in practice.
    fn whole(object: DynamicObject, types: Arc<ObjectType>) -> Arc<Self> {
        let json = serde_json::to_string(&object).unwrap_or_else(|_| "{}".to_string());
        let m = &object.metadata;
        let parts = Parts {
            name: m.name.as_deref().unwrap_or_default(),
            namespace: m.namespace.as_deref(),
            uid: m.uid.as_deref(),
            resource_version: m.resource_version.as_deref(),
            generation: m.generation,
            traceparent: m
                .annotations
                .as_ref()
                .and_then(|a| a.get(TRACEPARENT))
                .map(String::as_str),
            labels: m
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
        };
        let meta = Meta::new(types, parts);
        drop(object);
        Arc::new(CachedObject {
            json: json.into(),
            meta,
        })
    }

    /// The object as JSON, as a plugin receives it.
    pub(crate) fn json(&self) -> Arc<str> {
        self.json.clone()
    }

    /// [`CachedObject::json`] as an owned string.
    pub(crate) fn json_string(&self) -> String {
        self.json.to_string()
    }

    /// The object parsed again, for the rare paths that need all of it as a
    /// `DynamicObject` (recording a warning Event about it).
    pub(crate) fn object(&self) -> Result<DynamicObject, serde_json::Error> {
        serde_json::from_str(&self.json)
    }

    /// [`CachedObject::json_string`] projected to `projection` (what one plugin receives
    /// of the object: its own projection, within the cache's union).
    /// Shares the cached text when the projection drops nothing from it.
    pub(crate) fn json_for(&self, projection: &Projection) -> Arc<str> {
        match projection.apply_text(&self.json) {
            std::borrow::Cow::Borrowed(_) => self.json(),
            std::borrow::Cow::Owned(projected) => projected.into(),
        }
    }

    /// Its key.
    pub(crate) fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace().map(str::to_string),
            name: self.name().to_string(),
        }
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        self.meta.name()
    }

    /// Its namespace (None: cluster-scoped).
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.meta.namespace()
    }

    /// Its uid.
    pub(crate) fn uid(&self) -> Option<&str> {
        self.meta.uid()
    }

    /// Its metadata.generation.
    pub(crate) fn generation(&self) -> Option<i64> {
        self.meta.generation()
    }

    /// Its apiVersion and kind.
    pub(crate) fn type_ref(&self) -> TypeRef {
        let t = self.meta.types();
        TypeRef::new(&*t.api_version, &*t.kind)
    }

    /// Its resourceVersion.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.meta.resource_version()
    }

    /// The value of its label `key`, if it has it.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.meta.label(key)
    }

    /// Whether its labels satisfy `selector`.
    pub(crate) fn selected_by(&self, selector: &LabelSelector) -> bool {
        selector.matches_with(|k| self.label(k))
    }

    /// One of the annotations the host reads on every event (only [`TRACEPARENT`]); None
    /// for any other.
    pub(crate) fn kept_annotation(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.meta.traceparent(),
            _ => None,
        }
    }

    /// The object as the intent pipeline sees a trigger.
    pub(crate) fn trigger(&self) -> Trigger {
        let t = self.meta.types();
        Trigger {
            api_version: t.api_version.to_string(),
            kind: t.kind.to_string(),
            name: self.name().to_string(),
            namespace: self.namespace().map(str::to_string),
            uid: self.uid().map(str::to_string),
        }
    }

    /// `Kind namespace/name` for logs.
    pub(crate) fn describe(&self) -> String {
        let kind = match &*self.meta.types().kind {
            "" => "object",
            kind => kind,
        };
        format!("{kind} {}", self.key())
    }
}

/// The cache of one resource.
#[derive(Debug)]
pub(crate) struct ResourceCache {
    /// The resource it caches.
    pub resource: ResourceKey,
    /// What it holds.
    pub kind: TypeRef,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    objects: RwLock<Objects>,
    synced: AtomicBool,
    /// What every object it holds keeps at least (the projection of its last full list).
    holds: RwLock<Projection>,
    /// Some while it holds only these shards' objects (`kubewasm run --shards`).
    by_shard: RwLock<Option<crate::replicas::shards::ShardSet>>,
    /// Since when its watch has been failing (None: working).
    failing_since: Mutex<Option<tokio::time::Instant>>,
}

impl ResourceCache {
    /// An empty, unsynced cache of `resource`, whose objects are of `kind`.
    pub(crate) fn new(resource: ResourceKey, kind: TypeRef, namespaced: bool) -> Self {
        ResourceCache {
            resource,
            kind,
            namespaced,
            objects: RwLock::new(Objects::new()),
            synced: AtomicBool::new(false),
            holds: RwLock::new(Projection::whole()),
            by_shard: RwLock::new(None),
            failing_since: Mutex::new(None),
        }
    }

    /// Its watch failed (kept from the first failure on, until it works again).
    pub(crate) fn watch_failed(&self) {
        kubewasm_core::sync::lock(&self.failing_since)
            .get_or_insert_with(tokio::time::Instant::now);
    }

    /// Its watch works: it listed or delivered an event.
    pub(crate) fn watch_works(&self) {
        *kubewasm_core::sync::lock(&self.failing_since) = None;
    }

    /// How long its watch has been failing without a success in between (None: it works).
    /// What it holds may be that old.
    pub(crate) fn failing_for(&self) -> Option<std::time::Duration> {
        kubewasm_core::sync::lock(&self.failing_since).map(|at| at.elapsed())
    }

    /// Hold only the objects of `shards`' held shards (Some), or every object (None); the
    /// watcher keeps it so.
    pub(crate) fn set_by_shard(&self, shards: Option<crate::replicas::shards::ShardSet>) {
        *kubewasm_core::sync::write(&self.by_shard) = shards;
    }

    /// Whether a read of `key` (None: a list) can be answered: always, unless the cache
    /// holds only some shards and the key is not in one of them.
    fn answers(&self, key: Option<&ObjectKey>) -> bool {
        match &*kubewasm_core::sync::read(&self.by_shard) {
            None => true,
            Some(shards) => key.is_some_and(|k| shards.owns(k)),
        }
    }

    /// Keep only the objects whose key passes `keep`; how many were dropped.
    pub(crate) fn retain(&self, keep: impl Fn(&ObjectKey) -> bool) -> usize {
        let mut m = kubewasm_core::sync::write(&self.objects);
        let before = m.len();
        m.retain(|o| keep(&o.key()));
        before - m.len()
    }

    /// Whether the first list has completed.
    pub(crate) fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub(crate) fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Its watch restarted in namespaces it did not hold: not synced until every one is
    /// listed (what waits for it waits for that list).
    pub(crate) fn mark_unsynced(&self) {
        self.synced.store(false, Ordering::Release);
    }

    /// What every object it holds keeps at least: its objects came whole, or projected to
    /// this by the last full list of every scope (a watch restarted for a wider projection
    /// holds the narrower one until its list is done).
    pub(crate) fn holds(&self) -> Projection {
        kubewasm_core::sync::read(&self.holds).clone()
    }

    /// Every scope was listed with `projection`: the cache holds it.
    pub(crate) fn set_holds(&self, projection: Projection) {
        *kubewasm_core::sync::write(&self.holds) = projection;
    }

    /// One object.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        kubewasm_core::sync::read(&self.objects).get(key).cloned()
    }

    /// Every object.
    pub(crate) fn snapshot(&self) -> Vec<Arc<CachedObject>> {
        kubewasm_core::sync::read(&self.objects)
            .iter()
            .cloned()
            .collect()
    }

    /// Insert or replace; returns the previous version.
    pub(crate) fn insert(&self, obj: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        kubewasm_core::sync::write(&self.objects).insert(obj)
    }

    /// Remove; returns what was there.
    pub(crate) fn remove(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        kubewasm_core::sync::write(&self.objects).remove(key)
    }

    /// Replace everything (after a relist); returns the previous contents.
    pub(crate) fn replace(&self, objects: Objects) -> Objects {
        std::mem::replace(&mut *kubewasm_core::sync::write(&self.objects), objects)
    }

    /// Replace the objects of one namespace (`None`: everything), after that scope's
    /// watcher relisted; returns what that scope held before.
    pub(crate) fn replace_scope(&self, namespace: Option<&str>, objects: Objects) -> Objects {
        let Some(ns) = namespace else {
            return self.replace(objects);
        };
        let mut m = kubewasm_core::sync::write(&self.objects);
        let before = m.take_if(|o| o.namespace() == Some(ns));
        m.extend(objects);
        before
    }

    /// Number of cached objects.
    pub(crate) fn len(&self) -> usize {
        kubewasm_core::sync::read(&self.objects).len()
    }
}

/// All caches, by resource and by kind.
#[derive(Debug, Default)]
pub(crate) struct Caches {
    by_kind: RwLock<HashMap<TypeRef, Arc<ResourceCache>>>,
}

impl Caches {
    /// Register a cache for a kind (replacing any previous one).
    pub(crate) fn insert(&self, cache: Arc<ResourceCache>) {
        {
            let mut m = kubewasm_core::sync::write(&self.by_kind);
            m.insert(cache.kind.clone(), cache);
        }
    }

    /// Drop the cache of a kind.
    pub(crate) fn remove(&self, kind: &TypeRef) {
        {
            let mut m = kubewasm_core::sync::write(&self.by_kind);
            m.remove(kind);
        }
    }

    /// Every cache.
    pub(crate) fn all(&self) -> Vec<Arc<ResourceCache>> {
        kubewasm_core::sync::read(&self.by_kind)
            .values()
            .cloned()
            .collect()
    }

    /// The cache of a kind.
    pub(crate) fn get(&self, kind: &TypeRef) -> Option<Arc<ResourceCache>> {
        kubewasm_core::sync::read(&self.by_kind).get(kind).cloned()
    }

    /// The cache of a resource.
    pub(crate) fn for_resource(&self, resource: &ResourceKey) -> Option<Arc<ResourceCache>> {
        kubewasm_core::sync::read(&self.by_kind)
            .values()
            .find(|c| c.resource == *resource)
            .cloned()
    }
}

/// What one plugin may read: the caches, limited to the kinds it watches or declared and
/// to the namespaces of its read scope (one for all kinds, or one per kind), within the
/// call's read budget.
pub(crate) struct PluginView {
    caches: Arc<Caches>,
    allowed: Arc<HashMap<TypeRef, ReadScope>>,
    /// Kinds the plugin declared that the API server does not serve (yet).
    unserved: Arc<HashSet<TypeRef>>,
    /// The plugin's projection of each kind (absent: whole objects).
    projections: Arc<HashMap<TypeRef, Projection>>,
    budget: usize,
    /// The first read refused for a reason that passes ([`ReadError::is_transient`]).
    transient: std::sync::Mutex<Option<ReadError>>,
}

impl PluginView {
    /// A view of `caches` limited to `allowed` kinds, namespaced kinds to `scope`, one
    /// call reading at most `budget` bytes (the tests' shorthand for [`Self::per_kind`]).
    #[cfg(test)]
    pub(crate) fn new(
        caches: Arc<Caches>,
        allowed: std::collections::HashSet<TypeRef>,
        scope: ReadScope,
        budget: usize,
    ) -> Self {
        let allowed = allowed.into_iter().map(|t| (t, scope.clone())).collect();
        Self::per_kind(caches, Arc::new(allowed), budget)
    }

    /// A view of `caches` limited to the kinds of `allowed`, each namespaced kind to its
    /// own scope (`run`: where the plugin's approval lets it read that kind).
    pub(crate) fn per_kind(
        caches: Arc<Caches>,
        allowed: Arc<HashMap<TypeRef, ReadScope>>,
        budget: usize,
    ) -> Self {
        PluginView {
            caches,
            allowed,
            unserved: Arc::default(),
            projections: Arc::default(),
            budget,
            transient: std::sync::Mutex::new(None),
        }
    }

    /// The view, also knowing the kinds the plugin declared that are not served (yet):
    /// their reads say so, not that they were never declared.
    pub(crate) fn with_unserved(mut self, unserved: Arc<HashSet<TypeRef>>) -> Self {
        self.unserved = unserved;
        self
    }

    /// The view, answering each kind projected to the plugin's projection of it.
    pub(crate) fn with_projections(
        mut self,
        projections: Arc<HashMap<TypeRef, Projection>>,
    ) -> Self {
        self.projections = projections;
        self
    }

    /// An object of `cache` as this plugin reads it: its own projection of the kind, or
    /// the cached object itself when that projection keeps all the cache holds.
    fn json(&self, cache: &ResourceCache, o: &CachedObject) -> String {
        match self.projections.get(&cache.kind) {
            Some(p) if !p.covers(&cache.holds()) => o.json_for(p).to_string(),
            _ => o.json_string(),
        }
    }

    /// The first read this view refused for a reason that passes (a kind not served or
    /// not synced yet), if any: a call that then failed is retried, not parked.
    pub(crate) fn transient_refusal(&self) -> Option<ReadError> {
        kubewasm_core::sync::lock(&self.transient).clone()
    }

    fn cache(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(Arc<ResourceCache>, &ReadScope), ReadError> {
        let t = TypeRef::new(api_version, kind);
        let refused = |e: ReadError| {
            if e.is_transient() {
                kubewasm_core::sync::lock(&self.transient).get_or_insert(e.clone());
            }
            e
        };
        let Some(scope) = self.allowed.get(&t) else {
            return Err(refused(match self.unserved.contains(&t) {
                true => ReadError::NotServed(t.to_string()),
                false => ReadError::NotAllowed(t.to_string()),
            }));
        };
        let Some(cache) = self.caches.get(&t) else {
            return Err(refused(ReadError::NotServed(t.to_string())));
        };
        if !cache.is_synced() {
            return Err(refused(ReadError::NotSynced(t.to_string())));
        }
        Ok((cache, scope))
    }
}

impl ResourceCache {
    /// Up to `max` objects matching `pred`, found under the read lock without copying
    /// the rest of the cache.
    fn matching(&self, max: usize, pred: impl Fn(&CachedObject) -> bool) -> Vec<Arc<CachedObject>> {
        kubewasm_core::sync::read(&self.objects)
            .iter()
            .filter(|o| pred(o))
            .take(max)
            .cloned()
            .collect()
    }
}

impl ClusterView for PluginView {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, ReadError> {
        let (cache, scope) = self.cache(api_version, kind)?;
        let namespace = if cache.namespaced {
            scope.check(&format!("{api_version}/{kind}"), namespace)?;
            namespace.map(str::to_string)
        } else {
            None
        };
        let key = ObjectKey {
            namespace,
            name: name.to_string(),
        };
        if !cache.answers(Some(&key)) {
            return Err(ReadError::OtherShard {
                kind: format!("{api_version}/{kind}"),
                what: format!("object {key}"),
            });
        }
        Ok(cache.get(&key).map(|o| self.json(&cache, &o)))
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: ListLimit,
    ) -> Result<Vec<String>, ReadError> {
        let (cache, scope) = self.cache(api_version, kind)?;
        let what = format!("{api_version}/{kind}");
        let namespace = if cache.namespaced {
            scope.check(&what, namespace)?;
            namespace
        } else {
            None
        };
        if !cache.answers(None) {
            return Err(ReadError::OtherShard {
                kind: what,
                what: "a list".into(),
            });
        }
        let selector = match label_selector {
            Some(s) => LabelSelector::parse(s).map_err(ReadError::Selector)?,
            None => LabelSelector::default(),
        };
        // One more than the limit, to tell "exactly the limit" from "more".
        let mut objects = cache.matching(limit.items.saturating_add(1), |o| {
            (namespace.is_none() || o.namespace() == namespace) && o.selected_by(&selector)
        });
        objects.sort_by_key(|o| o.key());
        let mut answer = ListAnswer::new(what, limit);
        for o in &objects {
            answer.check_count()?;
            answer.push(self.json(&cache, o))?;
        }
        Ok(answer.finish())
    }

    fn read_budget(&self) -> usize {
        self.budget
    }
}

/// Owner references in plugin bodies are checked against the host's caches: an owner
/// must be cached (watched or read by some plugin) with the uid the body names.
impl Owners for Caches {
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
        let cache = self
            .for_resource(&kind.key())
            .or_else(|| self.get(&kind.type_ref()))?;
        let key = ObjectKey {
            namespace: if cache.namespaced {
                namespace.map(str::to_string)
            } else {
                None
            },
            name: name.to_string(),
        };
        cache.get(&key)?.uid().map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn obj(ns: &str, name: &str, labels: serde_json::Value) -> Arc<CachedObject> {
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
            "metadata": {"namespace": ns, "name": name, "labels": labels, "resourceVersion": "1"}
        }))
        .unwrap();
        CachedObject::new(o)
    }

    #[test]
    fn a_cached_object_keeps_its_text_and_the_fields_the_host_reads() {
        let whole = json!({
            "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
            "metadata": {"namespace": "a", "name": "one", "uid": "u-1", "generation": 3,
                "resourceVersion": "7", "labels": {"app": "x"},
                "annotations": {TRACEPARENT: "00-t", "other": "kept in the text only"}},
            "spec": {"members": 3, "nested": {"list": [1, "two", null]}}
        });
        let o = CachedObject::new(serde_json::from_value(whole.clone()).unwrap());
        let text: serde_json::Value = serde_json::from_str(&o.json()).unwrap();
        assert_eq!(text, whole);
        assert_eq!(o.json_string(), *o.json());
        assert_eq!(serde_json::to_value(o.object().unwrap()).unwrap(), whole);
        assert_eq!(o.key().to_string(), "a/one");
        assert_eq!(
            (o.name(), o.namespace(), o.uid()),
            ("one", Some("a"), Some("u-1"))
        );
        assert_eq!((o.generation(), o.resource_version()), (Some(3), Some("7")));
        assert_eq!(o.type_ref(), TypeRef::new("mongodb.com/v1", "MongoDB"));
        assert_eq!((o.label("app"), o.label("other")), (Some("x"), None));
        assert_eq!(o.kept_annotation(TRACEPARENT), Some("00-t"));
        assert_eq!(o.kept_annotation("other"), None);
        assert_eq!(o.describe(), "MongoDB a/one");
        let t = o.trigger();
        assert_eq!(
            (t.kind.as_str(), t.uid.as_deref()),
            ("MongoDB", Some("u-1"))
        );
    }

    const LIMIT: ListLimit = ListLimit {
        items: 100,
        bytes: 1 << 20,
    };

    fn view() -> PluginView {
        scoped(ReadScope::ClusterWide)
    }

    fn scoped(scope: ReadScope) -> PluginView {
        let caches = Arc::new(Caches::default());
        let t = TypeRef::new("mongodb.com/v1", "MongoDB");
        let resource = |plural: &str, group: &str| ResourceKey {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
        };
        let cache = Arc::new(ResourceCache::new(
            resource("mongodb", "mongodb.com"),
            t.clone(),
            true,
        ));
        cache.insert(obj("a", "one", json!({"app": "x"})));
        cache.insert(obj("b", "two", json!({"app": "y"})));
        cache.mark_synced();
        caches.insert(cache);
        caches.insert(Arc::new(ResourceCache::new(
            resource("secrets", ""),
            TypeRef::new("v1", "Secret"),
            true,
        )));
        PluginView::new(
            caches,
            [t, TypeRef::new("v1", "ConfigMap")].into(),
            scope,
            1 << 20,
        )
    }

    #[test]
    fn get_and_list_respect_namespace_and_selector() {
        let v = view();
        let got = v
            .get("mongodb.com/v1", "MongoDB", Some("a"), "one")
            .unwrap()
            .unwrap();
        assert!(got.contains("\"one\""));
        assert_eq!(
            v.get("mongodb.com/v1", "MongoDB", Some("b"), "one")
                .unwrap(),
            None
        );
        assert_eq!(
            v.list("mongodb.com/v1", "MongoDB", None, None, LIMIT)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            v.list("mongodb.com/v1", "MongoDB", Some("b"), None, LIMIT)
                .unwrap()
                .len(),
            1
        );
        let l = v
            .list("mongodb.com/v1", "MongoDB", None, Some("app=x"), LIMIT)
            .unwrap();
        assert_eq!(l.len(), 1);
        assert!(l[0].contains("\"one\""));
    }

    #[test]
    fn reads_of_kinds_not_served_or_not_synced_say_so_and_are_transient() {
        let caches = Arc::new(Caches::default());
        let cm = TypeRef::new("v1", "ConfigMap");
        let filling = Arc::new(ResourceCache::new(
            ResourceKey {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
            },
            cm.clone(),
            true,
        ));
        caches.insert(filling.clone());
        let quota = TypeRef::new("v1", "ResourceQuota");
        let v = PluginView::new(caches, [cm].into(), ReadScope::ClusterWide, 1 << 20)
            .with_unserved(Arc::new([quota].into()));
        assert!(v.transient_refusal().is_none());
        assert!(matches!(
            v.get("v1", "Secret", Some("a"), "s"),
            Err(ReadError::NotAllowed(_))
        ));
        assert!(
            v.transient_refusal().is_none(),
            "never declared: not transient"
        );
        let e = v.get("v1", "ResourceQuota", Some("a"), "q").unwrap_err();
        assert!(
            e.to_string()
                .contains("declared by this plugin but not served"),
            "{e}"
        );
        assert_eq!(v.transient_refusal(), Some(e));
        let e = v.list("v1", "ConfigMap", None, None, LIMIT).unwrap_err();
        assert!(matches!(e, ReadError::NotSynced(_)), "{e}");
        filling.mark_synced();
        assert!(v.list("v1", "ConfigMap", None, None, LIMIT).is_ok());
    }

    #[test]
    fn reads_outside_the_plugin_scope_are_refused() {
        let v = view();
        assert!(matches!(
            v.get("v1", "Secret", Some("a"), "s"),
            Err(ReadError::NotAllowed(_))
        ));
        assert!(matches!(
            v.list("v1", "ConfigMap", None, None, LIMIT),
            Err(ReadError::NotServed(_))
        ));
        assert!(matches!(
            v.list("mongodb.com/v1", "MongoDB", None, Some("a in ("), LIMIT),
            Err(ReadError::Selector(_))
        ));
    }

    #[test]
    fn namespaced_reads_stay_in_the_watches_namespaces() {
        let v = scoped(ReadScope::Namespaces(["a".to_string()].into()));
        assert!(
            v.get("mongodb.com/v1", "MongoDB", Some("a"), "one")
                .unwrap()
                .is_some()
        );
        assert!(matches!(
            v.get("mongodb.com/v1", "MongoDB", Some("b"), "two"),
            Err(ReadError::OutsideScope { .. })
        ));
        assert!(matches!(
            v.list("mongodb.com/v1", "MongoDB", None, None, LIMIT),
            Err(ReadError::OutsideScope { .. })
        ));
        let only_a = v
            .list("mongodb.com/v1", "MongoDB", Some("a"), None, LIMIT)
            .unwrap();
        assert_eq!(only_a.len(), 1);
    }

    #[test]
    fn lists_are_capped_in_count_and_bytes() {
        let v = view();
        let one = ListLimit {
            items: 1,
            bytes: 1 << 20,
        };
        let err = v
            .list("mongodb.com/v1", "MongoDB", None, None, one)
            .unwrap_err();
        assert!(err.to_string().contains("more than 1 objects"), "{err}");
        let small = ListLimit {
            items: 100,
            bytes: 50,
        };
        let err = v
            .list("mongodb.com/v1", "MongoDB", None, None, small)
            .unwrap_err();
        assert!(err.to_string().contains("more than 50 bytes"), "{err}");
        let exact = ListLimit {
            items: 2,
            bytes: 1 << 20,
        };
        assert_eq!(
            v.list("mongodb.com/v1", "MongoDB", None, None, exact)
                .unwrap()
                .len(),
            2
        );
    }
}
