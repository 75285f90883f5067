//! Watching the plugin directory (and the operator's approvals): a debounced notify watcher
//! that signals "look again".
//!
//! The signal carries no detail on purpose: the host rescans the whole directory and
//! compares content hashes, which handles every way files change — writes, renames into
//! place, and Kubernetes ConfigMap/Secret volumes that swap a `..data` symlink.

use std::path::Path;
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::mpsc;

use crate::Error;

/// Whether an event can mean new content. Opening and reading do not: every reconcile
/// opens and reads the files it hashes, and counting those made each reconcile schedule
/// the next, one per debounce period for as long as the host ran.
fn changes(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    !matches!(
        kind,
        notify::EventKind::Access(
            AccessKind::Open(_) | AccessKind::Read | AccessKind::Close(AccessMode::Read)
        )
    )
}

/// Keeps the directory watch alive; dropping it stops watching.
pub(crate) struct DirWatch {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

/// Watch `dir`, and `approvals` when given (a directory itself; a file through its parent
/// directory, so a file replaced by a rename or a ConfigMap's `..data` swap is seen); a
/// message arrives on the receiver after each quiet period of `debounce` that followed a
/// change.
pub(crate) fn watch_dir(
    dir: &Path,
    approvals: Option<&Path>,
    debounce: Duration,
) -> Result<(DirWatch, mpsc::Receiver<()>), Error> {
    let (tx, rx) = mpsc::channel(1);
    let mut debouncer = new_debouncer(debounce, None, move |res: DebounceEventResult| match res {
        // A full channel already holds a pending "look again": nothing is lost.
        Ok(events) if events.iter().any(|e| changes(&e.kind)) => {
            let _ = tx.try_send(());
        }
        Ok(_) => {}
        Err(errors) => {
            for e in errors {
                tracing::warn!(error = %e, "plugin directory watch error");
            }
            let _ = tx.try_send(());
        }
    })
    .map_err(|e| Error::Io {
        context: format!("watching {}", dir.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    let mut watched = vec![dir.to_path_buf()];
    if let Some(a) = approvals {
        let target = if a.is_dir() {
            a.to_path_buf()
        } else {
            // A bare file name's parent is "".
            a.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        };
        if !watched.contains(&target) {
            watched.push(target);
        }
    }
    for path in &watched {
        debouncer
            .watch(path, RecursiveMode::NonRecursive)
            .map_err(|e| Error::Io {
                context: format!("watching {}", path.display()),
                source: std::io::Error::other(e.to_string()),
            })?;
    }
    Ok((
        DirWatch {
            _debouncer: debouncer,
        },
        rx,
    ))
}

#[cfg(test)]
mod tests {
    use super::changes;
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, ModifyKind};

    #[test]
    fn opening_and_reading_are_not_changes() {
        for quiet in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
        ] {
            assert!(!changes(&quiet), "{quiet:?}");
        }
        for change in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Remove(notify::event::RemoveKind::Any),
            EventKind::Any,
        ] {
            assert!(changes(&change), "{change:?}");
        }
    }
}
