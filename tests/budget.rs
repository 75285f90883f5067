//! The host-wide call memory budget cannot be wedged (issue 30), against the real binary
//! with a well-behaved plugin beside the hostile one:
//!
//! - the reproduction of the issue: `--call-memory-budget 300`, a plugin at the default
//!   256 MiB cap using 100 MiB per call (its idle instances hold 101 MiB), three bursts of
//!   six ConfigMaps. Before, a call reusing a pooled instance kept that instance's share
//!   while it waited for the rest, the fair semaphore handed the first waiter what was
//!   free, and two calls each held what the other waited for: 1 of 18 events handled, and
//!   every other plugin's calls waited behind them forever. Now all 18 are handled, the
//!   other plugin's objects too, and no call waited past `--call-budget-wait`;
//! - caps under the budget and the operator's ceilings: a cap over the whole budget is
//!   clamped to it (said at load, and a call past it is stopped there), and a plugin
//!   asking above `--max-plugin-memory-mib` is refused at load: from its settings file
//!   (directory mode), and from `spec.limits` of its Plugin object (`InvalidLimits`).
//!
//! The deterministic step-by-step of the deadlock, and of a wait past its limit, are unit
//! tests of `kubewasm_runtime::budget`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const GOOD: &str = "name: good\nselector: kubewasm.dev/good=yes\n";

/// The figures: the budget `auto` gives a pod with a 600 MiB limit, and what each
/// call of the hostile plugin touches (its cap is the default, 256 MiB).
const BUDGET_MIB: u64 = 300;
const HOG_MIB: u64 = 100;
const BURSTS: usize = 3;
const PER_BURST: usize = 6;
/// `--call-budget-wait`'s default, which the test leaves as is.
const WAIT_LIMIT: Duration = Duration::from_secs(30);

fn configmap(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "data": data})
}

/// Create `good-<tag>` for the well-behaved plugin.
async fn poke_good(env: &Env, tag: &str) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap(
            &format!("good-{tag}"),
            json!({"kubewasm.dev/good": "yes"}),
            json!({"value": tag}),
        ),
    )
    .await;
}

/// Wait until the well-behaved plugin handled `good-<tag>`.
async fn good_handled(env: &Env, host: &HostProcess, tag: &str, within: Duration) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let name = format!("good-{tag}-out");
    let out = eventually_or_dump(host, &name, within, || async { get(&cms, &name).await }).await;
    assert_eq!(out.data["data"]["value"], json!(tag));
}

/// [`eventually`], with the host's log in the failure message.
async fn eventually_or_dump<T, F, Fut>(
    host: &HostProcess,
    what: &str,
    within: Duration,
    mut f: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}; host log:\n{}",
            host.dump()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The value of the metric sample `series` (name and labels as exposed), 0 if absent.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The reproduction: all 18 events of the hostile plugin handled, the other
/// plugin's objects handled during and after the bursts, no wait past the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_instances_topping_up_never_deadlock_the_budget() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    // No `kubewasm` key: the default limits (256 MiB cap, 4 instances).
    env.add_plugin(&test_plugin("hostile"), "hog", Some("name: hog\n"));
    let budget = BUDGET_MIB.to_string();
    let host = env.start_host(&["--call-memory-budget", &budget]);
    host.wait_log("the budget in the log", |l| {
        field(l, "message") == "plugin call memory budget" && l["mib"].as_u64() == Some(BUDGET_MIB)
    })
    .await;
    good_handled_after_poke(&env, &host, "before").await;

    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let names: Vec<String> = (0..BURSTS)
        .flat_map(|b| (0..PER_BURST).map(move |i| format!("hog-{b}-{i}")))
        .collect();
    for (n, name) in names.iter().enumerate() {
        env.create(
            &cms,
            configmap(
                name,
                json!({"kubewasm.dev/hostile": "hog"}),
                json!({"attack": "fat", "mib": HOG_MIB.to_string()}),
            ),
        )
        .await;
        // The other plugin's object arrives in the middle of the bursts, behind the
        // hostile plugin's calls in the budget's queue.
        if n == PER_BURST * 2 - 1 {
            poke_good(&env, "during").await;
        }
    }
    // Each call touches 100 MiB and returns: one at a time under this budget, each well
    // within a second; two waits' worth of time is plenty, a deadlock never gets there.
    let within = 2 * WAIT_LIMIT;
    for name in &names {
        let out_name = format!("{name}-out");
        let out = eventually_or_dump(&host, &out_name, within, || async {
            get(&cms, &out_name).await
        })
        .await;
        assert_eq!(out.data["data"]["touchedMiB"], json!(HOG_MIB.to_string()));
    }
    good_handled(&env, &host, "during", within).await;
    good_handled_after_poke(&env, &host, "after").await;
    eprintln!("all {} events of the hostile plugin handled", names.len());

    // Calls waited (the budget was contended: the test exercises the waits), each said
    // once, none past the limit; nothing timed out, and the metrics agree.
    let start = host
        .matching(|l| field(l, "message") == "plugin call memory budget")
        .remove(0);
    assert_eq!(field(&start, "wait"), "30s", "{start}");
    let waits =
        host.matching(|l| field(l, "message") == "plugin call waited for the call memory budget");
    assert!(!waits.is_empty(), "no call waited:\n{}", host.dump());
    let longest = waits
        .iter()
        .map(|l| l["waited_ms"].as_u64().expect("waited_ms"))
        .max()
        .unwrap_or(0);
    for w in &waits {
        assert_eq!(w["level"], json!("WARN"), "{w}");
        assert_eq!(w["timed_out"], json!(false), "{w}");
        assert_eq!(w["wanted_mib"].as_u64(), Some(256), "{w}");
        assert!(!field(w, "object").is_empty(), "{w}");
    }
    assert!(
        longest < WAIT_LIMIT.as_millis() as u64,
        "a wait of {longest} ms"
    );
    let budget_failures = host.matching(|l| {
        field(l, "message") == "event failed" && field(l, "error").contains("call memory budget")
    });
    assert!(budget_failures.is_empty(), "{budget_failures:?}");
    let ops = host
        .wait_log("the metrics address", |l| {
            field(l, "message").starts_with("serving /healthz, /readyz, /status, /metrics")
        })
        .await;
    let metrics = http_get(field(&ops, "addr"), "/metrics");
    let waited: f64 = ["hog", "good"]
        .iter()
        .map(|p| {
            sample(
                &metrics,
                &format!("kubewasm_call_budget_waits_total{{plugin=\"{p}\"}}"),
            )
        })
        .sum();
    assert_eq!(waited as usize, waits.len(), "{metrics}");
    for p in ["hog", "good"] {
        let timeouts = format!("kubewasm_call_budget_wait_timeouts_total{{plugin=\"{p}\"}}");
        assert_eq!(sample(&metrics, &timeouts), 0.0, "{metrics}");
    }
    eprintln!(
        "{} calls waited for the budget, the longest {longest} ms (limit {WAIT_LIMIT:?}); none timed out",
        waits.len()
    );
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

async fn good_handled_after_poke(env: &Env, host: &HostProcess, tag: &str) {
    poke_good(env, tag).await;
    good_handled(env, host, tag, CONVERGE).await;
}

/// A cap over the whole budget is clamped to it, said at load, and holds: a call within
/// it runs, one past it is stopped at the budget. A plugin asking above
/// `--max-plugin-memory-mib` in its settings file is refused at load, naming the ceiling;
/// the well-behaved plugin works throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_are_clamped_to_the_budget_and_held_to_the_ceilings() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let hostile = test_plugin("hostile");
    env.add_plugin(
        &hostile,
        "big",
        Some("name: big\nkubewasm:\n  memoryMiB: 1024\n"),
    );
    env.add_plugin(
        &hostile,
        "greedy",
        Some("name: greedy\nkubewasm:\n  memoryMiB: 4096\n"),
    );
    let host = env.start_host(&[
        "--call-memory-budget",
        &BUDGET_MIB.to_string(),
        "--max-plugin-memory-mib",
        "2048",
    ]);
    let refused = host
        .wait_log("greedy refused", |l| {
            field(l, "message") == "plugin rejected" && field(l, "error").contains("greedy.wasm")
        })
        .await;
    assert!(
        field(&refused, "error").ends_with(
            "limits over the host's ceilings: memoryMiB: 4096 is over the host's ceiling \
             of 2048 (--max-plugin-memory-mib)"
        ),
        "{refused}"
    );
    let clamped = host
        .wait_log("big clamped", |l| {
            field(l, "message").starts_with("plugin memory cap over the whole call memory budget")
        })
        .await;
    assert_eq!(clamped["level"], json!("WARN"));
    assert_eq!(field(&clamped, "plugin"), "big");
    assert_eq!(clamped["memory_mib"].as_u64(), Some(1024));
    assert_eq!(clamped["budget_mib"].as_u64(), Some(BUDGET_MIB));
    good_handled_after_poke(&env, &host, "before").await;

    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    // Within the clamped cap: runs.
    env.create(
        &cms,
        configmap(
            "big-within",
            json!({"kubewasm.dev/hostile": "big"}),
            json!({"attack": "fat", "mib": "200"}),
        ),
    )
    .await;
    let out = eventually_or_dump(&host, "big-within-out", CONVERGE, || async {
        get(&cms, "big-within-out").await
    })
    .await;
    assert_eq!(out.data["data"]["touchedMiB"], json!("200"));
    // Past the clamped cap (though within the 1024 MiB it asked for): stopped at it.
    env.create(
        &cms,
        configmap(
            "big-past",
            json!({"kubewasm.dev/hostile": "big"}),
            json!({"attack": "fat", "mib": "400"}),
        ),
    )
    .await;
    let failed = host
        .wait_log("big-past stopped", |l| {
            field(l, "message") == "event failed" && field(l, "object").contains("big-past")
        })
        .await;
    let cap = BUDGET_MIB << 20;
    assert!(
        field(&failed, "error").contains(&format!("memory limit of {cap} bytes exceeded")),
        "{failed}"
    );
    assert!(get(&cms, "big-past-out").await.is_none());
    good_handled_after_poke(&env, &host, "after").await;
    assert_eq!(host.stop(), Some(0));
}

/// A Plugin object whose `spec.limits` asks above a ceiling is refused with
/// `InvalidLimits` before its module is pulled (its registry does not exist); the
/// well-behaved plugin of the directory works meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_object_asking_above_a_ceiling_is_invalid() {
    let env = Env::with_crds(false).await;
    env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
        .await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let host = env.start_host(&[
        "--max-plugin-memory-mib",
        "512",
        "--max-plugin-call-deadline",
        "10s",
    ]);
    let plugins = env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    let module = format!("oci://127.0.0.1:1/greedy@sha256:{}", "0".repeat(64));
    for (name, limits, message) in [
        (
            "greedy",
            json!({"memoryMiB": 1024}),
            "spec.limits: memoryMiB: 1024 is over the host's ceiling of 512 (--max-plugin-memory-mib)",
        ),
        (
            "slow",
            json!({"callDeadline": "1m"}),
            "spec.limits: callDeadline: 1m is over the host's ceiling of 10s (--max-plugin-call-deadline)",
        ),
    ] {
        env.create(
            &plugins,
            json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "Plugin",
                   "metadata": {"name": name},
                   "spec": {"module": module, "limits": limits,
                            "permissions": {"watches": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}}),
        )
        .await;
        let ready = eventually_or_dump(
            &host,
            &format!("{name} InvalidLimits"),
            CONVERGE,
            || async {
                let o = get(&plugins, name).await?;
                let conditions = o.data["status"]["conditions"].as_array()?.clone();
                conditions
                    .into_iter()
                    .find(|c| c["type"] == "Ready" && c["reason"] == "InvalidLimits")
            },
        )
        .await;
        assert_eq!(ready["status"], json!("False"), "{ready}");
        assert_eq!(ready["message"], json!(message), "{ready}");
    }
    good_handled_after_poke(&env, &host, "meanwhile").await;
    assert_eq!(host.stop(), Some(0));
}
