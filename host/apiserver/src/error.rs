//! Errors: the crate's [`Error`] for the library API, and [`StatusError`], the
//! Kubernetes `Status` answer an API request fails with.

use serde_json::{Value, json};

/// Errors of the library API (starting the server, writing a kubeconfig).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding or serving the listening socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// Generating the CA or serving certificate failed.
    #[error("certificate generation failed: {0}")]
    Certificate(#[from] rcgen::Error),
    /// Configuring rustls failed.
    #[error("tls configuration failed: {0}")]
    Tls(#[from] rustls::Error),
    /// Serialising the kubeconfig failed.
    #[error("kubeconfig serialisation failed: {0}")]
    Kubeconfig(#[from] serde_yaml_ng::Error),
    /// An in-process write ([`crate::ApiServer::seed`]) was refused, as the API would
    /// refuse it.
    #[error("{message} ({code})")]
    Refused {
        /// The HTTP status code the API would answer.
        code: u16,
        /// The Status message.
        message: String,
    },
}

/// A failed API request, answered as a `meta/v1 Status` object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatusError {
    /// HTTP status code.
    pub(crate) code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, ...).
    pub(crate) reason: String,
    /// Human-readable message.
    pub(crate) message: String,
    /// `details` of the Status, if any.
    pub(crate) details: Option<Value>,
}

/// Result of an API operation.
pub(crate) type ApiResult<T> = std::result::Result<T, StatusError>;

/// `resource` or `resource.group`, as kube-apiserver names a resource in messages.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, plural: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(plural));
    Value::Object(d)
}

impl StatusError {
    /// A bare error with code, reason and message.
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        StatusError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// 404 NotFound for a named object.
    pub(crate) fn not_found(group: &str, plural: &str, name: &str) -> Self {
        StatusError {
            code: 404,
            reason: "NotFound".into(),
            message: format!("{} \"{name}\" not found", qualified(group, plural)),
            details: Some(details(group, plural, name)),
        }
    }

    /// 404 for a path the server does not serve.
    pub(crate) fn no_route() -> Self {
        StatusError {
            code: 404,
            reason: "NotFound".into(),
            message: "the server could not find the requested resource".into(),
            details: Some(
                json!({"causes":[{"reason":"UnexpectedServerResponse","message":"404 page not found"}]}),
            ),
        }
    }

    /// 409 AlreadyExists.
    pub(crate) fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        StatusError {
            code: 409,
            reason: "AlreadyExists".into(),
            message: format!("{} \"{name}\" already exists", qualified(group, plural)),
            details: Some(details(group, plural, name)),
        }
    }

    /// 409 Conflict ("Operation cannot be fulfilled on ...").
    pub(crate) fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        StatusError {
            code: 409,
            reason: "Conflict".into(),
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
            details: Some(details(group, plural, name)),
        }
    }

    /// 409 Conflict for a stale resourceVersion.
    pub(crate) fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes `(reason, field, message)`; the message names the
    /// qualified kind (`Kind.group`) and lists each distinct `field: message` once, in
    /// brackets when there are several (`errors.NewInvalid` with `ToAggregate`).
    pub(crate) fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<(String, String, String)>,
    ) -> Self {
        let mut summary: Vec<String> = Vec::new();
        for (_, field, msg) in &causes {
            let line = format!("{field}: {msg}");
            if !summary.contains(&line) {
                summary.push(line);
            }
        }
        let summary = if summary.len() == 1 {
            summary.join("")
        } else {
            format!("[{}]", summary.join(", "))
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = serde_json::Map::new();
        // Go's StatusDetails omits an empty name (options, generateName).
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        d.insert(
            "causes".into(),
            Value::Array(
                causes
                    .iter()
                    .map(|(r, f, m)| json!({"reason": r, "message": m, "field": f}))
                    .collect(),
            ),
        );
        StatusError {
            code: 422,
            reason: "Invalid".into(),
            message: format!("{qualified_kind} \"{name}\" is invalid: {summary}"),
            details: Some(Value::Object(d)),
        }
    }

    /// 400 BadRequest.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 Forbidden.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 405 MethodNotAllowed.
    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 415 UnsupportedMediaType.
    pub(crate) fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
        .with_detail_cause("UnsupportedMediaType", content_type)
    }

    /// 410 Expired (too old resource version / continue token).
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 401 Unauthorized.
    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 500 InternalError.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    fn with_detail_cause(mut self, reason: &str, message: &str) -> Self {
        self.details = Some(json!({"causes":[{"reason": reason, "message": message}]}));
        self
    }

    /// The `Status` object for this error.
    pub(crate) fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(d), Some(obj)) = (&self.details, s.as_object_mut()) {
            obj.insert("details".into(), d.clone());
        }
        s
    }
}
