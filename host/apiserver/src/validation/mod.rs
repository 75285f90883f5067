//! OpenAPI v3 value validation of custom resources against their CRD's structural
//! schema, with kube-apiserver's error reporting.
//!
//! kube-apiserver validates a custom resource with kube-openapi's `validate` package
//! (a fork of go-openapi) and turns each result into a `field.Error`
//! (apiextensions-apiserver `kubeOpenAPIResultToFieldErrors`); the list becomes a
//! `422 Invalid` Status. This module follows that pipeline step by step, so the
//! reasons, messages and field paths match: the per-node order of checks (type,
//! string, format, number, array, enum, object), the go-openapi message texts
//! (`spec.x in body must be of type integer: "string"`), which go-openapi error maps
//! to which field error (`Required value`, `Unsupported value`, `Too long`, `Too
//! many`, `Invalid value`), the formats CRDs keep (int32/int64 and other unknown
//! formats are stripped and not checked), `x-kubernetes-list-type` uniqueness
//! (`Duplicate value`), the pruning of non-nullable nulls, and ratcheting on update
//! (errors under a value equal to the old value are dropped, as with the
//! CRDValidationRatcheting feature, GA since 1.33).
//!
//! Not implemented: `allOf`/`anyOf`/`oneOf`/`not`, `default` (no defaulting), CEL
//! (`x-kubernetes-validations`) and embedded-resource metadata checks. Properties of
//! one object are checked in name order; kube-apiserver walks a Go map, whose order
//! is random, so with several errors the real order may differ.
//!
//! By concept: `errors` (field errors and how Go prints them), `compile` (a schema into
//! [`Node`]s), `check` (a value against a node: the per-node checks, list types,
//! ratcheting, null pruning) and `formats` (the string formats CRDs keep).

mod check;
mod compile;
mod errors;
mod formats;

use errors::{BadValue, ErrorType};
pub(crate) use errors::{FieldError, invalid};

use crate::schema::ListKind;
use serde_json::Value;
use std::collections::BTreeMap;

/// `additionalProperties` of an object schema.
#[derive(Debug, Clone)]
enum Additional {
    None,
    Schema(Box<Node>),
}

/// One compiled schema node.
#[derive(Debug, Clone)]
struct Node {
    types: Vec<String>,
    nullable: bool,
    /// The schema's `default`, set on objects that lack the field.
    default: Option<Value>,
    /// The format as written, if it is one CRDs keep.
    format: Option<String>,
    enum_values: Option<Vec<Value>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<i64>,
    max_length: Option<i64>,
    pattern: Option<(String, Result<regex::Regex, String>)>,
    min_items: Option<i64>,
    max_items: Option<i64>,
    unique_items: bool,
    min_properties: Option<i64>,
    max_properties: Option<i64>,
    required: Vec<String>,
    properties: BTreeMap<String, Node>,
    additional: Additional,
    items: Option<Box<Node>>,
    list: ListKind,
}

/// Where errors are reported: the go-openapi path in messages (`spec.replicas`) and
/// the field path prefix the apiserver adds (`status` for the status subresource).
struct Ctx<'a> {
    prefix: Option<&'a str>,
}

impl Ctx<'_> {
    /// `fldPath.Child(strings.TrimPrefix(name, "."))`, or `fldPath` for the root.
    fn field(&self, name: &str) -> String {
        let name = name.strip_prefix('.').unwrap_or(name);
        match (self.prefix, name.is_empty()) {
            (None, true) => "<nil>".into(),
            (None, false) => name.to_string(),
            (Some(p), true) => p.to_string(),
            (Some(p), false) => format!("{p}.{name}"),
        }
    }

    fn err(&self, ty: ErrorType, name: &str, value: BadValue, detail: String) -> FieldError {
        FieldError {
            ty,
            field: self.field(name),
            value,
            detail,
        }
    }

    /// A plain (non-`Validation`) go-openapi error: reported on the prefix itself.
    fn plain(&self, detail: String) -> FieldError {
        FieldError {
            ty: ErrorType::Invalid,
            field: self.field(""),
            value: BadValue::Str(String::new()),
            detail,
        }
    }
}

/// The compiled validation schema of one CRD version.
#[derive(Debug, Clone)]
pub(crate) struct Validator {
    root: Node,
}

impl Validator {
    /// Compiles a version's `openAPIV3Schema`.
    pub(crate) fn new(openapi_v3_schema: &Value) -> Validator {
        Validator {
            root: Node::compile(openapi_v3_schema),
        }
    }

    /// Drops `null` values of non-nullable fields without a default, as the apiserver
    /// does while decoding (before validation).
    pub(crate) fn prune_nulls(&self, obj: &mut Value) {
        self.root.prune_nulls(obj);
    }

    /// Sets the schema's defaults on `obj`, as the apiserver does while decoding (a
    /// request's body and what it reads from storage): a field its schema gives a
    /// `default` is set where its parent object exists and lacks it (or holds a `null`
    /// the field may not hold).
    pub(crate) fn default(&self, obj: &mut Value) {
        self.root.default(obj);
    }

    /// Field errors of a created object, or of an updated one (`old`: ratcheting of
    /// unchanged values, list-type checks only when the old object passed them).
    pub(crate) fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let cx = Ctx { prefix: None };
        let mut errs = self.root.validate(obj, old, "", &cx);
        errs.extend(self.list_errors_ratcheted(obj, old));
        errs
    }

    /// Field errors of a status-subresource update: only `.status` is validated, with
    /// the status schema as root (messages name `state`, fields `status.state`).
    pub(crate) fn validate_status(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let (Some(status), Some(schema)) =
            (obj.get("status"), self.root.properties.get("status"))
        {
            let cx = Ctx {
                prefix: Some("status"),
            };
            errs.extend(schema.validate(status, old.get("status"), "", &cx));
        }
        errs.extend(self.list_errors_ratcheted(obj, Some(old)));
        errs
    }

    fn list_errors_ratcheted(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        self.root.list_errors(obj, "", &mut errs);
        if !errs.is_empty()
            && let Some(old) = old
        {
            let mut before = Vec::new();
            self.root.list_errors(old, "", &mut before);
            if !before.is_empty() {
                return Vec::new();
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::compile::ascii_classes;
    use super::errors::go_float;
    use super::formats::{is_base64, is_date_time};
    use super::*;
    use serde_json::json;

    fn v() -> Validator {
        Validator::new(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"},
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1.5},
                    "mode": {"type": "string", "enum": ["A", "B"]},
                    "at": {"type": "string", "format": "date-time"},
                    "big": {"type": "integer", "format": "int32"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                }}
            }
        }))
    }

    #[test]
    fn defaults_fill_what_is_missing_where_the_parent_exists() {
        let v = Validator::new(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "mode": {"type": "string", "default": "Enforce"},
                    "n": {"type": "integer", "default": 3},
                    "opt": {"type": "object", "properties": {
                        "x": {"type": "string", "default": "y"}}},
                    "items": {"type": "array", "items": {"type": "object", "properties": {
                        "w": {"type": "integer", "default": 1}}}},
                }},
            },
        }));
        let mut o = json!({"spec": {"n": 5, "mode": null, "items": [{}, {"w": 2}]}});
        v.default(&mut o);
        assert_eq!(
            o,
            json!({"spec": {"n": 5, "mode": "Enforce", "items": [{"w": 1}, {"w": 2}]}}),
            "a set value stays, a null is defaulted, an absent parent is not created"
        );
        let mut none = json!({});
        v.default(&mut none);
        assert_eq!(none, json!({}));
    }

    fn bodies(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn messages_follow_kube_openapi() {
        let errs = v().validate(
            &json!({"spec": {"name": "ab", "size": "x", "ratio": 1.5, "mode": "C",
                "at": "yesterday", "big": 9_000_000_000_i64, "port": true, "tags": ["a", "b", "a"]}}),
            None,
        );
        assert_eq!(
            bodies(&errs),
            vec![
                "spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
                "spec.mode: Unsupported value: \"C\": supported values: \"A\", \"B\"",
                "spec.name: Invalid value: \"ab\": spec.name in body should be at least 3 chars long",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5",
                "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
                "spec.tags: Too many: 3: must have at most 2 items",
                "spec.tags[2]: Duplicate value: \"a\"",
            ]
        );
        let errs = v().validate(&json!({"spec": {"size": 0, "name": "abcdef"}}), None);
        assert_eq!(
            bodies(&errs),
            vec![
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ]
        );
        let errs = v().validate(&json!({"spec": {"name": "AB1"}}), None);
        assert_eq!(
            bodies(&errs),
            vec!["spec.name: Invalid value: \"AB1\": spec.name in body should match '^[a-z]+$'"]
        );
        assert_eq!(
            bodies(&v().validate(&json!({"spec": {}}), None)),
            vec!["spec.name: Required value"]
        );
    }

    #[test]
    fn ratcheting_keeps_unchanged_invalid_values() {
        let old = json!({"spec": {"name": "toolongname", "size": 3}});
        let new = json!({"spec": {"name": "toolongname", "size": 4}});
        assert!(v().validate(&new, Some(&old)).is_empty());
        assert_eq!(v().validate(&new, None).len(), 1);
    }

    #[test]
    fn patterns_use_go_ascii_classes() {
        assert_eq!(ascii_classes(r"^\d+[\d.]$"), r"^(?-u:\d)+[0-9.]$");
        let re = regex::Regex::new(&ascii_classes(r"^\d+$")).expect("compiles");
        assert!(re.is_match("42"));
        assert!(
            !re.is_match("\u{0664}\u{0662}"),
            "Arabic-Indic digits are not \\d in Go"
        );
    }

    #[test]
    fn formats_and_floats() {
        assert!(is_date_time("2024-01-02T03:04:05Z"));
        assert!(is_date_time("2024-01-02T03:04:05.123+02:00"));
        assert!(!is_date_time("2024-01-02 03:04:05"));
        assert!(!is_date_time("2024-01-02Té3:04:05Z"));
        assert!(is_base64("aGVsbG8="));
        assert!(!is_base64("not base64!"));
        assert!(!is_base64(""));
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(2.5), "2.5");
        assert_eq!(go_float(100000000.0), "100000000");
    }

    #[test]
    fn nulls_of_non_nullable_fields_are_dropped() {
        let val = Validator::new(&json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string", "nullable": true},
            "l": {"type": "array", "items": {"type": "string"}}}}));
        let mut o = json!({"a": null, "b": null, "l": [null]});
        val.prune_nulls(&mut o);
        assert_eq!(o, json!({"b": null, "l": [null]}));
        assert_eq!(
            bodies(&val.validate(&o, None)),
            vec!["l[0]: Invalid value: \"null\": l[0] in body must be of type string: \"null\""]
        );
    }
}
