//! Loading plugins: the plugin directory's layout, and plugin files compiled through the
//! compiled-code cache.
//!
//! A plugin is `NAME.wasm`, optionally with settings in `NAME.yaml`, `NAME.yml` or
//! `NAME.json` beside it. Hidden entries (Kubernetes volume internals such as `..data`)
//! are skipped; symlinks are followed, so ConfigMap and Secret volumes work.

use kubewasm_core::sync::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use wasmtime::component::Component;

use crate::Error;
use crate::codecache::{CodeCache, Source};
use crate::engine::PluginEngine;
use crate::error::ManifestRejection;
use crate::limits::Limits;
use crate::plugin::{CompiledPlugin, InstancePolicy, compile};

/// How plugins are loaded.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Limits applied to every plugin.
    pub limits: Limits,
    /// Reuse instances between calls.
    pub reuse_instances: bool,
    /// Instances kept per plugin (= the dispatch concurrency).
    pub pool_size: usize,
    /// Where plugins are compiled.
    pub compiler: crate::compiler::Compiler,
    /// The host-wide memory budget of calls in flight (see [`crate::budget`]); unbounded
    /// by default.
    pub call_budget: crate::budget::CallBudget,
    /// The operator's ceilings on one plugin's limits; none by default.
    pub ceilings: LimitCeilings,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            limits: Limits::default(),
            reuse_instances: true,
            pool_size: 4,
            compiler: crate::compiler::Compiler::InProcess,
            call_budget: crate::budget::CallBudget::unbounded(),
            ceilings: LimitCeilings::default(),
        }
    }
}

/// The plugin files in `dir`, sorted.
pub fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
        context: format!("reading plugin directory {}", dir.display()),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && p.extension().is_some_and(|e| e == "wasm") && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Largest plugin component read (the Python and JavaScript runtimes bundle an
/// interpreter: their components are ~12–20 MB).
pub(crate) const MAX_COMPONENT_BYTES: u64 = 128 << 20;
/// Largest settings file read.
pub(crate) const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// Why a file of the plugin directory was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileRefusal {
    /// A symlink that leads out of the plugin directory (e.g. to a service-account
    /// token): the plugin would be handed a file it has no business reading.
    #[error("it resolves to {0}, outside the plugin directory")]
    OutsideDirectory(PathBuf),
    /// Over the size limit.
    #[error("it is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Read a file of the plugin directory: it must resolve (through any symlinks, as
/// ConfigMap volumes' `..data` links do) to a regular file inside that directory, and be
/// at most `max` bytes. The check and the open are one step ([`open_beneath`]), so a link
/// swapped between them cannot hand out a file elsewhere.
pub(crate) fn read_confined(path: &Path, max: u64) -> Result<Vec<u8>, FileRefusal> {
    read_confined_with(path, max, || {})
}

/// [`read_confined`], running `before_open` between opening the directory and opening
/// the file in it: the window the tests swap a link in.
fn read_confined_with(
    path: &Path,
    max: u64,
    before_open: impl FnOnce(),
) -> Result<Vec<u8>, FileRefusal> {
    use std::io::Read;
    // A bare file name's parent is "", which is ".".
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?;
    let file = open_beneath(dir, name, before_open)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file").into(),
        );
    }
    let size = meta.len();
    if size > max {
        return Err(FileRefusal::TooLarge { size, max });
    }
    // The file may grow between the check and the read: read at most one byte more.
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(FileRefusal::TooLarge {
            size: bytes.len() as u64,
            max,
        });
    }
    Ok(bytes)
}

/// Open `name` for reading inside `dir`, following symlinks only while they stay beneath
/// `dir`: `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to a descriptor of
/// the directory, which the kernel resolves and checks in one step (absolute links and
/// `..` past the directory are refused). Without `openat2` (Linux before 5.6, or a
/// seccomp profile that denies it), the file is opened and the path its descriptor
/// really has (`/proc/self/fd`) is checked instead: what is checked is what was opened.
/// Non-blocking, so a FIFO planted in the directory cannot hang the open.
fn open_beneath(
    dir: &Path,
    name: &std::ffi::OsStr,
    before_open: impl FnOnce(),
) -> Result<std::fs::File, FileRefusal> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    let dirfd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    before_open();
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(&dirfd, name, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(std::fs::File::from(fd)),
        // The resolution left the directory. Where it leads, for the message only.
        Err(Errno::XDEV) => Err(FileRefusal::OutsideDirectory(
            dir.join(name)
                .canonicalize()
                .unwrap_or_else(|_| dir.join(name)),
        )),
        Err(Errno::NOSYS | Errno::PERM) => {
            let fd = rustix::fs::openat(&dirfd, name, flags, Mode::empty())
                .map_err(std::io::Error::from)?;
            let file = std::fs::File::from(fd);
            check_descriptor_beneath(&file, &dirfd)?;
            Ok(file)
        }
        Err(e) => Err(std::io::Error::from(e).into()),
    }
}

/// Refuse an open `file` whose real path (as the kernel names its descriptor) is not
/// beneath the directory `dir` is a descriptor of.
fn check_descriptor_beneath(
    file: &impl std::os::fd::AsRawFd,
    dir: &impl std::os::fd::AsRawFd,
) -> Result<(), FileRefusal> {
    let real = |fd: i32| std::fs::read_link(format!("/proc/self/fd/{fd}"));
    let (file_path, dir_path) = (real(file.as_raw_fd())?, real(dir.as_raw_fd())?);
    if file_path.starts_with(&dir_path) && file_path != dir_path {
        Ok(())
    } else {
        Err(FileRefusal::OutsideDirectory(file_path))
    }
}

/// The settings file beside a plugin, converted to JSON text.
pub(crate) fn read_settings(wasm: &Path) -> Result<Option<String>, Error> {
    for ext in ["yaml", "yml", "json"] {
        let path = wasm.with_extension(ext);
        if !path.is_file() {
            continue;
        }
        let bad = |reason: String| Error::Settings {
            path: wasm.to_path_buf(),
            settings: path.clone(),
            reason,
        };
        let bytes = read_confined(&path, MAX_SETTINGS_BYTES).map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
        let value: serde_json::Value = if ext == "json" {
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?
        } else {
            serde_yaml_ng::from_str(&text).map_err(|e| bad(e.to_string()))?
        };
        return Ok(Some(value.to_string()));
    }
    Ok(None)
}

/// A plugin file as read from disk: its bytes, settings, and a fingerprint of both.
pub struct PluginFile {
    /// The `.wasm` path.
    pub path: PathBuf,
    /// The component bytes.
    pub bytes: Vec<u8>,
    /// sha256 of the bytes, hex.
    pub digest: String,
    /// The settings as JSON text, without the host's own `kubewasm` key.
    pub settings: Option<String>,
    /// Per-plugin limit overrides from the settings' `kubewasm` key.
    pub overrides: LimitOverrides,
    /// The namespace of the `NamespacedPlugin` it comes from (None: a cluster plugin):
    /// its calls take that namespace's part of the call budget ([`Limits::tenant`]).
    pub tenant: Option<String>,
}

/// Limits an operator sets for one plugin under the `kubewasm` key of its settings file
/// (the key is removed before the plugin sees its settings), or in `spec.limits` of its
/// Plugin object (which then replaces the settings file's):
///
/// ```yaml
/// kubewasm:
///   callDeadline: 5s
///   memoryMiB: 512
///   maxIntents: 1000
///   maxIntentKiB: 2048
///   maxLogLines: 500
///   recycleAfterCalls: 1000
///   poolMemoryMiB: 256
///   maxInstances: 4
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitOverrides {
    /// Deadline of one call, e.g. `5s`.
    #[serde(
        default,
        with = "humantime_serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub call_deadline: Option<std::time::Duration>,
    /// Memory cap in MiB.
    #[serde(default, rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<usize>,
    /// Maximum intents per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_intents: Option<usize>,
    /// Maximum size of one intent in KiB.
    #[serde(
        default,
        rename = "maxIntentKiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_intent_kib: Option<usize>,
    /// Maximum log lines per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_log_lines: Option<usize>,
    /// Calls after which a pooled instance is recycled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recycle_after_calls: Option<u64>,
    /// Memory the plugin's pooled instances may hold together, in MiB.
    #[serde(
        default,
        rename = "poolMemoryMiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub pool_memory_mib: Option<usize>,
    /// Instances alive at once (0: derived from `poolMemoryMiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_instances: Option<usize>,
}

mod humantime_serde_opt {
    use serde::Deserialize;

    pub(super) fn serialize<S: serde::Serializer>(
        d: &Option<std::time::Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<std::time::Duration>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| humantime::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// Largest `memoryMiB` and `poolMemoryMiB` accepted (64 GiB): past it the byte count is
/// not a limit anyone means, and near `usize::MAX >> 20` the shift would wrap to a tiny cap.
pub const MAX_MEMORY_MIB: usize = 64 << 10;
/// Largest `maxIntentKiB` accepted (4 GiB, the most one canonical-ABI string can hold).
pub const MAX_INTENT_KIB: usize = 4 << 20;
/// Longest `callDeadline` accepted: its wall-clock backstop ([`crate::limits::WALL_CLOCK_FACTOR`]
/// times it) must stay a duration the host can compute.
pub(crate) const MAX_CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3600);

impl LimitOverrides {
    /// Refuse values that cannot be a limit: zero or past the maximum for sizes and the
    /// deadline. Called when the settings are read, so [`LimitOverrides::apply`] only sees
    /// values whose conversion to bytes cannot overflow.
    pub fn validate(&self) -> Result<(), String> {
        let sizes = [
            ("memoryMiB", self.memory_mib, MAX_MEMORY_MIB),
            ("poolMemoryMiB", self.pool_memory_mib, MAX_MEMORY_MIB),
            ("maxIntentKiB", self.max_intent_kib, MAX_INTENT_KIB),
        ];
        for (key, value, max) in sizes {
            match value {
                Some(0) => return Err(format!("kubewasm.{key}: must be at least 1")),
                Some(v) if v > max => {
                    return Err(format!("kubewasm.{key}: {v} is over the maximum of {max}"));
                }
                _ => {}
            }
        }
        match self.call_deadline {
            Some(d) if d.is_zero() => Err("kubewasm.callDeadline: must be longer than 0s".into()),
            Some(d) if d > MAX_CALL_DEADLINE => Err(format!(
                "kubewasm.callDeadline: {} is over the maximum of {}",
                humantime::format_duration(d),
                humantime::format_duration(MAX_CALL_DEADLINE)
            )),
            _ => Ok(()),
        }
    }

    /// `base` with these overrides applied. Sizes saturate rather than wrap; values out of
    /// range never get here from a settings file ([`LimitOverrides::validate`]).
    pub fn apply(&self, base: &Limits) -> Limits {
        Limits {
            deadline: self.call_deadline.unwrap_or(base.deadline),
            memory: self
                .memory_mib
                .map(|m| m.saturating_mul(1 << 20))
                .unwrap_or(base.memory),
            max_intents: self.max_intents.unwrap_or(base.max_intents),
            max_intent_bytes: self
                .max_intent_kib
                .map(|k| k.saturating_mul(1 << 10))
                .unwrap_or(base.max_intent_bytes),
            max_log_lines: self.max_log_lines.unwrap_or(base.max_log_lines),
            recycle_after_calls: self.recycle_after_calls.unwrap_or(base.recycle_after_calls),
            pool_memory: self
                .pool_memory_mib
                .map(|m| m.saturating_mul(1 << 20))
                .unwrap_or(base.pool_memory),
            max_instances: self.max_instances.unwrap_or(base.max_instances),
            tenant: base.tenant.clone(),
        }
    }
}

/// The operator's ceilings on what one plugin's limits may ask for
/// (`--max-plugin-memory-mib`, `--max-plugin-call-deadline`, `--max-plugin-instances`):
/// a plugin whose settings file or Plugin object (`spec.limits`) asks above one is
/// refused at load, naming the key and the ceiling. None: no ceiling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitCeilings {
    /// Largest `memoryMiB`.
    pub memory_mib: Option<usize>,
    /// Longest `callDeadline`.
    pub call_deadline: Option<std::time::Duration>,
    /// Largest `maxInstances` (0, derived, stays within `--concurrency` and two per CPU).
    pub instances: Option<usize>,
}

impl LimitCeilings {
    /// Why `limits` ask above a ceiling, if they do (the first key over its ceiling, as
    /// `spec.limits` names it, with the flag that sets the ceiling).
    pub fn check(&self, limits: &LimitOverrides) -> Result<(), String> {
        let over = |key: &str, asked: String, ceiling: String, flag: &str| {
            Err(format!(
                "{key}: {asked} is over the host's ceiling of {ceiling} ({flag})"
            ))
        };
        if let (Some(asked), Some(max)) = (limits.memory_mib, self.memory_mib)
            && asked > max
        {
            return over(
                "memoryMiB",
                asked.to_string(),
                max.to_string(),
                "--max-plugin-memory-mib",
            );
        }
        if let (Some(asked), Some(max)) = (limits.call_deadline, self.call_deadline)
            && asked > max
        {
            return over(
                "callDeadline",
                humantime::format_duration(asked).to_string(),
                humantime::format_duration(max).to_string(),
                "--max-plugin-call-deadline",
            );
        }
        if let (Some(asked), Some(max)) = (limits.max_instances, self.instances)
            && asked > max
        {
            return over(
                "maxInstances",
                asked.to_string(),
                max.to_string(),
                "--max-plugin-instances",
            );
        }
        Ok(())
    }
}

impl PluginFile {
    /// Read a plugin and its settings.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let bytes = read_confined(path, MAX_COMPONENT_BYTES).map_err(|reason| match reason {
            FileRefusal::Io(source) => Error::Read {
                path: path.to_path_buf(),
                source,
            },
            reason => Error::Refused {
                path: path.to_path_buf(),
                reason,
            },
        })?;
        let split = split_settings(path, &path.with_extension("yaml"), read_settings(path)?)?;
        let digest = hex::encode(Sha256::digest(&bytes));
        Ok(PluginFile {
            path: path.to_path_buf(),
            bytes,
            digest,
            settings: split.settings,
            overrides: split.overrides.unwrap_or_default(),
            tenant: None,
        })
    }

    /// Put `settings` (what a settings file would hold, read from `source`) in place of
    /// the file's, as `kubewasm test` does with a case's `settings:`. The plugin's part
    /// replaces the file's. The host's `kubewasm` key replaces the file's limits when it
    /// sets any; without it the settings file's limits stay.
    pub fn set_settings(
        &mut self,
        settings: &serde_json::Value,
        source: &Path,
    ) -> Result<(), Error> {
        let split = split_settings(&self.path, source, Some(settings.to_string()))?;
        self.settings = split.settings;
        if let Some(overrides) = split.overrides {
            self.overrides = overrides;
        }
        Ok(())
    }

    /// The name the plugin must give itself: its file's name without `.wasm` (what its
    /// approval is looked up by before it is described).
    pub fn name(&self) -> String {
        Self::name_of(&self.path)
    }

    /// The name a plugin file at `path` must give itself.
    pub fn name_of(path: &Path) -> String {
        crate::plugin::file_stem(path)
    }

    /// Changes when the component, its settings or its limits change (not its approval:
    /// see [`crate::approval::Approvals::fingerprint_of`]).
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.digest.as_bytes());
        h.update(self.settings.as_deref().unwrap_or("").as_bytes());
        h.update(format!("{:?}", self.overrides).as_bytes());
        hex::encode(h.finalize())
    }
}

/// A loaded plugin and how it was obtained.
pub struct Loaded {
    /// The plugin.
    pub plugin: CompiledPlugin,
    /// Compiled now or taken from the code cache.
    pub source: Source,
    /// Time from file bytes to a described plugin.
    pub took: std::time::Duration,
    /// The operator's approval the manifest was bounded by ([`Loader::load_approved`]);
    /// None after [`Loader::load`], or when nothing was approved.
    pub approval: Option<kubewasm_core::grant::Approval>,
}

/// Compiles and links plugins, through an in-memory and an optional on-disk code cache.
pub struct Loader {
    engine: PluginEngine,
    options: LoadOptions,
    disk: Option<CodeCache>,
    memory: Mutex<HashMap<String, Component>>,
}

impl Loader {
    /// A loader; `cache_dir` enables the on-disk compiled-code cache.
    pub fn new(
        engine: PluginEngine,
        options: LoadOptions,
        cache_dir: Option<&Path>,
    ) -> Result<Self, Error> {
        let disk = cache_dir.map(|d| CodeCache::new(d, &engine)).transpose()?;
        let engine = engine.with_call_budget(options.call_budget.clone());
        Ok(Loader {
            engine,
            options,
            disk,
            memory: Mutex::new(HashMap::new()),
        })
    }

    /// Like [`Loader::new`] with a cache directory, its entries authenticated with the key
    /// in `key_file` rather than as the environment says: the CLI's per-user cache, whose
    /// key it keeps beside the directory.
    pub fn with_key_file(
        engine: PluginEngine,
        options: LoadOptions,
        cache_dir: &Path,
        key_file: &Path,
    ) -> Result<Self, Error> {
        let key = crate::codecache::CacheKey::from_file(key_file)?;
        let disk = CodeCache::with_key(cache_dir, &engine, key, Default::default())?;
        let engine = engine.with_call_budget(options.call_budget.clone());
        Ok(Loader {
            engine,
            options,
            disk: Some(disk),
            memory: Mutex::new(HashMap::new()),
        })
    }

    /// The engine plugins are compiled with.
    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// The instance policy of the loader's options.
    fn instances(&self) -> InstancePolicy {
        InstancePolicy {
            reuse: self.options.reuse_instances,
            pool_size: self.options.pool_size,
        }
    }

    /// A plugin as `run` serves it, under the operator's `approvals`: limits from its
    /// Plugin object's `spec.limits` when it sets any (looked up by the file's name, which
    /// the plugin must give itself), loaded ([`Loader::load`]), then bounded by the
    /// approval of its manifest's name (`kubewasm_core::grant::approve`): refused with
    /// [`Error::NotApproved`] when it asks for more (nothing approved: anything it
    /// watches, reads or writes is more), or [`Error::ApprovalUnusable`]; its grants'
    /// finalizers filled with those approved.
    pub async fn load_approved(
        &self,
        file: PluginFile,
        approvals: &crate::approval::Approvals,
    ) -> Result<Loaded, Error> {
        self.load_approved_as(file, approvals, self.instances())
            .await
    }

    /// [`Loader::load_approved`] with its own instance policy (`kubewasm test` runs a case
    /// on a fresh or a reused instance).
    pub async fn load_approved_as(
        &self,
        mut file: PluginFile,
        approvals: &crate::approval::Approvals,
        instances: InstancePolicy,
    ) -> Result<Loaded, Error> {
        if let Some(limits) = approvals.limits(&file.name()) {
            file.overrides = limits.clone();
        }
        let mut loaded = self.load_as(file, instances).await?;
        let name = loaded.plugin.name().to_string();
        if let Some(reason) = approvals.problem(&name) {
            return Err(Error::ApprovalUnusable {
                plugin: name,
                reason: reason.to_string(),
            });
        }
        let approval = approvals.get(&name);
        kubewasm_core::grant::approve(&mut loaded.plugin.manifest, approval)?;
        loaded.approval = approval.cloned();
        Ok(loaded)
    }

    /// Compile (or fetch from cache), link, describe and validate, without the operator's
    /// approval (what `inspect` shows: the plugin's own answer).
    pub async fn load(&self, file: PluginFile) -> Result<Loaded, Error> {
        self.load_as(file, self.instances()).await
    }

    /// [`Loader::load`] with its own instance policy (`kubewasm test` runs a case the
    /// author's way, approving what the plugin asks for, when no approval is given).
    pub async fn load_as(
        &self,
        mut file: PluginFile,
        instances: InstancePolicy,
    ) -> Result<Loaded, Error> {
        let started = std::time::Instant::now();
        // Before any compile: whatever set them (its settings file, its Plugin object).
        self.options
            .ceilings
            .check(&file.overrides)
            .map_err(|reason| Error::OverCeiling {
                path: file.path.clone(),
                reason,
            })?;
        let (component, source) = self.component(&mut file).await?;
        let settings = file.settings.clone();
        let limits = Limits {
            tenant: file.tenant.clone(),
            ..file.overrides.apply(&self.options.limits)
        };
        let plugin = CompiledPlugin::new(
            &self.engine,
            &file.path,
            component,
            file.digest,
            file.settings,
            limits,
            instances,
        )
        .await
        .map_err(|e| takes_no_settings(e, settings.as_deref()))?;
        Ok(Loaded {
            plugin,
            source,
            took: started.elapsed(),
            approval: None,
        })
    }

    /// The file's compiled component: from the in-memory cache, the on-disk cache, or
    /// compiled now (and then cached). Takes the file's bytes when it compiles.
    pub async fn component(&self, file: &mut PluginFile) -> Result<(Component, Source), Error> {
        let in_memory = lock(&self.memory).get(&file.digest).cloned();
        let cached = in_memory.or_else(|| {
            self.disk
                .as_ref()
                .and_then(|d| d.get(&self.engine, &file.digest))
        });
        let (component, source) = match cached {
            Some(c) => {
                // The bytes are only needed to compile: free them before instantiating.
                file.bytes = Vec::new();
                (c, Source::Cached)
            }
            None => {
                let code_dir = self
                    .disk
                    .as_ref()
                    .map(|d| d.dir().to_path_buf())
                    .unwrap_or_else(std::env::temp_dir);
                let (c, how, artifact) = compile(
                    &self.options.compiler,
                    &self.engine,
                    &file.path,
                    std::mem::take(&mut file.bytes),
                    Some(&code_dir),
                )
                .await?;
                match (&self.disk, &artifact) {
                    (Some(d), Some(a)) => d.put_artifact(&file.digest, a),
                    (Some(d), None) => d.put(&file.digest, &c),
                    (None, _) => {}
                }
                (c, how)
            }
        };
        lock(&self.memory).insert(file.digest.clone(), component.clone());
        Ok((component, source))
    }

    /// Forget in-memory components no loaded plugin uses any more.
    pub fn retain(&self, digests: &std::collections::HashSet<String>) {
        lock(&self.memory).retain(|d, _| digests.contains(d));
    }
}

/// Settings split into the plugin's part and the host's (`kubewasm`) key.
struct SplitSettings {
    /// The settings without the host's part (None: nothing left for the plugin).
    settings: Option<String>,
    /// The limits the host's part sets (None: it sets none).
    overrides: Option<LimitOverrides>,
}

/// Take the host's `kubewasm` key out of the settings of the plugin at `path`, read from
/// `source` (named in errors).
fn split_settings(
    path: &Path,
    source: &Path,
    settings: Option<String>,
) -> Result<SplitSettings, Error> {
    let bad = |reason: String| Error::Settings {
        path: path.to_path_buf(),
        settings: source.to_path_buf(),
        reason,
    };
    let Some(text) = settings else {
        return Ok(SplitSettings {
            settings: None,
            overrides: None,
        });
    };
    // A document YAML accepts but JSON cannot read back (nested past serde_json's depth
    // limit) is refused: read as null it would hide the `kubewasm` key from the host and
    // hand it to the plugin.
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not representable as JSON: {e}")))?;
    let Some(host_part) = value.as_object_mut().and_then(|o| o.remove("kubewasm")) else {
        return Ok(SplitSettings {
            settings: Some(text),
            overrides: None,
        });
    };
    // Approvals used to live here, beside the plugin: whoever shipped the plugin approved
    // it. Refused with where they live now, rather than silently ignored.
    if host_part.get("approved").is_some() {
        return Err(bad(MOVED_APPROVAL.into()));
    }
    let sets_limits = host_part.as_object().is_none_or(|o| !o.is_empty());
    let overrides: LimitOverrides =
        serde_json::from_value(host_part).map_err(|e| bad(format!("kubewasm limits: {e}")))?;
    overrides.validate().map_err(bad)?;
    // A file holding only the host's key gives the plugin no settings.
    let settings = match value.as_object() {
        Some(o) if o.is_empty() => None,
        _ => Some(value.to_string()),
    };
    Ok(SplitSettings {
        settings,
        overrides: sets_limits.then_some(overrides),
    })
}

/// Why `kubewasm.approved` in a settings file is refused.
const MOVED_APPROVAL: &str = "kubewasm.approved: approvals no longer live in the plugin's \
settings file (it ships with the plugin, so whoever ships the plugin would approve it): \
the operator approves a plugin in spec.permissions of its Plugin object \
(kubewasm.dev/v1alpha1), given to the host with --approvals FILE|DIR in directory mode or \
applied to the cluster; `kubewasm approve FILE.wasm` prints one to review. Remove the \
`approved` key here";

/// A plugin whose settings type has no fields refuses any key with serde's "unknown field
/// `x`, there are no fields" (Go layers before issue 23: "expected one of " and nothing
/// after), which reads like a bug in the plugin; when the key is one of the settings' own,
/// say plainly that the plugin takes no settings: they are leftovers.
fn takes_no_settings(e: Error, settings: Option<&str>) -> Error {
    let Error::Manifest { path, reason } = e else {
        return e;
    };
    let ManifestRejection::Refused(msg) = *reason else {
        return Error::Manifest { path, reason };
    };
    let msg = explain_no_settings(msg, settings);
    Error::Manifest {
        path,
        reason: Box::new(ManifestRejection::Refused(msg)),
    }
}

fn explain_no_settings(msg: String, settings: Option<&str>) -> String {
    let Some((head, rest)) = msg.split_once("unknown field `") else {
        return msg;
    };
    let Some((field, tail)) = rest.split_once('`') else {
        return msg;
    };
    let no_fields = tail == ", expected one of " || tail.starts_with(", there are no fields");
    let top_level = settings
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .is_some_and(|v| v.get(field).is_some());
    if !no_fields || !top_level {
        return msg;
    }
    format!(
        "{head}unknown field `{field}`: the plugin takes no settings (leftovers in its \
         settings file? only the host's `kubewasm` key belongs there)"
    )
}

/// Read, compile, link and describe one plugin file (no code cache).
pub async fn load_plugin(
    engine: &PluginEngine,
    path: &Path,
    options: &LoadOptions,
) -> Result<CompiledPlugin, Error> {
    let loader = Loader::new(engine.clone(), options.clone(), None)?;
    Ok(loader.load(PluginFile::read(path)?).await?.plugin)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leftover settings of a plugin that takes none are named as such, whatever layer
    /// worded the refusal; a nested field or a plugin with fields keeps its message.
    #[test]
    fn a_plugin_without_settings_says_so() {
        let settings = Some(r#"{"suffix": "copy", "a": {"b": 1}}"#);
        for msg in [
            "invalid settings: unknown field `suffix`, expected one of ",
            "invalid settings: unknown field `suffix`, there are no fields at line 1 column 9",
        ] {
            assert_eq!(
                explain_no_settings(msg.into(), settings),
                "invalid settings: unknown field `suffix`: the plugin takes no settings \
                 (leftovers in its settings file? only the host's `kubewasm` key belongs there)"
            );
        }
        for msg in [
            "invalid settings: unknown field `suffix`, expected `prefix`",
            "invalid settings: unknown field `b`, there are no fields",
            "invalid settings: unknown field `a.b`, there are no fields",
        ] {
            assert_eq!(explain_no_settings(msg.into(), settings), msg);
        }
    }

    #[test]
    fn lists_wasm_files_and_skips_hidden_entries() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.wasm", "a.wasm", ".hidden.wasm", "a.yaml", "notes.txt"] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        let names: Vec<_> = plugin_files(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.wasm", "b.wasm"]);
    }

    #[test]
    fn the_kubewasm_key_sets_limits_and_is_hidden_from_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"x").unwrap();
        std::fs::write(
            dir.path().join("p.yaml"),
            "domain: a\nkubewasm:\n  callDeadline: 5s\n  memoryMiB: 64\n  maxLogLines: 7\n  \
             recycleAfterCalls: 3\n  poolMemoryMiB: 32\n  maxInstances: 4\n",
        )
        .unwrap();
        let f = PluginFile::read(&wasm).unwrap();
        assert_eq!(f.settings.as_deref(), Some(r#"{"domain":"a"}"#));
        let l = f.overrides.apply(&Limits::default());
        assert_eq!(l.deadline, std::time::Duration::from_secs(5));
        assert_eq!(l.memory, 64 << 20);
        assert_eq!(l.max_log_lines, 7);
        assert_eq!(l.recycle_after_calls, 3);
        assert_eq!(l.pool_memory, 32 << 20);
        assert_eq!(l.max_instances, 4);
        assert_eq!(l.max_intents, Limits::default().max_intents);
        std::fs::write(dir.path().join("p.yaml"), "kubewasm: {memoryMB: 1}\n").unwrap();
        let err = PluginFile::read(&wasm).err().unwrap().to_string();
        assert!(err.contains("unknown field `memoryMB`"), "{err}");
    }

    #[test]
    fn settings_put_in_place_of_the_file_s_keep_what_they_leave_out() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"x").unwrap();
        std::fs::write(
            dir.path().join("p.yaml"),
            "domain: a\nkubewasm:\n  memoryMiB: 64\n",
        )
        .unwrap();
        let case = Path::new("cases.yaml");
        let mut f = PluginFile::read(&wasm).unwrap();
        assert_eq!(f.name(), "p");

        // The plugin's part only: the operator's limits stay.
        f.set_settings(&serde_json::json!({"domain": "b"}), case)
            .unwrap();
        assert_eq!(f.settings.as_deref(), Some(r#"{"domain":"b"}"#));
        assert_eq!(f.overrides.memory_mib, Some(64));

        // Limits of its own replace the file's.
        f.set_settings(&serde_json::json!({"kubewasm": {"maxLogLines": 3}}), case)
            .unwrap();
        assert_eq!(f.settings, None);
        assert_eq!(f.overrides.memory_mib, None);
        assert_eq!(f.overrides.max_log_lines, Some(3));
    }

    /// `kubewasm.approved` in settings is refused, in the file or a case, saying where
    /// approvals live now.
    #[test]
    fn an_approval_in_settings_is_refused_with_where_approvals_live() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"x").unwrap();
        std::fs::write(
            dir.path().join("p.yaml"),
            "domain: a\nkubewasm:\n  approved:\n    grants: []\n",
        )
        .unwrap();
        let err = PluginFile::read(&wasm).err().unwrap().to_string();
        for needle in [
            "p.yaml",
            "kubewasm.approved",
            "spec.permissions of its Plugin object",
            "--approvals",
            "kubewasm approve FILE.wasm",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        std::fs::write(dir.path().join("p.yaml"), "domain: a\n").unwrap();
        let mut f = PluginFile::read(&wasm).unwrap();
        let err = f
            .set_settings(
                &serde_json::json!({"kubewasm": {"approved": {"grants": []}}}),
                Path::new("cases.yaml"),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cases.yaml") && err.contains("--approvals"),
            "{err}"
        );
    }

    #[test]
    fn limit_overrides_out_of_range_are_refused_at_read() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"x").unwrap();
        let huge = usize::MAX >> 19; // `<< 20` would wrap this to a cap near zero
        for (body, needle) in [
            (format!("memoryMiB: {huge}"), "kubewasm.memoryMiB"),
            (format!("poolMemoryMiB: {huge}"), "kubewasm.poolMemoryMiB"),
            (
                format!("maxIntentKiB: {}", usize::MAX),
                "kubewasm.maxIntentKiB",
            ),
            (
                "memoryMiB: 0".to_string(),
                "kubewasm.memoryMiB: must be at least 1",
            ),
            ("callDeadline: 100000h".to_string(), "kubewasm.callDeadline"),
            ("callDeadline: 0s".to_string(), "kubewasm.callDeadline"),
        ] {
            std::fs::write(dir.path().join("p.yaml"), format!("kubewasm:\n  {body}\n")).unwrap();
            let err = PluginFile::read(&wasm).err().map(|e| e.to_string());
            let err = err.unwrap_or_else(|| panic!("{body} was accepted"));
            assert!(err.contains(needle), "{body}: {err}");
            assert!(err.contains("p.yaml"), "{body}: {err}");
        }
        let max = format!("memoryMiB: {MAX_MEMORY_MIB}\n  maxIntentKiB: {MAX_INTENT_KIB}");
        std::fs::write(dir.path().join("p.yaml"), format!("kubewasm:\n  {max}\n")).unwrap();
        let l = PluginFile::read(&wasm)
            .unwrap()
            .overrides
            .apply(&Limits::default());
        assert_eq!(l.memory, MAX_MEMORY_MIB << 20);
        assert_eq!(l.max_intent_bytes, MAX_INTENT_KIB << 10);
    }

    #[test]
    fn limits_over_the_hosts_ceilings_are_refused_at_load_before_compiling() {
        let ceilings = LimitCeilings {
            memory_mib: Some(512),
            call_deadline: Some(std::time::Duration::from_secs(10)),
            instances: Some(4),
        };
        let asks = |body: &str| -> LimitOverrides { serde_yaml_ng::from_str(body).unwrap() };
        for (body, needle) in [
            (
                "memoryMiB: 513",
                "memoryMiB: 513 is over the host's ceiling of 512 (--max-plugin-memory-mib)",
            ),
            (
                "callDeadline: 1m",
                "callDeadline: 1m is over the host's ceiling of 10s (--max-plugin-call-deadline)",
            ),
            (
                "maxInstances: 5",
                "maxInstances: 5 is over the host's ceiling of 4 (--max-plugin-instances)",
            ),
        ] {
            assert_eq!(ceilings.check(&asks(body)).err().as_deref(), Some(needle));
        }
        let within =
            asks("memoryMiB: 512\ncallDeadline: 10s\nmaxInstances: 4\npoolMemoryMiB: 4096");
        assert_eq!(ceilings.check(&within), Ok(()));
        assert_eq!(
            LimitCeilings::default().check(&asks("memoryMiB: 65536")),
            Ok(())
        );

        // From a settings file, through the loader: refused before the bytes (not even a
        // component) are compiled.
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"not wasm").unwrap();
        std::fs::write(dir.path().join("p.yaml"), "kubewasm:\n  memoryMiB: 1024\n").unwrap();
        let options = LoadOptions {
            ceilings,
            ..LoadOptions::default()
        };
        let loader = Loader::new(PluginEngine::new().unwrap(), options, None).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let err = rt
            .block_on(loader.load(PluginFile::read(&wasm).unwrap()))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            format!(
                "plugin {}: limits over the host's ceilings: memoryMiB: 1024 is over the \
                 host's ceiling of 512 (--max-plugin-memory-mib)",
                wasm.display()
            )
        );
    }

    #[test]
    fn files_must_stay_inside_the_plugin_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("token");
        std::fs::write(&secret, "a: service-account-token").unwrap();
        // A ConfigMap volume: NAME.yaml -> ..data/NAME.yaml -> ..2026_12_01/NAME.yaml.
        let ts = dir.path().join("..2026_12_01");
        std::fs::create_dir(&ts).unwrap();
        std::fs::write(ts.join("ok.yaml"), "a: 1").unwrap();
        std::os::unix::fs::symlink("..2026_12_01", dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/ok.yaml", dir.path().join("ok.yaml")).unwrap();
        assert_eq!(
            read_settings(&dir.path().join("ok.wasm"))
                .unwrap()
                .as_deref(),
            Some(r#"{"a":1}"#)
        );
        std::os::unix::fs::symlink(&secret, dir.path().join("evil.yaml")).unwrap();
        let err = read_settings(&dir.path().join("evil.wasm"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the plugin directory"), "{err}");
        assert!(!err.contains("service-account-token"), "{err}");
    }

    /// The race `canonicalize, then open by path` lost: `..data` checked while it points
    /// inside, then swapped for a link to a secret outside before the open. The swap is
    /// made in the window itself (the hook runs after the directory is opened, before the
    /// file is): the open refuses it, whichever way the link leaves the directory.
    #[test]
    fn a_link_swapped_before_the_open_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(
            outside.path().join("s.yaml"),
            "token: service-account-token",
        )
        .unwrap();
        let ts = dir.path().join("..2026_12_01");
        std::fs::create_dir(&ts).unwrap();
        std::fs::write(ts.join("s.yaml"), "a: 1").unwrap();
        std::os::unix::fs::symlink("..2026_12_01", dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/s.yaml", dir.path().join("s.yaml")).unwrap();
        let path = dir.path().join("s.yaml");
        // Untouched: read.
        assert_eq!(read_confined(&path, 100).unwrap(), b"a: 1");
        let depth = dir.path().components().count();
        let relative_out = format!("{}{}", "../".repeat(depth), outside.path().display());
        for target in [outside.path().display().to_string(), relative_out] {
            let swap = || {
                let data = dir.path().join("..data");
                std::fs::remove_file(&data).unwrap();
                std::os::unix::fs::symlink(&target, &data).unwrap();
            };
            let err = read_confined_with(&path, 100, swap).unwrap_err();
            assert!(
                matches!(err, FileRefusal::OutsideDirectory(_)),
                "{target}: {err}"
            );
            assert!(!err.to_string().contains("service-account-token"));
            // Restore the link for the next round.
            std::fs::remove_file(dir.path().join("..data")).unwrap();
            std::os::unix::fs::symlink("..2026_12_01", dir.path().join("..data")).unwrap();
        }
    }

    /// The fallback without `openat2`: the descriptor's real path is what is checked.
    #[test]
    fn the_descriptor_check_refuses_a_file_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in"), "x").unwrap();
        std::fs::write(outside.path().join("out"), "x").unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let inside = std::fs::File::open(dir.path().join("in")).unwrap();
        assert!(check_descriptor_beneath(&inside, &d).is_ok());
        let out = std::fs::File::open(outside.path().join("out")).unwrap();
        let err = check_descriptor_beneath(&out, &d).unwrap_err();
        assert!(matches!(err, FileRefusal::OutsideDirectory(_)), "{err}");
        // The directory itself is not a file beneath it.
        let again = std::fs::File::open(dir.path()).unwrap();
        assert!(check_descriptor_beneath(&again, &d).is_err());
    }

    #[test]
    fn a_fifo_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p.yaml");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        let err = read_confined(&fifo, 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn oversized_files_and_yaml_alias_bombs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, vec![b'#'; (MAX_SETTINGS_BYTES + 1) as usize]).unwrap();
        let err = read_settings(&dir.path().join("big.wasm"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("over the limit"), "{err}");
        // Nine levels of nine aliases: a few hundred bytes that would expand to 9^9 nodes.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        std::fs::write(dir.path().join("bomb.yaml"), bomb).unwrap();
        let started = std::time::Instant::now();
        let err = read_settings(&dir.path().join("bomb.wasm"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad settings file"), "{err}");
        eprintln!("alias bomb refused in {:?}: {err}", started.elapsed());
    }

    #[test]
    fn settings_are_read_as_yaml_or_json() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        assert_eq!(read_settings(&wasm).unwrap(), None);
        std::fs::write(
            dir.path().join("p.yaml"),
            "domain: example.com\nreplicas: 2\n",
        )
        .unwrap();
        let s: serde_json::Value =
            serde_json::from_str(&read_settings(&wasm).unwrap().unwrap()).unwrap();
        assert_eq!(
            s,
            serde_json::json!({"domain": "example.com", "replicas": 2})
        );
        std::fs::write(dir.path().join("p.yaml"), "a: [").unwrap();
        let err = read_settings(&wasm).unwrap_err().to_string();
        assert!(err.contains("bad settings file"), "{err}");
    }
}
