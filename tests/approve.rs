//! One reviewed YAML per plugin: `kubewasm approve` prints a Plugin object approving
//! exactly what the plugin asks for, and its RBAC; `kubewasm dev` serves the Plugin kind,
//! so that output applies to its API server and validates against the CRD; `kubewasm rbac`
//! derives the same RBAC from the object (from the file, and from the cluster); and the
//! same object without a module approves the plugin in directory mode. The CRD has one
//! source, copied byte for byte into the Helm chart.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

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
    assert_crd_has_one_source("crd-plugins.yaml", "plugins.kubewasm.dev.yaml");
    let base = root().join("deploy/kubernetes/base/crd-plugins.yaml");
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
    // `dev` serves the NamespacedPlugin kind too: `approve --namespace`'s output applies.
    let namespaced: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubewasm.dev", "v1alpha1", "NamespacedPlugin"),
            "namespacedplugins",
        ),
    );
    let mut team = object.clone();
    team["kind"] = json!("NamespacedPlugin");
    team["metadata"]["namespace"] = json!("default");
    namespaced
        .create(
            &PostParams::default(),
            &serde_json::from_value(team).unwrap(),
        )
        .await
        .expect("dev serves NamespacedPlugins");

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

/// A client of `env`'s API server authenticating with `token` (a user of
/// [`Env::with_rbac`]).
async fn client_as(env: &Env, token: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(env.kubeconfig_for(token)).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// Whether `user` may `verb` `group`/`resource` (`name`) in `namespace`, as the API
/// server's SubjectAccessReview answers.
async fn may(
    env: &Env,
    user: &str,
    namespace: &str,
    (group, resource, name, verb): (&str, &str, Option<&str>, &str),
) -> bool {
    let reviews = env.api(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        None,
    );
    let mut attrs = json!({"namespace": namespace, "group": group, "verb": verb});
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    attrs["resource"] = json!(resource);
    if !sub.is_empty() {
        attrs["subresource"] = json!(sub);
    }
    if let Some(n) = name {
        attrs["name"] = json!(n);
    }
    let review = env
        .create(
            &reviews,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": user, "resourceAttributes": attrs}}),
        )
        .await;
    serde_json::to_value(&review).unwrap()["status"]["allowed"] == true
}

const TEAM_TOKEN: &str = "team-a-token";
const TEAM_USER: &str = "jane";

/// An `edit`-like Role of a team in its namespace (the embedded API server has no
/// aggregated `edit`): the kinds it works with, and impersonating its ServiceAccounts,
/// as `edit` holds them.
fn team_edit_role(ns: &str) -> Value {
    let all = json!([
        "get", "list", "watch", "create", "update", "patch", "delete"
    ]);
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
    "metadata": {"name": "team-edit", "namespace": ns},
    "rules": [
        {"apiGroups": [""], "resources": ["configmaps", "secrets", "services"], "verbs": all},
        {"apiGroups": ["sites.kubewasm.dev"],
         "resources": ["contentsites", "contentsites/status", "contentsites/finalizers"],
         "verbs": all},
        {"apiGroups": ["mongodb.com"], "resources": ["mongodb"], "verbs": all},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
    ]})
}

fn binding(ns: &str, name: &str, kind: &str, role: &str, user: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name, "namespace": ns},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
           "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
}

/// `approve --namespace team-a`: everything printed lives in team-a; the plugin's Role is
/// exactly its reads and grants there, the host's exactly its reads, impersonating the
/// plugin's account and its pull secret. A team user holding only `kubewasm-tenant` (as
/// `rbac --tenants` prints it) and an `edit`-like Role in team-a applies it all, and holds
/// every right the Roles grant (what the API server's escalation check asks); the same
/// user cannot create those objects in team-b. A plugin reaching another namespace or a
/// cluster-scoped kind is refused, naming what and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_namespace_is_confined_and_a_team_holding_only_its_namespace_applies_it() {
    let env = Env::with_rbac(true, &[(TEAM_TOKEN, TEAM_USER)]).await;
    env.apply_path(&root().join("deploy/kubernetes/base/crd-namespacedplugins.yaml"))
        .await;
    let namespaces = env.api("v1", "Namespace", "namespaces", None);
    for ns in ["team-a", "team-b"] {
        env.create(
            &namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    // The platform: the host's cluster part and the team's ClusterRole, bound in team-a.
    let dir = tempfile::tempdir().unwrap();
    let (code, tenants, err) = kubewasm(&["rbac", "--tenants"]);
    assert_eq!(code, 0, "{err}");
    let tenants = docs(&tenants);
    let platform = dir.path().join("platform.yaml");
    let mut platform_docs: Vec<Value> = tenants.clone();
    platform_docs.push(team_edit_role("team-a"));
    platform_docs.push(binding(
        "team-a",
        "team-edit",
        "Role",
        "team-edit",
        TEAM_USER,
    ));
    platform_docs.push(binding(
        "team-a",
        "kubewasm-tenant",
        "ClusterRole",
        "kubewasm-tenant",
        TEAM_USER,
    ));
    std::fs::write(&platform, to_stream(&platform_docs)).unwrap();
    env.apply_path(&platform).await;

    // The team: its plugin's objects, kinds resolved through the cluster's discovery.
    let wasm = example_plugin("contentsite-provisioner");
    let (code, out, err) = kubewasm(&[
        "approve",
        "--namespace",
        "team-a",
        wasm.to_str().unwrap(),
        "--module",
        MODULE,
        "--pull-secret",
        "regcred",
        "--kubeconfig",
        env.kubeconfig.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let all = docs(&out);
    let names: Vec<(String, String)> = all
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap_or_default().to_string(),
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let p = "contentsite-provisioner";
    let expected: Vec<(String, String)> = [
        ("NamespacedPlugin", p.to_string()),
        ("ServiceAccount", format!("kubewasm-{p}")),
        ("Role", format!("kubewasm-{p}")),
        ("RoleBinding", format!("kubewasm-{p}")),
        ("Role", format!("kubewasm-host-{p}")),
        ("RoleBinding", format!("kubewasm-host-{p}")),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(names, expected, "{out}");
    for d in &all {
        assert_eq!(d["metadata"]["namespace"], "team-a", "{d:#}");
    }
    let object = &all[0];
    assert_eq!(object["apiVersion"], "kubewasm.dev/v1alpha1");
    assert_eq!(object["spec"]["module"], MODULE);
    assert_eq!(object["spec"]["pullSecretRef"]["name"], "regcred");
    let perms = &object["spec"]["permissions"];
    for list in ["watches", "grants"] {
        for entry in perms[list].as_array().unwrap() {
            assert_eq!(entry["namespaces"], json!(["team-a"]), "{list}: {out}");
        }
    }
    // Exactly what it needs: its reads and grants (resolved: MongoDB's plural is
    // `mongodb`), and the finalizers its owner references need; nothing else.
    assert_eq!(
        all[2]["rules"],
        json!([
            {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "patch"]},
            {"apiGroups": ["mongodb.com"], "resources": ["mongodb"], "verbs": ["create", "patch"]},
            {"apiGroups": ["sites.kubewasm.dev"], "resources": ["contentsites"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["sites.kubewasm.dev"], "resources": ["contentsites/status"],
             "verbs": ["patch"]},
            {"apiGroups": ["sites.kubewasm.dev"], "resources": ["contentsites/finalizers"],
             "verbs": ["update"]},
        ]),
        "{out}"
    );
    assert_eq!(
        all[4]["rules"],
        json!([
            {"apiGroups": ["sites.kubewasm.dev"], "resources": ["contentsites"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["serviceaccounts"],
             "resourceNames": [format!("kubewasm-{p}")], "verbs": ["impersonate"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["regcred"],
             "verbs": ["get"]},
        ]),
        "{out}"
    );
    assert_eq!(
        all[5]["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kubewasm-system"}])
    );

    // Applied as the team user: everything is created.
    let team = client_as(&env, TEAM_TOKEN).await;
    let file = dir.path().join("team-a.yaml");
    std::fs::write(&file, &out).unwrap();
    let printed = kubewasm::apply::manifests::read_manifests(std::slice::from_ref(&file))
        .expect("read manifests");
    kubewasm::apply::manifests::apply_manifests(&team, &printed, Duration::from_secs(20))
        .await
        .expect("the team applies what approve --namespace printed");
    let roles = env.api(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        Some("team-a"),
    );
    for role in [&all[2], &all[4]] {
        let name = role["metadata"]["name"].as_str().unwrap();
        let stored = get(&roles, name).await.expect("the Role was applied");
        assert_eq!(
            serde_json::to_value(&stored).unwrap()["rules"],
            role["rules"]
        );
    }
    let plugins = env.api(
        "kubewasm.dev/v1alpha1",
        "NamespacedPlugin",
        "namespacedplugins",
        Some("team-a"),
    );
    let stored = get(&plugins, p)
        .await
        .expect("the NamespacedPlugin was applied");
    assert_eq!(
        serde_json::to_value(&stored).unwrap()["spec"],
        object["spec"]
    );
    // The team holds every right its Roles grant: what a real API server's escalation
    // check asks before it stores a Role (the embedded one does not check).
    for role in [&all[2], &all[4]] {
        for rule in role["rules"].as_array().unwrap() {
            let names: Vec<Option<&str>> = match rule["resourceNames"].as_array() {
                Some(n) => n.iter().map(Value::as_str).collect(),
                None => vec![None],
            };
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        for name in &names {
                            let asked = (
                                group.as_str().unwrap(),
                                resource.as_str().unwrap(),
                                *name,
                                verb.as_str().unwrap(),
                            );
                            assert!(
                                may(&env, TEAM_USER, "team-a", asked).await,
                                "the team lacks {asked:?}, which its Roles grant"
                            );
                        }
                    }
                }
            }
        }
    }

    // The same objects in team-b: the team may create none of them.
    let elsewhere = dir.path().join("team-b.yaml");
    std::fs::write(&elsewhere, out.replace("team-a", "team-b")).unwrap();
    for d in kubewasm::apply::manifests::read_manifests(std::slice::from_ref(&elsewhere))
        .expect("read manifests")
    {
        let e = kubewasm::apply::manifests::apply_manifests(
            &team,
            std::slice::from_ref(&d),
            Duration::from_secs(20),
        )
        .await
        .expect_err("the team may not create it in team-b");
        assert!(e.to_string().contains("forbidden"), "{e}");
    }

    // A plugin reaching out of its namespace, or a cluster-scoped kind: refused, named.
    let testkit = test_plugin("testkit");
    for (grant_in, reason) in [
        ("team-b", "OutsideNamespace"),
        ("team-a", "ClusterScopedKind"),
    ] {
        let settings = dir.path().join(format!("testkit-{grant_in}.yaml"));
        std::fs::write(&settings, format!("namespaceGrant: [{grant_in}]\n")).unwrap();
        let (code, _, err) = kubewasm(&[
            "approve",
            "--namespace",
            "team-a",
            testkit.to_str().unwrap(),
            "--settings",
            settings.to_str().unwrap(),
            "--module",
            MODULE,
        ]);
        assert_ne!(code, 0, "{err}");
        // The reason, and the grant at fault (and where it reaches).
        assert!(
            err.contains(reason) && err.contains("grant") && err.contains("Namespace"),
            "{grant_in}: {err}"
        );
        assert_eq!(err.contains("team-b"), grant_in == "team-b", "{err}");
    }
}

/// Documents as one YAML stream.
fn to_stream(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
        .collect()
}
