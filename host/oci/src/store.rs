//! The content-addressed store on disk.
//!
//! Keyed by repository, then digest: `DIR/repos/<key>/blobs/sha256/<hex>` holds wasm
//! layers and `DIR/repos/<key>/manifests/sha256/<hex>` manifests, where `<key>` is the
//! SHA-256 of `REGISTRY/REPOSITORY` (a fixed-length name no repository path can escape or
//! collide with). A digest pulled from one repository, with that repository's
//! credentials, is never served for another: a Plugin naming a repository it cannot pull
//! from does not get another Plugin's module by its digest. Each file is written to a
//! temporary file under `DIR/tmp`, verified, synced, then renamed into place: a file
//! under its digest is always complete and verified. A manifest is written after its
//! blob, so a manifest in the store means its blob is there too.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::Digest as _;

use crate::{Error, Reference};

/// How long a temporary file must have been left untouched before [`Store::open`] takes
/// it for a leftover of a killed process.
pub(crate) const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// A content-addressed store of pulled components (see the module documentation).
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Open (creating what is missing) the store in `dir`. Temporary files a killed
    /// process left under `DIR/tmp` (untouched for 15 minutes) are removed.
    pub fn open(dir: &Path) -> Result<Store, Error> {
        let store = Store {
            dir: dir.to_path_buf(),
        };
        for sub in [store.dir.join("repos"), store.tmp()] {
            std::fs::create_dir_all(&sub).map_err(Error::io("creating the store folder", &sub))?;
        }
        // The layout before the store was keyed by repository: never read again, so its
        // files would only take space (best effort: the next open tries again).
        for old in ["blobs", "manifests"] {
            let path = store.dir.join(old);
            if path.is_dir() {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => {
                        tracing::info!(path = %path.display(), "removed the OCI store's old layout (not keyed by repository)")
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "could not remove the OCI store's old layout")
                    }
                }
            }
        }
        // Only old ones: another handle on the same folder may be writing right now, and a
        // download writes its file continuously.
        if let Ok(entries) = std::fs::read_dir(store.tmp()) {
            for entry in entries.flatten() {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age >= STALE_TEMP);
                if stale {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(store)
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `DIR/repos/<key>` of `reference`'s repository (see the module documentation).
    fn repo(&self, reference: &Reference) -> PathBuf {
        let name = format!(
            "{}/{}",
            reference.registry().to_ascii_lowercase(),
            reference.repository()
        );
        self.dir
            .join("repos")
            .join(hex::encode(sha2::Sha256::digest(name.as_bytes())))
    }

    pub(crate) fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// Where blob `digest` (`sha256:HEX`, already validated) of `reference`'s
    /// repository lives.
    pub(crate) fn blob_path(&self, reference: &Reference, digest: &str) -> PathBuf {
        self.repo(reference)
            .join("blobs/sha256")
            .join(hex_of(digest))
    }

    /// Where manifest `digest` (`sha256:HEX`, already validated) of `reference`'s
    /// repository lives.
    pub(crate) fn manifest_path(&self, reference: &Reference, digest: &str) -> PathBuf {
        self.repo(reference)
            .join("manifests/sha256")
            .join(hex_of(digest))
    }

    /// A new temporary file under `DIR/tmp`, removed when dropped unless persisted.
    pub(crate) fn temp_file(&self) -> Result<tempfile::NamedTempFile, Error> {
        tempfile::Builder::new()
            .suffix(".part")
            .tempfile_in(self.tmp())
            .map_err(Error::io(
                "creating a temporary file in the store",
                self.tmp(),
            ))
    }

    /// Sync `temp` and rename it to `dest` (its folder created if missing).
    pub(crate) fn persist(&self, temp: tempfile::NamedTempFile, dest: &Path) -> Result<(), Error> {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .map_err(Error::io("creating the store folder", parent))?;
        }
        temp.as_file()
            .sync_all()
            .map_err(Error::io("syncing", temp.path()))?;
        temp.persist(dest)
            .map_err(|e| Error::io("renaming into the store", dest)(e.error))?;
        // The rename itself survives a crash only once the folder is synced.
        if let Some(parent) = dest.parent()
            && let Ok(d) = std::fs::File::open(parent)
        {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Write `bytes` (already verified against `digest`) as manifest `digest` of
    /// `reference`'s repository.
    pub(crate) fn put_manifest(
        &self,
        reference: &Reference,
        digest: &str,
        bytes: &[u8],
    ) -> Result<PathBuf, Error> {
        let dest = self.manifest_path(reference, digest);
        let mut temp = self.temp_file()?;
        temp.write_all(bytes).map_err(Error::io(
            "writing a manifest to",
            temp.path().to_path_buf(),
        ))?;
        self.persist(temp, &dest)?;
        Ok(dest)
    }

    /// Manifest `digest` of `reference`'s repository if the store has it (at most
    /// 4 MiB read: only verified manifests are stored).
    pub(crate) fn get_manifest(
        &self,
        reference: &Reference,
        digest: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        use std::io::Read as _;
        let path = self.manifest_path(reference, digest);
        let read = std::fs::File::open(&path).and_then(|f| {
            let mut bytes = Vec::new();
            f.take(crate::artifact::MAX_MANIFEST_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map(|_| bytes)
        });
        match read {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("reading", path)(e)),
        }
    }

    /// Remove a stored file found damaged (best effort: the next pull rewrites it).
    pub(crate) fn discard(&self, path: &Path) {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a damaged file from the OCI store");
        }
    }
}

fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::sha256_digest;

    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = entry.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
        out.sort();
        out
    }

    #[test]
    fn layout_and_atomic_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("store")).expect("open");
        let bytes = br#"{"schemaVersion":2}"#;
        let digest = sha256_digest(bytes);
        let a: Reference = format!("oci://reg.example.com/team-a/plugin@{digest}")
            .parse()
            .expect("ref");
        let b: Reference = format!("oci://reg.example.com/team-b/plugin@{digest}")
            .parse()
            .expect("ref");
        assert_eq!(store.get_manifest(&a, &digest).expect("get"), None);
        let path = store.put_manifest(&a, &digest, bytes).expect("put");
        let key = hex::encode(sha2::Sha256::digest(b"reg.example.com/team-a/plugin"));
        assert_eq!(
            path,
            store
                .dir()
                .join("repos")
                .join(key)
                .join("manifests/sha256")
                .join(digest.trim_start_matches("sha256:"))
        );
        assert_eq!(
            store.get_manifest(&a, &digest).expect("get").as_deref(),
            Some(&bytes[..])
        );
        // Keyed by repository: the same digest named in another repository is not there.
        assert_eq!(store.get_manifest(&b, &digest).expect("get"), None);
        assert_ne!(store.blob_path(&a, &digest), store.blob_path(&b, &digest));
        // Nothing but the manifest: the temporary file was renamed, not copied.
        assert_eq!(files_under(store.dir()), vec![path]);
    }

    #[test]
    fn an_unpersisted_temp_file_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        {
            let mut temp = store.temp_file().expect("temp");
            temp.write_all(b"half a blob").expect("write");
            assert!(temp.path().starts_with(store.tmp()));
            assert_eq!(files_under(store.dir()).len(), 1);
            // Dropped without persist: a failed pull.
        }
        assert!(files_under(store.dir()).is_empty());
    }

    #[test]
    fn open_removes_leftovers_of_a_killed_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        // A killed process never runs the destructor: kept files stand for its leftovers.
        let (old, old_path) = store.temp_file().expect("temp").keep().expect("keep");
        let long_ago =
            std::time::SystemTime::now() - STALE_TEMP - std::time::Duration::from_secs(1);
        old.set_modified(long_ago).expect("set mtime");
        drop(old);
        // One being written by another handle on the same folder right now.
        let (_fresh, fresh_path) = store.temp_file().expect("temp").keep().expect("keep");
        let store = Store::open(dir.path()).expect("reopen");
        assert!(!old_path.exists(), "a stale leftover is removed");
        assert!(fresh_path.exists(), "a file being written is kept");
        assert_eq!(files_under(store.dir()), vec![fresh_path]);
    }

    #[test]
    fn open_removes_the_layout_not_keyed_by_repository() {
        let dir = tempfile::tempdir().expect("tempdir");
        for old in ["blobs/sha256", "manifests/sha256"] {
            std::fs::create_dir_all(dir.path().join(old)).expect("mkdir");
            std::fs::write(dir.path().join(old).join("ab"), b"x").expect("write");
        }
        let store = Store::open(dir.path()).expect("open");
        assert!(files_under(store.dir()).is_empty());
        assert!(!dir.path().join("blobs").exists() && !dir.path().join("manifests").exists());
    }
}
