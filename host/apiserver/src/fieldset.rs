//! Field sets: the sets of field paths that managedFields entries own, and their
//! `FieldsV1` JSON encoding (`f:` fields, `k:` map-list keys, `v:` set values,
//! `i:` indices, `.` for the node itself).

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PathElement {
    /// A field of a map: `f:name`.
    Field(String),
    /// A set item, by its canonical JSON value: `v:"x"`.
    Value(String),
    /// A map-list item, by the canonical JSON of its key fields: `k:{"name":"c"}`.
    Key(String),
    /// A list item by position: `i:0`.
    Index(usize),
}

impl PathElement {
    fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<PathElement> {
        let (prefix, rest) = s.split_at_checked(2)?;
        match prefix {
            "f:" => Some(PathElement::Field(rest.to_string())),
            "v:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Value(canonical(&v)))
            }
            "k:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Key(canonical(&v)))
            }
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }

    /// The element as kube-apiserver prints it in conflict messages.
    pub(crate) fn display(&self) -> String {
        match self {
            PathElement::Field(f) => format!(".{f}"),
            PathElement::Value(v) => format!("[={v}]"),
            PathElement::Key(k) => {
                let parsed: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = parsed.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            PathElement::Index(i) => format!("[{i}]"),
        }
    }
}

/// Canonical JSON text (object keys sorted) of a value.
pub(crate) fn canonical(v: &Value) -> String {
    // serde_json's Map is a BTreeMap here, so serialisation is already key-sorted.
    serde_json::to_string(v).unwrap_or_default()
}

/// A path from the object root.
pub(crate) type Path = Vec<PathElement>;

/// Prints a path like kube-apiserver: `.spec.containers[name="c"].image`.
pub(crate) fn display_path(path: &[PathElement]) -> String {
    path.iter().map(PathElement::display).collect()
}

/// A set of field paths, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// True when no path is a member.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds a path.
    pub(crate) fn insert(&mut self, path: &[PathElement]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// True when `path` is a member.
    #[cfg(test)]
    pub(crate) fn contains(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// True when some member lies strictly below `path`.
    pub(crate) fn has_member_below(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => self.children.values().any(|c| !c.is_empty()),
            Some((first, rest)) => self
                .children
                .get(first)
                .is_some_and(|c| c.has_member_below(rest)),
        }
    }

    /// Set union.
    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (k, v) in &other.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(v),
                None => v.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    /// Members of `self` that are not members of `other` (exact paths).
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    /// Members of both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let i = v.intersection(o);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// All member paths, in sorted order.
    pub(crate) fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (k, v) in &self.children {
            prefix.push(k.clone());
            v.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON encoding.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, v) in &self.children {
            if !v.is_empty() {
                m.insert(k.encode(), v.to_fields_v1());
            }
        }
        Value::Object(m)
    }

    /// Decodes `fieldsV1` JSON; `None` when malformed.
    pub(crate) fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let obj = v.as_object()?;
        let mut out = FieldSet::new();
        for (k, child) in obj {
            if k == "." {
                out.member = true;
                continue;
            }
            let pe = PathElement::decode(k)?;
            let mut c = FieldSet::from_fields_v1(child)?;
            if c.children.is_empty() {
                c.member = true;
            }
            out.children.insert(pe, c);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trip() {
        let v = json!({"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:c":{"k:{\"name\":\"x\"}":{".":{},"f:image":{}}},"f:fin":{"v:\"a\"":{}}}});
        let s = FieldSet::from_fields_v1(&v).expect("valid");
        assert_eq!(s.to_fields_v1(), v);
        assert!(s.contains(&[
            PathElement::Field("metadata".into()),
            PathElement::Field("labels".into())
        ]));
        assert!(!s.contains(&[PathElement::Field("metadata".into())]));
        let paths: Vec<String> = s.paths().iter().map(|p| display_path(p)).collect();
        assert!(paths.contains(&".spec.c[name=\"x\"].image".to_string()));
        assert!(paths.contains(&".spec.fin[=\"a\"]".to_string()));
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[PathElement::Field("x".into())]);
        a.insert(&[PathElement::Field("y".into())]);
        let mut b = FieldSet::new();
        b.insert(&[PathElement::Field("y".into())]);
        assert_eq!(a.difference(&b).paths().len(), 1);
        assert_eq!(a.intersection(&b), b);
        assert_eq!(b.union(&a), a);
    }
}
