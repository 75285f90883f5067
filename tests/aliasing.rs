//! Bounded host memory per call: a hostile plugin returns strings that all point at one
//! guest buffer (canonical-ABI strings are pointer + length), so the guest pays for the
//! buffer once and a host that copies every string pays for it every time. The host
//! charges each string before copying it against a budget of one memory cap per call
//! (`host/runtime/src/lift.rs`), so the attack is refused with a line naming the plugin and
//! the reason, the well-behaved plugin keeps producing output, and the `kubewasm` child's
//! peak resident memory (VmHWM) stays within [`BOUND_CAPS`] memory caps of its peak before
//! the attacks.
//!
//! Figures: the hostile plugins get a 16 MiB memory cap and an intent size limit above
//! their buffer (so only the per-call budget can stop them), and an 8 MiB buffer aliased
//! 100 times (800 MiB if copied). Before the budget, wasmtime's default per-lift fuel
//! (128 MiB) let such a result cost the host ~120 MiB.

mod support;

use std::time::Instant;

use serde_json::{Value, json};
use support::*;

/// The hostile plugins' memory cap, MiB.
const CAP_MIB: u64 = 16;
/// The stated bound: the host's peak may grow by at most this many memory caps.
const BOUND_CAPS: u64 = 4;

const GOOD: &str = "name: good\nselector: kubewasm.dev/good=yes\n";

/// Settings of a hostile copy: the small cap, and intents allowed up to the cap in size.
fn hostile(name: &str, extra: &str) -> String {
    format!(
        "name: {name}\n{extra}kubewasm:\n  memoryMiB: {CAP_MIB}\n  maxIntentKiB: {}\n",
        CAP_MIB << 10
    )
}

/// Peak resident memory of a process (VmHWM), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmHWM")
}

fn configmap(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "data": data})
}

async fn attack(env: &Env, plugin: &str, cm: &str, data: Value) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap(cm, json!({"kubewasm.dev/hostile": plugin}), data),
    )
    .await;
}

async fn good_keeps_working(env: &Env, tag: &str) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let name = format!("good-{tag}");
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
}

/// The host's `event failed` line for `plugin` on `default/cm`.
async fn failure(host: &HostProcess, plugin: &str, cm: &str) -> String {
    let object = format!("default/{cm}");
    let line = host
        .wait_log(&format!("{plugin} failing on {cm}"), |l| {
            field(l, "message") == "event failed"
                && field(l, "plugin") == plugin
                && field(l, "object").ends_with(&object)
        })
        .await;
    let error = field(&line, "error").to_string();
    assert!(
        error.contains(&format!("plugin {plugin}")),
        "the error does not name the plugin: {line}"
    );
    eprintln!("{plugin} on {cm}: {}", &error[..error.len().min(400)]);
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliased_strings_are_refused_and_the_hosts_peak_memory_stays_bounded() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let wasm = test_plugin("hostile");
    env.add_plugin(&wasm, "alias", Some(&hostile("alias", "")));
    let host = env.start_host(&["--memory-mib", "64"]);
    good_keeps_working(&env, "before").await;
    let baseline = peak_kib(host.pid());

    // 100 create intents, one 8 MiB buffer.
    attack(&env, "alias", "alias-intents", json!({"attack": "alias"})).await;
    let error = failure(&host, "alias", "alias-intents").await;
    assert!(
        error.contains("the host refused the data it passed")
            && error.contains(&format!("at most {} bytes", CAP_MIB << 20)),
        "{error}"
    );
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(get(&cms, "alias-intents-alias").await.is_none());
    good_keeps_working(&env, "intents").await;

    // The same buffer logged 100 times: each line is cut to 4 KiB without the rest being
    // copied, and the call succeeds.
    attack(&env, "alias", "alias-log", json!({"attack": "alias-log"})).await;
    eventually("alias-log-out", CONVERGE, || async {
        get(&cms, "alias-log-out").await
    })
    .await;
    let lines =
        host.matching(|l| field(l, "plugin") == "alias" && field(l, "message").starts_with("lll"));
    assert!(!lines.is_empty(), "no log line of alias-log");
    for l in &lines {
        let m = field(l, "message");
        assert!(
            m.len() < 5 << 10 && m.ends_with("bytes truncated)"),
            "{}",
            &m[..80]
        );
    }

    // An 8 MiB handle-error message: lifted within the budget, cut like a log line.
    attack(
        &env,
        "alias",
        "alias-error",
        json!({"attack": "alias-error"}),
    )
    .await;
    let error = failure(&host, "alias", "alias-error").await;
    assert!(
        error.len() < 64 << 10,
        "a {} byte failure line",
        error.len()
    );

    // describe: 100 watches whose label selectors share one 8 MiB buffer. Added while the
    // host runs, so its load happens after the baseline.
    env.add_plugin(
        &wasm,
        "alias-describe",
        Some(&hostile("alias-describe", "describe: alias\n")),
    );
    let started = Instant::now();
    let line = host
        .wait_log("alias-describe rejected", |l| {
            field(l, "message") == "plugin rejected"
                && field(l, "error").contains("alias-describe.wasm")
        })
        .await;
    let error = field(&line, "error");
    eprintln!("alias-describe after {:?}: {error}", started.elapsed());
    assert!(
        error.contains("the host refused the data it passed"),
        "{line}"
    );
    good_keeps_working(&env, "after").await;

    let peak = peak_kib(host.pid());
    let bound = baseline + BOUND_CAPS * (CAP_MIB << 10);
    eprintln!(
        "kubewasm VmHWM: {baseline} KiB before the attacks, {peak} KiB after (+{} KiB); \
         bound {bound} KiB (baseline + {BOUND_CAPS} x {CAP_MIB} MiB cap); \
         copying every aliased string would take 800 MiB",
        peak.saturating_sub(baseline)
    );
    assert!(
        peak <= bound,
        "peak {peak} KiB over the bound of {bound} KiB"
    );
    assert_eq!(host.stop(), Some(0));
}

/// Longest log line the host may write while attacked (JSON, whole line): plugin text is
/// excerpted to 4 KiB (a log line) or 1 KiB (a refusal), escaped, plus the line's fields.
const MAX_LINE_BYTES: usize = 8 << 10;

/// The longest line of the host's log so far, in bytes.
fn longest_line(host: &HostProcess) -> (usize, String) {
    host.logs()
        .iter()
        .map(|l| {
            let text = l.to_string();
            (text.len(), text.chars().take(300).collect::<String>())
        })
        .max_by_key(|(n, _)| *n)
        .unwrap_or_default()
}

/// The aliased-argument attack on the read imports (issue 21): a plugin at the default
/// memory cap (256 MiB) allocates one 32 MiB string and passes it as all four arguments
/// of `host.get`, then of `host.list`, four times per event; first on one object, then on
/// four at once. Measured before the imports took their arguments unread: ~10 copies of
/// the string per call (the lifted arguments, `apiVersion/kind`, the refusal text, its log
/// line), `kubewasm dev` from 19 MiB to 1.1 GiB with one object and 2.5 GiB with four,
/// and log lines of 96–128 MiB.
///
/// Stated bounds: the host's peak resident memory (VmHWM) grows by at most the guest
/// memory the attacking instances hold themselves (four live instances of one 32 MiB
/// string, which the host maps) plus 32 MiB; no log line is over [`MAX_LINE_BYTES`].
/// Each refused read is answered with a short error that quotes none of the argument.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliased_import_arguments_are_refused_unread_and_the_host_stays_small() {
    const STRING_MIB: u64 = 32;
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let wasm = test_plugin("hostile");
    // Default limits: the 256 MiB cap of the measurement.
    env.add_plugin(&wasm, "reader", Some("name: reader\n"));
    let host = env.start_host(&[]);
    good_keeps_working(&env, "before").await;
    let baseline = peak_kib(host.pid());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let data = |attack: &str| json!({"attack": attack, "bytes": (STRING_MIB << 20).to_string()});

    // One object: get, then list.
    for (cm, kind, import) in [
        ("get-one", "alias-get", "get"),
        ("list-one", "alias-list", "list"),
    ] {
        attack(&env, "reader", cm, data(kind)).await;
        let out = eventually(&format!("{cm}-out"), CONVERGE, || async {
            get(&cms, &format!("{cm}-out")).await
        })
        .await;
        let errors = out.data["data"]["errors"].as_str().unwrap_or_default();
        let expected = format!(
            "{import}: the apiVersion is {} bytes, over the limit of 317",
            STRING_MIB << 20
        );
        assert_eq!(
            errors,
            [expected.as_str(); 4].join(" | "),
            "every call refused, quoting nothing of the argument"
        );
    }
    good_keeps_working(&env, "one").await;

    // Four objects at once, two per import, while the good plugin works.
    let four = ["get-a", "get-b", "list-a", "list-b"];
    for cm in four {
        let kind = if cm.starts_with("get") {
            "alias-get"
        } else {
            "alias-list"
        };
        attack(&env, "reader", cm, data(kind)).await;
    }
    good_keeps_working(&env, "four").await;
    for cm in four {
        let out = eventually(&format!("{cm}-out"), CONVERGE, || async {
            get(&cms, &format!("{cm}-out")).await
        })
        .await;
        let longest: usize = out.data["data"]["longestError"]
            .as_str()
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        assert!(longest < 100, "{cm}: a {longest} byte error");
    }
    good_keeps_working(&env, "after").await;

    // The refusals were logged, excerpted, at most LOGGED_REFUSALS (5) per call.
    let refused =
        host.matching(|l| field(l, "message") == "read refused" && field(l, "plugin") == "reader");
    assert!(!refused.is_empty(), "no refusal logged");
    assert!(refused.len() <= 6 * 4, "{} refusal lines", refused.len());

    let peak = peak_kib(host.pid());
    let guest = 4 * (STRING_MIB << 10);
    let bound = baseline + guest + (32 << 10);
    let (line_len, line) = longest_line(&host);
    eprintln!(
        "kubewasm VmHWM: {baseline} KiB before, {peak} KiB after (+{} KiB); bound {bound} KiB \
         (baseline + 4 instances x {STRING_MIB} MiB of guest string + 32 MiB); longest log line \
         {line_len} bytes (bound {MAX_LINE_BYTES})",
        peak.saturating_sub(baseline)
    );
    assert!(
        peak <= bound,
        "peak {peak} KiB over the bound of {bound} KiB"
    );
    assert!(
        line_len <= MAX_LINE_BYTES,
        "a {line_len} byte line: {line}…"
    );
    assert_eq!(host.stop(), Some(0));
}
