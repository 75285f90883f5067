//! testkit: one plugin whose behaviour the tests choose.
//!
//! Settings (`NAME.yaml`): `name` (manifest name, default `testkit`), `version` (default:
//! the build's, 1 or 2), `selector` (label
//! selector on ConfigMaps, default `kubewasm.dev/testkit=<name>`), `value` (written by
//! `write-shared`), `force` (force that write), `allowForce` (grant force),
//! `readAll` (declare a read of every ConfigMap), `readSecrets` (declare a read of Secrets), `watchResource` (spell the watch as a resource argument, e.g. `configmaps`),
//! `namespaceGrant` (a list of namespaces: also grant `create` on core `Namespace` objects,
//! limited to those namespaces, which can never cover a cluster-scoped kind), `grantAll`
//! (also ask for every verb on every kind everywhere, with force: an escalation the
//! operator's approval must refuse), `patchSelf` (also grant `patch` on ConfigMaps),
//! `fields` (the watch's projection, a list of paths), `readFields` (the projection of the
//! `readAll` read), `record` (whatever the action: record what the plugin received into
//! `<cm>-seen-<name>`: `object`, `old` (the event's objects as received), `got` (`host.get`
//! of the trigger), `version` and, with `readAll`, `listed` (`host.list` of the namespace's
//! ConfigMaps); with `requireData` (a list of keys), an event whose object lacks one of
//! them in `data` fails, not retried: what a plugin given less than it declared would do).
//!
//! The triggering ConfigMap's `data.action` picks what `handle` does:
//! `copy` (default: create `<cm>-out` owned by the trigger, data copied), `write-shared`
//! (apply ConfigMap `shared` with `data.key: <value>`), `trap` (panic), `error`
//! (return a retryable error), `bad-json`, `no-kind`, `no-name` (malformed intents),
//! `outside-grant` (create a Secret, which no grant allows), `read` (copy the result of
//! `host.list` of ConfigMaps into `<cm>-out`), `read-secret` (`host.get` of a Secret, not
//! allowed), `cluster-scoped` (create the Namespace `<cm>-ns`), `self` (report whether the
//! event's object carries managedFields), `stateful` (misbehaves on a reused instance:
//! copies how many `stateful` calls this instance has handled, so only a fresh instance
//! always answers `calls: "1"`), `track-deletion` (like `copy`; when the ConfigMap is
//! deleted, create `<cm>-deleted`), `label-self` (create `<cm>-out`, then server-side apply
//! a label on the trigger itself; needs `patchSelf`).

use serde_json::{Value, json};

wit_bindgen::generate!({
    path: "../../../wit",
    world: "kubewasm:plugin/plugin",
});

use exports::kubewasm::plugin::handler::Guest;
use kubewasm::plugin::host;
use kubewasm::plugin::types::{
    CreateIntent, Event, Grant, HandleError, Intent, LogLevel, Manifest, ObjectRef, PatchIntent,
    PatchStrategy, Read, ResourceRef, TypeRef, Verb, Watch,
};

/// A list of strings of the settings (absent: empty).
fn strings(s: &Value, key: &str) -> Vec<String> {
    s.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// `record`: what the plugin received of the event and of its reads, into
/// `<cm>-seen-<name>`, as the JSON text it got.
fn record(event: &Event, s: &Value, ns: &str, cm: &str) -> Result<Intent, HandleError> {
    let obj: Value = serde_json::from_str(&event.object).unwrap_or(Value::Null);
    if let Some(missing) = strings(s, "requireData")
        .into_iter()
        .find(|k| obj["data"].get(k.as_str()).is_none())
    {
        return Err(HandleError {
            message: format!("received {ns}/{cm} without data.{missing}"),
            retry: false,
        });
    }
    let got = match host::get("v1", "ConfigMap", Some(ns), cm) {
        Ok(o) => o.unwrap_or_default(),
        Err(e) => format!("error: {e}"),
    };
    let mut data = json!({
        "object": event.object,
        "old": event.old_object.clone().unwrap_or_default(),
        "got": got,
        "version": version_of(s),
    });
    if s.get("readAll").and_then(Value::as_bool).unwrap_or(false) {
        let listed = host::list("v1", "ConfigMap", Some(ns), None).unwrap_or_default();
        data["listed"] = json!(format!("[{}]", listed.join(",")));
    }
    Ok(create(
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": format!("{cm}-seen-{}", name_of(s)), "namespace": ns},
               "data": data})
        .to_string(),
        false,
        false,
    ))
}

struct Testkit;

/// Calls of the `stateful` action this instance has handled (state kept between calls).
static STATEFUL_CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Built twice by tests/plugins/build.sh: as version 1 and (TESTKIT_VERSION=2) as version 2,
/// so reload tests can replace the file with different code.
const BUILD_VERSION: &str = match option_env!("TESTKIT_VERSION") {
    Some(v) => v,
    None => "1",
};

fn version_of(s: &Value) -> String {
    s.get("version")
        .and_then(Value::as_str)
        .unwrap_or(BUILD_VERSION)
        .to_string()
}

fn settings(s: &Option<String>) -> Value {
    s.as_deref()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

fn name_of(s: &Value) -> String {
    s.get("name")
        .and_then(Value::as_str)
        .unwrap_or("testkit")
        .to_string()
}

fn create(object: String, force: bool, owned: bool) -> Intent {
    Intent::Create(CreateIntent {
        object,
        force,
        owned_by_trigger: owned,
    })
}

impl Guest for Testkit {
    fn describe(settings_json: Option<String>) -> Result<Manifest, String> {
        let s = settings(&settings_json);
        let name = name_of(&s);
        let selector = s
            .get("selector")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("kubewasm.dev/testkit={name}"));
        Ok(Manifest {
            name,
            version: version_of(&s),
            watches: vec![Watch {
                id: "configmaps".into(),
                // `watchResource: configmaps` spells the watch as a resource argument
                // instead of apiVersion + kind (the same resource, another spelling).
                resource: match s.get("watchResource").and_then(Value::as_str) {
                    Some(r) => ResourceRef::Resource(r.to_string()),
                    None => ResourceRef::Kind(TypeRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                    }),
                },
                namespace: None,
                label_selector: Some(selector),
                field_selector: None,
                fields: strings(&s, "fields"),
            }],
            grants: s
                .get("grantAll")
                .and_then(Value::as_bool)
                .filter(|all| *all)
                .map(|_| Grant {
                    // An escalation: everything, everywhere, with force.
                    api_groups: vec!["*".into()],
                    kinds: vec!["*".into()],
                    namespaces: vec![],
                    verbs: vec![Verb::Create, Verb::Patch, Verb::PatchStatus, Verb::Delete],
                    allow_force: true,
                })
                .into_iter()
                .chain(std::iter::once(Grant {
                    api_groups: vec!["".into()],
                    kinds: vec!["ConfigMap".into()],
                    namespaces: vec![],
                    verbs: vec![Verb::Create],
                    allow_force: s
                        .get("allowForce")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                }))
                // `patchSelf: true`: ConfigMaps may be patched too (the `label-self` action).
                .chain(
                    s.get("patchSelf")
                        .and_then(Value::as_bool)
                        .filter(|on| *on)
                        .map(|_| Grant {
                            api_groups: vec!["".into()],
                            kinds: vec!["ConfigMap".into()],
                            namespaces: vec![],
                            verbs: vec![Verb::Patch],
                            allow_force: false,
                        }),
                )
                .chain(s.get("namespaceGrant").and_then(Value::as_array).map(|ns| {
                    Grant {
                        api_groups: vec!["".into()],
                        kinds: vec!["Namespace".into()],
                        namespaces: ns
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect(),
                        verbs: vec![Verb::Create],
                        allow_force: false,
                    }
                }))
                .collect(),
            // `readAll: true` declares a read of every ConfigMap, so the host's ConfigMap
            // cache holds them all whatever the watch's selector.
            reads: [("readAll", "ConfigMap"), ("readSecrets", "Secret")]
                .into_iter()
                .filter(|(key, _)| s.get(*key).and_then(Value::as_bool).unwrap_or(false))
                .map(|(key, kind)| Read {
                    resource: ResourceRef::Kind(TypeRef {
                        api_version: "v1".into(),
                        kind: kind.into(),
                    }),
                    fields: match key {
                        "readAll" => strings(&s, "readFields"),
                        _ => Vec::new(),
                    },
                })
                .collect(),
        })
    }

    fn handle(event: Event, settings_json: Option<String>) -> Result<Vec<Intent>, HandleError> {
        let s = settings(&settings_json);
        let fail = |message: String| HandleError {
            message,
            retry: false,
        };
        let obj: Value = serde_json::from_str(&event.object).map_err(|e| fail(e.to_string()))?;
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
        let cm = obj["metadata"]["name"].as_str().unwrap_or("unnamed");
        let action = obj["data"]["action"].as_str().unwrap_or("copy");
        if event.event_type == kubewasm::plugin::types::EventType::Deleted {
            // `track-deletion`: record the deletion this plugin handled as `<cm>-deleted`
            // (not owned: the trigger is gone), so tests see it in cluster state.
            if action == "track-deletion" {
                host::log(LogLevel::Info, &format!("deleted {ns}/{cm}"));
                return Ok(vec![create(
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": format!("{cm}-deleted"), "namespace": ns},
                           "data": {"deleted": cm, "from": name_of(&s)}})
                    .to_string(),
                    false,
                    false,
                )]);
            }
            return Ok(vec![]);
        }
        if s.get("record").and_then(Value::as_bool).unwrap_or(false) {
            return Ok(vec![record(&event, &s, ns, cm)?]);
        }
        host::log(LogLevel::Info, &format!("action {action} for {ns}/{cm}"));
        let out = |data: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("{cm}-out"), "namespace": ns},
                   "data": data})
            .to_string()
        };
        Ok(match action {
            "copy" | "track-deletion" => vec![create(
                out(
                    json!({"from": name_of(&s), "version": version_of(&s), "value": obj["data"]["value"]}),
                ),
                false,
                true,
            )],
            "write-shared" => {
                let value = s.get("value").and_then(Value::as_str).unwrap_or("unset");
                let force = s.get("force").and_then(Value::as_bool).unwrap_or(false);
                vec![create(
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "shared", "namespace": ns},
                           "data": {"key": value}})
                    .to_string(),
                    force,
                    false,
                )]
            }
            // `<cm>-out`, then a server-side apply of a label on the trigger itself.
            "label-self" => vec![
                create(out(json!({"labelled": cm})), false, true),
                Intent::Patch(PatchIntent {
                    target: ObjectRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: Some(ns.to_string()),
                        name: cm.to_string(),
                    },
                    body: json!({"metadata": {"labels": {"kubewasm.dev/labelled": "yes"}}})
                        .to_string(),
                    strategy: PatchStrategy::Apply,
                    status: false,
                    force: false,
                }),
            ],
            "trap" => panic!("testkit was asked to trap"),
            "error" => {
                return Err(HandleError {
                    message: "testkit was asked to fail".into(),
                    retry: true,
                });
            }
            "bad-json" => vec![create("{not json".into(), false, false)],
            "no-kind" => vec![create(
                json!({"apiVersion": "v1", "metadata": {"name": "x", "namespace": ns}}).to_string(),
                false,
                false,
            )],
            "no-name" => vec![create(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns}})
                    .to_string(),
                false,
                false,
            )],
            "outside-grant" => vec![
                create(out(json!({"partial": "yes"})), false, true),
                create(
                    json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": format!("{cm}-secret"), "namespace": ns}})
                    .to_string(),
                    false,
                    false,
                ),
            ],
            "read" => {
                let listed = host::list("v1", "ConfigMap", Some(ns), Some("kubewasm.dev/testkit"))
                    .map_err(|e| fail(e))?;
                let names: Vec<String> = listed
                    .iter()
                    .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                    .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
                    .collect();
                vec![create(out(json!({"listed": names.join(",")})), false, true)]
            }
            "read-secret" => {
                let err = host::get("v1", "Secret", Some(ns), "anything")
                    .err()
                    .unwrap_or_else(|| "allowed".into());
                vec![create(
                    out(json!({"readError": err, "version": version_of(&s)})),
                    false,
                    true,
                )]
            }
            "self" => vec![create(
                out(
                    json!({"managedFields": obj["metadata"].get("managedFields").is_some().to_string()}),
                ),
                false,
                true,
            )],
            "stateful" => {
                let calls = STATEFUL_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                vec![create(
                    out(json!({"calls": calls.to_string()})),
                    false,
                    true,
                )]
            }
            "cluster-scoped" => vec![create(
                json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": format!("{cm}-ns")}})
                .to_string(),
                false,
                false,
            )],
            other => return Err(fail(format!("unknown action {other:?}"))),
        })
    }
}

export!(Testkit);
