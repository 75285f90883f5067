//! Preview: what a plugin's writes would do, without doing them. A plugin in
//! `spec.mode: DryRun` has every admitted write sent with `dryRun=All` as its own
//! identity (`event::dry_run`); a shadow candidate runs beside the serving version the
//! same way and is compared with it (`event::layers::preview`). This module is the pure
//! part both share: what one write would change ([`change`]) and the bounded report of
//! every plugin's findings ([`report`]).

pub(crate) mod change;
pub(crate) mod report;
