//! Label and field selectors: parsed from their Kubernetes text form once, then matched
//! against objects. The one implementation used by the host's routing, `kubewasm test`'s
//! fixture reads and the embedded API server's list and watch filtering.
//!
//! The grammar and validation follow `k8s.io/apimachinery/pkg/labels` and `.../fields`:
//! label keys are `[prefix/]name` (prefix a DNS-1123 subdomain, name at most 63
//! characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric), values
//! are empty or follow the name rule, and `in`/`notin` need at least one value.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Why a selector did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// Parentheses do not balance.
    #[error("unbalanced parentheses")]
    Unbalanced,
    /// A label key is not `[prefix/]name`.
    #[error("invalid label key {0:?}: {1}")]
    InvalidKey(String, &'static str),
    /// A label value is not valid.
    #[error("invalid label value {0:?}: {1}")]
    InvalidValue(String, &'static str),
    /// Text between requirements that is no operator.
    #[error("unknown operator in {0:?}")]
    UnknownOperator(String),
    /// `in`/`notin` without a parenthesised, non-empty set.
    #[error("{op} needs a non-empty set of values in parentheses in {part:?}")]
    BadSet {
        /// `in` or `notin`.
        op: &'static str,
        /// The requirement as written.
        part: String,
    },
    /// `<`/`>` need an integer value.
    #[error("{0:?}: `<` and `>` compare with an integer")]
    NotAnInteger(String),
    /// A field selector term is not `field=value` / `field!=value`.
    #[error("{0:?} is not field=value or field!=value")]
    BadFieldTerm(String),
    /// The field is not one this consumer can select on.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Requirement {
    /// `key=value` / `key==value`.
    Equals(String, String),
    /// `key!=value` (true when the label is absent too).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (true when absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
    /// `key>N` (the label is an integer greater than N).
    GreaterThan(String, i64),
    /// `key<N`.
    LessThan(String, i64),
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    text: String,
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(LabelSelector {
            requirements,
            text: text.trim().to_string(),
        })
    }

    /// True when it has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether labels, looked up by `get`, satisfy every requirement.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => !get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
            Requirement::GreaterThan(k, n) => get(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            Requirement::LessThan(k, n) => get(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }

    /// Whether a label map satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Whether a JSON object's `metadata.labels` satisfy every requirement.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError::Unbalanced);
                }
            }
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Unbalanced);
    }
    out.push(&text[start..]);
    Ok(out)
}

fn parse_requirement(part: &str) -> Result<Requirement, SelectorError> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key)?));
    }
    for op in ["!=", "==", "="] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (label_key(k)?, label_value(v)?);
            return Ok(if op == "!=" {
                Requirement::NotEquals(k, v)
            } else {
                Requirement::Equals(k, v)
            });
        }
    }
    for op in ['>', '<'] {
        if let Some((k, v)) = part.split_once(op) {
            let n = v
                .trim()
                .parse::<i64>()
                .map_err(|_| SelectorError::NotAnInteger(part.to_string()))?;
            let k = label_key(k)?;
            return Ok(if op == '>' {
                Requirement::GreaterThan(k, n)
            } else {
                Requirement::LessThan(k, n)
            });
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let Some(rest) = words.next() else {
        return Ok(Requirement::Exists(label_key(part)?));
    };
    let rest = rest.trim();
    let (op, set) = if let Some(s) = rest.strip_prefix("notin") {
        ("notin", s)
    } else if let Some(s) = rest.strip_prefix("in") {
        ("in", s)
    } else {
        return Err(SelectorError::UnknownOperator(part.to_string()));
    };
    let bad_set = || SelectorError::BadSet {
        op,
        part: part.to_string(),
    };
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(bad_set)?;
    let values = inner
        .split(',')
        .map(label_value)
        .collect::<Result<Vec<_>, _>>()?;
    if values.iter().all(String::is_empty) {
        return Err(bad_set());
    }
    let key = label_key(key)?;
    Ok(if op == "in" {
        Requirement::In(key, values)
    } else {
        Requirement::NotIn(key, values)
    })
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn label_key(k: &str) -> Result<String, SelectorError> {
    let k = k.trim();
    let bad = |why| Err(SelectorError::InvalidKey(k.to_string(), why));
    let name = match k.split_once('/') {
        Some((prefix, name)) => {
            if !crate::names::is_dns1123_subdomain(prefix) {
                return bad("the prefix must be a DNS-1123 subdomain");
            }
            name
        }
        None => k,
    };
    if !is_qualified_name_part(name) {
        return bad(
            "the name must be 63 characters or less, alphanumerics, '-', '_' or '.', starting and ending alphanumeric",
        );
    }
    Ok(k.to_string())
}

fn label_value(v: &str) -> Result<String, SelectorError> {
    let v = v.trim();
    if v.is_empty() || is_qualified_name_part(v) {
        Ok(v.to_string())
    } else {
        Err(SelectorError::InvalidValue(
            v.to_string(),
            "must be empty or 63 characters or less, alphanumerics, '-', '_' or '.', starting and ending alphanumeric",
        ))
    }
}

/// One term of a field selector: `path=value` or `path!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldTerm {
    /// Dotted field path, e.g. `metadata.name`.
    pub path: String,
    /// `=`/`==` (true) or `!=` (false).
    pub equals: bool,
    /// The value compared with.
    pub value: String,
}

/// A parsed field selector: every term must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
    text: String,
}

/// The fields every kind supports (what the API server accepts for custom resources).
pub const OBJECT_META_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

impl FieldSelector {
    /// Parse `metadata.name=x,metadata.namespace!=y`, any field path.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equals, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError::BadFieldTerm(part.to_string()));
            };
            let path = path.trim();
            if path.is_empty() {
                return Err(SelectorError::BadFieldTerm(part.to_string()));
            }
            terms.push(FieldTerm {
                path: path.to_string(),
                equals,
                value: value.trim().to_string(),
            });
        }
        Ok(FieldSelector {
            terms,
            text: text.trim().to_string(),
        })
    }

    /// Parse, accepting only the fields in `allowed`.
    pub fn parse_restricted(text: &str, allowed: &[&str]) -> Result<Self, SelectorError> {
        let s = Self::parse(text)?;
        if let Some(t) = s.terms.iter().find(|t| !allowed.contains(&t.path.as_str())) {
            return Err(SelectorError::UnsupportedField(t.path.clone()));
        }
        Ok(s)
    }

    /// True when it has no term.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether an object matches, its fields looked up by `get` (absent reads as `""`,
    /// as the API server's field sets do).
    pub(crate) fn matches_with(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms
            .iter()
            .all(|t| (get(&t.path).unwrap_or_default() == t.value) == t.equals)
    }

    /// Whether an object with this name and namespace matches (for selectors restricted
    /// to [`OBJECT_META_FIELDS`]).
    pub(crate) fn matches_meta(&self, name: &str, namespace: Option<&str>) -> bool {
        self.matches_with(|path| match path {
            "metadata.name" => Some(name.to_string()),
            "metadata.namespace" => namespace.map(str::to_string),
            _ => None,
        })
    }

    /// Whether a JSON object matches, fields read by their dotted path.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches_with(|path| {
            let mut cur = Some(object);
            for p in path.split('.') {
                cur = cur.and_then(|c| c.get(p));
            }
            match cur {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Null) | None => None,
                Some(other) => Some(other.to_string()),
            }
        })
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_operators() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&l);
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("missing!=x"));
        assert!(m("tier in (front, back)"));
        assert!(!m("tier notin (front)"));
        assert!(m("other notin (front)"));
        assert!(m("app"));
        assert!(!m("!app"));
        assert!(m("!nope"));
        assert!(m("app=web,tier in (front),!nope"));
        assert!(!m("app=web,tier=back"));
        assert!(m("n>4"));
        assert!(!m("n<5"));
        assert!(m(""));
    }

    #[test]
    fn label_parse_errors() {
        for bad in [
            "a in (b",
            "a in b",
            "a=b c",
            "a foo (b)",
            "a in ()",
            "-a=b",
            "a=-b",
            "UPPER_/x=1",
            "n>x",
            &format!("{}=1", "k".repeat(64)),
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(LabelSelector::parse("example.com/app=web").is_ok());
        assert!(LabelSelector::parse("app=").is_ok());
    }

    #[test]
    fn label_matching_on_json_objects() {
        let o = json!({"metadata":{"labels":{"app":"web","tier":"front"}}});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches_object(&o);
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web)"));
        assert!(m("!missing"));
        assert!(!m("!app"));
        assert!(
            !LabelSelector::parse("x")
                .unwrap()
                .matches_object(&json!({}))
        );
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=x,metadata.namespace!=kube-system").unwrap();
        assert!(f.matches_meta("x", Some("default")));
        assert!(!f.matches_meta("x", Some("kube-system")));
        assert!(!f.matches_meta("y", Some("default")));
        assert!(
            FieldSelector::parse_restricted("status.phase=Running", OBJECT_META_FIELDS).is_err()
        );
        assert!(FieldSelector::parse("nonsense").is_err());
        let pod = json!({"metadata":{"name":"a"},"status":{"phase":"Running"},"spec":{"n":3}});
        assert!(
            FieldSelector::parse("status.phase=Running")
                .unwrap()
                .matches_object(&pod)
        );
        assert!(
            FieldSelector::parse("spec.n=3")
                .unwrap()
                .matches_object(&pod)
        );
        assert!(
            FieldSelector::parse("spec.missing=")
                .unwrap()
                .matches_object(&pod)
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=a ")
                .unwrap()
                .to_string(),
            "metadata.name=a"
        );
    }
}
