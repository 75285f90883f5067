//! The sandbox: hostile plugins (`tests/plugins/hostile`) attack the real `kubewasm` binary
//! running against the embedded API server, one test per attack. During every attack a
//! well-behaved plugin (testkit, `copy`) keeps handling events and its output is asserted;
//! the cluster is checked for anything of a refused call, and the host's log for a line
//! naming the plugin, the object and the reason.
//!
//! Limits used throughout: `--call-deadline 500ms --memory-mib 64 --max-intents 256`, and
//! the default intent size limit of 1 MiB.

mod support;

use std::time::{Duration, Instant};

use kube::api::ListParams;
use serde_json::{Value, json};
use support::*;

const LIMITS: &[&str] = &[
    "--call-deadline",
    "500ms",
    "--memory-mib",
    "64",
    "--max-intents",
    "256",
];

/// The well-behaved plugin's settings: testkit named `good`, copying its ConfigMaps.
const GOOD: &str = "name: good\nselector: kubewasm.dev/good=yes\n";

/// A world with the good plugin and the named hostile copies (settings YAML each).
fn world(env: &Env, hostile: &[(&str, &str)]) {
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let wasm = test_plugin("hostile");
    for (name, extra) in hostile {
        env.add_plugin(&wasm, name, Some(&format!("name: {name}\n{extra}")));
    }
}

fn configmap(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "data": data})
}

/// Trigger `attack` of the hostile plugin `plugin` with ConfigMap `cm`.
async fn attack(env: &Env, plugin: &str, cm: &str, attack: &str, extra: Value) {
    let mut data = json!({"attack": attack});
    if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap(cm, json!({"kubewasm.dev/hostile": plugin}), data),
    )
    .await;
}

/// The good plugin handles a fresh object while the attack goes on; returns how long it took.
async fn good_keeps_working(env: &Env, tag: &str) -> Duration {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let name = format!("good-{tag}");
    let started = Instant::now();
    env.create(
        &cms,
        configmap(
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
    assert_eq!(out.data["data"]["from"], json!("good"));
    started.elapsed()
}

/// Wait for the host's `event failed` line for `plugin` on `default/cm`; check its reason.
async fn failure(host: &HostProcess, plugin: &str, cm: &str, reason: &str) -> Value {
    let object = format!("default/{cm}");
    let line = host
        .wait_log(&format!("{plugin} failing on {cm}"), |l| {
            field(l, "message") == "event failed"
                && field(l, "plugin") == plugin
                && field(l, "object").ends_with(&object)
        })
        .await;
    assert!(
        field(&line, "error").contains(reason),
        "{plugin} on {cm}: want {reason:?} in {line}"
    );
    assert!(
        field(&line, "error").contains(&format!("plugin {plugin}")),
        "the error does not name the plugin: {line}"
    );
    eprintln!("{plugin} on {cm}: {}", field(&line, "error"));
    line
}

/// How many `event failed` lines there are for `plugin` on `default/cm`.
fn failures(host: &HostProcess, plugin: &str, cm: &str) -> usize {
    let object = format!("default/{cm}");
    host.matching(|l| {
        field(l, "message") == "event failed"
            && field(l, "plugin") == plugin
            && field(l, "object").ends_with(&object)
    })
    .len()
}

/// The report ConfigMap `<cm>-out` a returning attack wrote.
async fn report(env: &Env, cm: &str) -> serde_json::Map<String, Value> {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let out = eventually(&format!("{cm}-out"), CONVERGE, || async {
        get(&cms, &format!("{cm}-out")).await
    })
    .await;
    let data = out.data["data"].as_object().cloned().unwrap_or_default();
    eprintln!("{cm}-out: {}", serde_json::to_string_pretty(&data).unwrap());
    data
}

fn entry<'a>(data: &'a serde_json::Map<String, Value>, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or("<absent>")
}

/// Resident memory of a process in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loops_are_stopped_at_the_deadline_and_the_host_stays_responsive() {
    let env = Env::with_crds(false).await;
    // Two copies, each with as many spinning objects as it has workers (concurrency 4).
    world(&env, &[("loop-a", ""), ("loop-b", "")]);
    let host = env.start_host(&[LIMITS, &["--quarantine-after", "0"]].concat());
    for plugin in ["loop-a", "loop-b"] {
        for i in 0..4 {
            attack(&env, plugin, &format!("{plugin}-{i}"), "loop", json!({})).await;
        }
    }
    for plugin in ["loop-a", "loop-b"] {
        failure(
            &host,
            plugin,
            &format!("{plugin}-0"),
            "call exceeded its deadline of 500ms",
        )
        .await;
    }
    // While eight calls spin (and are retried), the good plugin still answers promptly.
    let mut slowest = Duration::ZERO;
    for i in 0..3 {
        slowest = slowest.max(good_keeps_working(&env, &format!("loop-{i}")).await);
    }
    eprintln!("slowest good round trip during the loops: {slowest:?}");
    assert!(
        slowest < Duration::from_secs(10),
        "the good plugin took {slowest:?}"
    );
    // Failed calls are retried with backoff, and each retry is stopped again.
    eventually("loop-a-0 retried", CONVERGE, || async {
        (failures(&host, "loop-a", "loop-a-0") >= 2).then_some(())
    })
    .await;
    // The host shuts down promptly although plugins are spinning.
    let stopping = Instant::now();
    assert_eq!(host.stop(), Some(0));
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        stopping.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_is_stopped_at_the_cap() {
    let env = Env::with_crds(false).await;
    world(&env, &[("bomb", "")]);
    let host = env.start_host(LIMITS);
    attack(&env, "bomb", "bomb", "memory", json!({})).await;
    failure(
        &host,
        "bomb",
        "bomb",
        "memory limit of 67108864 bytes exceeded",
    )
    .await;
    good_keeps_working(&env, "memory").await;
    // It really allocated up to near the cap, and never past it.
    let held: Vec<u64> = host
        .matching(|l| field(l, "plugin") == "bomb")
        .iter()
        .filter_map(|l| {
            field(l, "message")
                .strip_prefix("holding ")?
                .strip_suffix(" MiB")?
                .parse()
                .ok()
        })
        .collect();
    let most = held.iter().copied().max().unwrap_or(0);
    assert!((32..64).contains(&most), "held {held:?}");
    eventually("bomb retried", CONVERGE, || async {
        (failures(&host, "bomb", "bomb") >= 2).then_some(())
    })
    .await;
    let rss = rss_kib(host.pid()).unwrap_or(0);
    eprintln!("host RSS after repeated memory bombs: {} MiB", rss / 1024);
    assert!(rss < 512 * 1024, "host RSS {rss} KiB");
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(get(&cms, "bomb-out").await.is_none());
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_intent_is_refused() {
    let env = Env::with_crds(false).await;
    world(&env, &[("huge", "")]);
    let host = env.start_host(LIMITS);
    attack(&env, "huge", "huge", "huge-intent", json!({})).await;
    let line = failure(&host, "huge", "huge", "over the limit of 1048576").await;
    assert!(field(&line, "error").contains("intent #0 is 52"), "{line}");
    good_keeps_working(&env, "huge").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(
        get(&cms, "huge-out").await.is_none(),
        "the huge intent was applied"
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_intents_are_refused_and_none_is_applied() {
    let env = Env::with_crds(false).await;
    world(&env, &[("many", "")]);
    let host = env.start_host(LIMITS);
    attack(&env, "many", "many", "many-intents", json!({})).await;
    failure(
        &host,
        "many",
        "many",
        "returned 10000 intents, over the limit of 256",
    )
    .await;
    good_keeps_working(&env, "many").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let names: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .filter(|n| n.starts_with("many-"))
        .collect();
    assert!(names.is_empty(), "applied: {names:?}");
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_fail_the_call_and_are_retried() {
    let env = Env::with_crds(false).await;
    world(&env, &[("trapper", "")]);
    // Three objects trap on every retry: without this, quarantine (tested in tests/ops.rs)
    // would stop the retries this test counts.
    let host = env.start_host(&[LIMITS, &["--quarantine-after", "0"]].concat());
    for kind in ["trap", "unreachable", "stack"] {
        attack(&env, "trapper", kind, kind, json!({})).await;
    }
    failure(&host, "trapper", "trap", "trapped").await;
    failure(&host, "trapper", "unreachable", "unreachable").await;
    failure(&host, "trapper", "stack", "trapped").await;
    good_keeps_working(&env, "trap").await;
    eventually("trap retried", CONVERGE, || async {
        (failures(&host, "trapper", "trap") >= 2).then_some(())
    })
    .await;
    let line = host
        .matching(|l| {
            field(l, "message") == "event failed" && field(l, "object").ends_with("/trap")
        })
        .pop()
        .unwrap();
    assert_eq!(line["retry"], json!(true), "{line}");
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_grants_are_refused_and_nothing_of_the_call_is_applied() {
    let env = Env::with_crds(false).await;
    world(&env, &[("intruder", "")]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, configmap("victim", json!({}), json!({"keep": "me"})))
        .await;
    let host = env.start_host(LIMITS);
    let cases = [
        (
            "outside-grant",
            "intent #1 refused: no grant allows create on v1 Secret in namespace default",
        ),
        (
            "outside-namespace",
            "intent #1 refused: no grant allows create on v1 ConfigMap in namespace kube-system",
        ),
        (
            "escalate",
            "intent #1 refused: no grant allows create on rbac.authorization.k8s.io/v1 ClusterRoleBinding (cluster-scoped)",
        ),
        (
            "outside-verb",
            "intent #1 refused: no grant allows patch on v1 ConfigMap in namespace default",
        ),
    ];
    for (kind, _) in cases {
        attack(&env, "intruder", kind, kind, json!({})).await;
    }
    for (kind, reason) in cases {
        failure(&host, "intruder", kind, reason).await;
    }
    good_keeps_working(&env, "grants").await;
    // A refusal is permanent: each refused call is reported once and not retried hot (the
    // queue says so), and nothing of it lands.
    for (kind, _) in cases {
        host.wait_log(&format!("{kind} not retried"), |l| {
            field(l, "message").starts_with("permanent failure")
                && field(l, "object").ends_with(&format!("default/{kind}"))
        })
        .await;
        assert_eq!(failures(&host, "intruder", kind), 1, "{kind} was retried");
    }
    for (kind, _) in cases {
        assert!(
            get(&cms, &format!("{kind}-out")).await.is_none(),
            "the granted half of the refused {kind} call was applied"
        );
    }
    let secrets = env.api("v1", "Secret", "secrets", Some("default"));
    assert!(get(&secrets, "outside-grant-secret").await.is_none());
    let system = env.api("v1", "ConfigMap", "configmaps", Some("kube-system"));
    assert!(get(&system, "outside-namespace-escape").await.is_none());
    let bindings = env.api(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        None,
    );
    assert!(get(&bindings, "escalate-admin").await.is_none());
    let victim = get(&cms, "victim").await.expect("victim deleted");
    assert_eq!(victim.data["data"], json!({"keep": "me"}));
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_undeclared_kinds_are_refused() {
    let env = Env::with_crds(false).await;
    world(&env, &[("snoop", "")]);
    let secrets = env.api("v1", "Secret", "secrets", Some("default"));
    env.create(
        &secrets,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "victim", "namespace": "default"},
               "stringData": {"password": "hunter2"}}),
    )
    .await;
    let host = env.start_host(LIMITS);
    attack(&env, "snoop", "snoop", "read-undeclared", json!({})).await;
    good_keeps_working(&env, "read").await;
    let data = report(&env, "snoop").await;
    for (key, kind) in [
        ("getSecret", "v1/Secret"),
        ("listSecrets", "v1/Secret"),
        ("getClusterRole", "rbac.authorization.k8s.io/v1/ClusterRole"),
    ] {
        assert_eq!(
            entry(&data, key),
            format!("err: {kind} is not watched or declared in `reads` by this plugin"),
            "{key}"
        );
    }
    assert!(!serde_json::to_string(&data).unwrap().contains("hunter2"));
    assert_eq!(host.stop(), Some(0));
}

/// Documents the read scope: `host.list` is limited by kind (what the WIT contract says),
/// not by the namespace or label selector of the plugin's watch. A plugin that watches
/// some ConfigMaps can list every ConfigMap the host caches, in every namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_limited_by_kind_not_by_the_watch_selector() {
    let env = Env::with_crds(false).await;
    world(&env, &[("wide", "")]);
    let host = env.start_host(LIMITS);
    good_keeps_working(&env, "wide").await;
    attack(&env, "wide", "wide", "read-wide", json!({})).await;
    let data = report(&env, "wide").await;
    let seen = entry(&data, "seen");
    assert!(seen.starts_with("ok: "), "{seen}");
    // The good plugin's objects, which the wide plugin's selector does not match.
    assert!(seen.contains("default/good-wide"), "{seen}");
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_cannot_be_opened() {
    let env = Env::with_crds(false).await;
    world(&env, &[("files", "")]);
    let host = env.start_host(LIMITS);
    // /etc/passwd, and the host's own kubeconfig (credentials to the cluster).
    attack(&env, "files", "passwd", "file", json!({})).await;
    let kubeconfig = env.kubeconfig.display().to_string();
    attack(
        &env,
        "files",
        "kubeconfig",
        "file",
        json!({"path": kubeconfig}),
    )
    .await;
    good_keeps_working(&env, "file").await;
    let here = std::env::current_dir().unwrap().display().to_string();
    for cm in ["passwd", "kubeconfig"] {
        let data = report(&env, cm).await;
        for key in ["read", "listRoot", "listCwd", "createTmp"] {
            assert!(
                entry(&data, key).starts_with("err: "),
                "{cm}: {key} = {}",
                entry(&data, key)
            );
        }
        let text = serde_json::to_string(&data).unwrap();
        assert!(
            !text.contains("root:") && !text.contains("certificate") && !text.contains("token"),
            "{cm}: file contents leaked: {text}"
        );
        assert!(!text.contains(&here), "{cm}: the host's directory leaked");
    }
    assert!(!std::path::Path::new("/tmp/kubewasm-hostile").exists());
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_cannot_be_opened() {
    let env = Env::with_crds(false).await;
    world(&env, &[("net", "")]);
    let host = env.start_host(LIMITS);
    // The API server listens: a connection there would succeed if sockets were allowed.
    let api = env
        .server
        .url()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    attack(&env, "net", "net", "socket", json!({"addr": api})).await;
    good_keeps_working(&env, "socket").await;
    let data = report(&env, "net").await;
    for key in ["connectClosed", "connectAddr", "listen", "udp", "lookup"] {
        assert!(
            entry(&data, key).starts_with("err: "),
            "{key} = {}",
            entry(&data, key)
        );
    }
    assert_eq!(host.stop(), Some(0));
}

/// Open file descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// 5,000 TCP listeners and 5,000 UDP sockets asked for in one call: every one is refused
/// before an OS socket exists, so the host's descriptors do not grow, and the good plugin
/// keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_flood_is_refused_without_host_descriptors() {
    let env = Env::with_crds(false).await;
    world(&env, &[("net", "")]);
    let host = env.start_host(LIMITS);
    good_keeps_working(&env, "before-flood").await;
    let before = open_fds(host.pid());
    attack(&env, "net", "flood", "socket-flood", json!({})).await;
    let data = report(&env, "flood").await;
    assert_eq!(entry(&data, "tcpOpened"), "0", "{data:?}");
    assert_eq!(entry(&data, "udpOpened"), "0", "{data:?}");
    assert!(!entry(&data, "firstError").is_empty(), "{data:?}");
    let after = open_fds(host.pid());
    assert!(
        after <= before + 8,
        "the host's descriptors grew from {before} to {after}"
    );
    good_keeps_working(&env, "after-flood").await;
    assert_eq!(host.stop(), Some(0));
}

/// No environment; one argument, the plugin's name (argv[0]: Go's klog indexes it in init).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_empty_and_argv0_is_the_plugin_name() {
    let env = Env::with_crds(false).await;
    world(&env, &[("snoop-env", "")]);
    let host = env.start_host_with_env(LIMITS, &[("KUBEWASM_CANARY", "canary-7f3a")]);
    attack(
        &env,
        "snoop-env",
        "env",
        "env",
        json!({"var": "KUBEWASM_CANARY"}),
    )
    .await;
    good_keeps_working(&env, "env").await;
    let data = report(&env, "env").await;
    assert_eq!(entry(&data, "varCount"), "0");
    assert_eq!(entry(&data, "vars"), "");
    assert_eq!(entry(&data, "argCount"), "1");
    assert_eq!(entry(&data, "args"), "snoop-env");
    assert!(
        entry(&data, "var").starts_with("err: "),
        "{}",
        entry(&data, "var")
    );
    let text = serde_json::to_string(&data).unwrap();
    assert!(!text.contains("canary-7f3a"), "{text}");
    assert!(!text.contains("kubeconfig"), "{text}");
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_capped_per_call() {
    let env = Env::with_crds(false).await;
    world(&env, &[("chatty", "")]);
    let host = env.start_host(LIMITS);
    attack(&env, "chatty", "chatty", "log-flood", json!({})).await;
    let dropped = host
        .wait_log("log lines dropped", |l| {
            field(l, "plugin") == "chatty" && field(l, "message").contains("log lines dropped")
        })
        .await;
    // The first line is the plugin's own "attack ..." line; 99 flood lines fit the cap.
    assert_eq!(dropped["dropped"], json!(10_000 - 99), "{dropped}");
    assert!(
        field(&dropped, "object").ends_with("default/chatty"),
        "{dropped}"
    );
    // The call itself succeeds: dropping log lines is not a failure.
    report(&env, "chatty").await;
    good_keeps_working(&env, "log").await;
    let flood = host
        .matching(|l| {
            field(l, "plugin") == "chatty" && field(l, "message").starts_with("flood line")
        })
        .len();
    assert_eq!(flood, 99);
    assert_eq!(host.stop(), Some(0));
}

/// The log cap counts lines, not bytes: ten 1 MiB lines from one call all reach the host's
/// log. The host truncates lines to 4 KiB and caps their number per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_log_lines_are_capped_in_bytes() {
    let env = Env::with_crds(false).await;
    world(&env, &[("loud", "")]);
    let host = env.start_host(LIMITS);
    attack(&env, "loud", "loud", "log-huge", json!({})).await;
    report(&env, "loud").await;
    good_keeps_working(&env, "loud").await;
    let bytes: usize = host
        .matching(|l| field(l, "plugin") == "loud")
        .iter()
        .map(|l| field(l, "message").len())
        .sum();
    eprintln!("log bytes from one call of loud: {bytes}");
    assert!(bytes < 1 << 20, "one call logged {bytes} bytes");
    assert_eq!(host.stop(), Some(0));
}

/// The JSON size limit covers create objects and patch bodies, not the strings of an
/// object reference: a delete intent with a 5 MiB kind passes decoding and reaches
/// discovery, and the failure line would repeat the 5 MiB: references count towards the
/// per-intent size limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_references_are_refused_before_discovery() {
    let env = Env::with_crds(false).await;
    world(&env, &[("bigref", "")]);
    let host = env.start_host(LIMITS);
    attack(&env, "bigref", "bigref", "huge-ref", json!({})).await;
    let object = "default/bigref";
    let line = host
        .wait_log("bigref failing", |l| {
            field(l, "message") == "event failed" && field(l, "object").ends_with(object)
        })
        .await;
    let error = field(&line, "error");
    eprintln!(
        "bigref: {} bytes: {}...",
        error.len(),
        &error[..error.len().min(160)]
    );
    good_keeps_working(&env, "bigref").await;
    assert!(
        error.len() < 64 << 10,
        "a {} byte failure line",
        error.len()
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_attacking_in_describe_is_rejected_and_the_others_load() {
    let env = Env::with_crds(false).await;
    world(
        &env,
        &[
            ("describe-loop", "describe: loop\n"),
            ("describe-trap", "describe: trap\n"),
            ("describe-memory", "describe: memory\n"),
        ],
    );
    let host = env.start_host(LIMITS);
    for (file, reason) in [
        ("describe-loop.wasm", "call exceeded its deadline of 500ms"),
        ("describe-trap.wasm", "trapped"),
        ("describe-memory.wasm", "memory limit of 67108864 bytes"),
    ] {
        let line = host
            .wait_log(file, |l| {
                field(l, "message") == "plugin rejected" && field(l, "error").contains(file)
            })
            .await;
        assert!(field(&line, "error").contains(reason), "{line}");
        eprintln!("{file}: {}", field(&line, "error"));
    }
    good_keeps_working(&env, "describe").await;
    assert_eq!(host.stop(), Some(0));
}

/// `kubewasm rbac` for the example plugins: the objects follow the manifests, and the
/// embedded API server's RBAC kinds accept the YAML.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_for_the_example_plugins_follows_their_manifests_and_applies() {
    use kubewasm::core::kind::guess;
    use kubewasm::core::manifest::Verb;
    use kubewasm::core::rbac::{RbacOptions, render, to_yaml};
    use kubewasm::runtime::PluginEngine;
    use kubewasm::runtime::{LoadOptions, load_plugin};
    use std::collections::{BTreeMap, BTreeSet};

    let engine = PluginEngine::new().unwrap();
    let mut plugins = Vec::new();
    for name in [
        "contentsite-provisioner",
        "mongodb-monitor",
        "seldon-endpoint",
    ] {
        plugins.push(
            load_plugin(&engine, &example_plugin(name), &LoadOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}")),
        );
    }
    let manifests: Vec<_> = plugins.iter().map(|p| &p.manifest).collect();
    let objects = render(&manifests, |r| Some(guess(r)), &RbacOptions::default());
    let yaml = to_yaml(&objects);
    eprintln!("{yaml}");

    // Parse the YAML back and flatten every role into (namespace, group, resource) → verbs.
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs, objects);
    type Perms = BTreeMap<(Option<String>, String, String), BTreeSet<String>>;
    let mut perms: Perms = BTreeMap::new();
    for doc in &docs {
        if doc["kind"] != "ClusterRole" && doc["kind"] != "Role" {
            continue;
        }
        let ns = doc["metadata"]["namespace"].as_str().map(str::to_string);
        for rule in doc["rules"].as_array().unwrap() {
            for g in rule["apiGroups"].as_array().into_iter().flatten() {
                for r in rule["resources"].as_array().unwrap() {
                    for v in rule["verbs"].as_array().unwrap() {
                        perms
                            .entry((
                                ns.clone(),
                                g.as_str().unwrap().into(),
                                r.as_str().unwrap().into(),
                            ))
                            .or_default()
                            .insert(v.as_str().unwrap().into());
                    }
                }
            }
        }
    }
    let has = |ns: Option<&str>, group: &str, resource: &str, verbs: &[&str]| {
        let got = perms
            .get(&(
                ns.map(str::to_string),
                group.to_string(),
                resource.to_string(),
            ))
            .cloned()
            .unwrap_or_default();
        verbs.iter().all(|v| got.contains(*v))
    };
    // Every watch and read: get/list/watch. Every granted verb: its RBAC verbs.
    for m in &manifests {
        for r in m.read_resources() {
            let k = guess(r);
            assert!(
                has(None, &k.group, &k.plural, &["get", "list", "watch"]),
                "{}: no read of {r}",
                m.name
            );
        }
        for g in &m.grants {
            for (group, kind) in g
                .api_groups
                .iter()
                .flat_map(|gr| g.kinds.iter().map(move |k| (gr, k)))
            {
                let api_version = if group.is_empty() {
                    "v1".to_string()
                } else {
                    format!("{group}/v1")
                };
                let k = guess(&kubewasm::core::resource::ResourceRef::Kind(
                    kubewasm::core::resource::TypeRef::new(api_version, kind.as_str()),
                ));
                let namespaces: Vec<Option<&str>> = if g.namespaces.is_empty() {
                    vec![None]
                } else {
                    g.namespaces.iter().map(|n| Some(n.as_str())).collect()
                };
                for ns in namespaces {
                    for v in &g.verbs {
                        let (resource, verbs) = match v {
                            Verb::Create => (k.plural.clone(), vec!["create", "patch"]),
                            Verb::Patch => (k.plural.clone(), vec!["patch"]),
                            Verb::PatchStatus => (format!("{}/status", k.plural), vec!["patch"]),
                            Verb::Delete => (k.plural.clone(), vec!["delete"]),
                        };
                        assert!(
                            has(ns, &k.group, &resource, &verbs),
                            "{}: grant {v:?} on {group}/{kind} in {ns:?} missing",
                            m.name
                        );
                    }
                }
            }
        }
    }
    // Nothing beyond the manifests: every resource in a rule is watched, read, granted,
    // a subresource of one, events or leases.
    let mut known: BTreeSet<(String, String)> = BTreeSet::new();
    for m in &manifests {
        for r in m.read_resources() {
            let k = guess(r);
            known.insert((k.group, k.plural));
        }
        for g in &m.grants {
            for group in &g.api_groups {
                for kind in &g.kinds {
                    let av = if group.is_empty() {
                        "v1".into()
                    } else {
                        format!("{group}/v1")
                    };
                    let k = guess(&kubewasm::core::resource::ResourceRef::Kind(
                        kubewasm::core::resource::TypeRef::new(av, kind.as_str()),
                    ));
                    known.insert((k.group, k.plural));
                }
            }
        }
    }
    known.insert(("".into(), "events".into()));
    known.insert(("events.k8s.io".into(), "events".into()));
    known.insert(("coordination.k8s.io".into(), "leases".into()));
    // The host checks its own RBAC at start (SelfSubjectAccessReviews).
    known.insert((
        "authorization.k8s.io".into(),
        "selfsubjectaccessreviews".into(),
    ));
    // ... and whether each plugin's account may read what it is approved to read.
    known.insert(("authorization.k8s.io".into(), "subjectaccessreviews".into()));
    // Plugin objects: the host loads them, writes their status, reads their pull secrets.
    known.insert(("kubewasm.dev".into(), "plugins".into()));
    known.insert(("".into(), "secrets".into()));
    // The host impersonates the plugins' ServiceAccounts (by resourceNames).
    known.insert(("".into(), "serviceaccounts".into()));
    for (ns, group, resource) in perms.keys() {
        let base = resource.split('/').next().unwrap().to_string();
        assert!(
            known.contains(&(group.clone(), base)),
            "{ns:?} {group}/{resource} is not needed by any manifest"
        );
        assert!(
            !resource.contains('*') && group != "*",
            "wildcard in {resource}"
        );
    }
    // Leases only in the host's namespace; no write verbs on what is only watched.
    assert!(has(
        Some("kubewasm-system"),
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"]
    ));
    assert!(!perms.contains_key(&(None, "coordination.k8s.io".into(), "leases".into())));
    let sites = &perms[&(None, "sites.kubewasm.dev".into(), "contentsites".into())];
    assert_eq!(
        sites,
        &BTreeSet::from(["get".into(), "list".into(), "watch".into()])
    );

    // The embedded API server accepts it as `kubectl apply` would send it.
    let env = Env::with_crds(false).await;
    let namespaces = env.api("v1", "Namespace", "namespaces", None);
    env.create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubewasm-system"}}),
    )
    .await;
    let file = env.dir.path().join("rbac.yaml");
    std::fs::write(&file, &yaml).unwrap();
    env.apply_path(&file).await;
    let roles = env.api(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        None,
    );
    let stored = get(&roles, "kubewasm-system:kubewasm")
        .await
        .expect("ClusterRole stored");
    let want = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    assert_eq!(stored.data["rules"], want["rules"]);
    let bindings = env.api(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        None,
    );
    assert!(get(&bindings, "kubewasm-system:kubewasm").await.is_some());
    let role = env.api(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        Some("kubewasm-system"),
    );
    assert!(get(&role, "kubewasm").await.is_some());
    let sa = env.api(
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        Some("kubewasm-system"),
    );
    assert!(get(&sa, "kubewasm").await.is_some());
}

/// Files of the plugin directory are hostile: a settings file that is a symlink out of the
/// directory (to a service-account token, say) rejects its plugin without reading it to the
/// plugin, an oversized one is refused, and a YAML alias bomb is refused quickly; the good
/// plugin keeps working meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugin_directory_files_are_refused() {
    let env = Env::with_crds(false).await;
    world(&env, &[]);
    let outside = tempfile::tempdir().unwrap();
    let token = outside.path().join("token");
    std::fs::write(&token, "name: stolen\nsecret: eyJhbGciOi\n").unwrap();
    let wasm = test_plugin("testkit");
    std::fs::copy(&wasm, env.plugins.join("linked.wasm")).unwrap();
    std::os::unix::fs::symlink(&token, env.plugins.join("linked.yaml")).unwrap();
    std::fs::copy(&wasm, env.plugins.join("huge.wasm")).unwrap();
    std::fs::write(env.plugins.join("huge.yaml"), vec![b'#'; (2 << 20) + 1]).unwrap();
    std::fs::copy(&wasm, env.plugins.join("bomb.wasm")).unwrap();
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    std::fs::write(env.plugins.join("bomb.yaml"), bomb).unwrap();
    let host = env.start_host(LIMITS);
    for (file, reason) in [
        ("linked.wasm", "outside the plugin directory"),
        ("huge.wasm", "over the limit"),
        ("bomb.wasm", "repetition limit exceeded"),
    ] {
        let line = host
            .wait_log(file, |l| {
                field(l, "message") == "plugin rejected" && field(l, "error").contains(file)
            })
            .await;
        assert!(field(&line, "error").contains(reason), "{line}");
        assert!(!field(&line, "error").contains("eyJhbGciOi"), "{line}");
    }
    good_keeps_working(&env, "files").await;
    assert!(
        host.matching(|l| field(l, "message") == "plugin loaded" && field(l, "plugin") == "stolen")
            .is_empty(),
        "the linked settings were handed to a plugin"
    );
    assert_eq!(host.stop(), Some(0));
}

/// A plugin file may only speak as itself: `impostor.wasm` declaring the name `good` (the
/// field manager `kubewasm-good`) is rejected, and the real `good` keeps its name and work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_name_must_equal_its_file_name() {
    let env = Env::with_crds(false).await;
    world(&env, &[]);
    env.add_plugin(&test_plugin("testkit"), "impostor", Some(GOOD));
    let host = env.start_host(LIMITS);
    let line = host
        .wait_log("impostor rejected", |l| {
            field(l, "message") == "plugin rejected" && field(l, "error").contains("impostor.wasm")
        })
        .await;
    assert!(
        field(&line, "error")
            .contains(r#"the manifest's name "good" must equal the file name "impostor""#),
        "{line}"
    );
    good_keeps_working(&env, "impostor").await;
    assert!(
        host.matching(
            |l| field(l, "message") == "plugin rejected" && field(l, "error").contains("good.wasm")
        )
        .is_empty(),
        "the real plugin was displaced"
    );
    assert_eq!(host.stop(), Some(0));
}

/// The instance pool and the call deadline, driven in-process through the runtime's API
/// (the same `Loader` and `CompiledPlugin` the host uses) so that counts and scheduling
/// are exact: instantiations are counted by the pool's counters and the plugin's own
/// per-instance call counter, and starvation is a poll hook, not a busy machine.
mod pool {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::Poll;
    use std::time::Duration;

    use kubewasm::core::event::EventType;
    use kubewasm::core::intent::RawIntent;
    use kubewasm::runtime::PoolStats;
    use kubewasm::runtime::{
        CallError, CompiledPlugin, Error, LoadOptions, Loader, ManifestRejection, NoCluster,
        PluginEngine, PluginEvent, PluginFile,
    };
    use serde_json::{Value, json};

    use super::support::test_plugin;

    /// Load `wasm` as plugin `hostile` with these settings (the `kubewasm:` key included)
    /// and `pool_size` instances at most.
    async fn load(
        wasm: &[u8],
        settings: &str,
        pool_size: usize,
    ) -> Result<(CompiledPlugin, tempfile::TempDir), Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hostile.wasm");
        std::fs::write(&path, wasm).unwrap();
        std::fs::write(dir.path().join("hostile.yaml"), settings).unwrap();
        let options = LoadOptions {
            pool_size,
            ..LoadOptions::default()
        };
        let loader = Loader::new(PluginEngine::new()?, options, None)?;
        let plugin = loader.load(PluginFile::read(&path)?).await?.plugin;
        Ok((plugin, dir))
    }

    fn hostile() -> Vec<u8> {
        std::fs::read(test_plugin("hostile")).unwrap()
    }

    fn event(name: &str, data: Value) -> PluginEvent {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"kubewasm.dev/hostile": "hostile"}},
            "data": data});
        PluginEvent {
            event_type: EventType::Added,
            watch_id: "triggers".into(),
            object: object.to_string().into(),
            old_object: None,
        }
    }

    fn call<'a>(
        plugin: &'a CompiledPlugin,
        name: &'a str,
        data: Value,
    ) -> impl Future<Output = Result<Vec<RawIntent>, CallError>> + 'a {
        let ev = event(name, data);
        async move {
            plugin
                .handle(&ev, &format!("default/{name}"), Arc::new(NoCluster))
                .await
        }
    }

    /// The `data` of the report ConfigMap a returning attack creates.
    fn report(intents: &[RawIntent]) -> Value {
        match intents {
            [RawIntent::Create { object, .. }] => {
                serde_json::from_str::<Value>(object).unwrap()["data"].clone()
            }
            other => panic!("want one create intent, got {other:?}"),
        }
    }

    fn instance_calls(intents: &[RawIntent]) -> u64 {
        report(intents)["instanceCalls"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .unwrap()
    }

    #[tokio::test]
    async fn instances_are_recycled_after_n_calls_and_when_their_memory_passes_half_the_cap() {
        let settings = "name: hostile\nkubewasm:\n  recycleAfterCalls: 3\n  memoryMiB: 64\n";
        let (plugin, _dir) = load(&hostile(), settings, 4).await.unwrap();
        let mut seen = vec![];
        for i in 0..7 {
            let out = call(&plugin, &format!("c{i}"), json!({"attack": "count"}))
                .await
                .unwrap();
            seen.push(instance_calls(&out));
        }
        // Each instance serves three calls, then a fresh one takes over.
        assert_eq!(seen, [1, 2, 3, 1, 2, 3, 1]);
        let stats = plugin.pool_stats();
        eprintln!("after 7 calls: {stats:?}");
        // describe's instance, then one per three calls.
        assert_eq!(stats.instantiated, 1 + 3);
        assert_eq!(stats.recycled_calls, 2);
        assert_eq!(stats.pooled, 1);

        // 40 MiB touched: over half the 64 MiB cap when the call returns, so the instance
        // is not kept although it returned normally.
        let out = call(&plugin, "fat", json!({"attack": "fat", "mib": "40"}))
            .await
            .unwrap();
        assert_eq!(report(&out)["touchedMiB"], json!("40"));
        assert_eq!(instance_calls(&out), 2);
        let stats = plugin.pool_stats();
        assert_eq!(stats.recycled_memory, 1, "{stats:?}");
        assert_eq!(stats.pooled, 0, "{stats:?}");
        let out = call(&plugin, "after", json!({"attack": "count"}))
            .await
            .unwrap();
        assert_eq!(instance_calls(&out), 1, "the fat instance was reused");
        assert_eq!(plugin.pool_stats().instantiated, 1 + 3 + 1);
    }

    #[tokio::test]
    async fn pooled_instances_share_one_memory_budget() {
        // Four calls at once, each touching 20 MiB (under half the cap, so only the budget
        // can refuse them): 48 MiB of pool holds two such instances, not four.
        let settings = "name: hostile\nkubewasm:\n  memoryMiB: 64\n  poolMemoryMiB: 48\n";
        let (plugin, _dir) = load(&hostile(), settings, 4).await.unwrap();
        // Each call sleeps in WASI before returning, so all four hold an instance at once.
        let names = ["f0", "f1", "f2", "f3"];
        let calls = names.map(|n| {
            call(
                &plugin,
                n,
                json!({"attack": "fat", "mib": "20", "sleepMs": "50"}),
            )
        });
        let outs = futures::future::join_all(calls).await;
        for out in &outs {
            let out = out.as_ref().unwrap();
            assert_eq!(instance_calls(out), 1, "four distinct instances");
        }
        let stats: PoolStats = plugin.pool_stats();
        eprintln!("four fat instances returned: {stats:?}");
        assert_eq!(stats.instantiated, 1 + 4);
        assert!(stats.pooled_bytes <= 48 << 20, "{stats:?}");
        assert_eq!(stats.pooled, 2, "{stats:?}");
        assert_eq!(stats.recycled_budget, 2, "{stats:?}");
        // The pool still serves: the next call reuses a pooled instance.
        let out = call(&plugin, "next", json!({"attack": "count"}))
            .await
            .unwrap();
        assert_eq!(instance_calls(&out), 2);
    }

    /// Drive `fut` on the current task, holding the thread (as a busy runtime would) for
    /// `hold` after each of its first `times` polls that return `Pending`. Returns its
    /// output and how many holds happened.
    async fn starved<F: Future>(fut: F, hold: Duration, times: usize) -> (F::Output, usize) {
        let mut fut = pin!(fut);
        let mut held = 0;
        let out = std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(v),
            Poll::Pending => {
                if held < times {
                    std::thread::sleep(hold);
                    held += 1;
                }
                Poll::Pending
            }
        })
        .await;
        (out, held)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_deadline_counts_execution_not_time_waiting_for_a_cpu() {
        let settings = "name: hostile\nkubewasm:\n  callDeadline: 500ms\n";
        let (plugin, _dir) = load(&hostile(), settings, 1).await.unwrap();
        // Warm the pool so the measured calls do not include instantiation.
        call(&plugin, "warm", json!({"attack": "count"}))
            .await
            .unwrap();
        // A finite piece of work that yields (every epoch tick) several times; between
        // its polls the thread is held for 3 × 400 ms, far past the 500 ms deadline in
        // wall-clock time, while the work itself executes for much less.
        let work = json!({"attack": "work", "iterations": "50000000"});
        let started = std::time::Instant::now();
        let (out, held) = starved(
            call(&plugin, "starved", work.clone()),
            Duration::from_millis(400),
            3,
        )
        .await;
        let took = started.elapsed();
        assert_eq!(held, 3, "the call never yielded: the test proves nothing");
        let out = out.unwrap_or_else(|e| panic!("a starved but healthy call was killed: {e}"));
        assert_eq!(report(&out)["iterations"], json!("50000000"));
        eprintln!("starved call returned after {took:?} wall-clock");
        assert!(took > Duration::from_millis(1200));

        // A real infinite loop, starved the same way, is still stopped at the deadline.
        let (out, _) = starved(
            call(&plugin, "spin", json!({"attack": "loop"})),
            Duration::from_millis(400),
            3,
        )
        .await;
        assert_eq!(
            out.unwrap_err(),
            CallError::Deadline(Duration::from_millis(500))
        );
        // A trapped instance is dropped; the plugin goes on with a fresh one.
        let out = call(&plugin, "again", json!({"attack": "count"}))
            .await
            .unwrap();
        assert_eq!(instance_calls(&out), 1);
    }

    #[tokio::test]
    async fn a_call_that_sleeps_instead_of_executing_meets_the_wall_clock_backstop() {
        // The guest sleeps in WASI for an hour while executing almost nothing: it is cut
        // off at the wall-clock backstop (10 × the 100 ms deadline).
        let settings = "name: hostile\nkubewasm:\n  callDeadline: 100ms\n";
        let (plugin, _dir) = load(&hostile(), settings, 1).await.unwrap();
        let out = call(
            &plugin,
            "sleeper",
            json!({"attack": "fat", "mib": "1", "sleepMs": "3600000"}),
        )
        .await;
        assert_eq!(
            out.unwrap_err(),
            CallError::Deadline(Duration::from_millis(100))
        );
    }

    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn read_leb(bytes: &[u8], at: &mut usize) -> usize {
        let (mut n, mut shift) = (0usize, 0);
        loop {
            let b = bytes[*at];
            *at += 1;
            n |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return n;
            }
            shift += 7;
        }
    }

    /// `component` with `count` more core instances at its top level, each of a module
    /// defining one linear memory of `mib` MiB (its minimum size: allocated at
    /// instantiation). The component's interface is unchanged.
    pub(super) fn with_extra_memories(component: &[u8], count: usize, mib: usize) -> Vec<u8> {
        // Core modules defined so far (top-level section 1): the new ones follow them in
        // the core module index space.
        let (mut at, mut modules) = (8, 0);
        while at < component.len() {
            let id = component[at];
            at += 1;
            let size = read_leb(component, &mut at);
            modules += usize::from(id == 1);
            at += size;
        }
        let module =
            wat::parse_str(format!("(module (memory (export \"m\") {}))", mib * 16)).unwrap();
        let mut out = component.to_vec();
        for i in 0..count {
            out.push(1);
            leb(module.len(), &mut out);
            out.extend_from_slice(&module);
            let mut instance = vec![1, 0x00];
            leb(modules + i, &mut instance);
            instance.push(0);
            out.push(2);
            leb(instance.len(), &mut out);
            out.extend_from_slice(&instance);
        }
        out
    }

    #[tokio::test]
    async fn one_memory_cap_covers_all_of_an_instances_memories() {
        let settings = "name: hostile\nkubewasm:\n  memoryMiB: 64\n";
        // Two extra 16 MiB memories fit under 64 MiB with the plugin's own: the rewritten
        // component is valid and works.
        let (plugin, _dir) = load(&with_extra_memories(&hostile(), 2, 16), settings, 1)
            .await
            .unwrap();
        let out = call(&plugin, "ok", json!({"attack": "count"}))
            .await
            .unwrap();
        assert_eq!(instance_calls(&out), 1);
        // Eight memories of 16 MiB, each under the cap, 128 MiB together: refused.
        let err = load(&with_extra_memories(&hostile(), 8, 16), settings, 1)
            .await
            .err()
            .expect("eight 16 MiB memories loaded under a 64 MiB cap");
        eprintln!("{err}");
        match &err {
            Error::Manifest { reason, .. } => assert!(
                matches!(
                    **reason,
                    ManifestRejection::Instantiate(CallError::Memory(m)) if m == 64 << 20
                ),
                "{err}"
            ),
            other => panic!("want a memory-limit rejection, got {other}"),
        }
        assert!(
            err.to_string().contains("memory limit of 67108864 bytes"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_memories_each_under_the_cap_are_refused_together() {
    let env = Env::with_crds(false).await;
    world(&env, &[]);
    // The hostile component with eight more 16 MiB memories: each under the 64 MiB cap,
    // 128 MiB together.
    let bytes = std::fs::read(test_plugin("hostile")).unwrap();
    let src = env.dir.path().join("eight-memories.wasm");
    std::fs::write(&src, pool::with_extra_memories(&bytes, 8, 16)).unwrap();
    env.add_plugin_unapproved(&src, "eight", Some("name: eight\n"));
    let host = env.start_host(LIMITS);
    let line = host
        .wait_log("eight rejected", |l| {
            field(l, "message") == "plugin rejected" && field(l, "error").contains("eight")
        })
        .await;
    assert!(
        field(&line, "error").contains("memory limit of 67108864 bytes exceeded"),
        "{line}"
    );
    good_keeps_working(&env, "eight-memories").await;
    // Nothing of the refused plugin runs: its trigger gets no answer while the good
    // plugin answers a later object.
    attack(&env, "eight", "eight-1", "count", json!({})).await;
    good_keeps_working(&env, "eight-memories-after").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(get(&cms, "eight-1-out").await.is_none());
    assert_eq!(host.stop(), Some(0));
}

/// Four calls at once through the real binary (`--concurrency 4`), each touching 40 MiB
/// and returning normally: the idle pool keeps at most `poolMemoryMiB` (64) of them, the
/// rest are dropped ("plugin instance recycled", reason budget) and their memory leaves
/// the host's RSS. The calls hold their memory until a `release` ConfigMap exists (a
/// barrier from cluster state, see the hostile plugin's `fat`), so all four are resident
/// at once without any sleep in the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_fat_pooled_instances_stay_within_the_pool_budget_in_the_host() {
    const MIB: u64 = 40;
    const BUDGET_MIB: u64 = 64;
    let env = Env::with_crds(false).await;
    // The deadline is long enough for the barrier (its backstop is 10x); 40 MiB is under
    // half the 128 MiB cap, so only the budget can refuse to pool these instances.
    world(
        &env,
        &[(
            "fat",
            &format!(
                "kubewasm:\n  callDeadline: 10s\n  memoryMiB: 128\n  poolMemoryMiB: {BUDGET_MIB}\n"
            ),
        )],
    );
    let host = env.start_host(&["--concurrency", "4"]);
    good_keeps_working(&env, "fat-before").await;
    // Warm: the plugin's code and one small instance exist before the baseline.
    attack(&env, "fat", "warm", "count", json!({})).await;
    report(&env, "warm").await;
    let baseline = rss_kib(host.pid()).expect("host RSS");

    let names = ["fat-0", "fat-1", "fat-2", "fat-3"];
    for name in names {
        let extra = json!({"mib": MIB.to_string(), "release": "release"});
        attack(&env, "fat", name, "fat", extra).await;
    }
    let holding = |host: &HostProcess| {
        host.matching(|l| field(l, "message").starts_with("fat holding"))
            .len()
    };
    eventually("four fat calls holding their memory", CONVERGE, || async {
        (holding(&host) == names.len()).then_some(())
    })
    .await;
    let held = rss_kib(host.pid()).expect("host RSS");
    eprintln!("RSS: baseline {baseline} KiB, four fat calls in flight {held} KiB");
    // All four are resident at once: the barrier really made them concurrent.
    assert!(
        held.saturating_sub(baseline) >= 4 * MIB * 1024 * 9 / 10,
        "four calls of {MIB} MiB in flight, yet RSS grew only from {baseline} to {held} KiB"
    );
    // The good plugin keeps serving while the hostile one holds all its workers.
    good_keeps_working(&env, "fat-during").await;

    attack(&env, "fat", "release", "count", json!({})).await;
    let mut calls = Vec::new();
    for name in names {
        let data = report(&env, name).await;
        assert_eq!(entry(&data, "touchedMiB"), MIB.to_string());
        calls.push(entry(&data, "instanceCalls").to_string());
    }
    // Four distinct instances: the warm one (its second call) and three fresh ones.
    calls.sort();
    assert_eq!(calls, ["1", "1", "1", "2"]);
    let budget_drops = |host: &HostProcess| {
        host.matching(|l| {
            field(l, "message") == "plugin instance recycled"
                && field(l, "plugin") == "fat"
                && field(l, "reason") == "pool-budget"
        })
        .len()
    };
    // 64 MiB of pool holds one instance of 40+ MiB: the other three are dropped.
    eventually(
        "three fat instances dropped for the budget",
        CONVERGE,
        || async { (budget_drops(&host) >= 3).then_some(()) },
    )
    .await;
    let after = rss_kib(host.pid()).expect("host RSS");
    eprintln!("RSS after the four calls returned: {after} KiB");
    // What stays is at most the budget, plus slack for the host's own allocations; the
    // four instances pooled would keep 160 MiB and more.
    let slack_mib = 48;
    assert!(
        after.saturating_sub(baseline) <= (BUDGET_MIB + slack_mib) * 1024,
        "RSS grew from {baseline} to {after} KiB after the calls: the idle pool holds more \
         than its {BUDGET_MIB} MiB budget"
    );
    good_keeps_working(&env, "fat-after").await;
    // The pool still serves.
    attack(&env, "fat", "again", "count", json!({})).await;
    report(&env, "again").await;
    assert_eq!(host.stop(), Some(0));
}

/// The clocks a plugin gets are exactly the documented ones (host/README.md, "Sandbox"):
/// the real wall clock, a monotonic clock it can sleep on, and random seeds; a sleep past
/// the call's deadline is cut at the wall-clock backstop and fails the call, while the
/// good plugin keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clocks_are_readable_and_a_sleep_cannot_outlast_the_deadline() {
    let env = Env::with_crds(false).await;
    world(&env, &[("clock", "kubewasm:\n  callDeadline: 200ms\n")]);
    let host = env.start_host(LIMITS);
    attack(&env, "clock", "tick", "clock", json!({})).await;
    let data = report(&env, "tick").await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let wall: u64 = entry(&data, "wallSecs")
        .parse()
        .expect("a wall-clock reading");
    assert!(
        wall.abs_diff(now) < 24 * 3600,
        "the plugin's wall clock ({wall}) is not the host's ({now})"
    );
    assert_eq!(entry(&data, "sleptAtLeastAsked"), "true");
    assert_eq!(entry(&data, "randomSeeds"), "true");

    // An hour's sleep: it executes almost nothing, so only the backstop (10 x 200 ms) cuts it.
    attack(&env, "clock", "nap", "clock", json!({"sleepMs": "3600000"})).await;
    failure(&host, "clock", "nap", "call exceeded its deadline of 200ms").await;
    good_keeps_working(&env, "clock").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(
        get(&cms, "nap-out").await.is_none(),
        "the cut call wrote nothing"
    );
    assert_eq!(host.stop(), Some(0));
}
