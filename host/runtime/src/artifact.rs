//! Loading compiled code: the crate's only `unsafe`.
//!
//! wasmtime runs the native code of a serialized component without checking it, so bytes
//! may only become a [`Component`] when they are known to come from `Component::serialize`
//! of a compatible engine. [`Artifact`] is that knowledge as a type: it is made only where
//! the origin is established (an HMAC-verified code cache entry, or the output of this
//! executable's compile worker) and loaded only here.
//!
//! An artifact is collected as it streams in ([`ArtifactWriter`]: a cache entry while its
//! tag is computed, a worker's output while it is read), so no copy of the whole of it is
//! held in memory. With a directory, it goes into an unnamed file: wasmtime then maps the code
//! from the file, so the kernel keeps resident only the code that runs and can drop it
//! again under pressure (a Python plugin's 35 MB of compiled code costs the pages the
//! interpreter touches, not all of them), and it maps linear-memory images from the same
//! file instead of copying them into memfds. The file has no name (`O_TMPFILE`, or
//! created with a random name and unlinked at once, mode 0600), so nobody can open it to
//! change the code after this process wrote it. Where no such file can be made, the bytes
//! are loaded from memory, as before.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

use wasmtime::component::Component;

use crate::engine::PluginEngine;

/// Bytes known to be `Component::serialize` output of an engine configured like ours.
pub(crate) struct Artifact {
    body: Body,
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

impl Origin {
    /// The origin as a log field's plain value.
    fn as_str(self) -> &'static str {
        match self {
            Origin::VerifiedCacheEntry => "verified-cache-entry",
            Origin::CompileWorker => "compile-worker",
        }
    }
}

enum Body {
    /// An unnamed file only this process can write.
    File(File),
    /// In memory (no directory, or no file could be made there).
    Bytes(Vec<u8>),
}

/// Collects an artifact's bytes as they arrive (from a cache entry being verified, or a
/// worker's output), into an unnamed file when one can be made, so that no copy of the
/// whole artifact is ever held in memory.
pub(crate) struct ArtifactWriter {
    body: Body,
    len: u64,
}

impl ArtifactWriter {
    /// A writer into an unnamed file in `dir`, or into memory when `dir` is `None` or no
    /// file can be made there.
    pub(crate) fn new(dir: Option<&Path>) -> Self {
        // `tempfile_in` uses O_TMPFILE where the filesystem has it, else creates a file
        // with a random name (O_EXCL, 0600) and unlinks it before returning.
        let body = match dir.map(tempfile::tempfile_in) {
            Some(Ok(file)) => Body::File(file),
            Some(Err(e)) => {
                tracing::debug!(
                    dir = %dir.map(|d| d.display().to_string()).unwrap_or_default(),
                    error = %e,
                    "cannot keep compiled code in a file; keeping it in memory"
                );
                Body::Bytes(Vec::new())
            }
            None => Body::Bytes(Vec::new()),
        };
        ArtifactWriter { body, len: 0 }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The artifact, once the caller has established where the bytes came from. Only
    /// call this after the whole content is checked (see [`Origin`]).
    pub(crate) fn finish(self, origin: Origin) -> Artifact {
        Artifact {
            body: self.body,
            origin,
        }
    }
}

struct ArtifactReader<'a> {
    body: &'a Body,
    pos: u64,
}

impl std::io::Read for ArtifactReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = match self.body {
            // Positioned reads: the file's own offset (at its end after writing) stays.
            Body::File(f) => f.read_at(buf, self.pos)?,
            Body::Bytes(b) => {
                let rest = b.get(self.pos as usize..).unwrap_or_default();
                let n = rest.len().min(buf.len());
                buf[..n].copy_from_slice(&rest[..n]);
                n
            }
        };
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for ArtifactWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.body {
            Body::File(f) => f.write(buf)?,
            Body::Bytes(b) => b.write(buf)?,
        };
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.body {
            Body::File(f) => f.flush(),
            Body::Bytes(_) => Ok(()),
        }
    }
}

impl Artifact {
    /// The artifact's bytes, from the start (reading its file does not map it).
    pub(crate) fn reader(&self) -> impl std::io::Read + '_ {
        ArtifactReader {
            body: &self.body,
            pos: 0,
        }
    }

    /// Load the artifact as a component. The artifact may be kept (to store it in the
    /// code cache); the component does not depend on it.
    pub(crate) fn load(&self, engine: &PluginEngine) -> wasmtime::Result<Component> {
        match &self.body {
            Body::File(file) => self.load_file(engine, file),
            Body::Bytes(bytes) => self.load_bytes(engine, bytes),
        }
    }

    #[allow(unsafe_code)]
    fn load_file(&self, engine: &PluginEngine, file: &File) -> wasmtime::Result<Component> {
        // The unnamed file is reopened through /proc (wasmtime maps a path); the mapping
        // keeps it alive after `file` is closed.
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        tracing::trace!(
            origin = self.origin.as_str(),
            "loading compiled code from an unnamed file"
        );
        // SAFETY: wasmtime requires the file to hold `Component::serialize` output of a
        // compatible engine, unchanged while mapped. The file was written only through an
        // `ArtifactWriter`, whose content the origin vouches for (an HMAC-verified cache
        // entry, or our own compile worker's output); it has no name and mode 0600, so no
        // other process can open it to write. wasmtime checks version and configuration
        // compatibility in the header.
        unsafe { Component::deserialize_file(engine.engine(), path) }
    }

    #[allow(unsafe_code)]
    fn load_bytes(&self, engine: &PluginEngine, bytes: &[u8]) -> wasmtime::Result<Component> {
        tracing::trace!(
            origin = self.origin.as_str(),
            "loading compiled code from memory"
        );
        // SAFETY: as in `load_file`: the origin vouches that the bytes are
        // `Component::serialize` output of a compatible engine; wasmtime copies them before
        // use and checks version and configuration compatibility in the header.
        unsafe { Component::deserialize(engine.engine(), bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAT: &str =
        r#"(component (core module (memory (export "m") 1) (data (i32.const 0) "hello")))"#;

    fn serialized(engine: &PluginEngine) -> Vec<u8> {
        let wasm = wat::parse_str(WAT).unwrap();
        Component::new(engine.engine(), wasm)
            .unwrap()
            .serialize()
            .unwrap()
    }

    fn written(dir: Option<&Path>, bytes: &[u8]) -> Artifact {
        let mut w = ArtifactWriter::new(dir);
        // In pieces, as a stream arrives.
        for chunk in bytes.chunks(1000) {
            w.write_all(chunk).unwrap();
        }
        assert_eq!(w.len(), bytes.len() as u64);
        w.finish(Origin::CompileWorker)
    }

    #[test]
    fn loads_through_an_unnamed_file_and_leaves_nothing_in_the_directory() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let bytes = serialized(&engine);
        let artifact = written(Some(dir.path()), &bytes);
        assert!(matches!(artifact.body, Body::File(_)));
        let component = artifact.load(&engine).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Loaded from the file, the component serializes to the same bytes, and the
        // artifact reads back as written.
        assert_eq!(component.serialize().unwrap(), bytes);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut artifact.reader(), &mut back).unwrap();
        assert_eq!(back, bytes);
    }

    #[test]
    fn falls_back_to_memory_when_the_directory_is_unusable() {
        let engine = PluginEngine::new().unwrap();
        let bytes = serialized(&engine);
        let missing = Path::new("/nonexistent/kubewasm-artifact-test");
        let artifact = written(Some(missing), &bytes);
        assert!(matches!(artifact.body, Body::Bytes(_)));
        assert!(artifact.load(&engine).is_ok());
        assert!(written(None, &bytes).load(&engine).is_ok());
    }

    #[test]
    fn bytes_of_another_kind_are_refused_not_run() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        assert!(
            written(Some(dir.path()), b"not an artifact")
                .load(&engine)
                .is_err()
        );
        assert!(written(None, b"not an artifact").load(&engine).is_err());
    }
}
