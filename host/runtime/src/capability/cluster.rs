//! `host.get` / `host.list`: read-only access to the cluster as the host caches it, through
//! a [`ClusterView`] already scoped to what the calling plugin may read. The engine lends
//! the view for one call; between calls a pooled instance holds [`NoCluster`].

use std::sync::Arc;

/// Why a cache read was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The plugin neither watches nor declared reading this kind.
    #[error("{0} is not watched or declared in `reads` by this plugin")]
    NotAllowed(String),
    /// The kind is allowed but its cache is not available (resource not served yet).
    #[error("{0} is not cached (is the resource served?)")]
    NotCached(String),
    /// The label selector does not parse.
    #[error("label selector: {0}")]
    Selector(#[from] kubewasm_core::selector::SelectorError),
}

/// Read-only view of the cluster a plugin may use through `host.get`/`host.list`,
/// already scoped to what that plugin may read. Implemented by the watch caches in
/// `run`, and by fixtures in `kubewasm test`.
pub trait ClusterView: Send + Sync {
    /// One object as JSON, or None if absent.
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, ReadError>;

    /// Objects of a kind as JSON.
    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ReadError>;
}

/// A view that refuses every read (while describing a plugin, and between calls).
pub struct NoCluster;

impl ClusterView for NoCluster {
    fn get(&self, v: &str, k: &str, _: Option<&str>, _: &str) -> Result<Option<String>, ReadError> {
        Err(ReadError::NotAllowed(format!("{v}/{k}")))
    }
    fn list(
        &self,
        v: &str,
        k: &str,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ReadError> {
        Err(ReadError::NotAllowed(format!("{v}/{k}")))
    }
}

/// Per-store state of the cluster capability.
pub struct ClusterState {
    plugin: String,
    object: String,
    view: Arc<dyn ClusterView>,
}

impl ClusterState {
    /// Instantiate: no reads allowed until a call lends a view.
    pub fn new(plugin: &str) -> Self {
        ClusterState {
            plugin: plugin.to_string(),
            object: String::new(),
            view: Arc::new(NoCluster),
        }
    }

    /// Start of a call: the view this call may read, and the object it handles.
    pub fn begin_call(&mut self, view: Arc<dyn ClusterView>, object: &str) {
        self.view = view;
        self.object = object.to_string();
    }

    /// End of a call: give the view back (a pooled instance keeps no reference to caches).
    pub fn end_call(&mut self) {
        self.view = Arc::new(NoCluster);
    }

    /// The `get` import.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, String> {
        self.view
            .get(api_version, kind, namespace, name)
            .map_err(|e| self.refused(e))
    }

    /// The `list` import.
    pub fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, String> {
        self.view
            .list(api_version, kind, namespace, label_selector)
            .map_err(|e| self.refused(e))
    }

    /// A refused read is the plugin's to handle, but the operator sees it too.
    fn refused(&self, e: ReadError) -> String {
        tracing::warn!(plugin = %self.plugin, object = %self.object, reason = %e, "read refused");
        e.to_string()
    }
}
