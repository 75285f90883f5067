//! A swap to a version that reads a kind its predecessor did not (issue 33): on the real
//! kube-apiserver, a Plugin's new settings make testkit read Secrets. The new version is
//! staged until the host's Secret cache has synced, the old one serves the events of the
//! swap meanwhile, and nothing fails: no failed event and no ERROR line from the patch of
//! the Plugin to the first write of the new version (a newcomer saw 24 ERROR lines,
//! `v1/LimitRange is not watched or declared in reads`, at one swap before staging).

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::{CONVERGE, api, apply, create};
use crate::support::{self, eventually, field, get};
use crate::{Suite, print_plugins, push, with_host};

/// The Plugin's name (testkit takes it from its settings).
const NAME: &str = "swapkit";
/// Events sent while the new version is staged.
const DURING_SWAP: usize = 5;

pub async fn reads_a_new_kind(s: &'static Suite) {
    // A plugin file is named after its manifest, which testkit takes from its settings.
    let wasm = s._dir.path().join(format!("{NAME}.wasm"));
    std::fs::copy(support::test_plugin("testkit"), &wasm).expect("copy testkit");
    let pinned = push(s, &wasm, "e2e/swapkit:v1");
    let digest = pinned.split_once('@').map(|(_, d)| d).unwrap_or_default();
    let label = format!("kubewasm.dev/e2e-swap={}", s.id);
    let settings = |version: &str, reads: bool| {
        let mut v = json!({"name": NAME, "selector": label, "version": version});
        if reads {
            v["readSecrets"] = json!(true);
        }
        v
    };
    let docs = approved(s, &wasm, &pinned, &settings("2", true)).await;
    let mut first = docs.clone();
    first[0]["spec"]["settings"] = settings("1", false);
    apply(&s.admin, first).await;
    let plugins = api(&s.admin, "kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    let st = crate::serving(&plugins, NAME, digest).await;
    assert_eq!(st["version"], json!("1"), "{st}");

    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&s.ns));
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "swap", "namespace": s.ns,
                            "labels": {"kubewasm.dev/e2e-swap": s.id}},
               "data": {"action": "read-secret", "value": "0"}}),
    )
    .await;
    let out = out_at(&cms, "1").await;
    assert!(
        out["readError"]
            .as_str()
            .is_some_and(|e| e.contains("not watched or declared")),
        "version 1 may not read Secrets: {out}"
    );

    // The swap: version 2 reads Secrets; events arrive while its cache fills.
    let mark = with_host(s, |h| h.matching(|_| true).len()).await;
    let started = std::time::Instant::now();
    plugins
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"settings": settings("2", true)}})),
        )
        .await
        .expect("new settings");
    for i in 1..=DURING_SWAP {
        cms.patch(
            "swap",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": i.to_string()}})),
        )
        .await
        .expect("touch the trigger");
    }
    let out = out_at(&cms, "2").await;
    println!("  version 2 wrote after {:.1?}: {out}", started.elapsed());
    assert_eq!(out["readError"], json!("allowed"), "{out}");
    // The object's status names the version that serves now (rewritten at the promotion).
    let st = eventually("swapkit's status at version 2", CONVERGE, || async {
        let o = get(&plugins, NAME).await?;
        let st = o.data.get("status")?.clone();
        (st["version"] == json!("2")).then_some(st)
    })
    .await;
    assert_eq!(
        crate::condition(&st, "Ready")["status"],
        json!("True"),
        "{st}"
    );
    print_plugins(s, "swapkit swapped to version 2 (reads Secrets)");

    let since: Vec<Value> = with_host(s, |h| h.matching(|_| true)).await[mark..].to_vec();
    for l in since.iter().filter(|l| {
        let m = field(l, "message");
        m.starts_with("new version staged") || m.starts_with("staged version serves")
    }) {
        println!("  host log: {l}");
    }
    let failed: Vec<&Value> = since
        .iter()
        .filter(|l| field(l, "level") == "ERROR" || field(l, "message") == "event failed")
        .collect();
    assert!(
        failed.is_empty(),
        "failed events or ERROR lines at the swap: {failed:#?}"
    );
    let handled = since
        .iter()
        .filter(|l| field(l, "message") == "event" && field(l, "plugin") == NAME)
        .count();
    println!("  {handled} events of {NAME} handled across the swap, none failed");
}

/// `kubewasm approve` of testkit with `settings`, its read of Secrets approved in the
/// run's namespace only, and the RBAC `kubewasm rbac -f` derives from that Plugin: what
/// the operator reviews and applies. The cluster-scoped objects are left to cleanup.
async fn approved(s: &Suite, wasm: &std::path::Path, pinned: &str, settings: &Value) -> Vec<Value> {
    let dir = s._dir.path();
    let settings_file = dir.join("swapkit-settings.yaml");
    std::fs::write(&settings_file, settings.to_string()).expect("settings");
    let settings_file = settings_file.to_string_lossy().into_owned();
    let wasm = wasm.to_string_lossy().into_owned();
    let approved = crate::install_docs(
        s,
        &[
            "approve",
            &wasm,
            "--settings",
            &settings_file,
            "--module",
            pinned,
        ],
    );
    let mut plugin = approved.into_iter().next().expect("a Plugin first");
    let reads = plugin["spec"]["permissions"]["reads"]
        .as_array_mut()
        .expect("approve printed the read of Secrets");
    for r in reads.iter_mut().filter(|r| r["kind"] == "Secret") {
        r["namespaces"] = json!([s.ns]);
    }
    let file = dir.join("swapkit-plugin.yaml");
    std::fs::write(&file, serde_json::to_string(&plugin).expect("JSON")).expect("write");
    let mut docs = vec![plugin];
    let file = file.to_string_lossy().into_owned();
    docs.extend(crate::install_docs(s, &["rbac", "-f", &file]));
    crate::created_cluster_objects(s, &docs);
    docs
}

/// `swap-out`'s data once version `version` wrote it.
async fn out_at(cms: &kube::Api<kube::api::DynamicObject>, version: &str) -> Value {
    eventually(
        &format!("swap-out at version {version}"),
        CONVERGE,
        || async {
            get(cms, "swap-out")
                .await
                .filter(|o| o.data["data"]["version"] == json!(version))
                .map(|o| o.data["data"].clone())
        },
    )
    .await
}
