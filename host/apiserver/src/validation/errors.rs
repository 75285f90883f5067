//! Field errors as kube-apiserver reports them (`field.Error`, gathered into a `422
//! Invalid` Status), with their values printed as Go prints them.

use crate::error::StatusError;
use serde_json::{Number, Value};

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
    pub(super) fn of(v: &Value) -> BadValue {
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
pub(super) fn go_quote(s: &str) -> String {
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
pub(super) fn go_float(f: f64) -> String {
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
