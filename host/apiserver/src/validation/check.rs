//! A value checked against a compiled [`Node`] in go-openapi's order (type, string,
//! format, number, array, enum, object), with go-openapi's messages; the
//! `x-kubernetes-list-type` checks, ratcheting of unchanged values, and the pruning of
//! non-nullable nulls.

use super::errors::{BadValue, ErrorType, FieldError, go_float, go_quote};
use super::formats::format_ok;
use super::{Additional, Ctx, Node};
use crate::schema::ListKind;
use serde_json::{Map, Value};

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

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Node {
    /// Validates `v` (with ratcheting against `old` when given) at go-openapi path `path`.
    pub(super) fn validate(
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
    pub(super) fn list_errors(&self, v: &Value, field: &str, errs: &mut Vec<FieldError>) {
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
    pub(super) fn prune_nulls(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|k, x| {
                    !(x.is_null()
                        && self
                            .child(k)
                            .is_some_and(|s| !s.nullable && s.default.is_none()))
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

impl Node {
    /// See [`super::Validator::default`].
    pub(super) fn default(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, child) in &self.properties {
                    let Some(d) = &child.default else {
                        continue;
                    };
                    let missing = match m.get(k) {
                        None => true,
                        Some(x) => x.is_null() && !child.nullable,
                    };
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, x) in m.iter_mut() {
                    if let Some(s) = self.child(k) {
                        s.default(x);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for x in items {
                        item.default(x);
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
