//! Hot reload of the plugin directory, against the embedded API server with the real
//! binary: add, replace, remove, invalid replacement, ConfigMap-style symlink swap,
//! half-written file, settings change, the watch set growing and shrinking, a stress
//! run that replaces the plugin while objects keep changing, and the operator's approvals
//! (`--approvals`) narrowed, widened and deleted under a running plugin.

mod support;

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

fn cm(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"value": value}})
}

/// Replace `dest` atomically with `src`'s bytes (write beside it, rename into place).
fn install(src: &Path, dest: &Path) {
    let tmp = dest.with_file_name(format!(
        ".{}.tmp",
        dest.file_name().unwrap().to_string_lossy()
    ));
    std::fs::copy(src, &tmp).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

/// Wait until `<name>-out` carries `version` (and `value`, when given).
async fn out_has(
    cms: &Api<DynamicObject>,
    name: &str,
    version: &str,
    value: Option<&str>,
) -> DynamicObject {
    let out = format!("{name}-out");
    eventually(&format!("{out} at version {version}"), CONVERGE, || async {
        get(cms, &out).await.filter(|o| {
            o.data["data"]["version"] == json!(version)
                && value.is_none_or(|v| o.data["data"]["value"] == json!(v))
        })
    })
    .await
}

fn host_args() -> [&'static str; 2] {
    ["--reload-debounce", "200ms"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_replace_remove_and_invalid_replacement() {
    let env = Env::with_crds(false).await;
    let host = env.start_host(&host_args());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let wasm = env.plugins.join("testkit.wasm");
    env.approve_testkit("testkit");

    // Add.
    install(&test_plugin("testkit"), &wasm);
    host.wait_log("testkit loaded", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "testkit"
    })
    .await;
    env.create(&cms, cm("a", "1")).await;
    out_has(&cms, "a", "1", Some("1")).await;

    // Replace with different code: objects already there converge to the new version's
    // output, and new events run on it.
    install(&test_plugin("testkit-v2"), &wasm);
    let line = host
        .wait_log("testkit replaced", |l| {
            field(l, "message") == "plugin replaced"
        })
        .await;
    assert_eq!(
        (field(&line, "from"), field(&line, "to")),
        ("1", "2"),
        "{line}"
    );
    assert!(
        // `run` compiles in a worker process, never in the host.
        ["compiled in a worker", "cache hit"].contains(&field(&line, "how")),
        "{line}"
    );
    // A plain number (milliseconds), not Rust's debug form of a Duration.
    assert!(line["took_ms"].as_f64().is_some(), "{line}");
    out_has(&cms, "a", "2", Some("1")).await;
    env.create(&cms, cm("b", "1")).await;
    out_has(&cms, "b", "2", None).await;

    // An invalid replacement is rejected with one clear line; version 2 keeps serving.
    let garbage = env.dir.path().join("garbage");
    std::fs::write(&garbage, "this is not a component").unwrap();
    install(&garbage, &wasm);
    let rejected = host
        .wait_log("invalid replacement rejected", |l| {
            field(l, "message") == "plugin rejected"
        })
        .await;
    assert!(
        field(&rejected, "error").contains("not a WebAssembly component"),
        "{rejected}"
    );
    assert!(
        field(&rejected, "still_serving").contains("testkit"),
        "{rejected}"
    );
    // Loaded, replaced, rejected: every value logged plainly (no `Some("…")`).
    host.assert_plain_values();
    env.create(&cms, cm("c", "1")).await;
    out_has(&cms, "c", "2", None).await;

    // Remove: the plugin stops, and its watch is released.
    std::fs::remove_file(&wasm).unwrap();
    host.wait_log("testkit removed", |l| {
        field(l, "message") == "plugin removed"
    })
    .await;
    host.wait_log("configmaps watch released", |l| {
        field(l, "message").starts_with("watch stopped")
            && field(l, "resource").starts_with("configmaps")
    })
    .await;
    env.create(&cms, cm("d", "1")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        get(&cms, "d-out").await.is_none(),
        "a removed plugin handled an event"
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_volume_symlink_swap_and_settings_change() {
    let env = Env::with_crds(false).await;
    let dir = &env.plugins;
    // The layout the kubelet writes for a ConfigMap volume.
    let v1 = dir.join("..2026_11_30_00_00_00.000000001");
    std::fs::create_dir(&v1).unwrap();
    std::fs::copy(test_plugin("testkit"), v1.join("testkit.wasm")).unwrap();
    // Settings with only the host's key: the plugin gets none.
    std::fs::write(v1.join("testkit.yaml"), "kubewasm: {}\n").unwrap();
    env.approve_testkit("testkit");
    std::os::unix::fs::symlink(v1.file_name().unwrap(), dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/testkit.wasm", dir.join("testkit.wasm")).unwrap();
    std::os::unix::fs::symlink("..data/testkit.yaml", dir.join("testkit.yaml")).unwrap();

    let host = env.start_host(&host_args());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, cm("a", "1")).await;
    out_has(&cms, "a", "1", None).await;

    // The kubelet's update: a new timestamped dir, then an atomic rename of `..data`.
    let v2 = dir.join("..2026_11_30_00_01_00.000000002");
    std::fs::create_dir(&v2).unwrap();
    std::fs::copy(test_plugin("testkit-v2"), v2.join("testkit.wasm")).unwrap();
    std::fs::write(v2.join("testkit.yaml"), "version: \"2-from-settings\"\n").unwrap();
    std::os::unix::fs::symlink("..data/testkit.yaml", dir.join("testkit.yaml")).unwrap_or(());
    std::os::unix::fs::symlink(v2.file_name().unwrap(), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();
    out_has(&cms, "a", "2-from-settings", None).await;

    // A settings change alone reloads the plugin with the new settings. The kubelet's way
    // again: the same module and new settings in a new dir, `..data` swapped. (A write into
    // the dir `..data` points at is not an event of the plugin directory, which is watched
    // without recursion; the periodic rescan, `--rescan-interval`, finds it.)
    let v3 = dir.join("..2026_11_30_00_02_00.000000003");
    std::fs::create_dir(&v3).unwrap();
    std::fs::copy(test_plugin("testkit-v2"), v3.join("testkit.wasm")).unwrap();
    std::fs::write(v3.join("testkit.yaml"), "version: \"3\"\n").unwrap();
    std::os::unix::fs::symlink(v3.file_name().unwrap(), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&v2).unwrap();
    let line = host
        .wait_log("reload on settings change", |l| {
            field(l, "message") == "plugin replaced" && field(l, "to") == "3"
        })
        .await;
    assert_eq!(
        field(&line, "how"),
        "cache hit",
        "same component bytes must not recompile: {line}"
    );
    out_has(&cms, "a", "3", None).await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_file_is_never_loaded() {
    let env = Env::with_crds(false).await;
    let wasm = env.plugins.join("testkit.wasm");
    env.approve_testkit("testkit");
    install(&test_plugin("testkit"), &wasm);
    let host = env.start_host(&host_args());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, cm("a", "1")).await;
    out_has(&cms, "a", "1", None).await;

    // Write the new version in place, in two halves with a pause longer than the debounce.
    let bytes = std::fs::read(test_plugin("testkit-v2")).unwrap();
    let (first, rest) = bytes.split_at(bytes.len() / 2);
    std::fs::write(&wasm, first).unwrap();
    host.wait_log("half file rejected", |l| {
        field(l, "message") == "plugin rejected"
    })
    .await;
    env.create(&cms, cm("during", "1")).await;
    out_has(&cms, "during", "1", None).await;
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&wasm)
            .unwrap();
        f.write_all(rest).unwrap();
    }
    host.wait_log("full file loaded", |l| {
        field(l, "message") == "plugin replaced" && field(l, "to") == "2"
    })
    .await;
    out_has(&cms, "during", "2", None).await;
    let replaced = host.matching(|l| field(l, "message") == "plugin replaced");
    assert_eq!(
        replaced.len(),
        1,
        "only the complete file may be loaded: {replaced:?}"
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_set_follows_the_union_of_manifests() {
    let env = Env::new().await;
    env.approve_testkit("testkit");
    install(&test_plugin("testkit"), &env.plugins.join("testkit.wasm"));
    let host = env.start_host(&host_args());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, cm("a", "1")).await;
    out_has(&cms, "a", "1", None).await;
    let configmap_watches = |h: &HostProcess| {
        h.matching(|l| {
            field(l, "message") == "watch started" && field(l, "resource").starts_with("configmaps")
        })
        .len()
    };
    assert_eq!(configmap_watches(&host), 1);

    // A plugin watching a new kind: its watch starts, the ConfigMap watch is undisturbed.
    env.add_plugin(&example_plugin("mongodb-monitor"), "mongodb-monitor", None);
    host.wait_log("mongodb watch started", |l| {
        field(l, "message") == "watch started" && field(l, "resource").starts_with("mongodb.v1.")
    })
    .await;
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    env.create(
        &dbs,
        json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {"name": "db", "namespace": "default"}, "spec": {"type": "ReplicaSet", "members": 1, "version": "7.0.12", "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}}}}),
    )
    .await;
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    eventually("db-monitor", CONVERGE, || async {
        get(&monitors, "db-monitor").await
    })
    .await;
    env.create(&cms, cm("b", "1")).await;
    out_has(&cms, "b", "1", None).await;
    assert_eq!(
        configmap_watches(&host),
        1,
        "the ConfigMap watch was restarted"
    );

    // Removing it stops the MongoDB watch only.
    std::fs::remove_file(env.plugins.join("mongodb-monitor.wasm")).unwrap();
    host.wait_log("mongodb watch stopped", |l| {
        field(l, "message").starts_with("watch stopped")
            && field(l, "resource").starts_with("mongodb.v1.")
    })
    .await;
    env.create(&cms, cm("c", "1")).await;
    out_has(&cms, "c", "1", None).await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_change_is_lost_while_the_plugin_is_replaced_repeatedly() {
    const OBJECTS: usize = 30;
    const ROUNDS: usize = 6;
    let env = Env::with_crds(false).await;
    let wasm = env.plugins.join("testkit.wasm");
    env.approve_testkit("testkit");
    install(&test_plugin("testkit"), &wasm);
    let host = env.start_host(&["--reload-debounce", "100ms", "--concurrency", "8"]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for i in 0..OBJECTS {
        env.create(&cms, cm(&format!("o{i}"), "0")).await;
    }
    let versions = [test_plugin("testkit-v2"), test_plugin("testkit")];
    for round in 1..=ROUNDS {
        // Replace the plugin in the middle of a burst of changes.
        for i in 0..OBJECTS {
            if i == OBJECTS / 2 {
                install(&versions[round % 2], &wasm);
            }
            let patch = json!({"data": {"value": round.to_string()}});
            cms.patch(
                &format!("o{i}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // End on version 2 whatever the last round installed.
    install(&test_plugin("testkit-v2"), &wasm);
    for i in 0..OBJECTS {
        out_has(&cms, &format!("o{i}"), "2", Some(&ROUNDS.to_string())).await;
    }
    let replaced = host
        .matching(|l| field(l, "message") == "plugin replaced")
        .len();
    assert!(
        replaced >= 3,
        "the plugin was replaced only {replaced} times\n{}",
        host.dump()
    );
    let failures = host.matching(|l| field(l, "message") == "event failed");
    assert!(
        failures.is_empty(),
        "events failed during reloads: {failures:?}"
    );
    assert_eq!(host.stop(), Some(0));
}

/// A plugin loaded while its resource is already watched under another spelling (`v1` +
/// `ConfigMap` by one plugin, `configmaps` by the late one) gets `added` for every object
/// that already exists, not only for later changes (resync is off, and the early plugin's
/// declared read keeps the watcher unfiltered, so no restart of the watch delivers them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_plugin_watching_another_spelling_gets_every_existing_object() {
    let env = Env::with_crds(false).await;
    // Approved for exactly what it asks, its read included.
    env.add_plugin(
        &test_plugin("testkit"),
        "early",
        Some("name: early\nreadAll: true\n"),
    );
    let host = env.start_host(&["--reload-debounce", "200ms", "--resync", "0"]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let labelled = |name: &str, who: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default",
                            "labels": {"kubewasm.dev/testkit": who}},
               "data": {"value": "1"}})
    };
    let late: Vec<String> = (0..5).map(|i| format!("late-{i}")).collect();
    for name in &late {
        env.create(&cms, labelled(name, "late")).await;
    }
    // Created after the others: once it is handled, the cache holds them too.
    env.create(&cms, labelled("marker", "early")).await;
    out_has(&cms, "marker", "1", None).await;
    for name in &late {
        assert!(get(&cms, &format!("{name}-out")).await.is_none());
    }

    env.approve_testkit("late");
    std::fs::write(
        env.plugins.join("late.yaml"),
        "name: late\nwatchResource: configmaps\n",
    )
    .unwrap();
    install(&test_plugin("testkit"), &env.plugins.join("late.wasm"));
    for name in &late {
        let out = out_has(&cms, name, "1", None).await;
        assert_eq!(managers(&out), ["kubewasm-late"], "{name}");
    }
    let added = host.matching(|l| {
        field(l, "message") == "event"
            && field(l, "plugin") == "late"
            && field(l, "event") == "added"
    });
    assert_eq!(added.len(), late.len(), "{}", host.dump());
    // Delivered by the replay, not by a restarted watch's first list.
    let starts = host.matching(|l| {
        field(l, "resource").starts_with("configmaps")
            && (field(l, "message") == "watch started"
                || field(l, "message").starts_with("restarting the watch"))
    });
    assert_eq!(starts.len(), 1, "{}", host.dump());
    assert_eq!(host.stop(), Some(0));
}

/// The approvals are the operator's, apart from the plugin directory, and followed like
/// it: narrowed under a running plugin, the plugin is unloaded (its watch released, no
/// event handled); widened again, it loads and catches up; deleted, it is unloaded again.
/// A version serving never keeps rights the operator took away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrowing_the_approval_unloads_the_plugin_and_widening_reloads_it() {
    let env = Env::with_crds(false).await;
    env.approve_testkit("testkit");
    install(&test_plugin("testkit"), &env.plugins.join("testkit.wasm"));
    let host = env.start_host(&host_args());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, cm("a", "1")).await;
    out_has(&cms, "a", "1", Some("1")).await;

    // Narrowed: the watch stays approved, the grant to create ConfigMaps goes.
    env.approve(
        "testkit",
        "watches:\n- {apiVersion: v1, kind: ConfigMap}\n- {resource: configmaps}\n",
    );
    let unloaded = host
        .wait_log("testkit unloaded", |l| {
            field(l, "message").starts_with("plugin unloaded") && field(l, "plugin") == "testkit"
        })
        .await;
    assert!(
        field(&unloaded, "source").ends_with("testkit.wasm"),
        "{unloaded}"
    );
    // The refusal is said once the file's load ends, which may come after the unload.
    host.wait_log("the refusal names the grant taken away", |l| {
        let error = field(l, "error");
        field(l, "message") == "plugin rejected"
            && error.contains("plugin testkit asks for more than the operator approved")
            && error.contains("create core ConfigMap")
    })
    .await;
    host.wait_log("configmaps watch released", |l| {
        field(l, "message").starts_with("watch stopped")
            && field(l, "resource").starts_with("configmaps")
    })
    .await;
    env.create(&cms, cm("b", "1")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        get(&cms, "b-out").await.is_none(),
        "a plugin whose approval was narrowed handled an event"
    );

    // Widened again: loaded, and the object created meanwhile is handled.
    env.approve_testkit("testkit");
    host.wait_log("testkit loaded again", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "testkit"
    })
    .await;
    out_has(&cms, "b", "1", Some("1")).await;
    let loads = host
        .matching(|l| field(l, "message") == "plugin loaded" && field(l, "plugin") == "testkit");
    assert_eq!(loads.len(), 2, "{}", host.dump());

    // Deleted: unloaded again.
    env.unapprove("testkit");
    eventually("testkit unloaded twice", CONVERGE, || async {
        let n = host
            .matching(|l| {
                field(l, "message").starts_with("plugin unloaded")
                    && field(l, "plugin") == "testkit"
            })
            .len();
        (n == 2).then_some(())
    })
    .await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// Revocation is immediate: a call in flight when its plugin's approval is narrowed (or
/// deleted) is dropped, and its write never lands; a well-behaved plugin keeps working
/// throughout. Deterministic: each held call (the hostile plugin's `fat` attack with a
/// release) waits, in the call, until ConfigMap `release` exists, which the test creates
/// only after the unload; had the call survived, it would then write `<trigger>-out`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_when_its_approval_is_narrowed_or_deleted_writes_nothing() {
    let env = Env::with_crds(false).await;
    env.add_plugin(
        &test_plugin("testkit"),
        "good",
        Some("name: good\nselector: kubewasm.dev/good=yes\n"),
    );
    let hostile = test_plugin("hostile");
    // A deadline far longer than the test: only the revocation can end these calls.
    let held = ["narrowed", "deleted"];
    for name in held {
        env.add_plugin(
            &hostile,
            name,
            Some(&format!("name: {name}\nkubewasm:\n  callDeadline: 10s\n")),
        );
    }
    let host = env.start_host(&host_args());
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let good = |tag: &str| {
        let cms = cms.clone();
        let env = &env;
        let name = format!("good-{tag}");
        async move {
            env.create(
                &cms,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "default",
                                    "labels": {"kubewasm.dev/good": "yes"}},
                       "data": {"value": "1"}}),
            )
            .await;
            eventually(&format!("{name}-out"), CONVERGE, || async {
                get(&cms, &format!("{name}-out")).await
            })
            .await;
        }
    };
    good("before").await;
    for name in held {
        env.create(
            &cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("{name}-call"), "namespace": "default",
                                "labels": {"kubewasm.dev/hostile": name}},
                   "data": {"attack": "fat", "mib": "1", "release": "release"}}),
        )
        .await;
    }
    for name in held {
        host.wait_log(&format!("{name}'s call holding"), |l| {
            field(l, "message").starts_with("fat holding")
                && field(l, "object").ends_with(&format!("default/{name}-call"))
        })
        .await;
    }
    // The well-behaved plugin is not held up by the calls in flight.
    good("during").await;

    // One approval narrowed to the watch alone (the create grant taken away), one deleted.
    env.approve(
        "narrowed",
        "watches:\n- {apiVersion: v1, kind: ConfigMap}\n- {resource: configmaps}\n",
    );
    env.unapprove("deleted");
    for name in held {
        host.wait_log(&format!("{name} unloaded"), |l| {
            field(l, "message").starts_with("plugin unloaded") && field(l, "plugin") == name
        })
        .await;
    }
    // Released: a call still running would now return and write `<trigger>-out`.
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "release", "namespace": "default"}}),
    )
    .await;
    for name in held {
        let out = format!("{name}-call-out");
        // Either the call was cancelled (said once), or it returned and its write landed.
        eventually(
            &format!("{name}'s call cancelled or written"),
            CONVERGE,
            || async {
                let cancelled = !host
                    .matching(|l| {
                        field(l, "message").starts_with("call cancelled")
                            && field(l, "plugin") == name
                    })
                    .is_empty();
                (cancelled || get(&cms, &out).await.is_some()).then_some(())
            },
        )
        .await;
        assert!(
            get(&cms, &out).await.is_none(),
            "{out} was written by a version whose approval was taken away:\n{}",
            host.dump()
        );
    }
    // The cancellation was said after the unload, and the revoked plugin's call counted
    // as neither a failure nor a quarantine.
    for name in held {
        let lines = host.logs();
        let at = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred);
        let unloaded = at(&|l| {
            field(l, "message").starts_with("plugin unloaded") && field(l, "plugin") == name
        });
        let cancelled = at(&|l| {
            field(l, "message").starts_with("call cancelled") && field(l, "plugin") == name
        });
        assert!(unloaded < cancelled, "{}", host.dump());
    }
    good("after").await;
    for name in held {
        assert!(get(&cms, &format!("{name}-call-out")).await.is_none());
    }
    host.assert_no_failed_events();
    assert!(
        host.matching(|l| field(l, "message").starts_with("plugin quarantined"))
            .is_empty(),
        "{}",
        host.dump()
    );
    assert_eq!(host.stop(), Some(0));
}

/// A new version that reads a kind no cache holds yet is routed events only once that
/// cache has synced: the version before it serves meanwhile, so no event of the swap
/// fails or reads a cache still filling. Deterministic: the host's requests are held (so
/// the new kind's list cannot complete) across the swap and an event; released, the
/// cache syncs and the staged version takes over with a replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_serves_once_the_caches_it_reads_have_synced() {
    const HOST: &str = "kubewasm-host";
    let env = Env::with_crds(false).await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let permissions = format!(
        "{TESTKIT_PERMISSIONS}reads:\n- {{apiVersion: v1, kind: Secret, namespaces: [default]}}\n"
    );
    env.approve("testkit", &permissions);
    std::fs::copy(test_plugin("testkit"), env.plugins.join("testkit.wasm")).unwrap();
    let host = env.start_host_as(HOST, &["--reload-debounce", "100ms", "--no-impersonation"]);
    let mut o = cm("o", "1");
    o["data"]["action"] = json!("read-secret");
    env.create(&cms, o).await;
    let out = eventually("o-out from version 1", CONVERGE, || async {
        get(&cms, "o-out")
            .await
            .filter(|o| o.data["data"]["version"] == json!("1"))
    })
    .await;
    assert!(
        out.data["data"]["readError"]
            .as_str()
            .is_some_and(|e| e.contains("not watched or declared")),
        "version 1 may not read Secrets: {:?}",
        out.data
    );

    // Hold the host's requests: the Secrets' list cannot complete. Version 2 reads them.
    env.server.stall_client(HOST);
    std::fs::write(
        env.plugins.join("testkit.yaml"),
        "version: \"2\"\nreadSecrets: true\n",
    )
    .unwrap();
    host.wait_log("version 2 staged", |l| {
        field(l, "message").starts_with("new version staged") && field(l, "version") == "2"
    })
    .await;
    // An event now goes to version 1, which still serves.
    cms.patch(
        "o",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "2"}})),
    )
    .await
    .expect("patch o");
    host.wait_log("o handled by version 1", |l| {
        field(l, "message") == "event"
            && field(l, "version") == "1"
            && field(l, "event") == "modified"
    })
    .await;
    env.server.release_client(HOST);

    let out = eventually("o-out from version 2", CONVERGE, || async {
        get(&cms, "o-out")
            .await
            .filter(|o| o.data["data"]["version"] == json!("2"))
    })
    .await;
    assert_eq!(
        out.data["data"]["readError"],
        json!("allowed"),
        "version 2 read the Secrets' cache once it had synced: {:?}",
        out.data
    );
    host.wait_log("the staged version serves", |l| {
        field(l, "message").starts_with("staged version serves")
    })
    .await;
    let version_2_before_sync = host.matching(|l| {
        field(l, "message") == "event"
            && field(l, "version") == "2"
            && field(l, "event") != "resync"
    });
    assert!(
        version_2_before_sync.is_empty(),
        "{version_2_before_sync:?}"
    );
    host.assert_no_failed_events();
    let errors = host.matching(|l| field(l, "level") == "ERROR");
    assert!(errors.is_empty(), "ERROR lines at the swap: {errors:?}");
    assert_eq!(host.stop(), Some(0));
}
