//! `authorization.k8s.io/v1` SelfSubjectAccessReviews, as kube-apiserver answers them:
//! `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` asks whether the caller
//! (after impersonation) may do what `spec.resourceAttributes` or
//! `spec.nonResourceAttributes` say, and gets the review back, created (201), with
//! `status.allowed` and, when allowed by a binding, `status.reason`. Every authenticated
//! user may ask (kube-apiserver's `system:basic-user`). Nothing is stored. Without RBAC
//! every caller is the admin, so every review is allowed.

use serde_json::{Value, json};

use crate::error::{ApiResult, StatusError};
use crate::rbac::{self, Attributes, UserInfo};
use crate::store::Store;

const GROUP_VERSION: &str = "authorization.k8s.io/v1";
const KIND: &str = "SelfSubjectAccessReview";

fn invalid(field: &str, value: &Value, why: &str) -> StatusError {
    StatusError::new(
        422,
        "Invalid",
        format!(
            "{KIND}.authorization.k8s.io \"\" is invalid: {field}: Invalid value: {value}: {why}"
        ),
    )
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Answer the review `review` for `user` (None: RBAC off, everyone is the admin).
pub(crate) fn self_subject_access_review(
    store: &Store,
    user: Option<&UserInfo>,
    mut review: Value,
) -> ApiResult<Value> {
    if !review.is_object() {
        return Err(StatusError::bad_request(
            "error decoding request body: not a JSON object",
        ));
    }
    for (key, want) in [("apiVersion", GROUP_VERSION), ("kind", KIND)] {
        let got = text(&review, key);
        if !got.is_empty() && got != want {
            return Err(StatusError::bad_request(format!(
                "the body of the request was in an unknown format: {key} {got:?}, want {want:?}"
            )));
        }
    }
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let reason = match (resource, non_resource) {
        (Some(_), Some(n)) => {
            return Err(invalid(
                "spec.nonResourceAttributes",
                n,
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid(
                "spec.resourceAttributes",
                &json!("null"),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        (Some(r), None) => {
            let a = Attributes {
                verb: text(r, "verb"),
                group: text(r, "group"),
                resource: text(r, "resource"),
                subresource: Some(text(r, "subresource")).filter(|s| !s.is_empty()),
                namespace: Some(text(r, "namespace")).filter(|s| !s.is_empty()),
                name: Some(text(r, "name")).filter(|s| !s.is_empty()),
            };
            match user {
                None => Some(String::new()),
                Some(u) => rbac::allowed_by(store, u, &a),
            }
        }
        (None, Some(n)) => match user {
            None => Some(String::new()),
            Some(u) => rbac::non_resource_allowed_by(store, u, &text(n, "verb"), &text(n, "path")),
        },
    };
    let status = match reason {
        Some(reason) if !reason.is_empty() => json!({"allowed": true, "reason": reason}),
        Some(_) => json!({"allowed": true}),
        None => json!({"allowed": false}),
    };
    if let Some(obj) = review.as_object_mut() {
        obj.insert("apiVersion".into(), json!(GROUP_VERSION));
        obj.insert("kind".into(), json!(KIND));
        obj.insert("metadata".into(), json!({"creationTimestamp": null}));
        obj.insert("status".into(), status);
    }
    Ok(review)
}
