//! Running as several replicas: who owns which key right now. Leader election on a Lease
//! (`leader`, over `lease`), or shards each held on its own Lease (`shards`); `ownership`
//! is the one question every loop asks (may this key be handled, and is the term still
//! on), whichever of the two is configured.

pub mod leader;
pub(crate) mod lease;
pub(crate) mod ownership;
pub mod shards;
