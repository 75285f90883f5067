//! The plugin registry: the plugin directory's layout, and loading plugin files through
//! the compiled-code cache.
//!
//! A plugin is `NAME.wasm`, optionally with settings in `NAME.yaml`, `NAME.yml` or
//! `NAME.json` beside it. Hidden entries (Kubernetes volume internals such as `..data`)
//! are skipped; symlinks are followed, so ConfigMap and Secret volumes work.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::Error;
use wasmtime::component::Component;

use crate::runtime::codecache::{CodeCache, Source};
use crate::runtime::plugin::{InstancePolicy, compile};
use crate::runtime::{CompiledPlugin, Limits, PluginEngine};

/// How plugins are loaded.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Limits applied to every plugin.
    pub limits: Limits,
    /// Reuse instances between calls.
    pub reuse_instances: bool,
    /// Instances kept per plugin (= the dispatch concurrency).
    pub pool_size: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            limits: Limits::default(),
            reuse_instances: true,
            pool_size: 4,
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

/// The settings file beside a plugin, converted to JSON text.
pub fn read_settings(wasm: &Path) -> Result<Option<String>, Error> {
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
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
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
    /// The settings as JSON text.
    pub settings: Option<String>,
}

impl PluginFile {
    /// Read a plugin and its settings.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let settings = read_settings(path)?;
        let digest = hex::encode(Sha256::digest(&bytes));
        Ok(PluginFile {
            path: path.to_path_buf(),
            bytes,
            digest,
            settings,
        })
    }

    /// Changes when the component or its settings change.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.digest.as_bytes());
        h.update(self.settings.as_deref().unwrap_or("").as_bytes());
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
        Ok(Loader {
            engine,
            options,
            disk,
            memory: Mutex::new(HashMap::new()),
        })
    }

    /// The engine plugins are compiled with.
    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// Compile (or fetch from cache), link, describe and validate.
    pub async fn load(&self, file: PluginFile) -> Result<Loaded, Error> {
        let started = std::time::Instant::now();
        let cached = self
            .memory
            .lock()
            .ok()
            .and_then(|m| m.get(&file.digest).cloned())
            .or_else(|| {
                self.disk
                    .as_ref()
                    .and_then(|d| d.get(&self.engine, &file.digest))
            });
        let (component, source) = match cached {
            Some(c) => (c, Source::Cached),
            None => {
                let c = compile(&self.engine, &file.path, file.bytes).await?;
                if let Some(d) = &self.disk {
                    d.put(&file.digest, &c);
                }
                (c, Source::Compiled)
            }
        };
        if let Ok(mut m) = self.memory.lock() {
            m.insert(file.digest.clone(), component.clone());
        }
        let plugin = CompiledPlugin::new(
            &self.engine,
            &file.path,
            component,
            file.digest,
            file.settings,
            self.options.limits.clone(),
            InstancePolicy {
                reuse: self.options.reuse_instances,
                pool_size: self.options.pool_size,
            },
        )
        .await?;
        Ok(Loaded {
            plugin,
            source,
            took: started.elapsed(),
        })
    }

    /// Forget in-memory components no loaded plugin uses any more.
    pub fn retain(&self, digests: &std::collections::HashSet<String>) {
        if let Ok(mut m) = self.memory.lock() {
            m.retain(|d, _| digests.contains(d));
        }
    }
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
