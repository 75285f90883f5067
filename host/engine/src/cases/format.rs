//! The test-case file format: the YAML `kubewasm test` reads and `--update` and
//! `run --record` write, documented in `plugins/conformance/README.md`.

use std::path::PathBuf;

use kubewasm_core::admit::Prepared;
use kubewasm_core::intent::{self, Action, RawIntent};
use kubewasm_core::plugin_object::Permissions;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One test case.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestCase {
    /// Shown in the report.
    pub name: String,
    /// The plugin file, relative to the test file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PathBuf>,
    /// Settings given to describe and handle, in place of the settings file beside the
    /// plugin; a `kubewasm` key in them is the host's, as in that file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// The operator's approval (`spec.permissions` of a Plugin object: watches, reads,
    /// grants), in place of the plugin's in `kubewasm test --approvals`; without either,
    /// the case runs approving exactly what the plugin asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Permissions>,
    /// Objects the case's cluster holds before the event (its CRDs first), stored as
    /// written (`uid`, `creationTimestamp`, `status` kept), validated as a create; the
    /// plugin reads them through `host.get` / `host.list`. Field owners: the object's
    /// `metadata.managedFields` when written, else manager `kubectl` owns every field but
    /// `status` (which no manager owns), as `kubectl apply --server-side` leaves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<Value>,
    /// The event.
    pub event: CaseEvent,
    /// What must come out.
    pub expect: Expect,
    /// Objects expected in the case's cluster afterwards, each compared as a subset
    /// (`"<any>"` matches anything) with the object of its apiVersion, kind, namespace
    /// and name; `--update` keeps them as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Value>,
}

/// The event of a case.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CaseEvent {
    /// added | modified | deleted | resync.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Watch id; default: the one watch that selects the object (its kind, namespace
    /// and selectors, as `run` routes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<String>,
    /// The object: stored in the case's cluster (but for `deleted`) as `cluster:`
    /// objects are, and handed to the plugin as the server holds it.
    pub object: Value,
    /// The previous object, for modified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
}

/// Expected outcome.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expect {
    /// exact (default) or subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#match: Option<String>,
    /// Expected intents, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intents: Option<Vec<Value>>,
    /// Expected failure (substring of the error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Expected retry flag of a plugin error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<bool>,
}

/// The cases of one file (YAML documents separated by `---`; empty documents skipped),
/// each parsed on its own so one bad case does not hide the others. Malformed YAML ends
/// the stream: its error (with line and column) is the last entry.
pub(crate) fn parse(text: &str) -> Vec<Result<TestCase, String>> {
    let mut cases = Vec::new();
    for de in serde_yaml_ng::Deserializer::from_str(text) {
        match serde_yaml_ng::Value::deserialize(de) {
            Ok(serde_yaml_ng::Value::Null) => {}
            Ok(mut doc) => {
                // `<<: *anchor` merge keys, which the parser leaves as a literal `<<` key
                // (an object silently without the merged fields).
                let case = match doc.apply_merge() {
                    Ok(()) => serde_yaml_ng::from_value::<TestCase>(doc).map_err(|e| e.to_string()),
                    Err(e) => Err(format!("merge key (<<): {e}")),
                };
                cases.push(case)
            }
            Err(e) => {
                // The rest of the stream cannot be read, and the parser would report the
                // same error again forever.
                cases.push(Err(format!("malformed YAML: {e}")));
                break;
            }
        }
    }
    cases
}

/// Cases as one file's text: YAML documents separated by `---`.
pub(crate) fn to_yaml(cases: &[TestCase]) -> String {
    let docs: Vec<String> = cases
        .iter()
        .filter_map(|c| serde_yaml_ng::to_string(c).ok())
        .collect();
    docs.join("---\n")
}

/// An intent as test cases write it.
pub(crate) fn intent_json(raw: &RawIntent) -> Value {
    let parsed =
        |s: &str| serde_json::from_str::<Value>(s).unwrap_or_else(|_| Value::String(s.to_string()));
    let target = |t: &intent::ObjectRef| {
        let mut v = json!({"apiVersion": t.api_version, "kind": t.kind, "name": t.name});
        if let Some(ns) = &t.namespace {
            v["namespace"] = json!(ns);
        }
        v
    };
    match raw {
        RawIntent::Create {
            object,
            force,
            owned_by_trigger,
        } => {
            json!({"create": {"object": parsed(object), "ownedByTrigger": owned_by_trigger, "force": force}})
        }
        RawIntent::Patch {
            target: t,
            body,
            strategy,
            status,
            force,
        } => json!({"patch": {
            "target": target(t),
            "body": parsed(body),
            "strategy": match strategy { intent::Strategy::Apply => "apply", intent::Strategy::Merge => "merge" },
            "status": status,
            "force": force,
        }}),
        RawIntent::Delete {
            target: t,
            uid,
            resource_version,
            propagation,
        } => {
            let mut d = json!({"target": target(t)});
            if let Some(u) = uid {
                d["uid"] = json!(u);
            }
            if let Some(rv) = resource_version {
                d["resourceVersion"] = json!(rv);
            }
            if let Some(p) = propagation {
                d["propagation"] = json!(p.as_api());
            }
            json!({ "delete": d })
        }
    }
}

/// Show the controller ownerReference admission bound to each `owned-by-trigger` create
/// (taken from the admitted object, not recomputed), as `create.ownerReference`.
/// `intents` and `prepared` are the same call's, in order.
pub(crate) fn show_owner_references(intents: &mut [Value], prepared: &[Prepared]) {
    for (shown, p) in intents.iter_mut().zip(prepared) {
        let Action::Apply { body, .. } = &p.intent.action else {
            continue;
        };
        let bound = body
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.last());
        if p.intent.owned_by_trigger
            && let Some(reference) = bound
            && let Some(create) = shown.get_mut("create").and_then(Value::as_object_mut)
        {
            create.insert("ownerReference".into(), reference.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_case_by_case_and_malformed_yaml_ends_it() {
        let good = "name: a\nevent: {type: added, object: {}}\nexpect: {intents: []}\n";
        let cases = parse(&format!(
            "{good}---\nname: b\nunknown: 1\n---\n---\n{good}---\nname: x: y\n---\n{good}"
        ));
        assert_eq!(cases.len(), 4, "{cases:?}");
        assert!(cases[0].is_ok() && cases[2].is_ok());
        assert!(
            cases[1]
                .as_ref()
                .is_err_and(|e| e.contains("unknown field")),
            "{cases:?}"
        );
        assert!(
            cases[3]
                .as_ref()
                .is_err_and(|e| e.starts_with("malformed YAML") && e.contains("line")),
            "{cases:?}"
        );
        let a = cases[0].as_ref().unwrap().clone();
        let back = parse(&to_yaml(&[a.clone(), a]));
        assert_eq!(back.len(), 2);
        assert!(back.iter().all(|c| c.as_ref().is_ok_and(|c| c.name == "a")));
    }

    /// A merge key brings the anchored mapping's fields in, the case's own winning.
    #[test]
    fn merge_keys_bring_the_anchored_fields() {
        let text = "name: base\n\
                    event:\n  type: added\n  object: &cm\n    apiVersion: v1\n    kind: ConfigMap\n    \
                    metadata: {name: a, namespace: shop}\n    data: {action: copy}\n\
                    expect: {intents: []}\n\
                    ---\n\
                    name: merged\n\
                    event:\n  type: added\n  object:\n    <<: *cm\n    data: {action: trap}\n\
                    expect: {intents: []}\n";
        let cases = parse(text);
        assert_eq!(cases.len(), 2, "{cases:?}");
        // Anchors do not cross documents: the second case's alias is refused, not empty.
        assert!(cases[1].is_err(), "{cases:?}");
        let text = "name: merged\n\
                    cluster:\n- &cm {apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {k: v}}\n\
                    event:\n  type: added\n  object:\n    <<: *cm\n    data: {k: w}\n\
                    expect: {intents: []}\n";
        let case = parse(text).remove(0).unwrap();
        let object = &case.event.object;
        assert_eq!(object["kind"], "ConfigMap", "{object}");
        assert_eq!(object["metadata"]["name"], "a", "{object}");
        assert_eq!(object["data"]["k"], "w", "{object}");
        assert!(object.get("<<").is_none(), "{object}");
    }

    #[test]
    fn a_case_may_carry_the_operator_s_approval() {
        let text = "name: a\napproval:\n  watches: [{resource: configmaps}]\n  grants:\n  \
                    - {apiGroups: [\"\"], kinds: [ConfigMap], \
                    verbs: [create], finalizers: [example.com/block]}\n\
                    event: {type: added, object: {}}\nexpect: {intents: []}\n";
        let case = parse(text).remove(0).unwrap();
        let approval = case.approval.unwrap().to_approval().unwrap();
        assert_eq!(approval.grants[0].finalizers, ["example.com/block"]);
        assert_eq!(approval.watches.len(), 1);
    }

    /// Every field the runner accepts (a case with each optional one set, and the
    /// intents of every kind with each of theirs) is documented in the cases' README, the
    /// one `kubewasm new` copies into a project.
    #[test]
    fn every_field_a_case_accepts_is_documented() {
        use kubewasm_core::intent::{ObjectRef, Propagation, Strategy};
        const README: &str = include_str!("../../../cli/templates/common/tests-README.md");
        let target = ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: "a".into(),
        };
        let intents = [
            RawIntent::Create {
                object: "{}".into(),
                force: false,
                owned_by_trigger: true,
            },
            RawIntent::Patch {
                target: target.clone(),
                body: "{}".into(),
                strategy: Strategy::Apply,
                status: false,
                force: false,
            },
            RawIntent::Delete {
                target,
                uid: Some("u".into()),
                resource_version: Some("1".into()),
                propagation: Some(Propagation::Background),
            },
        ];
        let case = TestCase {
            name: "n".into(),
            plugin: Some("p.wasm".into()),
            settings: Some(json!({})),
            approval: Some(Permissions::default()),
            cluster: vec![json!({})],
            event: CaseEvent {
                event_type: "added".into(),
                watch: Some("w".into()),
                object: json!({}),
                old_object: Some(json!({})),
            },
            expect: Expect {
                r#match: Some("exact".into()),
                intents: Some(intents.iter().map(intent_json).collect()),
                error: Some("e".into()),
                retry: Some(false),
            },
            after: vec![json!({})],
        };
        let mut keys = std::collections::BTreeSet::new();
        fn collect(v: &Value, keys: &mut std::collections::BTreeSet<String>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        keys.insert(k.clone());
                        collect(x, keys);
                    }
                }
                Value::Array(items) => items.iter().for_each(|x| collect(x, keys)),
                _ => {}
            }
        }
        collect(&serde_json::to_value(&case).unwrap(), &mut keys);
        assert!(
            keys.contains("resourceVersion") && keys.contains("uid"),
            "{keys:?}"
        );
        let undocumented: Vec<&String> = keys
            .iter()
            .filter(|k| !README.contains(&format!("{k}:")))
            .collect();
        assert!(
            undocumented.is_empty(),
            "accepted by the case runner but not in tests-README.md: {undocumented:?}"
        );
    }
}
