//! The operator approves, the plugin requests; each plugin writes as its own ServiceAccount.
//! Against the embedded API server with RBAC enforced and the real binary: the RBAC
//! `kubewasm rbac` generates from the approvals is applied, the host runs as its ServiceAccount and
//! impersonates `kubewasm-<plugin>` for each plugin's writes, so a plugin whose own role
//! lacks a verb gets 403 even though the host's identity could do it; a new version asking
//! for more than was approved is refused with the old one serving; and the example
//! scenario runs under the generated RBAC.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::*;

const HOST_TOKEN: &str = "host-token";
const HOST_USER: &str = "system:serviceaccount:kubewasm:kubewasm";

fn trigger(name: &str, who: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"kubewasm.dev/testkit": who}},
           "data": {"value": "1"}})
}

/// An RBAC-enforcing server with the host's ServiceAccount and its namespace.
async fn rbac_env(crds: bool) -> Env {
    let env = Env::with_rbac(crds, &[(HOST_TOKEN, HOST_USER)]).await;
    let namespaces = env.api("v1", "Namespace", "namespaces", None);
    env.create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubewasm"}}),
    )
    .await;
    env
}

/// `kubewasm rbac` for the plugin directory, resolved on the server, applied as admin.
async fn apply_generated_rbac(env: &Env) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "rbac", "--plugins"])
        .arg(&env.plugins)
        .arg("--approvals")
        .arg(&env.approvals)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["--service-account-namespace", "kubewasm"])
        .output()
        .expect("kubewasm rbac runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubewasm rbac failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = env.dir.path().join("rbac.yaml");
    std::fs::write(&file, &text).unwrap();
    env.apply_path(&file).await;
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

/// `kubewasm run` as the host's ServiceAccount (token only), impersonating plugins'
/// ServiceAccounts in `kubewasm`.
fn start_host_as_service_account(env: &Env) -> HostProcess {
    let kubeconfig: PathBuf = env.kubeconfig_for(HOST_TOKEN);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args([
        "--log-format",
        "json",
        "--log",
        "info,kubewasm=debug",
        "run",
    ])
    .arg("--plugins")
    .arg(&env.plugins)
    .arg("--approvals")
    .arg(&env.approvals)
    .arg("--kubeconfig")
    .arg(&kubeconfig)
    .args(["--plugin-namespace", "kubewasm"])
    .args(["--discovery-interval", "300ms", "--retry-base", "100ms"])
    .args(["--retry-max", "2s", "--metrics-addr", "127.0.0.1:0"])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    HostProcess::spawn_command(cmd)
}

fn rbac_api(env: &Env, kind: &str, plural: &str) -> Api<DynamicObject> {
    env.api("rbac.authorization.k8s.io/v1", kind, plural, None)
}

async fn replace(env: &Env, api: &Api<DynamicObject>, obj: Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let _ = api.delete(&name, &DeleteParams::default()).await;
    let o: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
    let _ = env;
}

fn only<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {docs:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_gets_403_for_what_its_own_role_lacks_though_the_host_could() {
    let env = rbac_env(false).await;
    for name in ["good", "bad"] {
        env.approve_testkit(name);
        env.add_plugin_unapproved(
            &test_plugin("testkit"),
            name,
            Some(&format!("name: {name}\n")),
        );
    }
    let docs = apply_generated_rbac(&env).await;
    // The host may impersonate exactly the two plugins' ServiceAccounts, and holds no
    // plugin's grants itself.
    let home = only(&docs, "Role", "kubewasm");
    let impersonate = home["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verbs"] == json!(["impersonate"]))
        .expect("an impersonate rule");
    assert_eq!(
        impersonate["resourceNames"],
        json!(["kubewasm-bad", "kubewasm-good"])
    );
    assert_eq!(impersonate["resources"], json!(["serviceaccounts"]));
    let host_role = only(&docs, "ClusterRole", "kubewasm");
    assert!(
        host_role["rules"].as_array().unwrap().iter().all(
            |r| r["verbs"] == json!(["get", "list", "watch"])
                || r["resources"] == json!(["events"])
                // The status of Plugin objects is the host's to write.
                || r["resources"] == json!(["plugins/status"])
                || r.get("nonResourceURLs").is_some()
        ),
        "the host only reads (and records Events and Plugins' status): {host_role:#}"
    );
    for name in ["good", "bad"] {
        only(&docs, "ServiceAccount", &format!("kubewasm-{name}"));
        only(&docs, "ClusterRoleBinding", &format!("kubewasm-{name}"));
    }

    // `bad`'s own role loses `patch` (server-side apply is a PATCH), while the host's
    // identity is given every verb on ConfigMaps.
    let roles = rbac_api(&env, "ClusterRole", "clusterroles");
    replace(
        &env,
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "kubewasm-bad"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]}),
    )
    .await;
    replace(
        &env,
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "host-configmaps"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
    )
    .await;
    replace(
        &env,
        &rbac_api(&env, "ClusterRoleBinding", "clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "host-configmaps"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "host-configmaps"},
               "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kubewasm"}]}),
    )
    .await;

    let host = start_host_as_service_account(&env);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, trigger("g", "good")).await;
    env.create(&cms, trigger("b", "bad")).await;

    let out = eventually("g-out written by good", CONVERGE, || async {
        get(&cms, "g-out").await
    })
    .await;
    assert_eq!(managers(&out), ["kubewasm-good"], "{}", host.dump());
    let failed = host
        .wait_log("bad's write refused", |l| {
            field(l, "message") == "event failed" && field(l, "plugin") == "bad"
        })
        .await;
    let error = field(&failed, "error");
    assert!(
        error.contains(
            "configmaps \"b-out\" is forbidden: User \"system:serviceaccount:kubewasm:kubewasm-bad\" \
             cannot patch resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        "{failed}"
    );
    assert!(field(&failed, "object").contains("default/b"), "{failed}");
    assert!(
        get(&cms, "b-out").await.is_none(),
        "nothing written for bad"
    );
    // The good plugin keeps working after the refusal.
    env.create(&cms, trigger("g2", "good")).await;
    eventually("g2-out", CONVERGE, || async { get(&cms, "g2-out").await }).await;
    assert!(get(&cms, "b-out").await.is_none());
    assert_eq!(host.stop(), Some(0));
}

/// Replace `dest` atomically with `text`.
fn write_atomic(dest: &Path, text: &str) {
    let tmp = dest.with_file_name(format!(
        ".{}.tmp",
        dest.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_approved_is_refused_at_load_and_on_reload_the_old_version_serves() {
    let env = Env::with_crds(false).await;
    // Nothing approved: the plugin is refused, naming each watch, read and grant it asks
    // for, with what to do.
    env.add_plugin_unapproved(
        &test_plugin("testkit"),
        "unapproved",
        Some("name: unapproved\nreadAll: true\n"),
    );
    env.approve_testkit("testkit");
    env.add_plugin_unapproved(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&["--reload-debounce", "200ms"]);
    let refused = host
        .wait_log("unapproved refused", |l| {
            field(l, "message") == "plugin rejected"
                && field(l, "source").ends_with("unapproved.wasm")
        })
        .await;
    let error = field(&refused, "error");
    assert!(
        error.starts_with("plugin unapproved asks for more than the operator approved: "),
        "{refused}"
    );
    for extra in [
        r#"watch v1/ConfigMap in all namespaces (watch "configmaps")"#,
        "create core ConfigMap (all namespaces and cluster-scoped)",
        "read v1/ConfigMap",
        "nothing is approved for it: `kubewasm approve FILE.wasm`",
        "--approvals",
    ] {
        assert!(error.contains(extra), "{extra}: {refused}");
    }
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, trigger("a", "testkit")).await;
    let out = eventually("a-out", CONVERGE, || async { get(&cms, "a-out").await }).await;
    assert_eq!(out.data["data"]["version"], "1");
    env.create(&cms, trigger("u", "unapproved")).await;

    // A new version asking for `*` on everything: refused, naming the extra rules.
    write_atomic(
        &env.plugins.join("testkit.yaml"),
        "grantAll: true\nversion: \"2\"\n",
    );
    let rejected = host
        .wait_log("escalation refused", |l| {
            field(l, "message") == "plugin rejected"
                && field(l, "source").ends_with("/testkit.wasm")
        })
        .await;
    let error = field(&rejected, "error");
    for extra in [
        "plugin testkit asks for more than the operator approved",
        "create * * (all namespaces and cluster-scoped, with force)",
        "delete * * (all namespaces and cluster-scoped, with force)",
        "patch-status * *",
    ] {
        assert!(error.contains(extra), "{extra}: {rejected}");
    }
    assert!(!error.contains('\n'), "one line: {error}");
    assert_eq!(field(&rejected, "still_serving"), "testkit", "{rejected}");
    // The old version still serves.
    env.create(&cms, trigger("b", "testkit")).await;
    let out = eventually("b-out", CONVERGE, || async { get(&cms, "b-out").await }).await;
    assert_eq!(
        out.data["data"]["version"], "1",
        "the approved version answers"
    );
    assert!(
        host.matching(|l| field(l, "message") == "plugin replaced")
            .is_empty(),
        "{}",
        host.dump()
    );
    assert!(
        get(&cms, "u-out").await.is_none(),
        "the unapproved plugin never ran"
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_scenario_runs_under_the_generated_rbac() {
    let env = rbac_env(true).await;
    // The examples' own approvals, as the demo uses them.
    std::fs::copy(
        root().join("plugins/approvals.yaml"),
        env.approvals.join("examples.yaml"),
    )
    .unwrap();
    for name in ["contentsite-provisioner", "mongodb-monitor"] {
        let wasm = example_plugin(name);
        // The example's own settings file.
        let settings = std::fs::read_to_string(wasm.with_extension("yaml")).unwrap();
        env.add_plugin_unapproved(&wasm, name, Some(&settings));
    }
    let docs = apply_generated_rbac(&env).await;
    assert!(
        docs.iter()
            .all(|d| d["metadata"]["annotations"]["kubewasm.dev/guessed"].is_null()),
        "everything resolved on the server"
    );
    let host = start_host_as_service_account(&env);
    let sites = env.sites();
    env.create(
        &sites,
        json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
               "metadata": {"name": "blog", "namespace": "default"},
               "spec": {"title": "Blog", "hostname": "blog.example.com"}}),
    )
    .await;
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let services = env.api("v1", "Service", "services", Some("default"));
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    let db = eventually("MongoDB blog-db", CONVERGE, || async {
        get(&dbs, "blog-db").await
    })
    .await;
    assert_eq!(
        managers(&db),
        ["kubewasm-contentsite-provisioner"],
        "{}",
        host.dump()
    );
    let svc = eventually("Service blog", CONVERGE, || async {
        get(&services, "blog").await
    })
    .await;
    assert_eq!(managers(&svc), ["kubewasm-contentsite-provisioner"]);
    eventually("ContentSite status", CONVERGE, || async {
        get(&sites, "blog")
            .await
            .filter(|s| !s.data["status"]["databaseRef"].is_null())
    })
    .await;
    let monitor = eventually("ServiceMonitor blog-db-monitor", CONVERGE, || async {
        get(&monitors, "blog-db-monitor").await
    })
    .await;
    assert_eq!(managers(&monitor), ["kubewasm-mongodb-monitor"]);
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}
