//! The runtime's errors: loading a plugin, and calling one.

use std::path::PathBuf;

/// Why a plugin could not be loaded, or the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A plugin file could not be read.
    #[error("plugin {path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A plugin file was not read: it leads out of the plugin directory, or is too large.
    #[error("plugin {path}: not read: {reason}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: crate::loader::FileRefusal,
    },
    /// A plugin file is not a WebAssembly component.
    #[error("plugin {path}: not a WebAssembly component: {reason}")]
    NotWasm {
        /// The file.
        path: PathBuf,
        /// The header check's or the compiler's message.
        reason: String,
    },
    /// Compiling the component took longer than the compile worker's timeout.
    #[error(
        "plugin {path}: compiling took longer than {limit:?}; the compile worker was stopped and the file is refused until it changes"
    )]
    CompileTimeout {
        /// The file.
        path: PathBuf,
        /// The timeout.
        limit: std::time::Duration,
    },
    /// The component does not implement the `kubewasm:plugin/plugin` world.
    #[error(
        "plugin {path}: does not implement the kubewasm:plugin@0.2.0 world (nor 0.1.0): {reason}"
    )]
    World {
        /// The file.
        path: PathBuf,
        /// The linker's message.
        reason: String,
    },
    /// The settings file beside a plugin is unreadable or not YAML/JSON.
    #[error("plugin {path}: bad settings file {settings}: {reason}")]
    Settings {
        /// The plugin file.
        path: PathBuf,
        /// The settings file.
        settings: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// The plugin's limits (its settings file's `kubewasm` key, or `spec.limits` of its
    /// Plugin object) ask above the operator's ceilings (`--max-plugin-memory-mib`, ...).
    #[error("plugin {path}: limits over the host's ceilings: {reason}")]
    OverCeiling {
        /// The file.
        path: PathBuf,
        /// Which limit, and its ceiling.
        reason: String,
    },
    /// `describe` failed or returned a manifest the host cannot accept.
    #[error("plugin {path}: manifest rejected: {reason}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why (boxed: a manifest error carries a selector error and its text).
        reason: Box<ManifestRejection>,
    },
    /// The manifest asks for more than the operator approved (`spec.permissions` of its
    /// Plugin object): the plugin is refused at load, as `run` refuses it.
    #[error(transparent)]
    NotApproved(#[from] kubewasm_core::grant::NotApproved),
    /// The Plugin object approving the plugin is unusable (malformed, or its name
    /// approved twice): the plugin is refused, as if nothing were approved.
    #[error("plugin {plugin}: not loaded: its approval is unusable: {reason}")]
    ApprovalUnusable {
        /// The plugin.
        plugin: String,
        /// Why.
        reason: String,
    },
    /// The approvals file or directory (`--approvals`) cannot be read.
    #[error("approvals {}: {reason}", .path.display())]
    Approvals {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Reading or writing a local file (the plugin directory, the code cache) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The WebAssembly engine, the code cache's key or the compiler could not be set up or
    /// used.
    #[error("wasm engine: {0}")]
    Engine(#[from] EngineError),
}

/// What went wrong setting up or using the WebAssembly engine (not a plugin's fault).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// wasmtime refused the engine configuration.
    #[error("{0}")]
    Config(#[source] wasmtime::Error),
    /// A host capability could not be added to the linker.
    #[error("linking {what}: {source}")]
    Link {
        /// The capability.
        what: &'static str,
        /// wasmtime's error.
        source: wasmtime::Error,
    },
    /// The epoch ticker thread could not be started.
    #[error("starting epoch ticker: {0}")]
    Ticker(#[source] std::io::Error),
    /// No randomness for a fresh code cache key. (Not a `source`: getrandom's error
    /// implements `std::error::Error` only with its `std` feature.)
    #[error("code cache key: no randomness: {0}")]
    KeyRandomness(getrandom::Error),
    /// The code cache key file is too short or too long.
    #[error(
        "code cache key {}: {len} bytes; a key file holds {} to {} bytes (e.g. `head -c 32 /dev/urandom | base64`)",
        .path.display(), crate::codecache::MIN_KEY_BYTES, crate::codecache::MAX_KEY_FILE_BYTES
    )]
    KeyLength {
        /// The key file.
        path: PathBuf,
        /// The key's length, whitespace trimmed.
        len: usize,
    },
    /// The code cache key file is inside the cache directory.
    #[error(
        "code cache key {} is inside the cache directory {}: anyone who can write entries could write the key",
        .key.display(), .dir.display()
    )]
    KeyInsideCache {
        /// The key file.
        key: PathBuf,
        /// The cache directory.
        dir: PathBuf,
    },
    /// A blocking task (compiling, loading compiled code) panicked or was cancelled.
    #[error("{what}: {source}")]
    Task {
        /// What the task did.
        what: &'static str,
        /// Why it did not finish.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The compile worker's output could not be loaded.
    #[error("loading the compile worker's output: {0:#}")]
    WorkerOutput(#[source] wasmtime::Error),
    /// The compile worker crashed, was killed, or answered something unreadable.
    #[error("compile worker for {}: {reason}", .path.display())]
    Worker {
        /// The plugin file.
        path: PathBuf,
        /// What the worker did.
        reason: String,
    },
}

/// Why a manifest was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ManifestRejection {
    /// The plugin could not be instantiated to ask it.
    #[error("instantiating: {0}")]
    Instantiate(CallError),
    /// `describe` returned its own error.
    #[error("describe returned an error: {0}")]
    Refused(String),
    /// `describe` trapped, ran out of time or memory.
    #[error("describe failed: {0}")]
    Failed(CallError),
    /// The manifest is invalid. (Its message quotes the plugin's strings, each bounded
    /// before it was parsed; the whole is excerpted once more.)
    #[error("{}", crate::plugin::plugin_text(&.0.to_string()))]
    Invalid(#[from] kubewasm_core::manifest::ManifestError),
    /// The manifest names another plugin than the file: the name is the field manager
    /// and the plugin's identity, so `a.wasm` may not speak as `web`.
    #[error("the manifest's name {name:?} must equal the file name {file:?} (without .wasm)")]
    NameMismatch {
        /// What the manifest says.
        name: String,
        /// The file's stem.
        file: String,
    },
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
    Plugin {
        /// The plugin's message.
        message: String,
        /// Whether the plugin asked for a retry.
        retry: bool,
    },
    /// The plugin returned more or larger intents than allowed.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// The call waited its whole limit (`--call-budget-wait`) for its share of the host's
    /// call memory budget, and was not run: other calls held the budget. Not the plugin's
    /// failure (quarantine does not count it); the event is retried with backoff.
    #[error(
        "not run: waited {}ms for {wanted_mib} MiB of the call memory budget \
         ({available_mib} MiB were free when it began to wait; --call-budget-wait)",
        .waited.as_millis()
    )]
    BudgetWait {
        /// How long it waited.
        waited: std::time::Duration,
        /// MiB it waited for (its memory cap).
        wanted_mib: usize,
        /// MiB free when it began to wait.
        available_mib: usize,
    },
}

/// Which output limit a call broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// Too many intents.
    #[error("returned {count} intents, over the limit of {max}")]
    Intents {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The canonical ABI refused what the plugin passed the host: more than one lift may
    /// copy (strings aliasing one buffer), or malformed data. See `lift`.
    #[error(
        "the host refused the data it passed: {detail} (one call may hand the host at most \
         {max} bytes, the plugin's memory cap)"
    )]
    Transfer {
        /// The transfer budget, in bytes.
        max: usize,
        /// What wasmtime reported.
        detail: String,
    },
    /// The intents of one call are too large together: the host parses each into a JSON
    /// tree (several times its text), so their total is held to a quarter of the memory cap,
    /// keeping the host's memory for one call a small multiple of the plugin's.
    #[error(
        "the intents total {total} bytes, over the limit of {max} for one call (a quarter of the memory cap)"
    )]
    CallBytes {
        /// Their total size.
        total: usize,
        /// The limit.
        max: usize,
    },
    /// One intent too large.
    #[error("intent #{index} is {size} bytes, over the limit of {max}")]
    IntentBytes {
        /// Which.
        index: usize,
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
}

impl CallError {
    /// Short cause for metrics: deadline, memory, trap, limit, plugin, budget-wait.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Deadline(_) => "deadline",
            CallError::Memory(_) => "memory",
            CallError::Trap(_) => "trap",
            CallError::Plugin { .. } => "plugin",
            CallError::Limit(_) => "limit",
            CallError::BudgetWait { .. } => "budget-wait",
        }
    }

    /// Whether the sandbox stopped the call (as opposed to the plugin answering an error,
    /// or the call never running for want of budget).
    pub fn is_sandbox_failure(&self) -> bool {
        !matches!(
            self,
            CallError::Plugin { .. } | CallError::BudgetWait { .. }
        )
    }
}
