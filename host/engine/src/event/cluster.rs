//! The cluster port: everything the pipeline ([`super::pipeline::Pipeline`]) asks of the
//! cluster it writes to. Kinds are resolved through it ([`Resolver`]), owner uids read
//! from it ([`Owners`]), the object a merge patch or an adopting create would change
//! read from it as the plugin (`event::preflight`'s question), and each admitted intent
//! executed on it. `run` plugs in the API server ([`ApiCluster`]); `kubewasm test` an
//! embedded one per case (`cases::cluster::CaseCluster`). A small trait, so a wrapper (a
//! dry run) can change what one of its answers does and pass the rest through.

use std::future::Future;
use std::sync::Arc;

use kubewasm_core::admit::{Owners, Prepared};
use kubewasm_core::kind::{KindInfo, ResolveError, Resolver};
use kubewasm_core::resource::TypeRef;
use serde_json::Value;

use crate::Error;
use crate::apply::{Applier, Outcome, Writer};
use crate::watch::cache::Caches;
use crate::watch::discovery::Discovery;

/// What the pipeline asks of the cluster: kinds and owners (admission), the live object
/// (preflight), and the writes.
pub(crate) trait Cluster: Resolver + Owners + Send + Sync {
    /// The object `p` writes as the cluster has it now, `managedFields` included, read
    /// as the plugin writing as `writer`; None when it does not exist.
    fn current(
        &self,
        writer: &Writer,
        p: &Prepared,
    ) -> impl Future<Output = Result<Option<Value>, Error>> + Send;

    /// Execute one admitted intent as `writer` (its field manager and account).
    fn execute(
        &self,
        writer: &Writer,
        p: &Prepared,
    ) -> impl Future<Output = Result<Outcome, Error>> + Send;

    /// Send one admitted intent as `execute` would, with `dryRun=All`: the object as it
    /// would be after (None: deleted, or gone). Nothing is stored.
    fn dry_run(
        &self,
        writer: &Writer,
        p: &Prepared,
    ) -> impl Future<Output = Result<Option<Value>, Error>> + Send;
}

/// A Kubernetes API server: discovery for kinds, the watch caches for owners, the
/// applier (server-side apply, as each plugin's ServiceAccount) for reads and writes.
pub(crate) struct ApiCluster {
    pub(crate) applier: Arc<Applier>,
    pub(crate) discovery: Arc<Discovery>,
    pub(crate) caches: Arc<Caches>,
}

impl Resolver for ApiCluster {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        self.discovery.resolve_kind(t).await
    }
}

impl Owners for ApiCluster {
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
        self.caches.uid(kind, namespace, name)
    }
}

impl Cluster for ApiCluster {
    async fn current(&self, writer: &Writer, p: &Prepared) -> Result<Option<Value>, Error> {
        self.applier.current(writer, p).await
    }

    async fn execute(&self, writer: &Writer, p: &Prepared) -> Result<Outcome, Error> {
        self.applier.execute(writer, p).await
    }

    async fn dry_run(&self, writer: &Writer, p: &Prepared) -> Result<Option<Value>, Error> {
        self.applier.dry_run(writer, p).await
    }
}
