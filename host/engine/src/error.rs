//! The engine's error type, classified by what went wrong rather than by message text.

use std::path::PathBuf;

use kubewasm_core::admit::Rejection;
use kubewasm_core::kind::ResolveError;
pub use kubewasm_runtime::CallError;

/// Everything that can go wrong in the host. Variants name the plugin and object
/// involved where there is one, so a log line built from the error is actionable.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A plugin file could not be loaded (read, compiled, linked or described).
    #[error(transparent)]
    Load(#[from] kubewasm_runtime::Error),
    /// Two plugin sources (files, Plugin objects) declare the same plugin name.
    #[error("plugin {origin}: name {name:?} is already used by {other}")]
    DuplicateName {
        /// The source refused.
        origin: String,
        /// The name both declare.
        name: String,
        /// The source that has it.
        other: String,
    },
    /// A call into a plugin failed: trap, deadline, memory cap, or the plugin's own error.
    #[error("plugin {plugin}: {kind}")]
    Call {
        /// The plugin.
        plugin: String,
        /// What failed.
        kind: CallError,
    },
    /// A call failed after one of its reads was refused for a reason that passes (a kind
    /// not served or not synced yet): retried with backoff, whatever the plugin said.
    #[error("plugin {plugin}: {kind} (after its read failed: {read})")]
    ReadUnavailable {
        /// The plugin.
        plugin: String,
        /// How the call failed.
        kind: CallError,
        /// The read refused, as the plugin was told.
        read: Box<kubewasm_runtime::ReadError>,
    },
    /// The plugin returned intents that fail validation; none of them is applied.
    /// Spelled as [`Rejection`] spells it, after the plugin's name.
    #[error("plugin {plugin}: {rejection}")]
    InvalidIntent {
        /// The plugin.
        plugin: String,
        /// Which intent, and why (boxed: keeps the error small on every `Result` path).
        rejection: Box<Rejection>,
    },
    /// An intent falls outside the plugin's grants ([`Rejection::is_refusal`]: no grant
    /// allows it, its force, or the delete its owner reference amounts to); none of the
    /// call's intents is applied.
    #[error("plugin {plugin}: {rejection}")]
    Refused {
        /// The plugin.
        plugin: String,
        /// Which intent, and why.
        rejection: Box<Rejection>,
    },
    /// A write of a call failed after others of the same call were applied: what was
    /// applied and what was not, in one error (reported once, like any failed event).
    #[error(
        "plugin {plugin}: {trigger}: {applied} of {total} intents applied; intent #{applied} ({failed}) failed and the {} after it were not tried: {source}",
        .total.saturating_sub(*.applied + 1)
    )]
    Partial {
        /// The plugin.
        plugin: String,
        /// The object whose event it was.
        trigger: String,
        /// Intents applied before the failure (they are the call's first `applied`).
        applied: usize,
        /// Intents the call returned.
        total: usize,
        /// The intent that failed (`patch ConfigMap a/b`).
        failed: String,
        /// Why it failed (what the queue retries on).
        source: Box<Error>,
    },
    /// The plugin is quarantined after repeated failures; the event waits.
    #[error(
        "plugin {plugin}: quarantined for {remaining:?} more after repeated failures (last: {reason})"
    )]
    Quarantined {
        /// The plugin.
        plugin: String,
        /// The last failure.
        reason: String,
        /// Time left.
        remaining: std::time::Duration,
    },
    /// This replica lost leadership while handling an event; the leader will handle it.
    #[error("plugin {plugin}: not the leader any more; writes stopped")]
    NotLeader {
        /// The plugin.
        plugin: String,
    },
    /// The plugin's version was unloaded (replaced, removed, or its approval narrowed)
    /// while handling an event: its call was dropped, or its remaining writes were not
    /// sent. Not a failure of the plugin nor of the object: the event is handled again by
    /// the version serving now, if any.
    #[error(
        "plugin {plugin}: version {version} unloaded during the event; its call was dropped and nothing more written"
    )]
    Retired {
        /// The plugin.
        plugin: String,
        /// The version unloaded.
        version: String,
    },
    /// A kind could not be resolved (not served, or discovery failed).
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// The API server answered with an error status.
    #[error("{verb} {target}: {status} {reason}: {message}")]
    Api {
        /// What was being done.
        verb: &'static str,
        /// To what.
        target: String,
        /// HTTP status.
        status: u16,
        /// The Status object's reason.
        reason: String,
        /// The Status object's message.
        message: String,
        /// `details.retryAfterSeconds` (what the `Retry-After` header says), when set.
        retry_after: Option<std::time::Duration>,
        /// A server-side apply conflict (`FieldManagerConflict` causes): another field
        /// manager owns the fields; retrying the same apply cannot succeed.
        field_conflict: bool,
        /// A 422 whose causes name `metadata.uid`: the body's uid is not the object's.
        uid_rejected: bool,
    },
    /// Talking to the API server failed below the HTTP status level.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Reading or writing a local file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The metrics listener's certificate cannot be made or loaded (`--metrics-secure`).
    #[error("{context}: {reason}")]
    Tls {
        /// Which certificate or file.
        context: String,
        /// Why.
        reason: String,
    },
    /// A manifest file (YAML for `kubewasm dev` and the tests) is malformed.
    #[error("{path}: {reason}")]
    Document {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// The in-cluster configuration (service-account files, service env vars) is unusable.
    #[error("in-cluster configuration: {0}")]
    InCluster(#[from] crate::serve::incluster::InClusterError),
    /// Leader election cannot run as configured.
    #[error("leader election on lease {lease}: {reason}")]
    LeaderElection {
        /// The Lease.
        lease: String,
        /// Why.
        reason: String,
    },
    /// A single leader lost its Lease (renewals failed until the renew deadline, or
    /// another replica took it): it stops, and the process exits so a fresh one starts as
    /// a follower (`Host::run` returns it).
    #[error(
        "lost the lease {lease} (not renewed within the renew deadline, or taken by another replica); exiting so the new leader takes over"
    )]
    LostLease {
        /// `namespace/name` of the Lease.
        lease: String,
    },
}

/// How a failed event is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Per-key exponential backoff (transport errors, 5xx, stale reads, sandbox stops).
    Backoff,
    /// After the server's `Retry-After` (429, and 5xx that carry it).
    After(std::time::Duration),
    /// Not retried hot: handled again when the object, its plugin or its settings change,
    /// or on the slow resync (invalid or refused intents, 400, 403, 422, permanent plugin
    /// errors).
    Never,
}

impl std::fmt::Display for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Retry::Backoff => f.write_str("with backoff"),
            Retry::After(d) => write!(f, "after {}s (Retry-After)", d.as_secs_f64()),
            Retry::Never => f.write_str("not until the object, plugin or settings change"),
        }
    }
}

impl Error {
    /// The error of a call whose intents were rejected.
    pub fn rejected(plugin: &str, r: Rejection) -> Self {
        let plugin = plugin.to_string();
        let rejection = Box::new(r);
        if rejection.is_refusal() {
            Error::Refused { plugin, rejection }
        } else {
            Error::InvalidIntent { plugin, rejection }
        }
    }

    /// Short cause for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Call { kind, .. } => kind.kind(),
            Error::ReadUnavailable { .. } => "read-unavailable",
            Error::Partial { source, .. } => source.kind(),
            Error::InvalidIntent { .. } => "invalid-intent",
            Error::Refused { .. } => "refused",
            Error::Quarantined { .. } => "quarantined",
            Error::Api { status: 409, .. } => "conflict",
            Error::Api { .. } | Error::Kube { .. } => "api",
            _ => "other",
        }
    }

    /// How the queue should retry the event that failed with this error.
    ///
    /// Permanent errors (the same input gives the same answer) are not retried hot: the
    /// object is handled again when it changes, its plugin or settings change, or on the
    /// slow resync.
    pub fn retry(&self) -> Retry {
        use kubewasm_core::admit::AdmitError;
        match self {
            Error::Call { kind, .. } => match kind {
                CallError::Plugin { retry: true, .. } => Retry::Backoff,
                CallError::Plugin { retry: false, .. } => Retry::Never,
                // Deterministic output over a limit; a sandbox stop (trap, deadline, memory)
                // may be transient and is what quarantine counts.
                CallError::Limit(_) => Retry::Never,
                CallError::Deadline(_) | CallError::Memory(_) | CallError::Trap(_) => {
                    Retry::Backoff
                }
                // The host's budget was busy: the same call may run once it is not.
                CallError::BudgetWait { .. } => Retry::Backoff,
            },
            // Its read works once the kind is served or synced.
            Error::ReadUnavailable { .. } => Retry::Backoff,
            Error::InvalidIntent { rejection, .. } => match &rejection.error {
                // A kind not served yet (a CRD installed later) or discovery failing.
                AdmitError::Resolve(_) => Retry::Backoff,
                AdmitError::Invalid(_)
                | AdmitError::Bind(_)
                | AdmitError::Refused(_)
                | AdmitError::Body(_)
                | AdmitError::TakesFields(_) => Retry::Never,
            },
            Error::Refused { .. } => Retry::Never,
            Error::Partial { source, .. } => source.retry(),
            Error::Quarantined { .. } => Retry::Backoff,
            // The leader handles it.
            Error::NotLeader { .. } => Retry::Never,
            // The version serving now handles it (the plugin handler hands it on).
            Error::Retired { .. } => Retry::Backoff,
            Error::Resolve(_) => Retry::Backoff,
            Error::Api {
                status,
                retry_after,
                field_conflict,
                ..
            } => match (*status, retry_after) {
                (429, Some(after)) => Retry::After(*after),
                (429, None) => Retry::Backoff,
                (s, Some(after)) if s >= 500 => Retry::After(*after),
                (s, None) if s >= 500 => Retry::Backoff,
                // A stale read or a precondition raced; a field owned by another manager
                // stays owned until that manager lets go.
                (409, _) if !*field_conflict => Retry::Backoff,
                // 400, 403, 404 on a write target, 405, 409 field conflicts, 415, 422, ...
                _ => Retry::Never,
            },
            Error::Kube { .. } => Retry::Backoff,
            Error::Load(_)
            | Error::DuplicateName { .. }
            | Error::Io { .. }
            | Error::Tls { .. }
            | Error::Document { .. }
            | Error::InCluster(_)
            | Error::LeaderElection { .. }
            | Error::LostLease { .. } => Retry::Never,
        }
    }

    /// Whether retrying the same event later can succeed.
    pub fn is_retryable(&self) -> bool {
        self.retry() != Retry::Never
    }

    /// Whether a write to an object as it was (see `Prepared::requires_trigger`) failed
    /// because that object is not there: 404; 409 other than a field conflict (apply with
    /// a uid and no object, or a stale resourceVersion: either way a newer state exists);
    /// 422 on the uid (another object of that name has replaced it).
    pub fn target_missing(&self) -> bool {
        match self {
            Error::Partial { source, .. } => source.target_missing(),
            Error::Api { status: 404, .. }
            | Error::Api {
                uid_rejected: true, ..
            } => true,
            Error::Api {
                status: 409,
                field_conflict,
                ..
            } => !field_conflict,
            _ => false,
        }
    }

    /// The HTTP status when the error came from the API server.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            Error::Partial { source, .. } => source.status(),
            _ => None,
        }
    }

    /// Build an [`Error::Api`] or [`Error::Kube`] from a kube client error.
    pub fn from_kube(verb: &'static str, target: impl Into<String>, err: kube::Error) -> Self {
        let target = target.into();
        match err {
            kube::Error::Api(status) => Error::Api {
                verb,
                target,
                status: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
                retry_after: status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| std::time::Duration::from_secs(u64::from(s))),
                field_conflict: status
                    .details
                    .as_ref()
                    .is_some_and(|d| d.causes.iter().any(|c| c.reason == "FieldManagerConflict")),
                uid_rejected: status.code == 422
                    && status
                        .details
                        .as_ref()
                        .is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid")),
            },
            other => Error::Kube {
                context: format!("{verb} {target}"),
                source: other,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    /// The error for a Status as kube-apiserver sends it.
    fn api(code: u16, causes: &[(&str, &str)]) -> Error {
        let causes: Vec<_> = causes
            .iter()
            .map(|(reason, field)| serde_json::json!({"reason": reason, "field": field}))
            .collect();
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "m",
            "reason": "R", "code": code, "details": {"name": "x", "causes": causes},
        }))
        .expect("a Status");
        Error::from_kube(
            "apply",
            "ConfigMap default/x",
            kube::Error::Api(Box::new(status)),
        )
    }

    #[test]
    fn a_missing_target_is_told_by_status_and_causes() {
        assert!(api(404, &[]).target_missing());
        // Apply with a uid and no object; a stale resourceVersion.
        assert!(api(409, &[]).target_missing());
        // Another manager owns the fields: the object is there.
        assert!(!api(409, &[("FieldManagerConflict", ".data.a")]).target_missing());
        // Another object of that name: its uid is not the body's.
        assert!(api(422, &[("FieldValueInvalid", "metadata.uid")]).target_missing());
        assert!(!api(422, &[("FieldValueInvalid", "spec.replicas")]).target_missing());
        assert!(!api(403, &[]).target_missing());
        assert!(!api(500, &[]).target_missing());
    }
}
