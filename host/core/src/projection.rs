//! Projections: the fields of a kind a plugin declares it uses (`watch.fields`,
//! `read.fields` in the WIT), so the host caches and hands over only those.
//!
//! A declaration is a list of paths of object keys joined by `.`. A path keeps the whole
//! value it reaches; a path crossing a list applies its rest to every element. The
//! object's identity (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`,
//! `metadata.uid`, `metadata.resourceVersion`) is always kept. An empty declaration is the
//! whole object. Projections form a lattice under [`Projection::union`]: the cache of a
//! kind keeps the union of every plugin's, each plugin receives its own, and since its own
//! is within the union, projecting the cached object again gives exactly what projecting
//! the whole object would.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Most paths one watch or read may declare.
pub const MAX_FIELDS: usize = 64;

/// Longest path one watch or read may declare, in bytes.
pub const MAX_FIELD_BYTES: usize = 256;

/// The identity every projection keeps, as paths.
pub const IDENTITY: [&str; 6] = [
    "apiVersion",
    "kind",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.resourceVersion",
];

/// Why a declared path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// More paths than [`MAX_FIELDS`].
    #[error("{0} fields, over the limit of {MAX_FIELDS}")]
    TooMany(usize),
    /// A path over [`MAX_FIELD_BYTES`] (quoted in part).
    #[error("field {path:?}... is {len} bytes, over the limit of {MAX_FIELD_BYTES}")]
    TooLong {
        /// Its first bytes.
        path: String,
        /// Its length.
        len: usize,
    },
    /// A path with an empty key (`""`, `a..b`, `.a`, `a.`) or a control character.
    #[error(
        "field {0:?} must be keys joined by '.', each non-empty and without control characters"
    )]
    Malformed(String),
}

/// Refuse more than [`MAX_FIELDS`] paths or one over [`MAX_FIELD_BYTES`]: on counts and
/// lengths alone, before any path is parsed.
pub fn check_bounds<S: AsRef<str>>(fields: &[S]) -> Result<(), FieldError> {
    if fields.len() > MAX_FIELDS {
        return Err(FieldError::TooMany(fields.len()));
    }
    match fields
        .iter()
        .map(AsRef::as_ref)
        .find(|p| p.len() > MAX_FIELD_BYTES)
    {
        Some(path) => {
            let cut = (0..=64)
                .rev()
                .find(|i| path.is_char_boundary(*i))
                .unwrap_or(0);
            Err(FieldError::TooLong {
                path: path[..cut].to_string(),
                len: path.len(),
            })
        }
        None => Ok(()),
    }
}

/// A node of a projection: keep the whole value, or only some of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// The whole value.
    All,
    /// These keys of an object (or of each element of a list).
    Keys(BTreeMap<String, Node>),
}

/// What of an object a plugin (or a cache) keeps: the whole object, or some fields and the
/// identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Projection(Option<BTreeMap<String, Node>>);

impl Projection {
    /// The whole object: what declaring nothing means.
    pub fn whole() -> Self {
        Projection(None)
    }

    /// Whether this is the whole object.
    pub fn is_whole(&self) -> bool {
        self.0.is_none()
    }

    /// Parse a declaration: empty is the whole object; otherwise each path, checked, and
    /// the identity.
    pub fn parse<S: AsRef<str>>(fields: &[S]) -> Result<Self, FieldError> {
        check_bounds(fields)?;
        if fields.is_empty() {
            return Ok(Projection::whole());
        }
        let mut keys = BTreeMap::new();
        for path in IDENTITY
            .iter()
            .copied()
            .chain(fields.iter().map(AsRef::as_ref))
        {
            let segments: Vec<&str> = path.split('.').collect();
            if segments
                .iter()
                .any(|s| s.is_empty() || s.chars().any(char::is_control))
            {
                return Err(FieldError::Malformed(path.to_string()));
            }
            insert(&mut keys, &segments);
        }
        Ok(Projection(Some(keys)))
    }

    /// The projection keeping what either keeps.
    pub fn union(&self, other: &Projection) -> Projection {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Projection(Some(union_keys(a, b))),
            _ => Projection::whole(),
        }
    }

    /// Whether everything `other` keeps, this keeps too (so projecting to `other` an object
    /// already projected to `self` is the same as projecting the whole object).
    pub fn covers(&self, other: &Projection) -> bool {
        match (&self.0, &other.0) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => covers_keys(a, b),
        }
    }

    /// Project an object in place: drop what this projection does not keep.
    pub fn apply(&self, value: &mut Value) {
        if let Some(keys) = &self.0 {
            project(keys, value);
        }
    }

    /// Project an object given as JSON text; the text itself when this is the whole
    /// object, or when it is not JSON (the plugin sees what it would have seen).
    pub fn apply_text<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if self.is_whole() {
            return std::borrow::Cow::Borrowed(text);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                self.apply(&mut value);
                std::borrow::Cow::Owned(value.to_string())
            }
            Err(_) => std::borrow::Cow::Borrowed(text),
        }
    }
}

impl Projection {
    /// The kept paths, identity included, in order; empty for the whole object.
    pub fn paths(&self) -> Vec<String> {
        fn walk(keys: &BTreeMap<String, Node>, prefix: &str, out: &mut Vec<String>) {
            for (k, node) in keys {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match node {
                    Node::All => out.push(path),
                    Node::Keys(sub) => walk(sub, &path, out),
                }
            }
        }
        let mut out = Vec::new();
        if let Some(keys) = &self.0 {
            walk(keys, "", &mut out);
        }
        out
    }
}

impl fmt::Display for Projection {
    /// The kept paths joined by `,` (identity included), or `whole objects`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_whole() {
            f.write_str("whole objects")
        } else {
            f.write_str(&self.paths().join(","))
        }
    }
}

fn insert(keys: &mut BTreeMap<String, Node>, segments: &[&str]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    if rest.is_empty() {
        keys.insert((*first).to_string(), Node::All);
        return;
    }
    let node = keys
        .entry((*first).to_string())
        .or_insert_with(|| Node::Keys(BTreeMap::new()));
    // A shorter path already keeps the whole value: nothing to add under it.
    if let Node::Keys(sub) = node {
        insert(sub, rest);
    }
}

fn union_keys(a: &BTreeMap<String, Node>, b: &BTreeMap<String, Node>) -> BTreeMap<String, Node> {
    let mut out = a.clone();
    for (k, nb) in b {
        let merged = match (out.get(k), nb) {
            (None, n) => n.clone(),
            (Some(Node::All), _) | (_, Node::All) => Node::All,
            (Some(Node::Keys(x)), Node::Keys(y)) => Node::Keys(union_keys(x, y)),
        };
        out.insert(k.clone(), merged);
    }
    out
}

fn covers_keys(a: &BTreeMap<String, Node>, b: &BTreeMap<String, Node>) -> bool {
    b.iter().all(|(k, nb)| match (a.get(k), nb) {
        (None, _) => false,
        (Some(Node::All), _) => true,
        (Some(Node::Keys(_)), Node::All) => false,
        (Some(Node::Keys(x)), Node::Keys(y)) => covers_keys(x, y),
    })
}

/// Keep `keys` of an object, or of every element of a list. A path going on through a
/// scalar reaches nothing: that key (or list element) is dropped.
fn project(keys: &BTreeMap<String, Node>, value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, v| match keys.get(k) {
                None => false,
                Some(Node::All) => true,
                Some(Node::Keys(sub)) => {
                    let container = v.is_object() || v.is_array();
                    if container {
                        project(sub, v);
                    }
                    container
                }
            });
        }
        Value::Array(items) => {
            items.retain_mut(|v| {
                let container = v.is_object() || v.is_array();
                if container {
                    project(keys, v);
                }
                container
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(fields: &[&str]) -> Projection {
        Projection::parse(fields).unwrap()
    }

    fn object() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"app.kubernetes.io/name": "web"},
                "annotations": {"big": "x"},
                "managedFields": [{"manager": "m"}]
            },
            "spec": {
                "containers": [
                    {"name": "c", "image": "i:1", "env": [{"name": "E"}]},
                    {"name": "d", "image": "i:2"}
                ],
                "nodeName": "n1"
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}
        })
    }

    #[test]
    fn keeps_declared_fields_and_identity() {
        let mut o = object();
        parse(&["spec.containers.image", "status.phase", "metadata.labels"]).apply(&mut o);
        assert_eq!(
            o,
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                    "labels": {"app.kubernetes.io/name": "web"}
                },
                "spec": {"containers": [{"image": "i:1"}, {"image": "i:2"}]},
                "status": {"phase": "Running"}
            })
        );
    }

    #[test]
    fn metadata_alone_is_metadata_only_and_empty_is_whole() {
        let mut o = object();
        parse(&["metadata"]).apply(&mut o);
        assert_eq!(o["metadata"], object()["metadata"]);
        assert!(o.get("spec").is_none() && o.get("status").is_none());
        let mut o = object();
        Projection::parse::<&str>(&[]).unwrap().apply(&mut o);
        assert_eq!(o, object());
        assert!(Projection::parse::<&str>(&[]).unwrap().is_whole());
    }

    #[test]
    fn a_path_through_a_scalar_reaches_nothing() {
        let mut o = object();
        parse(&["spec.nodeName.x", "status.phase"]).apply(&mut o);
        assert_eq!(o["spec"], json!({}));
        assert_eq!(o["status"], json!({"phase": "Running"}));
    }

    #[test]
    fn union_and_cover() {
        let a = parse(&["spec.containers.image"]);
        let b = parse(&["spec.containers", "status.phase"]);
        let u = a.union(&b);
        assert!(u.covers(&a) && u.covers(&b));
        assert!(b.covers(&a) && !a.covers(&b));
        assert_eq!(u, b);
        assert!(!a.covers(&Projection::whole()));
        assert!(Projection::whole().covers(&a));
        assert!(a.union(&Projection::whole()).is_whole());
        // Projecting a projection within the union equals projecting the whole object.
        let (mut via_union, mut direct) = (object(), object());
        u.apply(&mut via_union);
        a.apply(&mut via_union);
        a.apply(&mut direct);
        assert_eq!(via_union, direct);
        assert_eq!(
            a.to_string(),
            "apiVersion,kind,metadata.name,metadata.namespace,metadata.resourceVersion,\
             metadata.uid,spec.containers.image"
        );
    }

    #[test]
    fn bad_declarations_are_refused() {
        for bad in ["", "a..b", ".a", "a.", "a\nb"] {
            assert!(
                matches!(Projection::parse(&[bad]), Err(FieldError::Malformed(_))),
                "{bad:?}"
            );
        }
        let long = "a".repeat(MAX_FIELD_BYTES + 1);
        assert!(matches!(
            Projection::parse(&[long.as_str()]),
            Err(FieldError::TooLong { len: 257, .. })
        ));
        let many: Vec<String> = (0..=MAX_FIELDS).map(|i| format!("f{i}")).collect();
        assert_eq!(Projection::parse(&many), Err(FieldError::TooMany(65)));
        let max: Vec<String> = (0..MAX_FIELDS).map(|i| format!("f{i}")).collect();
        assert!(Projection::parse(&max).is_ok());
    }
}
