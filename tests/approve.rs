//! One reviewed YAML per plugin: `kubewasm approve` prints a Plugin object approving
//! exactly what the plugin asks for, and its RBAC; `kubewasm dev` serves the Plugin kind,
//! so that output applies to its API server and validates against the CRD; `kubewasm rbac`
//! derives the same RBAC from the object (from the file, and from the cluster); and the
//! same object without a module approves the plugin in directory mode. The CRD has one
//! source, copied byte for byte into the Helm chart.

mod support;

use std::process::{Command, Stdio};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};
use support::*;

const MODULE: &str = "oci://127.0.0.1:5000/kubewasm/contentsite-provisioner@sha256:\
                      4bc453b53cb3d914b45f4b250294236adba2c0e09ff6f03793949e7e39fd4cc1";

fn kubewasm(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn"])
        .args(args)
        .output()
        .expect("run kubewasm");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn docs(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).expect("YAML document"))
        .filter(|d| !d.is_null())
        .collect()
}

fn plugins_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "Plugin"),
            "plugins",
        ),
    )
}

/// The approval of `name` in plugins/approvals.yaml.
fn demo_approval(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("plugins/approvals.yaml")).unwrap();
    docs(&text)
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in plugins/approvals.yaml"))
}

#[test]
fn the_crd_has_one_source_in_kustomize_and_helm() {
    let base = root().join("deploy/kubernetes/base/crd-plugins.yaml");
    let chart = root().join("deploy/helm/kubewasm/crds/plugins.kubewasm.dev.yaml");
    assert!(
        std::fs::read(&base).unwrap() == std::fs::read(&chart).unwrap(),
        "{} and {} differ: copy the first over the second",
        base.display(),
        chart.display()
    );
    let kustomization =
        std::fs::read_to_string(root().join("deploy/kubernetes/base/kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains("- crd-plugins.yaml"),
        "{kustomization}"
    );
    let crd: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    assert_eq!(crd["metadata"]["name"], "plugins.kubewasm.dev");
    // deploy/README's uninstall keeps the Plugin kind (and every Plugin) by this label.
    assert_eq!(crd["metadata"]["labels"]["kubewasm.dev/uninstall"], "keep");
    let base = std::fs::read_dir(root().join("deploy/kubernetes/base")).unwrap();
    for f in base.filter_map(Result::ok) {
        let text = std::fs::read_to_string(f.path()).unwrap_or_default();
        // Both kinds (Plugin, NamespacedPlugin) are kept: deleting a CRD deletes its objects.
        let crd = ["crd-plugins.yaml", "crd-namespacedplugins.yaml"];
        if !crd.iter().any(|c| f.file_name() == *c) {
            assert!(
                !text.contains("kubewasm.dev/uninstall"),
                "{}: only the CRDs are kept at uninstall",
                f.path().display()
            );
        }
    }
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["kind"], "Plugin");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert!(version["subresources"]["status"].is_object());
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        ["Ready", "Reason", "Version", "Mode", "Digest", "Age"]
    );
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], json!(["module"]));
    assert_eq!(spec["properties"]["module"]["pattern"], "^oci://");
    for free in ["settings", "limits"] {
        assert_eq!(
            spec["properties"][free]["x-kubernetes-preserve-unknown-fields"], true,
            "{free}"
        );
    }
}

/// `approve` → `dev --apply`: the Plugin object and its RBAC, as `approve` prints them
/// by default, are accepted by `dev`'s API server (the CRD validates the object as
/// written; the ServiceAccounts' namespace is the one `dev` impersonates in), and `rbac -f`
/// of the same file and `rbac --from-cluster` give exactly the RBAC `approve` printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_output_applies_to_dev_and_its_rbac_is_what_rbac_derives() {
    let wasm = example_plugin("contentsite-provisioner");
    // Defaults only: one namespace for the ServiceAccounts across approve, rbac and dev.
    let rbac_flags: [&str; 0] = [];
    let (code, out, err) = kubewasm(
        &[
            &["approve", wasm.to_str().unwrap(), "--module", MODULE][..],
            &rbac_flags,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("# `kubewasm approve "), "{out}");
    assert!(!out.contains("No --module"), "{out}");
    let all = docs(&out);
    let object = &all[0];
    assert_eq!(object["apiVersion"], "kubewasm.dev/v1alpha1");
    assert_eq!(object["kind"], "Plugin");
    assert_eq!(object["metadata"]["name"], "contentsite-provisioner");
    assert_eq!(object["spec"]["module"], MODULE);
    // Exactly what it asks for: the demo's approval of it, which the host loads it under.
    assert_eq!(
        object["spec"]["permissions"],
        demo_approval("contentsite-provisioner")["spec"]["permissions"],
        "{out}"
    );
    // Its settings (the file beside it) ride along.
    assert_eq!(object["spec"]["settings"]["service"]["port"], 80, "{out}");
    let rbac: Vec<Value> = all[1..].to_vec();
    let kinds: Vec<&str> = rbac.iter().filter_map(|d| d["kind"].as_str()).collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(kinds.contains(&kind), "no {kind}: {kinds:?}");
    }
    for d in rbac
        .iter()
        .filter(|d| d["metadata"]["namespace"].is_string())
    {
        assert_eq!(
            d["metadata"]["namespace"], "kubewasm-system",
            "approve's default namespace is deploy/'s and dev's: {d:#}"
        );
    }
    // The plugin's own account reads what it is approved to watch (ContentSites, in every
    // namespace): the host loads it only if that account may.
    let own = rbac
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRole"
                && d["metadata"]["name"] == "kubewasm-system:kubewasm-contentsite-provisioner"
        })
        .unwrap_or_else(|| panic!("the plugin's own ClusterRole: {out}"));
    assert!(
        own["rules"].as_array().unwrap().iter().any(|r| {
            r["resources"] == json!(["contentsites"])
                && r["verbs"] == json!(["get", "list", "watch"])
        }),
        "{own:#}"
    );
    let host_role = rbac
        .iter()
        .find(|d| {
            d["kind"] == "Role" && d["metadata"]["name"] == "kubewasm:contentsite-provisioner"
        })
        .unwrap_or_else(|| panic!("the host's role for the plugin: {out}"));
    assert!(
        host_role["rules"].as_array().unwrap().iter().any(|r| {
            r["verbs"] == json!(["impersonate"])
                && r["resourceNames"] == json!(["kubewasm-contentsite-provisioner"])
        }),
        "{host_role:#}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("contentsite-provisioner.yaml");
    std::fs::write(&file, &out).unwrap();

    // The same RBAC from the object in the file.
    let (code, from_file, err) =
        kubewasm(&[&["rbac", "-f", file.to_str().unwrap()][..], &rbac_flags].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        docs(&from_file),
        rbac,
        "rbac -f differs from approve's RBAC"
    );

    // `dev` serves the Plugin kind: the whole stream applies (the CRD validates the object).
    let kubeconfig = dir.path().join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    // The API only: this test is about the kind, not about pulling the module.
    cmd.args([
        "--log-format",
        "json",
        "dev",
        "--no-plugin-objects",
        "--apply",
    ])
    .arg(&file)
    .arg("--kubeconfig-out")
    .arg(&kubeconfig)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let dev = HostProcess::spawn_command(cmd);
    dev.wait_log("dev serving", |l| {
        field(l, "message").starts_with("no --plugins and --no-plugin-objects")
    })
    .await;
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api = plugins_api(&client);
    let stored = api
        .get("contentsite-provisioner")
        .await
        .expect("the Plugin was applied");
    assert_eq!(
        serde_json::to_value(&stored).unwrap()["spec"],
        object["spec"],
        "stored as printed: nothing pruned"
    );
    // The CRD `dev` serves refuses what it must.
    let mut no_module = object.clone();
    no_module["metadata"]["name"] = json!("no-module");
    no_module["spec"].as_object_mut().unwrap().remove("module");
    let e = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(no_module).unwrap(),
        )
        .await
        .expect_err("a Plugin without a module is refused");
    assert!(e.to_string().contains("spec.module: Required value"), "{e}");

    // And the RBAC from the cluster's Plugin objects is the same again.
    let (code, from_cluster, err) = kubewasm(
        &[
            &[
                "rbac",
                "--from-cluster",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--allow-guess",
            ][..],
            &rbac_flags,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    // Resolved through dev's discovery this time: the rules, not the guesses, compared.
    let strip = |docs: Vec<Value>| -> Vec<Value> {
        docs.into_iter()
            .map(|mut d| {
                if let Some(a) = d["metadata"]["annotations"].as_object_mut() {
                    a.remove("kubewasm.dev/guessed");
                }
                d
            })
            .collect()
    };
    let mut from_cluster = strip(docs(&from_cluster));
    let mut printed = strip(rbac.clone());
    // The example CRDs are not installed here: MongoDB is guessed either way.
    from_cluster.sort_by_key(|d| d.to_string());
    printed.sort_by_key(|d| d.to_string());
    assert_eq!(from_cluster, printed, "rbac --from-cluster differs");
    dev.stop();
}

/// Without --module the object says it is a directory-mode approval, and it is one: the
/// file approves the plugin as `run` checks it.
#[test]
fn approve_without_a_module_is_a_directory_mode_approval() {
    let wasm = example_plugin("mongodb-monitor");
    let (code, out, err) = kubewasm(&["approve", wasm.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# No --module"), "{out}");
    let object = &docs(&out)[0];
    assert!(object["spec"].get("module").is_none(), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("approvals.yaml");
    std::fs::write(&file, &out).unwrap();
    let (code, inspected, err) = kubewasm(&[
        "inspect",
        "--approvals",
        file.to_str().unwrap(),
        wasm.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_yaml_ng::from_str(&inspected).unwrap();
    assert_eq!(
        doc["approval"], "ok: everything requested is approved",
        "{inspected}"
    );
    assert_eq!(doc["approved"], doc["requested"], "{inspected}");
    // An approval of another plugin approves nothing for this one.
    std::fs::write(
        &file,
        out.replace("name: mongodb-monitor", "name: someone-else"),
    )
    .unwrap();
    let (_, inspected, _) = kubewasm(&[
        "inspect",
        "--approvals",
        file.to_str().unwrap(),
        wasm.to_str().unwrap(),
    ]);
    let doc: Value = serde_yaml_ng::from_str(&inspected).unwrap();
    let verdict = doc["approval"].as_str().unwrap_or_default();
    assert!(
        verdict.starts_with("refused: plugin mongodb-monitor asks for more")
            && verdict.contains("watch mongodb.com/v1/MongoDB"),
        "{inspected}"
    );
}
