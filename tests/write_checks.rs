//! Every write stays inside its grant, and reads inside the plugin's scope: hostile plugins
//! (`tests/plugins/hostile`) try to get objects garbage-collected through bogus owner
//! references or through the trigger made their owner by a patch, to take another field
//! manager's fields with a merge patch, to strip finalizers and owners with `null`, to
//! pin objects with finalizers, to smuggle query parameters through object names, to
//! write spec and labels with a status-only grant, and to list every Secret;
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
        "err: v1/Secret across all namespaces: this plugin may read it only in namespaces default (where it is approved to read it); a cluster-wide read needs namespaces [\"*\"] in its approval"
    );
    assert_eq!(entry(&data, "listOwn"), "ok: default/mine");
    assert_eq!(
        entry(&data, "getOther"),
        "err: v1/Secret in namespace other: this plugin may read it only in namespaces default (where it is approved to read it); a cluster-wide read needs namespaces [\"*\"] in its approval"
    );
    assert!(!serde_json::to_string(&data).unwrap().contains("hunter2"));
    host.wait_log("the refused read logged", |l| {
        field(l, "message") == "read refused" && field(l, "plugin") == "peeker"
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warning_events_never_quote_the_plugins_error_text() {
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
    let error = refused(&host, "teller", "tell", "returned error").await;
    // The host's log has it (the operator reads it there) ...
    assert!(
        error.contains("Run kubectl delete namespace prod"),
        "{error}"
    );
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
    // ... the Event, readable by whoever reads Events in the namespace, does not.
    assert_eq!(event.data["reason"], json!("PluginFailed"));
    assert_eq!(
        message,
        "plugin teller returned an error (not retried); its message is in the host's log"
    );
    // An intent refused for a name the plugin chose: the refusal in the log quotes an
    // excerpt of it, the IntentRefused Event a fixed text.
    attack(
        &env,
        "teller",
        "named",
        "bad-name",
        json!({"target": "Run kubectl delete namespace prod"}),
    )
    .await;
    let error = refused(&host, "teller", "named", "intent #0").await;
    assert!(error.contains("Run kubectl"), "{error}");
    let event = eventually("a Warning Event on named", CONVERGE, || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.data["involvedObject"]["name"] == json!("named"))
    })
    .await;
    let message = event.data["message"].as_str().unwrap_or_default();
    eprintln!("event: {message}");
    assert_eq!(event.data["reason"], json!("IntentRefused"));
    assert_eq!(
        message,
        "plugin teller: intent #0 is malformed; the host's log has the details"
    );
    assert_eq!(host.stop(), Some(0));
}

/// Wait until ConfigMap `name` in `default` is gone.
async fn gone(env: &Env, name: &str) {
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually(&format!("{name} deleted"), CONVERGE, || async {
        get(&cms, name).await.is_none().then_some(())
    })
    .await;
}

/// An owner reference is a deletion waiting for its owner to go: a patch grant alone may
/// not write one (merge or apply), even to the trigger with its real uid; with delete
/// granted too it may, and the garbage collector then does what the grant allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_reference_by_patch_needs_delete_so_deleting_the_trigger_deletes_nothing_else() {
    let env = Env::with_crds(false).await;
    world(
        &env,
        &[
            ("adopter", "grantVerbs: [patch]\n"),
            ("deleter", "grantVerbs: [patch, delete]\n"),
        ],
    );
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for victim in ["kept-merge", "kept-apply", "deletable"] {
        env.create(
            &cms,
            configmap("default", victim, json!({}), json!({"keep": "me"})),
        )
        .await;
    }
    let host = env.start_host(LIMITS);
    attack(
        &env,
        "adopter",
        "adopt-merge",
        "owner-trigger",
        json!({"victim": "kept-merge"}),
    )
    .await;
    attack(
        &env,
        "adopter",
        "adopt-apply",
        "owner-trigger",
        json!({"victim": "kept-apply", "strategy": "apply"}),
    )
    .await;
    attack(
        &env,
        "deleter",
        "adopt-del",
        "owner-trigger",
        json!({"victim": "deletable"}),
    )
    .await;
    for cm in ["adopt-merge", "adopt-apply"] {
        refused(
            &host,
            "adopter",
            cm,
            "a patch that writes owner references on ConfigMap default/kept-",
        )
        .await;
    }
    let adopted = eventually("deletable owned by adopt-del", CONVERGE, || async {
        get(&cms, "deletable").await.filter(|o| {
            o.metadata
                .owner_references
                .as_ref()
                .is_some_and(|r| r.iter().any(|r| r.name == "adopt-del"))
        })
    })
    .await;
    assert!(managers(&adopted).contains(&"kubewasm-deleter".to_string()));
    good_keeps_working(&env, "adopt").await;
    // A witness the garbage collector must delete when adopt-merge goes: once it is gone,
    // the collector has seen adopt-merge deleted.
    let owner = get(&cms, "adopt-merge").await.expect("adopt-merge");
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "witness", "namespace": "default",
                   "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                       "name": "adopt-merge", "uid": owner.metadata.uid}]}}),
    )
    .await;
    for trigger in ["adopt-merge", "adopt-apply", "adopt-del"] {
        cms.delete(trigger, &Default::default())
            .await
            .expect("delete trigger");
    }
    gone(&env, "witness").await;
    gone(&env, "deletable").await;
    for victim in ["kept-merge", "kept-apply"] {
        let v = get(&cms, victim)
            .await
            .unwrap_or_else(|| panic!("{victim} was garbage-collected"));
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

/// A create is a server-side apply, an upsert: with a create grant alone, a create that
/// would add the trigger as owner of an object that exists (so the garbage collector
/// deletes it with the trigger) is refused, naming the plugin, the object and the rule,
/// and the object survives the trigger's deletion. An object the plugin created with that
/// owner may be created again (it carries the owner already), and the collector deletes
/// it with its trigger; with delete granted too, the adoption is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_adds_an_owner_to_an_existing_object_only_where_it_may_delete() {
    let env = Env::with_crds(false).await;
    world(
        &env,
        &[
            ("creator", ""),
            ("creator-del", "grantVerbs: [create, delete]\n"),
        ],
    );
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for victim in ["kept", "adoptable"] {
        env.create(
            &cms,
            configmap("default", victim, json!({}), json!({"keep": "me"})),
        )
        .await;
    }
    let host = env.start_host(LIMITS);
    attack(
        &env,
        "creator",
        "adopt-c",
        "owner-create",
        json!({"victim": "kept"}),
    )
    .await;
    attack(
        &env,
        "creator-del",
        "adopt-d",
        "owner-create",
        json!({"victim": "adoptable"}),
    )
    .await;
    attack(
        &env,
        "creator",
        "make-c",
        "owner-create",
        json!({"victim": "made"}),
    )
    .await;
    refused(
        &host,
        "creator",
        "adopt-c",
        "a create that adds owner ConfigMap adopt-c to ConfigMap default/kept, which already exists, needs delete on it too",
    )
    .await;
    let owned_by = |name: &'static str, owner: &'static str| {
        let cms = cms.clone();
        async move {
            eventually(&format!("{name} owned by {owner}"), CONVERGE, || async {
                get(&cms, name).await.filter(|o| {
                    o.metadata
                        .owner_references
                        .as_ref()
                        .is_some_and(|r| r.iter().any(|r| r.name == owner))
                })
            })
            .await
        }
    };
    let adopted = owned_by("adoptable", "adopt-d").await;
    assert!(managers(&adopted).contains(&"kubewasm-creator-del".to_string()));
    let made = owned_by("made", "make-c").await;
    assert!(managers(&made).contains(&"kubewasm-creator".to_string()));
    // make-c again: `made` exists now, carrying the owner the create writes: allowed.
    cms.patch(
        "make-c",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"data": {"again": "1"}})),
    )
    .await
    .expect("patch make-c");
    eventually("made created twice by make-c", CONVERGE, || async {
        let applied = host.matching(|l| {
            field(l, "plugin") == "creator"
                && field(l, "trigger").ends_with("default/make-c")
                && field(l, "message").starts_with("applied create ConfigMap default/made")
        });
        (applied.len() >= 2).then_some(())
    })
    .await;
    good_keeps_working(&env, "adopt-create").await;
    // A witness the garbage collector must delete when adopt-c goes: once it is gone,
    // the collector has seen adopt-c deleted.
    let owner = get(&cms, "adopt-c").await.expect("adopt-c");
    env.create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "witness", "namespace": "default",
                   "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                       "name": "adopt-c", "uid": owner.metadata.uid}]}}),
    )
    .await;
    for trigger in ["adopt-c", "adopt-d", "make-c"] {
        cms.delete(trigger, &Default::default())
            .await
            .expect("delete trigger");
    }
    gone(&env, "witness").await;
    gone(&env, "adoptable").await;
    gone(&env, "made").await;
    let kept = get(&cms, "kept").await.expect("kept was garbage-collected");
    assert_eq!(kept.data["data"], json!({"keep": "me"}));
    assert!(
        kept.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty),
        "kept got an owner: {:?}",
        kept.metadata.owner_references
    );
    let failed = host.matching(|l| field(l, "message") == "event failed");
    assert_eq!(failed.len(), 1, "only adopt-c fails:\n{}", host.dump());
    assert_eq!(host.stop(), Some(0));
}

/// A JSON merge patch never conflicts at the API server: it takes the fields it changes
/// from whoever owned them. The host checks it against the object's managedFields first:
/// another manager's field needs allowForce, as a forced server-side apply would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_patch_over_another_managers_field_needs_allow_force() {
    let env = Env::with_crds(false).await;
    world(
        &env,
        &[
            ("merger", "grantVerbs: [patch]\n"),
            ("forcer", "grantVerbs: [patch]\nallowForce: true\n"),
        ],
    );
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.apply(
        &cms,
        "owner-tool",
        configmap("default", "victim", json!({}), json!({"owned": "theirs"})),
    )
    .await;
    let host = env.start_host(LIMITS);
    let merge = |body: Value| json!({"body": body.to_string()});
    attack(
        &env,
        "merger",
        "take",
        "merge-raw",
        merge(json!({"data": {"owned": "pwned"}})),
    )
    .await;
    let error = refused(
        &host,
        "merger",
        "take",
        "merge patch of ConfigMap default/victim changes data.owned, which field manager \"owner-tool\" owns",
    )
    .await;
    assert!(error.contains("allow-force"), "{error}");
    // A field nobody else owns merges without force.
    attack(
        &env,
        "merger",
        "add",
        "merge-raw",
        merge(json!({"data": {"added": "ok"}})),
    )
    .await;
    let v = eventually("victim merged by merger", CONVERGE, || async {
        get(&cms, "victim")
            .await
            .filter(|o| o.data["data"]["added"] == json!("ok"))
    })
    .await;
    assert_eq!(v.data["data"]["owned"], json!("theirs"));
    assert!(managers(&v).contains(&"kubewasm-merger".to_string()));
    good_keeps_working(&env, "merge").await;
    // With allowForce, the same patch takes the field.
    attack(
        &env,
        "forcer",
        "force",
        "merge-raw",
        merge(json!({"data": {"owned": "forced"}})),
    )
    .await;
    eventually("victim forced", CONVERGE, || async {
        get(&cms, "victim")
            .await
            .filter(|o| o.data["data"]["owned"] == json!("forced"))
    })
    .await;
    assert!(
        host.matching(|l| field(l, "message") == "event failed" && field(l, "plugin") == "forcer")
            .is_empty(),
        "{}",
        host.dump()
    );
    assert_eq!(host.stop(), Some(0));
}

/// `null` for finalizers or owner references is not a way around their checks: it is
/// not a list, so it is refused; `[]` in a merge patch would remove another manager's
/// finalizer, so it needs allowForce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_finalizers_and_owner_references_are_checked() {
    let env = Env::with_crds(false).await;
    world(&env, &[("nuller", "grantVerbs: [patch]\n")]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.apply(
        &cms,
        "keeper-tool",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "victim", "namespace": "default",
                            "finalizers": ["example.com/keep"]},
               "data": {"keep": "me"}}),
    )
    .await;
    let host = env.start_host(LIMITS);
    let merge = |body: Value| json!({"body": body.to_string()});
    attack(
        &env,
        "nuller",
        "null-fin",
        "merge-raw",
        merge(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    attack(
        &env,
        "nuller",
        "null-own",
        "merge-raw",
        merge(json!({"metadata": {"ownerReferences": null}})),
    )
    .await;
    attack(
        &env,
        "nuller",
        "empty-fin",
        "merge-raw",
        merge(json!({"metadata": {"finalizers": []}})),
    )
    .await;
    refused(
        &host,
        "nuller",
        "null-fin",
        "metadata.finalizers must be a list of strings",
    )
    .await;
    refused(
        &host,
        "nuller",
        "null-own",
        "metadata.ownerReferences must be a list",
    )
    .await;
    let error = refused(&host, "nuller", "empty-fin", "changes metadata.finalizers").await;
    assert!(error.contains("\"keeper-tool\""), "{error}");
    good_keeps_working(&env, "null").await;
    let v = get(&cms, "victim").await.expect("victim");
    assert_eq!(
        v.metadata.finalizers,
        Some(vec!["example.com/keep".to_string()])
    );
    assert!(!managers(&v).contains(&"kubewasm-nuller".to_string()));
    assert_eq!(host.stop(), Some(0));
}

/// A call whose second write fails after its first was applied: one error line says what
/// was applied and what was not; the cluster has exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_failing_half_way_says_once_what_was_applied() {
    let env = Env::with_crds(false).await;
    world(&env, &[("halfway", "grantVerbs: [create, patch]\n")]);
    let host = env.start_host(LIMITS);
    attack(&env, "halfway", "half", "partial", json!({})).await;
    let error = refused(
        &host,
        "halfway",
        "half",
        "1 of 3 intents applied; intent #1 (patch ConfigMap default/missing) failed and the 1 after it were not tried",
    )
    .await;
    assert!(error.contains("ConfigMap default/half"), "{error}");
    good_keeps_working(&env, "half").await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(get(&cms, "half-first").await.is_some());
    assert!(get(&cms, "half-third").await.is_none());
    let lines =
        host.matching(|l| field(l, "message") == "event failed" && field(l, "plugin") == "halfway");
    assert_eq!(lines.len(), 1, "{}", host.dump());
    assert_eq!(host.stop(), Some(0));
}
