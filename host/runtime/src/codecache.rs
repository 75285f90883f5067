//! Compiled-code cache: serialized components keyed by the wasm's hash and the engine's
//! compatibility hash, so restarting or reloading a known plugin skips compilation.
//!
//! A cache entry is native code the host runs after wasmtime's `unsafe deserialize`, so
//! whoever can write the cache directory must not be able to get code run by writing an
//! entry. Every entry therefore carries an HMAC-SHA256 tag, under a key only the host
//! holds, over the entry's name (wasm digest and engine key: an authentic entry of one
//! plugin copied under another's name fails) and its payload; the tag is verified, in
//! constant time, before anything is deserialized. An entry that fails is logged and
//! compiled afresh (and overwritten).
//!
//! The key (`CacheKey`):
//! - by default random per process: nothing on disk can forge an entry, at the price that
//!   entries of earlier processes never verify, so the on-disk cache only pays off within
//!   one process lifetime (a reload of a plugin evicted from memory). Safe by default.
//! - from the file named by `KUBEWASM_CACHE_KEY_FILE` (at least 32 bytes; e.g. a Secret
//!   mounted read-only): entries survive restarts of the container. The file must not be
//!   inside the cache directory, whose writers are exactly who the key keeps out.
//!
//! Files: entries are written to a temp file created with `O_EXCL` and a random name in
//! the cache directory (mode 0600) and renamed into place; entries are opened with
//! `O_NOFOLLOW | O_NONBLOCK` and must be regular files under the size budget (a symlink
//! to `/dev/zero` or a FIFO is not read). The directory is pruned at start and after each
//! write: entries not used for `CacheLimits::max_age` are removed, then the least
//! recently used until the total is under `CacheLimits::max_bytes` (default 256 MiB,
//! a quarter of the 1 GiB emptyDir in `deploy/`, so an eviction never comes from the cache).
//!
//! wasmtime itself refuses artefacts from another version or engine configuration; the
//! key includes both anyway, so such entries are simply never looked up.

use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::artifact::{Artifact, ArtifactWriter, Origin};
use crate::engine::PluginEngine;
use crate::error::{EngineError, Error};

/// The environment variable naming a key file (see the module documentation).
pub const KEY_FILE_ENV: &str = "KUBEWASM_CACHE_KEY_FILE";

/// Shortest key file accepted, in bytes (after trimming surrounding whitespace).
pub const MIN_KEY_BYTES: usize = 32;

/// Largest key file read.
pub(crate) const MAX_KEY_FILE_BYTES: u64 = 4096;

/// Entry layout: magic, HMAC tag, payload.
const MAGIC: &[u8; 8] = b"kwcc\x00\x00\x00\x01";
const TAG_BYTES: usize = 32;
const HEADER_BYTES: usize = MAGIC.len() + TAG_BYTES;

/// Prefix of temp files; ones older than [`STALE_TEMP`] are leftovers of a crash.
const TEMP_PREFIX: &str = ".tmp-";
const STALE_TEMP: Duration = Duration::from_secs(600);
const ENTRY_SUFFIX: &str = ".cwasm";

type HmacSha256 = Hmac<Sha256>;

/// Whether a component came from the cache, and where it was compiled if not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Compiled now, in this process.
    Compiled,
    /// Compiled now, in a compile worker (see [`crate::compiler`]).
    CompiledInWorker,
    /// Loaded from the cache.
    Cached,
}

impl Source {
    /// For logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Compiled => "compiled",
            Source::CompiledInWorker => "compiled in a worker",
            Source::Cached => "cache hit",
        }
    }
}

/// The secret entries are authenticated with.
#[derive(Clone)]
pub(crate) struct CacheKey {
    bytes: Vec<u8>,
    /// Random for this process (entries of other processes never verify).
    ephemeral: bool,
    /// The file it was read from.
    file: Option<PathBuf>,
}

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheKey")
            .field("ephemeral", &self.ephemeral)
            .finish_non_exhaustive()
    }
}

impl CacheKey {
    /// A fresh random key for this process.
    pub(crate) fn random() -> Result<Self, Error> {
        let mut bytes = vec![0u8; 32];
        getrandom::fill(&mut bytes).map_err(EngineError::KeyRandomness)?;
        Ok(CacheKey {
            bytes,
            ephemeral: true,
            file: None,
        })
    }

    /// The key in `path` (surrounding whitespace trimmed, at least [`MIN_KEY_BYTES`]).
    pub(crate) fn from_file(path: &Path) -> Result<Self, Error> {
        let io = |source| Error::Io {
            context: format!("reading code cache key {}", path.display()),
            source,
        };
        let mut bytes = Vec::new();
        File::open(path)
            .map_err(io)?
            .take(MAX_KEY_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let start = bytes
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(bytes.len());
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(start, |e| e + 1);
        let key = bytes.get(start..end).unwrap_or_default().to_vec();
        if key.len() < MIN_KEY_BYTES || bytes.len() as u64 > MAX_KEY_FILE_BYTES {
            return Err(EngineError::KeyLength {
                path: path.to_path_buf(),
                len: key.len(),
            }
            .into());
        }
        Ok(CacheKey {
            bytes: key,
            ephemeral: false,
            file: Some(path.to_path_buf()),
        })
    }

    /// The key file named by [`KEY_FILE_ENV`], or a random key when it is unset.
    pub(crate) fn from_env() -> Result<Self, Error> {
        match std::env::var_os(KEY_FILE_ENV) {
            Some(path) if !path.is_empty() => Self::from_file(Path::new(&path)),
            _ => Self::random(),
        }
    }

    /// The MAC over an entry's name, to be fed its payload.
    fn mac_start(&self, name: &str) -> HmacSha256 {
        // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
        let mut mac = match HmacSha256::new_from_slice(&self.bytes) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC accepts any key length"),
        };
        mac.update(name.as_bytes());
        mac.update(&[0]);
        mac
    }
}

/// Size and age budget of the cache directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheLimits {
    /// Total bytes of entries kept; the least recently used go first.
    pub max_bytes: u64,
    /// Entries not used for this long are removed.
    pub max_age: Duration,
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            max_bytes: 256 << 20,
            max_age: Duration::from_secs(7 * 24 * 3600),
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
pub(crate) struct CodeCache {
    dir: PathBuf,
    engine_key: String,
    key: CacheKey,
    limits: CacheLimits,
}

/// Why an entry was not used.
enum Miss {
    /// No entry (the normal miss).
    Absent,
    /// Not a regular file (a symlink, a FIFO, a directory).
    NotAFile,
    /// Larger than the whole cache may be.
    TooLarge(u64),
    /// Not written by this host under this key, or altered since.
    Unauthenticated,
    /// Reading failed.
    Io(std::io::Error),
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Miss::Absent => f.write_str("absent"),
            Miss::NotAFile => f.write_str("not a regular file (symlinks are not followed)"),
            Miss::TooLarge(n) => write!(f, "{n} bytes, over the cache's budget"),
            Miss::Unauthenticated => {
                f.write_str("its tag does not verify under this host's key (written by someone else, or altered)")
            }
            Miss::Io(e) => write!(f, "reading: {e}"),
        }
    }
}

impl CodeCache {
    /// A cache in `dir` (created when missing) for `engine`'s configuration, keyed as the
    /// environment says ([`CacheKey::from_env`]), with the default budget.
    pub(crate) fn new(dir: &Path, engine: &PluginEngine) -> Result<Self, Error> {
        Self::with_key(dir, engine, CacheKey::from_env()?, CacheLimits::default())
    }

    /// A cache in `dir` with an explicit key and budget.
    pub(crate) fn with_key(
        dir: &Path,
        engine: &PluginEngine,
        key: CacheKey,
        limits: CacheLimits,
    ) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            context: format!("creating code cache {}", dir.display()),
            source,
        })?;
        if let Some(file) = &key.file {
            refuse_key_inside(dir, file)?;
        }
        if key.ephemeral {
            tracing::info!(
                dir = %dir.display(),
                "code cache entries are authenticated with a key random to this process: \
                 entries of earlier runs are recompiled (set {KEY_FILE_ENV} to keep them)"
            );
        }
        let mut h = ShaHasher(Sha256::new());
        env!("CARGO_PKG_VERSION").hash(&mut h);
        engine.engine().precompile_compatibility_hash().hash(&mut h);
        let engine_key = hex::encode(&h.0.finalize()[..8]);
        let cache = CodeCache {
            dir: dir.to_path_buf(),
            engine_key,
            key,
            limits,
        };
        cache.prune();
        Ok(cache)
    }

    /// The cache directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn name(&self, digest: &str) -> String {
        format!("{digest}-{}{ENTRY_SUFFIX}", self.engine_key)
    }

    fn entry(&self, digest: &str) -> PathBuf {
        self.dir.join(self.name(digest))
    }

    /// The cached component for wasm with this sha256 `digest`, if there is an authentic
    /// entry.
    pub(crate) fn get(&self, engine: &PluginEngine, digest: &str) -> Option<Component> {
        let path = self.entry(digest);
        let artifact = match self.read_verified(&path, &self.name(digest)) {
            Ok(a) => a,
            Err(Miss::Absent) => return None,
            Err(Miss::Unauthenticated) if self.key.ephemeral => {
                tracing::info!(entry = %path.display(), "code cache entry not written by this process; recompiling");
                return None;
            }
            Err(why) => {
                tracing::warn!(entry = %path.display(), reason = %why, "code cache entry refused; recompiling");
                return None;
            }
        };
        match artifact.load(engine) {
            Ok(c) => {
                // Least recently used goes first when pruning: a hit refreshes the entry.
                if let Ok(f) = File::options()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)
                {
                    let _ = f.set_modified(SystemTime::now());
                }
                Some(c)
            }
            Err(e) => {
                tracing::warn!(entry = %path.display(), error = %e, "code cache entry rejected by wasmtime; recompiling");
                None
            }
        }
    }

    /// The entry's payload, if it is a regular file within budget whose tag verifies.
    fn read_verified(&self, path: &Path, name: &str) -> Result<Artifact, Miss> {
        let file = match File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Absent),
            // O_NOFOLLOW on a symlink.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(Miss::NotAFile),
            Err(e) => return Err(Miss::Io(e)),
        };
        let meta = file.metadata().map_err(Miss::Io)?;
        if !meta.is_file() {
            return Err(Miss::NotAFile);
        }
        if meta.len() > self.limits.max_bytes {
            return Err(Miss::TooLarge(meta.len()));
        }
        let mut file = file.take(self.limits.max_bytes + 1);
        let mut header = [0u8; HEADER_BYTES];
        file.read_exact(&mut header).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Miss::Unauthenticated,
            _ => Miss::Io(e),
        })?;
        if &header[..MAGIC.len()] != MAGIC {
            return Err(Miss::Unauthenticated);
        }
        // The payload streams through the MAC into the artifact's unnamed file: no copy of
        // it is held in memory, and what is loaded is exactly what was verified.
        let mut mac = self.key.mac_start(name);
        let mut out = ArtifactWriter::new(Some(&self.dir));
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Miss::Io(e)),
            };
            mac.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(Miss::Io)?;
        }
        mac.verify_slice(&header[MAGIC.len()..])
            .map_err(|_| Miss::Unauthenticated)?;
        Ok(out.finish(Origin::VerifiedCacheEntry))
    }

    /// Store a compiled component. Failures only cost a recompile later, so they are logged.
    pub(crate) fn put(&self, digest: &str, component: &Component) {
        let path = self.entry(digest);
        let result = component
            .serialize()
            .map_err(|e| e.to_string())
            .and_then(|payload| self.write(&path, &self.name(digest), &payload));
        if let Err(e) = result {
            tracing::warn!(entry = %path.display(), error = %e, "could not write code cache entry");
        }
        self.prune();
    }

    fn write(&self, path: &Path, name: &str, payload: &[u8]) -> Result<(), String> {
        self.write_from(path, name, &mut &payload[..])
    }

    /// Write an entry whose payload is read from `payload`, in one pass: the tag is
    /// computed as the payload streams to the temp file and written into the header last.
    fn write_from(&self, path: &Path, name: &str, payload: &mut dyn Read) -> Result<(), String> {
        use std::io::{Seek, SeekFrom};
        // O_EXCL, a random name, mode 0600, in the cache directory (so the rename is atomic).
        // Dropped unpersisted (any error below), the temp file is removed.
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(&self.dir)
            .map_err(|e| e.to_string())?;
        tmp.write_all(MAGIC)
            .and_then(|()| tmp.write_all(&[0; TAG_BYTES]))
            .map_err(|e| e.to_string())?;
        let mut mac = self.key.mac_start(name);
        let mut buf = vec![0u8; 64 << 10];
        let mut total = HEADER_BYTES as u64;
        loop {
            let n = match payload.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            };
            total += n as u64;
            if total > self.limits.max_bytes {
                return Err(format!(
                    "over the cache's budget of {} bytes",
                    self.limits.max_bytes
                ));
            }
            mac.update(&buf[..n]);
            tmp.write_all(&buf[..n]).map_err(|e| e.to_string())?;
        }
        let tag = mac.finalize().into_bytes();
        let file = tmp.as_file_mut();
        file.seek(SeekFrom::Start(MAGIC.len() as u64))
            .and_then(|_| file.write_all(&tag))
            .map_err(|e| e.to_string())?;
        tmp.persist(path).map_err(|e| e.error.to_string())?;
        Ok(())
    }

    /// Store an artifact as it is (a worker's output), streaming it from its file: no
    /// serialized copy of the component is made in memory.
    pub(crate) fn put_artifact(&self, digest: &str, artifact: &Artifact) {
        let path = self.entry(digest);
        if let Err(e) = self.write_from(&path, &self.name(digest), &mut artifact.reader()) {
            tracing::warn!(entry = %path.display(), error = %e, "could not write code cache entry");
        }
        self.prune();
    }

    /// Remove entries unused for `max_age`, crash leftovers, then the least recently used
    /// entries until the rest fit in `max_bytes`. Symlinks and other non-files that look
    /// like entries are removed too (the link, never its target).
    pub(crate) fn prune(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let age = |m: &std::fs::Metadata| {
            m.modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default()
        };
        let mut entries = Vec::new();
        for e in read.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            let is_temp = name.starts_with(TEMP_PREFIX);
            if !(is_temp || name.ends_with(ENTRY_SUFFIX)) {
                continue;
            }
            let stale = if is_temp {
                age(&meta) > STALE_TEMP
            } else {
                !meta.is_file() || age(&meta) > self.limits.max_age
            };
            if stale {
                self.remove(&e.path(), "stale");
            } else if !is_temp {
                entries.push((meta.modified().unwrap_or(now), meta.len(), e.path()));
            }
        }
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        // Oldest first.
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.limits.max_bytes {
                break;
            }
            self.remove(&path, "over budget");
            total -= len;
        }
    }

    fn remove(&self, path: &Path, why: &str) {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!(entry = %path.display(), why, "code cache entry removed"),
            Err(e) => {
                tracing::debug!(entry = %path.display(), error = %e, "could not remove code cache entry")
            }
        }
    }
}

/// A key file inside the cache directory is writable by whoever the key keeps out.
fn refuse_key_inside(dir: &Path, key_file: &Path) -> Result<(), Error> {
    let (Ok(dir), Ok(key)) = (dir.canonicalize(), key_file.canonicalize()) else {
        return Ok(());
    };
    if key.starts_with(&dir) {
        return Err(EngineError::KeyInsideCache { key, dir }.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(engine: &PluginEngine, wat: &str) -> Component {
        let wasm = wat::parse_str(wat).unwrap();
        Component::new(engine.engine(), &wasm).unwrap()
    }

    const EMPTY: &str = "(component)";
    const OTHER: &str = "(component (core module (func (export \"f\"))))";

    fn cache(dir: &Path, engine: &PluginEngine, key: CacheKey) -> CodeCache {
        CodeCache::with_key(dir, engine, key, CacheLimits::default()).unwrap()
    }

    fn file_key(dir: &Path, text: &str) -> CacheKey {
        let path = dir.join("key");
        std::fs::write(&path, text).unwrap();
        CacheKey::from_file(&path).unwrap()
    }

    #[test]
    fn round_trip_and_corruption_is_detected() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), &engine, CacheKey::random().unwrap());
        assert!(cache.get(&engine, "abc").is_none());
        cache.put("abc", &component(&engine, EMPTY));
        assert!(cache.get(&engine, "abc").is_some());

        // Flip a byte in the payload: the entry is not deserialized.
        let path = cache.entry("abc");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        // A truncated entry likewise.
        std::fs::write(&path, b"short").unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        // And a fresh put replaces it.
        cache.put("abc", &component(&engine, EMPTY));
        assert!(cache.get(&engine, "abc").is_some());
    }

    #[test]
    fn a_streamed_artifact_is_stored_as_is_and_verifies() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), &engine, CacheKey::random().unwrap());
        let payload = component(&engine, EMPTY).serialize().unwrap();
        let mut w = ArtifactWriter::new(Some(dir.path()));
        w.write_all(&payload).unwrap();
        cache.put_artifact("abc", &w.finish(Origin::CompileWorker));
        // The same layout `put` writes: header, then the payload byte for byte.
        let entry = std::fs::read(cache.entry("abc")).unwrap();
        assert_eq!(&entry[HEADER_BYTES..], &payload[..]);
        assert!(cache.get(&engine, "abc").is_some());
        // Over the budget: nothing stored, nothing left behind.
        let small = CodeCache::with_key(
            dir.path(),
            &engine,
            CacheKey::random().unwrap(),
            CacheLimits {
                max_bytes: 100,
                ..CacheLimits::default()
            },
        )
        .unwrap();
        let mut w = ArtifactWriter::new(Some(dir.path()));
        w.write_all(&payload).unwrap();
        small.put_artifact("big", &w.finish(Origin::CompileWorker));
        assert!(!small.entry("big").exists());
        assert!(
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(Result::ok)
                .all(|e| !e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
        );
    }

    /// Someone who can write the cache directory but lacks the key: a valid wasmtime
    /// artefact (of another component) with a tag under another key, an authentic entry
    /// of another plugin copied under this one's name, and an old-format entry whose
    /// only protection was a sha256 prefix: none is deserialized.
    #[test]
    fn entries_not_written_under_the_hosts_key_are_not_executed() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let keys = tempfile::tempdir().unwrap();
        let key = file_key(keys.path(), &"k".repeat(40));
        let host = cache(dir.path(), &engine, key.clone());

        // The attacker's own cache (its own key) writes a real artefact of OTHER.
        let attacker = cache(dir.path(), &engine, CacheKey::random().unwrap());
        attacker.put("victim", &component(&engine, OTHER));
        assert!(
            attacker.get(&engine, "victim").is_some(),
            "attacker's entry is sound"
        );
        assert!(
            host.get(&engine, "victim").is_none(),
            "foreign entry was used"
        );

        // An authentic entry of another plugin renamed to the victim's digest.
        host.put("other", &component(&engine, OTHER));
        std::fs::copy(host.entry("other"), host.entry("victim")).unwrap();
        assert!(host.get(&engine, "other").is_some());
        assert!(
            host.get(&engine, "victim").is_none(),
            "renamed entry was used"
        );

        // The previous format: sha256(payload) ‖ payload.
        let payload = component(&engine, OTHER).serialize().unwrap();
        let mut old = Sha256::digest(&payload).to_vec();
        old.extend_from_slice(&payload);
        std::fs::write(host.entry("victim"), old).unwrap();
        assert!(
            host.get(&engine, "victim").is_none(),
            "checksummed entry was used"
        );

        // The same key from the same file in a new process verifies (restarts keep it).
        let again = cache(dir.path(), &engine, key);
        assert!(again.get(&engine, "other").is_some());
    }

    #[test]
    fn a_symlinked_entry_is_not_followed() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), &engine, CacheKey::random().unwrap());
        // An authentic entry, moved out and linked back in: still refused (a link could
        // as well point at /dev/zero or a FIFO).
        cache.put("abc", &component(&engine, EMPTY));
        let moved = elsewhere.path().join("entry");
        std::fs::rename(cache.entry("abc"), &moved).unwrap();
        std::os::unix::fs::symlink(&moved, cache.entry("abc")).unwrap();
        assert!(cache.get(&engine, "abc").is_none(), "symlink followed");
        std::fs::remove_file(cache.entry("abc")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", cache.entry("abc")).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        // Pruning removes the link, not its target.
        cache.prune();
        assert!(std::fs::symlink_metadata(cache.entry("abc")).is_err());
        assert!(moved.exists());
    }

    #[test]
    fn temp_files_have_random_names_and_leave_nothing_behind() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), &engine, CacheKey::random().unwrap());
        // A file squatting the old predictable temp name does not stop a write.
        std::fs::write(cache.entry("abc").with_extension("tmp1"), b"squat").unwrap();
        cache.put("abc", &component(&engine, EMPTY));
        assert!(cache.get(&engine, "abc").is_some());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.starts_with(TEMP_PREFIX)),
            "{names:?}"
        );
    }

    #[test]
    fn pruning_keeps_the_directory_under_budget_least_recently_used_first() {
        let engine = PluginEngine::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let one = cache(dir.path(), &engine, CacheKey::random().unwrap());
        one.put("probe", &component(&engine, OTHER));
        let size = std::fs::metadata(one.entry("probe")).unwrap().len();
        std::fs::remove_file(one.entry("probe")).unwrap();

        // Room for three entries.
        let limits = CacheLimits {
            max_bytes: size * 3 + size / 2,
            max_age: Duration::from_secs(3600),
        };
        let cache = CodeCache::with_key(dir.path(), &engine, one.key.clone(), limits).unwrap();
        let c = component(&engine, OTHER);
        let base = SystemTime::now() - Duration::from_secs(60);
        for (i, digest) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            cache.put(digest, &c);
            // Explicit, distinct use times (no sleeping): a is the oldest.
            File::options()
                .write(true)
                .open(cache.entry(digest))
                .unwrap()
                .set_modified(base + Duration::from_secs(i as u64))
                .unwrap();
        }
        cache.prune();
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= limits.max_bytes, "{total} > {}", limits.max_bytes);
        assert!(cache.get(&engine, "e").is_some());
        assert!(
            cache.get(&engine, "a").is_none(),
            "the oldest entry survived"
        );

        // An entry unused for longer than max_age goes at the next prune.
        File::options()
            .write(true)
            .open(cache.entry("e"))
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(7200))
            .unwrap();
        cache.prune();
        assert!(!cache.entry("e").exists());
    }

    #[test]
    fn key_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, "too short\n").unwrap();
        let err = CacheKey::from_file(&short).unwrap_err().to_string();
        assert!(err.contains("32"), "{err}");
        let key = file_key(dir.path(), &format!("  {}\n", "z".repeat(32)));
        assert_eq!(key.bytes.len(), 32);
        assert!(!key.ephemeral);
        // A key inside the cache directory is refused.
        let cache_dir = dir.path().join("cache");
        std::fs::create_dir(&cache_dir).unwrap();
        std::fs::write(cache_dir.join("key"), "z".repeat(32)).unwrap();
        assert!(refuse_key_inside(&cache_dir, &cache_dir.join("key")).is_err());
        assert!(refuse_key_inside(&cache_dir, &dir.path().join("key")).is_ok());
    }
}
