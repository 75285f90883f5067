//! Initial syncs (`run --initial-sync`, default `auto`): the host lists a kind by a
//! streaming list (`sendInitialEvents`) where the API server serves one, and in pages of
//! `--list-page-size` where it does not: a server with the feature off (422), a server
//! ignoring the parameters (no bookmark ever ends the initial events), and a server that
//! stops serving them after the host decided to stream. Against the embedded API server
//! configured each way, with the real binary; the server's request records show how each
//! list was made.

mod support;

use kubewasm_apiserver::{Config, RequestRecord, WatchList};
use serde_json::{Value, json};
use support::*;

const HOST_TOKEN: &str = "initial-sync-host";
const OBJECTS: usize = 20;

fn trigger(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": format!("cm-{i}"), "namespace": "default",
                        "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"value": i.to_string()}})
}

/// An Env with `watch_list`, [`OBJECTS`] ConfigMaps for testkit, and testkit approved.
async fn env(watch_list: WatchList) -> Env {
    let env = Env::with_config(
        Config {
            watch_list,
            ..Config::default()
        },
        false,
    )
    .await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for i in 0..OBJECTS {
        env.create(&cms, trigger(i)).await;
    }
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    env.server.record_requests();
    env
}

/// Every trigger handled (its `-out` copy written): the objects reached the plugin.
async fn all_handled(env: &Env, host: &HostProcess) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for i in 0..OBJECTS {
        eventually(&format!("cm-{i} handled"), CONVERGE, || async {
            get(&cms, &format!("cm-{i}-out")).await
        })
        .await;
    }
    host.assert_no_failed_events();
}

/// The host's GETs of the ConfigMap collection: (is a watch, path and query).
fn collection_gets(requests: &[RequestRecord]) -> Vec<(bool, String)> {
    requests
        .iter()
        .filter(|r| r.client == HOST_TOKEN && r.method == "GET")
        .filter(|r| {
            r.path
                .split('?')
                .next()
                .unwrap_or("")
                .ends_with("/configmaps")
        })
        .map(|r| (r.path.contains("watch=true"), r.path.clone()))
        .collect()
}

fn is_probe(path: &str) -> bool {
    path.contains("fieldSelector=metadata.name%3Dkubewasm%2Fprobe")
}

fn synced(l: &Value) -> bool {
    field(l, "message") == "cache synced" && field(l, "resource").starts_with("configmaps")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_is_synced_by_a_streaming_list_where_the_server_serves_one() {
    let env = env(WatchList::Served).await;
    let host = env.start_host_as(HOST_TOKEN, &[]);
    all_handled(&env, &host).await;
    let synced = host.wait_log("ConfigMaps synced", synced).await;
    assert_eq!(field(&synced, "initial_sync"), "streaming", "{synced}");
    assert_eq!(synced["objects"], json!(OBJECTS), "{synced}");
    host.wait_log("the probe's verdict", |l| {
        field(l, "message").starts_with("the API server serves streaming lists")
    })
    .await;

    let gets = collection_gets(&env.server.requests());
    // Asked once, then listed by a streaming watch: never by a list request.
    assert_eq!(
        gets.iter().filter(|(_, p)| is_probe(p)).count(),
        1,
        "{gets:#?}"
    );
    assert!(
        gets.iter().all(|(watch, _)| *watch),
        "a ConfigMap list request: {gets:#?}"
    );
    assert!(
        gets.iter().any(|(_, p)| !is_probe(p)
            && p.contains("sendInitialEvents=true")
            && p.contains("resourceVersionMatch=NotOlderThan")
            && p.contains("allowWatchBookmarks=true")),
        "no streaming list: {gets:#?}"
    );
}

/// The fallback: listed in pages of 7, after the probe said the server does not serve
/// streaming lists.
async fn paged_on(watch_list: WatchList) {
    let env = env(watch_list).await;
    let host = env.start_host_as(HOST_TOKEN, &["--list-page-size", "7"]);
    all_handled(&env, &host).await;
    let synced = host.wait_log("ConfigMaps synced", synced).await;
    assert_eq!(field(&synced, "initial_sync"), "paged", "{synced}");
    assert_eq!(synced["objects"], json!(OBJECTS), "{synced}");
    host.wait_log("the probe's verdict", |l| {
        field(l, "message").starts_with("the API server does not serve streaming lists")
    })
    .await;

    let gets = collection_gets(&env.server.requests());
    let lists: Vec<&String> = gets.iter().filter(|(w, _)| !*w).map(|(_, p)| p).collect();
    // 20 objects in pages of 7: three pages, the later two continuing the first.
    assert_eq!(lists.len(), 3, "{gets:#?}");
    assert!(lists.iter().all(|p| p.contains("limit=7")), "{lists:#?}");
    assert_eq!(
        lists.iter().filter(|p| p.contains("continue=")).count(),
        2,
        "{lists:#?}"
    );
    let streaming = gets
        .iter()
        .filter(|(_, p)| p.contains("sendInitialEvents=true") && !is_probe(p))
        .count();
    assert_eq!(streaming, 0, "a streaming list after the probe: {gets:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_streaming_lists_off_is_listed_in_pages() {
    paged_on(WatchList::Disabled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ignoring_streaming_lists_is_listed_in_pages_not_waited_on() {
    paged_on(WatchList::Ignored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_refused_later_falls_back_to_pages() {
    let env = env(WatchList::Served).await;
    let host = env.start_host_as(HOST_TOKEN, &["--list-page-size", "7"]);
    all_handled(&env, &host).await;
    let synced = host.wait_log("ConfigMaps synced", synced).await;
    assert_eq!(field(&synced, "initial_sync"), "streaming", "{synced}");

    // The server replaced by one with the feature off; the host's watch broken past its
    // history, so it lists again: its streaming list is refused, and it pages.
    env.server.set_watch_list(WatchList::Disabled);
    env.server.pause_watches();
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, trigger(OBJECTS)).await;
    env.server.compact();
    env.server.resume_watches();
    let relisted = host
        .wait_log("ConfigMaps relisted", |l| {
            field(l, "message") == "relisted" && field(l, "resource").starts_with("configmaps")
        })
        .await;
    assert_eq!(field(&relisted, "initial_sync"), "paged", "{relisted}");
    assert_eq!(relisted["objects"], json!(OBJECTS + 1), "{relisted}");
    host.wait_log("the fallback said", |l| {
        field(l, "message").starts_with("a streaming list was refused")
    })
    .await;
    // What changed while the watch was down is still handled.
    eventually("the new ConfigMap handled", CONVERGE, || async {
        get(&cms, &format!("cm-{OBJECTS}-out")).await
    })
    .await;
    let gets = collection_gets(&env.server.requests());
    assert!(
        gets.iter().any(|(w, p)| !*w && p.contains("limit=7")),
        "no paged list after the refusal: {gets:#?}"
    );
}

/// Figures, not a check of them (opt-in: `cargo test --workspace --test initial_sync --
/// --ignored --nocapture`; `KUBEWASM_SYNC_OBJECTS`, default 10000): one ConfigMap kind of
/// that many objects of about 1 KiB, cached whole (testkit declares a read of every
/// ConfigMap; its watch selects none of them, so no plugin call runs), synced by each
/// method in a fresh host: the time from the watch's start to its cache's sync (the log
/// lines' timestamps) and the host's peak RSS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn initial_sync_figures() {
    let n: usize = std::env::var("KUBEWASM_SYNC_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let filler = "x".repeat(900);
    let objects: Vec<Value> = (0..n)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("cm-{i:06}"), "namespace": "default",
                                "labels": {"app": "figures"}},
                   "data": {"value": i.to_string(), "filler": filler}})
        })
        .collect();
    let env = Env::with_config(Config::default(), false).await;
    env.server.seed(objects, "figures").expect("seed");
    env.add_plugin(&test_plugin("testkit"), "testkit", Some("readAll: true\n"));
    println!("objects  method     first sync  peak RSS");
    for (method, flags) in [
        ("streaming", &["--initial-sync", "streaming"][..]),
        ("paged-500", &["--initial-sync", "paged"][..]),
        (
            "one-list",
            &["--initial-sync", "paged", "--list-page-size", "0"][..],
        ),
    ] {
        let host = env.start_host(flags);
        let long = std::time::Duration::from_secs(1800);
        let started = host
            .wait_log_for("the ConfigMap watch started", long, |l| {
                field(l, "message") == "watch started"
                    && field(l, "resource").starts_with("configmaps")
            })
            .await;
        let synced = host.wait_log_for("ConfigMaps synced", long, synced).await;
        assert_eq!(synced["objects"], json!(n), "{synced}");
        let at = |l: &Value| humantime::parse_rfc3339(field(l, "timestamp")).expect("timestamp");
        let took = at(&synced)
            .duration_since(at(&started))
            .unwrap_or_default()
            .as_millis();
        let rss = peak_rss_kib(host.pid());
        println!(
            "{n:>7}  {method:<9}  {:>8.2} s  {:>6.1} MiB",
            took as f64 / 1000.0,
            rss as f64 / 1024.0
        );
        host.stop();
    }
}
