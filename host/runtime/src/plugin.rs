//! A compiled plugin: its component linked into an `InstancePre`, its manifest, and a
//! small pool of instances reused across calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{Store, Trap, UpdateDeadline};

use kubewasm_core::event::EventType;
use kubewasm_core::intent::RawIntent;
use kubewasm_core::manifest::Manifest;

use crate::bindings::{Plugin, PluginPre, types as wit};
use crate::capability::cluster::ClusterView;
use crate::convert;
use crate::engine::PluginEngine;
use crate::error::{CallError, Error, LimitExceeded, ManifestRejection};
use crate::limits::Limits;
use crate::state::PluginState;

/// One event as handed to a plugin.
#[derive(Debug, Clone)]
pub struct PluginEvent {
    /// The event type.
    pub event_type: EventType,
    /// Which of the plugin's watches matched.
    pub watch_id: String,
    /// The object, JSON.
    pub object: Arc<str>,
    /// The previous object for `Modified`, JSON.
    pub old_object: Option<Arc<str>>,
}

/// Whether instances are reused between calls, and how many are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstancePolicy {
    /// Keep instances after a successful call (a trapped one is always dropped).
    pub reuse: bool,
    /// Instances kept at most (one per concurrent call is enough).
    pub pool_size: usize,
}

struct Instance {
    store: Store<PluginState>,
    bindings: Plugin,
}

/// A loaded, validated plugin, ready to handle events. Immutable once built: a new version
/// of the file becomes a new `CompiledPlugin`.
pub struct CompiledPlugin {
    /// The file it was loaded from.
    pub path: PathBuf,
    /// The manifest `describe` returned, validated.
    pub manifest: Manifest,
    /// Settings JSON passed to `describe` and `handle`.
    pub settings: Option<String>,
    /// sha256 of the component bytes, hex.
    pub digest: String,
    /// Limits applied to calls.
    pub limits: Limits,
    engine: PluginEngine,
    pre: PluginPre<PluginState>,
    pool: Mutex<Vec<Instance>>,
    pool_size: usize,
    reuse: bool,
}

/// Check the wasm header before handing bytes to the compiler, for a clear message.
fn check_header(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(Error::NotWasm {
            path: path.to_path_buf(),
            reason: "missing the \\0asm header".into(),
        });
    }
    // Core modules have version 1 with layer 0; components use layer 1.
    if bytes[6..8] != [1, 0] {
        return Err(Error::NotWasm {
            path: path.to_path_buf(),
            reason: "this is a core wasm module; kubewasm needs a component \
                     (build for wasm32-wasip2, or run `wasm-tools component new`)"
                .into(),
        });
    }
    Ok(())
}

/// Compile component bytes. CPU-heavy (seconds for big components): runs off the async runtime.
pub async fn compile(
    engine: &PluginEngine,
    path: &Path,
    bytes: Vec<u8>,
) -> Result<Component, Error> {
    check_header(path, &bytes)?;
    let eng = engine.engine.clone();
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        Component::new(&eng, &bytes).map_err(|e| Error::NotWasm {
            path: p,
            reason: format!("{e:#}"),
        })
    })
    .await
    .map_err(|e| Error::Engine(format!("compile task: {e}")))?
}

impl CompiledPlugin {
    /// Link a compiled component against the host world, call `describe` and validate the
    /// manifest. `reuse` keeps instances between calls (see the call-path bench).
    pub async fn new(
        engine: &PluginEngine,
        path: &Path,
        component: Component,
        digest: String,
        settings: Option<String>,
        limits: Limits,
        instances: InstancePolicy,
    ) -> Result<Self, Error> {
        let InstancePolicy { reuse, pool_size } = instances;
        let world_err = |reason: String| Error::World {
            path: path.to_path_buf(),
            reason,
        };
        let instance_pre = engine
            .linker
            .instantiate_pre(&component)
            .map_err(|e| world_err(format!("{e:#}")))?;
        let pre = PluginPre::new(instance_pre).map_err(|e| world_err(format!("{e:#}")))?;

        let mut plugin = CompiledPlugin {
            path: path.to_path_buf(),
            manifest: Manifest {
                name: file_stem(path),
                version: String::new(),
                watches: vec![],
                grants: vec![],
                reads: vec![],
            },
            settings,
            digest,
            limits,
            engine: engine.clone(),
            pre,
            pool: Mutex::new(Vec::new()),
            pool_size: pool_size.max(1),
            reuse,
        };
        let manifest = plugin.describe().await?;
        plugin.manifest = manifest;
        Ok(plugin)
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    async fn describe(&self) -> Result<Manifest, Error> {
        let reject = |reason: ManifestRejection| Error::Manifest {
            path: self.path.clone(),
            reason: Box::new(reason),
        };
        let mut inst = self
            .instantiate()
            .await
            .map_err(|e| reject(ManifestRejection::Instantiate(e)))?;
        inst.store.data_mut().deadline = Instant::now() + self.limits.deadline;
        inst.store.set_epoch_deadline(1);
        let result = inst
            .bindings
            .kubewasm_plugin_handler()
            .call_describe(&mut inst.store, self.settings.as_deref())
            .await;
        let wit_manifest = match result {
            Ok(Ok(m)) => m,
            Ok(Err(msg)) => return Err(reject(ManifestRejection::Refused(msg))),
            Err(e) => {
                let kind = classify(&e, &inst.store, self.limits.deadline);
                return Err(reject(ManifestRejection::Failed(kind)));
            }
        };
        let manifest =
            convert::manifest(wit_manifest).map_err(|e| reject(ManifestRejection::Invalid(e)))?;
        manifest
            .validate()
            .map_err(|e| reject(ManifestRejection::Invalid(e)))?;
        let file = file_stem(&self.path);
        if manifest.name != file {
            return Err(reject(ManifestRejection::NameMismatch {
                name: manifest.name,
                file,
            }));
        }
        Ok(manifest)
    }

    async fn instantiate(&self) -> Result<Instance, CallError> {
        let state = PluginState::new(self.name(), &self.limits);
        let mut store = Store::new(&self.engine.engine, state);
        store.limiter(|s| &mut s.memory);
        // Every tick past the deadline check: yield to tokio so a busy plugin never
        // starves the runtime, and trap once the call's deadline has passed.
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.data_mut().deadline = Instant::now() + self.limits.deadline;
        store.set_epoch_deadline(1);
        match self.pre.instantiate_async(&mut store).await {
            Ok(bindings) => Ok(Instance { store, bindings }),
            Err(e) => Err(classify(&e, &store, self.limits.deadline)),
        }
    }

    /// Run `handle` for one event. `object` names the object for the plugin's log lines.
    /// On any failure the instance is dropped (a trapped instance cannot be re-entered).
    pub async fn handle(
        &self,
        event: &PluginEvent,
        object: &str,
        cluster: Arc<dyn ClusterView>,
    ) -> Result<Vec<RawIntent>, CallError> {
        let pooled = if self.reuse {
            self.pool.lock().ok().and_then(|mut p| p.pop())
        } else {
            None
        };
        let mut inst = match pooled {
            Some(i) => i,
            None => self.instantiate().await?,
        };
        {
            let state = inst.store.data_mut();
            state.cluster.begin_call(cluster, object);
            state.log.begin_call(object);
            state.deadline = Instant::now() + self.limits.deadline;
        }
        inst.store.set_epoch_deadline(1);
        let wit_event = wit::Event {
            event_type: match event.event_type {
                EventType::Added => wit::EventType::Added,
                EventType::Modified => wit::EventType::Modified,
                EventType::Deleted => wit::EventType::Deleted,
                EventType::Resync => wit::EventType::Resync,
            },
            watch_id: event.watch_id.clone(),
            object: event.object.to_string(),
            old_object: event.old_object.as_ref().map(|o| o.to_string()),
        };
        let result = inst
            .bindings
            .kubewasm_plugin_handler()
            .call_handle(&mut inst.store, &wit_event, self.settings.as_deref())
            .await;
        inst.store.data_mut().cluster.end_call();
        let dropped = inst.store.data().log.end_call();
        if dropped > 0 {
            tracing::warn!(
                plugin = self.name(),
                object,
                dropped,
                "plugin log lines dropped (cap {} per call)",
                self.limits.max_log_lines
            );
        }
        let outcome = match result {
            Err(e) => return Err(classify(&e, &inst.store, self.limits.deadline)),
            // The message reaches log lines and Events: capped like a log line.
            Ok(Err(err)) => Err(CallError::Plugin {
                message: crate::capability::log::truncate(
                    err.message,
                    crate::capability::log::MAX_LOG_LINE_BYTES,
                ),
                retry: err.retry,
            }),
            Ok(Ok(intents)) => self
                .check_limits(&intents)
                .map(|()| intents.into_iter().map(convert::intent).collect::<Vec<_>>()),
        };
        // The call returned normally, so the instance is healthy and can be reused.
        if self.reuse
            && let Ok(mut pool) = self.pool.lock()
            && pool.len() < self.pool_size
        {
            pool.push(inst);
        }
        outcome
    }

    fn check_limits(&self, intents: &[wit::Intent]) -> Result<(), CallError> {
        if intents.len() > self.limits.max_intents {
            return Err(LimitExceeded::Intents {
                count: intents.len(),
                max: self.limits.max_intents,
            }
            .into());
        }
        if let Some((i, size)) = intents
            .iter()
            .map(convert::intent_bytes)
            .enumerate()
            .find(|(_, s)| *s > self.limits.max_intent_bytes)
        {
            return Err(LimitExceeded::IntentBytes {
                index: i,
                size,
                max: self.limits.max_intent_bytes,
            }
            .into());
        }
        Ok(())
    }
}

/// Turn a wasmtime error into a classified call error, using the trap code and the
/// memory cap's flag rather than message text.
fn classify(err: &wasmtime::Error, store: &Store<PluginState>, deadline: Duration) -> CallError {
    if store.data().memory.exceeded {
        return CallError::Memory(store.data().memory.max);
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Deadline(deadline),
        Some(trap) => CallError::Trap(format!("{trap}: {err:#}")),
        None => CallError::Trap(format!("{err:#}")),
    }
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_check_names_the_problem() {
        let p = Path::new("x.wasm");
        let err = check_header(p, b"hello world").unwrap_err().to_string();
        assert!(err.contains("\\0asm"), "{err}");
        let core = [0, b'a', b's', b'm', 1, 0, 0, 0];
        let err = check_header(p, &core).unwrap_err().to_string();
        assert!(err.contains("core wasm module"), "{err}");
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        assert!(check_header(p, &component).is_ok());
    }
}
