//! Who handles an object here: with one leader, the leader handles every key; with
//! shards, the holder of the key's shard does. Every decision of the host that depends on
//! it (the gate, the guards around calls and writes, tombstones, replays) asks this one
//! type, so the two modes differ in one place.

use kubewasm_core::resource::ObjectKey;

use super::leader::{Leadership, NotLeading};
use super::shards::ShardSet;

/// This replica's share of the work.
#[derive(Debug, Clone)]
pub(crate) enum Ownership {
    /// One leader (or a single replica: [`Leadership::always`]) handles every key.
    Leader(Leadership),
    /// The holder of a key's shard handles it.
    Shards(ShardSet),
}

impl Ownership {
    /// A single replica: everything, always.
    pub(crate) fn always() -> Ownership {
        Ownership::Leader(Leadership::always())
    }

    /// Whether this replica handles `key` now.
    pub(crate) fn owns(&self, key: &ObjectKey) -> bool {
        match self {
            Ownership::Leader(l) => l.is_leader(),
            Ownership::Shards(s) => s.owns(key),
        }
    }

    /// Runs `fut` while this replica's term over `key` lasts, dropping it when the term
    /// ends ([`Leadership::guard`], [`ShardSet::guard`]).
    pub(crate) async fn guard<F: Future>(
        &self,
        key: &ObjectKey,
        fut: F,
    ) -> Result<F::Output, NotLeading> {
        match self {
            Ownership::Leader(l) => l.guard(fut).await,
            Ownership::Shards(s) => s.guard(s.shard_of(key), fut).await,
        }
    }

    /// Whether this replica does the installation's one-of-a-kind work (Plugin objects'
    /// status): the leader, or the holder of shard 0.
    pub(crate) fn is_first(&self) -> bool {
        match self {
            Ownership::Leader(l) => l.is_leader(),
            Ownership::Shards(s) => s.holds(0),
        }
    }

    /// Runs `fut` while this replica's term of the one-of-a-kind work lasts.
    pub(crate) async fn guard_first<F: Future>(&self, fut: F) -> Result<F::Output, NotLeading> {
        match self {
            Ownership::Leader(l) => l.guard(fut).await,
            Ownership::Shards(s) => s.guard(0, fut).await,
        }
    }

    /// The shard set, when sharded.
    pub(crate) fn shards(&self) -> Option<&ShardSet> {
        match self {
            Ownership::Shards(s) => Some(s),
            Ownership::Leader(_) => None,
        }
    }
}
