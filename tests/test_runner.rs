//! `kubewasm test` as a regression tool: fresh and reused instances, the ownerReference
//! an `ownedByTrigger` create gets, and `run --record` turning a cluster's events into
//! cases that `kubewasm test` passes (and fails once edited). Also: text logs name each
//! field once.
//!
//! With `--approvals` (or a case's `approval:`) it loads a plugin as `run` does, bounded by
//! the operator's approval, so a case passes exactly when `run` would apply its intents,
//! in both directions: an intent setting a finalizer the operator approved passes (as
//! `write_checks.rs` sees `run` apply it), and a plugin asking for a grant the operator
//! did not approve fails the way `run` refuses it at load (as `rbac_identity.rs` sees in
//! `run`'s log). Without either, a case approves what the plugin asks for.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::*;

/// A ConfigMap event object for testkit.
fn configmap(name: &str, action: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                        "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"action": action}})
}

/// testkit as `dir/testkit.wasm`, and its approval in `dir/approvals/` (for the tests
/// that pass `--approvals`).
fn install_testkit(dir: &Path) {
    std::fs::copy(test_plugin("testkit"), dir.join("testkit.wasm")).unwrap();
    let approvals = dir.join("approvals");
    std::fs::create_dir_all(&approvals).unwrap();
    write_approval(
        &approvals,
        "testkit",
        &approval_yaml("testkit", TESTKIT_PERMISSIONS),
    );
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
    install_testkit(dir.path());
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
        out.contains("second [reused instance, watch configmaps]")
            && out.contains("intents[0].create.object.data.calls: expected \"1\", got \"2\""),
        "{out}"
    );
    assert!(out.contains("1 passed, 1 failed"), "{out}");

    // The default runs both and names the cause.
    let (code, out) = kubewasm_test(&[], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("second [reused instance, watch configmaps] (passes on a fresh instance: the plugin keeps state between calls)"),
        "{out}"
    );
    assert!(!out.contains("[fresh instance"), "{out}");
}

/// The ownerReference admission binds is shown, compared when the case states it, and
/// written by --update.
#[test]
fn the_bound_owner_reference_is_compared_when_stated() {
    let dir = tempfile::tempdir().unwrap();
    install_testkit(dir.path());
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
        .arg("--approvals")
        .arg(&env.approvals)
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

/// The operator's approval `write_checks.rs` gives the hostile plugin `keeper`: create
/// ConfigMaps in `default`, with finalizer `example.com/block`.
fn keeper_approval() -> Value {
    json!({"watches": [{"apiVersion": "v1", "kind": "ConfigMap"}],
           "grants": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["default"],
                       "verbs": ["create"], "finalizers": ["example.com/block"]}]})
}

/// A case of the hostile plugin `plugin`: its `finalizer` attack on ConfigMap
/// `default/<cm>` creates `<cm>-out` carrying finalizer `example.com/block`.
fn finalizer_case(plugin: &str, cm: &str, expect: Value) -> Value {
    json!({"name": format!("{plugin} sets a finalizer"), "plugin": format!("{plugin}.wasm"),
           "event": {"type": "added", "object":
               {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": cm, "namespace": "default", "uid": format!("uid-{cm}"),
                             "labels": {"kubewasm.dev/hostile": plugin}},
                "data": {"attack": "finalizer"}}},
           "expect": expect})
}

fn finalizer_out(cm: &str) -> Value {
    json!({"intents": [{"create": {"object":
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": format!("{cm}-out"), "namespace": "default",
                      "finalizers": ["example.com/block"]}}}}]})
}

/// The finalizer `run` applies for `keeper` (write_checks'
/// `a_finalizer_without_a_grant_is_refused`) passes here too, whether the approval comes
/// from `--approvals` or the case's `approval:`; without it the case gets the refusal
/// `run` logs for `pinner`. An approval in the case's settings is refused, saying where
/// approvals live.
#[test]
fn a_finalizer_the_operator_approved_passes() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = test_plugin("hostile");
    for name in ["keeper", "pinner", "inline"] {
        std::fs::copy(&hostile, dir.path().join(format!("{name}.wasm"))).unwrap();
        std::fs::write(
            dir.path().join(format!("{name}.yaml")),
            format!("name: {name}\n"),
        )
        .unwrap();
    }
    // As write_checks approves them: keeper with the finalizer, pinner without it (what
    // `inspect --approval` prints), inline not at all.
    let approvals = dir.path().join("approvals");
    std::fs::create_dir(&approvals).unwrap();
    let yaml = |v: Value| serde_yaml_ng::to_string(&v).unwrap();
    write_approval(
        &approvals,
        "keeper",
        &approval_yaml("keeper", &yaml(keeper_approval())),
    );
    let pinner = json!({"watches": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                        "grants": [{"apiGroups": [""], "kinds": ["ConfigMap"],
                                    "namespaces": ["default"], "verbs": ["create"]}]});
    write_approval(
        &approvals,
        "pinner",
        &approval_yaml("pinner", &yaml(pinner)),
    );
    let with_approvals = ["--approvals", approvals.to_str().unwrap()];

    let file = dir.path().join("cases-keeper.yaml");
    write_cases(
        &file,
        &[finalizer_case("keeper", "keep", finalizer_out("keep"))],
    );
    let (code, out) = kubewasm_test(&with_approvals, &[&file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 passed, 0 failed"), "{out}");

    // The approval stated by the case, as `approval:`.
    let mut in_case = finalizer_case("inline", "keep", finalizer_out("keep"));
    in_case["approval"] = keeper_approval();
    let file = dir.path().join("cases-inline.yaml");
    write_cases(&file, &[in_case]);
    let (code, out) = kubewasm_test(&with_approvals, &[&file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 passed, 0 failed"), "{out}");

    // In the case's settings, under the host's key: refused with where approvals live.
    let mut in_settings = finalizer_case("inline", "keep", finalizer_out("keep"));
    in_settings["settings"] =
        json!({"name": "inline", "kubewasm": {"approved": keeper_approval()}});
    write_cases(&file, &[in_settings]);
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("kubewasm.approved: approvals no longer live in the plugin's settings file")
            && out.contains("--approvals"),
        "{out}"
    );

    // Not approved: refused as `run` refuses it, and the case expecting the intent fails.
    let refusal = "invalid intent #0: finalizer \"example.com/block\" on ConfigMap default/pin-out is not granted";
    let file = dir.path().join("cases-pinner.yaml");
    write_cases(
        &file,
        &[finalizer_case("pinner", "pin", json!({"error": refusal}))],
    );
    let (code, out) = kubewasm_test(&with_approvals, &[&file]);
    assert_eq!(code, 0, "{out}");
    write_cases(
        &file,
        &[finalizer_case("pinner", "pin", finalizer_out("pin"))],
    );
    let (code, out) = kubewasm_test(
        &[&with_approvals[..], &["--instances", "fresh"]].concat(),
        &[&file],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("unexpected error: {refusal}")),
        "{out}"
    );
    // Without an approval at all, a case approves what the plugin asks for: no finalizer
    // (a plugin never grants itself one).
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(refusal), "{out}");
}

/// A plugin asking for a grant the operator did not approve is refused as `run` refuses
/// it (rbac_identity's `unapproved` and escalating `testkit`), and its case fails with
/// the message `run` logs, whatever the case expects.
#[test]
fn a_grant_the_operator_did_not_approve_fails_the_case() {
    let dir = tempfile::tempdir().unwrap();
    install_testkit(dir.path());
    let approvals = dir.path().join("approvals");
    let with_approvals = ["--approvals", approvals.to_str().unwrap()];
    // As rbac_identity installs it: named by its settings, nothing approved.
    std::fs::copy(test_plugin("testkit"), dir.path().join("unapproved.wasm")).unwrap();
    std::fs::write(dir.path().join("unapproved.yaml"), "name: unapproved\n").unwrap();
    let copy = |plugin: &str, settings: Option<Value>| {
        let mut case = json!({"name": format!("{plugin} copies"), "plugin": format!("{plugin}.wasm"),
            "event": {"type": "added", "object":
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "a", "namespace": "default", "uid": "uid-a",
                              "labels": {"kubewasm.dev/testkit": plugin}},
                 "data": {"action": "copy"}}},
            "expect": {"match": "subset", "intents": [{"create": {"ownedByTrigger": true, "object":
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "a-out", "namespace": "default"}}}}]}});
        if let Some(s) = settings {
            case["settings"] = s;
        }
        case
    };

    // The approved testkit passes: the case is right.
    let file = dir.path().join("approved.yaml");
    write_cases(&file, &[copy("testkit", None)]);
    let (code, out) = kubewasm_test(&with_approvals, &[&file]);
    assert_eq!(code, 0, "{out}");

    // Nothing approved: refused, each watch and grant named.
    let file = dir.path().join("unapproved-cases.yaml");
    write_cases(&file, &[copy("unapproved", None)]);
    let (code, out) = kubewasm_test(
        &[&with_approvals[..], &["--instances", "fresh"]].concat(),
        &[&file],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "  plugin rejected: plugin unapproved asks for more than the operator approved: \
             watch v1/ConfigMap in all namespaces (watch \"configmaps\"); create core ConfigMap"
        ) && out.contains("kubewasm approve FILE.wasm"),
        "{out}"
    );
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    // Without --approvals the author's case approves what the plugin asks for.
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 0, "{out}");

    // The case's settings ask for more than the approvals approve: an escalation.
    let file = dir.path().join("escalating.yaml");
    write_cases(&file, &[copy("testkit", Some(json!({"grantAll": true})))]);
    let (code, out) = kubewasm_test(&with_approvals, &[&file]);
    assert_eq!(code, 1, "{out}");
    for extra in [
        "plugin testkit asks for more than the operator approved",
        "create * * (all namespaces and cluster-scoped, with force)",
        "delete * * (all namespaces and cluster-scoped, with force)",
    ] {
        assert!(out.contains(extra), "{extra}: {out}");
    }
    assert!(
        out.contains("[fresh instance") && out.contains("[reused instance"),
        "{out}"
    );
    assert!(out.contains("0 passed, 1 failed"), "{out}");

    // An approval in the case replaces --approvals': an empty one approves nothing.
    let mut case = copy("testkit", None);
    case["approval"] = json!({});
    write_cases(&file, &[case]);
    let (code, out) = kubewasm_test(
        &[&with_approvals[..], &["--instances", "fresh"]].concat(),
        &[&file],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "plugin testkit asks for more than the operator approved: \
             watch v1/ConfigMap in all namespaces (watch \"configmaps\"); create core ConfigMap"
        ),
        "{out}"
    );
}

/// A case without `watch:` goes to the watch of its object's kind: a Secret sent to
/// testkit (which watches ConfigMaps only) is refused with the plugin's watches named, not
/// delivered to its first watch; and every failure names the watch its event went to.
#[test]
fn a_case_goes_to_the_watch_of_its_object_s_kind() {
    let dir = tempfile::tempdir().unwrap();
    install_testkit(dir.path());
    let mut secret = configmap("s", "copy");
    secret["kind"] = json!("Secret");
    let file = dir.path().join("cases.yaml");
    write_cases(
        &file,
        &[
            json!({"name": "secret", "plugin": "testkit.wasm",
                   "event": {"type": "added", "object": secret},
                   "expect": {"intents": []}}),
            json!({"name": "wrong", "plugin": "testkit.wasm",
                   "event": {"type": "added", "object": configmap("c", "copy")},
                   "expect": {"intents": []}}),
        ],
    );
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("secret [fresh instance]\n")
            && out.contains(
                "the event's object (v1/Secret) is of no kind testkit watches: fix its \
                 apiVersion/kind or give `event.watch:` (its watches: configmaps (v1/ConfigMap))"
            ),
        "{out}"
    );
    assert!(
        out.contains(
            "wrong [fresh instance, watch configmaps]\n  intents: expected 0 items, got 1"
        ),
        "{out}"
    );
    assert!(out.contains("0 passed, 2 failed"), "{out}");
}

/// The report ends with its summary and a newline, passing or failing, so a shell prompt
/// starts on its own line.
#[test]
fn the_summary_ends_with_a_newline() {
    let dir = tempfile::tempdir().unwrap();
    install_testkit(dir.path());
    for (expect, summary, code) in [
        (
            json!({"match": "subset", "intents": [{"create": {"ownedByTrigger": true, "object":
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "c-out", "namespace": "shop"}, "data": {"from": "testkit"}}}}]}),
            "1 passed, 0 failed\n",
            0,
        ),
        (json!({"intents": []}), "0 passed, 1 failed\n", 1),
    ] {
        let file = dir.path().join("cases.yaml");
        write_cases(
            &file,
            &[json!({"name": "c", "plugin": "testkit.wasm",
                     "event": {"type": "added", "object": configmap("c", "copy")},
                     "expect": expect})],
        );
        let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(["--log", "warn", "test", "--instances", "fresh"])
            .arg(&file)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{stdout}");
        assert!(stdout.ends_with(summary), "{stdout:?}");
    }
}

/// `kubewasm test` refuses what `run` refuses before a create that writes an owner (the
/// hostile plugin's `owner-create`, with a create grant only): a create adopting one of
/// the case's `cluster:` objects, as write_checks'
/// `a_create_adds_an_owner_to_an_existing_object_only_where_it_may_delete` sees `run`
/// refuse it; the same object already carrying the owner passes, as does an object the
/// case's cluster does not hold (the create makes it).
#[test]
fn a_create_adopting_a_cluster_object_is_refused_as_run_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("hostile"), dir.path().join("creator.wasm")).unwrap();
    std::fs::write(dir.path().join("creator.yaml"), "name: creator\n").unwrap();
    let case = |name: &str, cluster: Value, expect: Value| {
        json!({"name": name, "plugin": "creator.wasm", "cluster": cluster,
               "event": {"type": "added", "object":
                   {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "adopt", "namespace": "default", "uid": "uid-adopt",
                                 "labels": {"kubewasm.dev/hostile": "creator"}},
                    "data": {"attack": "owner-create", "victim": "kept"}}},
               "expect": expect})
    };
    let kept = |owners: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kept", "namespace": "default", "uid": "uid-kept",
                            "ownerReferences": owners}})
    };
    let refusal = "intent #0 refused: a create that adds owner ConfigMap adopt to ConfigMap default/kept, which already exists, needs delete on it too";
    let created = json!({"match": "subset", "intents": [{"create": {"ownedByTrigger": true,
        "object": {"metadata": {"name": "kept", "namespace": "default"}}}}]});
    let file = dir.path().join("cases.yaml");
    write_cases(
        &file,
        &[case(
            "adopts",
            json!([kept(json!([]))]),
            json!({"error": refusal}),
        )],
    );
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 0, "{out}");
    // The case expecting the create fails with the refusal: the check can fail.
    write_cases(
        &file,
        &[case("adopts", json!([kept(json!([]))]), created.clone())],
    );
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(refusal), "{out}");
    // Carrying the owner already (the plugin created it), or not in the cluster: passes.
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "adopt",
                        "uid": "uid-adopt", "controller": true}]);
    write_cases(
        &file,
        &[
            case("owned already", json!([kept(owner)]), created.clone()),
            case("makes it", json!([]), created),
        ],
    );
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 passed, 0 failed"), "{out}");
}

/// A case runs on an embedded API server through `run`'s pipeline, so it fails where
/// `run` would. First: an object the watch's label selector does not select is never
/// handed to the plugin by `run`'s router, so the case fails, naming the watch and why
/// (it passed when cases were routed by kind only). Labelled as the selector asks, the
/// same case passes, and `after:` sees the create applied, owned by the trigger.
#[test]
fn a_case_the_watch_s_selector_does_not_select_fails() {
    let dir = tempfile::tempdir().unwrap();
    install_testkit(dir.path());
    let mut stray = configmap("stray", "copy");
    stray["metadata"]["labels"] = json!({"kubewasm.dev/testkit": "another"});
    let copied =
        json!({"create": {"object": {"metadata": {"name": "<any>"}}, "ownedByTrigger": true}});
    let case = |name: &str, object: Value| {
        json!({"name": name, "plugin": "testkit.wasm",
               "event": {"type": "added", "object": object},
               "expect": {"match": "subset", "intents": [copied]}})
    };
    let file = dir.path().join("cases.yaml");
    write_cases(&file, &[case("stray", stray)]);
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "no watch of testkit selects the event's object ConfigMap shop/stray, so `run` \
             would never hand it to the plugin: configmaps (v1/ConfigMap): its label \
             selector kubewasm.dev/testkit=testkit does not select the object's labels"
        ),
        "{out}"
    );
    let mut selected = case("selected", configmap("picked", "copy"));
    selected["after"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "picked-out", "namespace": "shop",
                     "ownerReferences": [{"kind": "ConfigMap", "name": "picked",
                                          "uid": "uid-picked", "controller": true}]},
        "data": {"from": "testkit"}}]);
    write_cases(&file, &[selected.clone()]);
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 0, "{out}");
    // `--update` records the intents and keeps `after:` as written.
    let (code, out) = kubewasm_test(&["--update"], &[&file]);
    assert_eq!(code, 0, "{out}");
    let updated = std::fs::read_to_string(&file).unwrap();
    assert!(
        updated.contains("after:") && updated.contains("from: testkit"),
        "{updated}"
    );
    assert!(!updated.contains("<any>"), "{updated}");
    // `after:` is checked against the server: another value fails the case.
    selected["after"][0]["data"]["from"] = json!("someone");
    write_cases(&file, &[selected]);
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("after[0].data.from: expected \"someone\", got \"testkit\""),
        "{out}"
    );
}

/// An intent the CRD's schema refuses fails the case with the API server's 422, as it
/// fails in `run`: the provisioner copies its settings' database type into the MongoDB
/// it creates, and the MongoDB CRD (`--crds examples/crds`) allows three.
#[test]
fn an_intent_the_crd_schema_refuses_fails_the_case() {
    let dir = tempfile::tempdir().unwrap();
    let site = json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
        "metadata": {"name": "blog", "namespace": "shop", "uid": "uid-blog"},
        "spec": {"title": "Blog"}});
    let case = |db_type: &str| {
        json!({"name": format!("type {db_type}"),
               "plugin": example_plugin("contentsite-provisioner"),
               "settings": {"database": {"type": db_type}},
               "event": {"type": "added", "object": site},
               "expect": {"match": "subset", "intents": [{}, {}, {}]}})
    };
    let file = dir.path().join("cases.yaml");
    write_cases(&file, &[case("Standalone"), case("Bogus")]);
    let crds = root().join("examples/crds");
    let args = ["--instances", "fresh", "--crds", crds.to_str().unwrap()];
    let (code, out) = kubewasm_test(&args, &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("ok   ") && out.contains("type Standalone"),
        "{out}"
    );
    assert!(
        out.contains("type Bogus [fresh instance, watch sites]\n  unexpected error: ")
            && out.contains("spec.type: Unsupported value: \"Bogus\""),
        "{out}"
    );
    assert!(out.contains("1 passed, 1 failed"), "{out}");
}

/// A server-side apply of a field another manager owns is a 409 conflict, as `run`
/// reports it: testkit's `write-shared` applies `shared`'s `data.key`, which the case's
/// cluster object gives to manager `kubectl` (a `cluster:` object's fields are
/// `kubectl`'s unless its `managedFields` say otherwise). The case expecting that
/// conflict passes; with force granted and asked for, the apply takes the field.
#[test]
fn a_case_conflicting_with_another_manager_s_field_fails() {
    let dir = tempfile::tempdir().unwrap();
    install_testkit(dir.path());
    let shared = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shared", "namespace": "shop"}, "data": {"key": "mine"}});
    let case = |name: &str, settings: Value, expect: Value| {
        json!({"name": name, "plugin": "testkit.wasm", "settings": settings,
               "cluster": [shared],
               "event": {"type": "added", "object": configmap("w", "write-shared")},
               "expect": expect})
    };
    let applies = |force: bool| json!({"match": "subset", "intents": [{"create": {"object": {}, "force": force}}]});
    let file = dir.path().join("cases.yaml");
    write_cases(
        &file,
        &[
            case("conflicts", json!({"value": "theirs"}), applies(false)),
            case(
                "expects the conflict",
                json!({"value": "theirs"}),
                json!({"error": "409 Conflict"}),
            ),
            case(
                "forces",
                json!({"value": "theirs", "force": true, "allowForce": true}),
                applies(true),
            ),
        ],
    );
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("conflicts [fresh instance, watch configmaps]\n  unexpected error: ")
            && out.contains("409 Conflict")
            && out.contains("kubectl"),
        "{out}"
    );
    assert!(out.contains("2 passed, 1 failed"), "{out}");
}

/// A merge patch changing a field another manager owns is refused before any write, as
/// `run`'s preflight refuses it (the API server itself would move the field silently):
/// hostile's `merge-raw` merges into `victim`, whose `data.owned` is `kubectl`'s.
#[test]
fn a_merge_patch_over_another_manager_s_field_fails() {
    let dir = tempfile::tempdir().unwrap();
    // Named as its settings name it (a plugin's name is its file's).
    std::fs::copy(test_plugin("hostile"), dir.path().join("merger.wasm")).unwrap();
    let victim = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim", "namespace": "default"}, "data": {"owned": "theirs"}});
    let case = |name: &str, body: Value, expect: Value| {
        json!({"name": name, "plugin": "merger.wasm",
               "settings": {"name": "merger", "grantVerbs": ["patch"]},
               "cluster": [victim],
               "event": {"type": "added", "object": {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "take", "namespace": "default",
                                "labels": {"kubewasm.dev/hostile": "merger"}},
                   "data": {"attack": "merge-raw", "body": body.to_string()}}},
               "expect": expect})
    };
    let merges = json!({"match": "subset", "intents": [{"patch": {"strategy": "merge"}}]});
    let file = dir.path().join("cases.yaml");
    write_cases(
        &file,
        &[
            case("takes", json!({"data": {"owned": "pwned"}}), merges.clone()),
            case("adds", json!({"data": {"added": "ok"}}), merges),
        ],
    );
    let (code, out) = kubewasm_test(&["--instances", "fresh"], &[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "merge patch of ConfigMap default/victim changes data.owned, which field \
             manager \"kubectl\" owns"
        ),
        "{out}"
    );
    assert!(out.contains("1 passed, 1 failed"), "{out}");
}
