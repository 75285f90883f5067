//! Every built-in resource of kube-apiserver 1.36 is served, with the discovery data a
//! real 1.36 control plane gives (`tests/data/builtins-1.36.json`, captured from it
//! with kubectl: group, version, plural, singular, kind, scope, verbs, short names,
//! categories, subresources); the subresources and virtual kinds it does not emulate
//! are the README's lists and answer 405 saying so. ResourceQuota, LimitRange,
//! PriorityClass, HorizontalPodAutoscaler and StorageClass go through kube-rs and the
//! real kubectl; the scale subresource through raw requests and `kubectl scale`.

mod support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use support::kubectl::*;
use support::*;

/// The captured discovery of the real server, keyed by (group, version, resource).
fn expected() -> BTreeMap<(String, String, String), Value> {
    let text = include_str!("data/builtins-1.36.json");
    let doc: Value = serde_json::from_str(text).expect("test data is JSON");
    doc["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            let key = |k: &str| r[k].as_str().expect("string field").to_string();
            ((key("group"), key("version"), key("resource")), r.clone())
        })
        .collect()
}

/// The backticked names of the README item `- **{label}**`.
fn readme_list(label: &str) -> BTreeSet<String> {
    let readme = include_str!("../README.md");
    let start = readme.find(&format!("- **{label}**")).expect("README item");
    let item = &readme[start + 2..];
    let item = &item[..item.find("\n- ").unwrap_or(item.len())];
    item.split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    let req = http::Request::get(path).body(vec![]).expect("request");
    raw(client, req).await
}

/// A server's discovery in the shape of the test data, custom resources left out.
async fn served(client: &kube::Client) -> BTreeMap<(String, String, String), Value> {
    let (_, crds) = get(
        client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    )
    .await;
    let crd_groups: BTreeSet<&str> = crds["items"]
        .as_array()
        .expect("CRD list")
        .iter()
        .filter_map(|c| c["spec"]["group"].as_str())
        .collect();
    let mut gvs = vec![("".to_string(), "v1".to_string())];
    let (_, groups) = get(client, "/apis").await;
    for g in groups["groups"].as_array().expect("groups") {
        if crd_groups.contains(g["name"].as_str().expect("name")) {
            continue;
        }
        for v in g["versions"].as_array().expect("versions") {
            let name = g["name"].as_str().expect("name").to_string();
            gvs.push((name, v["version"].as_str().expect("version").to_string()));
        }
    }
    let mut out = BTreeMap::new();
    for (group, version) in gvs {
        let path = if group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group}/{version}")
        };
        let (code, list) = get(client, &path).await;
        assert_eq!(code, 200, "{path}");
        let resources = list["resources"].as_array().expect("resources");
        let mut subs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in resources {
            let name = r["name"].as_str().expect("name");
            if let Some((main, sub)) = name.split_once('/') {
                subs.entry(main.into()).or_default().push(sub.into());
            }
        }
        for r in resources {
            let name = r["name"].as_str().expect("name");
            if name.contains('/') {
                continue;
            }
            let mut verbs: Vec<String> = serde_json::from_value(r["verbs"].clone()).expect("verbs");
            verbs.sort();
            let mut s = subs.remove(name).unwrap_or_default();
            s.sort();
            let entry = json!({
                "group": group, "version": version, "resource": name,
                "singularName": r["singularName"], "kind": r["kind"],
                "namespaced": r["namespaced"], "verbs": verbs,
                "shortNames": r.get("shortNames").cloned().unwrap_or(json!([])),
                "categories": r.get("categories").cloned().unwrap_or(json!([])),
                "subresources": s,
            });
            out.insert((group.clone(), version.clone(), name.to_string()), entry);
        }
    }
    out
}

#[tokio::test]
async fn every_builtin_is_served_with_its_real_discovery_data() {
    let (_server, client) = server().await;
    let unemulated = readme_list("Subresources not emulated");
    let mut want = expected();
    assert_eq!(
        want.len(),
        68,
        "1.36 serves 67 resources, one in two versions"
    );
    for ((_, _, resource), entry) in want.iter_mut() {
        let subs: Vec<Value> = entry["subresources"]
            .as_array()
            .expect("subresources")
            .iter()
            .filter(|s| {
                let s = s.as_str().expect("subresource");
                !unemulated.contains(&format!("{resource}/{s}"))
            })
            .cloned()
            .collect();
        entry["subresources"] = json!(subs);
    }
    let got = served(&client).await;
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(missing.is_empty(), "not served: {missing:?}");
    assert!(
        extra.is_empty(),
        "not served by kube-apiserver 1.36: {extra:?}"
    );
    for (key, entry) in &want {
        assert_eq!(&got[key], entry, "discovery of {key:?}");
    }
    // Every subresource the README calls not emulated is one kube-apiserver has.
    let real: BTreeSet<String> = expected()
        .iter()
        .flat_map(|((_, _, r), e)| {
            e["subresources"]
                .as_array()
                .expect("subresources")
                .iter()
                .map(|s| format!("{r}/{}", s.as_str().expect("subresource")))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(unemulated.is_subset(&real), "{unemulated:?}");
    assert!(!unemulated.is_empty());

    // `/version` names the release whose resources these are.
    let (_, version) = get(&client, "/version").await;
    assert_eq!(
        (&version["major"], &version["minor"]),
        (&json!("1"), &json!("36"))
    );

    // Aggregated discovery says the same of ResourceQuota.
    let req = http::Request::get("/api")
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )
        .body(vec![])
        .expect("request");
    let (_, agg) = raw(&client, req).await;
    let quota = agg["items"][0]["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "resourcequotas")
        .cloned()
        .expect("resourcequotas in aggregated discovery");
    assert_eq!(quota["shortNames"], json!(["quota"]));
    assert_eq!(quota["scope"], "Namespaced");
    assert_eq!(quota["subresources"][0]["subresource"], "status");
}

#[tokio::test]
async fn what_is_not_emulated_answers_405_saying_so() {
    let (_server, client) = server().await;
    for sub in readme_list("Subresources not emulated") {
        let (resource, sub) = sub.split_once('/').expect("resource/subresource");
        let base = match resource {
            "namespaces" | "nodes" | "certificatesigningrequests" => {
                let group = if resource == "certificatesigningrequests" {
                    "apis/certificates.k8s.io"
                } else {
                    "api"
                };
                format!("/{group}/v1/{resource}/x/{sub}")
            }
            _ => format!("/api/v1/namespaces/default/{resource}/x/{sub}"),
        };
        let (code, status) = get(&client, &base).await;
        assert_eq!(code, 405, "{base}: {status}");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains("is not emulated by the kubewasm API server")),
            "{base}: {status}"
        );
    }
    for (path, plural) in [
        ("/api/v1/namespaces/default/bindings", "bindings"),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            "selfsubjectrulesreviews",
        ),
    ] {
        let req = http::Request::post(path)
            .header("content-type", "application/json")
            .body(b"{}".to_vec())
            .expect("request");
        let (code, status) = raw(&client, req).await;
        assert_eq!(code, 405, "{path}: {status}");
        assert_eq!(
            status["message"],
            format!("{plural} is not emulated by the kubewasm API server (see its README)")
        );
    }
    // Their OpenAPI document offers only create, as kube-apiserver's does.
    let (code, doc) = get(&client, "/openapi/v3/apis/authentication.k8s.io/v1").await;
    assert_eq!(code, 200);
    let ops: Vec<&String> = doc["paths"]["/apis/authentication.k8s.io/v1/tokenreviews"]
        .as_object()
        .expect("tokenreviews path")
        .keys()
        .collect();
    assert_eq!(ops, ["post"]);
    // Read-only: listed (empty), never written.
    let (code, list) = get(&client, "/api/v1/componentstatuses").await;
    assert_eq!(
        (code, list["kind"].as_str()),
        (200, Some("ComponentStatusList"))
    );
    let req = http::Request::post("/api/v1/componentstatuses")
        .header("content-type", "application/json")
        .body(br#"{"metadata":{"name":"etcd-0"}}"#.to_vec())
        .expect("request");
    assert_eq!(raw(&client, req).await.0, 405);
}

#[tokio::test]
async fn resource_quota_and_limit_range_through_kube_rs() {
    let (_server, client) = server().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
    let limits: Api<LimitRange> = Api::namespaced(client.clone(), "default");
    let mut events = quotas
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "team-quota"},
        "spec": {"hard": {"pods": "10", "requests.cpu": "4"}}
    }))
    .expect("quota");
    let created = quotas
        .create(&PostParams::default(), &q)
        .await
        .expect("quota created");
    assert!(created.metadata.uid.is_some());
    // A watch from "0" allowing bookmarks is a watch-list (kube-apiserver 1.34+): the
    // bookmark ending its (no) initial events may come before the object.
    let first = loop {
        match events.try_next().await.expect("event").expect("an event") {
            WatchEvent::Bookmark(_) => continue,
            other => break other,
        }
    };
    match first {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("team-quota")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    let l: LimitRange = serde_json::from_value(json!({
        "metadata": {"name": "team-limits"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}
    }))
    .expect("limit range");
    limits
        .create(&PostParams::default(), &l)
        .await
        .expect("limits created");
    let listed = limits.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    let got = quotas.get("team-quota").await.expect("get");
    let hard = got.spec.and_then(|s| s.hard).expect("hard");
    assert_eq!(hard["pods"].0, "10");
    // The status subresource writes status only (no controller fills `used`).
    let status = json!({"status": {"hard": {"pods": "10"}, "used": {"pods": "3"}}});
    quotas
        .patch_status(
            "team-quota",
            &Default::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .expect("status patched");
    let got = quotas.get("team-quota").await.expect("get");
    assert_eq!(
        got.status.and_then(|s| s.used).expect("used")["pods"].0,
        "3"
    );
    quotas
        .delete("team-quota", &DeleteParams::default())
        .await
        .expect("deleted");
    limits
        .delete("team-limits", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(api_err(quotas.get("team-quota").await).code, 404);
    assert_eq!(api_err(limits.get("team-limits").await).code, 404);
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_spec_replicas() {
    let (_server, client) = server().await;
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    });
    let req = http::Request::post("/apis/apps/v1/namespaces/default/deployments")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&deploy).expect("json"))
        .expect("request");
    assert_eq!(raw(&client, req).await.0, 201);
    let path = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    let (code, scale) = get(&client, path).await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            &scale["kind"],
            &scale["apiVersion"],
            &scale["spec"],
            &scale["status"]
        ),
        (
            &json!("Scale"),
            &json!("autoscaling/v1"),
            &json!({"replicas": 2}),
            &json!({"replicas": 0, "selector": "app=web"})
        )
    );
    let req = http::Request::patch(path)
        .header("content-type", "application/merge-patch+json")
        .body(br#"{"spec":{"replicas":5}}"#.to_vec())
        .expect("request");
    let (code, scale) = raw(&client, req).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (200, &json!(5)));
    let (_, d) = get(&client, "/apis/apps/v1/namespaces/default/deployments/web").await;
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(d["metadata"]["generation"], 2);
    // A PUT with a stale resourceVersion conflicts, as any update.
    let stale =
        json!({"metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"replicas": 1}});
    let req = http::Request::put(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&stale).expect("json"))
        .expect("request");
    assert_eq!(raw(&client, req).await.0, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_gets_lists_and_deletes_builtins() {
    let (server, _client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(k) = kubectl_for(&server, dir.path()) else {
        return;
    };
    let manifest = write(
        dir.path(),
        "team.yaml",
        r#"apiVersion: v1
kind: ResourceQuota
metadata: {name: team-quota, namespace: default}
spec:
  hard: {pods: "10", requests.cpu: "4"}
---
apiVersion: v1
kind: LimitRange
metadata: {name: team-limits, namespace: default}
spec:
  limits:
  - type: Container
    default: {cpu: 500m}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: example.com/fast
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
"#,
    );
    let out = k.run(&["create", "-f", &manifest]).await;
    for line in [
        "resourcequota/team-quota created",
        "limitrange/team-limits created",
        "priorityclass.scheduling.k8s.io/high created",
        "storageclass.storage.k8s.io/fast created",
        "horizontalpodautoscaler.autoscaling/web created",
    ] {
        assert!(out.contains(line), "{out}");
    }
    let names = k
        .run(&["get", "quota,limits,hpa", "-n", "default", "-o", "name"])
        .await;
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        [
            "resourcequota/team-quota",
            "limitrange/team-limits",
            "horizontalpodautoscaler.autoscaling/web"
        ]
    );
    let hard = k
        .run(&[
            "get",
            "resourcequota",
            "team-quota",
            "-o",
            "jsonpath={.spec.hard.pods}",
        ])
        .await;
    assert_eq!(hard, "10");
    let value = k
        .run(&["get", "pc", "high", "-o", "jsonpath={.value}"])
        .await;
    assert_eq!(value, "1000");
    // The same HPA in autoscaling/v1.
    let v1 = k
        .run(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "jsonpath={.apiVersion}",
        ])
        .await;
    assert_eq!(v1, "autoscaling/v1");
    let out = k.run(&["delete", "-f", &manifest]).await;
    assert_eq!(out.lines().count(), 5, "{out}");
    let left = k
        .run(&["get", "quota,limits,hpa", "-A", "-o", "name"])
        .await;
    assert_eq!(left.trim(), "");
    let err = k.fails(&["get", "sc", "fast"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );

    // kubectl's typed commands send protobuf bodies.
    let out = k.run(&["create", "quota", "q2", "--hard=pods=3"]).await;
    assert!(out.contains("resourcequota/q2 created"), "{out}");
    let out = k
        .run(&["create", "priorityclass", "low", "--value=10"])
        .await;
    assert!(
        out.contains("priorityclass.scheduling.k8s.io/low created"),
        "{out}"
    );
    let hard = k
        .run(&["get", "quota", "q2", "-o", "jsonpath={.spec.hard.pods}"])
        .await;
    assert_eq!(hard, "3");
    let value = k
        .run(&["get", "pc", "low", "-o", "jsonpath={.value}"])
        .await;
    assert_eq!(value, "10");

    // kubectl scale goes through the scale subresource.
    k.run(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=1",
    ])
    .await;
    let out = k.run(&["scale", "deployment/web", "--replicas=4"]).await;
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    let replicas = k
        .run(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"])
        .await;
    assert_eq!(replicas, "4");
    // kubectl autoscale sends a HorizontalPodAutoscaler as protobuf (1.32: autoscaling/v1).
    let out = k
        .run(&[
            "autoscale",
            "deployment/web",
            "--min=2",
            "--max=5",
            "--cpu-percent=80",
        ])
        .await;
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{out}"
    );
    let hpa = k
        .run(&[
            "get",
            "hpa",
            "web",
            "-o",
            "jsonpath={.spec.minReplicas}/{.spec.maxReplicas}",
        ])
        .await;
    assert_eq!(hpa, "2/5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_lists_every_builtin() {
    let (server, _client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(k) = kubectl_for(&server, dir.path()) else {
        return;
    };
    let out = k.run(&["api-resources", "--no-headers"]).await;
    // NAME [SHORTNAMES] APIVERSION NAMESPACED KIND: short names may be absent.
    let rows: BTreeSet<(String, String, String, String, String)> = out
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = f.len();
            let short = if n == 5 { f[1] } else { "" };
            (
                f[0].into(),
                short.into(),
                f[n - 3].into(),
                f[n - 2].into(),
                f[n - 1].into(),
            )
        })
        .collect();
    // kubectl lists each resource in its group's preferred version only.
    let want: BTreeSet<_> = expected()
        .into_values()
        .filter(|e| !(e["group"] == "autoscaling" && e["version"] == "v1"))
        .map(|e| {
            let s = |k: &str| e[k].as_str().expect("string").to_string();
            let api_version = if s("group").is_empty() {
                s("version")
            } else {
                format!("{}/{}", s("group"), s("version"))
            };
            let short: Vec<&str> = e["shortNames"]
                .as_array()
                .expect("shortNames")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            (
                s("resource"),
                short.join(","),
                api_version,
                e["namespaced"].to_string(),
                s("kind"),
            )
        })
        .collect();
    assert_eq!(rows, want);
}

/// The test data is what a real kube-apiserver's discovery says: opt-in, with
/// `KUBEWASM_E2E_KUBECONFIG` naming a 1.36 cluster (the end-to-end suite's variable);
/// how the data is refreshed for another release.
#[tokio::test]
async fn test_data_is_a_real_servers_discovery() {
    let Some(path) = std::env::var_os("KUBEWASM_E2E_KUBECONFIG") else {
        println!("SKIPPED: set KUBEWASM_E2E_KUBECONFIG to compare with a real cluster");
        return;
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    let client = kube::Client::try_from(config).expect("client");
    let got = served(&client).await;
    let want = expected();
    let differ: Vec<_> = want
        .keys()
        .chain(got.keys())
        .filter(|k| want.get(*k) != got.get(*k))
        .collect();
    assert!(differ.is_empty(), "the real server differs on {differ:?}");
}
