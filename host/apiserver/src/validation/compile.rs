//! A CRD version's `openAPIV3Schema` compiled into [`Node`]s: the keywords validation
//! reads, patterns compiled with Go's ASCII classes, only the formats CRDs keep.

use super::formats::SUPPORTED_FORMATS;
use super::{Additional, Node};
use crate::schema::list_kind;
use serde_json::Value;

/// Go's RE2 has ASCII-only `\d`, `\w`, `\s` and `\b`, the regex crate Unicode ones:
/// rewrites them to their ASCII forms (`(?-u:..)` outside, ranges inside classes).
pub(super) fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push(c);
                    break;
                };
                match (in_class, e) {
                    // The negated classes stay Unicode: in ASCII form they could match
                    // bytes of invalid UTF-8, which the regex crate refuses for `&str`.
                    (false, 'd' | 'w' | 's' | 'b' | 'B') => {
                        out.push_str(&format!("(?-u:\\{e})"));
                    }
                    (true, 'd') => out.push_str("0-9"),
                    (true, 'w') => out.push_str("0-9A-Za-z_"),
                    (true, 's') => out.push_str("\\t\\n\\x0C\\r "),
                    _ => {
                        out.push(c);
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

fn int_kw(s: &Value, k: &str) -> Option<i64> {
    s.get(k).and_then(Value::as_i64)
}

fn as_f64(v: &Value) -> Option<f64> {
    v.as_f64()
}

impl Node {
    pub(super) fn compile(s: &Value) -> Node {
        let mut types: Vec<String> = s
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(|t| vec![t.to_string()])
            .unwrap_or_default();
        if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            types = vec!["integer".into(), "string".into()];
        }
        let format = s
            .get("format")
            .and_then(Value::as_str)
            .filter(|f| SUPPORTED_FORMATS.contains(&f.replace('-', "").as_str()))
            .map(String::from);
        let pattern = s.get("pattern").and_then(Value::as_str).map(|p| {
            let compiled = regex::Regex::new(&ascii_classes(p)).map_err(|e| e.to_string());
            (p.to_string(), compiled)
        });
        let additional = match s.get("additionalProperties") {
            Some(ap @ Value::Object(_)) => Additional::Schema(Box::new(Node::compile(ap))),
            _ => Additional::None,
        };
        Node {
            types,
            nullable: s.get("nullable").and_then(Value::as_bool) == Some(true),
            default: s.get("default").cloned(),
            format,
            enum_values: s.get("enum").and_then(Value::as_array).cloned(),
            minimum: s.get("minimum").and_then(as_f64),
            maximum: s.get("maximum").and_then(as_f64),
            exclusive_minimum: s.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true),
            exclusive_maximum: s.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true),
            multiple_of: s.get("multipleOf").and_then(as_f64),
            min_length: int_kw(s, "minLength"),
            max_length: int_kw(s, "maxLength"),
            pattern,
            min_items: int_kw(s, "minItems"),
            max_items: int_kw(s, "maxItems"),
            unique_items: s.get("uniqueItems").and_then(Value::as_bool) == Some(true),
            min_properties: int_kw(s, "minProperties"),
            max_properties: int_kw(s, "maxProperties"),
            required: s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(|k| k.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            properties: s
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| {
                    p.iter()
                        .map(|(k, v)| (k.clone(), Node::compile(v)))
                        .collect()
                })
                .unwrap_or_default(),
            additional,
            items: s
                .get("items")
                .filter(|i| i.is_object())
                .map(|i| Box::new(Node::compile(i))),
            list: list_kind(s),
        }
    }

    /// The schema of key `k` of an object: a property or the `additionalProperties` schema.
    pub(super) fn child(&self, k: &str) -> Option<&Node> {
        self.properties.get(k).or(match &self.additional {
            Additional::Schema(s) => Some(s),
            Additional::None => None,
        })
    }
}
