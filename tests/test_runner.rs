//! `kubewasm test` as a regression tool: fresh and reused instances, the ownerReference
//! an `ownedByTrigger` create gets, and `run --record` turning a cluster's events into
//! cases that `kubewasm test` passes (and fails once edited). Also: text logs name each
//! field once.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::*;

/// `kubewasm test ARGS...`: (exit code, stdout).
fn kubewasm_test(args: &[&str], paths: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "test"])
        .args(args)
        .args(paths)
        .output()
        .expect("run kubewasm test");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

/// A ConfigMap event object for testkit.
fn configmap(name: &str, action: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                        "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"action": action}})
}

fn write_cases(path: &Path, cases: &[Value]) {
    let docs: Vec<String> = cases
        .iter()
        .map(|c| serde_yaml_ng::to_string(c).unwrap())
        .collect();
    std::fs::write(path, docs.join("---\n")).unwrap();
}

/// testkit's `stateful` action counts its calls in a global: every call on a fresh
/// instance answers 1, the second call on a reused one answers 2.
#[test]
fn a_plugin_keeping_state_fails_on_the_reused_instance_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("testkit"), dir.path().join("testkit.wasm")).unwrap();
    let case = |name: &str| {
        json!({"name": name, "plugin": "testkit.wasm",
               "event": {"type": "added", "object": configmap(name, "stateful")},
               "expect": {"intents": [{"create": {"ownedByTrigger": true, "object":
                   {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{name}-out"), "namespace": "shop"},
                    "data": {"calls": "1"}}}}]}})
    };
    let file = dir.path().join("cases.yaml");
    write_cases(&file, &[case("first"), case("second")]);

    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 passed, 0 failed"), "{out}");

    let (code, out) = kubewasm_test(&["--instances", "reused"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("ok   "),
        "the first call is still right: {out}"
    );
    assert!(
        out.contains("second [reused instance]")
            && out.contains("intents[0].create.object.data.calls: expected \"1\", got \"2\""),
        "{out}"
    );
    assert!(out.contains("1 passed, 1 failed"), "{out}");

    // The default runs both and names the cause.
    let (code, out) = kubewasm_test(&[], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("second [reused instance] (passes on a fresh instance: the plugin keeps state between calls)"),
        "{out}"
    );
    assert!(!out.contains("[fresh instance]"), "{out}");
}

/// The ownerReference admission binds is shown, compared when the case states it, and
/// written by --update.
#[test]
fn the_bound_owner_reference_is_compared_when_stated() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("testkit"), dir.path().join("testkit.wasm")).unwrap();
    let owner = |uid: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "site", "uid": uid,
               "controller": true, "blockOwnerDeletion": true})
    };
    let case = |owner: Option<Value>| {
        let mut create = json!({"ownedByTrigger": true, "object":
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "site-out", "namespace": "shop"},
             "data": {"from": "testkit", "version": "1", "value": null}}});
        if let Some(o) = owner {
            create["ownerReference"] = o;
        }
        json!({"name": "copy", "plugin": "testkit.wasm",
               "event": {"type": "added", "object": configmap("site", "copy")},
               "expect": {"intents": [{"create": create}]}})
    };
    let file = dir.path().join("cases.yaml");

    write_cases(&file, &[case(Some(owner("uid-site")))]);
    let (code, out) = kubewasm_test(&[], &[&file]);
    assert_eq!(code, 0, "{out}");

    write_cases(&file, &[case(Some(owner("someone-else")))]);
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "intents[0].create.ownerReference.uid: expected \"someone-else\", got \"uid-site\""
        ),
        "{out}"
    );

    // Not stated: not compared.
    write_cases(&file, &[case(None)]);
    let (code, out) = kubewasm_test(&[], &[&file]);
    assert_eq!(code, 0, "{out}");

    // --update writes it.
    let (code, out) = kubewasm_test(&["--update"], &[&file]);
    assert_eq!(code, 0, "{out}");
    let updated: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        updated["expect"]["intents"][0]["create"]["ownerReference"],
        owner("uid-site"),
        "{updated}"
    );
}

/// `run --record` against the embedded API server writes each handled event as a case
/// (with what the plugin read); `kubewasm test` passes the recording and fails it once
/// its expected output is edited. The same run's text logs name the plugin once a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_events_replay_offline() {
    let env = Env::new().await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let record = env.dir.path().join("recorded");
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    // Already there: what the plugin's host.list will find (and an event of its own).
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "neighbour", "labels": {"kubewasm.dev/testkit": "testkit"}},
               "data": {"action": "copy"}}),
    )
    .await;

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", "text", "--log", "info", "run", "--plugins"])
        .arg(&env.plugins)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .arg("--record")
        .arg(&record)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = HostProcess::spawn_command(cmd);
    host.wait_log("host running", |l| {
        field(l, "message").contains("host running")
    })
    .await;
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "reader", "labels": {"kubewasm.dev/testkit": "testkit"}},
               "data": {"action": "read"}}),
    )
    .await;
    let folder = record.join("testkit");
    let recorded = |name: &'static str| {
        let folder = folder.clone();
        move || {
            let found = std::fs::read_dir(&folder)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.to_string_lossy().ends_with(&format!("-{name}.yaml")));
            async move { found }
        }
    };
    eventually(
        "the neighbour's recorded case",
        CONVERGE,
        recorded("neighbour"),
    )
    .await;
    let case_file = eventually("the reader's recorded case", CONVERGE, recorded("reader")).await;
    // The plugin's own log line, inside the event's span: each field once.
    let line = host
        .wait_log("the plugin's log line", |l| {
            field(l, "message").contains("action read for default/reader")
        })
        .await;
    let text = field(&line, "message").to_string();
    host.stop();
    assert_eq!(text.matches("plugin=").count(), 1, "{text}");
    assert_eq!(text.matches("object=").count(), 1, "{text}");
    assert!(text.contains("plugin=\"testkit\""), "{text}");

    let file_name = case_file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        file_name.len() == "0001-added-configmap-default-reader.yaml".len()
            && file_name.ends_with("-added-configmap-default-reader.yaml")
            && file_name[..4].chars().all(|c| c.is_ascii_digit()),
        "{file_name}"
    );
    let case: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&case_file).unwrap()).unwrap();
    assert_eq!(case["event"]["watch"], "configmaps", "{case}");
    assert_eq!(case["plugin"], "../../plugins/testkit.wasm", "{case}");
    let read: Vec<&str> = case["cluster"]
        .as_array()
        .unwrap_or_else(|| panic!("no cluster reads recorded: {case}"))
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert!(
        read.contains(&"neighbour") && read.contains(&"reader"),
        "{case}"
    );
    let create = &case["expect"]["intents"][0]["create"];
    assert_eq!(
        create["object"]["data"]["listed"]
            .as_str()
            .map(|s| s.contains("neighbour")),
        Some(true),
        "{case}"
    );
    assert_eq!(create["ownerReference"]["name"], "reader", "{case}");
    assert_eq!(
        create["ownerReference"]["uid"], case["event"]["object"]["metadata"]["uid"],
        "{case}"
    );

    let (code, out) = kubewasm_test(&[], &[&record]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 passed, 0 failed"), "{out}");

    // The recording is a real expectation: edit it and the replay fails.
    let edited =
        std::fs::read_to_string(&case_file)
            .unwrap()
            .replacen("listed:", "listed: edited-", 1);
    std::fs::write(&case_file, edited).unwrap();
    let (code, out) = kubewasm_test(&[], &[&record]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("intents[0].create.object.data.listed: expected"),
        "{out}"
    );
}
