//! Label and field selectors, parsed from their Kubernetes text form and matched
//! against objects in the host's caches.
//!
//! One watcher per resource is shared by every plugin, so each plugin's selectors are
//! applied here, host-side, rather than on the API server.

use std::collections::BTreeMap;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
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
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'".into());
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
        return Err("unbalanced '('".into());
    }
    out.push(&text[start..]);
    Ok(out)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key)?));
    }
    for (op, ctor) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((k, v)) = part.split_once(op) {
            return Ok(ctor(label_key(k)?, label_value(v)?));
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = label_key(words[0])?;
        let rest = words[1].trim();
        let (op, set) = if let Some(s) = rest.strip_prefix("notin") {
            ("notin", s)
        } else if let Some(s) = rest.strip_prefix("in") {
            ("in", s)
        } else {
            return Err(format!("unknown operator in {part:?}"));
        };
        let set = set.trim();
        let inner = set
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("expected (values) after {op} in {part:?}"))?;
        let values = inner
            .split(',')
            .map(label_value)
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(if op == "in" {
            Requirement::In(key, values)
        } else {
            Requirement::NotIn(key, values)
        });
    }
    Ok(Requirement::Exists(label_key(part)?))
}

fn label_key(k: &str) -> Result<String, String> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

fn label_value(v: &str) -> Result<String, String> {
    let v = v.trim();
    let ok = v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!("invalid label value {v:?}"))
    }
}

/// A field selector. The host supports the fields every kind has:
/// `metadata.name` and `metadata.namespace`, with `=`, `==` and `!=`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(Field, bool, String)>);

/// A field a field selector may test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
}

impl FieldSelector {
    /// Parse `metadata.name=x,metadata.namespace!=y`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!("{part:?} is not field=value"));
            };
            let field = match field.trim() {
                "metadata.name" => Field::Name,
                "metadata.namespace" => Field::Namespace,
                other => {
                    return Err(format!(
                        "field {other:?} is not supported (only metadata.name and metadata.namespace)"
                    ));
                }
            };
            terms.push((field, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether an object with this name and namespace matches.
    pub fn matches(&self, name: &str, namespace: Option<&str>) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field {
                Field::Name => name,
                Field::Namespace => namespace.unwrap_or(""),
            };
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
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
        assert!(m(""));
    }

    #[test]
    fn label_parse_errors() {
        assert!(LabelSelector::parse("a in (b").is_err());
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("a=b c").is_err());
        assert!(LabelSelector::parse("a foo (b)").is_err());
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=x,metadata.namespace!=kube-system").unwrap();
        assert!(f.matches("x", Some("default")));
        assert!(!f.matches("x", Some("kube-system")));
        assert!(!f.matches("y", Some("default")));
        assert!(FieldSelector::parse("status.phase=Running").is_err());
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
