//! Access reviews, as kube-apiserver answers them (nothing is stored; the review comes
//! back created, 201):
//!
//! - `authorization.k8s.io/v1` SelfSubjectAccessReviews: whether the caller (after
//!   impersonation) may do what `spec.resourceAttributes` or `spec.nonResourceAttributes`
//!   say: `status.allowed` and, when allowed by a binding, `status.reason`. Every
//!   authenticated user may ask (kube-apiserver's `system:basic-user`).
//! - `authorization.k8s.io/v1` SubjectAccessReviews: the same question for the user and
//!   groups of `spec.user` and `spec.groups`, judged by the RBAC objects stored (for a
//!   ServiceAccount's user, its groups as the caller gives them). Only a caller allowed
//!   `create` on `subjectaccessreviews.authorization.k8s.io` may ask (403 otherwise).
//! - `authentication.k8s.io/v1` SelfSubjectReviews: who the caller is
//!   (`status.userInfo`).
//! - `authentication.k8s.io/v1` TokenReviews: who a bearer token authenticates as, for
//!   the tokens this server knows ([`crate::Config`]'s admin token and users; any other:
//!   `status.authenticated: false`). With RBAC on, only a caller allowed `create` on
//!   `tokenreviews.authentication.k8s.io` may ask (403 otherwise), as kube-apiserver.
//!
//! Without RBAC every caller is the admin, so every review is allowed.

use serde_json::{Value, json};

use crate::error::{ApiResult, StatusError};
use crate::rbac::{self, Attributes, UserInfo};
use crate::store::Store;

const GROUP_VERSION: &str = "authorization.k8s.io/v1";
const KIND: &str = "SelfSubjectAccessReview";
const SUBJECT_KIND: &str = "SubjectAccessReview";

fn invalid(kind: &str, field: &str, value: &Value, why: &str) -> StatusError {
    StatusError::new(
        422,
        "Invalid",
        format!(
            "{kind}.authorization.k8s.io \"\" is invalid: {field}: Invalid value: {value}: {why}"
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
    review: Value,
) -> ApiResult<Value> {
    answer(store, KIND, user, review)
}

/// Answer the SubjectAccessReview `review` asked by `caller` (None: RBAC off): for the
/// user and groups it names, if the caller may create SubjectAccessReviews.
pub(crate) fn subject_access_review(
    store: &Store,
    caller: Option<&UserInfo>,
    review: Value,
) -> ApiResult<Value> {
    if let Some(c) = caller {
        let a = Attributes {
            verb: "create".into(),
            group: "authorization.k8s.io".into(),
            resource: "subjectaccessreviews".into(),
            subresource: None,
            namespace: None,
            name: None,
        };
        if !rbac::allowed(store, c, &a) {
            return Err(rbac::forbidden(c, &a));
        }
    }
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let name = text(&spec, "user");
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            SUBJECT_KIND,
            "spec.user",
            &json!(""),
            "at least one of user or group must be specified",
        ));
    }
    // Judged as exactly the user and groups named (kube-apiserver adds none).
    let subject = UserInfo { name, groups };
    match caller {
        None => answer(store, SUBJECT_KIND, None, review),
        Some(_) => answer(store, SUBJECT_KIND, Some(&subject), review),
    }
}

/// Answer the TokenReview `review` asked by `caller` (None: RBAC off): whom its
/// `spec.token` authenticates as, by `lookup` (the server's own authenticator).
pub(crate) fn token_review(
    store: &Store,
    caller: Option<&UserInfo>,
    lookup: impl Fn(&str) -> Option<UserInfo>,
    mut review: Value,
) -> ApiResult<Value> {
    if let Some(c) = caller {
        let a = Attributes {
            verb: "create".into(),
            group: "authentication.k8s.io".into(),
            resource: "tokenreviews".into(),
            subresource: None,
            namespace: None,
            name: None,
        };
        if !rbac::allowed(store, c, &a) {
            return Err(rbac::forbidden(c, &a));
        }
    }
    let Some(obj) = review.as_object_mut() else {
        return Err(StatusError::bad_request(
            "error decoding request body: not a JSON object",
        ));
    };
    for (key, want) in [
        ("apiVersion", "authentication.k8s.io/v1"),
        ("kind", "TokenReview"),
    ] {
        let got = obj.get(key).and_then(Value::as_str).unwrap_or_default();
        if !got.is_empty() && got != want {
            return Err(StatusError::bad_request(format!(
                "the body of the request was in an unknown format: {key} {got:?}, want {want:?}"
            )));
        }
    }
    let token = obj
        .get("spec")
        .and_then(|s| s.get("token"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    // kube-apiserver's words for an empty token.
    if token.is_empty() {
        return Err(StatusError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let status = match lookup(&token) {
        Some(u) => json!({
            "authenticated": true,
            "user": {"username": u.name, "groups": u.groups},
        }),
        None => json!({"authenticated": false, "user": {}}),
    };
    obj.insert("apiVersion".into(), json!("authentication.k8s.io/v1"));
    obj.insert("kind".into(), json!("TokenReview"));
    obj.insert("metadata".into(), json!({"creationTimestamp": null}));
    obj.insert("status".into(), status);
    Ok(review)
}

/// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`: who the caller is.
pub(crate) fn self_subject_review(user: Option<&UserInfo>) -> Value {
    let admin = UserInfo::new("kubewasm:admin", &["system:masters"]);
    let u = user.unwrap_or(&admin);
    json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": {"username": u.name, "groups": u.groups}},
    })
}

/// Answer a review of kind `kind` for `user` (None: everyone is the admin).
fn answer(
    store: &Store,
    kind: &str,
    user: Option<&UserInfo>,
    mut review: Value,
) -> ApiResult<Value> {
    if !review.is_object() {
        return Err(StatusError::bad_request(
            "error decoding request body: not a JSON object",
        ));
    }
    for (key, want) in [("apiVersion", GROUP_VERSION), ("kind", kind)] {
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
                kind,
                "spec.nonResourceAttributes",
                n,
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid(
                kind,
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
        obj.insert("kind".into(), json!(kind));
        obj.insert("metadata".into(), json!({"creationTimestamp": null}));
        obj.insert("status".into(), status);
    }
    Ok(review)
}
