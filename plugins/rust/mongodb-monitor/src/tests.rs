use super::*;
use kubewasm_sdk::{EventType, Verb, run};

fn db() -> Value {
    json!({
        "apiVersion": "mongodb.com/v1",
        "kind": "MongoDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-9"},
        "spec": {"type": "ReplicaSet", "members": 3, "version": "7.0.12"},
    })
}

#[test]
fn added_creates_an_owned_service_monitor() {
    let settings: Settings = run::settings(Some(
        r#"{"labels": {"release": "prometheus"}, "interval": "15s"}"#,
    ))
    .unwrap();
    let out = handle_event(&Event::added(WATCH_ID, &db()), &settings).unwrap();
    assert_eq!(out.len(), 1);
    let c = out[0].as_create().unwrap();
    assert!(c.owned_by_trigger && !c.force);
    assert_eq!(
        c.object,
        json!({
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {
                "name": "orders-monitor",
                "namespace": "shop",
                "labels": {"app": "orders", "app.kubernetes.io/managed-by": "kubewasm", "release": "prometheus"},
            },
            "spec": {
                "selector": {"matchLabels": {"app": "orders"}},
                "endpoints": [{"port": "metrics", "interval": "15s"}],
            },
        })
    );
}

#[test]
fn modified_and_resync_converge_to_the_same_object() {
    let mut newer = db();
    newer["spec"]["members"] = json!(5);
    let s = Settings::default();
    let a = handle_event(&Event::modified(WATCH_ID, &db(), &newer), &s).unwrap();
    let b = handle_event(&Event::resync(WATCH_ID, &newer), &s).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        a[0].as_create().unwrap().object["spec"]["endpoints"][0]["interval"],
        "30s"
    );
}

/// What the host delivers under the declared projection: identity and FIELDS only.
fn projected(db: &Value) -> Value {
    let mut meta = serde_json::Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "deletionTimestamp",
    ] {
        if let Some(v) = db["metadata"].get(key) {
            meta.insert(key.to_owned(), v.clone());
        }
    }
    json!({"apiVersion": db["apiVersion"], "kind": db["kind"], "metadata": meta})
}

#[test]
fn the_projection_is_enough() {
    let s = Settings::default();
    let whole = handle_event(&Event::added(WATCH_ID, &db()), &s).unwrap();
    let lean = handle_event(&Event::added(WATCH_ID, &projected(&db())), &s).unwrap();
    assert_eq!(whole, lean);
    let mut going = db();
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let out = handle_event(&Event::resync(WATCH_ID, &projected(&going)), &s).unwrap();
    assert!(out.is_empty());
}

#[test]
fn deleted_or_deleting_needs_nothing() {
    let s = Settings::default();
    assert!(
        handle_event(&Event::deleted(WATCH_ID, &db()), &s)
            .unwrap()
            .is_empty()
    );
    let mut going = db();
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(
        handle_event(&Event::modified(WATCH_ID, &db(), &going), &s)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn malformed_objects_are_permanent_errors() {
    let s = Settings::default();
    for bad in [
        Event::new(EventType::Added, WATCH_ID, "not json"),
        Event::added(
            WATCH_ID,
            &json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB", "metadata": {"namespace": "x"}}),
        ),
        Event::added(
            WATCH_ID,
            &json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB", "metadata": {"name": "x"}}),
        ),
        Event::added(
            WATCH_ID,
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "y"}}),
        ),
    ] {
        assert!(!handle_event(&bad, &s).unwrap_err().retry);
    }
}

#[test]
fn settings_are_validated_in_describe() {
    assert!(run::describe::<MongoDbMonitor>(None).is_ok());
    assert!(run::describe::<MongoDbMonitor>(Some(r#"{"interval": "1m30s"}"#)).is_ok());
    let err = run::describe::<MongoDbMonitor>(Some(r#"{"interval": "soon"}"#)).unwrap_err();
    assert!(err.contains("Prometheus duration"), "{err}");
    assert!(run::describe::<MongoDbMonitor>(Some(r#"{"intervall": "30s"}"#)).is_err());
    for ok in ["0", "30s", "1m30s", "1h", "2d12h", "500ms", "1s500ms"] {
        assert!(is_prometheus_duration(ok), "{ok}");
    }
    for bad in ["", "30", "s", "30x", "30s1m", "1.5s", "-1s"] {
        assert!(!is_prometheus_duration(bad), "{bad}");
    }
}

#[test]
fn grants_cover_exactly_what_it_writes() {
    let m = run::describe::<MongoDbMonitor>(None).unwrap();
    assert_eq!(m.name, NAME);
    assert_eq!(m.grants.len(), 1);
    assert_eq!(m.grants[0].verbs, vec![Verb::Create]);
    for intent in handle_event(&Event::added(WATCH_ID, &db()), &Settings::default()).unwrap() {
        m.permits(&intent).unwrap();
    }
    assert_eq!(m.watches[0].fields, ["metadata.deletionTimestamp"]);
    let scoped = run::describe::<MongoDbMonitor>(Some(r#"{"namespace": "other"}"#)).unwrap();
    assert_eq!(scoped.watches[0].namespace.as_deref(), Some("other"));
    let out = handle_event(&Event::added(WATCH_ID, &db()), &Settings::default()).unwrap();
    assert!(scoped.permits(&out[0]).is_err());
}
