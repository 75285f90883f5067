//! The plugin registry: reads a plugin directory into an immutable [`PluginSet`].
//!
//! A plugin is `NAME.wasm`, optionally with settings in `NAME.yaml`, `NAME.yml` or
//! `NAME.json` beside it. Hidden entries (Kubernetes volume internals such as `..data`)
//! are skipped; symlinks are followed, so ConfigMap and Secret volumes work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::Error;
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

/// Every loaded plugin, by name. Immutable: a reload builds a new set.
#[derive(Default)]
pub struct PluginSet {
    /// Plugins by manifest name.
    pub plugins: BTreeMap<String, Arc<CompiledPlugin>>,
    /// Files that were rejected, with the reason.
    pub rejected: Vec<(PathBuf, Error)>,
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

/// Read, compile, link and describe one plugin file.
pub async fn load_plugin(
    engine: &PluginEngine,
    path: &Path,
    options: &LoadOptions,
) -> Result<CompiledPlugin, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let settings = read_settings(path)?;
    let digest = hex::encode(Sha256::digest(&bytes));
    let component = compile(engine, path, bytes).await?;
    CompiledPlugin::new(
        engine,
        path,
        component,
        digest,
        settings,
        options.limits.clone(),
        InstancePolicy {
            reuse: options.reuse_instances,
            pool_size: options.pool_size,
        },
    )
    .await
}

/// Load every plugin in `dir`. A bad file is reported and skipped; the others load.
pub async fn load_dir(
    engine: &PluginEngine,
    dir: &Path,
    options: &LoadOptions,
) -> Result<PluginSet, Error> {
    let mut set = PluginSet::default();
    for path in plugin_files(dir)? {
        let started = std::time::Instant::now();
        match load_plugin(engine, &path, options).await {
            Ok(p) => {
                if let Some(other) = set.plugins.get(p.name()) {
                    let err = Error::DuplicateName {
                        path: path.clone(),
                        name: p.name().to_string(),
                        other: other.path.clone(),
                    };
                    tracing::error!(error = %err, "plugin rejected");
                    set.rejected.push((path, err));
                    continue;
                }
                tracing::info!(
                    plugin = p.name(),
                    version = %p.manifest.version,
                    file = %path.display(),
                    watches = p.manifest.watches.len(),
                    took = ?started.elapsed(),
                    "plugin loaded"
                );
                set.plugins.insert(p.name().to_string(), Arc::new(p));
            }
            Err(err) => {
                tracing::error!(error = %err, "plugin rejected");
                set.rejected.push((path, err));
            }
        }
    }
    Ok(set)
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
