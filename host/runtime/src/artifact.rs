//! Loading compiled code: the crate's only `unsafe`.
//!
//! wasmtime runs the native code of a serialized component without checking it, so bytes
//! may only become a [`Component`] when they are known to come from `Component::serialize`
//! of a compatible engine. [`Artifact`] is that knowledge as a type: it is made only where
//! the origin is established (an HMAC-verified code cache entry, or the output of this
//! executable's compile worker) and loaded only here.
//!
//! With a directory, loading goes through an unnamed file: wasmtime then maps the code
//! from the file, so the kernel keeps resident only the code that runs and can drop it
//! again under pressure (a Python plugin's 35 MB of compiled code costs the pages the
//! interpreter touches, not all of them), and it maps linear-memory images from the same
//! file instead of copying them into memfds. The file has no name (`O_TMPFILE`, or
//! created with a random name and unlinked at once, mode 0600), so nobody can open it to
//! change the code after this process wrote it. Where no such file can be made, the bytes
//! are loaded from memory, as before.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

use wasmtime::component::Component;

use crate::engine::PluginEngine;

/// Bytes known to be `Component::serialize` output of an engine configured like ours.
pub(crate) struct Artifact {
    bytes: Vec<u8>,
    origin: Origin,
}

/// Where an [`Artifact`] came from: the reason it may be trusted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin {
    /// A code cache entry whose HMAC tag verified under this host's key.
    VerifiedCacheEntry,
    /// Standard output of a compile worker: this same executable (`/proc/self/exe`),
    /// building its engine from the same configuration, talking over a pipe only this
    /// process and the worker hold.
    CompileWorker,
}

impl Artifact {
    /// Wrap bytes whose origin the caller established (see [`Origin`]).
    pub(crate) fn new(bytes: Vec<u8>, origin: Origin) -> Self {
        Artifact { bytes, origin }
    }

    /// Load the artifact, through an unnamed file in `dir` when one can be made there.
    pub(crate) fn load(
        self,
        engine: &PluginEngine,
        dir: Option<&Path>,
    ) -> wasmtime::Result<Component> {
        if let Some(dir) = dir {
            match self.write_unnamed(dir) {
                Ok(file) => return self.load_file(engine, &file),
                Err(e) => tracing::debug!(
                    dir = %dir.display(),
                    origin = ?self.origin,
                    error = %e,
                    "cannot keep compiled code in a file; loading it from memory"
                ),
            }
        }
        self.load_bytes(engine)
    }

    fn write_unnamed(&self, dir: &Path) -> std::io::Result<std::fs::File> {
        // `tempfile_in` uses O_TMPFILE where the filesystem has it, else creates a file
        // with a random name (O_EXCL, 0600) and unlinks it before returning.
        let mut file = tempfile::tempfile_in(dir)?;
        file.write_all(&self.bytes)?;
        Ok(file)
    }

    #[allow(unsafe_code)]
    fn load_file(
        &self,
        engine: &PluginEngine,
        file: &std::fs::File,
    ) -> wasmtime::Result<Component> {
        // The unnamed file is reopened through /proc (wasmtime maps a path); the mapping
        // keeps it alive after `file` is closed.
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        // SAFETY: wasmtime requires the file to hold `Component::serialize` output of a
        // compatible engine, unchanged while mapped. Its contents are `self.bytes`, whose
        // origin `self.origin` vouches for (an HMAC-verified cache entry or our own compile
        // worker's output); the file has no name and mode 0600, so no other process can
        // open it to write after we did. wasmtime checks version and configuration
        // compatibility in the header.
        unsafe { Component::deserialize_file(engine.engine(), path) }
    }

    #[allow(unsafe_code)]
    fn load_bytes(&self, engine: &PluginEngine) -> wasmtime::Result<Component> {
        // SAFETY: as in `load_file`: `self.origin` vouches that the bytes are
        // `Component::serialize` output of a compatible engine; wasmtime copies them before
        // use and checks version and configuration compatibility in the header.
        unsafe { Component::deserialize(engine.engine(), &self.bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAT: &str =
        r#"(component (core module (memory (export "m") 1) (data (i32.const 0) "hello")))"#;

    fn artifact(engine: &PluginEngine) -> Artifact {
        let component = Component::new(engine.engine(), wat::parse_str(WAT).unwrap()).unwrap();
        Artifact::new(component.serialize().unwrap(), Origin::CompileWorker)
    }

    #[test]
    fn loads_through_an_unnamed_file_and_leaves_nothing_in_the_directory() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let component = artifact(&engine).load(&engine, Some(dir.path())).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Loaded from a file, the component serializes to the same bytes.
        assert_eq!(
            component.serialize().unwrap(),
            artifact(&engine).bytes,
            "round trip through the file"
        );
    }

    #[test]
    fn falls_back_to_memory_when_the_directory_is_unusable() {
        let engine = PluginEngine::new().unwrap();
        let missing = Path::new("/nonexistent/kubewasm-artifact-test");
        assert!(artifact(&engine).load(&engine, Some(missing)).is_ok());
        assert!(artifact(&engine).load(&engine, None).is_ok());
    }

    #[test]
    fn bytes_of_another_kind_are_refused_not_run() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let junk = Artifact::new(b"not an artifact".to_vec(), Origin::CompileWorker);
        assert!(junk.load(&engine, Some(dir.path())).is_err());
    }
}
