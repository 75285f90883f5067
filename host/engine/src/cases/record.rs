//! The recorder behind `kubewasm run --record DIR` / `dev --record DIR`: every handled
//! event written as a test case ([`super::format`]), so a real cluster's behaviour becomes
//! a regression test that [`super::replay`] runs (no cluster needed).
//!
//! A recorded case holds the plugin file, its settings, the event (type, watch id, object,
//! old object), every object the plugin read through `host.get`/`host.list` during the
//! call (its `cluster:`), and what came out: the intents with the ownerReference
//! admission bound, or the plugin's error. One file per event, under a folder per plugin:
//! `DIR/PLUGIN/0001-added-configmap-shop-blog.yaml`, numbered on from the files already
//! there.
//!
//! Secrets: unless [`RecordConfig::secrets`] is set, every `v1` `Secret` written (the
//! event's, read ones, and those in intents) has the values of `data` and `stringData`
//! replaced by `<redacted>` (base64 of it in `data`) and its last-applied annotation
//! dropped; the keys stay, so a plugin that only looks at keys replays unchanged.
//!
//! The file format is documented in `plugins/conformance/README.md`.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use kubewasm_core::admit::{Prepared, Rejection};
use kubewasm_core::intent::RawIntent;
use kubewasm_runtime::ListLimit;
use kubewasm_runtime::{ClusterView, CompiledPlugin, PluginEvent, ReadError};
use serde_json::Value;

use super::format::{CaseEvent, Expect, TestCase, intent_json, show_owner_references};
use crate::Error;

/// Where and how to record.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// The directory cases are written under (a folder per plugin).
    pub dir: PathBuf,
    /// Keep Secrets' values in clear text (default: redacted).
    pub secrets: bool,
}

/// Writes handled events as test cases. Shared by every plugin's handler.
#[derive(Debug)]
pub struct Recorder {
    config: RecordConfig,
    /// Next number per plugin folder.
    next: Mutex<HashMap<String, u64>>,
}

/// One call being recorded: the event, and what the plugin reads during it.
pub struct Recording {
    recorder: Arc<Recorder>,
    plugin: String,
    plugin_path: PathBuf,
    settings: Option<String>,
    event: PluginEvent,
    reads: Arc<ReadLog>,
}

/// A view that serves another and keeps a copy of every object it hands out.
pub struct ReadLog {
    inner: Mutex<Option<Arc<dyn ClusterView>>>,
    objects: Mutex<Vec<String>>,
}

impl ReadLog {
    fn inner(&self) -> Option<Arc<dyn ClusterView>> {
        Some(kubewasm_core::sync::lock(&self.inner)).and_then(|v| v.clone())
    }

    fn keep<'a>(&self, objects: impl IntoIterator<Item = &'a String>) {
        {
            let mut kept = kubewasm_core::sync::lock(&self.objects);
            kept.extend(objects.into_iter().cloned());
        }
    }
}

impl ClusterView for ReadLog {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, ReadError> {
        let view = self
            .inner()
            .ok_or_else(|| ReadError::NotAllowed(format!("{api_version}/{kind}")))?;
        let got = view.get(api_version, kind, namespace, name)?;
        self.keep(got.iter());
        Ok(got)
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: ListLimit,
    ) -> Result<Vec<String>, ReadError> {
        let view = self
            .inner()
            .ok_or_else(|| ReadError::NotAllowed(format!("{api_version}/{kind}")))?;
        let listed = view.list(api_version, kind, namespace, label_selector, limit)?;
        self.keep(listed.iter());
        Ok(listed)
    }

    fn read_budget(&self) -> usize {
        self.inner().map(|v| v.read_budget()).unwrap_or(0)
    }
}

impl Recorder {
    /// A recorder writing under `config.dir` (created if missing).
    pub fn new(config: RecordConfig) -> Result<Self, Error> {
        std::fs::create_dir_all(&config.dir).map_err(|source| Error::Io {
            context: format!("creating the record directory {}", config.dir.display()),
            source,
        })?;
        Ok(Recorder {
            config,
            next: Mutex::new(HashMap::new()),
        })
    }

    /// Start recording one call of `plugin` on `event`.
    pub fn begin(self: &Arc<Self>, plugin: &CompiledPlugin, event: &PluginEvent) -> Recording {
        Recording {
            recorder: self.clone(),
            plugin: plugin.name().to_string(),
            plugin_path: plugin.path.clone(),
            settings: plugin.settings.clone(),
            event: event.clone(),
            reads: Arc::new(ReadLog {
                inner: Mutex::new(None),
                objects: Mutex::new(Vec::new()),
            }),
        }
    }

    fn next_number(&self, folder: &Path, plugin: &str) -> u64 {
        let mut next = kubewasm_core::sync::lock(&self.next);
        let n = next.entry(plugin.to_string()).or_insert_with(|| {
            // Go on after the cases already there, so a restart adds instead of overwriting.
            std::fs::read_dir(folder)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.split('-').next()?.parse::<u64>().ok()
                })
                .max()
                .unwrap_or(0)
                + 1
        });
        let this = *n;
        *n += 1;
        this
    }
}

/// What came out of a recorded call.
pub enum Outcome<'a> {
    /// The plugin returned intents; admission's answer.
    Returned {
        /// What the plugin returned.
        raw: &'a [RawIntent],
        /// What admission made of it.
        admitted: Result<&'a [Prepared], &'a Rejection>,
    },
    /// The plugin returned an error.
    PluginError {
        /// Its message.
        message: &'a str,
        /// Its retry flag.
        retry: bool,
    },
}

impl Recording {
    /// The view to give the plugin for this call: `view`, with every read kept.
    pub fn reading(&self, view: Arc<dyn ClusterView>) -> Arc<dyn ClusterView> {
        {
            let mut inner = kubewasm_core::sync::lock(&self.reads.inner);
            *inner = Some(view);
        }
        self.reads.clone()
    }

    /// Write the case. A failure to write is logged; it never fails the event.
    pub fn record(&self, outcome: Outcome<'_>) {
        let recorder = self.recorder.clone();
        let folder = recorder.config.dir.join(file_part(&self.plugin));
        // First, so the case's plugin path can be made relative to it.
        if let Err(e) = std::fs::create_dir_all(&folder) {
            tracing::warn!(plugin = %self.plugin, folder = %folder.display(), error = %e,
                "could not record the event as a test case");
            return;
        }
        let case = self.case(outcome, &folder);
        let number = recorder.next_number(&folder, &self.plugin);
        let object = &case.event.object;
        let s = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        let mut stem = format!("{number:04}-{}-{}", case.event.event_type, s("/kind"));
        for part in [s("/metadata/namespace"), s("/metadata/name")] {
            if !part.is_empty() {
                stem.push('-');
                stem.push_str(part);
            }
        }
        let path = folder.join(format!("{}.yaml", file_part(&stem)));
        let written = serde_yaml_ng::to_string(&case)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                // Whole or not at all: `kubewasm test DIR` may read while recording goes on.
                let tmp = folder.join(format!(".{number:04}.tmp"));
                std::fs::write(&tmp, text)
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| e.to_string())
            });
        match written {
            Ok(()) => {
                tracing::debug!(plugin = %self.plugin, case = %path.display(), "event recorded")
            }
            Err(e) => tracing::warn!(plugin = %self.plugin, case = %path.display(), error = %e,
                "could not record the event as a test case"),
        }
    }

    fn case(&self, outcome: Outcome<'_>, folder: &Path) -> TestCase {
        let secrets = self.recorder.config.secrets;
        let object = |json: &str| {
            let mut v = serde_json::from_str(json).unwrap_or(Value::Null);
            if !secrets {
                redact(&mut v);
            }
            v
        };
        let cluster = self.objects_read(&object);
        let expect = expectation(outcome, secrets);
        let event_object = object(&self.event.object);
        let name = format!(
            "recorded: {} {} (resourceVersion {})",
            self.event.event_type.as_str(),
            kubewasm_core::admit::Trigger::from_json(&event_object).describe(),
            event_object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("?"),
        );
        TestCase {
            name,
            plugin: Some(relative_to(folder, &self.plugin_path)),
            // The settings file beside the plugin keeps the operator's approval.
            approval: None,
            settings: self
                .settings
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok()),
            cluster,
            event: CaseEvent {
                event_type: self.event.event_type.as_str().to_string(),
                watch: Some(self.event.watch_id.clone()),
                object: event_object,
                old_object: self.event.old_object.as_deref().map(object),
            },
            expect,
            after: Vec::new(),
        }
    }
}

impl Recording {
    /// The objects the plugin read, each once (a get and a list of one object serve it
    /// once), as `object` shows them.
    fn objects_read(&self, object: &dyn Fn(&str) -> Value) -> Vec<Value> {
        let mut cluster: Vec<Value> = Vec::new();
        let reads = kubewasm_core::sync::lock(&self.reads.objects).clone();
        for o in reads.iter().map(|o| object(o)) {
            let same = |c: &Value| {
                [
                    "/apiVersion",
                    "/kind",
                    "/metadata/namespace",
                    "/metadata/name",
                ]
                .iter()
                .all(|p| c.pointer(p) == o.pointer(p))
            };
            if !cluster.iter().any(same) {
                cluster.push(o);
            }
        }
        cluster
    }
}

/// What a recorded case expects: the intents as returned (Secrets redacted unless
/// `secrets`) and the ownerReferences bound, or the error as `run` reported it.
fn expectation(outcome: Outcome<'_>, secrets: bool) -> Expect {
    let mut expect = Expect::default();
    match outcome {
        Outcome::Returned { raw, admitted } => {
            let mut intents: Vec<Value> = raw.iter().map(intent_json).collect();
            if !secrets {
                for i in &mut intents {
                    for p in ["/create/object", "/patch/body"] {
                        if let Some(o) = i.pointer_mut(p) {
                            redact(o);
                        }
                    }
                }
            }
            match admitted {
                Ok(prepared) => show_owner_references(&mut intents, prepared),
                // Spelled as `run` and `kubewasm test` report it.
                Err(r) => expect.error = Some(r.to_string()),
            }
            expect.intents = expect.error.is_none().then_some(intents);
        }
        Outcome::PluginError { message, retry } => {
            expect.error = Some(message.to_string());
            expect.retry = Some(retry);
        }
    }
    expect
}

/// Redact a `v1` Secret's values in place (keys kept).
fn redact(object: &mut Value) {
    if object["apiVersion"] != "v1" || object["kind"] != "Secret" {
        return;
    }
    for (field, placeholder) in [("data", "PHJlZGFjdGVkPg=="), ("stringData", "<redacted>")] {
        if let Some(map) = object.get_mut(field).and_then(Value::as_object_mut) {
            for v in map.values_mut() {
                *v = Value::String(placeholder.into());
            }
        }
    }
    if let Some(a) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// A name safe as one path component: lowercase ASCII letters, digits, `.`, `-`, `_`.
fn file_part(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '-' | '_') => c,
            _ => '-',
        })
        .collect();
    match cleaned.trim_start_matches('.') {
        "" => "_".into(),
        rest => rest.to_string(),
    }
}

/// `to` as seen from directory `from` (relative when both resolve, else absolute), so a
/// recorded directory moved along with the plugins still finds them.
fn relative_to(from: &Path, to: &Path) -> PathBuf {
    let (Ok(from), Ok(to)) = (std::fs::canonicalize(from), std::fs::canonicalize(to)) else {
        return std::path::absolute(to).unwrap_or_else(|_| to.to_path_buf());
    };
    let (f, t): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..f.len() {
        rel.push("..");
    }
    for c in &t[common..] {
        rel.push(c);
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_keys_kept() {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "x", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"p\":\"c2VjcmV0\"}}",
                "keep": "me"}},
            "data": {"p": "c2VjcmV0"}, "stringData": {"q": "secret"}});
        redact(&mut s);
        assert_eq!(s["data"], json!({"p": "PHJlZGFjdGVkPg=="}));
        assert_eq!(s["stringData"], json!({"q": "<redacted>"}));
        assert_eq!(s["metadata"]["annotations"], json!({"keep": "me"}));
        assert!(!s.to_string().contains("secret\""), "{s}");
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"p": "v"}});
        redact(&mut cm);
        assert_eq!(cm["data"]["p"], "v");
    }

    #[test]
    fn file_names_are_one_safe_component() {
        assert_eq!(
            file_part("0001-added-ConfigMap-shop-blog"),
            "0001-added-configmap-shop-blog"
        );
        assert_eq!(file_part("../etc/x"), "-etc-x");
        assert_eq!(file_part(".."), "_");
    }

    #[test]
    fn relative_paths_climb_to_the_common_parent() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec/testkit");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir_all(&rec).unwrap();
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::write(plugins.join("testkit.wasm"), b"").unwrap();
        assert_eq!(
            relative_to(&rec, &plugins.join("testkit.wasm")),
            Path::new("../../plugins/testkit.wasm")
        );
    }
}
