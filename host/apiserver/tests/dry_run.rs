//! `dryRun=All` on every write verb, as kube-apiserver 1.36 answers it (each expected
//! value below was observed on a real 1.36.2 control plane): validation, conflicts and
//! preconditions still refuse, the answer is the object as it would be, and nothing is
//! stored (a GET after shows the object byte for byte as before, resourceVersion
//! included) and no watch event is sent. Each test opens a watch first and ends with a
//! real write: its event must be the first one the watch gets, which proves the stream
//! was live while the dry runs sent none.

mod support;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, WatchEvent, WatchParams};
use kube::{Api, Client};
use kubewasm_apiserver::Config;
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// One request: the status code and the JSON answer (`Value::Null` body: none sent).
async fn call(client: &Client, method: &str, path: &str, ct: &str, body: Value) -> (u16, Value) {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).expect("body")
    };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(bytes)
        .expect("request");
    raw(client, req).await
}

async fn get(client: &Client, path: &str) -> Value {
    let (code, v) = call(client, "GET", path, "application/json", Value::Null).await;
    assert_eq!(code, 200, "GET {path}: {v}");
    v
}

/// A watch on `api`'s resource from the collection's current resourceVersion.
async fn watch_from_now<K>(api: &Api<K>) -> impl Stream<Item = kube::Result<WatchEvent<K>>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + 'static,
{
    let list = api.list_metadata(&Default::default()).await.expect("list");
    let rv = list
        .metadata
        .resource_version
        .expect("list resourceVersion");
    api.watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed()
}

/// The next event that is not a bookmark.
async fn next_event<K, S>(stream: &mut S) -> WatchEvent<K>
where
    S: Stream<Item = kube::Result<WatchEvent<K>>> + Unpin,
{
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("an event within 20s")
            .expect("stream open")
            .expect("event ok");
        if !matches!(ev, WatchEvent::Bookmark(_)) {
            return ev;
        }
    }
}

fn widget_body(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

/// `w1` {a: x} by manager `setup`, with status {state: ok} (by `setup` too).
async fn seed_widget(client: &Client) -> Value {
    let (code, _) = call(
        client,
        "POST",
        &format!("{WIDGETS}?fieldManager=setup"),
        "application/json",
        widget_body("w1", json!({"a": "x"})),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _) = call(
        client,
        "PATCH",
        &format!("{WIDGETS}/w1/status?fieldManager=setup"),
        MERGE,
        json!({"status": {"state": "ok"}}),
    )
    .await;
    assert_eq!(code, 200);
    get(client, &format!("{WIDGETS}/w1")).await
}

fn managers(o: &Value) -> Vec<String> {
    o["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["manager"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn dry_run_creates_answer_the_object_and_store_nothing() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let before = seed_widget(&client).await;
    let mut events = watch_from_now(&widgets).await;

    // kube-apiserver: uid and creationTimestamp set, no resourceVersion, generation 1,
    // managedFields of the request, status dropped (status subresource).
    let mut w0 = widget_body("w0", json!({"a": "x"}));
    w0["status"] = json!({"state": "s"});
    let (code, v) = call(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All&fieldManager=probe"),
        "application/json",
        w0,
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let m = &v["metadata"];
    assert!(m["uid"].as_str().is_some_and(|u| !u.is_empty()), "{v}");
    assert!(m["creationTimestamp"].is_string(), "{v}");
    assert!(m.get("resourceVersion").is_none(), "{v}");
    assert_eq!(m["generation"], 1);
    assert_eq!(managers(&v), ["probe"]);
    assert!(v.get("status").is_none(), "{v}");
    let (code, _) = call(&client, "GET", &format!("{WIDGETS}/w0"), "", Value::Null).await;
    assert_eq!(code, 404, "a dry-run create stores nothing");

    // generateName: a name is generated (prefix + 5 characters) and not kept.
    let (code, v) = call(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        "application/json",
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"generateName": "g-"}, "spec": {}}),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let generated = v["metadata"]["name"].as_str().expect("name").to_string();
    assert!(
        generated.starts_with("g-") && generated.len() == 7,
        "{generated}"
    );
    assert_eq!(v["metadata"]["generateName"], "g-");
    let (code, _) = call(
        &client,
        "GET",
        &format!("{WIDGETS}/{generated}"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);

    // A resourceVersion sent on a dry-run create is echoed (a real create refuses it).
    let mut with_rv = widget_body("w9", json!({}));
    with_rv["metadata"]["resourceVersion"] = json!("5");
    let (code, v) = call(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        "",
        with_rv,
    )
    .await;
    assert_eq!(
        (code, &v["metadata"]["resourceVersion"]),
        (201, &json!("5"))
    );

    // Still refused: an existing name, and an invalid object.
    let (code, v) = call(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        "",
        widget_body("w1", json!({})),
    )
    .await;
    assert_eq!((code, v["reason"].as_str()), (409, Some("AlreadyExists")));
    let (code, v) = call(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        "",
        widget_body("bad", json!({"replicas": "many"})),
    )
    .await;
    assert_eq!((code, v["reason"].as_str()), (422, Some("Invalid")), "{v}");
    // Apply that would create: 201, nothing stored.
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{WIDGETS}/w2?dryRun=All&fieldManager=ap"),
        APPLY,
        widget_body("w2", json!({"a": "ap"})),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    assert!(v["metadata"].get("resourceVersion").is_none(), "{v}");
    let (code, _) = call(&client, "GET", &format!("{WIDGETS}/w2"), "", Value::Null).await;
    assert_eq!(code, 404);

    assert_eq!(get(&client, &format!("{WIDGETS}/w1")).await, before);
    let (code, _) = call(
        &client,
        "POST",
        WIDGETS,
        "",
        widget_body("marker", json!({})),
    )
    .await;
    assert_eq!(code, 201);
    match next_event(&mut events).await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("marker")),
        other => panic!("the first event must be the real create, got {other:?}"),
    }
}

#[tokio::test]
async fn dry_run_updates_patches_and_applies_answer_the_result_and_store_nothing() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let before = seed_widget(&client).await;
    let rv = before["metadata"]["resourceVersion"].clone();
    let w1 = format!("{WIDGETS}/w1");
    let mut events = watch_from_now(&widgets).await;

    // PUT: the stored resourceVersion, generation bumped, the stored status kept.
    let mut put = widget_body("w1", json!({"a": "y"}));
    put["metadata"]["resourceVersion"] = rv.clone();
    put["status"] = json!({"state": "ignored"});
    let (code, v) = call(
        &client,
        "PUT",
        &format!("{w1}?dryRun=All&fieldManager=upd"),
        "",
        put,
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["resourceVersion"], rv);
    assert_eq!(v["metadata"]["generation"], 2);
    assert_eq!(v["spec"], json!({"a": "y"}));
    assert_eq!(v["status"], json!({"state": "ok"}));
    assert_eq!(managers(&v), ["setup", "setup", "upd"]);
    let mut stale = widget_body("w1", json!({"a": "y"}));
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, v) = call(&client, "PUT", &format!("{w1}?dryRun=All"), "", stale).await;
    assert_eq!(code, 409);
    assert_eq!(
        v["message"],
        "Operation cannot be fulfilled on widgets.example.com \"w1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Merge and JSON patches: the result, at the stored resourceVersion.
    for (ct, patch, want) in [
        (
            MERGE,
            json!({"spec": {"b": "bb"}}),
            json!({"a": "x", "b": "bb"}),
        ),
        (
            JSON_PATCH,
            json!([{"op": "replace", "path": "/spec/a", "value": "j"}]),
            json!({"a": "j"}),
        ),
    ] {
        let (code, v) = call(
            &client,
            "PATCH",
            &format!("{w1}?dryRun=All&fieldManager=p"),
            ct,
            patch,
        )
        .await;
        assert_eq!(code, 200, "{ct}: {v}");
        assert_eq!(v["spec"], want, "{ct}");
        assert_eq!(v["metadata"]["resourceVersion"], rv, "{ct}");
        assert_eq!(v["metadata"]["generation"], 2, "{ct}");
    }
    // Empty metadata collections are not kept (Go's omitempty), as there.
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w1}?dryRun=All"),
        MERGE,
        json!({"metadata": {"annotations": {}, "labels": {}, "finalizers": [], "ownerReferences": []}}),
    )
    .await;
    assert_eq!(code, 200);
    for k in ["annotations", "labels", "finalizers", "ownerReferences"] {
        assert!(v["metadata"].get(k).is_none(), "{k}: {v}");
    }
    // Refusals are the same as without dryRun: stale resourceVersion 409, schema 422.
    let (code, _) = call(
        &client,
        "PATCH",
        &format!("{w1}?dryRun=All"),
        MERGE,
        json!({"metadata": {"resourceVersion": "1"}, "spec": {"b": "bb"}}),
    )
    .await;
    assert_eq!(code, 409);
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w1}?dryRun=All"),
        MERGE,
        json!({"spec": {"replicas": "many"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        v["message"],
        "Widget.example.com \"w1\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    );

    // Status subresource: .status changes, spec and generation do not.
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w1}/status?dryRun=All&fieldManager=st"),
        MERGE,
        json!({"status": {"state": "dry"}, "spec": {"a": "ignored"}}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"], json!({"state": "dry"}));
    assert_eq!(v["spec"], json!({"a": "x"}));
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(v["metadata"]["resourceVersion"], rv);

    // Server-side apply: the conflict is reported; forced, the result.
    let apply = widget_body("w1", json!({"a": "ap"}));
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w1}?dryRun=All&fieldManager=ap"),
        APPLY,
        apply.clone(),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        v["message"],
        "Apply failed with 1 conflict: conflict with \"setup\" using example.com/v1: .spec.a"
    );
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w1}?dryRun=All&fieldManager=ap&force=true"),
        APPLY,
        apply,
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"], json!({"a": "ap"}));
    assert_eq!(v["metadata"]["resourceVersion"], rv);
    assert_eq!(v["metadata"]["generation"], 2);
    assert_eq!(managers(&v), ["ap", "setup", "setup"]);
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w1}/status?dryRun=All&fieldManager=ap"),
        APPLY,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "status": {"state": "applied"}}),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        v["message"],
        "Apply failed with 1 conflict: conflict with \"setup\" with subresource \"status\" using example.com/v1: .status.state"
    );

    assert_eq!(get(&client, &w1).await, before, "nothing stored");
    let (code, _) = call(&client, "PATCH", &w1, MERGE, json!({"spec": {"b": "real"}})).await;
    assert_eq!(code, 200);
    match next_event(&mut events).await {
        WatchEvent::Modified(o) => assert_eq!(o.data["spec"]["b"], "real"),
        other => panic!("the first event must be the real patch, got {other:?}"),
    }
}

#[tokio::test]
async fn dry_run_deletes_answer_as_kube_apiserver_and_remove_nothing() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let before = seed_widget(&client).await;
    let uid = before["metadata"]["uid"].as_str().expect("uid").to_string();
    let rv = before["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let w1 = format!("{WIDGETS}/w1");
    let mut held = widget_body("w3", json!({"a": "x"}));
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let (code, _) = call(&client, "POST", WIDGETS, "", held).await;
    assert_eq!(code, 201);
    let w3 = format!("{WIDGETS}/w3");
    let held_before = get(&client, &w3).await;
    let mut events = watch_from_now(&widgets).await;

    // Gone at once: a Success Status naming it (kind = the resource), from the query or
    // from the body (kubectl and kube-rs send DeleteOptions.dryRun in the body).
    let success = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "w1", "group": "example.com", "kind": "widgets", "uid": uid},
    });
    let (code, v) = call(
        &client,
        "DELETE",
        &format!("{w1}?dryRun=All"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!((code, &v), (200, &success));
    let (code, v) = call(
        &client,
        "DELETE",
        &w1,
        "application/json",
        json!({"dryRun": ["All"]}),
    )
    .await;
    assert_eq!((code, &v), (200, &success));
    let (code, v) = call(
        &client,
        "DELETE",
        &w1,
        "application/json",
        json!({"dryRun": ["All"], "orphanDependents": false}),
    )
    .await;
    assert_eq!((code, &v), (200, &success), "gone at once: 200 even so");

    // Orphan or Foreground propagation: the object as it would be marked.
    for (policy, finalizer) in [("Orphan", "orphan"), ("Foreground", "foregroundDeletion")] {
        let (code, v) = call(
            &client,
            "DELETE",
            &w1,
            "application/json",
            json!({"dryRun": ["All"], "propagationPolicy": policy}),
        )
        .await;
        assert_eq!(code, 200, "{policy}: {v}");
        assert_eq!(v["metadata"]["finalizers"], json!([finalizer]), "{policy}");
        assert!(v["metadata"]["deletionTimestamp"].is_string(), "{policy}");
        assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 0, "{policy}");
        assert_eq!(v["metadata"]["generation"], 2, "{policy}");
        assert_eq!(v["metadata"]["resourceVersion"], rv.as_str(), "{policy}");
    }

    // Preconditions still refuse, in kube-apiserver's words.
    let (code, v) = call(
        &client,
        "DELETE",
        &w1,
        "application/json",
        json!({"dryRun": ["All"], "preconditions": {"uid": "nope"}}),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        v["message"],
        format!(
            "Operation cannot be fulfilled on Widget.example.com \"w1\": the UID in the precondition (nope) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(
        v["details"],
        json!({"name": "w1", "group": "example.com", "kind": "Widget"})
    );
    let (code, v) = call(
        &client,
        "DELETE",
        &w1,
        "application/json",
        json!({"dryRun": ["All"], "preconditions": {"resourceVersion": "1"}}),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        v["message"],
        format!(
            "Operation cannot be fulfilled on Widget.example.com \"w1\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );

    // With finalizers: the object marked for deletion (200; 202 when orphanDependents
    // is false), its stored resourceVersion kept.
    let held_rv = held_before["metadata"]["resourceVersion"].clone();
    for (body, want_code) in [
        (json!({"dryRun": ["All"]}), 200),
        (json!({"dryRun": ["All"], "orphanDependents": false}), 202),
    ] {
        let (code, v) = call(&client, "DELETE", &w3, "application/json", body).await;
        assert_eq!(code, want_code, "{v}");
        assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
        assert_eq!(v["metadata"]["finalizers"], json!(["example.com/keep"]));
        assert_eq!(v["metadata"]["generation"], 2);
        assert_eq!(v["metadata"]["resourceVersion"], held_rv);
    }

    // deletecollection: the list of what it would delete, as it is.
    let (code, v) = call(
        &client,
        "DELETE",
        &format!("{WIDGETS}?dryRun=All"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["kind"], "WidgetList");
    assert_eq!(v["items"], json!([before.clone(), held_before.clone()]));

    // kube-rs sends DeleteParams.dry_run in the body.
    let gone = widgets
        .delete(
            "w1",
            &DeleteParams {
                dry_run: true,
                ..Default::default()
            },
        )
        .await
        .expect("dry-run delete");
    assert!(gone.is_right(), "a Success Status: {gone:?}");

    assert_eq!(get(&client, &w1).await, before, "nothing removed");
    assert_eq!(get(&client, &w3).await, held_before, "nothing marked");
    let (code, _) = call(&client, "DELETE", &w3, "", Value::Null).await;
    assert_eq!(code, 200);
    match next_event(&mut events).await {
        WatchEvent::Modified(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("w3"));
            assert!(o.metadata.deletion_timestamp.is_some());
        }
        other => panic!("the first event must be the real delete, got {other:?}"),
    }
    // Already being deleted: a dry run answers it as stored.
    let marked = get(&client, &w3).await;
    let (code, v) = call(
        &client,
        "DELETE",
        &format!("{w3}?dryRun=All"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!((code, &v), (200, &marked));
    // Removing its last finalizer, dry: the object without it, still stored.
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{w3}?dryRun=All"),
        MERGE,
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert!(v["metadata"].get("finalizers").is_none(), "{v}");
    assert_eq!(
        v["metadata"]["resourceVersion"],
        marked["metadata"]["resourceVersion"]
    );
    assert_eq!(get(&client, &w3).await, marked);
}

#[tokio::test]
async fn dry_run_on_built_in_kinds_and_a_query_beside_a_body() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, labels) in [("c1", json!({"app": "x"})), ("c2", json!({}))] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}});
        let (code, _) = call(
            &client,
            "POST",
            &format!("{CONFIGMAPS}?fieldManager=setup"),
            "",
            body,
        )
        .await;
        assert_eq!(code, 201);
    }
    let c1 = get(&client, &format!("{CONFIGMAPS}/c1")).await;
    let c2 = get(&client, &format!("{CONFIGMAPS}/c2")).await;
    let mut events = watch_from_now(&cms).await;

    // A kind without generation gets none; strategic merge patch works dry.
    let (code, v) = call(
        &client,
        "POST",
        &format!("{CONFIGMAPS}?dryRun=All&fieldManager=probe"),
        "",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c0"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(code, 201);
    assert!(
        v["metadata"].get("generation").is_none() && v["metadata"].get("resourceVersion").is_none()
    );
    let (code, v) = call(
        &client,
        "PATCH",
        &format!("{CONFIGMAPS}/c1?dryRun=All&fieldManager=smp"),
        STRATEGIC,
        json!({"data": {"k2": "v2"}}),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(v["data"], json!({"k": "v", "k2": "v2"}));
    assert_eq!(
        v["metadata"]["resourceVersion"],
        c1["metadata"]["resourceVersion"]
    );

    // A ConfigMap's delete answers a Status without a group.
    let (code, v) = call(
        &client,
        "DELETE",
        &format!("{CONFIGMAPS}/c1?dryRun=All"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        v["details"],
        json!({"name": "c1", "kind": "configmaps", "uid": c1["metadata"]["uid"]})
    );
    let (code, v) = call(
        &client,
        "DELETE",
        &format!("{CONFIGMAPS}?dryRun=All&labelSelector=app%3Dx"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!((code, &v["kind"]), (200, &json!("ConfigMapList")));
    assert_eq!(v["items"], json!([c1.clone()]));
    // A namespace dry-run delete answers it Terminating (no grace period) and keeps it.
    let (code, v) = call(
        &client,
        "DELETE",
        "/api/v1/namespaces/default?dryRun=All",
        "",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"]["phase"], "Terminating");
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    assert!(
        v["metadata"].get("deletionGracePeriodSeconds").is_none(),
        "{v}"
    );
    let ns = get(&client, "/api/v1/namespaces/default").await;
    assert_eq!(ns["status"]["phase"], "Active");
    assert!(ns["metadata"].get("deletionTimestamp").is_none());

    assert_eq!(get(&client, &format!("{CONFIGMAPS}/c1")).await, c1);
    // kube-apiserver reads DeleteOptions from the body when there is one and then
    // ignores the query: this `?dryRun=All` deletes for real, and is the first event.
    let (code, _) = call(
        &client,
        "DELETE",
        &format!("{CONFIGMAPS}/c2?dryRun=All"),
        "application/json",
        json!({"propagationPolicy": "Background"}),
    )
    .await;
    assert_eq!(code, 200);
    match next_event(&mut events).await {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.name.as_deref(), Some("c2")),
        other => panic!("the first event must be the real delete, got {other:?}"),
    }
    let (code, _) = call(&client, "GET", &format!("{CONFIGMAPS}/c2"), "", Value::Null).await;
    assert_eq!(code, 404, "{c2}");
}

#[tokio::test]
async fn dry_run_values_other_than_all_are_refused() {
    let (_s, client) = server().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (code, _) = call(&client, "POST", CONFIGMAPS, "", cm.clone()).await;
    assert_eq!(code, 201);
    let c = format!("{CONFIGMAPS}/c");
    let refused = |kind: &str, values: &str| {
        let message = format!("Unsupported value: {values}: supported values: \"All\"");
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{kind}.meta.k8s.io \"\" is invalid: dryRun: {message}"),
            "reason": "Invalid", "code": 422,
            "details": {"group": "meta.k8s.io", "kind": kind, "causes": [
                {"reason": "FieldValueNotSupported", "message": message, "field": "dryRun"}
            ]},
        })
    };
    for (query, values) in [
        ("dryRun=Foo", r#"["Foo"]"#),
        ("dryRun=", r#"[""]"#),
        ("dryRun", r#"[""]"#),
        ("dryRun=all", r#"["all"]"#),
        ("dryRun=All&dryRun=Foo", r#"["All","Foo"]"#),
    ] {
        let cases = [
            (
                "POST",
                format!("{CONFIGMAPS}?{query}"),
                "CreateOptions",
                cm.clone(),
                "",
            ),
            (
                "PUT",
                format!("{c}?{query}"),
                "UpdateOptions",
                cm.clone(),
                "",
            ),
            (
                "PATCH",
                format!("{c}?{query}"),
                "PatchOptions",
                json!({}),
                MERGE,
            ),
            (
                "DELETE",
                format!("{c}?{query}"),
                "DeleteOptions",
                Value::Null,
                "",
            ),
            (
                "DELETE",
                format!("{CONFIGMAPS}?{query}"),
                "DeleteOptions",
                Value::Null,
                "",
            ),
        ];
        for (method, path, kind, body, ct) in cases {
            let (code, v) = call(&client, method, &path, ct, body).await;
            assert_eq!((code, v), (422, refused(kind, values)), "{method} {path}");
        }
    }
    let (code, v) = call(
        &client,
        "DELETE",
        &c,
        "application/json",
        json!({"dryRun": ["Foo"]}),
    )
    .await;
    assert_eq!((code, v), (422, refused("DeleteOptions", r#"["Foo"]"#)));
    // All, repeated, is a dry run.
    let (code, _) = call(
        &client,
        "POST",
        &format!("{CONFIGMAPS}?dryRun=All&dryRun=All"),
        "",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twice"}}),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _) = call(
        &client,
        "GET",
        &format!("{CONFIGMAPS}/twice"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(
        get(&client, &c).await["metadata"]["name"],
        "c",
        "still there"
    );
}

#[tokio::test]
async fn dry_run_writes_are_authorized_as_real_ones() {
    let (server, _) =
        server_with(Config::default().with_rbac("admin", &[("jane-token", "jane")])).await;
    let mut config = server.client_config();
    config.auth_info.token = Some("jane-token".to_string().into());
    let jane = Client::try_from(config).expect("client");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (code, v) = call(&jane, "POST", &format!("{CONFIGMAPS}?dryRun=All"), "", cm).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "configmaps is forbidden: User \"jane\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let (code, _) = call(
        &jane,
        "DELETE",
        &format!("{CONFIGMAPS}/c?dryRun=All"),
        "",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn dry_run_through_typed_kube_clients() {
    let (_s, client) = server().await;
    let widgets: Api<DynamicObject> = install_widgets(&client).await;
    let pp = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let w = widgets
        .create(&pp, &widget("typed", json!({"a": "x"})))
        .await
        .expect("dry-run create");
    assert!(w.metadata.uid.is_some() && w.metadata.resource_version.is_none());
    let e = api_err(widgets.get("typed").await);
    assert_eq!(e.code, 404);
}
