//! The crate's error type, classified by what went wrong rather than by message text.

use std::path::PathBuf;

/// Everything that can go wrong in the host. Variants name the plugin and object
/// involved where there is one, so a log line built from the error is actionable.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A plugin file could not be read.
    #[error("plugin {path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A plugin file is not a WebAssembly component.
    #[error("plugin {path}: not a WebAssembly component: {reason}")]
    NotWasm { path: PathBuf, reason: String },
    /// The component does not implement the `kubewasm:plugin/plugin` world.
    #[error("plugin {path}: does not implement the kubewasm:plugin@0.1.0 world: {reason}")]
    World { path: PathBuf, reason: String },
    /// The settings file beside a plugin is unreadable or not YAML/JSON.
    #[error("plugin {path}: bad settings file {settings}: {reason}")]
    Settings {
        path: PathBuf,
        settings: PathBuf,
        reason: String,
    },
    /// `describe` failed or returned a manifest the host cannot accept.
    #[error("plugin {path}: manifest rejected: {reason}")]
    Manifest { path: PathBuf, reason: String },
    /// Two plugin files declare the same plugin name.
    #[error("plugin {path}: name {name:?} is already used by {other}")]
    DuplicateName {
        path: PathBuf,
        name: String,
        other: PathBuf,
    },
    /// A call into a plugin failed: trap, deadline, memory cap, or the plugin's own error.
    #[error("plugin {plugin}: {kind}")]
    Call { plugin: String, kind: CallError },
    /// The plugin returned intents that fail validation; none of them is applied.
    #[error("plugin {plugin}: invalid intent #{index}: {reason}")]
    InvalidIntent {
        plugin: String,
        index: usize,
        reason: String,
    },
    /// An intent falls outside the plugin's grants; none of the call's intents is applied.
    #[error("plugin {plugin}: intent #{index} refused: {reason}")]
    Refused {
        plugin: String,
        index: usize,
        reason: String,
    },
    /// The plugin is quarantined after repeated failures; the event waits.
    #[error(
        "plugin {plugin}: quarantined for {remaining:?} more after repeated failures (last: {reason})"
    )]
    Quarantined {
        plugin: String,
        reason: String,
        remaining: std::time::Duration,
    },
    /// This replica lost leadership while handling an event; the leader will handle it.
    #[error("plugin {plugin}: not the leader any more; writes stopped")]
    NotLeader { plugin: String },
    /// A kind or resource is not served by the API server (yet).
    #[error("{what} is not served by the API server")]
    UnknownResource { what: String },
    /// The API server answered with an error status.
    #[error("{verb} {target}: {status} {reason}: {message}")]
    Api {
        verb: &'static str,
        target: String,
        status: u16,
        reason: String,
        message: String,
    },
    /// Talking to the API server failed below the HTTP status level.
    #[error("{context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    /// Reading or writing a local file failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The WebAssembly engine could not be set up.
    #[error("wasm engine: {0}")]
    Engine(String),
    /// The in-cluster configuration (service-account files, service env vars) is unusable.
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    /// Leader election cannot run as configured.
    #[error("leader election on lease {lease}: {reason}")]
    LeaderElection { lease: String, reason: String },
}

/// Why a plugin call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("call exceeded its deadline of {0:?}")]
    Deadline(std::time::Duration),
    /// The plugin tried to grow its memory past the cap.
    #[error("memory limit of {0} bytes exceeded")]
    Memory(usize),
    /// The plugin trapped (panic, unreachable, out-of-bounds access, ...).
    #[error("trapped: {0}")]
    Trap(String),
    /// The plugin returned an error from `handle`.
    #[error("returned error: {message}")]
    Plugin { message: String, retry: bool },
    /// The plugin returned more or larger intents than allowed.
    #[error("{0}")]
    Limit(String),
}

impl CallError {
    /// Short cause for metrics: deadline, memory, trap, limit, plugin.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Deadline(_) => "deadline",
            CallError::Memory(_) => "memory",
            CallError::Trap(_) => "trap",
            CallError::Plugin { .. } => "plugin",
            CallError::Limit(_) => "limit",
        }
    }

    /// Whether the sandbox stopped the call (as opposed to the plugin answering an error).
    pub fn is_sandbox_failure(&self) -> bool {
        !matches!(self, CallError::Plugin { .. })
    }
}

impl Error {
    /// Short cause for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Call { kind, .. } => kind.kind(),
            Error::InvalidIntent { .. } => "invalid-intent",
            Error::Refused { .. } => "refused",
            Error::Quarantined { .. } => "quarantined",
            Error::Api { status: 409, .. } => "conflict",
            Error::Api { .. } | Error::Kube { .. } => "api",
            _ => "other",
        }
    }

    /// Whether retrying the same event later can succeed.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            Error::Call {
                kind: CallError::Plugin { retry: false, .. },
                ..
            }
        )
    }

    /// The HTTP status when the error came from the API server.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
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
            },
            other => Error::Kube {
                context: format!("{verb} {target}"),
                source: other,
            },
        }
    }
}
