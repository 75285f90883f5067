//! The watch stages on streams of watcher events made up here: no cluster.

use std::time::Duration;

use futures::stream;
use serde_json::json;

use super::*;
use crate::watch::backoff::Class;
use crate::watch::cache::TRACEPARENT;

fn res() -> Arc<KindInfo> {
    Arc::new(KindInfo {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        namespaced: true,
        has_status: false,
        guessed: false,
    })
}

/// A ConfigMap as a list response has it: no apiVersion or kind, with managedFields.
fn raw(ns: &str, name: &str, rv: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "resourceVersion": rv,
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}]}
    }))
    .expect("object")
}

fn cached(ns: &str, name: &str, rv: &str) -> Arc<CachedObject> {
    kept(raw(ns, name, rv), &res())
}

fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey {
        namespace: Some(ns.into()),
        name: name.into(),
    }
}

fn scope() -> Scope {
    None
}

/// The stages before the cache, on `events` of the cluster-wide scope.
async fn steps(
    events: Vec<Result<Event<DynamicObject>, Failed>>,
    keeps: impl Fn(&ObjectKey) -> bool,
) -> Vec<Step> {
    let source = stream::iter(events.into_iter().map(|e| (scope(), e)));
    relists(shard_filter(strip(source, res(), Arc::default()), keeps))
        .map(|(_, step)| step)
        .collect()
        .await
}

fn names(objects: &Objects) -> Vec<String> {
    let mut n: Vec<String> = objects.iter().map(|o| o.name().to_string()).collect();
    n.sort();
    n
}

/// Each change as `type name`, sorted (a relist's order is a map's).
fn said(changes: &[Change]) -> Vec<String> {
    let mut s: Vec<String> = changes
        .iter()
        .map(|c| format!("{} {}", c.event_type, c.object.key().name))
        .collect();
    s.sort();
    s
}

fn new_cache() -> Arc<ResourceCache> {
    let r = res();
    Arc::new(ResourceCache::new(r.key(), r.type_ref(), true))
}

#[tokio::test]
async fn strip_keeps_no_managed_fields_and_fills_in_the_kind() {
    let steps = steps(vec![Ok(Event::Apply(raw("a", "one", "1")))], |_| true).await;
    let [Step::Applied(o)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    let object = o.object().expect("the cached object parses");
    assert!(object.metadata.managed_fields.is_none());
    let types = object.types.as_ref().expect("types");
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("v1", "ConfigMap")
    );
}

#[tokio::test]
async fn a_list_becomes_one_step_with_its_objects() {
    let steps = steps(
        vec![
            // Listed outside a list: dropped.
            Ok(Event::InitApply(raw("a", "stray", "1"))),
            Ok(Event::Init),
            Ok(Event::InitApply(raw("a", "one", "1"))),
            Ok(Event::InitApply(raw("a", "two", "1"))),
            Ok(Event::InitDone),
            Ok(Event::Delete(raw("a", "one", "2"))),
        ],
        |_| true,
    )
    .await;
    let [Step::Relisted(objects), Step::Deleted(gone)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert_eq!(names(objects), ["one", "two"]);
    assert_eq!(gone.key(), key("a", "one"));
}

#[tokio::test]
async fn other_shards_objects_are_not_listed_and_only_leave_the_cache() {
    let mine = |k: &ObjectKey| k.name.starts_with("mine");
    let steps = steps(
        vec![
            Ok(Event::Init),
            Ok(Event::InitApply(raw("a", "mine-1", "1"))),
            Ok(Event::InitApply(raw("a", "theirs-1", "1"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(raw("a", "theirs-2", "1"))),
            Ok(Event::Delete(raw("a", "theirs-1", "2"))),
        ],
        mine,
    )
    .await;
    let [
        Step::Relisted(objects),
        Step::Elsewhere(elsewhere),
        Step::Deleted(tombstone),
    ] = steps.as_slice()
    else {
        panic!("{steps:?}")
    };
    assert_eq!(names(objects), ["mine-1"]);
    assert_eq!(*elsewhere, key("a", "theirs-2"));
    // Deletions pass: a follower keeps them for a shard it may gain.
    assert_eq!(tombstone.key(), key("a", "theirs-1"));
}

#[tokio::test]
async fn failures_pass_and_do_not_count_as_the_watch_working() {
    let failed = Failed {
        class: Class::Desync,
        message: "410 Gone".into(),
        delay: Duration::ZERO,
        refused: false,
    };
    let steps = steps(vec![Err(failed), Ok(Event::Init)], |_| true).await;
    let [step @ Step::Failed(_)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert!(!step.works());
    assert!(Step::Relisted(Objects::new()).works());
}

#[test]
fn a_relist_is_diffed_against_what_was_cached() {
    let before: Objects = [
        cached("a", "same", "1"),
        cached("a", "changed", "1"),
        cached("a", "gone", "1"),
        cached("a", "theirs", "1"),
    ]
    .into_iter()
    .collect();
    let fresh: Objects = [
        cached("a", "same", "1"),
        cached("a", "changed", "2"),
        cached("a", "new", "1"),
        cached("a", "gained", "1"),
    ]
    .into_iter()
    .collect();
    let changes = relist_diff(
        before,
        &fresh,
        |k| k.name == "gained",
        |k| k.name != "theirs",
    );
    // Nothing for what did not change, nor for a deletion of another replica's object.
    assert_eq!(
        said(&changes),
        [
            "added new",
            "deleted gone",
            "modified changed",
            "resync gained"
        ]
    );
    let modified = changes
        .iter()
        .find(|c| c.event_type == EventType::Modified)
        .expect("modified");
    assert_eq!(
        modified.old.as_ref().and_then(|o| o.resource_version()),
        Some("1")
    );
}

#[tokio::test]
async fn the_reflector_syncs_on_the_first_list_and_diffs_the_next() {
    let cache = new_cache();
    let mut reflector = Reflector::new(cache.clone(), None, vec![scope()]);
    let first = reflector.apply(
        &scope(),
        Step::Relisted([cached("a", "one", "1")].into_iter().collect()),
    );
    assert_eq!(said(&first.0), ["added one"]);
    assert_eq!(first.1, Some(Listing::First { all: true }));
    // A watch event of the same version changes nothing; a newer one is a modification.
    assert!(
        reflector
            .apply(&scope(), Step::Applied(cached("a", "one", "1")))
            .0
            .is_empty()
    );
    let (changes, _) = reflector.apply(&scope(), Step::Applied(cached("a", "one", "2")));
    assert_eq!(said(&changes), ["modified one"]);
    // After a 410: the relist brings what changed during the break.
    let steps = steps(
        vec![
            Ok(Event::Init),
            Ok(Event::InitApply(raw("a", "two", "1"))),
            Ok(Event::InitDone),
        ],
        |_| true,
    )
    .await;
    let mut all = Vec::new();
    for step in steps {
        let (changes, listing) = reflector.apply(&scope(), step);
        assert_eq!(listing, Some(Listing::Relist));
        all.extend(changes);
    }
    assert_eq!(said(&all), ["added two", "deleted one"]);
    assert_eq!(cache.len(), 1);
    // And each change becomes the router's signal, of this resource.
    let signals: Vec<WatchSignal> = events(res().key(), stream::iter(all)).collect().await;
    assert!(
        signals
            .iter()
            .all(|s| matches!(s, WatchSignal::Event(e) if e.resource == res().key()))
    );
    assert_eq!(signals.len(), 2);
}

#[tokio::test]
async fn a_resource_watched_in_two_namespaces_syncs_once_both_are_listed() {
    let (a, b): (Scope, Scope) = (Some("a".into()), Some("b".into()));
    let mut reflector = Reflector::new(new_cache(), None, vec![a.clone(), b.clone()]);
    let (_, listing) = reflector.apply(&a, Step::Relisted(Objects::new()));
    assert_eq!(listing, Some(Listing::First { all: false }));
    let (_, listing) = reflector.apply(&b, Step::Relisted(Objects::new()));
    assert_eq!(listing, Some(Listing::First { all: true }));
    // A deletion of what the cache did not hold is still said (a tombstone).
    let (changes, _) = reflector.apply(&a, Step::Deleted(cached("a", "x", "1")));
    assert_eq!(said(&changes), ["deleted x"]);
}

/// The cache holds only the union of its plugins' projections (and the identity and the
/// labels the host reads), never the fields no plugin declared; a plugin then reads its
/// own projection of what the cache holds.
#[tokio::test]
async fn the_cache_holds_only_the_union_of_the_declared_fields() {
    use crate::watch::manager::cache_projection;
    use kubewasm_core::projection::Projection;
    let a = Projection::parse(&["data.a"]).unwrap();
    let b = Projection::parse(&["spec.containers.image"]).unwrap();
    let union = Arc::new(cache_projection(&a.union(&b)));
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "ns", "name": "x", "resourceVersion": "1", "uid": "u",
            "labels": {"app": "web"}, "generation": 2,
            "annotations": {"big": "drop me", "tracing.k8s.io/traceparent": "00-t"},
            "managedFields": [{"manager": "kubectl"}]},
        "data": {"a": "1", "secret": "drop me"},
        "spec": {"containers": [{"image": "i", "command": ["drop", "me"]}]}
    }))
    .unwrap();
    let source = stream::iter([(scope(), Ok(Event::Apply(object)))]);
    let steps: Vec<Step> = strip(source, res(), union).map(|(_, s)| s).collect().await;
    let [Step::Applied(o)] = steps.as_slice() else {
        panic!("{steps:?}");
    };
    let held: serde_json::Value = serde_json::from_str(&o.json_string()).unwrap();
    assert_eq!(
        held,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "ns", "name": "x", "resourceVersion": "1", "uid": "u",
                "labels": {"app": "web"}},
            "data": {"a": "1"},
            "spec": {"containers": [{"image": "i"}]}})
    );
    // What the host routes on is read from what the cache holds, as a plugin would.
    assert_eq!(
        (o.label("app"), o.uid(), o.resource_version()),
        (Some("web"), Some("u"), Some("1"))
    );
    assert_eq!(
        (o.generation(), o.kept_annotation(TRACEPARENT)),
        (None, None)
    );
    assert_eq!(o.type_ref(), res().type_ref());
    let own: serde_json::Value = serde_json::from_str(&o.json_for(&a)).unwrap();
    assert_eq!(
        own,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "ns", "name": "x", "resourceVersion": "1", "uid": "u"},
            "data": {"a": "1"}})
    );
}
