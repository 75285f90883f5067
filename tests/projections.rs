//! Projections (`watch.fields`, `read.fields`), against the real binary and the embedded
//! API server: a plugin receives, in its events and in its reads, exactly the fields it
//! declared and the object's identity, in `run` as in `kubewasm test`; two plugins with
//! different projections of one kind each see their own; a reload widening a plugin's
//! projection re-lists the kind and the new version serves only once its cache holds the
//! new fields, without losing an event written meanwhile.
//!
//! The tool is testkit with `record: true`: whatever the trigger, it writes what it
//! received (the event's object, `host.get` of the trigger, `host.list` with `readAll`)
//! into `<cm>-seen-<plugin>`; with `requireData` an event lacking one of those keys fails,
//! which the host logs as a failed event.

mod support;

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use support::*;

/// The identity every projection keeps, and nothing else of `metadata` unless declared.
const IDENTITY: [&str; 4] = ["name", "namespace", "resourceVersion", "uid"];

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"kubewasm.dev/proj": "yes"},
                        "annotations": {"note": "not declared"}},
           "data": data})
}

/// testkit named `name`, recording what it receives, with the watch's `fields`.
fn settings(name: &str, version: &str, fields: &[&str], extra: &str) -> String {
    format!(
        "name: {name}\nversion: \"{version}\"\nselector: kubewasm.dev/proj=yes\nrecord: true\n\
         fields: {}\n{extra}",
        serde_json::to_string(fields).unwrap()
    )
}

/// The entry `key` of a record, parsed.
fn entry(seen: &DynamicObject, key: &str) -> Value {
    let text = seen.data["data"][key].as_str().unwrap_or("null");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{key}: {e}: {text}"))
}

/// The top-level keys of an object and of its `metadata`, sorted.
fn keys(o: &Value) -> (Vec<String>, Vec<String>) {
    let names = |v: &Value| {
        let mut k: Vec<String> = v
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    (names(o), names(&o["metadata"]))
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `name` once it is as `want` says; on a timeout, the host's log says why.
async fn seen(
    host: &HostProcess,
    cms: &Api<DynamicObject>,
    name: &str,
    want: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let wait = async {
        loop {
            if let Some(o) = get(cms, name).await.filter(|o| want(o)) {
                return o;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    match tokio::time::timeout(CONVERGE, wait).await {
        Ok(o) => o,
        Err(_) => panic!(
            "timed out waiting for {name}: {:?}\n--- log ---\n{}",
            get(cms, name).await.map(|o| o.data),
            host.dump()
        ),
    }
}

/// (a) and (b) in `run`: `narrow` declares `data.a`, `labelled` declares `data.b` and
/// `metadata.labels` (and reads every ConfigMap with `data.c`); each receives exactly its
/// own projection in its events, its `host.get` and its `host.list`, whatever the other
/// declared (the cache holds their union).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_plugin_receives_exactly_its_own_projection() {
    let env = Env::with_crds(false).await;
    env.add_plugin(
        &test_plugin("testkit"),
        "narrow",
        Some(&settings("narrow", "1", &["data.a"], "")),
    );
    env.add_plugin(
        &test_plugin("testkit"),
        "labelled",
        Some(&settings(
            "labelled",
            "1",
            &["data.b", "metadata.labels"],
            "readAll: true\nreadFields: [data.c]\n",
        )),
    );
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap("cm", json!({"a": "1", "b": "2", "c": "3", "d": "4"})),
    )
    .await;

    let narrow = seen(&host, &cms, "cm-seen-narrow", |_| true).await;
    for key in ["object", "got"] {
        let o = entry(&narrow, key);
        assert_eq!(
            keys(&o),
            (
                strs(&["apiVersion", "data", "kind", "metadata"]),
                strs(&IDENTITY)
            ),
            "narrow's {key}: {o}"
        );
        assert_eq!(o["data"], json!({"a": "1"}), "narrow's {key}: {o}");
        assert_eq!(
            (o["apiVersion"].as_str(), o["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
    }

    let labelled = seen(&host, &cms, "cm-seen-labelled", |_| true).await;
    let mut with_labels = strs(&IDENTITY);
    with_labels.push("labels".into());
    with_labels.sort();
    for key in ["object", "got"] {
        let o = entry(&labelled, key);
        assert_eq!(
            keys(&o),
            (
                strs(&["apiVersion", "data", "kind", "metadata"]),
                with_labels.clone()
            ),
            "labelled's {key}: {o}"
        );
        // Its read of the kind declares `data.c`: its projection of ConfigMaps is the
        // union of its watch's and its read's.
        assert_eq!(
            o["data"],
            json!({"b": "2", "c": "3"}),
            "labelled's {key}: {o}"
        );
        assert_eq!(o["metadata"]["labels"], json!({"kubewasm.dev/proj": "yes"}));
    }
    let listed = entry(&labelled, "listed");
    let trigger = listed
        .as_array()
        .and_then(|l| l.iter().find(|o| o["metadata"]["name"] == "cm"))
        .cloned()
        .unwrap_or_else(|| panic!("cm listed: {listed}"));
    assert_eq!(trigger["data"], json!({"b": "2", "c": "3"}), "{trigger}");
    assert!(
        trigger["metadata"].get("annotations").is_none(),
        "{trigger}"
    );
    host.assert_no_failed_events();
}

/// (a) in `kubewasm test`: the case's object reaches the plugin projected as `run`
/// projects it, in the event and in its reads; `--update` writes what it received.
#[test]
fn a_case_sees_what_run_gives() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("testkit"), dir.path().join("narrow.wasm")).unwrap();
    std::fs::write(
        dir.path().join("narrow.yaml"),
        settings("narrow", "1", &["data.a"], ""),
    )
    .unwrap();
    let mut object = configmap("cm", json!({"a": "1", "b": "2"}));
    object["metadata"]["uid"] = json!("uid-cm");
    let case = json!({"name": "projected", "plugin": "narrow.wasm",
        "event": {"type": "added", "object": object},
        "expect": {"intents": []}});
    let file = dir.path().join("cases.yaml");
    std::fs::write(&file, serde_yaml_ng::to_string(&case).unwrap()).unwrap();
    let (code, out) = kubewasm_test(&["--update"], &[&file]);
    assert_eq!(code, 0, "{out}");
    let updated: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let data = &updated["expect"]["intents"][0]["create"]["object"]["data"];
    for key in ["object", "got"] {
        let text = data[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key}: {updated}"));
        let o: Value = serde_json::from_str(text).unwrap();
        assert_eq!(o["data"], json!({"a": "1"}), "{key}: {o}");
        assert!(o["metadata"].get("labels").is_none(), "{key}: {o}");
        assert!(o["metadata"].get("annotations").is_none(), "{key}: {o}");
        assert_eq!(o["metadata"]["name"], "cm", "{key}: {o}");
        assert_eq!(o["metadata"]["uid"], "uid-cm", "{key}: {o}");
    }
}

/// (c) A reload widening the projection (`data.a` → `data.a`, `data.b`, every event of
/// the new version requiring `b`) re-lists ConfigMaps: the new version serves only once
/// the cache holds `b` (else its events fail, which the host logs), and the writes made
/// during the reload all reach a version. Narrowing back leaves `b` out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_widened_projection_relists_before_the_new_version_serves() {
    let env = Env::with_crds(false).await;
    env.add_plugin(
        &test_plugin("testkit"),
        "proj",
        Some(&settings("proj", "1", &["data.a"], "")),
    );
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, configmap("one", json!({"a": "1", "b": "1"})))
        .await;
    let first = seen(&host, &cms, "one-seen-proj", |_| true).await;
    assert_eq!(entry(&first, "object")["data"], json!({"a": "1"}));

    // Widen, and write while the reload runs.
    let settings_v2 = settings("proj", "2", &["data.a", "data.b"], "requireData: [a, b]\n");
    let tmp = env.plugins.join(".proj.yaml.tmp");
    std::fs::write(&tmp, settings_v2).unwrap();
    std::fs::rename(&tmp, env.plugins.join("proj.yaml")).unwrap();
    env.apply(&cms, "test", configmap("one", json!({"a": "2", "b": "2"})))
        .await;
    env.create(&cms, configmap("two", json!({"a": "1", "b": "1"})))
        .await;

    let is_v2 = |o: &DynamicObject| o.data["data"]["version"] == "2";
    let one = seen(&host, &cms, "one-seen-proj", |o| {
        is_v2(o) && entry(o, "object")["data"]["a"] == "2"
    })
    .await;
    assert_eq!(entry(&one, "object")["data"], json!({"a": "2", "b": "2"}));
    let two = seen(&host, &cms, "two-seen-proj", is_v2).await;
    assert_eq!(entry(&two, "object")["data"], json!({"a": "1", "b": "1"}));
    host.wait_log("the watch restarted for the fields", |l| {
        field(l, "message").starts_with("restarting the watch")
    })
    .await;
    // No event of the new version came without `b`.
    host.assert_no_failed_events();

    // Narrow back: `b` is left out again.
    let tmp = env.plugins.join(".proj.yaml.tmp");
    std::fs::write(&tmp, settings("proj", "3", &["data.a"], "")).unwrap();
    std::fs::rename(&tmp, env.plugins.join("proj.yaml")).unwrap();
    env.create(&cms, configmap("three", json!({"a": "3", "b": "3"})))
        .await;
    let three = seen(&host, &cms, "three-seen-proj", |o| {
        o.data["data"]["version"] == "3"
    })
    .await;
    assert_eq!(entry(&three, "object")["data"], json!({"a": "3"}));
    host.assert_no_failed_events();
}

/// Compatibility: a plugin built for `kubewasm:plugin@0.1.0` still loads and, declaring no
/// fields, receives whole objects, though another plugin projects the same kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_built_for_wit_0_1_gets_whole_objects() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("legacy"), "legacy", None);
    env.add_plugin(
        &test_plugin("testkit"),
        "narrow",
        Some(&settings("narrow", "1", &["data.a"], "")),
    );
    let host = env.start_host(&[]);
    host.wait_log("legacy loaded as 0.1.0", |l| {
        field(l, "message") == "instance cap"
            && field(l, "plugin") == "legacy"
            && field(l, "wit") == "0.1.0"
    })
    .await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let mut object = configmap("old", json!({"a": "1", "b": "2"}));
    object["metadata"]["labels"]["kubewasm.dev/legacy"] = json!("legacy");
    env.create(&cms, object).await;
    let out = seen(&host, &cms, "old-out", |_| true).await;
    for key in ["object", "got"] {
        let o = entry(&out, key);
        assert_eq!(o["data"], json!({"a": "1", "b": "2"}), "{key}: {o}");
        assert_eq!(
            o["metadata"]["annotations"],
            json!({"note": "not declared"}),
            "{o}"
        );
    }
    let narrow = seen(&host, &cms, "old-seen-narrow", |_| true).await;
    assert_eq!(entry(&narrow, "object")["data"], json!({"a": "1"}));
    host.assert_no_failed_events();
}
