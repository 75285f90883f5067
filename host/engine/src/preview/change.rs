//! What one write would change: the object as the API server has it, against the object a
//! dry run of the write returns, field by field. Server-kept fields (`managedFields`,
//! `resourceVersion`, `uid`, …) are left out of the comparison; every value shown is an
//! excerpt, and a Secret's data is never shown.

use serde::Serialize;
use serde_json::Value;

use kubewasm_core::excerpt::excerpt;

/// Fields listed per change at most; the rest are counted.
pub(crate) const MAX_FIELDS: usize = 20;
/// Bytes of one value shown at most.
const MAX_VALUE: usize = 80;

/// Metadata the API server keeps: never a change the plugin makes.
const SERVER_KEPT: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
];

/// What a write would do to its object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub(crate) enum Change {
    /// The object would be created with these fields.
    Create(Fields),
    /// These fields would change.
    Update(Fields),
    /// The write would leave the object as it is.
    Unchanged,
    /// The object would be deleted.
    Delete,
    /// A deletion of an object that is not there.
    AlreadyGone,
    /// The API server would refuse the write.
    Refused {
        /// The HTTP status code.
        code: u16,
        /// The API server's message, excerpted.
        reason: String,
    },
}

impl Change {
    /// Whether the write would change the cluster.
    pub(crate) fn changes(&self) -> bool {
        matches!(self, Change::Create(_) | Change::Update(_) | Change::Delete)
    }

    /// The terraform-style sign: `+` create, `~` update, `-` delete, `!` refused, `=`
    /// nothing.
    pub(crate) fn sign(&self) -> char {
        match self {
            Change::Create(_) => '+',
            Change::Update(_) => '~',
            Change::Delete => '-',
            Change::Refused { .. } => '!',
            Change::Unchanged | Change::AlreadyGone => '=',
        }
    }

    /// The changed fields' paths (none for a delete or a refusal).
    pub(crate) fn paths(&self) -> Vec<String> {
        match self {
            Change::Create(f) | Change::Update(f) => {
                f.fields.iter().map(|c| c.path.clone()).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// Changed fields, at most [`MAX_FIELDS`] of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Fields {
    pub(crate) fields: Vec<FieldChange>,
    /// Changed fields not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) more: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One field from one value to another (None: absent), each an excerpt of its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct FieldChange {
    /// `spec.replicas`, `metadata.labels["app.kubernetes.io/name"]`, `spec.ports[0].port`.
    pub(crate) path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) to: Option<String>,
}

/// What turns `before` (None: the object does not exist) into `after` (the dry run's
/// result; None: deleted).
pub(crate) fn change(before: Option<&Value>, after: Option<&Value>) -> Change {
    match (before, after) {
        (None, None) => Change::AlreadyGone,
        (Some(_), None) => Change::Delete,
        (None, Some(a)) => Change::Create(diff(None, Some(a))),
        (Some(b), Some(a)) => {
            // A dry-run delete of an object with finalizers returns it, marked.
            if b.pointer("/metadata/deletionTimestamp").is_none()
                && a.pointer("/metadata/deletionTimestamp").is_some()
            {
                return Change::Delete;
            }
            let fields = diff(Some(b), Some(a));
            if fields.fields.is_empty() {
                Change::Unchanged
            } else {
                Change::Update(fields)
            }
        }
    }
}

/// The fields that differ between `a` and `b`, server-kept metadata left out.
pub(crate) fn diff(a: Option<&Value>, b: Option<&Value>) -> Fields {
    let secret = [a, b]
        .into_iter()
        .flatten()
        .any(|o| o.get("kind").and_then(Value::as_str) == Some("Secret"));
    let (a, b) = (a.map(comparable), b.map(comparable));
    let mut walk = Walk {
        out: Fields::default(),
        secret,
    };
    walk.value(&mut String::new(), a.as_ref(), b.as_ref());
    walk.out
}

/// `o` without the metadata the API server keeps.
fn comparable(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_KEPT {
            meta.remove(*k);
        }
    }
    o
}

struct Walk {
    out: Fields,
    /// The object is a Secret: its `data` and `stringData` are not shown.
    secret: bool,
}

impl Walk {
    fn value(&mut self, path: &mut String, a: Option<&Value>, b: Option<&Value>) {
        if a == b {
            return;
        }
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let len = path.len();
                    push_key(path, k);
                    self.value(path, x.get(k), y.get(k));
                    path.truncate(len);
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) => {
                for i in 0..x.len().max(y.len()) {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    self.value(path, x.get(i), y.get(i));
                    path.truncate(len);
                }
            }
            // A new (or removed) object lists its leaves, so a create shows each field.
            (None, Some(Value::Object(y))) if !y.is_empty() => {
                self.value(path, Some(&Value::Object(Default::default())), b)
            }
            (Some(Value::Object(x)), None) if !x.is_empty() => {
                self.value(path, a, Some(&Value::Object(Default::default())))
            }
            _ => self.leaf(path, a, b),
        }
    }

    fn leaf(&mut self, path: &str, a: Option<&Value>, b: Option<&Value>) {
        if self.out.fields.len() >= MAX_FIELDS {
            self.out.more += 1;
            return;
        }
        let hidden = self.secret && (path.starts_with("data") || path.starts_with("stringData"));
        let show = |v: Option<&Value>| {
            v.map(|v| match hidden {
                true => "(sensitive)".to_string(),
                false => excerpt(&v.to_string(), MAX_VALUE).into_owned(),
            })
        };
        self.out.fields.push(FieldChange {
            path: excerpt(path, 2 * MAX_VALUE).into_owned(),
            from: show(a),
            to: show(b),
        });
    }
}

/// Append `key` to a field path: `.key`, or `["key"]` when it is not a plain name.
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (plain, path.is_empty()) {
        (true, true) => path.push_str(key),
        (true, false) => {
            path.push('.');
            path.push_str(key);
        }
        (false, _) => path.push_str(&format!("[{}]", Value::String(key.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(c: &Change) -> Vec<String> {
        c.paths()
    }

    #[test]
    fn an_update_names_each_changed_field_from_and_to() {
        let before = json!({"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"1",
            "labels":{"app.kubernetes.io/name":"x"}},"data":{"k":"1","same":"s"}});
        let after = json!({"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"2",
            "managedFields":[{"manager":"m"}],"labels":{"app.kubernetes.io/name":"y"}},
            "data":{"k":"2","same":"s","new":"n"}});
        let c = change(Some(&before), Some(&after));
        let Change::Update(f) = &c else {
            panic!("not an update: {c:?}")
        };
        assert_eq!(
            paths(&c),
            [
                "data.k",
                "data.new",
                r#"metadata.labels["app.kubernetes.io/name"]"#
            ]
        );
        assert_eq!(f.fields[0].from.as_deref(), Some("\"1\""));
        assert_eq!(f.fields[0].to.as_deref(), Some("\"2\""));
        assert_eq!(f.fields[1].from, None);
    }

    #[test]
    fn server_kept_metadata_alone_is_no_change() {
        let before = json!({"metadata":{"name":"a","resourceVersion":"1","generation":1}});
        let after = json!({"metadata":{"name":"a","resourceVersion":"5","generation":2,
            "managedFields":[]}});
        assert_eq!(change(Some(&before), Some(&after)), Change::Unchanged);
    }

    #[test]
    fn creates_list_leaves_deletes_and_refusals_say_so() {
        let after = json!({"kind":"Service","metadata":{"name":"s","uid":"u"},
            "spec":{"ports":[{"port":80}]}});
        let c = change(None, Some(&after));
        assert_eq!(c.sign(), '+');
        assert_eq!(paths(&c), ["kind", "metadata.name", "spec.ports"]);
        assert_eq!(change(Some(&after), None), Change::Delete);
        assert_eq!(change(None, None), Change::AlreadyGone);
        let marked = json!({"metadata":{"name":"s","deletionTimestamp":"t"}});
        assert_eq!(change(Some(&after), Some(&marked)), Change::Delete);
    }

    #[test]
    fn secret_data_is_never_shown_and_long_values_are_cut() {
        let before = json!({"kind":"Secret","data":{"password":"b2xk"}});
        let after = json!({"kind":"Secret","data":{"password":"bmV3"},
            "metadata":{"annotations":{"note":"x".repeat(500)}}});
        let Change::Update(f) = change(Some(&before), Some(&after)) else {
            panic!("not an update")
        };
        assert_eq!(f.fields[0].path, "data.password");
        assert_eq!(f.fields[0].to.as_deref(), Some("(sensitive)"));
        assert!(!serde_json::to_string(&f).unwrap().contains("bmV3"));
        let note = f.fields[1].to.as_deref().unwrap();
        assert!(note.len() < 200 && note.contains("truncated"), "{note}");
    }

    #[test]
    fn many_fields_are_bounded_and_counted() {
        let after: serde_json::Map<String, Value> =
            (0..50).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let Change::Create(f) = change(None, Some(&Value::Object(after))) else {
            panic!("not a create")
        };
        assert_eq!((f.fields.len(), f.more), (MAX_FIELDS, 50 - MAX_FIELDS));
    }
}
