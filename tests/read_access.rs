//! A plugin reads only what its own ServiceAccount may read, where its approval lets it.
//! Against the real binary and the embedded API server: with RBAC enforced, a plugin
//! approved to read Secrets whose ServiceAccount may not read them is refused at load
//! (the log names each missing rule, /status lists it as rejected) while a well-behaved
//! plugin keeps working; granting the Role loads it at the next access review, revoking it
//! unloads it. And a plugin approved to read Secrets in one namespace cannot read another
//! namespace's, though its own watch is cluster-wide.

mod support;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::*;

const HOST_TOKEN: &str = "host-token";
const HOST_USER: &str = "system:serviceaccount:kubewasm:kubewasm";

/// The well-behaved plugin's settings: testkit named `good`, copying its ConfigMaps.
const GOOD: &str = "name: good\nselector: kubewasm.dev/good=yes\n";

fn configmap(ns: &str, name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "data": data})
}

/// The good plugin handles a fresh object.
async fn good_keeps_working(env: &Env, tag: &str) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let name = format!("good-{tag}");
    env.create(
        &cms,
        configmap(
            "default",
            &name,
            json!({"kubewasm.dev/good": "yes"}),
            json!({"value": tag}),
        ),
    )
    .await;
    let out = eventually(&format!("{name}-out"), CONVERGE, || async {
        get(&cms, &format!("{name}-out")).await
    })
    .await;
    assert_eq!(out.data["data"]["value"], json!(tag));
}

/// Trigger the hostile plugin `plugin`'s `read-secrets` with ConfigMap `default/cm`; its
/// report (`<cm>-out`).
async fn read_secrets(env: &Env, plugin: &str, cm: &str) -> serde_json::Map<String, Value> {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap(
            "default",
            cm,
            json!({"kubewasm.dev/hostile": plugin}),
            json!({"attack": "read-secrets"}),
        ),
    )
    .await;
    let out = eventually(&format!("{cm}-out"), CONVERGE, || async {
        get(&cms, &format!("{cm}-out")).await
    })
    .await;
    out.data["data"].as_object().cloned().unwrap_or_default()
}

fn entry<'a>(data: &'a serde_json::Map<String, Value>, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or("<absent>")
}

async fn namespace(env: &Env, name: &str) {
    let nss = env.api("v1", "Namespace", "namespaces", None);
    env.create(
        &nss,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
}

/// Secret `default/mine` and, in namespace `other`, Secret `other/victim`.
async fn secrets(env: &Env) {
    namespace(env, "other").await;
    for (ns, name, password) in [("default", "mine", "own"), ("other", "victim", "hunter2")] {
        let secrets = env.api("v1", "Secret", "secrets", Some(ns));
        env.create(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "namespace": ns},
                   "stringData": {"password": password}}),
        )
        .await;
    }
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

/// `kubewasm run` as the host's ServiceAccount, impersonating plugins' ServiceAccounts in
/// `kubewasm`, reviewing their access every second.
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
    .args(["--access-review-interval", "1s"])
    .args(["--discovery-interval", "300ms", "--retry-base", "100ms"])
    .args(["--retry-max", "2s", "--metrics-addr", "127.0.0.1:0"])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    HostProcess::spawn_command(cmd)
}

/// GET over plain HTTP/1.0: the body.
fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// Replace the Role `role` (its namespace and name) with `role`.
async fn replace_role(env: &Env, role: &Value) {
    let ns = role["metadata"]["namespace"].as_str().unwrap();
    let name = role["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> =
        env.api("rbac.authorization.k8s.io/v1", "Role", "roles", Some(ns));
    let _ = api.delete(name, &DeleteParams::default()).await;
    let mut fresh = role.clone();
    if let Some(meta) = fresh["metadata"].as_object_mut() {
        meta.retain(|k, _| ["name", "namespace", "labels", "annotations"].contains(&k.as_str()));
    }
    let o: DynamicObject = serde_json::from_value(fresh).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_account_may_not_read_what_it_is_approved_for_is_refused_until_granted() {
    let env = Env::with_rbac(false, &[(HOST_TOKEN, HOST_USER)]).await;
    namespace(&env, "kubewasm").await;
    secrets(&env).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    // Approved (as `kubewasm inspect --approval` approves it) to read Secrets where it
    // watches: namespace default.
    env.add_plugin(
        &test_plugin("hostile"),
        "peeker",
        Some("name: peeker\nwatchNamespace: default\nreadKinds: [v1/Secret]\n"),
    );
    let docs = apply_generated_rbac(&env).await;
    // `kubewasm rbac` gives peeker's own account the reads its approval covers, in a Role
    // in default, beside its writes.
    let granted = docs
        .iter()
        .find(|d| {
            d["kind"] == "Role"
                && d["metadata"]["name"] == "kubewasm:kubewasm-peeker"
                && d["metadata"]["namespace"] == "default"
        })
        .unwrap_or_else(|| panic!("no Role kubewasm:kubewasm-peeker in default: {docs:#?}"))
        .clone();
    assert!(
        granted["rules"].as_array().unwrap().iter().any(|r| {
            r["resources"] == json!(["secrets"]) && r["verbs"] == json!(["get", "list", "watch"])
        }),
        "{granted:#}"
    );
    // Its account may not read Secrets: the rule is taken out of its Role.
    let mut lacking = granted.clone();
    lacking["rules"]
        .as_array_mut()
        .unwrap()
        .retain(|r| !r["resources"].to_string().contains("secrets"));
    replace_role(&env, &lacking).await;

    let host = start_host_as_service_account(&env);
    let refused = host
        .wait_log("peeker refused at load", |l| {
            field(l, "message") == "plugin rejected" && field(l, "source").ends_with("peeker.wasm")
        })
        .await;
    let error = field(&refused, "error");
    for rule in [
        "get secrets in namespace default",
        "list secrets in namespace default",
        "watch secrets in namespace default",
    ] {
        assert!(error.contains(rule), "{rule} not named: {error}");
    }
    assert!(
        error.contains("ServiceAccount kubewasm-peeker in namespace kubewasm"),
        "{error}"
    );
    // Only what is missing is named: the ConfigMap reads its Role still gives are not.
    assert!(!error.contains("configmaps"), "{error}");
    good_keeps_working(&env, "1").await;
    let ops = host
        .wait_log("ops endpoint", |l| {
            field(l, "message").starts_with("serving /healthz")
        })
        .await;
    let addr = field(&ops, "addr").to_string();
    let status: Value = serde_json::from_str(&http_get(&addr, "/status")).expect("/status");
    let rejected = status["rejected"]
        .as_array()
        .and_then(|r| {
            r.iter().find(|e| {
                e["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("peeker.wasm"))
            })
        })
        .unwrap_or_else(|| panic!("peeker not rejected in /status: {status:#}"));
    assert_eq!(
        rejected["missingRules"],
        json!([
            "get secrets in namespace default",
            "list secrets in namespace default",
            "watch secrets in namespace default"
        ]),
        "{status:#}"
    );
    assert!(
        !status["plugins"].to_string().contains("peeker"),
        "{status:#}"
    );
    let verbose = http_get(&addr, "/readyz?verbose");
    assert!(
        verbose.contains(
            "may not read what it is approved to read: list secrets in namespace default"
        ),
        "{verbose}"
    );

    // Granted: it loads at the next review, and reads its own namespace's Secrets.
    replace_role(&env, &granted).await;
    host.wait_log("peeker loaded once granted", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "peeker"
    })
    .await;
    let data = read_secrets(&env, "peeker", "peek").await;
    assert_eq!(entry(&data, "listOwn"), "ok: default/mine", "{data:?}");

    // Revoked: it is unloaded at the next review; the good plugin goes on.
    replace_role(&env, &lacking).await;
    let unloaded = host
        .wait_log("peeker unloaded once revoked", |l| {
            field(l, "message")
                == "plugin unloaded: its ServiceAccount may not read what it is approved to read"
                && field(l, "plugin") == "peeker"
        })
        .await;
    assert!(
        field(&unloaded, "error").contains("list secrets in namespace default"),
        "{unloaded}"
    );
    good_keeps_working(&env, "2").await;
    let status: Value = serde_json::from_str(&http_get(&addr, "/status")).expect("/status");
    assert!(
        !status["plugins"].to_string().contains("peeker"),
        "{status:#}"
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_approved_to_read_in_one_namespace_cannot_read_another() {
    let env = Env::with_crds(false).await;
    secrets(&env).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    // Its own watch is cluster-wide; its Secret read is approved in default only.
    env.add_plugin_unapproved(
        &test_plugin("hostile"),
        "peeker",
        Some("name: peeker\nreadKinds: [v1/Secret]\n"),
    );
    env.approve(
        "peeker",
        "watches:\n- {apiVersion: v1, kind: ConfigMap}\n\
         reads:\n- {apiVersion: v1, kind: Secret, namespaces: [default]}\n\
         grants:\n- {apiGroups: [\"\"], kinds: [ConfigMap], namespaces: [default], verbs: [create]}\n",
    );
    let host = env.start_host(&[]);
    host.wait_log("the Secret cache synced", |l| {
        field(l, "message") == "cache synced" && field(l, "resource").starts_with("secrets")
    })
    .await;
    let data = read_secrets(&env, "peeker", "peek").await;
    eprintln!("{}", serde_json::to_string_pretty(&data).unwrap());
    assert_eq!(entry(&data, "listOwn"), "ok: default/mine");
    assert!(
        entry(&data, "listAll").starts_with("err: v1/Secret across all namespaces"),
        "{data:?}"
    );
    assert!(
        entry(&data, "getOther").starts_with("err: v1/Secret in namespace other"),
        "{data:?}"
    );
    assert!(!serde_json::to_string(&data).unwrap().contains("hunter2"));
    good_keeps_working(&env, "1").await;
    assert_eq!(host.stop(), Some(0));
}
