//! Server-side apply on the embedded API server: create, pruning of dropped fields,
//! conflicts and force, managedFields content, no-op applies, Update ownership,
//! associative lists and the status subresource.

mod support;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

fn apply_body(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "labels": {"app": "w"}}, "spec": spec})
}

fn entries(o: &DynamicObject) -> Vec<Value> {
    o.managed_fields()
        .iter()
        .map(|m| serde_json::to_value(m).expect("json"))
        .collect()
}

fn entry(o: &DynamicObject, manager: &str, op: &str) -> Option<Value> {
    entries(o)
        .into_iter()
        .find(|e| e["manager"] == manager && e["operation"] == op)
}

#[tokio::test]
async fn apply_creates_records_managed_fields_and_prunes_dropped_fields() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let pp = PatchParams::apply("m1");
    let created = widgets
        .patch(
            "w",
            &pp,
            &Patch::Apply(apply_body(
                "w",
                json!({"a": "1", "b": "2", "tags": ["x", "y"]}),
            )),
        )
        .await
        .expect("apply creates");
    assert!(created.uid().is_some());
    assert_eq!(created.metadata.generation, Some(1));
    let e = entry(&created, "m1", "Apply").expect("m1 entry");
    assert_eq!(e["apiVersion"], "example.com/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].is_string());
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:a": {}, "f:b": {}, "f:tags": {"v:\"x\"": {}, "v:\"y\"": {}}}
        })
    );
    assert_eq!(entries(&created).len(), 1);

    // Same manager drops b and a tag: they are removed from the object.
    let updated = widgets
        .patch(
            "w",
            &pp,
            &Patch::Apply(apply_body("w", json!({"a": "1", "tags": ["x"]}))),
        )
        .await
        .expect("re-apply");
    assert_eq!(updated.data["spec"], json!({"a": "1", "tags": ["x"]}));
    assert_eq!(updated.metadata.generation, Some(2));
    assert_eq!(
        entry(&updated, "m1", "Apply").expect("entry")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:a": {}, "f:tags": {"v:\"x\"": {}}}})
    );
}

#[tokio::test]
async fn apply_conflicts_name_the_other_manager_and_force_takes_ownership() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    widgets
        .patch(
            "w",
            &PatchParams::apply("m1"),
            &Patch::Apply(apply_body("w", json!({"a": "1", "b": "2"}))),
        )
        .await
        .expect("m1");
    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::apply("m2"),
                &Patch::Apply(apply_body("w", json!({"a": "other"}))),
            )
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"m1\": .spec.a"
    );
    let causes = e
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".spec.a");
    assert_eq!(causes[0].message, "conflict with \"m1\"");

    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::apply("m2"),
                &Patch::Apply(apply_body("w", json!({"a": "x", "b": "y"}))),
            )
            .await,
    );
    assert!(
        e.message.starts_with(
            "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .spec.a\n- .spec.b"
        ),
        "{}",
        e.message
    );

    // Applying the same value is not a conflict: ownership is shared.
    let shared = widgets
        .patch(
            "w",
            &PatchParams::apply("m2"),
            &Patch::Apply(apply_body("w", json!({"a": "1"}))),
        )
        .await
        .expect("same value");
    assert_eq!(
        entry(&shared, "m2", "Apply").expect("m2")["fieldsV1"]["f:spec"],
        json!({"f:a": {}})
    );
    assert!(
        entry(&shared, "m1", "Apply").expect("m1")["fieldsV1"]["f:spec"]
            .get("f:a")
            .is_some()
    );

    let forced = widgets
        .patch(
            "w",
            &PatchParams::apply("m2").force(),
            &Patch::Apply(apply_body("w", json!({"a": "2"}))),
        )
        .await
        .expect("force");
    assert_eq!(forced.data["spec"]["a"], "2");
    let m1 = entry(&forced, "m1", "Apply").expect("m1 keeps b");
    assert_eq!(
        m1["fieldsV1"]["f:spec"],
        json!({"f:b": {}}),
        "force took .spec.a away from m1"
    );
    // m1 now conflicts with m2 on a.
    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::apply("m1"),
                &Patch::Apply(apply_body("w", json!({"a": "1", "b": "2"}))),
            )
            .await,
    );
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"m2\": .spec.a"
    );
}

#[tokio::test]
async fn noop_apply_keeps_resource_version_and_sends_no_event() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let pp = PatchParams::apply("ctl");
    let body = apply_body(
        "w",
        json!({"a": "1", "ports": [{"name": "http", "port": 80}]}),
    );
    let first = widgets
        .patch("w", &pp, &Patch::Apply(body.clone()))
        .await
        .expect("apply");
    let from = first.resource_version().expect("rv");
    let mut stream = widgets
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .expect("watch")
        .boxed();
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later managedFields time would differ
    let again = widgets
        .patch("w", &pp, &Patch::Apply(body.clone()))
        .await
        .expect("re-apply");
    assert_eq!(again.resource_version(), first.resource_version());
    assert_eq!(
        entries(&again),
        entries(&first),
        "managedFields (and their time) unchanged"
    );
    let list = widgets.list(&ListParams::default()).await.expect("list");
    assert_eq!(
        list.metadata.resource_version,
        Some(from.clone()),
        "no write happened"
    );
    widgets
        .patch(
            "w",
            &pp,
            &Patch::Apply(apply_body(
                "w",
                json!({"a": "2", "ports": [{"name": "http", "port": 80}]}),
            )),
        )
        .await
        .expect("real change");
    let ev = stream.next().await.expect("open").expect("ok");
    match ev {
        WatchEvent::Modified(o) => assert_eq!(
            o.data["spec"]["a"], "2",
            "the first event is the real change"
        ),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn update_operations_take_ownership_without_conflict() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    widgets
        .patch(
            "w",
            &PatchParams::apply("applier"),
            &Patch::Apply(apply_body("w", json!({"a": "1", "b": "2"}))),
        )
        .await
        .expect("apply");
    let edited = widgets
        .patch(
            "w",
            &PatchParams {
                field_manager: Some("editor".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"spec": {"a": "edited", "replicas": 3}})),
        )
        .await
        .expect("merge patch never conflicts");
    let ed = entry(&edited, "editor", "Update").expect("editor entry");
    assert_eq!(ed["apiVersion"], "example.com/v1");
    assert_eq!(
        ed["fieldsV1"],
        json!({"f:spec": {"f:a": {}, "f:replicas": {}}})
    );
    assert_eq!(
        entry(&edited, "applier", "Apply").expect("applier")["fieldsV1"]["f:spec"],
        json!({"f:b": {}})
    );
    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::apply("applier"),
                &Patch::Apply(apply_body("w", json!({"a": "1", "b": "2"}))),
            )
            .await,
    );
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"editor\" using example.com/v1: .spec.a"
    );

    // Updates without fieldManager are attributed to the User-Agent prefix.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (code, body) = raw(
        &client,
        http::Request::post("/api/v1/namespaces/default/configmaps")
            .header("content-type", "application/json")
            .header("user-agent", "kubectl/v1.32.4 (linux/amd64) kubernetes/abc")
            .body(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ua", "labels": {"x": "1"}}, "data": {"k": "v"}}).to_string().into_bytes())
            .expect("req"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let got = cms.get("ua").await.expect("get");
    let mf = serde_json::to_value(got.managed_fields()).expect("json");
    assert_eq!(mf[0]["manager"], "kubectl");
    assert_eq!(mf[0]["operation"], "Update");
    assert_eq!(
        mf[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
    );
}

#[tokio::test]
async fn associative_lists_merge_by_key_between_managers() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    widgets
        .patch(
            "w",
            &PatchParams::apply("one"),
            &Patch::Apply(apply_body(
                "w",
                json!({"ports": [{"name": "http", "port": 80}]}),
            )),
        )
        .await
        .expect("one");
    let both = widgets
        .patch(
            "w",
            &PatchParams::apply("two"),
            &Patch::Apply(apply_body(
                "w",
                json!({"ports": [{"name": "metrics", "port": 9090}]}),
            )),
        )
        .await
        .expect("two");
    assert_eq!(
        both.data["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}])
    );
    assert_eq!(
        entry(&both, "two", "Apply").expect("two")["fieldsV1"]["f:spec"],
        json!({"f:ports": {"k:{\"name\":\"metrics\"}": {".": {}, "f:name": {}, "f:port": {}}}})
    );
    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::apply("two"),
                &Patch::Apply(apply_body(
                    "w",
                    json!({"ports": [{"name": "http", "port": 8080}]}),
                )),
            )
            .await,
    );
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"one\": .spec.ports[name=\"http\"].port"
    );
    // "two" stops applying its item: only that item goes.
    let after = widgets
        .patch(
            "w",
            &PatchParams::apply("two"),
            &Patch::Apply(apply_body("w", json!({}))),
        )
        .await
        .expect("drop");
    assert_eq!(
        after.data["spec"]["ports"],
        json!([{"name": "http", "port": 80}])
    );
}

#[tokio::test]
async fn apply_to_status_subresource_and_builtins() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    widgets
        .patch(
            "w",
            &PatchParams::apply("spec-owner"),
            &Patch::Apply(apply_body("w", json!({"a": "1"}))),
        )
        .await
        .expect("spec");
    let st = widgets
        .patch_status(
            "w",
            &PatchParams::apply("status-owner"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"state": "Ready"}, "spec": {"a": "ignored"}})),
        )
        .await
        .expect("status apply");
    assert_eq!(st.data["status"]["state"], "Ready");
    assert_eq!(st.data["spec"]["a"], "1");
    assert_eq!(st.metadata.generation, Some(1));
    let e = entry(&st, "status-owner", "Apply").expect("status entry");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:state": {}}}));
    // The main endpoint ignores status in apply configurations.
    let main = widgets
        .patch("w", &PatchParams::apply("spec-owner"), &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"app": "w"}}, "spec": {"a": "1"}, "status": {"state": "Hacked"}})))
        .await
        .expect("main apply");
    assert_eq!(main.data["status"]["state"], "Ready");

    // Typed built-ins.
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .expect("deployment");
    let applied = deploys
        .patch("web", &PatchParams::apply("ctl"), &Patch::Apply(&d))
        .await
        .expect("apply deployment");
    assert_eq!(applied.metadata.generation, Some(1));
    let mf = serde_json::to_value(applied.managed_fields()).expect("json");
    assert_eq!(
        mf[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}})
    );
    let scaled = deploys
        .patch("web", &PatchParams::apply("scaler").force(), &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}})))
        .await
        .expect("scale");
    assert_eq!(scaled.spec.replicas, Some(5));
    assert_eq!(scaled.metadata.generation, Some(2));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fromyaml\ndata:\n  a: \"1\"\n";
    let (code, body) = raw(
        &client,
        http::Request::patch("/api/v1/namespaces/default/configmaps/fromyaml?fieldManager=yaml")
            .header("content-type", "application/apply-patch+yaml")
            .body(yaml.as_bytes().to_vec())
            .expect("req"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        cms.get("fromyaml")
            .await
            .expect("get")
            .data
            .and_then(|d| d.get("a").cloned())
            .as_deref(),
        Some("1")
    );
}

/// A uid in the request body names one object, as on kube-apiserver: apply never creates
/// an object for it (409 "uid mismatch", so a deleted object is not brought back), a
/// patch or apply with another object's uid is 422 (uid is immutable), and a PUT's uid is
/// a precondition (409). The object's own uid is accepted everywhere.
#[tokio::test]
async fn a_uid_in_the_body_names_the_object_it_must_be() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let pp = PatchParams::apply("m1");
    let with_uid = |uid: &str| {
        let mut b = apply_body("w", json!({"a": "1"}));
        b["metadata"]["uid"] = json!(uid);
        b
    };
    let status = |e: kube::Error| match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    };

    let gone = status(
        widgets
            .patch("w", &pp, &Patch::Apply(with_uid("0000-gone")))
            .await
            .expect_err("apply with a uid and no object"),
    );
    assert_eq!(
        (gone.code, gone.reason.as_str()),
        (409, "Conflict"),
        "{gone:?}"
    );
    assert!(
        gone.message.ends_with(
            "uid mismatch: the provided object specified uid 0000-gone, and no existing object was found"
        ),
        "{gone:?}"
    );
    assert!(
        widgets.get_opt("w").await.unwrap().is_none(),
        "nothing created"
    );

    let created = widgets
        .patch("w", &pp, &Patch::Apply(apply_body("w", json!({"a": "1"}))))
        .await
        .expect("apply creates");
    let uid = created.uid().expect("uid");
    widgets
        .patch("w", &pp, &Patch::Apply(with_uid(&uid)))
        .await
        .expect("apply with the object's own uid");

    let other = status(
        widgets
            .patch("w", &pp, &Patch::Apply(with_uid("0000-other")))
            .await
            .expect_err("apply with another uid"),
    );
    assert_eq!(
        (other.code, other.reason.as_str()),
        (422, "Invalid"),
        "{other:?}"
    );
    let causes = other
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(causes[0].field, "metadata.uid", "{other:?}");
    assert!(other.message.ends_with("field is immutable"), "{other:?}");
    let merged = status(
        widgets
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"uid": "0000-other"}})),
            )
            .await
            .expect_err("merge patch of the uid"),
    );
    assert_eq!(merged.code, 422, "{merged:?}");

    let mut replaced: DynamicObject = widgets.get("w").await.unwrap();
    replaced.metadata.uid = Some("0000-other".into());
    let put = status(
        widgets
            .replace("w", &Default::default(), &replaced)
            .await
            .expect_err("PUT with another uid"),
    );
    assert_eq!(put.code, 409, "{put:?}");
    assert!(
        put.message
            .contains("Precondition failed: UID in precondition: 0000-other"),
        "{put:?}"
    );
    assert_eq!(widgets.get("w").await.unwrap().uid(), Some(uid));
}
