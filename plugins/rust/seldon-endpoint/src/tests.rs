use super::*;
use kubewasm_sdk::{EventType, PatchStrategy, Verb, run};
use serde_json::Value;

fn sd(state: Option<&str>) -> Value {
    let mut v = json!({
        "apiVersion": "machinelearning.seldon.io/v1",
        "kind": "SeldonDeployment",
        "metadata": {"name": "iris", "namespace": "models", "uid": "u-3"},
        "spec": {"predictors": [{"name": "main", "graph": {"name": "classifier"}, "replicas": 1}]},
    });
    if let Some(s) = state {
        v["status"] = json!({"state": s});
    }
    v
}

#[test]
fn modified_into_available_creates_ingress_and_annotation() {
    let ev = Event::modified(WATCH_ID, &sd(Some("Creating")), &sd(Some("Available")));
    let out = handle_event(&ev, &Settings::default()).unwrap();
    assert_eq!(out.len(), 2);

    let ing = out[0].as_create().unwrap();
    assert!(ing.owned_by_trigger && !ing.force);
    assert_eq!(
        ing.object,
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "iris", "namespace": "models",
                         "labels": {"app.kubernetes.io/managed-by": "kubewasm"}},
            "spec": {"rules": [{"host": "iris.models.example.com", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "iris-main", "port": {"number": 8000}}},
            }]}}]},
        })
    );

    let patch = out[1].as_patch().unwrap();
    assert_eq!(patch.strategy, PatchStrategy::Apply);
    assert!(!patch.status && !patch.force);
    assert_eq!(
        patch.target,
        ObjectRef::namespaced(
            "machinelearning.seldon.io/v1",
            "SeldonDeployment",
            "models",
            "iris"
        )
    );
    assert_eq!(
        patch.body["metadata"]["annotations"][URL_ANNOTATION],
        "http://iris.models.example.com/"
    );
}

#[test]
fn transition_rule() {
    let s = Settings::default();
    let avail = sd(Some("Available"));
    let cases: Vec<(&str, Event, usize)> = vec![
        ("added available", Event::added(WATCH_ID, &avail), 2),
        ("resync available", Event::resync(WATCH_ID, &avail), 2),
        (
            "added creating",
            Event::added(WATCH_ID, &sd(Some("Creating"))),
            0,
        ),
        ("added without status", Event::added(WATCH_ID, &sd(None)), 0),
        (
            "no status -> available",
            Event::modified(WATCH_ID, &sd(None), &avail),
            2,
        ),
        (
            "failed -> available",
            Event::modified(WATCH_ID, &sd(Some("Failed")), &avail),
            2,
        ),
        (
            "available -> available",
            Event::modified(WATCH_ID, &avail, &avail),
            0,
        ),
        (
            "available -> creating",
            Event::modified(WATCH_ID, &avail, &sd(Some("Creating"))),
            0,
        ),
        (
            "creating -> creating",
            Event::modified(WATCH_ID, &sd(Some("Creating")), &sd(Some("Creating"))),
            0,
        ),
        (
            "modified without old",
            Event::new(EventType::Modified, WATCH_ID, avail.to_string()),
            2,
        ),
        ("deleted available", Event::deleted(WATCH_ID, &avail), 0),
    ];
    for (what, ev, n) in cases {
        assert_eq!(handle_event(&ev, &s).unwrap().len(), n, "{what}");
    }
}

#[test]
fn later_unrelated_updates_write_nothing() {
    let s = Settings::default();
    let before = sd(Some("Available"));
    let mut after = before.clone();
    after["metadata"]["annotations"] = json!({URL_ANNOTATION: "http://iris.models.example.com/"});
    after["metadata"]["labels"] = json!({"team": "ml"});
    after["spec"]["predictors"][0]["replicas"] = json!(3);
    assert!(
        handle_event(&Event::modified(WATCH_ID, &before, &after), &s)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn settings_shape_the_ingress() {
    let s: Settings = run::settings(Some(
        r#"{"domain": "ml.corp.dev", "ingressClassName": "nginx", "servicePort": 9000}"#,
    ))
    .unwrap();
    let mut obj = sd(Some("Available"));
    obj["spec"]["predictors"] = json!([{"graph": {}}]);
    let out = handle_event(&Event::added(WATCH_ID, &obj), &s).unwrap();
    let spec = &out[0].as_create().unwrap().object["spec"];
    assert_eq!(spec["ingressClassName"], "nginx");
    assert_eq!(spec["rules"][0]["host"], "iris.models.ml.corp.dev");
    assert_eq!(
        spec["rules"][0]["http"]["paths"][0]["backend"]["service"],
        json!({"name": "iris-default", "port": {"number": 9000}})
    );
    assert_eq!(
        out[1].as_patch().unwrap().body["metadata"]["annotations"][URL_ANNOTATION],
        "http://iris.models.ml.corp.dev/"
    );
    assert!(run::describe::<SeldonEndpoint>(Some(r#"{"domain": ""}"#)).is_err());
    assert!(run::describe::<SeldonEndpoint>(Some(r#"{"domian": "x"}"#)).is_err());
}

#[test]
fn being_deleted_or_malformed() {
    let s = Settings::default();
    let mut going = sd(Some("Available"));
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(
        handle_event(&Event::added(WATCH_ID, &going), &s)
            .unwrap()
            .is_empty()
    );
    for bad in [
        Event::new(EventType::Added, WATCH_ID, "[]"),
        Event::added(WATCH_ID, &json!({"kind": "SeldonDeployment"})),
        Event::added(WATCH_ID, &{
            let mut v = sd(Some("Available"));
            v["metadata"].as_object_mut().unwrap().remove("namespace");
            v
        }),
        Event::new(
            EventType::Modified,
            WATCH_ID,
            sd(Some("Available")).to_string(),
        )
        .with_old_object("{bad"),
    ] {
        assert!(!handle_event(&bad, &s).unwrap_err().retry);
    }
}

#[test]
fn grants_cover_exactly_what_it_writes() {
    let m = run::describe::<SeldonEndpoint>(None).unwrap();
    assert_eq!(m.name, NAME);
    let verbs: Vec<Vec<Verb>> = m.grants.iter().map(|g| g.verbs.clone()).collect();
    assert_eq!(verbs, vec![vec![Verb::Create], vec![Verb::Patch]]);
    let out = handle_event(
        &Event::added(WATCH_ID, &sd(Some("Available"))),
        &Settings::default(),
    )
    .unwrap();
    for intent in &out {
        m.permits(intent).unwrap();
    }
    let scoped = run::describe::<SeldonEndpoint>(Some(r#"{"namespace": "elsewhere"}"#)).unwrap();
    assert_eq!(scoped.watches[0].namespace.as_deref(), Some("elsewhere"));
    assert!(out.iter().all(|i| scoped.permits(i).is_err()));
}
