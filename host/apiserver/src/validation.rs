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

use crate::error::StatusError;
use crate::schema::{ListKind, list_kind};
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;

/// The kinds of `field.Error` kube-apiserver reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorType {
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueTypeInvalid`.
    TypeInvalid,
    /// `FieldValueTooLong`.
    TooLong,
    /// `FieldValueTooMany`.
    TooMany,
    /// `FieldValueDuplicate`.
    Duplicate,
}

impl ErrorType {
    /// The cause `reason`.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Duplicate => "FieldValueDuplicate",
        }
    }

    fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Duplicate => "Duplicate value",
        }
    }
}

/// The bad value of a field error, printed as Go's `field.Error.ErrorBody` prints it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BadValue {
    /// Not printed.
    Omit,
    /// A string, quoted.
    Str(String),
    /// Any other JSON value: integers, floats and booleans plainly, `null`, objects
    /// and arrays as JSON.
    Json(Value),
}

impl BadValue {
    fn of(v: &Value) -> BadValue {
        match v {
            Value::String(s) => BadValue::Str(s.clone()),
            other => BadValue::Json(other.clone()),
        }
    }

    fn render(&self) -> Option<String> {
        match self {
            BadValue::Omit => None,
            BadValue::Str(s) => Some(go_quote(s)),
            BadValue::Json(Value::Number(n)) => Some(go_number(n)),
            BadValue::Json(v) => Some(serde_json::to_string(v).unwrap_or_default()),
        }
    }
}

/// One field error (`k8s.io/apimachinery/pkg/util/validation/field.Error`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    /// Kind of error.
    pub(crate) ty: ErrorType,
    /// Field path (`spec.ports[0].port`).
    pub(crate) field: String,
    /// The offending value.
    pub(crate) value: BadValue,
    /// Detail text.
    pub(crate) detail: String,
}

impl FieldError {
    /// `ErrorBody()`: the cause message.
    pub(crate) fn body(&self) -> String {
        let mut s = self.ty.label().to_string();
        let show_value = !matches!(self.ty, ErrorType::Required | ErrorType::TooLong);
        if show_value && let Some(v) = self.value.render() {
            s.push_str(": ");
            s.push_str(&v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// The `422 Invalid` Status kube-apiserver answers for these errors.
pub(crate) fn invalid(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> StatusError {
    StatusError::invalid(
        group,
        kind,
        name,
        errs.iter()
            .map(|e| (e.ty.reason().to_string(), e.field.clone(), e.body()))
            .collect(),
    )
}

/// Go's `%q` for the strings that appear in messages.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number as Go's `%v` prints the int64 or float64 it decodes to.
fn go_number(n: &Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(0.0)),
    }
}

/// Go's `%v` of a float64: shortest representation, exponent form (`1e+21`,
/// `1e-05`) only below 1e-4 or from 1e21 on.
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..21).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// The JSON type name go-openapi infers for a value (`schemaInfoForType`) and the
/// format name it reports for it.
fn json_type(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        // Go decodes integers beyond int64 and anything with a fraction or exponent
        // into float64.
        Value::Number(_) => ("number", "float64"),
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// String formats a CRD schema keeps (`supportedFormats` of apiextensions-apiserver,
/// names without dashes); any other format is stripped and never checked.
const SUPPORTED_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

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
    has_default: bool,
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

/// Go's RE2 has ASCII-only `\d`, `\w`, `\s` and `\b`, the regex crate Unicode ones:
/// rewrites them to their ASCII forms (`(?-u:..)` outside, ranges inside classes).
fn ascii_classes(pattern: &str) -> String {
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

impl Node {
    fn compile(s: &Value) -> Node {
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
            has_default: s.get("default").is_some(),
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
    fn child(&self, k: &str) -> Option<&Node> {
        self.properties.get(k).or(match &self.additional {
            Additional::Schema(s) => Some(s),
            Additional::None => None,
        })
    }
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

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Node {
    /// Validates `v` (with ratcheting against `old` when given) at go-openapi path `path`.
    fn validate(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        cx: &Ctx<'_>,
    ) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if v.is_null() {
            if !self.types.is_empty() && !self.types.iter().any(|t| t == "null") && !self.nullable {
                errs.push(self.type_error(path, &self.types.join(","), "null", cx));
            }
            self.check_enum(v, path, cx, &mut errs);
            return self.ratchet(errs, v, old);
        }
        if let Some(e) = self.check_type(v, path, cx) {
            errs.push(e);
        }
        if let Value::String(s) = v {
            if let Some(e) = self.check_string(s, path, cx) {
                errs.push(e);
            }
            if let Some(e) = self.check_format(s, path, cx) {
                errs.push(e);
            }
        }
        if v.is_number() {
            self.check_number(v, path, cx, &mut errs);
        }
        if let Value::Array(items) = v {
            self.check_array(items, old, path, cx, &mut errs);
        }
        self.check_enum(v, path, cx, &mut errs);
        if let Value::Object(m) = v {
            self.check_object(m, old, path, cx, &mut errs);
        }
        self.ratchet(errs, v, old)
    }

    /// Errors below a value that did not change are dropped (ratcheting).
    fn ratchet(&self, errs: Vec<FieldError>, v: &Value, old: Option<&Value>) -> Vec<FieldError> {
        match old {
            Some(o) if !errs.is_empty() && self.unchanged(v, o) => Vec::new(),
            _ => errs,
        }
    }

    /// `CorrelatedObject.CachedDeepEqual`: equal values, where object keys count only
    /// when the schema knows them and list items are matched by map keys for
    /// `x-kubernetes-list-type: map`.
    fn unchanged(&self, v: &Value, old: &Value) -> bool {
        match (v, old) {
            (Value::Array(a), Value::Array(b)) => {
                if a.len() != b.len() {
                    return false;
                }
                let Some(item) = &self.items else {
                    return a == b;
                };
                if !matches!(self.list, ListKind::Map(_)) {
                    return a == b;
                }
                a.iter().all(|x| {
                    self.correlate_item(x, b)
                        .is_some_and(|o| item.unchanged(x, o))
                })
            }
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, x)| match (self.child(k), b.get(k)) {
                        (Some(s), Some(o)) => s.unchanged(x, o),
                        _ => false,
                    })
            }
            (a, b) => a == b,
        }
    }

    /// The old item with the same map keys as `item` (`x-kubernetes-list-type: map`).
    fn correlate_item<'a>(&self, item: &Value, old: &'a [Value]) -> Option<&'a Value> {
        let ListKind::Map(keys) = &self.list else {
            return None;
        };
        let key_of =
            |x: &Value| -> Vec<Option<Value>> { keys.iter().map(|k| x.get(k).cloned()).collect() };
        let want = key_of(item);
        old.iter().find(|o| o.is_object() && key_of(o) == want)
    }

    fn type_error(&self, path: &str, expected: &str, got: &str, cx: &Ctx<'_>) -> FieldError {
        cx.err(
            ErrorType::TypeInvalid,
            path,
            BadValue::Str(got.to_string()),
            format!(
                "{path} in body must be of type {expected}: {}",
                go_quote(got)
            ),
        )
    }

    /// go-openapi's `typeValidator`.
    fn check_type(&self, v: &Value, path: &str, cx: &Ctx<'_>) -> Option<FieldError> {
        let format = self.format.as_deref().unwrap_or("");
        if self.types.is_empty() && format.is_empty() {
            return None;
        }
        let (sch_type, sch_format) = json_type(v);
        let has = |t: &str| self.types.iter().any(|x| x == t);
        let is_float_int = sch_type == "number"
            && v.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
            && has("integer");
        let is_int_float = sch_type == "integer" && has("number");
        let string_or_slice = v.is_string() || v.is_array();
        // A formatted schema (no string formats apply to numbers, booleans or
        // objects) given a value of another type.
        let matches = has(sch_type) || sch_format == format || is_float_int || is_int_float;
        if !(string_or_slice || format.is_empty() || matches) {
            return Some(self.type_error(path, format, sch_format, cx));
        }
        // A string format accepts strings and, as go-openapi does, arrays.
        if string_or_slice && !(has("number") || has("integer") || format.is_empty()) {
            return None;
        }
        if !(has(sch_type) || is_float_int || is_int_float) {
            return Some(self.type_error(path, &self.types.join(","), sch_type, cx));
        }
        None
    }

    /// go-openapi's `stringValidator`: the first failing of maxLength, minLength, pattern.
    fn check_string(&self, s: &str, path: &str, cx: &Ctx<'_>) -> Option<FieldError> {
        let len = s.chars().count() as i64;
        if let Some(max) = self.max_length
            && len > max
        {
            // TooLongFailCode becomes field.TooLongMaxLength, which omits the value.
            let unit = if max == 1 { "byte" } else { "bytes" };
            return Some(cx.err(
                ErrorType::TooLong,
                path,
                BadValue::Omit,
                format!("may not be more than {max} {unit}"),
            ));
        }
        if let Some(min) = self.min_length
            && len < min
        {
            return Some(cx.err(
                ErrorType::Invalid,
                path,
                BadValue::Str(s.to_string()),
                format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some((pattern, re)) = &self.pattern {
            let shown = match re {
                Ok(re) if re.is_match(s) => return None,
                Ok(_) => pattern.clone(),
                Err(e) => format!("{pattern}, but pattern is invalid: {e}"),
            };
            return Some(cx.err(
                ErrorType::Invalid,
                path,
                BadValue::Str(s.to_string()),
                format!("{path} in body should match '{shown}'"),
            ));
        }
        None
    }

    /// go-openapi's `formatValidator` with the strfmt checks of the kept formats.
    fn check_format(&self, s: &str, path: &str, cx: &Ctx<'_>) -> Option<FieldError> {
        let format = self.format.as_deref()?;
        if format_ok(&format.replace('-', ""), s) {
            return None;
        }
        Some(cx.err(
            ErrorType::TypeInvalid,
            path,
            BadValue::Str(s.to_string()),
            format!("{path} in body must be of type {format}: {}", go_quote(s)),
        ))
    }

    /// go-openapi's `numberValidator`: range of the declared type, multipleOf,
    /// minimum, maximum.
    fn check_number(&self, v: &Value, path: &str, cx: &Ctx<'_>, errs: &mut Vec<FieldError>) {
        let single = if self.types.len() == 1 {
            self.types[0].as_str()
        } else {
            ""
        };
        let is_int = v.is_i64();
        let data = v.as_f64().unwrap_or(0.0);
        // IsValueValidAgainstRange: an integer schema needs an integral value (formats
        // are stripped from CRD schemas, so int64 is the only range).
        let fits = |x: f64| single != "integer" || (x.fract() == 0.0 && x.abs() < 9.3e18);
        let range_err = |what: &str| {
            cx.plain(format!(
                "{what} value must be of type integer (default format) in {path}"
            ))
        };
        if !is_int && !fits(data) {
            errs.push(range_err("Checked"));
        }
        let mut multiple = Vec::new();
        if let Some(factor) = self.multiple_of {
            let native = fits(factor);
            if !native {
                multiple.push(range_err("MultipleOf"));
            }
            let bad = if factor <= 0.0 {
                Some(format!(
                    "factor MultipleOf declared for {path} must be positive: {}",
                    go_float(factor)
                ))
            } else if is_int && native {
                let (d, f) = (v.as_i64().unwrap_or(0), factor as i64);
                (f != 0 && d % f != 0)
                    .then(|| format!("{path} in body should be a multiple of {f}"))
            } else {
                let m = if factor < 1.0 {
                    1.0 / factor * data
                } else {
                    data / factor
                };
                (m.fract() != 0.0).then(|| {
                    format!(
                        "{path} in body should be a multiple of {}",
                        go_float(factor)
                    )
                })
            };
            if let Some(msg) = bad {
                multiple.push(cx.err(ErrorType::Invalid, path, BadValue::of(v), msg));
            }
        }
        let bound = |limit: f64, exclusive: bool, lower: bool, out: &mut Vec<FieldError>| {
            let native = fits(limit);
            if !native {
                out.push(range_err(if lower {
                    "Minimum boundary"
                } else {
                    "Maximum boundary"
                }));
            }
            let (fails, shown) = if is_int && native {
                let (d, l) = (v.as_i64().unwrap_or(0), limit as i64);
                let fails = match (lower, exclusive) {
                    (true, false) => d < l,
                    (true, true) => d <= l,
                    (false, false) => d > l,
                    (false, true) => d >= l,
                };
                (fails, l.to_string())
            } else {
                let fails = match (lower, exclusive) {
                    (true, false) => data < limit,
                    (true, true) => data <= limit,
                    (false, false) => data > limit,
                    (false, true) => data >= limit,
                };
                (fails, go_float(limit))
            };
            if fails {
                let rel = match (lower, exclusive) {
                    (true, false) => "greater than or equal to",
                    (true, true) => "greater than",
                    (false, false) => "less than or equal to",
                    (false, true) => "less than",
                };
                out.push(cx.err(
                    ErrorType::Invalid,
                    path,
                    BadValue::of(v),
                    format!("{path} in body should be {rel} {shown}"),
                ));
            }
        };
        let mut min_errs = Vec::new();
        let mut max_errs = Vec::new();
        if let Some(min) = self.minimum {
            bound(min, self.exclusive_minimum, true, &mut min_errs);
        }
        if let Some(max) = self.maximum {
            bound(max, self.exclusive_maximum, false, &mut max_errs);
        }
        errs.extend(multiple);
        errs.extend(min_errs);
        errs.extend(max_errs);
    }

    /// go-openapi's `schemaSliceValidator`: items first, then minItems, maxItems, uniqueItems.
    fn check_array(
        &self,
        items: &[Value],
        old: Option<&Value>,
        path: &str,
        cx: &Ctx<'_>,
        errs: &mut Vec<FieldError>,
    ) {
        if let Some(item) = &self.items {
            let old_items = old.and_then(Value::as_array);
            for (i, x) in items.iter().enumerate() {
                let o = old_items.and_then(|olds| self.correlate_item(x, olds));
                errs.extend(item.validate(x, o, &format!("{path}[{i}]"), cx));
            }
        }
        let size = items.len() as i64;
        if let Some(min) = self.min_items
            && size < min
        {
            errs.push(cx.err(
                ErrorType::Invalid,
                path,
                BadValue::Json(Value::from(size)),
                format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = self.max_items
            && size > max
        {
            errs.push(too_many(cx, path, size, max));
        }
        if self.unique_items
            && items
                .iter()
                .enumerate()
                .any(|(i, x)| items[..i].contains(x))
        {
            errs.push(cx.err(
                ErrorType::Invalid,
                path,
                BadValue::Str(String::new()),
                format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }

    /// go-openapi's `basicCommonValidator` (enum), with Go's value conversions.
    fn check_enum(&self, v: &Value, path: &str, cx: &Ctx<'_>, errs: &mut Vec<FieldError>) {
        let Some(values) = &self.enum_values else {
            return;
        };
        if values.is_empty() || values.iter().any(|e| enum_matches(v, e)) {
            return;
        }
        let detail = format!(
            "supported values: {}",
            values
                .iter()
                .map(|e| match e {
                    Value::String(s) => go_quote(s),
                    other => go_quote(&serde_json::to_string(other).unwrap_or_default()),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        errs.push(cx.err(ErrorType::NotSupported, path, BadValue::of(v), detail));
    }

    /// go-openapi's `objectValidator`: min/maxProperties, additionalProperties,
    /// properties, then required.
    fn check_object(
        &self,
        m: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        cx: &Ctx<'_>,
        errs: &mut Vec<FieldError>,
    ) {
        let n = m.len() as i64;
        if let Some(min) = self.min_properties
            && n < min
        {
            errs.push(cx.err(
                ErrorType::Invalid,
                path,
                BadValue::Json(Value::from(n)),
                format!("{path} in body should have at least {min} properties"),
            ));
        }
        if let Some(max) = self.max_properties
            && n > max
        {
            errs.push(too_many(cx, path, n, max));
        }
        let old_map = old.and_then(Value::as_object);
        // The apiserver never ratchets apiVersion and kind at the root.
        let old_of = |k: &str| {
            if path.is_empty() && (k == "kind" || k == "apiVersion") {
                None
            } else {
                old_map.and_then(|o| o.get(k))
            }
        };
        if let Additional::Schema(ap) = &self.additional {
            for (k, x) in m.iter().filter(|(k, _)| !self.properties.contains_key(*k)) {
                // go-openapi joins additional keys with "." even at the root.
                errs.extend(ap.validate(x, old_of(k), &format!("{path}.{k}"), cx));
            }
        }
        for (k, s) in &self.properties {
            if let Some(x) = m.get(k) {
                errs.extend(s.validate(x, old_of(k), &child_path(path, k), cx));
            }
        }
        for k in &self.required {
            if !m.contains_key(k) {
                errs.push(cx.err(
                    ErrorType::Required,
                    &format!("{path}.{k}"),
                    BadValue::Str(String::new()),
                    String::new(),
                ));
            }
        }
    }

    /// `x-kubernetes-list-type` invariants (`structurallisttype.ValidateListSetsAndMaps`),
    /// with field paths in `field.Path` form (`a.b[0]`, `labels[key]`).
    fn list_errors(&self, v: &Value, field: &str, errs: &mut Vec<FieldError>) {
        match v {
            Value::Object(m) => {
                if let Additional::Schema(ap) = &self.additional {
                    for (k, x) in m {
                        ap.list_errors(x, &format!("{field}[{k}]"), errs);
                    }
                }
                for (k, x) in m {
                    if let Some(s) = self.properties.get(k) {
                        let f = if field.is_empty() {
                            k.clone()
                        } else {
                            format!("{field}.{k}")
                        };
                        s.list_errors(x, &f, errs);
                    }
                }
            }
            Value::Array(items) => {
                let dup = |i: usize, value: Value, errs: &mut Vec<FieldError>| {
                    errs.push(FieldError {
                        ty: ErrorType::Duplicate,
                        field: format!("{field}[{i}]"),
                        value: BadValue::of(&value),
                        detail: String::new(),
                    });
                };
                match &self.list {
                    ListKind::Set => {
                        for i in second_occurrences(items) {
                            dup(i, items[i].clone(), errs);
                        }
                    }
                    ListKind::Map(keys) => {
                        if let Some((i, x)) = items
                            .iter()
                            .enumerate()
                            .find(|(_, x)| !x.is_object() && !x.is_null())
                        {
                            errs.push(FieldError {
                                ty: ErrorType::Invalid,
                                field: format!("{field}[{i}]"),
                                value: BadValue::of(x),
                                detail: "must be an object for an array of list-type map".into(),
                            });
                        } else {
                            let key_values: Vec<Value> = items
                                .iter()
                                .map(|x| {
                                    let mut key = Map::new();
                                    for k in keys {
                                        if let Some(kv) = x.get(k) {
                                            key.insert(k.clone(), kv.clone());
                                        }
                                    }
                                    Value::Object(key)
                                })
                                .collect();
                            for i in second_occurrences(&key_values) {
                                dup(i, key_values[i].clone(), errs);
                            }
                        }
                    }
                    ListKind::Atomic => {}
                }
                if let Some(item) = &self.items {
                    for (i, x) in items.iter().enumerate() {
                        item.list_errors(x, &format!("{field}[{i}]"), errs);
                    }
                }
            }
            _ => {}
        }
    }

    /// Drops `null`s of non-nullable fields without a default
    /// (`PruneNonNullableNullsWithoutDefaults`); nulls in arrays stay and are validated.
    fn prune_nulls(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|k, x| {
                    !(x.is_null() && self.child(k).is_some_and(|s| !s.nullable && !s.has_default))
                });
                for (k, x) in m.iter_mut() {
                    if let Some(s) = self.child(k) {
                        s.prune_nulls(x);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for x in items {
                        item.prune_nulls(x);
                    }
                }
            }
            _ => {}
        }
    }
}

fn too_many(cx: &Ctx<'_>, path: &str, actual: i64, max: i64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    cx.err(
        ErrorType::TooMany,
        path,
        BadValue::Json(Value::from(actual)),
        format!("must have at most {max} {unit}"),
    )
}

/// Indices of the second appearance of each repeated value (`validateListSet`).
fn second_occurrences(items: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        if items[..i].iter().filter(|y| *y == x).count() == 1 {
            out.push(i);
        }
    }
    out
}

/// go-openapi's enum comparison: equal after converting the value to the enum
/// value's Go type where Go can (numbers truncate to integers, integers to runes).
fn enum_matches(v: &Value, e: &Value) -> bool {
    match (v, e) {
        (Value::Number(a), Value::Number(b)) => match (b.as_i64(), a.as_i64()) {
            (Some(b), Some(a)) => a == b,
            (Some(b), None) => a.as_f64().is_some_and(|f| f.trunc() as i64 == b),
            (None, _) => a.as_f64() == b.as_f64(),
        },
        (Value::Number(a), Value::String(s)) => a
            .as_i64()
            .and_then(|i| u32::try_from(i).ok())
            .and_then(char::from_u32)
            .is_some_and(|c| s.chars().eq(std::iter::once(c))),
        (a, b) => a == b,
    }
}

/// The strfmt checks of the formats CRDs keep (name without dashes).
fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s, None),
        "uuid3" => is_uuid(s, Some('3')),
        "uuid4" => is_uuid(s, Some('4')),
        "uuid5" => is_uuid(s, Some('5')),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<std::net::IpAddr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "hostname" => is_hostname(s),
        "email" => is_email(s),
        "uri" => is_uri(s),
        "duration" => is_duration(s),
        // password, isbn, creditcard, ssn, colors, bsonobjectid: accepted as any string.
        _ => true,
    }
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// RFC 3339 full-date, as Go's `time.Parse("2006-01-02")` accepts it.
fn is_date(s: &str) -> bool {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
        && s.len() == 10
        && s.as_bytes().get(4) == Some(&b'-')
}

/// strfmt `IsDateTime`: a full date, `t`, and `hh:mm:ss[.frac](z|±hh:mm)`.
fn is_date_time(s: &str) -> bool {
    // Everything the format allows is ASCII; checking first keeps the byte slicing
    // below on character boundaries.
    if s.len() < 4 || !s.is_ascii() {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (hh, mm, ss) = (&time[0..2], &time[3..5], &time[6..8]);
    if !(digits(hh) && digits(mm) && digits(ss)) {
        return false;
    }
    let mut rest = &time[8..];
    if rest.len() > 1 && !rest.starts_with(['z', '+', '-']) {
        // `(.[0-9]+)?`: any one character followed by digits.
        let frac_end = rest[1..]
            .find(|c: char| !c.is_ascii_digit())
            .map(|i| i + 1)
            .unwrap_or(rest.len());
        if frac_end < 2 {
            return false;
        }
        rest = &rest[frac_end..];
    }
    let zone_ok = rest == "z"
        || (rest.len() == 6
            && rest.starts_with(['+', '-'])
            && digits(&rest[1..3])
            && &rest[3..4] == ":"
            && digits(&rest[4..6]));
    zone_ok && hh <= "23" && mm <= "59" && ss <= "59"
}

/// govalidator's base64 pattern: groups of four, optional `=` padding, not empty.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let ok = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    pad <= 2 && b[..b.len() - pad].iter().all(|c| ok(*c))
}

fn is_uuid(s: &str, version: Option<char>) -> bool {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    let dashed = s.len() == 36;
    if dashed
        && !s
            .char_indices()
            .all(|(i, c)| (c == '-') == matches!(i, 8 | 13 | 18 | 23))
    {
        return false;
    }
    if !(dashed || s.len() == 32) || hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit())
    {
        return false;
    }
    match version {
        None => true,
        Some(v) => {
            let variant = hex.as_bytes()[16].to_ascii_lowercase();
            hex.as_bytes()[12] as char == v
                && (v == '3' || matches!(variant, b'8' | b'9' | b'a' | b'b'))
        }
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_mac(s: &str) -> bool {
    let groups: Vec<&str> = s.split([':', '-']).collect();
    matches!(groups.len(), 6 | 8 | 20)
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_hostname(s: &str) -> bool {
    s.len() <= 255
        && !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn is_email(s: &str) -> bool {
    s.split_once('@')
        .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'))
}

fn is_uri(s: &str) -> bool {
    s.starts_with('/')
        || s.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
}

/// Go `time.ParseDuration` style (`1h30m`, `10s`, `1.5ms`).
fn is_duration(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    let mut rest = s;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return false;
        }
        rest = &rest[num_end..];
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .find(|u| rest.starts_with(**u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
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
