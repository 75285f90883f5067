//! Host behaviour beyond the happy path: conflicts between plugins, CRDs installed after
//! start, watches broken by 410 Gone, bad plugins and bad intents. Each test drives the
//! real `kubewasm` binary against the embedded API server and asserts cluster state.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn trigger(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "data": data})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_plugins_get_409_naming_both_managers_and_only_force_wins() {
    let env = Env::with_crds(false).await;
    let testkit = test_plugin("testkit");
    for (name, value, force) in [
        ("writer-a", "a", false),
        ("writer-b", "b", false),
        ("writer-f", "f", true),
    ] {
        env.add_plugin(
            &testkit,
            name,
            Some(&format!(
                "name: {name}\nselector: kubewasm.dev/test=conflict\nvalue: {value}\nforce: {force}\nallowForce: {force}\n"
            )),
        );
    }
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        trigger(
            "go",
            json!({"kubewasm.dev/test": "conflict"}),
            json!({"action": "write-shared"}),
        ),
    )
    .await;

    // The forcing writer ends up owning the field; the others never take it back.
    let shared = eventually("shared owned by writer-f", CONVERGE, || async {
        get(&cms, "shared")
            .await
            .filter(|o| o.data["data"]["key"] == json!("f"))
    })
    .await;
    let conflict = host
        .wait_log("a 409 from a non-forcing writer", |l| {
            field(l, "message") == "event failed"
                && (field(l, "plugin") == "writer-a" || field(l, "plugin") == "writer-b")
                && field(l, "error").contains("409")
        })
        .await;
    let loser = field(&conflict, "plugin").to_string();
    let error = field(&conflict, "error");
    assert!(
        error.contains("kubewasm-writer-"),
        "the 409 does not name the owning manager: {error}"
    );
    assert!(
        host.logs().iter().any(|l| field(l, "plugin") == loser
            && field(l, "manager") == format!("kubewasm-{loser}")
            && field(l, "message").contains("not forced")),
        "no line names the losing manager and that it did not force:\n{}",
        host.dump()
    );
    // Still f after the losers retried a few times.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let shared_now = get(&cms, "shared").await.unwrap();
    assert_eq!(shared_now.data["data"]["key"], json!("f"));
    let owners_of_key: Vec<String> = shared
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:data/f:key").is_some())
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(owners_of_key, ["kubewasm-writer-f"]);
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_installed_after_start_is_watched_without_restart() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&example_plugin("mongodb-monitor"), "mongodb-monitor", None);
    let host = env.start_host(&[]);
    host.wait_log("waiting for MongoDB to be served", |l| {
        field(l, "message").contains("not served") && field(l, "resource").contains("MongoDB")
    })
    .await;

    env.apply_path(&root().join("examples/crds")).await;
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    env.create(
        &dbs,
        json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
               "metadata": {"name": "late", "namespace": "default"},
               "spec": {"type": "ReplicaSet", "members": 1, "version": "7.0.12", "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}}}}),
    )
    .await;
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    eventually("ServiceMonitor late-monitor", CONVERGE, || async {
        get(&monitors, "late-monitor").await
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_broken_by_410_relists_and_handles_changes_made_during_the_break() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let label = json!({"kubewasm.dev/testkit": "testkit"});
    env.create(
        &cms,
        trigger("before", label.clone(), json!({"value": "1"})),
    )
    .await;
    eventually("before-out", CONVERGE, || async {
        get(&cms, "before-out").await
    })
    .await;

    // Break every watch, change things while nobody watches, and compact the history so
    // the host's resourceVersion is gone: its next watch gets 410 Gone.
    env.server.pause_watches();
    env.create(
        &cms,
        trigger("during", label.clone(), json!({"value": "2"})),
    )
    .await;
    let patch = json!({"data": {"value": "changed"}});
    cms.patch(
        "before",
        &Default::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("patch during the break");
    env.server.compact();
    env.server.resume_watches();

    eventually("during-out", CONVERGE, || async {
        get(&cms, "during-out").await
    })
    .await;
    eventually("before-out updated", CONVERGE, || async {
        get(&cms, "before-out")
            .await
            .filter(|o| o.data["data"]["value"] == json!("changed"))
    })
    .await;
    host.wait_log("a relist", |l| field(l, "message") == "relisted")
        .await;
    assert_eq!(host.stop(), Some(0));
}

/// An empty component: valid wasm, but not the kubewasm world.
fn other_world_component() -> Vec<u8> {
    wat::parse_str("(component)").expect("wat")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_plugins_and_bad_intents_are_reported_and_everything_else_keeps_flowing() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    std::fs::write(env.plugins.join("garbage.wasm"), "this is not wasm").unwrap();
    std::fs::write(
        env.plugins.join("other-world.wasm"),
        other_world_component(),
    )
    .unwrap();
    // A component header with a body the compiler refuses: compiled in the host's compile
    // worker, whose message must reach the log.
    let mut truncated = b"\0asm\x0d\x00\x01\x00".to_vec();
    truncated.extend_from_slice(&[0x01, 0x7f, 0x00]);
    std::fs::write(env.plugins.join("truncated.wasm"), truncated).unwrap();
    let host = env.start_host(&[]);

    for (file, reason) in [
        ("garbage.wasm", "not a WebAssembly component"),
        (
            "other-world.wasm",
            "does not implement the kubewasm:plugin@0.2.0 world (nor 0.1.0)",
        ),
        ("truncated.wasm", "is out of bounds"),
    ] {
        let line = host
            .wait_log(file, |l| {
                field(l, "message") == "plugin rejected" && field(l, "error").contains(file)
            })
            .await;
        assert!(field(&line, "error").contains(reason), "{line}");
    }

    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let label = json!({"kubewasm.dev/testkit": "testkit"});
    let cases = [
        ("trap", "trapped"),
        ("bad-json", "invalid intent #0: object is not valid JSON"),
        ("no-kind", "invalid intent #0: kind is missing"),
        ("no-name", "invalid intent #0: metadata.name is missing"),
        (
            "outside-grant",
            "intent #1 refused: no grant allows create on v1 Secret",
        ),
    ];
    for (action, _) in cases {
        env.create(
            &cms,
            trigger(action, label.clone(), json!({"action": action})),
        )
        .await;
    }
    env.create(&cms, trigger("good", label.clone(), json!({"value": "ok"})))
        .await;

    for (action, reason) in cases {
        let line = host
            .wait_log(&format!("failure of {action}"), |l| {
                field(l, "message") == "event failed"
                    && field(l, "object").ends_with(&format!("/{action}"))
            })
            .await;
        assert_eq!(field(&line, "plugin"), "testkit", "{line}");
        assert!(field(&line, "error").contains(reason), "{action}: {line}");
    }
    // Failed events are retried with backoff.
    eventually("trap retried", CONVERGE, || async {
        let n = host
            .matching(|l| {
                field(l, "message") == "event failed" && field(l, "object").ends_with("/trap")
            })
            .len();
        (n >= 2).then_some(())
    })
    .await;
    // Other objects keep flowing; nothing of a refused call was applied.
    let good = eventually("good-out", CONVERGE, || async {
        get(&cms, "good-out").await
    })
    .await;
    assert_eq!(good.data["data"]["value"], json!("ok"));
    assert!(
        get(&cms, "outside-grant-out").await.is_none(),
        "part of a refused call was applied"
    );
    let secrets = env.api("v1", "Secret", "secrets", Some("default"));
    assert!(get(&secrets, "outside-grant-secret").await.is_none());
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_read_the_cache_but_only_what_they_watch() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let label = json!({"kubewasm.dev/testkit": "testkit"});
    env.create(
        &cms,
        trigger("peer", label.clone(), json!({"action": "none-such"})),
    )
    .await;
    env.create(
        &cms,
        trigger("reader", label.clone(), json!({"action": "read"})),
    )
    .await;
    env.create(
        &cms,
        trigger("snoop", label.clone(), json!({"action": "read-secret"})),
    )
    .await;
    let read = eventually("reader-out", CONVERGE, || async {
        get(&cms, "reader-out").await
    })
    .await;
    let listed = read.data["data"]["listed"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        listed.contains("peer") && listed.contains("reader"),
        "{listed}"
    );
    let snoop = eventually("snoop-out", CONVERGE, || async {
        get(&cms, "snoop-out").await
    })
    .await;
    assert!(
        snoop.data["data"]["readError"]
            .as_str()
            .unwrap_or_default()
            .contains("not watched or declared"),
        "{:?}",
        snoop.data
    );
    assert_eq!(host.stop(), Some(0));
}

/// `kubewasm test` and `kubewasm run` admit intents through one pipeline: a grant limited to
/// a namespace never covers a cluster-scoped kind, whatever the trigger's namespace. (They
/// used to disagree: `test` checked the grant with the trigger's namespace.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_and_run_both_refuse_a_cluster_scoped_kind_under_a_namespaced_grant() {
    let settings = "namespaceGrant: [default]\n";
    let refusal = "intent #0 refused: no grant allows create on v1 Namespace (cluster-scoped)";

    // Offline, with the test runner: the refusal is what the case gets. The plugin is
    // installed with its approval, as for the host below (the runner loads it as `run` does).
    let dir = tempfile::tempdir().unwrap();
    let approvals = dir.path().join("approvals");
    std::fs::create_dir(&approvals).unwrap();
    install_approved(
        &test_plugin("testkit"),
        dir.path(),
        &approvals,
        "testkit",
        Some(settings),
    );
    let case = |expect: &str| {
        format!(
            "name: cluster-scoped kind, namespaced grant\nplugin: testkit.wasm\n\
             event:\n  type: added\n  object:\n    apiVersion: v1\n    kind: ConfigMap\n\
             \x20   metadata: {{name: cs, namespace: default, uid: u-1, labels: {{kubewasm.dev/testkit: testkit}}}}\n\
             \x20   data: {{action: cluster-scoped}}\nexpect:\n{expect}"
        )
    };
    let run_case = |text: String| {
        let file = dir.path().join("case.yaml");
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(["--log", "warn", "test", "--approvals"])
            .arg(&approvals)
            .arg(&file)
            .output()
            .expect("kubewasm test runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run_case(case(&format!("  error: '{refusal}'\n")));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.trim_end().ends_with("1 passed, 0 failed"), "{out}");
    // A case that expects the Namespace to be created fails, naming the refusal.
    let (code, out) = run_case(case(
        "  intents:\n  - create:\n      object: {apiVersion: v1, kind: Namespace, metadata: {name: cs-ns}}\n",
    ));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(refusal), "{out}");

    // Online, with the host: the same intent is refused and nothing is written.
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", Some(settings));
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let label = json!({"kubewasm.dev/testkit": "testkit"});
    env.create(
        &cms,
        trigger("cs", label.clone(), json!({"action": "cluster-scoped"})),
    )
    .await;
    env.create(&cms, trigger("good", label, json!({"value": "ok"})))
        .await;
    let line = host
        .wait_log("the refusal", |l| {
            field(l, "message") == "event failed" && field(l, "object").ends_with("/cs")
        })
        .await;
    assert!(field(&line, "error").contains(refusal), "{line}");
    eventually("good-out", CONVERGE, || async {
        get(&cms, "good-out").await
    })
    .await;
    let namespaces = env.api("v1", "Namespace", "namespaces", None);
    assert!(
        get(&namespaces, "cs-ns").await.is_none(),
        "refused Namespace was created"
    );
    assert_eq!(host.stop(), Some(0));
}

/// A selector that does not parse rejects the plugin when it loads, with the watch and the
/// selector named; it is never matched as "everything".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_selector_rejects_the_plugin_at_load_time() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    env.add_plugin(
        &test_plugin("testkit"),
        "broken",
        Some("name: broken\nselector: 'app in ()'\n"),
    );
    let host = env.start_host(&[]);
    let line = host
        .wait_log("broken rejected", |l| {
            field(l, "message") == "plugin rejected" && field(l, "error").contains("broken.wasm")
        })
        .await;
    let error = field(&line, "error");
    assert!(
        error.contains("label selector") && error.contains("app in ()"),
        "{line}"
    );
    // The good plugin serves; the broken one handles nothing, not even matching objects.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        trigger(
            "both",
            json!({"kubewasm.dev/testkit": "testkit", "app": "x"}),
            json!({}),
        ),
    )
    .await;
    let out = eventually("both-out", CONVERGE, || async {
        get(&cms, "both-out").await
    })
    .await;
    assert_eq!(out.data["data"]["from"], json!("testkit"));
    assert!(
        host.matching(|l| field(l, "plugin") == "broken" && field(l, "message") == "event")
            .is_empty(),
        "the rejected plugin handled an event"
    );
    assert_eq!(host.stop(), Some(0));
}

/// The host caches objects without managedFields (the server's bookkeeping, often larger
/// than the object): plugins never see them, in events or reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_get_objects_without_managed_fields() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let created = env
        .create(
            &cms,
            trigger(
                "mf",
                json!({"kubewasm.dev/testkit": "testkit"}),
                json!({"action": "self"}),
            ),
        )
        .await;
    assert!(
        created.metadata.managed_fields.is_some(),
        "the server keeps managedFields"
    );
    let out = eventually("mf-out", CONVERGE, || async { get(&cms, "mf-out").await }).await;
    assert_eq!(out.data["data"]["managedFields"], json!("false"));
    assert_eq!(host.stop(), Some(0));
}

/// Once started, the host gives back the pages of its binary it stopped using (then 10 s
/// later and every minute: `host/cli/src/resident.rs`): the code it runs afterwards faults
/// back in from the file, and events are handled as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_keeps_handling_events_after_giving_back_its_start_up_pages() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let released = host
        .wait_log("the first release of unused pages", |l| {
            field(l, "message").starts_with("dropped the binary's unused pages")
        })
        .await;
    if cfg!(target_os = "linux") {
        assert!(
            released["mapped_bytes"].as_u64().is_some_and(|b| b > 0),
            "no mapping of the binary was dropped: {released}"
        );
    }
    env.create(
        &cms,
        trigger(
            "after-release",
            json!({"kubewasm.dev/testkit": "testkit"}),
            json!({"action": "self"}),
        ),
    )
    .await;
    eventually("after-release-out", CONVERGE, || async {
        get(&cms, "after-release-out").await
    })
    .await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}
