//! The cluster port in dry run ([`DryRun`]): every write is sent with `dryRun=All`, so the
//! API server judges it as it would the real one (schema, admission, the plugin's RBAC,
//! field conflicts) and stores nothing; what it would change is the write's outcome.
//! Reads, kinds and owners pass through: the plugin sees the cluster as it is.

use kubewasm_core::admit::{Owners, Prepared};
use kubewasm_core::excerpt::excerpt;
use kubewasm_core::kind::{KindInfo, ResolveError, Resolver};
use kubewasm_core::resource::TypeRef;
use serde_json::Value;

use crate::Error;
use crate::apply::{Outcome, Writer};
use crate::event::cluster::Cluster;
use crate::preview::change::{Change, change};

/// Bytes of the API server's reason a refusal keeps.
const MAX_REASON: usize = 300;

/// `C`, with every write previewed instead of made.
pub(crate) struct DryRun<'a, C>(pub(crate) &'a C);

impl<C: Cluster> Resolver for DryRun<'_, C> {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        self.0.resolve_kind(t).await
    }
}

impl<C: Cluster> Owners for DryRun<'_, C> {
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
        self.0.uid(kind, namespace, name)
    }
}

impl<C: Cluster> Cluster for DryRun<'_, C> {
    /// The preflight's read. Refused (it is a dry-run PATCH as the plugin, which the
    /// write itself needs too): nothing to check before writing, and the write's own
    /// preview reports the refusal, as a finding, not as the event's failure.
    async fn current(&self, writer: &Writer, p: &Prepared) -> Result<Option<Value>, Error> {
        match self.0.current(writer, p).await {
            Err(e) if refused(&e) => Ok(None),
            other => other,
        }
    }

    /// The object before, and as the write would leave it: what would change. A refusal
    /// is a finding, not a failure (the event ends well and is not retried); trouble
    /// reaching the API server is an error as for a real write.
    async fn execute(&self, writer: &Writer, p: &Prepared) -> Result<Outcome, Error> {
        let before = match self.0.current(writer, p).await {
            Ok(b) => b,
            Err(e) => return refusal(e),
        };
        match self.0.dry_run(writer, p).await {
            Ok(after) => Ok(Outcome::Previewed(change(before.as_ref(), after.as_ref()))),
            Err(e) => refusal(e),
        }
    }

    async fn dry_run(&self, writer: &Writer, p: &Prepared) -> Result<Option<Value>, Error> {
        self.0.dry_run(writer, p).await
    }
}

/// A write the API server refused (4xx other than 429: the answer would be the same
/// again) as what the preview found; anything else stays an error.
fn refusal(e: Error) -> Result<Outcome, Error> {
    match e {
        Error::Api {
            status,
            ref message,
            ..
        } if refused(&e) => Ok(Outcome::Previewed(Change::Refused {
            code: status,
            reason: excerpt(message, MAX_REASON).into_owned(),
        })),
        e => Err(e),
    }
}

/// Whether the API server refused: the same request gets the same answer again.
fn refused(e: &Error) -> bool {
    matches!(e, Error::Api { status, .. } if (400..500).contains(status) && *status != 429)
}
