//! Cached objects by key, each keyed by its own name and namespace: a map from
//! [`ObjectKey`] would keep a second copy of both per object (two allocations, and a
//! bucket seven times the size of a pointer).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{CachedObject, ObjectKey};

/// What an object is found by: its namespace and name.
trait Keyed {
    fn parts(&self) -> (Option<&str>, &str);
}

impl Keyed for ObjectKey {
    fn parts(&self) -> (Option<&str>, &str) {
        (self.namespace.as_deref(), &self.name)
    }
}

impl Keyed for CachedObject {
    fn parts(&self) -> (Option<&str>, &str) {
        (self.namespace(), self.name())
    }
}

impl Hash for dyn Keyed + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn Keyed + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Keyed + '_ {}

/// An object in the set, hashed and compared by its key ([`Keyed`]), so that the set is
/// searched by an [`ObjectKey`] or another object of the same key.
#[derive(Debug, Clone)]
struct ByKey(Arc<CachedObject>);

impl<'a> Borrow<dyn Keyed + 'a> for ByKey {
    fn borrow(&self) -> &(dyn Keyed + 'a) {
        &*self.0
    }
}

impl Hash for ByKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Borrow::<dyn Keyed>::borrow(self).hash(state);
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.parts() == other.0.parts()
    }
}

impl Eq for ByKey {}

/// Objects, at most one per key.
#[derive(Debug, Clone, Default)]
pub(crate) struct Objects(HashSet<ByKey>);

impl Objects {
    /// No objects.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Insert or replace the object of `object`'s key; the one replaced.
    pub(crate) fn insert(&mut self, object: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        self.0.replace(ByKey(object)).map(|o| o.0)
    }

    /// The object of `key`.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Arc<CachedObject>> {
        self.0.get(key as &dyn Keyed).map(|o| &o.0)
    }

    /// The object of the same key as `object`.
    pub(crate) fn get_like(&self, object: &CachedObject) -> Option<&Arc<CachedObject>> {
        self.0.get(object as &dyn Keyed).map(|o| &o.0)
    }

    /// Whether it holds an object of the same key as `object`.
    pub(crate) fn contains_like(&self, object: &CachedObject) -> bool {
        self.0.contains(object as &dyn Keyed)
    }

    /// Remove the object of `key`; the one removed.
    pub(crate) fn remove(&mut self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.0.take(key as &dyn Keyed).map(|o| o.0)
    }

    /// Keep only the objects `keep` keeps.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&CachedObject) -> bool) {
        self.0.retain(|o| keep(&o.0));
    }

    /// Take out the objects `take` takes.
    pub(crate) fn take_if(&mut self, mut take: impl FnMut(&CachedObject) -> bool) -> Objects {
        Objects(self.0.extract_if(|o| take(&o.0)).collect())
    }

    /// Every object, in no order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<CachedObject>> {
        self.0.iter().map(|o| &o.0)
    }

    /// How many objects it holds.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl Extend<Arc<CachedObject>> for Objects {
    fn extend<I: IntoIterator<Item = Arc<CachedObject>>>(&mut self, objects: I) {
        for o in objects {
            self.insert(o);
        }
    }
}

impl FromIterator<Arc<CachedObject>> for Objects {
    fn from_iter<I: IntoIterator<Item = Arc<CachedObject>>>(objects: I) -> Self {
        let mut set = Objects::new();
        set.extend(objects);
        set
    }
}

impl IntoIterator for Objects {
    type Item = Arc<CachedObject>;
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        IntoIter(self.0.into_iter())
    }
}

/// [`Objects`]' objects, taken out.
pub(crate) struct IntoIter(std::collections::hash_set::IntoIter<ByKey>);

impl Iterator for IntoIter {
    type Item = Arc<CachedObject>;

    fn next(&mut self) -> Option<Arc<CachedObject>> {
        self.0.next().map(|o| o.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(ns: Option<&str>, name: &str, rv: &str) -> Arc<CachedObject> {
        CachedObject::new(
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": ns, "name": name, "resourceVersion": rv}
            }))
            .unwrap(),
        )
    }

    fn key(ns: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: ns.map(str::to_string),
            name: name.into(),
        }
    }

    #[test]
    fn objects_are_found_by_key_and_replaced_by_an_object_of_the_same_key() {
        let mut set = Objects::new();
        assert!(set.insert(object(Some("a"), "x", "1")).is_none());
        assert!(set.insert(object(Some("b"), "x", "1")).is_none());
        // Cluster-scoped "x" is not namespace "" nor any namespace's "x".
        assert!(set.insert(object(None, "x", "1")).is_none());
        assert!(set.insert(object(Some(""), "x", "1")).is_none());
        let old = set.insert(object(Some("a"), "x", "2"));
        assert_eq!(
            old.and_then(|o| o.resource_version().map(str::to_string))
                .as_deref(),
            Some("1")
        );
        assert_eq!(set.len(), 4);
        let got = set
            .get(&key(Some("a"), "x"))
            .and_then(|o| o.resource_version());
        assert_eq!(got, Some("2"));
        assert!(set.get(&key(Some("a"), "y")).is_none());
        assert!(
            set.get(&key(None, "x"))
                .is_some_and(|o| o.namespace().is_none())
        );
        assert!(set.contains_like(&object(Some("b"), "x", "9")));
        assert!(set.remove(&key(Some("b"), "x")).is_some());
        assert!(set.remove(&key(Some("b"), "x")).is_none());
        let taken = set.take_if(|o| o.namespace() == Some("a"));
        assert_eq!((taken.len(), set.len()), (1, 2));
        set.retain(|o| o.namespace().is_some());
        assert_eq!(
            set.iter().map(|o| o.key()).collect::<Vec<_>>(),
            [key(Some(""), "x")]
        );
        let all: Objects = taken.into_iter().chain(set).collect();
        assert_eq!(all.len(), 2);
    }
}
