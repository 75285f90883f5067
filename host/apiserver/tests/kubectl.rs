//! kubectl against the embedded API server, through the kubeconfig it writes:
//! server-side and client-side apply of a CRD, an instance and a ConfigMap with
//! kubectl's default validation, `get -o yaml` with managedFields, `get -w` seeing a
//! later change, and `delete`; `explain` and client-side validation from the OpenAPI
//! documents; the imperative commands that send protobuf. Skipped (loudly) without
//! kubectl.

mod support;

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use support::kubectl::*;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_watch_delete() {
    let Some(bin) = kubectl_path() else {
        eprintln!("\n\n********** SKIPPED: kubectl not on PATH **********\n");
        println!("SKIPPED: kubectl not on PATH");
        return;
    };
    let (server, client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let k = Kubectl {
        bin,
        kubeconfig,
        home: dir.path().to_path_buf(),
    };

    let crd = serde_json::to_string_pretty(&widget_crd()).expect("crd");
    let crd_file = write(dir.path(), "crd.json", &crd);
    let out = k.run(&["apply", "--server-side", "-f", &crd_file]).await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/widgets.example.com serverside-applied"
        ),
        "{out}"
    );
    let instance = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  labels:\n    app: demo\nspec:\n  a: hello\n";
    let inst_file = write(dir.path(), "w1.yaml", instance);
    let out = k.run(&["apply", "--server-side", "-f", &inst_file]).await;
    assert!(
        out.contains("widget.example.com/w1 serverside-applied"),
        "{out}"
    );

    let yaml = k
        .run(&["get", "widgets", "-o", "yaml", "--show-managed-fields"])
        .await;
    assert!(yaml.contains("managedFields:"), "{yaml}");
    assert!(yaml.contains("manager: kubectl"), "{yaml}");
    assert!(yaml.contains("operation: Apply"), "{yaml}");
    assert!(yaml.contains("f:a: {}"), "{yaml}");

    let table = k.run(&["get", "widgets"]).await;
    let header = table.lines().next().unwrap_or_default().to_string();
    assert!(
        header.starts_with("NAME") && header.contains("STATE") && header.contains("AGE"),
        "{table}"
    );
    assert!(table.lines().any(|l| l.starts_with("w1 ")), "{table}");
    let by_short = k
        .run(&["get", "wd", "w1", "-o", "jsonpath={.spec.a}"])
        .await;
    assert_eq!(by_short, "hello");
    let cm_file = write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n",
    );
    let cm_out = k.run(&["apply", "-f", &cm_file]).await;
    assert!(cm_out.contains("configmap/plain created"), "{cm_out}");
    let cm_out = k.run(&["apply", "-f", &cm_file]).await;
    assert!(
        cm_out.contains("configmap/plain unchanged"),
        "client-side apply converges: {cm_out}"
    );
    let cms = k.run(&["get", "configmaps"]).await;
    assert!(cms.lines().any(|l| l.starts_with("plain ")), "{cms}");

    // get -w shows a later change.
    let mut watch = k
        .command(&["get", "widgets", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl get -w");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("header in time")
        .expect("read")
        .unwrap_or_default();
    assert!(first.starts_with("NAME"), "{first}");
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    // Wait until the initial row is printed, then change the status.
    let row = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("row in time")
        .expect("read")
        .unwrap_or_default();
    assert!(row.starts_with("w1 "), "{row}");
    widgets
        .patch_status("w1", &PatchParams::apply("status-writer"), &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "status": {"state": "Ready"}})))
        .await
        .expect("status change");
    let changed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match lines.next_line().await.expect("read") {
                Some(l) if l.contains("Ready") => return l,
                Some(_) => continue,
                None => panic!("kubectl get -w ended"),
            }
        }
    })
    .await
    .expect("watch shows the change");
    assert!(changed.starts_with("w1 "), "{changed}");
    watch.kill().await.expect("stop watch");

    let out = k.run(&["delete", "widget", "w1"]).await;
    assert!(out.contains("widget.example.com \"w1\" deleted"), "{out}");
    let err = k.fails(&["get", "widget", "w1"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    let out = k.run(&["delete", "-f", &crd_file]).await;
    assert!(out.contains("deleted"), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_and_client_side_validation_use_the_openapi_documents() {
    let (server, _client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(k) = kubectl_for(&server, dir.path()) else {
        return;
    };
    let crd = serde_json::to_string_pretty(&widget_crd()).expect("crd");
    let crd_file = write(dir.path(), "crd.json", &crd);
    let out = k.run(&["create", "-f", &crd_file]).await;
    assert!(out.contains("created"), "{out}");

    // explain renders the CRD's schema from /openapi/v3.
    let out = k.run(&["explain", "widgets.spec"]).await;
    assert!(out.contains("KIND:       Widget"), "{out}");
    assert!(out.contains("GROUP:      example.com"), "{out}");
    assert!(out.contains("FIELD: spec <Object>"), "{out}");
    for field in [
        "replicas\t<integer>",
        "ports\t<[]Object>",
        "tags\t<[]string>",
        "a\t<string>",
    ] {
        assert!(out.contains(field), "explain shows {field}: {out}");
    }
    let out = k.run(&["explain", "widget.spec.ports"]).await;
    assert!(out.contains("port\t<integer>"), "{out}");

    // --validate=strict (the default): the v3 documents do not offer fieldValidation,
    // so kubectl validates against /openapi/v2 and rejects unknown fields itself.
    let bad = write(
        dir.path(),
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  a: x\n  bogus: 1\n",
    );
    for args in [
        vec!["apply", "-f", bad.as_str()],
        vec!["create", "-f", bad.as_str()],
        vec![
            "apply",
            "--server-side",
            "--validate=strict",
            "-f",
            bad.as_str(),
        ],
    ] {
        let err = k.fails(&args).await;
        assert!(
            err.contains("unknown field \"bogus\" in com.example.v1.Widget.spec"),
            "{args:?}: {err}"
        );
    }
    let err = k.fails(&["get", "widget", "w2"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    // A type mismatch is caught client-side too.
    let bad_type = write(
        dir.path(),
        "bad-type.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w3\nspec:\n  replicas: many\n",
    );
    let err = k.fails(&["apply", "-f", &bad_type]).await;
    assert!(
        err.contains("ValidationError(Widget.spec.replicas)"),
        "{err}"
    );
    // Without client-side validation the server prunes the unknown field.
    let out = k.run(&["apply", "--validate=false", "-f", &bad]).await;
    assert!(out.contains("widget.example.com/w2 created"), "{out}");
    let spec = k
        .run(&["get", "widget", "w2", "-o", "jsonpath={.spec}"])
        .await;
    assert_eq!(spec, "{\"a\":\"x\"}");
    // Fields under x-kubernetes-preserve-unknown-fields pass client-side validation.
    let free = write(
        dir.path(),
        "free.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w4\nspec:\n  free:\n    any: [1, 2]\n",
    );
    let out = k.run(&["apply", "-f", &free]).await;
    assert!(out.contains("widget.example.com/w4 created"), "{out}");
    server.shutdown().await;
}

/// kubectl's typed commands send Kubernetes protobuf (`k8s\0` + runtime.Unknown) and
/// accept protobuf or JSON; the server decodes the typed message, stores its JSON
/// and answers JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_imperative_commands_send_protobuf() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service, ServiceAccount};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    let (server, client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(k) = kubectl_for(&server, dir.path()) else {
        return;
    };
    let commands: [(&[&str], &str); 7] = [
        (&["create", "namespace", "ns1"], "namespace/ns1 created"),
        (
            &["create", "secret", "generic", "s", "--from-literal=a=b"],
            "secret/s created",
        ),
        (
            &["create", "configmap", "c", "--from-literal=k=v"],
            "configmap/c created",
        ),
        (
            &["create", "serviceaccount", "sa"],
            "serviceaccount/sa created",
        ),
        (
            &["create", "deployment", "web", "--image=nginx"],
            "deployment.apps/web created",
        ),
        (&["run", "p", "--image=nginx"], "pod/p created"),
        (
            &["expose", "deployment", "web", "--port=80"],
            "service/web exposed",
        ),
    ];
    for (args, expected) in commands {
        let out = k.run(args).await;
        assert!(out.contains(expected), "kubectl {args:?}: {out}");
    }

    let ns: Api<Namespace> = Api::all(client.clone());
    let ns1 = ns.get("ns1").await.expect("namespace ns1");
    assert_eq!(ns1.status.and_then(|s| s.phase).as_deref(), Some("Active"));

    let secret = Api::<Secret>::default_namespaced(client.clone())
        .get("s")
        .await
        .expect("secret s");
    let data = secret.data.expect("secret data");
    assert_eq!(data.get("a").map(|b| b.0.as_slice()), Some(&b"b"[..]));
    let raw_secret = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::erase::<Secret>(&()),
    )
    .get("s")
    .await
    .expect("secret s as JSON");
    assert_eq!(raw_secret.data["data"], json!({"a": "Yg=="}), "base64 of b");

    let cm = Api::<ConfigMap>::default_namespaced(client.clone())
        .get("c")
        .await
        .expect("configmap c");
    assert_eq!(
        cm.data,
        Some([("k".to_string(), "v".to_string())].into_iter().collect())
    );

    Api::<ServiceAccount>::default_namespaced(client.clone())
        .get("sa")
        .await
        .expect("serviceaccount sa");

    let web = Api::<Deployment>::default_namespaced(client.clone())
        .get("web")
        .await
        .expect("deployment web");
    let app_web: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web".to_string())]
            .into_iter()
            .collect();
    assert_eq!(web.metadata.labels.as_ref(), Some(&app_web));
    let spec = web.spec;
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&app_web));
    let template_labels = spec.template.metadata.and_then(|m| m.labels);
    assert_eq!(template_labels.as_ref(), Some(&app_web));
    let containers = spec.template.spec.expect("pod spec").containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].name, "nginx");
    assert_eq!(containers[0].image.as_deref(), Some("nginx"));

    let pod = Api::<Pod>::default_namespaced(client.clone())
        .get("p")
        .await
        .expect("pod p");
    let pod_spec = pod.spec.expect("pod spec");
    assert_eq!(pod_spec.containers[0].image.as_deref(), Some("nginx"));
    assert_eq!(pod_spec.containers[0].name, "p");
    assert_eq!(
        pod.metadata
            .labels
            .and_then(|l| l.get("run").cloned())
            .as_deref(),
        Some("p")
    );

    let svc = Api::<Service>::default_namespaced(client.clone())
        .get("web")
        .await
        .expect("service web");
    let svc_spec = svc.spec.expect("service spec");
    assert_eq!(svc_spec.selector.as_ref(), Some(&app_web));
    let ports = svc_spec.ports.expect("service ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, 80);
    assert_eq!(ports[0].target_port, Some(IntOrString::Int(80)));
    assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));

    // kubectl reads them back like from a cluster.
    let out = k
        .run(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(out, "nginx");
    let out = k
        .run(&["get", "secret", "s", "-o", "jsonpath={.data.a}"])
        .await;
    assert_eq!(out, "Yg==");
    server.shutdown().await;
}

/// `kubectl apply|create|delete --dry-run=server` print what they print against
/// kube-apiserver 1.36 (observed there with kubectl 1.32 and 1.36: `... created (server
/// dry run)`, the AlreadyExists, NotFound and apply-conflict errors) and change nothing:
/// the ConfigMap list, resourceVersion included, is the same after. kubectl sends
/// DELETE's dryRun in the DeleteOptions body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_dry_run_server_changes_nothing() {
    let (server, client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(k) = kubectl_for(&server, dir.path()) else {
        return;
    };
    k.run(&["create", "configmap", "c1", "--from-literal=k=v"])
        .await;
    k.run(&["label", "configmap", "c1", "app=x"]).await;
    let cms: Api<DynamicObject> = Api::default_namespaced_with(
        client.clone(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let list = || async {
        let req = http::Request::get("/api/v1/namespaces/default/configmaps")
            .body(Vec::new())
            .expect("request");
        raw(&client, req).await.1
    };
    let before = list().await;
    let new = write(
        dir.path(),
        "new.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kc-new\ndata:\n  k: v\n",
    );
    let c1 = write(
        dir.path(),
        "c1.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  k: changed\n",
    );
    let printed: [(&[&str], &str); 5] = [
        (
            &["apply", "--dry-run=server", "-f", &new],
            "configmap/kc-new created (server dry run)",
        ),
        (
            &["apply", "--server-side", "--dry-run=server", "-f", &new],
            "configmap/kc-new serverside-applied (server dry run)",
        ),
        (
            &["apply", "--dry-run=server", "-f", &c1],
            "configmap/c1 configured (server dry run)",
        ),
        (
            &["create", "--dry-run=server", "-f", &new],
            "configmap/kc-new created (server dry run)",
        ),
        (
            &[
                "create",
                "--dry-run=server",
                "configmap",
                "kc2",
                "--from-literal=a=b",
            ],
            "configmap/kc2 created (server dry run)",
        ),
    ];
    for (args, expected) in printed {
        let out = k.run(args).await;
        assert_eq!(out.trim(), expected, "kubectl {args:?}");
    }
    // kubectl 1.32 prints `configmap "c1" deleted (server dry run)`, 1.36 adds `from
    // default namespace` before the parenthesis.
    for args in [
        &["delete", "--dry-run=server", "configmap", "c1"][..],
        &["delete", "--dry-run=server", "configmaps", "-l", "app=x"][..],
    ] {
        let out = k.run(args).await;
        let out = out.trim();
        assert!(
            out.starts_with("configmap \"c1\" deleted") && out.ends_with("(server dry run)"),
            "kubectl {args:?}: {out}"
        );
    }
    let err = k
        .fails(&["apply", "--server-side", "--dry-run=server", "-f", &c1])
        .await;
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.k"
        ),
        "{err}"
    );
    let err = k.fails(&["create", "--dry-run=server", "-f", &c1]).await;
    assert!(
        err.contains("Error from server (AlreadyExists): error when creating")
            && err.contains("configmaps \"c1\" already exists"),
        "{err}"
    );
    let err = k
        .fails(&["delete", "--dry-run=server", "configmap", "nope"])
        .await;
    assert!(
        err.contains("Error from server (NotFound): configmaps \"nope\" not found"),
        "{err}"
    );
    // kubectl diff sends a dry-run strategic merge patch with `annotations: {}`; the
    // diff shows only the data change, as against kube-apiserver.
    let out = k
        .command(&["diff", "-f", &c1])
        .output()
        .await
        .expect("kubectl diff");
    assert_eq!(out.status.code(), Some(1), "a difference: exit 1");
    let diff = String::from_utf8_lossy(&out.stdout);
    let changes: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(changes, ["-  k: v", "+  k: changed"], "{diff}");
    assert_eq!(list().await, before, "nothing stored, removed or bumped");
    assert_eq!(
        cms.get("c1").await.expect("c1").data["data"]["k"],
        "v",
        "c1 unchanged"
    );
}
