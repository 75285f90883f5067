//! The validation pipeline every call's intents go through before anything is written:
//! decode → resolve → bind (namespace, scope, owner reference) → grant. `kubewasm run`
//! and `kubewasm test` both call [`admit`], so a test case passes exactly when `run`
//! would apply the same intents; only the [`Resolver`] differs (discovery or offline).
//!
//! By concept: [`Trigger`] and [`Prepared`] (the object a call is about, an intent bound
//! for it), `bind` (namespace, scope, name, `owned-by-trigger`), `body` (owner references
//! and finalizers a body writes, checked against [`Owners`]) and the errors.

mod bind;
mod body;
mod error;
mod managed;
mod prepared;
#[cfg(test)]
mod tests;

pub use body::{Owners, adoption_matters, check_adoption};
pub use error::{AdmitError, BindError, BodyError, CrossNamespaceOwner, Rejection, TakesFields};
pub use managed::{TakenField, merged, taken_field};
pub use prepared::{Prepared, Trigger};

use crate::grant;
use crate::intent::{self, RawIntent};
use crate::kind::Resolver;
use crate::manifest::Manifest;
use crate::resource::TypeRef;

/// Longest excerpt of a plugin string an admission error carries.
const EXCERPT: usize = 64;

/// Admit one call's intents, all or nothing: decode each (documents at most `max_bytes`),
/// resolve its kind, bind it, check it against the manifest's grants on the resolved
/// resource, and check what its body writes beyond its fields (owner references against
/// the trigger, the grants and `owners`; finalizers against the grants). The first failure
/// rejects the call.
pub async fn admit(
    manifest: &Manifest,
    raw: Vec<RawIntent>,
    max_bytes: usize,
    trigger: &Trigger,
    resolver: &impl Resolver,
    owners: &impl Owners,
) -> Result<Vec<Prepared>, Rejection> {
    let mut prepared = Vec::with_capacity(raw.len());
    for (index, r) in raw.into_iter().enumerate() {
        let reject = |error: AdmitError| Rejection { index, error };
        let decoded = intent::decode(r, max_bytes).map_err(|e| reject(e.into()))?;
        let kind = resolver
            .resolve_kind(&TypeRef::new(
                decoded.target.api_version.clone(),
                decoded.target.kind.clone(),
            ))
            .await
            .map_err(|e| reject(e.into()))?;
        let p = bind::bind(decoded, kind, trigger).map_err(|e| reject(e.into()))?;
        grant::check(manifest, &p.access()).map_err(|e| reject(e.into()))?;
        body::check_body(manifest, &p, trigger, resolver, owners)
            .await
            .map_err(reject)?;
        prepared.push(p);
    }
    Ok(prepared)
}

/// Check a merge patch against the object it patches as the API server has it now
/// (`live`, with its `managedFields`): a field another manager than `manager` owns that
/// the patch would change needs a grant allowing force on the object, as a forced
/// server-side apply would (see [`taken_field`]). Other intents pass.
pub fn check_merge(
    manifest: &Manifest,
    p: &Prepared,
    live: &serde_json::Value,
    manager: &str,
) -> Result<(), TakesFields> {
    let intent::Action::Merge { body, status } = &p.intent.action else {
        return Ok(());
    };
    let after = merged(live, body, *status, p.kind.has_status);
    let Some(taken) = taken_field(live, &after, manager) else {
        return Ok(());
    };
    let forced = grant::Access {
        force: true,
        ..p.access()
    };
    match grant::check(manifest, &forced) {
        Ok(()) => Ok(()),
        Err(_) => Err(TakesFields {
            object: p.intent.target.to_string(),
            field: taken.field,
            manager: taken.manager,
        }),
    }
}
