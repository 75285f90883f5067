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

/// `kubewasm rbac` for the plugin directory, resolved on the server, with `extra` flags.
fn generated_rbac(env: &Env, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "rbac", "--plugins"])
        .arg(&env.plugins)
        .arg("--approvals")
        .arg(&env.approvals)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["--service-account-namespace", "kubewasm"])
        .args(extra)
        .output()
        .expect("kubewasm rbac runs")
}

/// `kubewasm rbac` for the plugin directory, resolved on the server, applied as admin.
async fn apply_generated_rbac(env: &Env) -> Vec<Value> {
    let out = generated_rbac(env, &[]);
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
    start_host_as_service_account_with(env, &[])
}

/// [`start_host_as_service_account`] with more flags.
fn start_host_as_service_account_with(env: &Env, extra: &[&str]) -> HostProcess {
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
    .args(extra)
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
    let host_role = only(&docs, "ClusterRole", "kubewasm:kubewasm");
    assert!(
        host_role["rules"].as_array().unwrap().iter().all(
            |r| r["verbs"] == json!(["get", "list", "watch"])
                || r["resources"] == json!(["events"])
                // The status of Plugin objects is the host's to write.
                || r["resources"] == json!(["plugins/status"])
                // It asks at start what it may do, and whether each plugin's account
                // may read what the plugin is approved to read.
                || r["resources"] == json!(["selfsubjectaccessreviews"])
                || r["resources"] == json!(["subjectaccessreviews"])
                || r.get("nonResourceURLs").is_some()
        ),
        "the host only reads (and records Events and Plugins' status, and asks what it may do): {host_role:#}"
    );
    for name in ["good", "bad"] {
        only(&docs, "ServiceAccount", &format!("kubewasm-{name}"));
        only(
            &docs,
            "ClusterRoleBinding",
            &format!("kubewasm:kubewasm-{name}"),
        );
        // Each plugin reads as itself: its own role may read what it watches.
        let own = only(&docs, "ClusterRole", &format!("kubewasm:kubewasm-{name}"));
        assert!(
            own["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["resources"] == json!(["configmaps"])
                    && r["verbs"].to_string().contains("watch")),
            "{own:#}"
        );
    }

    // `bad`'s own role loses `patch` (server-side apply is a PATCH; it keeps what it
    // reads with, so it loads), while the host's identity is given every verb on
    // ConfigMaps.
    let roles = rbac_api(&env, "ClusterRole", "clusterroles");
    replace(
        &env,
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "kubewasm:kubewasm-bad"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                          "verbs": ["get", "list", "watch", "create"]}]}),
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

/// GET over plain HTTP/1.0: (status, body).
fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The address of the host's /readyz and /status.
async fn ops_addr(host: &HostProcess) -> String {
    let line = host
        .wait_log("ops endpoint", |l| {
            field(l, "message").starts_with("serving /healthz")
        })
        .await;
    field(&line, "addr").to_string()
}

/// A generated role without its rules on `resource`.
fn without(docs: &[Value], kind: &str, name: &str, resource: &str) -> Value {
    let mut role = only(docs, kind, name).clone();
    let rules: Vec<Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["resources"].to_string().contains(resource))
        .cloned()
        .collect();
    role["rules"] = Value::Array(rules);
    role
}

/// The host's requests listing ConfigMaps (not watching them).
fn configmap_lists(env: &Env) -> usize {
    env.server
        .requests()
        .iter()
        .filter(|r| {
            r.client == HOST_TOKEN
                && r.method == "GET"
                && r.path.starts_with("/api/v1/configmaps")
                && !r.path.contains("watch=true")
        })
        .count()
}

const MISSING_LINE: &str = "the host's RBAC does not allow what it needs";
const CANNOT_WRITE_LINE: &str = "plugin not ready: the host cannot write as it";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_names_the_rules_its_rbac_lacks_once_and_stands_for_leader_only_when_ready() {
    let env = rbac_env(false).await;
    env.approve_testkit("kit");
    env.add_plugin_unapproved(&test_plugin("testkit"), "kit", Some("name: kit\n"));
    let docs = apply_generated_rbac(&env).await;
    // The host's ClusterRole loses its ConfigMap rule: testkit's watch is forbidden.
    let roles = rbac_api(&env, "ClusterRole", "clusterroles");
    replace(
        &env,
        &roles,
        without(&docs, "ClusterRole", "kubewasm:kubewasm", "configmaps"),
    )
    .await;
    env.server.record_requests();
    let host = start_host_as_service_account_with(
        &env,
        &[
            "--leader-elect",
            "--lease-namespace",
            "kubewasm",
            "--lease-name",
            "kw-test",
            "--retry-period",
            "200ms",
            "--identity",
            "pod-0",
        ],
    );
    let addr = ops_addr(&host).await;
    // One error line, naming each missing rule and what it is for.
    let line = host
        .wait_log("the missing rules named", |l| {
            field(l, "message").starts_with(MISSING_LINE)
        })
        .await;
    let missing = field(&line, "missing");
    for rule in [
        "list configmaps cluster-wide (for the watch of v1/ConfigMap)",
        "watch configmaps cluster-wide (for the watch of v1/ConfigMap)",
    ] {
        assert!(missing.contains(rule), "{rule}: {line}");
    }
    assert!(field(&line, "message").contains("kubewasm rbac"), "{line}");
    // The watch is tried again after its backoff (5 s after a 403); the second refusal
    // logs nothing new: one WARN for the state, not one per retry.
    eventually("a second list of ConfigMaps", CONVERGE, || async {
        (configmap_lists(&env) >= 2).then_some(())
    })
    .await;
    let (status, body) = http_get(&addr, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("RBAC lacks rules"), "{body}");
    let (_, verbose) = http_get(&addr, "/readyz?verbose");
    assert!(
        verbose.contains(
            "[-]permission list configmaps cluster-wide: denied by the host's RBAC (needed for the watch of v1/ConfigMap)"
        ),
        "{verbose}"
    );
    assert!(
        verbose
            .contains("[-]plugin kit 1: forbidden: the host may not list configmaps cluster-wide"),
        "{verbose}"
    );
    let (_, status_doc) = http_get(&addr, "/status");
    let doc: Value = serde_json::from_str(&status_doc).expect("/status is JSON");
    let rules: Vec<&str> = doc["permissions"]["missing"]
        .as_array()
        .expect("permissions.missing")
        .iter()
        .filter_map(|m| m["rule"].as_str())
        .collect();
    assert_eq!(
        rules,
        [
            "list configmaps cluster-wide",
            "watch configmaps cluster-wide"
        ],
        "{doc:#}"
    );
    assert_eq!(
        doc["plugins"][0]["conditions"][0]["reason"], "Forbidden",
        "{doc:#}"
    );
    let errors = host.matching(|l| field(l, "message").starts_with(MISSING_LINE));
    assert_eq!(errors.len(), 1, "{}", host.dump());
    let warns = host.matching(|l| {
        field(l, "level") == "WARN" && field(l, "message").starts_with("watch error")
    });
    assert_eq!(warns.len(), 1, "one WARN per state: {}", host.dump());
    assert!(
        field(&warns[0], "error").contains("403 Forbidden"),
        "{}",
        warns[0]
    );
    assert!(
        host.matching(|l| field(l, "target").starts_with("kube_runtime"))
            .is_empty(),
        "kube's watcher repeats each error: {}",
        host.dump()
    );
    // Not ready, so not a candidate: no Lease request by the time of the second list
    // (an eager candidate asks every 200 ms, for seconds by now).
    let lease_requests = env
        .server
        .requests()
        .iter()
        .filter(|r| r.client == HOST_TOKEN && r.path.contains("/leases"))
        .count();
    assert_eq!(lease_requests, 0, "a host not ready stood for leader");

    // The rule granted: noticed by the periodic recheck (10 s), the watch syncs without
    // waiting out its backoff, the host is ready, then leads under a per-process identity.
    replace(
        &env,
        &roles,
        only(&docs, "ClusterRole", "kubewasm:kubewasm").clone(),
    )
    .await;
    host.wait_log("the grant noticed", |l| {
        field(l, "message").starts_with("the host's RBAC now allows")
    })
    .await;
    eventually("ready", CONVERGE, || async {
        (http_get(&addr, "/readyz").0 == 200).then_some(())
    })
    .await;
    let leading = host
        .wait_log("leading", |l| field(l, "message") == "became leader")
        .await;
    assert!(
        field(&leading, "identity").starts_with("pod-0_"),
        "{leading}"
    );
    let (_, status_doc) = http_get(&addr, "/status");
    let doc: Value = serde_json::from_str(&status_doc).expect("/status is JSON");
    assert_eq!(doc["permissions"]["missing"], json!([]), "{doc:#}");
    host.assert_plain_values();
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_the_host_cannot_impersonate_is_not_ready_with_one_line_saying_why() {
    let env = rbac_env(false).await;
    env.approve_testkit("kit");
    env.add_plugin_unapproved(&test_plugin("testkit"), "kit", Some("name: kit\n"));
    let docs = apply_generated_rbac(&env).await;
    // The host's Role at home loses `impersonate` on the plugin's ServiceAccount.
    let home_roles = env.api(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        Some("kubewasm"),
    );
    replace(
        &env,
        &home_roles,
        without(&docs, "Role", "kubewasm", "serviceaccounts"),
    )
    .await;
    let host = start_host_as_service_account(&env);
    let addr = ops_addr(&host).await;
    let line = host
        .wait_log("the plugin reported", |l| {
            field(l, "message") == CANNOT_WRITE_LINE
        })
        .await;
    let why = field(&line, "error");
    assert!(
        why.starts_with(
            "the host may not impersonate ServiceAccount kubewasm-kit in namespace kubewasm"
        ),
        "{line}"
    );
    for fix in ["kubewasm rbac", "--plugin-namespace"] {
        assert!(why.contains(fix), "{fix}: {line}");
    }
    assert_eq!(field(&line, "plugin"), "kit", "{line}");
    // The host serves (other plugins would); the plugin shows why it cannot.
    eventually("host ready", CONVERGE, || async {
        (http_get(&addr, "/readyz").0 == 200).then_some(())
    })
    .await;
    let (_, verbose) = http_get(&addr, "/readyz?verbose");
    assert!(
        verbose.contains(
            "[-]plugin kit 1: not ready: the host may not impersonate ServiceAccount kubewasm-kit in namespace kubewasm"
        ),
        "{verbose}"
    );
    let (_, status_doc) = http_get(&addr, "/status");
    let doc: Value = serde_json::from_str(&status_doc).expect("/status is JSON");
    let ready = &doc["plugins"][0]["conditions"][0];
    assert_eq!(ready["status"], "False", "{doc:#}");
    assert_eq!(ready["reason"], "CannotWrite", "{doc:#}");
    // Said once, at load; not again per write.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, trigger("a", "kit")).await;
    host.wait_log("the write refused", |l| {
        field(l, "message") == "event failed" && field(l, "plugin") == "kit"
    })
    .await;
    let lines = host.matching(|l| field(l, "message") == CANNOT_WRITE_LINE);
    assert_eq!(lines.len(), 1, "{}", host.dump());
    host.assert_plain_values();
    assert_eq!(host.stop(), Some(0));
}

/// Roles and bindings outside the install's namespace are named after it, so two
/// installs never share one; and one of the same name that another install (or someone
/// else) owns is not taken over silently: `kubewasm rbac --kubeconfig` refuses, naming
/// it, unless `--take-over`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_does_not_take_over_another_installs_roles() {
    let env = rbac_env(false).await;
    let rbac = |extra: &[&str]| {
        let out = generated_rbac(&env, extra);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = rbac(&[]);
    assert_eq!(code, Some(0), "{err}");
    let objects: Vec<Value> = out
        .split("\n---\n")
        .filter_map(|d| serde_yaml_ng::from_str::<Value>(d.trim_start_matches("---\n")).ok())
        .filter(|d| d.is_object())
        .collect();
    let cluster: Vec<&Value> = objects
        .iter()
        .filter(|o| o["metadata"]["namespace"].is_null())
        .collect();
    assert!(!cluster.is_empty(), "{out}");
    for o in &objects {
        assert_eq!(
            o["metadata"]["labels"]["kubewasm.dev/install"], "kubewasm",
            "{o:#}"
        );
    }
    for o in &cluster {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        assert!(
            name.starts_with("kubewasm:"),
            "named after its install: {o:#}"
        );
    }

    let roles = env.api(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        None,
    );
    let other = |labels: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "kubewasm:kubewasm", "labels": labels},
               "rules": []})
    };
    env.create(&roles, other(json!({"kubewasm.dev/install": "team-b"})))
        .await;
    let (code, out, err) = rbac(&[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.is_empty(), "nothing printed to apply: {out}");
    assert!(
        err.contains(
            "ClusterRole kubewasm:kubewasm exists and belongs to the install in namespace team-b"
        ) && err.contains("--take-over"),
        "{err}"
    );
    let (code, out, err) = rbac(&["--take-over"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("name: kubewasm:kubewasm"), "{out}");
    assert!(err.contains("takes these over"), "{err}");

    // Not a kubewasm install's at all: refused too.
    roles
        .delete("kubewasm:kubewasm", &DeleteParams::default())
        .await
        .expect("delete");
    env.create(&roles, other(json!({}))).await;
    let (code, _, err) = rbac(&[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is not a kubewasm install's"), "{err}");

    // This install's own: applied again as an update, no question asked.
    roles
        .delete("kubewasm:kubewasm", &DeleteParams::default())
        .await
        .expect("delete");
    env.create(&roles, other(json!({"kubewasm.dev/install": "kubewasm"})))
        .await;
    let (code, _, err) = rbac(&[]);
    assert_eq!(code, Some(0), "{err}");
}
