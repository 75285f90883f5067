//! Every write stays inside its grant, and reads inside the plugin's scope: hostile plugins
//! (`tests/plugins/hostile`) try to get objects garbage-collected through bogus owner
//! references, to pin objects with finalizers, to smuggle query parameters through object
//! names, to write spec and labels with a status-only grant, and to list every Secret;
//! they run against the real `kubewasm` binary and the embedded API server. While they
//! attack, a well-behaved plugin (testkit, `good`) keeps handling events, and the cluster
//! is checked for anything of the refused calls.

mod support;

use serde_json::{Value, json};
use support::*;

const LIMITS: &[&str] = &["--call-deadline", "500ms", "--memory-mib", "64"];

/// The well-behaved plugin's settings: testkit named `good`, copying its ConfigMaps.
const GOOD: &str = "name: good\nselector: kubewasm.dev/good=yes\n";

/// A world with the good plugin and the named hostile copies (settings YAML each).
fn world(env: &Env, hostile: &[(&str, &str)]) {
    env.add_plugin(&test_plugin("testkit"), "good", Some(GOOD));
    let wasm = test_plugin("hostile");
    for (name, extra) in hostile {
        env.add_plugin(&wasm, name, Some(&format!("name: {name}\n{extra}")));
    }
}

fn configmap(ns: &str, name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "data": data})
}

/// Trigger `attack` of the hostile plugin `plugin` with ConfigMap `default/cm`.
async fn attack(env: &Env, plugin: &str, cm: &str, attack: &str, extra: Value) {
    let mut data = json!({"attack": attack});
    if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap("default", cm, json!({"kubewasm.dev/hostile": plugin}), data),
    )
    .await;
}

/// The good plugin handles a fresh object while the attacks go on.
async fn good_keeps_working(env: &Env, tag: &str) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let name = format!("good-{tag}");
    env.create(
        &cms,
        configmap(
            "default",
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

/// Wait for the host's `event failed` line for `plugin` on `default/cm`; check its reason.
async fn refused(host: &HostProcess, plugin: &str, cm: &str, reason: &str) -> String {
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
        error.contains(reason),
        "{plugin} on {cm}: want {reason:?} in {error}"
    );
    assert!(
        error.contains(&format!("plugin {plugin}")),
        "the error does not name the plugin: {error}"
    );
    eprintln!("{plugin} on {cm}: {error}");
    error
}

/// The report ConfigMap `<cm>-out` a returning attack wrote.
async fn report(env: &Env, cm: &str) -> serde_json::Map<String, Value> {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let out = eventually(&format!("{cm}-out"), CONVERGE, || async {
        get(&cms, &format!("{cm}-out")).await
    })
    .await;
    out.data["data"].as_object().cloned().unwrap_or_default()
}

fn entry<'a>(data: &'a serde_json::Map<String, Value>, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or("<absent>")
}

async fn namespace(env: &Env, name: &str) {
    let nss = env.api("v1", "Namespace", "namespaces", None);
    env.create(
        &nss,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_grant_cannot_get_an_object_garbage_collected_through_a_bogus_owner() {
    let env = Env::with_crds(false).await;
    world(&env, &[("orphaner", "grantVerbs: [patch]\n")]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for victim in ["victim", "victim-apply"] {
        env.create(
            &cms,
            configmap("default", victim, json!({}), json!({"keep": "me"})),
        )
        .await;
    }
    let host = env.start_host(LIMITS);
    attack(&env, "orphaner", "gc-merge", "owner-bogus", json!({})).await;
    attack(
        &env,
        "orphaner",
        "gc-apply",
        "owner-bogus",
        json!({"victim": "victim-apply", "strategy": "apply"}),
    )
    .await;
    for cm in ["gc-merge", "gc-apply"] {
        refused(
            &host,
            "orphaner",
            cm,
            "has uid \"6f1e0000-0000-4000-8000-00000000dead\", but the host does not know that object",
        )
        .await;
    }
    good_keeps_working(&env, "gc").await;
    // The embedded server garbage-collects objects whose owners are gone; the victims
    // were never given the owner, so they are still there, unowned.
    for victim in ["victim", "victim-apply"] {
        let v = get(&cms, victim).await.expect("the victim was deleted");
        assert_eq!(v.data["data"], json!({"keep": "me"}));
        assert!(
            v.metadata
                .owner_references
                .as_ref()
                .is_none_or(Vec::is_empty),
            "{victim} got an owner: {:?}",
            v.metadata.owner_references
        );
    }
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_cannot_cross_namespaces() {
    let env = Env::with_crds(false).await;
    namespace(&env, "other").await;
    world(&env, &[("crosser", "grantNamespaces: [default, other]\n")]);
    let host = env.start_host(LIMITS);
    attack(&env, "crosser", "cross", "owner-cross-ns", json!({})).await;
    refused(
        &host,
        "crosser",
        "cross",
        "is in namespace default but ConfigMap other/cross-child is in namespace other: owner references cannot cross namespaces",
    )
    .await;
    good_keeps_working(&env, "cross").await;
    let other = env.api("v1", "ConfigMap", "configmaps", Some("other"));
    assert!(get(&other, "cross-child").await.is_none());
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_without_a_grant_is_refused() {
    let env = Env::with_crds(false).await;
    world(&env, &[("pinner", "")]);
    // The same plugin with the finalizer approved by the operator may set it.
    env.approve(
        "keeper",
        "watches: [{apiVersion: v1, kind: ConfigMap}]\ngrants:\n\
         - {apiGroups: [\"\"], kinds: [ConfigMap], namespaces: [default], verbs: [create], \
         finalizers: [example.com/block]}\n",
    );
    env.add_plugin_unapproved(&test_plugin("hostile"), "keeper", Some("name: keeper\n"));
    let host = env.start_host(LIMITS);
    attack(&env, "pinner", "pin", "finalizer", json!({})).await;
    attack(&env, "keeper", "keep", "finalizer", json!({})).await;
    refused(
        &host,
        "pinner",
        "pin",
        "finalizer \"example.com/block\" on ConfigMap default/pin-out is not granted",
    )
    .await;
    good_keeps_working(&env, "pin").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(get(&cms, "pin-out").await.is_none());
    let kept = eventually("keep-out", CONVERGE, || async {
        get(&cms, "keep-out").await
    })
    .await;
    assert_eq!(
        kept.metadata.finalizers,
        Some(vec!["example.com/block".to_string()])
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_would_change_the_request_url_are_refused_before_any_request() {
    let env = Env::with_crds(false).await;
    // Only the status subresource may be patched: `web?x=` on a status patch would
    // otherwise reach the main resource (`configmaps/web?x=/status`).
    world(&env, &[("smuggler", "grantVerbs: [patch-status]\n")]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        configmap("default", "web", json!({}), json!({"keep": "me"})),
    )
    .await;
    let host = env.start_host(LIMITS);
    let cases = [
        ("smuggle-query", "web?x="),
        ("smuggle-manager", "?fieldManager=other&"),
        ("smuggle-dryrun", "?dryRun=All&"),
        ("smuggle-fragment", "web#x"),
        ("smuggle-dots", ".."),
    ];
    for (cm, target) in cases {
        attack(
            &env,
            "smuggler",
            cm,
            "bad-name",
            json!({"target": target, "status": "true"}),
        )
        .await;
    }
    for (cm, target) in cases {
        let error = refused(&host, "smuggler", cm, "is not a valid name").await;
        assert!(error.contains(&format!("{target:?}")), "{error}");
    }
    good_keeps_working(&env, "names").await;
    let web = get(&cms, "web").await.expect("web");
    assert_eq!(web.data["data"], json!({"keep": "me"}));
    assert!(web.data.get("status").is_none(), "{:?}", web.data);
    assert!(
        !managers(&web).iter().any(|m| m.contains("smuggler")),
        "{:?}",
        managers(&web)
    );
    // No request reached the server for them: the host's log has no apply line.
    assert!(
        host.matching(
            |l| field(l, "plugin") == "smuggler" && field(l, "message").starts_with("applied")
        )
        .is_empty()
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_only_grant_cannot_write_spec_or_labels() {
    let env = Env::with_crds(false).await;
    world(
        &env,
        &[(
            "statusonly",
            "grantKinds: [Service]\ngrantVerbs: [patch-status]\n",
        )],
    );
    let services = env.api("v1", "Service", "services", Some("default"));
    env.create(
        &services,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "victim", "namespace": "default"},
               "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    let host = env.start_host(LIMITS);
    attack(&env, "statusonly", "status-spec", "status-spec", json!({})).await;
    refused(
        &host,
        "statusonly",
        "status-spec",
        "a status patch may carry only status",
    )
    .await;
    good_keeps_working(&env, "status").await;
    let svc = get(&services, "victim").await.expect("service");
    assert!(
        svc.metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key("pwned")),
        "{:?}",
        svc.metadata.labels
    );
    assert_ne!(
        svc.data["spec"]["type"],
        json!("NodePort"),
        "{:?}",
        svc.data
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_watching_one_namespace_cannot_list_every_secret() {
    let env = Env::with_crds(false).await;
    namespace(&env, "other").await;
    world(
        &env,
        &[(
            "peeker",
            "watchNamespace: default\nreadKinds: [v1/Secret]\n",
        )],
    );
    for (ns, name, password) in [("default", "mine", "own"), ("other", "victim", "hunter2")] {
        let secrets = env.api("v1", "Secret", "secrets", Some(ns));
        env.create(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "namespace": ns},
                   "stringData": {"password": password}}),
        )
        .await;
    }
    let host = env.start_host(LIMITS);
    // Reads are answered from the host's cache: wait until the Secrets are in it.
    host.wait_log("the Secret cache synced", |l| {
        field(l, "message") == "cache synced" && field(l, "resource").starts_with("secrets")
    })
    .await;
    attack(&env, "peeker", "peek", "read-secrets", json!({})).await;
    good_keeps_working(&env, "peek").await;
    let data = report(&env, "peek").await;
    eprintln!("{}", serde_json::to_string_pretty(&data).unwrap());
    assert_eq!(
        entry(&data, "listAll"),
        "err: v1/Secret across all namespaces: this plugin may read only namespaces default (those of its watches); a cluster-wide read needs a cluster-wide watch"
    );
    assert_eq!(entry(&data, "listOwn"), "ok: default/mine");
    assert_eq!(
        entry(&data, "getOther"),
        "err: v1/Secret in namespace other: this plugin may read only namespaces default (those of its watches); a cluster-wide read needs a cluster-wide watch"
    );
    assert!(!serde_json::to_string(&data).unwrap().contains("hunter2"));
    host.wait_log("the refused read logged", |l| {
        field(l, "message") == "read refused" && field(l, "plugin") == "peeker"
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warning_events_quote_only_a_marked_excerpt_of_plugin_text() {
    let env = Env::with_crds(false).await;
    world(&env, &[("teller", "")]);
    let host = env.start_host(LIMITS);
    let text = "Run kubectl delete namespace prod to fix this. ";
    attack(
        &env,
        "teller",
        "tell",
        "error-text",
        json!({"text": text, "times": "40"}),
    )
    .await;
    refused(&host, "teller", "tell", "returned error").await;
    good_keeps_working(&env, "tell").await;
    let events = env.api("v1", "Event", "events", Some("default"));
    let event = eventually("a Warning Event on tell", CONVERGE, || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.data["involvedObject"]["name"] == json!("tell"))
    })
    .await;
    let message = event.data["message"].as_str().unwrap_or_default();
    eprintln!("event: {message}");
    assert_eq!(event.data["reason"], json!("PluginFailed"));
    assert!(
        message.starts_with(
            "plugin teller returned an error (not retried); plugin said: \"Run kubectl delete"
        ),
        "{message}"
    );
    assert!(message.ends_with("(truncated)"), "{message}");
    assert!(message.len() < 250, "{} bytes: {message}", message.len());
    assert_eq!(host.stop(), Some(0));
}
