//! The per-user compiled-code cache every command that compiles on a developer's machine
//! shares (`build`, `test`, `inspect`, `approve`, `plan`, `rbac`, `dev`), so a big
//! component (Python, JavaScript) compiles once per version, whichever command comes
//! first. `run` keeps its own (in a pod, the key of the cache-key Secret).
//!
//! It is `$XDG_CACHE_HOME/kubewasm/code` (else `~/.cache/kubewasm/code`), its entries
//! authenticated with the key in `code.key` beside it (created 0600 on first use, in a
//! 0700 directory): only the user can write entries the next run trusts. `--cache-dir` /
//! `KUBEWASM_CACHE_DIR` choose another directory, keyed with the same per-user key (so
//! two commands given the same directory trust each other's entries);
//! `KUBEWASM_CACHE_KEY_FILE` names another key, and alone keeps the old behaviour (no
//! disk cache).

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use kubewasm::runtime::codecache::{KEY_FILE_ENV, MIN_KEY_BYTES};
use kubewasm::runtime::compiler::DEFAULT_COMPILE_ADDRESS_SPACE;
use kubewasm::runtime::{LoadOptions, Loader, PluginEngine};

/// `--cache-dir` of every command that compiles but `run`: one text, as the cache is one.
pub const CACHE_DIR_HELP: &str = "Keep compiled plugins here (a big component then loads in milliseconds instead \
     of compiling for seconds). Default: the per-user cache $XDG_CACHE_HOME/kubewasm/code (else \
     ~/.cache/kubewasm/code). Entries are keyed with KUBEWASM_CACHE_KEY_FILE, else the per-user \
     key code.key beside the per-user cache, so build, test, inspect, approve, plan, rbac and dev \
     reuse each other's compiled code";

/// Where compiled code is kept, and under which key.
#[derive(Debug, Default, Clone)]
pub struct CodeCache {
    /// The cache directory; None: memory only.
    pub dir: Option<PathBuf>,
    /// The key file; None: as the environment says.
    pub key_file: Option<PathBuf>,
}

impl CodeCache {
    /// The cache a command uses given its `--cache-dir`: that directory, or the per-user
    /// default when no cache setting is given; keyed with `KUBEWASM_CACHE_KEY_FILE` when
    /// set, else with the per-user key. Without a usable home (no HOME, read-only), a
    /// given directory is keyed per process and the default is memory only.
    pub fn choose(cache_dir: Option<PathBuf>) -> Self {
        let key_from_env = std::env::var_os(KEY_FILE_ENV).is_some_and(|v| !v.is_empty());
        if key_from_env {
            return CodeCache {
                dir: cache_dir,
                key_file: None,
            };
        }
        match (per_user(), cache_dir) {
            (Ok((dir, key)), given) => CodeCache {
                dir: Some(given.unwrap_or(dir)),
                key_file: Some(key),
            },
            (Err(e), given) => {
                tracing::debug!(error = %e, "no per-user code cache key");
                CodeCache {
                    dir: given,
                    key_file: None,
                }
            }
        }
    }

    /// The loader of the offline commands (`inspect`, `approve`, `rbac --plugins`), through
    /// this cache. Operators run them on plugins others wrote, so plugins compile in a
    /// worker process under the same bounds as `run` (address space, `compile_timeout`).
    /// The one place they get it from.
    pub fn loader(
        &self,
        compile_timeout: std::time::Duration,
    ) -> Result<Loader, kubewasm::runtime::Error> {
        let engine = PluginEngine::new()?;
        let options = LoadOptions {
            compiler: super::worker_compiler(compile_timeout, DEFAULT_COMPILE_ADDRESS_SPACE)?,
            ..LoadOptions::default()
        };
        match (&self.dir, &self.key_file) {
            (Some(dir), Some(key)) => Loader::with_key_file(engine, options, dir, key),
            (dir, _) => Loader::new(engine, options, dir.as_deref()),
        }
    }

    /// Whether entries written now serve the next run.
    pub fn persistent(&self) -> bool {
        self.dir.is_some()
            && (self.key_file.is_some()
                || std::env::var_os(KEY_FILE_ENV).is_some_and(|v| !v.is_empty()))
    }
}

/// `$XDG_CACHE_HOME/kubewasm`, else `~/.cache/kubewasm`.
fn base() -> Option<PathBuf> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    nonempty("XDG_CACHE_HOME")
        .map(|c| PathBuf::from(c).join("kubewasm"))
        .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache/kubewasm")))
}

/// The per-user cache directory and its key file, the key created when missing.
fn per_user() -> std::io::Result<(PathBuf, PathBuf)> {
    let base = base().ok_or_else(|| std::io::Error::other("neither XDG_CACHE_HOME nor HOME"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)?;
    // The key stays outside the entries' directory, as the code cache requires.
    let key = base.join("code.key");
    if !key.exists() {
        create_key(&key)?;
    }
    Ok((base.join("code"), key))
}

/// Write a random key to `path`, 0600, atomically: written in full to a temp file, then
/// linked into place (a concurrent first run links its own or reads this one, never a
/// half-written key).
fn create_key(path: &Path) -> std::io::Result<()> {
    let mut bytes = [0u8; MIN_KEY_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        writeln!(f, "{hex}")?;
        f.sync_all()
    })();
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_created_once_private_and_long_enough() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("code.key");
        create_key(&key).unwrap();
        let first = std::fs::read_to_string(&key).unwrap();
        assert!(first.trim().len() >= MIN_KEY_BYTES, "{first}");
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A second creation (a concurrent first run) keeps the first key.
        create_key(&key).unwrap();
        assert_eq!(std::fs::read_to_string(&key).unwrap(), first);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
