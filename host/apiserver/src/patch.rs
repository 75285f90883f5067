//! Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic
//! merge patch (built-ins only, applied as a merge patch) and apply patches.

use crate::error::{ApiResult, StatusError};
use serde_json::Value;

/// The patch types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

const ACCEPTED_CR: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];
const ACCEPTED_BUILTIN: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// The patch type of a Content-Type; 415 when unsupported (strategic merge on custom resources).
pub(crate) fn patch_type(content_type: &str, builtin: bool) -> ApiResult<PatchType> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    let accepted = if builtin {
        ACCEPTED_BUILTIN
    } else {
        ACCEPTED_CR
    };
    match media {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" if builtin => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        _ => Err(StatusError::unsupported_media_type(media, accepted)),
    }
}

/// Parses a JSON or YAML body into a JSON value.
pub(crate) fn parse_body(body: &[u8], yaml: bool) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(StatusError::bad_request("the request body is empty"));
    }
    match serde_json::from_slice(body) {
        Ok(v) => Ok(v),
        Err(e) if !yaml => Err(StatusError::bad_request(format!(
            "error decoding request body: {e}"
        ))),
        Err(_) => serde_yaml_ng::from_slice(body)
            .map_err(|e| StatusError::bad_request(format!("error decoding YAML: {e}"))),
    }
}

/// Applies a merge or JSON patch to `current`.
pub(crate) fn apply_patch(kind: PatchType, current: &Value, body: &[u8]) -> ApiResult<Value> {
    let mut out = current.clone();
    match kind {
        PatchType::Merge | PatchType::Strategic => {
            let p = parse_body(body, false)?;
            if !p.is_object() {
                return Err(StatusError::bad_request(
                    "a merge patch must be a JSON object",
                ));
            }
            json_patch::merge(&mut out, &p);
        }
        PatchType::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| StatusError::bad_request(format!("error decoding json patch: {e}")))?;
            json_patch::patch(&mut out, &p).map_err(|e| {
                StatusError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        PatchType::Apply => {
            return Err(StatusError::internal("apply patches are not applied here"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_and_json_patch() {
        let cur = json!({"a":1,"b":{"c":2}});
        let m = apply_patch(PatchType::Merge, &cur, br#"{"b":{"c":null,"d":3}}"#).expect("merge");
        assert_eq!(m, json!({"a":1,"b":{"d":3}}));
        let j = apply_patch(
            PatchType::Json,
            &cur,
            br#"[{"op":"replace","path":"/a","value":5}]"#,
        )
        .expect("json");
        assert_eq!(j["a"], json!(5));
        assert_eq!(
            patch_type("application/strategic-merge-patch+json", false).map_err(|e| e.code),
            Err(415)
        );
    }
}
