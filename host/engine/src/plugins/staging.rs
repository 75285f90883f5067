//! A new version waits, staged, until the caches of everything it watches and reads have
//! settled (synced, or found not served): until then the version it replaces keeps
//! serving, so no event reaches a version whose reads would fail only because its caches
//! are still filling (the swap's failed events otherwise). A kind that is not served at
//! all does not hold the swap: that version reports it instead. A cache that holds fewer
//! fields than the new version declares (its watch restarted for the wider union, still
//! listing) has not settled for it: the swap waits for the re-list, so no version is served
//! objects missing fields it declared.

use kubewasm_core::manifest::Manifest;
use kubewasm_core::projection::Projection;
use kubewasm_core::resource::ResourceRef;

use crate::plugins::environment::{Active, Environment};
use crate::plugins::replay::Replay;

/// Everything a plugin with `manifest` watches and reads, each with its projection of it:
/// a cache it waits for must hold at least those fields.
pub(crate) fn needs(manifest: &Manifest) -> Vec<(ResourceRef, Projection)> {
    manifest
        .read_resources()
        .map(|r| (r.clone(), manifest.projection(|x| x == r)))
        .collect()
}

/// What a staged version still waits for.
pub(crate) fn unsettled(
    a: &Active,
    settled: &impl Fn(&ResourceRef, &Projection) -> bool,
) -> Vec<String> {
    let mut waiting: Vec<String> = needs(&a.plugin().manifest)
        .into_iter()
        .filter(|(r, p)| !settled(r, p))
        .map(|(r, _)| r.to_string())
        .collect();
    waiting.sort();
    waiting.dedup();
    waiting
}

/// In `next` (what a reconcile made of `before`): each replacement whose new version waits
/// for a cache is staged, the version serving in `before` put back, its replay dropped
/// (it comes with the promotion). A staged version whose plugin is gone, or replaced
/// since by one that need not wait, is dropped.
pub(crate) fn stage(
    next: &mut Environment,
    before: &Environment,
    replays: &mut Vec<Replay>,
    settled: &impl Fn(&ResourceRef, &Projection) -> bool,
) {
    replays.retain(|replay| {
        let Replay::Replaced(name) = replay else {
            return true;
        };
        let (Some(new), Some(old)) = (next.plugins.get(name), before.plugins.get(name)) else {
            return true;
        };
        let waiting = unsettled(new, settled);
        if waiting.is_empty() {
            next.staged.remove(name);
            return true;
        }
        tracing::info!(plugin = %name, version = %new.plugin().manifest.version,
            serving = %old.plugin().manifest.version, waiting_for = ?waiting,
            "new version staged: it serves once the caches of what it watches and reads have synced");
        let (new, old) = (new.clone(), old.clone());
        next.staged.insert(name.clone(), new);
        next.plugins.insert(name.clone(), old);
        false
    });
    next.staged
        .retain(|name, _| next.plugins.contains_key(name));
}

/// The environment with every staged version that no longer waits put to work, and their
/// names (to replay); None when none is ready.
pub(crate) fn promote(
    env: &Environment,
    settled: &impl Fn(&ResourceRef, &Projection) -> bool,
) -> Option<(Environment, Vec<String>)> {
    let ready: Vec<String> = env
        .staged
        .iter()
        .filter(|(_, a)| unsettled(a, settled).is_empty())
        .map(|(name, _)| name.clone())
        .collect();
    if ready.is_empty() {
        return None;
    }
    let mut next = env.clone();
    for name in &ready {
        if let Some(a) = next.staged.remove(name) {
            tracing::info!(plugin = %name, version = %a.plugin().manifest.version,
                "staged version serves: its caches have synced");
            next.plugins.insert(name.clone(), a);
        }
    }
    Some((next, ready))
}
