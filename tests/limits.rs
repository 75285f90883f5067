//! Limits on what one plugin may cost the host beyond its own memory cap (issue 21), each
//! against the real binary with a well-behaved plugin beside the hostile one:
//!
//! - the host-wide call memory budget: four plugins at their default cap (256 MiB), each
//!   holding 200 MiB in a call at once, under a 600 MiB budget: two calls run, two wait,
//!   and the host's peak resident memory stays below the budget;
//! - a manifest of 100,000 watches is refused at load, on its count;
//! - a compile bomb (a component that takes long to compile) is stopped at the compile
//!   timeout with an error naming the file, by `run`, `inspect` and `rbac` alike.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

const GOOD: &str = "name: good\nselector: kubewasm.dev/good=yes\n";

fn configmap(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "data": data})
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

/// The budget figure of the test, MiB: two default caps (512) fit, three (768) do not.
const BUDGET_MIB: u64 = 600;
/// What each `fat` call touches and holds, MiB.
const FAT_MIB: u64 = 200;

/// Four plugins at their defaults at once under a host budget: without the budget the
/// four calls would hold 4 x 200 MiB together (the host's peak over 800 MiB); with it
/// two run and two wait (the host says so), and the peak stays below the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_plugins_at_their_defaults_stay_within_the_host_budget() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let wasm = test_plugin("hostile");
    let names = ["fat-a", "fat-b", "fat-c", "fat-d"];
    for name in names {
        // No `kubewasm` key: the default limits (256 MiB cap).
        env.add_plugin(&wasm, name, Some(&format!("name: {name}\n")));
    }
    let budget = BUDGET_MIB.to_string();
    let host = env.start_host(&["--call-memory-budget", &budget]);
    host.wait_log("the budget in the log", |l| {
        field(l, "message") == "plugin call memory budget"
            && l["mib"].as_u64() == Some(BUDGET_MIB)
    })
    .await;
    good_keeps_working(&env, "before").await;

    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for name in names {
        env.create(
            &cms,
            configmap(
                &format!("{name}-call"),
                json!({"kubewasm.dev/hostile": name}),
                json!({"attack": "fat", "mib": FAT_MIB.to_string(), "release": "release"}),
            ),
        )
        .await;
    }
    // Two calls hold their memory; the other two wait for the budget, before running.
    let deadline = Instant::now() + CONVERGE;
    let (holding, waiting) = loop {
        let holding = host
            .matching(|l| field(l, "message").starts_with("fat holding"))
            .len();
        let waiting = host
            .matching(|l| field(l, "message") == "plugin call waits for the call memory budget")
            .len();
        if holding >= 2 && waiting >= 2 {
            break (holding, waiting);
        }
        assert!(
            Instant::now() < deadline,
            "holding {holding}, waiting {waiting}:\n{}",
            host.dump()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(holding, 2, "more calls than the budget holds ran at once");
    // Nothing else gets through while the budget is spent: still two.
    assert_eq!(
        host.matching(|l| field(l, "message").starts_with("fat holding"))
            .len(),
        2
    );
    eprintln!("{holding} calls holding {FAT_MIB} MiB each, {waiting} waiting");

    // Released: the two finish, the two waiting run, all four answer.
    env.create(&cms, configmap("release", json!({}), json!({})))
        .await;
    for name in names {
        let out = eventually(&format!("{name}-call-out"), CONVERGE, || async {
            get(&cms, &format!("{name}-call-out")).await
        })
        .await;
        assert_eq!(out.data["data"]["touchedMiB"], json!(FAT_MIB.to_string()));
    }
    good_keeps_working(&env, "after").await;

    let peak = peak_rss_kib(host.pid());
    let bound = BUDGET_MIB << 10;
    eprintln!(
        "kubewasm VmHWM {peak} KiB ({} MiB) with a {BUDGET_MIB} MiB call budget; four calls \
         of {FAT_MIB} MiB at once would hold {} MiB",
        peak >> 10,
        4 * FAT_MIB
    );
    assert!(peak < bound, "peak {peak} KiB is over the budget of {bound} KiB");
    assert_eq!(host.stop(), Some(0));
}

/// A manifest of 100,000 watches (aliased: a few bytes of guest memory each) is refused at
/// load on its count, before any selector is parsed, in a bounded time and with a short
/// error; the plugin beside it loads and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_watches_are_refused_at_load() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let host = env.start_host(&[]);
    good_keeps_working(&env, "before").await;
    let started = Instant::now();
    env.add_plugin_unapproved(
        &test_plugin("hostile"),
        "watches",
        Some("name: watches\ndescribe: alias\naliasCount: 100000\naliasBytes: 16\n"),
    );
    let line = host
        .wait_log("watches rejected", |l| {
            field(l, "message") == "plugin rejected" && field(l, "error").contains("watches.wasm")
        })
        .await;
    let took = started.elapsed();
    let error = field(&line, "error");
    eprintln!("refused after {took:?}: {error}");
    assert!(
        error.contains("100000 watches, over the limit of 64 per plugin"),
        "{error}"
    );
    assert!(error.len() < 1024, "a {} byte error", error.len());
    assert!(took < CONVERGE, "{took:?}");
    good_keeps_working(&env, "after").await;
    assert_eq!(host.stop(), Some(0));
}

/// A component that takes long to compile: many functions of long straight-line code
/// (what one such file costs is Cranelift's time, linear in its size, up to wasmparser's
/// limits). The figure is the generated file's; see [`BOMB_FUNCTIONS`].
fn compile_bomb() -> Vec<u8> {
    let mut wat = String::from("(component (core module\n");
    for _ in 0..BOMB_FUNCTIONS {
        wat.push_str("(func (param i32) (result i32) (local i32)\n");
        for i in 0..BOMB_STATEMENTS {
            wat.push_str(&format!(
                "local.get 0 i32.const {i} i32.mul local.get 1 i32.add local.set 1\n"
            ));
        }
        wat.push_str("local.get 1)\n");
    }
    wat.push_str("))");
    wat::parse_str(&wat).expect("bomb wat")
}

/// Functions of the compile bomb.
const BOMB_FUNCTIONS: usize = 400;
/// Statements per function.
const BOMB_STATEMENTS: usize = 4_000;
/// The compile timeout of the bomb tests: the bomb takes several times longer.
const BOMB_TIMEOUT: &str = "2s";

/// `run` stops the worker compiling the bomb at the timeout, names the file, and serves
/// the plugin beside it; no compile worker is left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_bomb_is_stopped_at_the_timeout_and_named() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    std::fs::write(env.plugins.join("bomb.wasm"), compile_bomb()).expect("bomb");
    let started = Instant::now();
    // A refused file is never cached: the bomb is compiled every time.
    let host = env.start_host(&["--compile-timeout", BOMB_TIMEOUT]);
    let line = host
        .wait_log("bomb refused", |l| {
            field(l, "message") == "plugin rejected" && field(l, "error").contains("bomb.wasm")
        })
        .await;
    let error = field(&line, "error");
    eprintln!("bomb refused after {:?}: {error}", started.elapsed());
    assert!(
        error.contains(&format!("compiling took longer than {BOMB_TIMEOUT}")),
        "{error}"
    );
    good_keeps_working(&env, "beside-the-bomb").await;
    assert_eq!(host.stop(), Some(0));
}

/// `inspect` and `rbac`, which operators run on plugins others wrote, compile in the
/// worker under the same timeout: the bomb is refused, the file named.
#[test]
fn inspect_and_rbac_compile_in_the_worker_under_the_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let bomb = dir.path().join("bomb.wasm");
    std::fs::write(&bomb, compile_bomb()).expect("bomb");
    let kubewasm = env!("CARGO_BIN_EXE_kubewasm");
    for args in [
        vec!["inspect", "--compile-timeout", BOMB_TIMEOUT],
        vec!["rbac", "--compile-timeout", BOMB_TIMEOUT, "--plugins"],
    ] {
        let started = Instant::now();
        let target = if args[0] == "inspect" { &bomb } else { &dir.path().to_path_buf() };
        let out = std::process::Command::new(kubewasm)
            .args(["--log", "error"])
            .args(&args)
            .arg(target)
            .env("KUBEWASM_CACHE_DIR", dir.path().join("cache"))
            .env_remove("KUBEWASM_CACHE_KEY_FILE")
            .output()
            .expect("run kubewasm");
        let took = started.elapsed();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{} after {took:?}: {text}", args[0]);
        assert!(!out.status.success(), "{}: {text}", args[0]);
        assert!(text.contains("bomb.wasm"), "{}: {text}", args[0]);
        assert!(
            text.contains(&format!("compiling took longer than {BOMB_TIMEOUT}")),
            "{}: {text}",
            args[0]
        );
        assert!(took < Duration::from_secs(60), "{}: {took:?}", args[0]);
    }
}
