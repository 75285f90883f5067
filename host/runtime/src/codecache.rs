//! Compiled-code cache: serialized components keyed by the wasm's hash and the engine's
//! compatibility hash, so restarting or reloading a known plugin skips compilation.
//!
//! Entries are written atomically (temp file + rename) and carry a sha256 of their payload,
//! checked before deserializing: a truncated or corrupt entry is discarded and recompiled.
//! wasmtime itself refuses artefacts from another version or engine configuration; the key
//! includes both anyway, so such entries are simply never looked up.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::Error;
use crate::engine::PluginEngine;

/// Whether a component came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Compiled now.
    Compiled,
    /// Loaded from the cache.
    Cached,
}

impl Source {
    /// For logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Compiled => "compiled",
            Source::Cached => "cache hit",
        }
    }
}

/// Feeds `Hash` output into sha256, for a stable engine fingerprint.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// A cache directory for one engine.
#[derive(Debug, Clone)]
pub struct CodeCache {
    dir: PathBuf,
    engine_key: String,
}

impl CodeCache {
    /// A cache in `dir` (created when missing) for `engine`'s configuration.
    pub fn new(dir: &Path, engine: &PluginEngine) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            context: format!("creating code cache {}", dir.display()),
            source,
        })?;
        let mut h = ShaHasher(Sha256::new());
        env!("CARGO_PKG_VERSION").hash(&mut h);
        engine.engine().precompile_compatibility_hash().hash(&mut h);
        let engine_key = hex::encode(&h.0.finalize()[..8]);
        Ok(CodeCache {
            dir: dir.to_path_buf(),
            engine_key,
        })
    }

    fn entry(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// The cached component for wasm with this sha256 `digest`, if there is a sound entry.
    pub fn get(&self, engine: &PluginEngine, digest: &str) -> Option<Component> {
        let path = self.entry(digest);
        let bytes = std::fs::read(&path).ok()?;
        if bytes.len() < 32 || Sha256::digest(&bytes[32..])[..] != bytes[..32] {
            tracing::warn!(entry = %path.display(), "code cache entry is corrupt; recompiling");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        match deserialize(engine, &bytes[32..]) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(entry = %path.display(), error = %e, "code cache entry rejected by wasmtime; recompiling");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Store a compiled component. Failures only cost a recompile later, so they are logged.
    pub fn put(&self, digest: &str, component: &Component) {
        let path = self.entry(digest);
        let result = component
            .serialize()
            .map_err(|e| e.to_string())
            .and_then(|payload| {
                let mut bytes = Sha256::digest(&payload).to_vec();
                bytes.extend_from_slice(&payload);
                let tmp = path.with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&tmp, &bytes)
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = result {
            tracing::warn!(entry = %path.display(), error = %e, "could not write code cache entry");
        }
    }
}

/// Deserialize an artefact this host wrote itself.
#[allow(unsafe_code)]
fn deserialize(engine: &PluginEngine, bytes: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires that the bytes come from `Component::serialize` of a
    // compatible engine and are not tampered with. Entries are written only by `put`
    // above into a directory the host owns, their sha256 was verified by the caller, and
    // wasmtime checks version and configuration compatibility in the header.
    unsafe { Component::deserialize(engine.engine(), bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(engine: &PluginEngine) -> Component {
        let wasm = wat::parse_str("(component)").unwrap();
        Component::new(engine.engine(), &wasm).unwrap()
    }

    #[test]
    fn round_trip_and_corruption_is_detected() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::new(dir.path(), &engine).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        cache.put("abc", &component(&engine));
        assert!(cache.get(&engine, "abc").is_some());

        // Flip a byte in the payload: the entry is discarded, not deserialized.
        let path = cache.entry("abc");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        assert!(!path.exists(), "corrupt entry kept");

        // A truncated entry likewise.
        cache.put("abc", &component(&engine));
        std::fs::write(&path, b"short").unwrap();
        assert!(cache.get(&engine, "abc").is_none());
    }

    #[test]
    fn an_entry_with_a_valid_checksum_but_foreign_payload_is_rejected() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::new(dir.path(), &engine).unwrap();
        let payload = b"not a wasmtime artefact".to_vec();
        let mut bytes = Sha256::digest(&payload).to_vec();
        bytes.extend_from_slice(&payload);
        std::fs::write(cache.entry("x"), bytes).unwrap();
        assert!(cache.get(&engine, "x").is_none());
    }
}
