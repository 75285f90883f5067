//! Discovery, CRDs, CRUD, selectors, paging, patches, status subresource,
//! finalizers and error Status objects of the embedded API server.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::discovery::{Discovery, Scope};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::*;

fn cm(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn discovery_serves_builtins_and_runtime_crds() {
    let (_s, client) = server().await;
    let d = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let apps = d.get("apps").expect("apps group");
    let (deploy, caps) = apps
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.kind == "Deployment")
        .expect("deployments");
    assert_eq!(deploy.plural, "deployments");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "deployments/status" || r.plural == "status")
    );
    let core = d.get("").expect("core group");
    let (ns, ns_caps) = core
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.kind == "Namespace")
        .expect("namespaces");
    assert_eq!(ns.plural, "namespaces");
    assert_eq!(ns_caps.scope, Scope::Cluster);
    assert!(d.get("example.com").is_none());

    install_widgets(&client).await;
    let d = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery after crd");
    let g = d
        .get("example.com")
        .expect("CRD group discovered at run time");
    let (w, wcaps) = g.recommended_kind("Widget").expect("Widget kind");
    assert_eq!(w.plural, "widgets");
    assert_eq!(wcaps.scope, Scope::Namespaced);
    let agg = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    assert!(
        agg.get("example.com")
            .and_then(|g| g.recommended_kind("Widget"))
            .is_some()
    );

    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    let crd = crds.get("widgets.example.com").await.expect("crd");
    let conds = crd.data["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .clone();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    assert_eq!(crd.data["status"]["acceptedNames"]["kind"], "Widget");

    // Deleting the CRD unregisters the resource and deletes its instances.
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    widgets
        .create(&PostParams::default(), &widget("w1", json!({"a": "x"})))
        .await
        .expect("widget");
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete crd");
    let d = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery after delete");
    assert!(d.get("example.com").is_none());
    let e = api_err(widgets.get("w1").await);
    assert_eq!(e.code, 404);
    install_widgets(&client).await;
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "instances were deleted with the CRD"
    );
}

#[tokio::test]
async fn create_get_list_and_errors() {
    let (_s, client) = server().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .expect("ns")
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.contains(&n.to_string()), "namespace {n} exists");
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms
        .create(
            &PostParams::default(),
            &cm("one", &[("app", "a")], &[("k", "v")]),
        )
        .await
        .expect("create");
    assert!(created.uid().is_some());
    assert!(created.creation_timestamp().is_some());
    let rv1 = rv(&created);
    let got = cms.get("one").await.expect("get");
    assert_eq!(got.data, created.data);
    assert_eq!(rv(&got), rv1);

    let mut gen_cm = cm("", &[], &[]);
    gen_cm.metadata.name = None;
    gen_cm.metadata.generate_name = Some("gen-".into());
    let g = cms
        .create(&PostParams::default(), &gen_cm)
        .await
        .expect("generateName");
    assert!(
        g.name_any().starts_with("gen-") && g.name_any().len() == 9,
        "{}",
        g.name_any()
    );
    assert!(rv(&g) > rv1, "every write bumps the global resourceVersion");

    let list = cms.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 2);
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .expect("list rv")
        .parse()
        .expect("num");
    assert!(list_rv >= rv(&g));

    let e = api_err(
        cms.create(&PostParams::default(), &cm("one", &[], &[]))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"one\" already exists");
    let e = api_err(cms.get("nope").await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"nope\" not found");
    let e = api_err(
        cms.create(&PostParams::default(), &cm("Bad_Name", &[], &[]))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name"),
        "{}",
        e.message
    );
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    let e = api_err(
        missing
            .create(&PostParams::default(), &cm("x", &[], &[]))
            .await,
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    // Optimistic concurrency.
    let mut stale = got.clone();
    let mut fresh = got.clone();
    fresh.data = Some(BTreeMap::from([("k".to_string(), "v2".to_string())]));
    let updated = cms
        .replace("one", &PostParams::default(), &fresh)
        .await
        .expect("update");
    assert!(rv(&updated) > rv1);
    stale.data = Some(BTreeMap::from([("k".to_string(), "v3".to_string())]));
    let e = api_err(cms.replace("one", &PostParams::default(), &stale).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"one\": the object has been modified; please apply your changes to the latest version and try again"
    );
    stale.metadata.resource_version = None;
    let forced = cms
        .replace("one", &PostParams::default(), &stale)
        .await
        .expect("unconditional update");
    assert_eq!(
        forced
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("v3")
    );

    // A write that changes nothing keeps the resourceVersion.
    let same = cms
        .replace("one", &PostParams::default(), &forced)
        .await
        .expect("no-op update");
    assert_eq!(rv(&same), rv(&forced));
    let same = cms
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v3"}})),
        )
        .await
        .expect("no-op patch");
    assert_eq!(rv(&same), rv(&forced));
    assert_eq!(same.managed_fields(), forced.managed_fields());

    // Name mismatch with the URL.
    let e = api_err(cms.replace("other", &PostParams::default(), &forced).await);
    assert_eq!(e.code, 400);
}

#[tokio::test]
async fn raw_protocol_errors() {
    let (_s, client) = server().await;
    let (code, body) = raw(
        &client,
        http::Request::put("/api/v1/namespaces/default/configmaps")
            .body(b"{}".to_vec())
            .expect("req"),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let (code, body) = raw(
        &client,
        http::Request::get("/apis/nope.example/v1/things")
            .body(vec![])
            .expect("req"),
    )
    .await;
    assert_eq!((code, body["kind"].as_str()), (404, Some("Status")));
    let secret = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}});
    let (code, body) = raw(
        &client,
        http::Request::post("/api/v1/namespaces/default/configmaps")
            .header("content-type", "application/json")
            .body(secret.to_string().into_bytes())
            .expect("req"),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (400, Some("BadRequest")),
        "{body}"
    );
    let (code, body) = raw(
        &client,
        http::Request::get("/version").body(vec![]).expect("req"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(body["major"], "1");
    client.apiserver_version().await.expect("typed version");
}

#[tokio::test]
async fn selectors_and_paging() {
    let (s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (i, (app, tier)) in [
        ("web", "front"),
        ("web", "back"),
        ("db", "back"),
        ("cache", ""),
        ("web", "front"),
        ("db", ""),
        ("x", ""),
    ]
    .iter()
    .enumerate()
    {
        let mut labels = vec![("app", *app)];
        if !tier.is_empty() {
            labels.push(("tier", *tier));
        }
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), &labels, &[]))
            .await
            .expect("create");
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items.iter().map(|c| c.name_any()).collect::<Vec<_>>()
    };
    let q = |sel: &str| ListParams::default().labels(sel);
    assert_eq!(
        names(cms.list(&q("app=web")).await.expect("eq")),
        ["c0", "c1", "c4"]
    );
    assert_eq!(
        names(cms.list(&q("app==db")).await.expect("eqeq")),
        ["c2", "c5"]
    );
    assert_eq!(
        names(cms.list(&q("app!=web")).await.expect("ne")),
        ["c2", "c3", "c5", "c6"]
    );
    assert_eq!(
        names(cms.list(&q("app in (db,cache)")).await.expect("in")),
        ["c2", "c3", "c5"]
    );
    assert_eq!(
        names(cms.list(&q("app notin (web,db)")).await.expect("notin")),
        ["c3", "c6"]
    );
    assert_eq!(
        names(cms.list(&q("tier")).await.expect("exists")),
        ["c0", "c1", "c2", "c4"]
    );
    assert_eq!(
        names(cms.list(&q("!tier")).await.expect("!exists")),
        ["c3", "c5", "c6"]
    );
    assert_eq!(
        names(cms.list(&q("app=web,tier=back")).await.expect("and")),
        ["c1"]
    );
    let f = |sel: &str| ListParams::default().fields(sel);
    assert_eq!(
        names(cms.list(&f("metadata.name=c3")).await.expect("field")),
        ["c3"]
    );
    assert_eq!(
        names(
            cms.list(&f("metadata.name!=c3,metadata.namespace=default"))
                .await
                .expect("field ne")
        )
        .len(),
        6
    );
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert!(
        all.list(&f("metadata.namespace=kube-system"))
            .await
            .expect("ns field")
            .items
            .is_empty()
    );

    // limit/continue
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let first = cms.list(&lp).await.expect("page 1");
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let first_rv = first.metadata.resource_version.clone();
    seen.extend(names(first.clone()));
    let mut token = first.metadata.continue_.clone();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        lp = lp.continue_token(&t);
        let page = cms.list(&lp).await.expect("page");
        assert_eq!(
            page.metadata.resource_version, first_rv,
            "pages share the first page's resourceVersion"
        );
        token = page.metadata.continue_.clone();
        seen.extend(names(page));
    }
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);

    // A continue token from before a compaction is expired.
    cms.create(&PostParams::default(), &cm("later", &[], &[]))
        .await
        .expect("create");
    s.compact();
    let tok = first.metadata.continue_.clone().expect("token");
    let e = api_err(
        cms.list(&ListParams::default().limit(3).continue_token(&tok))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn patches_status_subresource_and_pruning() {
    let (_s, client) = server().await;
    let widgets = install_widgets(&client).await;
    let w = widgets
        .create(
            &PostParams::default(),
            &widget(
                "w",
                json!({"a": "1", "unknown": true, "free": {"x": {"y": 1}}}),
            ),
        )
        .await
        .expect("create");
    assert_eq!(w.metadata.generation, Some(1));
    assert!(
        w.data["spec"].get("unknown").is_none(),
        "unknown fields are pruned"
    );
    assert_eq!(
        w.data["spec"]["free"],
        json!({"x": {"y": 1}}),
        "preserve-unknown-fields is kept"
    );

    let m = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"b": "2"}})),
        )
        .await
        .expect("merge");
    assert_eq!(m.data["spec"]["b"], "2");
    assert_eq!(m.metadata.generation, Some(2));
    let (code, body) = raw(
        &client,
        http::Request::patch("/apis/example.com/v1/namespaces/default/widgets/w")
            .header("content-type", "application/json-patch+json")
            .body(br#"[{"op":"test","path":"/spec/b","value":"2"},{"op":"replace","path":"/spec/a","value":"9"}]"#.to_vec())
            .expect("req"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let j = widgets.get("w").await.expect("get");
    assert_eq!(j.data["spec"]["a"], "9");
    let (code, _) = raw(
        &client,
        http::Request::patch("/apis/example.com/v1/namespaces/default/widgets/w")
            .header("content-type", "application/json-patch+json")
            .body(br#"[{"op":"test","path":"/spec/b","value":"wrong"}]"#.to_vec())
            .expect("req"),
    )
    .await;
    assert_eq!(code, 422, "a failed test operation rejects the patch");
    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"a": "x"}})),
            )
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (415, "UnsupportedMediaType"));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("smp", &[], &[("a", "1")]))
        .await
        .expect("cm");
    let p = cms
        .patch(
            "smp",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"b": "2"}})),
        )
        .await
        .expect("strategic merge on a built-in");
    assert_eq!(p.data.as_ref().map(|d| d.len()), Some(2));
    let e = api_err(
        widgets
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget"})),
            )
            .await,
    );
    assert_eq!(e.code, 422, "apply without fieldManager: {}", e.message);

    // Status subresource: the main endpoint ignores status, /status changes only status.
    let mut with_status = j.clone();
    with_status.data["status"] = json!({"state": "Ready"});
    let r = widgets
        .replace("w", &PostParams::default(), &with_status)
        .await
        .expect("replace");
    assert!(
        r.data.get("status").is_none(),
        "status ignored on the main resource"
    );
    assert_eq!(rv(&r), rv(&j), "nothing else changed: no write");
    let st = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": "Ready"}, "spec": {"a": "ignored"}})),
        )
        .await
        .expect("status patch");
    assert_eq!(st.data["status"]["state"], "Ready");
    assert_eq!(st.data["spec"]["a"], "9", "status writes leave spec alone");
    assert_eq!(
        st.metadata.generation, j.metadata.generation,
        "status does not bump generation"
    );
    let got = widgets.get_status("w").await.expect("get status");
    assert_eq!(got.data["status"]["state"], "Ready");
    let mut replaced = got.clone();
    replaced.data["status"]["state"] = json!("Done");
    let r = widgets
        .replace_status("w", &PostParams::default(), &replaced)
        .await
        .expect("replace status");
    assert_eq!(r.data["status"]["state"], "Done");
    let e = api_err(
        widgets
            .patch_status(
                "missing",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {}})),
            )
            .await,
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn finalizers_and_preconditions() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut c = cm("fin", &[], &[]);
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = cms
        .create(&PostParams::default(), &c)
        .await
        .expect("create");

    let e = api_err(
        cms.delete(
            "fin",
            &DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some("not-the-uid".into()),
                    resource_version: None,
                }),
                ..Default::default()
            },
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    // kube-apiserver 1.36's words (rest.BeforeDelete), checked on a real cluster.
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"fin\": the UID in the precondition (not-the-uid) does not match the UID in record ({}). The object might have been deleted and then recreated",
            created.uid().unwrap_or_default()
        )
    );

    let pending = cms
        .delete(
            "fin",
            &DeleteParams {
                preconditions: Some(Preconditions {
                    uid: created.uid(),
                    resource_version: None,
                }),
                ..Default::default()
            },
        )
        .await
        .expect("delete");
    let obj = pending
        .left()
        .expect("object returned while finalizers remain");
    assert!(obj.metadata.deletion_timestamp.is_some());
    let still = cms
        .get("fin")
        .await
        .expect("kept until finalizers are gone");
    assert!(still.metadata.deletion_timestamp.is_some());
    let e = api_err(
        cms.patch(
            "fin",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}),
            ),
        )
        .await,
    );
    assert_eq!(e.code, 422, "no new finalizers while deleting");
    cms.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizers");
    assert_eq!(api_err(cms.get("fin").await).code, 404);
}

#[tokio::test]
async fn deletecollection_and_cluster_scope() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for n in ["a", "b", "c"] {
        cms.create(
            &PostParams::default(),
            &cm(n, &[("grp", if n == "c" { "2" } else { "1" })], &[]),
        )
        .await
        .expect("create");
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("grp=1"),
    )
    .await
    .expect("deletecollection");
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, ["c"]);
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = nss
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("team".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("namespace");
    assert_eq!(ns.status.and_then(|s| s.phase).as_deref(), Some("Active"));
    let v: Value = serde_json::to_value(nss.get("team").await.expect("get")).expect("json");
    assert_eq!(
        v["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
}
