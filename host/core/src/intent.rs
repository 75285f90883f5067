//! Intents: the writes a plugin asks for, decoded from the plugin's strings into checked
//! values. Nothing here talks to the cluster; resolving kinds and applying is `apply`.

use serde_json::{Map, Value};

use crate::manifest::Verb;

/// Why an intent is invalid (a plugin bug, never fixed by retrying the same output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntentError {
    /// A JSON document over the size limit.
    #[error("{what} is {len} bytes, over the limit of {max}")]
    TooLarge {
        /// Which document.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON.
    #[error("{what} is not valid JSON: {reason}")]
    NotJson {
        /// Which document.
        what: &'static str,
        /// The parser's message.
        reason: String,
    },
    /// JSON, but not an object.
    #[error("{0} must be a JSON object")]
    NotAnObject(&'static str),
    /// `apiVersion` missing.
    #[error("apiVersion is missing")]
    MissingApiVersion,
    /// `kind` missing.
    #[error("kind is missing")]
    MissingKind,
    /// `metadata.name` missing.
    #[error("metadata.name is missing (server-side apply needs a name)")]
    MissingName,
    /// A name that cannot be put in a request path (`?`, `#`, `%`, `/`, spaces, `..`,
    /// over 253 bytes). Kept to a short excerpt: the text is the plugin's.
    #[error(
        "metadata.name {0:?} is not a valid name (it may not contain '?', '#', '%', '/', spaces or control characters, nor be '.' or '..')"
    )]
    BadName(String),
    /// A namespace the API server would not accept (not an RFC 1123 label).
    #[error("namespace {0:?} is not a valid namespace (an RFC 1123 label)")]
    BadNamespace(String),
    /// An apiVersion that is not `version` or `group/version`.
    #[error("apiVersion {0:?} is not `version` or `group/version` (a DNS subdomain group)")]
    BadApiVersion(String),
    /// A kind that is not a letter followed by letters and digits.
    #[error("kind {0:?} is not a valid kind (a letter, then letters and digits)")]
    BadKind(String),
    /// A status patch that writes more than `status` and the identity fields.
    #[error(
        "a status patch may carry only status (and apiVersion, kind, metadata.name, metadata.namespace), not {0}"
    )]
    StatusPatchBeyondStatus(String),
    /// `metadata` present but not an object.
    #[error("metadata must be an object")]
    BadMetadata,
    /// A patch body naming another object than its target.
    #[error("patch body has {key} {found} but the target says {want:?}")]
    Contradiction {
        /// The field.
        key: &'static str,
        /// What the body says.
        found: String,
        /// What the target says.
        want: String,
    },
    /// `force` on a merge patch.
    #[error("force applies only to the apply strategy")]
    ForceOnMerge,
}

/// Which object an intent acts on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// `group/version` or `version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace; None for cluster-scoped kinds, or to default to the trigger's namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// How a patch body is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Server-side apply.
    Apply,
    /// JSON merge patch.
    Merge,
}

/// Deletion propagation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Background.
    Background,
    /// Foreground.
    Foreground,
    /// Orphan.
    Orphan,
}

impl Propagation {
    /// The API's spelling.
    pub fn as_api(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

/// An intent as the plugin returned it: JSON still as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawIntent {
    /// `create`.
    Create {
        /// The whole object, JSON.
        object: String,
        /// Take conflicting fields from other managers.
        force: bool,
        /// Add a controller ownerReference to the trigger.
        owned_by_trigger: bool,
    },
    /// `patch`.
    Patch {
        /// The object patched.
        target: ObjectRef,
        /// The patch body, JSON.
        body: String,
        /// Apply or merge.
        strategy: Strategy,
        /// Patch the status subresource.
        status: bool,
        /// Take conflicting fields from other managers.
        force: bool,
    },
    /// `delete`.
    Delete {
        /// The object deleted.
        target: ObjectRef,
        /// Precondition: only if it still has this uid.
        uid: Option<String>,
        /// Precondition: only if it still has this resourceVersion.
        resource_version: Option<String>,
        /// How dependents are treated.
        propagation: Option<Propagation>,
    },
}

/// What to do to the target.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Server-side apply `body` (a whole or partial object), to `status` or the main resource.
    Apply {
        /// The object or partial object.
        body: Value,
        /// To the status subresource.
        status: bool,
    },
    /// JSON merge patch.
    Merge {
        /// The merge patch.
        body: Value,
        /// To the status subresource.
        status: bool,
    },
    /// Delete with optional preconditions.
    Delete {
        /// Precondition: uid.
        uid: Option<String>,
        /// Precondition: resourceVersion.
        resource_version: Option<String>,
        /// How dependents are treated.
        propagation: Option<Propagation>,
    },
}

/// A decoded, syntactically valid intent.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    /// The object acted on.
    pub target: ObjectRef,
    /// What to do.
    pub action: Action,
    /// Take conflicting fields from other managers.
    pub force: bool,
    /// Add a controller ownerReference to the triggering object.
    pub owned_by_trigger: bool,
    /// The verb the plugin's grants must allow.
    pub verb: Verb,
}

impl Intent {
    /// Short description for logs: `create MongoDB shop/site-db`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.verb.as_str(), self.target)
    }
}

/// Decode and check one intent. `max_bytes` bounds each JSON document.
pub fn decode(raw: RawIntent, max_bytes: usize) -> Result<Intent, IntentError> {
    match raw {
        RawIntent::Create {
            object,
            force,
            owned_by_trigger,
        } => {
            let body = parse_object(&object, max_bytes, "object")?;
            let target = target_of(&body)?;
            Ok(Intent {
                target,
                action: Action::Apply {
                    body,
                    status: false,
                },
                force,
                owned_by_trigger,
                verb: Verb::Create,
            })
        }
        RawIntent::Patch {
            target,
            body,
            strategy,
            status,
            force,
        } => {
            check_ref(&target)?;
            let mut body = parse_object(&body, max_bytes, "patch body")?;
            if status {
                status_only(&body)?;
            }
            let verb = if status {
                Verb::PatchStatus
            } else {
                Verb::Patch
            };
            let action = match strategy {
                Strategy::Apply => {
                    fill_identity(&mut body, &target)?;
                    Action::Apply { body, status }
                }
                Strategy::Merge => {
                    if force {
                        return Err(IntentError::ForceOnMerge);
                    }
                    Action::Merge { body, status }
                }
            };
            Ok(Intent {
                target,
                action,
                force,
                owned_by_trigger: false,
                verb,
            })
        }
        RawIntent::Delete {
            target,
            uid,
            resource_version,
            propagation,
        } => {
            check_ref(&target)?;
            Ok(Intent {
                target,
                action: Action::Delete {
                    uid,
                    resource_version,
                    propagation,
                },
                force: false,
                owned_by_trigger: false,
                verb: Verb::Delete,
            })
        }
    }
}

fn parse_object(text: &str, max_bytes: usize, what: &'static str) -> Result<Value, IntentError> {
    if text.len() > max_bytes {
        return Err(IntentError::TooLarge {
            what,
            len: text.len(),
            max: max_bytes,
        });
    }
    let value: Value = serde_json::from_str(text).map_err(|e| IntentError::NotJson {
        what,
        reason: e.to_string(),
    })?;
    if !value.is_object() {
        return Err(IntentError::NotAnObject(what));
    }
    Ok(value)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// The object reference a whole object names.
fn target_of(body: &Value) -> Result<ObjectRef, IntentError> {
    let api_version = str_at(body, &["apiVersion"]).unwrap_or_default();
    let kind = str_at(body, &["kind"]).unwrap_or_default();
    let name = str_at(body, &["metadata", "name"]).unwrap_or_default();
    let target = ObjectRef {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: str_at(body, &["metadata", "namespace"]).map(str::to_string),
        name: name.to_string(),
    };
    check_ref(&target)?;
    Ok(target)
}

/// Longest excerpt of a plugin string an error message carries.
const EXCERPT: usize = 64;

/// The syntax checks every target passes before anything is resolved or requested. The
/// resource's own name rule (label, subdomain) is checked once the kind is resolved
/// (`admit::bind`); this guarantees the name cannot change the request's URL.
fn check_ref(t: &ObjectRef) -> Result<(), IntentError> {
    use crate::names::{excerpt, is_dns_label, is_kind, is_path_safe};
    if t.api_version.is_empty() {
        return Err(IntentError::MissingApiVersion);
    }
    if crate::resource::check_api_version(&t.api_version).is_err() {
        return Err(IntentError::BadApiVersion(excerpt(&t.api_version, EXCERPT)));
    }
    if t.kind.is_empty() {
        return Err(IntentError::MissingKind);
    }
    if !is_kind(&t.kind) {
        return Err(IntentError::BadKind(excerpt(&t.kind, EXCERPT)));
    }
    if t.name.is_empty() {
        return Err(IntentError::MissingName);
    }
    if !is_path_safe(&t.name) {
        return Err(IntentError::BadName(excerpt(&t.name, EXCERPT)));
    }
    if let Some(ns) = &t.namespace
        && !is_dns_label(ns)
    {
        return Err(IntentError::BadNamespace(excerpt(ns, EXCERPT)));
    }
    Ok(())
}

/// A status patch carries `status` and the object's identity, nothing else: the status
/// subresource of some kinds (pods, nodes) keeps label and annotation changes, so a
/// status-only grant must not become a metadata grant.
fn status_only(body: &Value) -> Result<(), IntentError> {
    let Some(obj) = body.as_object() else {
        return Err(IntentError::NotAnObject("patch body"));
    };
    for (key, value) in obj {
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                let Some(meta) = value.as_object() else {
                    return Err(IntentError::BadMetadata);
                };
                if let Some(k) = meta
                    .keys()
                    .find(|k| !matches!(k.as_str(), "name" | "namespace"))
                {
                    return Err(IntentError::StatusPatchBeyondStatus(format!(
                        "metadata.{}",
                        crate::names::excerpt(k, EXCERPT)
                    )));
                }
            }
            other => {
                return Err(IntentError::StatusPatchBeyondStatus(
                    crate::names::excerpt(other, EXCERPT).to_string(),
                ));
            }
        }
    }
    Ok(())
}

/// Make an apply patch body name its target, filling what is absent; refuse contradictions.
fn fill_identity(body: &mut Value, target: &ObjectRef) -> Result<(), IntentError> {
    let Some(obj) = body.as_object_mut() else {
        return Err(IntentError::NotAnObject("patch body"));
    };
    fill(obj, "apiVersion", &target.api_version)?;
    fill(obj, "kind", &target.kind)?;
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(IntentError::BadMetadata);
    };
    fill(meta, "name", &target.name)?;
    if let Some(ns) = &target.namespace {
        fill(meta, "namespace", ns)?;
    }
    Ok(())
}

fn fill(obj: &mut Map<String, Value>, key: &'static str, want: &str) -> Result<(), IntentError> {
    match obj.get(key) {
        None => {
            obj.insert(key.to_string(), Value::String(want.to_string()));
            Ok(())
        }
        Some(Value::String(s)) if s == want => Ok(()),
        Some(other) => Err(IntentError::Contradiction {
            key,
            found: crate::names::excerpt(&other.to_string(), EXCERPT),
            want: want.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> ObjectRef {
        ObjectRef {
            api_version: "mongodb.com/v1".into(),
            kind: "MongoDB".into(),
            namespace: Some("shop".into()),
            name: "db".into(),
        }
    }

    #[test]
    fn create_reads_the_target_from_the_object() {
        let obj = json!({"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"}});
        let i = decode(
            RawIntent::Create {
                object: obj.to_string(),
                force: false,
                owned_by_trigger: true,
            },
            1024,
        )
        .unwrap();
        assert_eq!(i.target.kind, "Service");
        assert_eq!(i.target.namespace.as_deref(), Some("shop"));
        assert_eq!(i.verb, Verb::Create);
        assert!(i.owned_by_trigger);
        assert_eq!(i.describe(), "create Service shop/web");
    }

    #[test]
    fn create_rejects_missing_identity_and_bad_json() {
        let cases = [
            ("{", "not valid JSON"),
            ("[1]", "must be a JSON object"),
            (
                r#"{"kind":"X","metadata":{"name":"a"}}"#,
                "apiVersion is missing",
            ),
            (
                r#"{"apiVersion":"v1","metadata":{"name":"a"}}"#,
                "kind is missing",
            ),
            (
                r#"{"apiVersion":"v1","kind":"X"}"#,
                "metadata.name is missing",
            ),
            (
                r#"{"apiVersion":"v1","kind":"X","metadata":{"name":"a","namespace":"Bad_NS"}}"#,
                "not a valid namespace",
            ),
        ];
        for (text, want) in cases {
            let err = decode(
                RawIntent::Create {
                    object: text.into(),
                    force: false,
                    owned_by_trigger: false,
                },
                1024,
            )
            .unwrap_err();
            assert!(err.to_string().contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn size_limit_is_enforced() {
        let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"x".repeat(100)}});
        let err = decode(
            RawIntent::Create {
                object: obj.to_string(),
                force: false,
                owned_by_trigger: false,
            },
            50,
        )
        .unwrap_err();
        assert!(err.to_string().contains("over the limit of 50"), "{err}");
    }

    #[test]
    fn apply_patch_fills_identity_and_refuses_contradictions() {
        let i = decode(
            RawIntent::Patch {
                target: target(),
                body: r#"{"metadata":{"annotations":{"a":"b"}}}"#.into(),
                strategy: Strategy::Apply,
                status: false,
                force: false,
            },
            1024,
        )
        .unwrap();
        let Action::Apply { body, status } = i.action else {
            panic!("not apply")
        };
        assert!(!status);
        assert_eq!(
            body,
            json!({"apiVersion":"mongodb.com/v1","kind":"MongoDB","metadata":{"name":"db","namespace":"shop","annotations":{"a":"b"}}})
        );
        let err = decode(
            RawIntent::Patch {
                target: target(),
                body: r#"{"kind":"Other"}"#.into(),
                strategy: Strategy::Apply,
                status: true,
                force: false,
            },
            1024,
        )
        .unwrap_err();
        assert!(err.to_string().contains("target says"), "{err}");
    }

    #[test]
    fn status_patch_needs_the_status_verb_and_merge_cannot_force() {
        let i = decode(
            RawIntent::Patch {
                target: target(),
                body: r#"{"status":{"x":1}}"#.into(),
                strategy: Strategy::Merge,
                status: true,
                force: false,
            },
            1024,
        )
        .unwrap();
        assert_eq!(i.verb, Verb::PatchStatus);
        assert!(
            decode(
                RawIntent::Patch {
                    target: target(),
                    body: "{}".into(),
                    strategy: Strategy::Merge,
                    status: false,
                    force: true,
                },
                1024
            )
            .is_err()
        );
    }

    #[test]
    fn delete_checks_the_reference() {
        let mut t = target();
        t.name.clear();
        assert!(
            decode(
                RawIntent::Delete {
                    target: t,
                    uid: None,
                    resource_version: None,
                    propagation: None
                },
                1024
            )
            .is_err()
        );
        let i = decode(
            RawIntent::Delete {
                target: target(),
                uid: Some("u".into()),
                resource_version: None,
                propagation: Some(Propagation::Foreground),
            },
            1024,
        )
        .unwrap();
        assert_eq!(i.verb, Verb::Delete);
    }

    fn patch(target: ObjectRef, body: &str, status: bool) -> Result<Intent, IntentError> {
        decode(
            RawIntent::Patch {
                target,
                body: body.into(),
                strategy: Strategy::Apply,
                status,
                force: false,
            },
            1024,
        )
    }

    #[test]
    fn names_that_would_change_the_request_url_are_refused() {
        for bad in [
            "web?x=",
            "?fieldManager=other&",
            "?dryRun=All&",
            "a#b",
            "a/b",
            "a%2Fb",
            "..",
            "a b",
        ] {
            let mut t = target();
            t.name = bad.into();
            let err = patch(t.clone(), "{}", true).unwrap_err();
            assert!(matches!(err, IntentError::BadName(_)), "{bad:?}: {err}");
            let err = decode(
                RawIntent::Delete {
                    target: t,
                    uid: None,
                    resource_version: None,
                    propagation: None,
                },
                1024,
            )
            .unwrap_err();
            assert!(matches!(err, IntentError::BadName(_)), "{bad:?}: {err}");
            let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":bad}});
            let err = decode(
                RawIntent::Create {
                    object: obj.to_string(),
                    force: false,
                    owned_by_trigger: false,
                },
                1024,
            )
            .unwrap_err();
            assert!(matches!(err, IntentError::BadName(_)), "{bad:?}: {err}");
        }
        // The message carries only an excerpt of a long name.
        let mut t = target();
        t.name = format!("a?{}", "x".repeat(300));
        let err = patch(t, "{}", false).unwrap_err().to_string();
        assert!(err.len() < 300, "{err}");
    }

    #[test]
    fn api_versions_kinds_and_namespaces_are_checked() {
        for (av, kind, ns, want) in [
            ("a/b/c", "X", None, "apiVersion"),
            ("Apps/v1", "X", None, "apiVersion"),
            ("apps/", "X", None, "apiVersion"),
            ("/v1", "X", None, "apiVersion"),
            ("v1?x=1", "X", None, "apiVersion"),
            ("v1", "Config Map", None, "kind"),
            ("v1", "1X", None, "kind"),
            ("v1", "X", Some("Bad_NS"), "namespace"),
            ("v1", "X", Some("a.b"), "namespace"),
        ] {
            let t = ObjectRef {
                api_version: av.into(),
                kind: kind.into(),
                namespace: ns.map(str::to_string),
                name: "ok".into(),
            };
            let err = patch(t, "{}", false).unwrap_err().to_string();
            assert!(err.starts_with(want), "{av} {kind} {ns:?}: {err}");
        }
        let t = ObjectRef {
            api_version: "example.com/v1beta1".into(),
            kind: "Widget2".into(),
            namespace: Some("team-a".into()),
            name: "w.1".into(),
        };
        assert!(patch(t, "{}", false).is_ok());
    }

    #[test]
    fn status_patches_carry_only_status_and_identity() {
        assert!(patch(target(), r#"{"status":{"ready":true}}"#, true).is_ok());
        assert!(
            patch(
                target(),
                r#"{"apiVersion":"mongodb.com/v1","kind":"MongoDB","metadata":{"name":"db","namespace":"shop"},"status":{}}"#,
                true
            )
            .is_ok()
        );
        for (body, field) in [
            (r#"{"spec":{"replicas":9},"status":{}}"#, "spec"),
            (
                r#"{"metadata":{"labels":{"pwned":"yes"}},"status":{}}"#,
                "metadata.labels",
            ),
            (
                r#"{"metadata":{"ownerReferences":[]},"status":{}}"#,
                "metadata.ownerReferences",
            ),
            (
                r#"{"metadata":{"finalizers":["x"]}}"#,
                "metadata.finalizers",
            ),
            (r#"{"data":{"k":"v"}}"#, "data"),
        ] {
            let err = patch(target(), body, true).unwrap_err();
            assert_eq!(
                err,
                IntentError::StatusPatchBeyondStatus(field.into()),
                "{body}"
            );
            // The same body is fine on the main resource.
            assert!(patch(target(), body, false).is_ok(), "{body}");
        }
        let merge = decode(
            RawIntent::Patch {
                target: target(),
                body: r#"{"spec":{"x":1}}"#.into(),
                strategy: Strategy::Merge,
                status: true,
                force: false,
            },
            1024,
        );
        assert!(matches!(
            merge,
            Err(IntentError::StatusPatchBeyondStatus(_))
        ));
    }
}
