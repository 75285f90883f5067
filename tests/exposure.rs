//! What the host exposes, against the real binary and the embedded API server: a plugin
//! that reads a Secret and fails permanently with its value as the message publishes it
//! nowhere but the host's own log (not at `/status`, not at `/readyz?verbose`, not in
//! any Event), while a well-behaved plugin keeps working; `/metrics` and `/status` are
//! served on loopback only unless the operator says otherwise, and the probe listener
//! for the kubelet serves nothing but the probes.

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const LIMITS: &[&str] = &["--call-deadline", "500ms", "--memory-mib", "64"];

/// GET over plain HTTP/1.0: (status, body).
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
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

/// The address the log line `message` (prefix) names.
async fn addr_of(host: &HostProcess, message: &str) -> String {
    let line = host
        .wait_log(message, |l| field(l, "message").starts_with(message))
        .await;
    field(&line, "addr").to_string()
}

/// This machine's address on its default route, if it has one that is not loopback (no
/// packet is sent: connecting a UDP socket only picks the route).
fn outward_ip() -> Option<IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_plugins_error_reaches_neither_status_nor_events() {
    let env = Env::with_crds(false).await;
    env.add_plugin(
        &test_plugin("testkit"),
        "good",
        Some("name: good\nselector: kubewasm.dev/good=yes\n"),
    );
    env.add_plugin(
        &test_plugin("hostile"),
        "leaker",
        Some("name: leaker\nwatchNamespace: default\nreadKinds: [v1/Secret]\n"),
    );
    let password = "hunter2-correct-horse";
    let encoded = "aHVudGVyMi1jb3JyZWN0LWhvcnNl"; // base64 of the password
    let secrets = env.api("v1", "Secret", "secrets", Some("default"));
    env.create(
        &secrets,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "victim", "namespace": "default"},
               "data": {"password": encoded}}),
    )
    .await;
    let host = env.start_host(LIMITS);
    let addr = addr_of(&host, "serving /healthz").await;
    host.wait_log("the Secret cache synced", |l| {
        field(l, "message") == "cache synced" && field(l, "resource").starts_with("secrets")
    })
    .await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "leak", "namespace": "default",
                            "labels": {"kubewasm.dev/hostile": "leaker"}},
               "data": {"attack": "leak-secret"}}),
    )
    .await;
    // The plugin did read the Secret and fail with it: the host's log has the message.
    let failed = host
        .wait_log("leaker failing on leak", |l| {
            field(l, "message") == "event failed" && field(l, "plugin") == "leaker"
        })
        .await;
    assert!(field(&failed, "error").contains(encoded), "{failed}");
    // A well-behaved plugin keeps producing output meanwhile.
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "good-1", "namespace": "default",
                            "labels": {"kubewasm.dev/good": "yes"}},
               "data": {"value": "1"}}),
    )
    .await;
    eventually("good-1-out", CONVERGE, || async {
        get(&cms, "good-1-out").await
    })
    .await;

    // /status shows the object blocked, with its reason and the host's words only.
    let status_addr = addr.clone();
    let status = eventually("leak blocked in /status", CONVERGE, || {
        let a = status_addr.clone();
        async move {
            let (_, body) = http_get(&a, "/status");
            let v: Value = serde_json::from_str(&body).ok()?;
            let leaker = v["plugins"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == "leaker")?
                .clone();
            (leaker["blocked"].as_array()?.len() == 1).then_some((body, leaker))
        }
    })
    .await;
    let (body, leaker) = status;
    eprintln!("/status: {body}");
    assert_eq!(leaker["blocked"][0]["object"], json!("default/leak"));
    assert_eq!(leaker["blocked"][0]["reason"], json!("plugin"));
    assert_eq!(
        leaker["blocked"][0]["message"],
        json!("the plugin returned an error; the host's log has its message")
    );
    let (_, verbose) = http_get(&addr, "/readyz?verbose");
    for (what, text) in [("/status", &body), ("/readyz?verbose", &verbose)] {
        assert!(
            !text.contains(encoded) && !text.contains(password),
            "{what} carries the Secret: {text}"
        );
        assert!(
            !text.contains("cannot go on"),
            "{what} quotes the plugin: {text}"
        );
    }
    // The Warning Event on the object says the plugin failed, not what it said.
    let events = env.api("v1", "Event", "events", None);
    let warning = eventually("a Warning Event on leak", CONVERGE, || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.data["involvedObject"]["name"] == json!("leak"))
    })
    .await;
    assert_eq!(warning.data["reason"], json!("PluginFailed"));
    for e in events
        .list(&Default::default())
        .await
        .expect("events")
        .items
    {
        let text = serde_json::to_string(&e.data).unwrap();
        assert!(
            !text.contains(encoded) && !text.contains(password),
            "an Event carries the Secret: {text}"
        );
    }
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_status_are_on_loopback_and_the_probe_listener_serves_only_probes() {
    // The default, as `kubewasm run --help` documents it.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["run", "--help"])
        .output()
        .expect("kubewasm run --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let flag = help
        .split("--metrics-addr")
        .nth(1)
        .and_then(|rest| rest.split("--").next())
        .unwrap_or_default()
        .to_string();
    assert!(flag.contains("[default: 127.0.0.1:9090]"), "{flag}");

    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&["--probe-addr", "0.0.0.0:0"]);
    let ops = addr_of(&host, "serving /healthz, /readyz, /status, /metrics").await;
    let probes = addr_of(&host, "serving the probes").await;
    let ops: SocketAddr = ops.parse().expect("an address");
    let probes: SocketAddr = probes.parse().expect("an address");
    assert!(ops.ip().is_loopback(), "{ops}");
    assert!(probes.ip().is_unspecified(), "{probes}");
    eventually("ready", CONVERGE, || async {
        (http_get(&ops.to_string(), "/readyz").0 == 200).then_some(())
    })
    .await;

    // The probe listener, reachable from anywhere: the probes, and nothing else.
    let probe = format!("127.0.0.1:{}", probes.port());
    assert_eq!(http_get(&probe, "/healthz").0, 200);
    let (code, body) = http_get(&probe, "/readyz?verbose");
    assert_eq!(
        code,
        200,
        "/readyz on the probe listener: {body}\n{}",
        host.dump()
    );
    for path in ["/metrics", "/status", "/preview", "/preview/testkit"] {
        let (code, body) = http_get(&probe, path);
        assert_eq!(code, 404, "{path} on the probe listener: {body}");
    }
    // Loopback: the metrics and the status are there ...
    let (code, metrics) = http_get(&ops.to_string(), "/metrics");
    assert_eq!(code, 200);
    assert!(metrics.contains("kubewasm_"), "{metrics}");
    assert_eq!(http_get(&ops.to_string(), "/status").0, 200);
    assert_eq!(http_get(&ops.to_string(), "/preview").0, 200);
    // ... and from any other address of this machine, there is nothing to connect to.
    match outward_ip() {
        Some(ip) => {
            let outside = SocketAddr::new(ip, ops.port());
            let refused = TcpStream::connect_timeout(&outside, Duration::from_secs(2));
            assert!(
                refused.is_err(),
                "/metrics is reachable on {outside}, not only on loopback"
            );
            let probe_outside = SocketAddr::new(ip, probes.port());
            assert!(
                TcpStream::connect_timeout(&probe_outside, Duration::from_secs(2)).is_ok(),
                "the probe listener is reachable on {probe_outside}"
            );
        }
        None => eprintln!("SKIPPED (part): this machine has no address but loopback"),
    }
    assert_eq!(host.stop(), Some(0));

    // Bound elsewhere on the operator's word, it says so.
    let exposed = {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubewasm"));
        cmd.args(["--log-format", "json", "run", "--plugins"])
            .arg(&env.plugins)
            .arg("--kubeconfig")
            .arg(&env.kubeconfig)
            .args(["--metrics-addr", "0.0.0.0:0"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        HostProcess::spawn_command(cmd)
    };
    let line = exposed
        .wait_log("the exposure warning", |l| {
            field(l, "message").contains("on a non-loopback address")
        })
        .await;
    assert_eq!(field(&line, "level"), "WARN", "{line}");
    // Stopped once running (its signal handling is in place by then).
    exposed
        .wait_log("the host running", |l| {
            field(l, "message").starts_with("host running")
        })
        .await;
    assert_eq!(exposed.stop(), Some(0));
}
