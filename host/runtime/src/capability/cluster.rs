//! `host.get` / `host.list`: read-only access to the cluster as the host caches it, through
//! a [`ClusterView`] already scoped to what the calling plugin may read. The engine lends
//! the view for one call; between calls a pooled instance holds [`NoCluster`].
//!
//! Reads are the plugin's work, so they are bounded like it: a view answers only kinds
//! and namespaces the plugin may read ([`ReadScope`]), one `list` returns at most
//! `MAX_LIST_ITEMS` (5,000) objects, and everything one call reads together is at most the
//! view's [`ClusterView::read_budget`] bytes (the plugin's memory cap: what it reads
//! has to fit in its memory anyway), checked while the answer is built, so a huge cache
//! is never copied whole. A read is synchronous work bounded by the size of one cache,
//! done inside the call's poll, so its time counts against the call's deadline; a `list`
//! runs under `block_in_place`, so the tokio worker's other tasks are not held up.
//!
//! The imports are linked by hand ([`link`]) over the generated ones, which would copy
//! every argument before looking at it: a plugin passing one 8 MiB buffer as all four
//! arguments of `get` would cost the host 32 MiB per call, and more for the refusal texts
//! quoting them. [`link`] takes each argument as a `WasmStr` (a checked pointer and length
//! into the guest's memory), checks its length against its cap ([`ArgLimit`]) before
//! copying it, and refuses an argument over its cap with a short error that quotes none
//! of it. Every refusal text passes [`kubewasm_core::excerpt::excerpt`], and at most
//! [`LOGGED_REFUSALS`] refusals of one call are logged (the rest are counted).

use std::collections::BTreeSet;
use std::sync::Arc;

use wasmtime::component::{Linker, WasmStr};
use wasmtime::{AsContext, StoreContext};

use crate::state::PluginState;

/// Most objects one `host.list` returns; a plugin that needs more narrows its list by
/// namespace or label selector.
pub(crate) const MAX_LIST_ITEMS: usize = 5_000;

/// Refusals of one call logged at warn; the rest are counted in one line at the end of
/// the call (a plugin retrying a refused read in a loop would otherwise write a line per
/// try until its deadline).
pub(crate) const LOGGED_REFUSALS: usize = 5;

/// Longest refusal text (logged, and returned to the plugin).
const MAX_REFUSAL_BYTES: usize = 1024;

/// The longest value a read import takes for one argument: no Kubernetes object, kind or
/// namespace has a longer one, so an argument over its cap names nothing the host caches
/// and is refused unread. Together at most ~17 KiB per call of an import are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArgLimit {
    /// The argument's name in errors.
    pub name: &'static str,
    /// Its cap, in bytes.
    pub max: usize,
}

/// `apiVersion`: a group (a DNS-1123 subdomain, at most 253) `/` a version (a DNS label, at
/// most 63).
pub(crate) const API_VERSION: ArgLimit = ArgLimit {
    name: "apiVersion",
    max: 253 + 1 + 63,
};
/// `kind`: a Go type name; kube-apiserver holds CRD kinds to DNS-label length (63).
pub(crate) const KIND: ArgLimit = ArgLimit {
    name: "kind",
    max: 63,
};
/// `namespace`: a DNS label (63).
pub(crate) const NAMESPACE: ArgLimit = ArgLimit {
    name: "namespace",
    max: 63,
};
/// `name`: a DNS-1123 subdomain (253), the rule of every kind a plugin reads by name in
/// practice. (RBAC roles accept longer names; such an object can be listed, not got.)
pub(crate) const NAME: ArgLimit = ArgLimit {
    name: "name",
    max: 253,
};
/// `label-selector`: as long as a watch's selector may be
/// ([`MAX_MANIFEST_STRING`](kubewasm_core::manifest::MAX_MANIFEST_STRING), 16 KiB: a
/// few hundred maximum-length values); a plugin needing more lists without it and filters.
pub(crate) const LABEL_SELECTOR: ArgLimit = ArgLimit {
    name: "label selector",
    max: kubewasm_core::manifest::MAX_MANIFEST_STRING,
};

/// Why an argument was not taken.
enum ArgFailure {
    /// Not a valid string (as the generated binding's lift would fail: a trap).
    Invalid(wasmtime::Error),
    /// Over its cap: refused to the plugin.
    Refused(ReadError),
}

impl From<wasmtime::Error> for ArgFailure {
    fn from(e: wasmtime::Error) -> Self {
        ArgFailure::Invalid(e)
    }
}

/// An argument copied out of the guest once its length is within its cap; refused (no
/// part of it quoted) when it is not.
///
/// For UTF-8, the canonical ABI's encoding for every toolchain kubewasm supports,
/// `to_str` borrows the guest's bytes: nothing is copied before the check. A component
/// that declares UTF-16 strings is transcoded first, within the call's transfer budget
/// (`crate::lift`): bounded by one memory cap, and only for as long as the check takes.
fn arg(
    store: &StoreContext<'_, PluginState>,
    value: &WasmStr,
    import: &'static str,
    limit: ArgLimit,
) -> Result<String, ArgFailure> {
    let text = value.to_str(store)?;
    if text.len() > limit.max {
        return Err(ArgFailure::Refused(ReadError::ArgumentTooLong {
            import,
            argument: limit.name,
            len: text.len(),
            max: limit.max,
        }));
    }
    Ok(text.into_owned())
}

/// [`arg`] for an optional argument.
fn opt_arg(
    store: &StoreContext<'_, PluginState>,
    value: &Option<WasmStr>,
    import: &'static str,
    limit: ArgLimit,
) -> Result<Option<String>, ArgFailure> {
    value
        .as_ref()
        .map(|v| arg(store, v, import, limit))
        .transpose()
}

/// Run a read import on its checked arguments: a refused argument is answered as a
/// refused read, an invalid one traps.
fn answer<A, T>(
    mut store: wasmtime::StoreContextMut<'_, PluginState>,
    args: impl FnOnce(&StoreContext<'_, PluginState>) -> Result<A, ArgFailure>,
    read: impl FnOnce(&mut ClusterState, A) -> Result<T, String>,
) -> wasmtime::Result<(Result<T, String>,)> {
    let args = args(&store.as_context());
    let cluster = &mut store.data_mut().cluster;
    Ok((match args {
        Ok(a) => read(cluster, a),
        Err(ArgFailure::Refused(e)) => Err(cluster.refused(e)),
        Err(ArgFailure::Invalid(e)) => return Err(e),
    },))
}

type GetArgs = (WasmStr, WasmStr, Option<WasmStr>, WasmStr);
type ListArgs = (WasmStr, WasmStr, Option<WasmStr>, Option<WasmStr>);

/// Define `get` and `list` over the generated ones (which must be linked first, for the
/// interface's other functions), taking their arguments unread until checked.
pub(crate) fn link(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    // Every version of the interface: the functions are the same.
    let defined = crate::bindings::HOST_INTERFACES
        .iter()
        .try_for_each(|interface| {
            let mut host = linker.instance(interface)?;
            host.func_wrap(
                "get",
                |store: wasmtime::StoreContextMut<'_, PluginState>, (v, k, ns, n): GetArgs| {
                    answer(
                        store,
                        |s| {
                            Ok((
                                arg(s, &v, "get", API_VERSION)?,
                                arg(s, &k, "get", KIND)?,
                                opt_arg(s, &ns, "get", NAMESPACE)?,
                                arg(s, &n, "get", NAME)?,
                            ))
                        },
                        |c, (v, k, ns, n)| c.get(&v, &k, ns.as_deref(), &n),
                    )
                },
            )?;
            host.func_wrap(
                "list",
                |store: wasmtime::StoreContextMut<'_, PluginState>, (v, k, ns, sel): ListArgs| {
                    answer(
                        store,
                        |s| {
                            Ok((
                                arg(s, &v, "list", API_VERSION)?,
                                arg(s, &k, "list", KIND)?,
                                opt_arg(s, &ns, "list", NAMESPACE)?,
                                opt_arg(s, &sel, "list", LABEL_SELECTOR)?,
                            ))
                        },
                        |c, (v, k, ns, sel)| c.list(&v, &k, ns.as_deref(), sel.as_deref()),
                    )
                },
            )
        });
    linker.allow_shadowing(false);
    defined
}

impl ReadError {
    /// Whether the same read may work later without any change to the plugin: its kind
    /// is not served, or not synced, yet.
    pub fn is_transient(&self) -> bool {
        matches!(self, ReadError::NotServed(_) | ReadError::NotSynced(_))
    }
}

/// Why a cache read was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The plugin neither watches nor declared reading this kind.
    #[error("{0} is not watched or declared in `reads` by this plugin")]
    NotAllowed(String),
    /// The plugin declared this kind, but the API server does not serve it (yet): a CRD
    /// not installed, say. Transient: the read works once it is served.
    #[error(
        "{0} is declared by this plugin but not served by the API server (yet); the event is retried once it is"
    )]
    NotServed(String),
    /// The kind is served and allowed, but its cache has not synced yet (its first list
    /// is under way). Transient.
    #[error("{0} is not synced yet (its first list is under way); the event is retried")]
    NotSynced(String),
    /// The label selector does not parse.
    #[error("label selector: {0}")]
    Selector(#[from] kubewasm_core::selector::SelectorError),
    /// A namespace (or all namespaces) outside what the plugin may read.
    #[error(
        "{kind} {}: this plugin may read it only in namespaces {} (where it is approved to read it); a cluster-wide read needs namespaces [\"*\"] in its approval",
        .namespace.as_deref().map(|n| format!("in namespace {n}")).unwrap_or_else(|| "across all namespaces".into()),
        .allowed.join(", ")
    )]
    OutsideScope {
        /// The kind read.
        kind: String,
        /// The namespace asked for (None: all namespaces).
        namespace: Option<String>,
        /// The namespaces the plugin may read.
        allowed: Vec<String>,
    },
    /// An argument of a read import is longer than any value of it can be (see
    /// [`ArgLimit`]); none of it was read.
    #[error("{import}: the {argument} is {len} bytes, over the limit of {max}")]
    ArgumentTooLong {
        /// `get` or `list`.
        import: &'static str,
        /// Which argument.
        argument: &'static str,
        /// Its length.
        len: usize,
        /// Its cap.
        max: usize,
    },
    /// The answer would be larger than the call may read.
    #[error(
        "list of {kind} matches more than {limit}; narrow it with a namespace or a label selector"
    )]
    TooLarge {
        /// The kind read.
        kind: String,
        /// The limit that was reached, e.g. `5000 objects` or `67108864 bytes (what this call may still read)`.
        limit: String,
    },
    /// With `kubewasm run --shards`, a kind that plugins only watch is cached by shard:
    /// this replica holds only its shards' objects, so it cannot answer for the others.
    #[error(
        "{kind}: {what} is outside this replica's shards (with --shards, a kind only watched is cached by shard); declare {kind} under `reads` to read it whole"
    )]
    OtherShard {
        /// The kind read.
        kind: String,
        /// What was asked: `object ns/name`, or `a list`.
        what: String,
    },
}

/// The namespaces a plugin may read namespaced kinds in. Cluster-scoped kinds it may read
/// (declared and cached) are not limited by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadScope {
    /// Any namespace, and lists across all of them.
    ClusterWide,
    /// Only these namespaces; a list must name one of them.
    Namespaces(BTreeSet<String>),
}

impl ReadScope {
    /// Whether a read of namespaced kind `kind` in `namespace` (None: every namespace) is
    /// inside the scope.
    pub fn check(&self, kind: &str, namespace: Option<&str>) -> Result<(), ReadError> {
        match self {
            ReadScope::ClusterWide => Ok(()),
            ReadScope::Namespaces(allowed) => match namespace {
                Some(ns) if allowed.contains(ns) => Ok(()),
                _ => Err(ReadError::OutsideScope {
                    kind: kind.to_string(),
                    namespace: namespace.map(str::to_string),
                    allowed: allowed.iter().cloned().collect(),
                }),
            },
        }
    }
}

/// How much one `list` may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLimit {
    /// Most objects.
    pub items: usize,
    /// Most bytes of JSON, all objects together.
    pub bytes: usize,
}

/// Builds a `list` answer within a [`ListLimit`], failing as soon as it would exceed it,
/// so a view never materialises more than the limit.
#[derive(Debug)]
pub struct ListAnswer {
    kind: String,
    limit: ListLimit,
    bytes: usize,
    items: Vec<String>,
}

impl ListAnswer {
    /// An empty answer for a list of `kind`.
    pub fn new(kind: impl Into<String>, limit: ListLimit) -> Self {
        ListAnswer {
            kind: kind.into(),
            limit,
            bytes: 0,
            items: Vec::new(),
        }
    }

    /// Whether one more object may still be added (checked before serialising it).
    pub fn check_count(&self) -> Result<(), ReadError> {
        if self.items.len() >= self.limit.items {
            return Err(ReadError::TooLarge {
                kind: self.kind.clone(),
                limit: format!("{} objects", self.limit.items),
            });
        }
        Ok(())
    }

    /// Add one object's JSON.
    pub fn push(&mut self, json: String) -> Result<(), ReadError> {
        self.check_count()?;
        let bytes = self.bytes.saturating_add(json.len());
        if bytes > self.limit.bytes {
            return Err(ReadError::TooLarge {
                kind: self.kind.clone(),
                limit: format!("{} bytes (what this call may still read)", self.limit.bytes),
            });
        }
        self.bytes = bytes;
        self.items.push(json);
        Ok(())
    }

    /// The objects.
    pub fn finish(self) -> Vec<String> {
        self.items
    }
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

    /// Objects of a kind as JSON, at most `limit` (build the answer with [`ListAnswer`]).
    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: ListLimit,
    ) -> Result<Vec<String>, ReadError>;

    /// Bytes one call may read in total (the plugin's memory cap).
    fn read_budget(&self) -> usize;
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
        _: ListLimit,
    ) -> Result<Vec<String>, ReadError> {
        Err(ReadError::NotAllowed(format!("{v}/{k}")))
    }
    fn read_budget(&self) -> usize {
        0
    }
}

/// Run a read that scans a cache without holding up the tokio worker it runs on: on a
/// multi-threaded runtime the worker's other tasks move to another thread meanwhile
/// (`block_in_place`); elsewhere (a current-thread runtime, no runtime) it just runs.
/// The time still counts against the call, which is executing.
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Per-store state of the cluster capability.
pub(crate) struct ClusterState {
    plugin: String,
    object: String,
    view: Arc<dyn ClusterView>,
    /// Bytes read so far in this call.
    read: usize,
    /// Reads refused in this call.
    refusals: usize,
}

impl ClusterState {
    /// Instantiate: no reads allowed until a call lends a view.
    pub(crate) fn new(plugin: &str) -> Self {
        ClusterState {
            plugin: plugin.to_string(),
            object: String::new(),
            view: Arc::new(NoCluster),
            read: 0,
            refusals: 0,
        }
    }

    /// Start of a call: the view this call may read, and the object it handles.
    pub(crate) fn begin_call(&mut self, view: Arc<dyn ClusterView>, object: &str) {
        self.view = view;
        self.object = object.to_string();
        self.read = 0;
        self.refusals = 0;
    }

    /// End of a call: give the view back (a pooled instance keeps no reference to caches);
    /// the number of refused reads that were not logged.
    pub(crate) fn end_call(&mut self) -> usize {
        self.view = Arc::new(NoCluster);
        self.refusals.saturating_sub(LOGGED_REFUSALS)
    }

    fn remaining(&self) -> usize {
        self.view.read_budget().saturating_sub(self.read)
    }

    /// The `get` import.
    pub(crate) fn get(
        &mut self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, String> {
        let got = self
            .view
            .get(api_version, kind, namespace, name)
            .map_err(|e| self.refused(e))?;
        let len = got.as_ref().map_or(0, String::len);
        if len > self.remaining() {
            let limit = format!("{} bytes (what this call may still read)", self.remaining());
            return Err(self.refused(ReadError::TooLarge {
                kind: format!("{api_version}/{kind}"),
                limit,
            }));
        }
        self.read += len;
        Ok(got)
    }

    /// The `list` import.
    pub(crate) fn list(
        &mut self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let limit = ListLimit {
            items: MAX_LIST_ITEMS,
            bytes: self.remaining(),
        };
        let view = &self.view;
        let items =
            off_the_runtime(|| view.list(api_version, kind, namespace, label_selector, limit))
                .map_err(|e| self.refused(e))?;
        self.read += items.iter().map(String::len).sum::<usize>();
        Ok(items)
    }

    /// A refused read is the plugin's to handle, but the operator sees it too (the first
    /// [`LOGGED_REFUSALS`] of a call). The text quotes what the plugin passed: excerpted.
    pub(crate) fn refused(&mut self, e: ReadError) -> String {
        let reason =
            kubewasm_core::excerpt::excerpt(&e.to_string(), MAX_REFUSAL_BYTES).into_owned();
        self.refusals += 1;
        if self.refusals <= LOGGED_REFUSALS {
            tracing::warn!(plugin = %self.plugin, object = %self.object, reason, "read refused");
        }
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stay_in_the_scope_s_namespaces() {
        let s = ReadScope::Namespaces(["a".to_string(), "b".to_string()].into());
        assert!(s.check("v1/Secret", Some("a")).is_ok());
        assert!(s.check("v1/Secret", Some("b")).is_ok());
        let err = s.check("v1/Secret", Some("c")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "v1/Secret in namespace c: this plugin may read it only in namespaces a, b (where it is approved to read it); a cluster-wide read needs namespaces [\"*\"] in its approval"
        );
        let err = s.check("v1/Secret", None).unwrap_err();
        assert!(err.to_string().contains("across all namespaces"), "{err}");
        assert!(ReadScope::ClusterWide.check("v1/Secret", None).is_ok());
    }

    #[test]
    fn list_answers_stop_at_their_limit() {
        let mut a = ListAnswer::new(
            "v1/X",
            ListLimit {
                items: 2,
                bytes: 10,
            },
        );
        a.push("abcd".into()).unwrap();
        a.push("efgh".into()).unwrap();
        let err = a.push("i".into()).unwrap_err();
        assert!(err.to_string().contains("more than 2 objects"), "{err}");
        let mut a = ListAnswer::new(
            "v1/X",
            ListLimit {
                items: 9,
                bytes: 10,
            },
        );
        a.push("abcdef".into()).unwrap();
        let err = a.push("ghijk".into()).unwrap_err();
        assert!(err.to_string().contains("more than 10 bytes"), "{err}");
        assert_eq!(a.finish(), vec!["abcdef".to_string()]);
    }

    struct Fixed(usize);

    impl ClusterView for Fixed {
        fn get(
            &self,
            _: &str,
            _: &str,
            _: Option<&str>,
            _: &str,
        ) -> Result<Option<String>, ReadError> {
            Ok(Some("x".repeat(40)))
        }
        fn list(
            &self,
            _: &str,
            k: &str,
            _: Option<&str>,
            _: Option<&str>,
            limit: ListLimit,
        ) -> Result<Vec<String>, ReadError> {
            let mut a = ListAnswer::new(k, limit);
            for _ in 0..3 {
                a.push("y".repeat(20))?;
            }
            Ok(a.finish())
        }
        fn read_budget(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn a_call_reads_at_most_its_budget() {
        let mut s = ClusterState::new("p");
        s.begin_call(Arc::new(Fixed(100)), "ConfigMap a/b");
        assert_eq!(s.list("v1", "X", None, None).unwrap().len(), 3);
        assert!(s.get("v1", "X", None, "n").unwrap().is_some());
        // 100 bytes, 100 read: neither another get nor another list fits.
        let err = s.get("v1", "X", None, "n").unwrap_err();
        assert!(err.contains("more than 0 bytes"), "{err}");
        let err = s.list("v1", "X", None, None).unwrap_err();
        assert!(err.contains("more than 0 bytes"), "{err}");
        // A new call starts with the whole budget again.
        s.begin_call(Arc::new(Fixed(100)), "ConfigMap a/b");
        assert!(s.get("v1", "X", None, "n").is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lists_run_on_a_multi_threaded_runtime_and_without_one() {
        let mut s = ClusterState::new("p");
        s.begin_call(Arc::new(Fixed(1000)), "ConfigMap a/b");
        assert_eq!(s.list("v1", "X", None, None).unwrap().len(), 3);
        let mut s = ClusterState::new("p");
        s.begin_call(Arc::new(Fixed(1000)), "ConfigMap a/b");
        let n = std::thread::spawn(move || s.list("v1", "X", None, None).map(|l| l.len()))
            .join()
            .unwrap();
        assert_eq!(n, Ok(3));
    }
}
