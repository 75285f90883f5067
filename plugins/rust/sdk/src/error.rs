//! The error a plugin returns from `handle`, and helpers to build it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A failed `handle` call.
///
/// `retry: true` asks the host to retry the event with backoff (a transient problem, e.g.
/// an object the plugin needs is not in the cache yet). `retry: false` drops the event:
/// use it for malformed objects or invalid settings, where retrying cannot help.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandleError {
    /// What went wrong, for the host's log and the Kubernetes Event on the object.
    pub message: String,
    /// Whether the host should retry the event.
    pub retry: bool,
}

impl HandleError {
    /// A transient error: the host retries the event with backoff.
    pub fn retry(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry: true,
        }
    }

    /// A permanent error: the host logs it and drops the event.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry: false,
        }
    }
}

impl fmt::Display for HandleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.retry {
            f.write_str(" (will retry)")?;
        }
        Ok(())
    }
}

impl std::error::Error for HandleError {}

/// `Result` with [`HandleError`] as the default error.
pub type Result<T, E = HandleError> = std::result::Result<T, E>;

/// Turns any error (or a missing value) into a [`HandleError`] with some context.
///
/// ```
/// use kubewasm_sdk::{Context, Result};
///
/// fn members(spec: &serde_json::Value) -> Result<u64> {
///     spec.get("members").and_then(|m| m.as_u64()).permanent("spec.members must be a number")
/// }
/// assert!(members(&serde_json::json!({"members": "three"})).is_err());
/// ```
pub trait Context<T> {
    /// A permanent (`retry: false`) error: `"<context>: <cause>"`.
    fn permanent(self, context: &str) -> Result<T>;
    /// A transient (`retry: true`) error: `"<context>: <cause>"`.
    fn retryable(self, context: &str) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn permanent(self, context: &str) -> Result<T> {
        self.map_err(|e| HandleError::permanent(format!("{context}: {e}")))
    }

    fn retryable(self, context: &str) -> Result<T> {
        self.map_err(|e| HandleError::retry(format!("{context}: {e}")))
    }
}

impl<T> Context<T> for Option<T> {
    fn permanent(self, context: &str) -> Result<T> {
        self.ok_or_else(|| HandleError::permanent(context))
    }

    fn retryable(self, context: &str) -> Result<T> {
        self.ok_or_else(|| HandleError::retry(context))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_on_results_and_options() {
        let r: std::result::Result<(), &str> = Err("boom");
        assert_eq!(
            r.permanent("decoding"),
            Err(HandleError::permanent("decoding: boom"))
        );
        let o: Option<u8> = None;
        assert_eq!(o.retryable("missing"), Err(HandleError::retry("missing")));
        assert_eq!(Some(3).permanent("x"), Ok(3));
    }

    #[test]
    fn display_mentions_retry() {
        assert_eq!(HandleError::retry("x").to_string(), "x (will retry)");
        assert_eq!(HandleError::permanent("x").to_string(), "x");
    }
}
