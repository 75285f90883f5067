//! kubewasm's own CRD, `plugins.kubewasm.dev` (deploy/kubernetes/base/crd-plugins.yaml), on
//! the embedded server as kube-apiserver serves it: accepted as a structural schema, its
//! Plugin objects validated (module required and `oci://`, verbs from the enum, typed
//! permissions, settings and limits kept as written), its status written through the
//! subresource, and `kubectl get plugins` columns READY, VERSION, DIGEST and AGE, READY
//! read through the `[?(@.type=="Ready")]` filter. Also: CRDs kube-apiserver refuses as
//! non-structural are refused here too, with its words.

mod support;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

const CRD: &str = include_str!("../../../deploy/kubernetes/base/crd-plugins.yaml");

fn plugins(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "Plugin"),
            "plugins",
        ),
    )
}

fn plugin(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "Plugin",
        "metadata": {"name": name}, "spec": spec,
    }))
    .expect("plugin json")
}

async fn install(client: &kube::Client) -> Api<DynamicObject> {
    let crd: Value = serde_yaml_ng::from_str(CRD).expect("the CRD is YAML");
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).expect("crd"),
    )
    .await
    .expect("the Plugin CRD is accepted");
    let api = plugins(client);
    eventually("plugins served", || async {
        api.list(&Default::default()).await.ok()
    })
    .await;
    api
}

#[tokio::test]
async fn plugin_objects_validate_and_print_their_columns() {
    let (_s, client) = server().await;
    let api = install(&client).await;
    let spec = json!({
        "module": "oci://127.0.0.1:5000/kubewasm/p@sha256:0123",
        "settings": {"domain": "example.com", "nested": {"free": [1, 2]}},
        "limits": {"memoryMiB": 64, "callDeadline": "5s"},
        "pullSecretRef": {"name": "regcred"},
        "permissions": {
            "watches": [{"apiVersion": "v1", "kind": "ConfigMap", "namespaces": ["shop"]},
                        {"resource": "secrets"}],
            "reads": [{"resource": "services"}],
            "grants": [{"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["create", "patch-status"],
                        "allowForce": true, "finalizers": ["example.com/f"]}],
        },
    });
    let created = api
        .create(&PostParams::default(), &plugin("p", spec.clone()))
        .await
        .expect("a valid Plugin is accepted");
    // Nothing pruned: every field is in the schema or preserved; `mode` defaulted.
    let mut defaulted = spec.clone();
    defaulted["mode"] = json!("Enforce");
    assert_eq!(created.data["spec"], defaulted);

    // What the schema refuses, as kube-apiserver words it.
    for (bad, needle) in [
        (json!({"permissions": {}}), "spec.module: Required value"),
        (
            json!({"module": "https://r/p:1"}),
            "spec.module in body should match '^oci://'",
        ),
        (
            json!({"module": "oci://r/p:1", "permissions": {"grants": [
                {"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["update"]}]}}),
            "Unsupported value: \"update\"",
        ),
        (
            json!({"module": "oci://r/p:1", "permissions": {"grants": [
                {"apiGroups": [""], "verbs": ["create"]}]}}),
            "spec.permissions.grants[0].kinds: Required value",
        ),
        (
            json!({"module": "oci://r/p:1", "permissions": {"watches": [{"namespaces": "shop"}]}}),
            "spec.permissions.watches[0].namespaces: Invalid value: \"string\"",
        ),
    ] {
        let e = api_err(
            api.create(&PostParams::default(), &plugin("bad", bad.clone()))
                .await,
        );
        assert_eq!(e.code, 422, "{bad}: {e:?}");
        assert!(e.message.contains(needle), "{bad}: {}", e.message);
    }
    // The name is the plugin's: a DNS label.
    let e = api_err(
        api.create(
            &PostParams::default(),
            &plugin("Not_A_Label", json!({"module": "oci://r/p:1"})),
        )
        .await,
    );
    assert_eq!(e.code, 422, "{e:?}");

    // Status through the subresource; the columns read it.
    let status = json!({"status": {
        "observedGeneration": 1,
        "module": "oci://127.0.0.1:5000/kubewasm/p@sha256:0123",
        "digest": "sha256:0123",
        "version": "1.2.0",
        "conditions": [
            {"type": "Approved", "status": "True", "lastTransitionTime": "2026-12-02T00:00:00Z",
             "reason": "Approved", "message": ""},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-02T00:00:00Z",
             "reason": "PullFailed", "message": "registry down"},
        ],
    }});
    api.patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status written");
    let bad_reason = json!({"status": {"conditions": [
        {"type": "Ready", "status": "Maybe", "lastTransitionTime": "2026-12-02T00:00:00Z",
         "reason": "x", "message": ""}]}});
    let e = api_err(
        api.patch_status("p", &PatchParams::default(), &Patch::Merge(&bad_reason))
            .await,
    );
    assert_eq!(e.code, 422, "{e:?}");

    let (code, table) = raw(
        &client,
        http::Request::get("/apis/kubewasm.dev/v1alpha1/plugins")
            .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
            .body(vec![])
            .expect("req"),
    )
    .await;
    assert_eq!(code, 200, "{table}");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "Name", "Ready", "Reason", "Version", "Mode", "Digest", "Age"
        ]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "p", "{table}");
    assert_eq!(
        cells[1], "False",
        "READY is the Ready condition's status: {table}"
    );
    assert_eq!(cells[2], "PullFailed", "REASON is its reason: {table}");
    assert_eq!(cells[3], "1.2.0", "{table}");
    assert_eq!(cells[4], "Enforce", "MODE defaults to Enforce: {table}");
    assert_eq!(cells[5], "sha256:0123", "{table}");

    // The short name, as `kubectl get kwp` finds it.
    let (code, discovery) = raw(
        &client,
        http::Request::get("/apis/kubewasm.dev/v1alpha1")
            .body(vec![])
            .expect("req"),
    )
    .await;
    assert_eq!(code, 200);
    let res = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "plugins")
        .expect("plugins listed");
    assert_eq!(res["shortNames"], json!(["kwp"]));
    assert_eq!(res["namespaced"], false);
}

/// A CRD kube-apiserver refuses as non-structural is refused here too: a property without
/// a type, properties beside additionalProperties, metadata restricted beyond name.
#[tokio::test]
async fn non_structural_crds_are_refused() {
    let (_s, client) = server().await;
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["untyped"] =
        json!({"description": "no type"});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] =
        json!({"type": "object", "properties": {"labels": {"type": "object"}}});
    let e = api_err(
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd).expect("crd"),
        )
        .await,
    );
    assert_eq!(e.code, 422, "{e:?}");
    let p = "spec.versions[0].schema.openAPIV3Schema";
    for needle in [
        format!(
            "{p}.properties[spec].properties[untyped].type: Required value: must not be empty for specified object fields"
        ),
        format!(
            "{p}.properties[metadata]: Forbidden: must not specify anything other than name and generateName"
        ),
    ] {
        assert!(e.message.contains(&needle), "{needle}\n{}", e.message);
    }
    // The widget CRD as written is structural.
    install_widgets(&client).await;
}
