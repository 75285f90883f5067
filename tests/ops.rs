//! The operations surface: /healthz, /readyz, /metrics, and quarantine of failing plugins,
//! with the real binary against the embedded API server.

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::json;
use support::*;

/// GET over plain HTTP/1.0: (status, body).
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
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

/// The value of the first sample line starting with `prefix`.
fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Wait until the first `/metrics` sample starting with `prefix` reads `value`.
async fn wait_metric(addr: &str, prefix: &str, value: f64) {
    eventually(&format!("{prefix} at {value}"), CONVERGE, || {
        let (_, text) = http_get(addr, "/metrics");
        let reached = sample(&text, prefix) == Some(value);
        async move { reached.then_some(()) }
    })
    .await;
}

async fn ops_addr(host: &HostProcess) -> String {
    let line = host
        .wait_log("ops endpoint", |l| {
            field(l, "message").starts_with("serving /healthz")
        })
        .await;
    field(&line, "addr").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_not_held_back_by_unserved_kinds_and_metrics_count_the_scenario() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&example_plugin("mongodb-monitor"), "mongodb-monitor", None);
    let host = env.start_host(&[]);
    let addr = ops_addr(&host).await;
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    // MongoDB is not served yet (its CRD may never be installed): that must not keep the
    // host unready, or a rolling update would never finish. /readyz?verbose says why.
    host.wait_log("waiting for MongoDB", |l| {
        field(l, "message").contains("not served")
    })
    .await;
    let (status, verbose) = http_get(&addr, "/readyz?verbose");
    assert_eq!(status, 200, "{verbose}");
    assert!(
        verbose.contains("[+]mongodb.com/v1/MongoDB not served (yet)"),
        "{verbose}"
    );
    assert!(
        verbose.contains("plugin mongodb-monitor")
            && verbose
                .contains("waiting for mongodb.com/v1/MongoDB (not served yet; not blocking)"),
        "{verbose}"
    );
    let (_, status) = http_get(&addr, "/status");
    let status: serde_json::Value = serde_json::from_str(&status).expect("/status is JSON");
    assert_eq!(status["ready"], json!(true), "{status}");
    let plugin = &status["plugins"][0];
    assert_eq!(plugin["name"], json!("mongodb-monitor"), "{status}");
    assert_eq!(
        plugin["conditions"][0]["reason"],
        json!("WaitingForResource"),
        "{status}"
    );
    assert_eq!(http_get(&addr, "/readyz").0, 200);
    let (_, text) = http_get(&addr, "/metrics");
    assert_eq!(
        sample(
            &text,
            r#"kubewasm_resource_unserved{resource="mongodb.com/v1/MongoDB"}"#
        ),
        Some(1.0),
        "{text}"
    );

    env.apply_path(&root().join("examples/crds")).await;
    let ready_addr = addr.clone();
    eventually("MongoDB served and its cache synced", CONVERGE, || {
        let a = ready_addr.clone();
        async move {
            let (status, verbose) = http_get(&a, "/readyz?verbose");
            (status == 200 && verbose.contains("[+]cache mongodb.com/v1/MongoDB synced"))
                .then_some(())
        }
    })
    .await;

    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    env.create(
        &dbs,
        json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {"name": "m", "namespace": "default"}, "spec": {"type": "ReplicaSet", "members": 1, "version": "7.0.12", "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}}}}),
    )
    .await;
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    eventually("m-monitor", CONVERGE, || async {
        get(&monitors, "m-monitor").await
    })
    .await;

    // The object lands before the host has read the answer and counted it: wait for the count.
    let metrics_addr = addr.clone();
    let text = eventually("the applied intent counted", CONVERGE, || {
        let a = metrics_addr.clone();
        async move {
            let (status, text) = http_get(&a, "/metrics");
            (status == 200 && text.contains(r#"verb="create",result="applied""#)).then_some(text)
        }
    })
    .await;
    let p = r#"plugin="mongodb-monitor""#;
    assert!(
        sample(
            &text,
            &format!(r#"kubewasm_events_total{{{p},event="added"}}"#)
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            &format!(r#"kubewasm_intents_total{{{p},verb="create",result="applied"}}"#)
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            &format!(r#"kubewasm_plugin_call_seconds_count{{{p}}}"#)
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"kubewasm_plugin_info{{{p},version="0.1.0"}}"#)
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!(r#"kubewasm_plugin_quarantined{{{p}}}"#)),
        Some(0.0),
        "{text}"
    );
    assert!(text.contains("kubewasm_queue_depth"), "{text}");
    assert!(text.contains("kubewasm_watch_restarts_total"), "{text}");
    assert_eq!(host.stop(), Some(0));
}

fn trigger(name: &str, action: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"action": action, "value": name}})
}

fn quarantined(addr: &str) -> Option<f64> {
    sample(
        &http_get(addr, "/metrics").1,
        r#"kubewasm_plugin_quarantined{plugin="testkit"}"#,
    )
}

async fn quarantined_host(env: &Env, cooldown: &str) -> (HostProcess, String) {
    env.approve_testkit("testkit");
    std::fs::copy(test_plugin("testkit"), env.plugins.join("testkit.wasm")).unwrap();
    let host = env.start_host(&[
        "--quarantine-after",
        "3",
        "--quarantine-cooldown",
        cooldown,
        "--retry-max",
        "500ms",
        "--reload-debounce",
        "200ms",
    ]);
    let addr = ops_addr(&host).await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, trigger("bomb", "trap")).await;
    let line = host
        .wait_log("quarantined", |l| {
            field(l, "message").starts_with("plugin quarantined")
        })
        .await;
    assert_eq!(field(&line, "plugin"), "testkit", "{line}");
    assert!(field(&line, "reason").contains("trapped"), "{line}");
    assert_eq!(quarantined(&addr), Some(1.0));
    (host, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantined_plugin_gets_no_events_until_the_cooldown_passes() {
    let env = Env::with_crds(false).await;
    let (host, addr) = quarantined_host(&env, "2s").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, trigger("good", "copy")).await;
    // The host takes the new object's key and defers it (it says so), writing nothing.
    host.wait_log("good deferred by the quarantine", |l| {
        field(l, "message") == "plugin quarantined; event deferred"
            && field(l, "object") == "ConfigMap default/good"
    })
    .await;
    assert!(
        get(&cms, "good-out").await.is_none(),
        "a quarantined plugin handled an event"
    );
    assert!(
        host.matching(
            |l| field(l, "message") == "event" && field(l, "object") == "ConfigMap default/good"
        )
        .is_empty(),
        "a quarantined plugin was called"
    );
    // The bad object goes away; after the cooldown the waiting events are handled.
    cms.delete("bomb", &Default::default()).await.unwrap();
    eventually("good-out after the cooldown", CONVERGE, || async {
        get(&cms, "good-out").await
    })
    .await;
    // The write lands before the call returns and the gauge is cleared: waited on.
    wait_metric(
        &addr,
        r#"kubewasm_plugin_quarantined{plugin="testkit"}"#,
        0.0,
    )
    .await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_file_ends_a_quarantine_at_once() {
    let env = Env::with_crds(false).await;
    // A cooldown far longer than the test: only the new file can end this quarantine.
    let (host, addr) = quarantined_host(&env, "10m").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    cms.delete("bomb", &Default::default()).await.unwrap();
    let wasm = env.plugins.join("testkit.wasm");
    std::fs::copy(test_plugin("testkit-v2"), env.dir.path().join("v2.wasm")).unwrap();
    std::fs::rename(env.dir.path().join("v2.wasm"), &wasm).unwrap();
    host.wait_log("replaced", |l| field(l, "message") == "plugin replaced")
        .await;
    assert_eq!(quarantined(&addr), Some(0.0));
    env.create(&cms, trigger("after", "copy")).await;
    eventually("after-out from the new version", CONVERGE, || async {
        get(&cms, "after-out")
            .await
            .filter(|o| o.data["data"]["version"] == json!("2"))
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

/// A permanent failure (an intent outside the plugin's grant) is reported once per object
/// and cause: one error line, one Warning Event, the `Blocked` condition in `/status` and
/// the `kubewasm_blocked_objects` gauge. It is handled again when the object changes, but
/// the same failure is not reported again, and a fix clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_is_reported_once_and_shown_as_a_condition() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&[]);
    let addr = ops_addr(&host).await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let cm = |action: &str, value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "bad", "namespace": "default",
                            "labels": {"kubewasm.dev/testkit": "testkit"}},
               "data": {"action": action, "value": value}})
    };
    env.apply(&cms, "bad", cm("outside-grant", "1")).await;
    let status_addr = addr.clone();
    let status = eventually("the object blocked in /status", CONVERGE, || {
        let a = status_addr.clone();
        async move {
            let (_, body) = http_get(&a, "/status");
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            (v["plugins"][0]["blocked"].as_array()?.len() == 1).then_some(v)
        }
    })
    .await;
    let plugin = &status["plugins"][0];
    assert_eq!(
        plugin["blocked"][0]["object"],
        json!("default/bad"),
        "{status}"
    );
    assert_eq!(plugin["blocked"][0]["reason"], json!("refused"), "{status}");
    assert_eq!(
        plugin["conditions"][1]["type"],
        json!("Blocked"),
        "{status}"
    );
    assert_eq!(plugin["conditions"][1]["status"], json!("True"), "{status}");
    wait_metric(&addr, r#"kubewasm_blocked_objects{plugin="testkit"}"#, 1.0).await;

    // Two changes that fail the same way: handled (two more events), not reported again.
    // One at a time: two changes that reach the queue together are coalesced into one call.
    let handled = |h: &HostProcess| {
        h.matching(|l| {
            field(l, "message") == "event" && field(l, "object") == "ConfigMap default/bad"
        })
        .len()
    };
    for (v, calls) in [("2", 2), ("3", 3)] {
        env.apply(&cms, "bad", cm("outside-grant", v)).await;
        eventually("the change handled", CONVERGE, || async {
            (handled(&host) == calls).then_some(())
        })
        .await;
    }
    let reports = host.matching(|l| {
        field(l, "message") == "event failed" && field(l, "object") == "ConfigMap default/bad"
    });
    assert_eq!(reports.len(), 1, "{}", host.dump());
    let events = env.api("v1", "Event", "events", Some("default"));
    let warnings: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.data["involvedObject"]["name"] == json!("bad"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].data["count"], json!(1), "{warnings:?}");

    // Fixed: handled, and no longer blocked. The write lands before the call returns and
    // the queue clears the entry, so /status is waited on, not read once.
    env.apply(&cms, "bad", cm("copy", "4")).await;
    eventually("bad-out", CONVERGE, || async { get(&cms, "bad-out").await }).await;
    let status_addr = addr.clone();
    eventually("the object no longer blocked in /status", CONVERGE, || {
        let a = status_addr.clone();
        async move {
            let (_, body) = http_get(&a, "/status");
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            (v["plugins"][0]["blocked"] == json!([])).then_some(())
        }
    })
    .await;
    wait_metric(&addr, r#"kubewasm_blocked_objects{plugin="testkit"}"#, 0.0).await;
    assert_eq!(host.stop(), Some(0));
}

/// Wait until `client`'s watch of `plural` is open at the server.
async fn watch_open(env: &Env, client: &str, plural: &str) {
    eventually(&format!("{client} watching {plural}"), CONVERGE, || async {
        env.server
            .requests()
            .iter()
            .any(|r| {
                r.client == client
                    && r.path.contains(plural)
                    && r.path.contains("watch=true")
                    && r.executed.is_some()
            })
            .then_some(())
    })
    .await;
}

/// Wait until a write of `client` to a path containing `path` is held by the server.
async fn write_held(env: &Env, client: &str, path: &str) {
    eventually(
        &format!("{client}'s write to {path} held"),
        CONVERGE,
        || async {
            env.server
                .requests()
                .iter()
                .any(|r| {
                    r.client == client
                        && r.is_write()
                        && r.path.contains(path)
                        && r.executed.is_none()
                })
                .then_some(())
        },
    )
    .await;
}

/// A site deleted while the provisioner's intents are being applied: the status write at
/// the end of the call finds no site (404). That is the deletion racing the call, not a
/// failure of the plugin or the object: the write is skipped (counted as `gone`), no event
/// fails, nothing is parked, no Warning Event is recorded, the deletion is delivered next
/// and the children created meanwhile are collected. Deterministic: the host's writes are
/// held at the server while the site is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_deleted_during_its_call_is_not_a_failure() {
    const HOST: &str = "the-host";
    let env = Env::new().await;
    env.add_plugin(
        &example_plugin("contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    env.server.record_requests();
    let host = env.start_host_as(HOST, &[]);
    let addr = ops_addr(&host).await;
    watch_open(&env, HOST, "contentsites").await;
    let sites = env.sites();
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));

    // A first site, provisioned whole: the kinds its intents write are resolved from then
    // on, so the next call's first request is its first write.
    env.create(&sites, content_site("warm", 1)).await;
    eventually("the first site's status", CONVERGE, || async {
        get(&sites, "warm")
            .await
            .filter(|s| !s.data["status"]["databaseRef"].is_null())
    })
    .await;

    // Hold every new request of the host (its open watch keeps flowing), then let it
    // handle a new site: its first write, the MongoDB, waits at the server.
    env.server.stall_client(HOST);
    env.create(&sites, content_site("racy", 1)).await;
    write_held(&env, HOST, "/mongodb/racy-db").await;
    sites
        .delete("racy", &Default::default())
        .await
        .expect("delete the site");
    assert!(get(&sites, "racy").await.is_none());
    env.server.release_client(HOST);

    host.wait_log("the status write skipped", |l| {
        field(l, "message") == "patch-status ContentSite default/racy: skipped, the object was deleted during the call"
    })
    .await;
    host.wait_log("the deletion delivered", |l| {
        field(l, "message") == "event"
            && field(l, "event") == "deleted"
            && field(l, "object") == "ContentSite default/racy"
    })
    .await;
    eventually("the orphaned MongoDB collected", CONVERGE, || async {
        get(&dbs, "racy-db").await.is_none().then_some(())
    })
    .await;
    let metrics_addr = addr.clone();
    let text = eventually("the skipped write counted", CONVERGE, || {
        let a = metrics_addr.clone();
        async move {
            let (_, text) = http_get(&a, "/metrics");
            text.contains(r#"result="gone""#).then_some(text)
        }
    })
    .await;
    assert_eq!(
        sample(
            &text,
            r#"kubewasm_intents_total{plugin="contentsite-provisioner",verb="patch-status",result="gone"}"#
        ),
        Some(1.0),
        "{text}"
    );
    host.assert_no_failed_events();
    let (_, body) = http_get(&addr, "/status");
    let status: serde_json::Value = serde_json::from_str(&body).expect("/status is JSON");
    assert_eq!(status["plugins"][0]["blocked"], json!([]), "{status}");
    let events = env.api("v1", "Event", "events", Some("default"));
    let warnings: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.data["involvedObject"]["name"] == json!("racy"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(host.stop(), Some(0));
}

/// A plugin that server-side applies a label on its trigger, the trigger deleted during
/// the call: the apply names the trigger's uid, so kube-apiserver (and the embedded
/// server) refuse to create it again (409), and the host skips the write as it skips a
/// status write: the ConfigMap stays deleted, nothing fails, the deletion is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_of_a_trigger_deleted_during_its_call_does_not_bring_it_back() {
    const HOST: &str = "the-host";
    let env = Env::with_crds(false).await;
    env.add_plugin(
        &test_plugin("testkit"),
        "testkit",
        Some("patchSelf: true\n"),
    );
    env.server.record_requests();
    let host = env.start_host_as(HOST, &[]);
    watch_open(&env, HOST, "configmaps").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default",
                            "labels": {"kubewasm.dev/testkit": "testkit"}},
               "data": {"action": "label-self"}})
    };
    // Undisturbed, the trigger gets its label (and the kinds are resolved from then on).
    env.create(&cms, cm("calm")).await;
    eventually("calm labelled", CONVERGE, || async {
        get(&cms, "calm").await.filter(|o| {
            o.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("kubewasm.dev/labelled"))
        })
    })
    .await;

    env.server.stall_client(HOST);
    env.create(&cms, cm("racy")).await;
    write_held(&env, HOST, "/configmaps/racy-out").await;
    cms.delete("racy", &Default::default())
        .await
        .expect("delete the trigger");
    env.server.release_client(HOST);

    host.wait_log("the label write skipped", |l| {
        field(l, "message")
            == "patch ConfigMap default/racy: skipped, the object was deleted during the call"
    })
    .await;
    host.wait_log("the deletion delivered", |l| {
        field(l, "message") == "event"
            && field(l, "event") == "deleted"
            && field(l, "object") == "ConfigMap default/racy"
    })
    .await;
    let refused = env.server.requests().into_iter().any(|r| {
        r.client == HOST
            && r.method == "PATCH"
            && r.path.contains("/configmaps/racy?")
            && r.executed.is_some()
    });
    assert!(refused, "the label apply reached the server");
    assert!(
        get(&cms, "racy").await.is_none(),
        "the deleted trigger was created again"
    );
    eventually("racy-out collected", CONVERGE, || async {
        get(&cms, "racy-out").await.is_none().then_some(())
    })
    .await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";

/// `kubewasm run --metrics-secure` with the pod's certificate, against an API server with
/// RBAC on: no token 401, a token whose user has no RBAC 403, Prometheus's token once
/// bound to the reader role `kubewasm rbac --metrics-secure` prints: the metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_need_a_token_and_the_reader_role() {
    let env = Env::with_rbac(true, &[("prom", PROMETHEUS), ("jane", "jane")]).await;
    // The reader role, as `kubewasm rbac --metrics-secure` renders it, bound to Prometheus.
    let none = env.dir.path().join("no-approvals");
    std::fs::create_dir(&none).expect("dir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "error", "rbac", "--metrics-secure", "-f"])
        .arg(&none)
        .output()
        .expect("kubewasm rbac");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout).expect("YAML");
    let reader: String = rendered
        .split("---\n")
        .find(|d| d.contains("name: kubewasm-system:kubewasm-metrics-reader"))
        .expect("the reader role in kubewasm rbac --metrics-secure")
        .to_string();
    let rbac = env.dir.path().join("reader.yaml");
    std::fs::write(
        &rbac,
        format!(
            "{reader}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
             metadata: {{name: prometheus-kubewasm-metrics}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: \"kubewasm-system:kubewasm-metrics-reader\"}}\n\
             subjects: [{{kind: ServiceAccount, name: prometheus, namespace: monitoring}}]\n"
        ),
    )
    .expect("write");
    env.apply_path(&rbac).await;
    // The pod's serving certificate, signed by a CA the scraper trusts.
    let certs = env.dir.path().join("metrics-cert");
    std::fs::create_dir(&certs).expect("dir");
    let tls = support::registry::generate_tls(&certs);
    let cert_dir = certs.to_str().expect("UTF-8 path");
    let host = env.start_host(&[
        "--metrics-secure",
        "--metrics-cert-path",
        cert_dir,
        "--metrics-cert-name",
        "server.pem",
        "--metrics-cert-key",
        "server.key",
    ]);
    let addr = ops_addr(&host).await;
    let get = |path: &'static str, token: Option<&'static str>| {
        let (addr, ca) = (addr.clone(), tls.ca_file.clone());
        async move { https_get(&addr, Some(&ca), path, token).await }
    };
    let (code, _) = get("/metrics", None).await;
    assert_eq!(code, 401, "no token");
    let (code, _) = get("/metrics", Some("forged")).await;
    assert_eq!(code, 401, "a token the API server does not know");
    let (code, body) = get("/metrics", Some("jane")).await;
    assert_eq!(code, 403, "a user without the RBAC: {body}");
    assert!(
        body.contains("user=jane") && body.contains("path=/metrics"),
        "{body}"
    );
    let (code, body) = get("/metrics", Some("prom")).await;
    assert_eq!(code, 200, "{body}\n{}", host.dump());
    assert!(body.contains("kubewasm_"), "the metrics: {body}");
    let (code, body) = get("/status", Some("prom")).await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("/status is JSON");
    assert!(status.get("ready").is_some(), "{status}");
    // The reader role is /metrics and /status only: /preview shows objects' fields.
    let (code, _) = get("/preview", Some("prom")).await;
    assert_eq!(code, 403);
    // Plain HTTP gets no page.
    let (code, _) = http_get(&addr, "/metrics");
    assert_ne!(code, 200);
    // `kubewasm preview report` over https with a token: Prometheus's may not read
    // /preview/*, the admin's may (and nothing previews on this host).
    let url = format!("https://{addr}");
    let ca = tls.ca_file.to_str().expect("UTF-8 path");
    let report = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(["--log", "error", "preview", "report", "web", "--url", &url])
            .args(extra)
            .output()
            .expect("kubewasm preview report");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = report(&["--token", "prom", "--insecure-skip-tls-verify"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("403") && err.contains("path=/preview/web"),
        "{err}"
    );
    let (code, err) = report(&["--token", ADMIN_TOKEN, "--certificate-authority", ca]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("404") && err.contains("no plugin named \"web\""),
        "{err}"
    );
    let (_, err) = report(&["--token", ADMIN_TOKEN]);
    assert!(err.contains("--insecure-skip-tls-verify"), "{err}");
}

/// A host whose own RBAC does not let it ask the reviews refuses every request (500, and
/// says why in its log): never an open door.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_fail_closed_when_the_reviews_cannot_be_asked() {
    let env = Env::with_rbac(true, &[("prom", PROMETHEUS), ("jane", "jane")]).await;
    let certs = env.dir.path().join("metrics-cert");
    std::fs::create_dir(&certs).expect("dir");
    let tls = support::registry::generate_tls(&certs);
    let host = env.start_host_as(
        "jane",
        &[
            "--probe-addr",
            "127.0.0.1:0",
            "--metrics-secure",
            "--metrics-cert-path",
            certs.to_str().expect("UTF-8 path"),
            "--metrics-cert-name",
            "server.pem",
            "--metrics-cert-key",
            "server.key",
        ],
    );
    let addr = ops_addr(&host).await;
    let (code, body) = https_get(&addr, Some(&tls.ca_file), "/metrics", Some("prom")).await;
    assert_eq!(code, 500, "{body}");
    let line = host
        .wait_log("the refused review, logged", |l| {
            field(l, "message")
                .contains("could not ask the API server whether the request may be served")
        })
        .await;
    assert!(field(&line, "error").contains("TokenReview"), "{line}");
    assert_eq!(field(&line, "level"), "ERROR", "{line}");
    // The probes (plain HTTP, for the kubelet) name the rules the host lacks.
    let probes = host
        .wait_log("the probe listener", |l| {
            field(l, "message").starts_with("serving the probes")
        })
        .await;
    let probes = field(&probes, "addr").to_string();
    let needed = "needed for the reviews of each request to the metrics endpoint";
    let verbose = eventually("/readyz?verbose names the missing rules", CONVERGE, || {
        let (_, text) = http_get(&probes, "/readyz?verbose");
        async move { text.contains(needed).then_some(text) }
    })
    .await;
    for rule in [
        "create tokenreviews.authentication.k8s.io cluster-wide",
        "create subjectaccessreviews.authorization.k8s.io cluster-wide",
    ] {
        assert!(
            verbose.contains(&format!(
                "[-]permission {rule}: denied by the host's RBAC ({needed}"
            )),
            "{rule} in {verbose}"
        );
    }
}
