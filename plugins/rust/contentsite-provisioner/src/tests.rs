use super::*;
use kubewasm_sdk::{EventType, PatchStrategy, Verb, run};

fn site() -> Value {
    json!({
        "apiVersion": "sites.kubewasm.dev/v1alpha1",
        "kind": "ContentSite",
        "metadata": {"name": "blog", "namespace": "web", "uid": "u-1", "generation": 2},
        "spec": {"title": "Blog", "database": {"members": 1}},
    })
}

fn settings() -> Settings {
    Settings::default()
}

#[test]
fn added_creates_database_service_and_status() {
    let out = handle_event(&Event::added(WATCH_ID, &site()), &settings()).unwrap();
    assert_eq!(out.len(), 3);

    let db = out[0].as_create().unwrap();
    assert!(db.owned_by_trigger && !db.force);
    assert_eq!(db.object["kind"], "MongoDB");
    assert_eq!(db.object["apiVersion"], "mongodb.com/v1");
    assert_eq!(db.object["metadata"]["name"], "blog-db");
    assert_eq!(db.object["metadata"]["namespace"], "web");
    assert_eq!(
        db.object["spec"],
        json!({"type": "ReplicaSet", "members": 1, "version": "7.0.12", "credentials": "mongodb-credentials", "opsManager": {"configMapRef": {"name": "mongodb-project"}}})
    );

    let svc = out[1].as_create().unwrap();
    assert!(svc.owned_by_trigger);
    assert_eq!(svc.object["apiVersion"], "v1");
    assert_eq!(svc.object["kind"], "Service");
    assert_eq!(svc.object["metadata"]["name"], "blog");
    assert_eq!(
        svc.object["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kubewasm"
    );
    assert_eq!(svc.object["spec"]["selector"], json!({"app": "blog"}));
    assert_eq!(
        svc.object["spec"]["ports"],
        json!([{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}])
    );

    let status = out[2].as_patch().unwrap();
    assert!(status.status && !status.force);
    assert_eq!(status.strategy, PatchStrategy::Apply);
    assert_eq!(
        status.target,
        ObjectRef::namespaced(SITE_API_VERSION, SITE_KIND, "web", "blog")
    );
    assert_eq!(status.body["status"]["databaseRef"], "blog-db");
    assert_eq!(status.body["status"]["observedGeneration"], 2);
    assert_eq!(
        status.body["status"]["conditions"][0]["type"],
        "Provisioned"
    );
    assert_eq!(status.body["status"]["conditions"][0]["status"], "True");
}

#[test]
fn modified_and_resync_converge_the_same_way() {
    let mut new = site();
    new["spec"]["database"] = json!({"members": 5, "version": "8.0.0", "type": "Standalone"});
    let out = handle_event(&Event::modified(WATCH_ID, &site(), &new), &settings()).unwrap();
    assert_eq!(
        out[0].as_create().unwrap().object["spec"],
        json!({"type": "Standalone", "members": 5, "version": "8.0.0", "credentials": "mongodb-credentials", "opsManager": {"configMapRef": {"name": "mongodb-project"}}})
    );
    let resync = handle_event(&Event::resync(WATCH_ID, &new), &settings()).unwrap();
    assert_eq!(resync.len(), 3);
    assert_eq!(resync[0], out[0]);
    assert_eq!(resync[1], out[1]);
}

#[test]
fn status_condition_time_is_stable_once_set() {
    let mut s = site();
    s["status"] = json!({"conditions": [
        {"type": "Provisioned", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]});
    let out = handle_event(&Event::resync(WATCH_ID, &s), &settings()).unwrap();
    let cond = &out[2].as_patch().unwrap().body["status"]["conditions"][0];
    assert_eq!(cond["lastTransitionTime"], "2026-01-01T00:00:00Z");
}

#[test]
fn settings_provide_defaults() {
    let s: Settings = run::settings(Some(
        r#"{"database": {"members": 7, "version": "6.0.5", "credentials": "om-key", "projectConfigMap": "shop", "manager": "cloudManager"}, "service": {"port": 8080, "targetPort": 3000}}"#,
    ))
    .unwrap();
    let mut site = site();
    site["spec"] = json!({"title": "no database section"});
    let out = provision(&site, &s).unwrap();
    assert_eq!(
        out[0].as_create().unwrap().object["spec"],
        json!({"type": "ReplicaSet", "members": 7, "version": "6.0.5", "credentials": "om-key",
               "cloudManager": {"configMapRef": {"name": "shop"}}})
    );
    assert_eq!(
        out[1].as_create().unwrap().object["spec"]["ports"][0]["targetPort"],
        3000
    );
    assert!(run::settings::<Settings>(Some(r#"{"datbase": {}}"#)).is_err());
    assert!(
        run::settings::<Settings>(Some(r#"{"database": {"manager": "atlas"}}"#)).is_err(),
        "only opsManager and cloudManager hold projects"
    );
}

#[test]
fn deleted_and_deleting_sites_need_no_intents() {
    assert!(
        handle_event(&Event::deleted(WATCH_ID, &site()), &settings())
            .unwrap()
            .is_empty()
    );
    let mut s = site();
    s["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(
        handle_event(&Event::modified(WATCH_ID, &site(), &s), &settings())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn malformed_sites_are_permanent_errors() {
    for bad in [
        Event::new(EventType::Added, WATCH_ID, "{oops"),
        Event::added(
            WATCH_ID,
            &json!({"apiVersion": SITE_API_VERSION, "kind": SITE_KIND, "metadata": {"namespace": "web"}}),
        ),
        Event::added(
            WATCH_ID,
            &json!({"apiVersion": SITE_API_VERSION, "kind": SITE_KIND, "metadata": {"name": "x"}}),
        ),
        Event::added(
            WATCH_ID,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}}),
        ),
        Event::added(WATCH_ID, &{
            let mut s = site();
            s["spec"]["database"]["members"] = json!("three");
            s
        }),
        Event::added(WATCH_ID, &{
            let mut s = site();
            s["spec"]["database"]["members"] = json!(0);
            s
        }),
    ] {
        let err = handle_event(&bad, &settings()).unwrap_err();
        assert!(!err.retry, "{err}");
    }
}

#[test]
fn grants_cover_exactly_what_it_writes() {
    for settings in [
        Settings::default(),
        run::settings(Some(r#"{"namespace": "web"}"#)).unwrap(),
    ] {
        let m = run::describe::<ContentSiteProvisioner>(None).unwrap();
        let m = if settings.namespace.is_some() {
            manifest(&settings)
        } else {
            m
        };
        assert_eq!(m.name, NAME);
        for intent in handle_event(&Event::added(WATCH_ID, &site()), &settings).unwrap() {
            m.permits(&intent).unwrap();
        }
        let verbs: Vec<Vec<Verb>> = m.grants.iter().map(|g| g.verbs.clone()).collect();
        assert_eq!(
            verbs,
            vec![
                vec![Verb::Create],
                vec![Verb::Create],
                vec![Verb::PatchStatus]
            ]
        );
    }
    let scoped = manifest(&run::settings(Some(r#"{"namespace": "other"}"#)).unwrap());
    assert_eq!(scoped.watches[0].namespace.as_deref(), Some("other"));
    let out = handle_event(&Event::added(WATCH_ID, &site()), &settings()).unwrap();
    assert!(scoped.permits(&out[0]).is_err());
}
