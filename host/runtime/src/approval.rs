//! The operator's approvals in directory mode (`--approvals PATH`): what each plugin may
//! watch, read and write, outside the plugin's own files.
//!
//! PATH is a YAML stream, or a directory of `.yaml`/`.yml` files (hidden entries skipped,
//! symlinks followed, so a ConfigMap volume works), of `kubewasm.dev/v1alpha1` `Plugin`
//! objects — the document `kubewasm approve FILE.wasm` prints:
//!
//! ```yaml
//! apiVersion: kubewasm.dev/v1alpha1
//! kind: Plugin
//! metadata: {name: contentsite-provisioner}     # the plugin's manifest name
//! spec:
//!   permissions:
//!     watches:
//!     - {apiVersion: sites.kubewasm.dev/v1alpha1, kind: ContentSite}  # namespaces: [] = all
//!     reads:                                  # extra kinds it may read from the host's caches
//!     - {resource: secrets, namespaces: [shop]}   # ["*"]: every namespace; none: where the
//!                                                 # approved watches list (never cluster-wide)
//!     grants:
//!     - {apiGroups: [mongodb.com], kinds: [MongoDB], verbs: [create]}
//!   limits: {memoryMiB: 128}   # optional: in place of the settings file's `kubewasm:` limits
//!   mode: DryRun               # optional: writes only previewed (default Enforce)
//! ```
//!
//! Of each object, `metadata.name`, `spec.permissions`, `spec.limits` and `spec.mode` are
//! used; `spec.module`, `spec.settings` and `spec.candidate` are not (the plugin directory delivers the module and
//! its settings). Other documents in the stream — the RBAC `kubewasm approve` prints after
//! the Plugin — are skipped. An object whose permissions or limits are malformed, or a name
//! approved twice, leaves that plugin without an approval (so it is refused, with the
//! reason), never with a guess.
//!
//! Why apart: the settings file ships beside the `.wasm` (the same ConfigMap, image or
//! directory), so whoever ships the plugin would approve it. The approval belongs to the
//! operator; on a cluster, RBAC on `plugins.kubewasm.dev` decides who that is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kubewasm_core::grant::Approval;
use kubewasm_core::plugin_object::{self, PluginObject};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::loader::LimitOverrides;

/// Largest approvals file read (each file of a directory).
const MAX_APPROVALS_BYTES: u64 = 4 << 20;

/// One plugin's approval, as read.
#[derive(Debug, Clone)]
struct Entry {
    /// The approval and its limits, or why the object approving it is unusable.
    approved: Result<Approved, String>,
    /// Where it was read.
    source: PathBuf,
    /// Changes when the approval (or its error) changes.
    fingerprint: String,
}

#[derive(Debug, Clone)]
struct Approved {
    approval: Approval,
    limits: Option<LimitOverrides>,
}

/// The operator's approvals, by plugin name. Empty ([`Approvals::none`]): nothing is
/// approved, so every plugin that watches, reads or writes anything is refused.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    entries: BTreeMap<String, Entry>,
}

impl Approvals {
    /// No approvals at all.
    pub fn none() -> Self {
        Approvals::default()
    }

    /// Read the approvals file or directory at `path` (see the module docs). A file or
    /// directory that cannot be read, or YAML that does not parse, is an error naming the
    /// file; a single malformed Plugin object only takes its plugin's approval away.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let mut approvals = Approvals::default();
        approvals.add_path(path)?;
        Ok(approvals)
    }

    /// Add the approvals of another file or directory (as [`Approvals::read`] reads it); a
    /// plugin approved in both is approved twice, so not approved.
    pub fn add_path(&mut self, path: &Path) -> Result<(), Error> {
        let files = if path.is_dir() {
            approval_files(path)?
        } else {
            vec![path.to_path_buf()]
        };
        for file in files {
            let text = read_bounded(&file)?;
            self.add_stream(&text, &file)?;
        }
        Ok(())
    }

    /// Add the approvals of a YAML stream read from `source` (stdin, say).
    pub fn add_text(&mut self, text: &str, source: &Path) -> Result<(), Error> {
        self.add_stream(text, source)
    }

    /// The approvals `objects` hold (Plugin objects read from elsewhere: a cluster, a
    /// test case), named `source` in errors.
    pub fn from_objects(
        objects: impl IntoIterator<Item = PluginObject>,
        source: &Path,
    ) -> Result<Self, Error> {
        let mut approvals = Approvals::default();
        for o in objects {
            let value = serde_json::to_value(&o).map_err(|e| Error::Approvals {
                path: source.to_path_buf(),
                reason: e.to_string(),
            })?;
            approvals.add_document(value, source)?;
        }
        Ok(approvals)
    }

    /// One approval: `permissions` for the plugin `name` (a test case's `approval:`).
    pub fn single(
        name: &str,
        permissions: &plugin_object::Permissions,
        source: &Path,
    ) -> Result<Self, Error> {
        let approval = permissions
            .to_approval()
            .map_err(|reason| Error::Approvals {
                path: source.to_path_buf(),
                reason: format!("approval of plugin {name}: {reason}"),
            })?;
        let mut approvals = Approvals::default();
        approvals.insert(
            name,
            Ok(Approved {
                approval,
                limits: None,
            }),
            source,
        );
        Ok(approvals)
    }

    fn add_stream(&mut self, text: &str, file: &Path) -> Result<(), Error> {
        for de in serde_yaml_ng::Deserializer::from_str(text) {
            let mut doc = serde_yaml_ng::Value::deserialize(de).map_err(|e| Error::Approvals {
                path: file.to_path_buf(),
                reason: format!("malformed YAML: {e}"),
            })?;
            if doc.is_null() {
                continue;
            }
            doc.apply_merge().map_err(|e| Error::Approvals {
                path: file.to_path_buf(),
                reason: format!("merge key (<<): {e}"),
            })?;
            let value: serde_json::Value =
                serde_yaml_ng::from_value(doc).map_err(|e| Error::Approvals {
                    path: file.to_path_buf(),
                    reason: format!("not representable as JSON: {e}"),
                })?;
            self.add_document(value, file)?;
        }
        Ok(())
    }

    /// One document: a Plugin is added (its errors kept for its plugin), anything else of
    /// another kind skipped.
    fn add_document(&mut self, value: serde_json::Value, file: &Path) -> Result<(), Error> {
        let field = |k: &str| value.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let group = api_version.split_once('/').map(|(g, _)| g);
        if kind != plugin_object::KIND || group != Some(plugin_object::GROUP) {
            tracing::debug!(file = %file.display(), api_version, kind, "not a Plugin: skipped");
            return Ok(());
        }
        let bad = |reason: String| Error::Approvals {
            path: file.to_path_buf(),
            reason,
        };
        if api_version != plugin_object::API_VERSION {
            return Err(bad(format!(
                "{api_version} Plugin: this kubewasm reads {}",
                plugin_object::API_VERSION
            )));
        }
        let name = value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad("a Plugin without metadata.name".into()))?
            .to_string();
        let approved = serde_json::from_value::<PluginObject>(value)
            .map_err(|e| e.to_string())
            .and_then(|o| {
                let approval = o.spec.approval()?;
                let limits = o
                    .spec
                    .limits
                    .map(|l| {
                        let l: LimitOverrides =
                            serde_json::from_value(l).map_err(|e| format!("spec.limits: {e}"))?;
                        l.validate().map_err(|e| format!("spec.limits: {e}"))?;
                        Ok::<_, String>(l)
                    })
                    .transpose()?;
                Ok(Approved { approval, limits })
            })
            .map_err(|e| format!("Plugin {name} in {}: {e}", file.display()));
        self.insert(&name, approved, file);
        Ok(())
    }

    fn insert(&mut self, name: &str, approved: Result<Approved, String>, source: &Path) {
        let approved = match self.entries.get(name) {
            // Two approvals of one plugin: neither is taken.
            Some(first) => Err(format!(
                "Plugin {name} is approved twice, in {} and {}: keep one",
                first.source.display(),
                source.display()
            )),
            None => approved,
        };
        let mut h = Sha256::new();
        match &approved {
            Ok(a) => h.update(format!("{:?}{:?}", a.approval, a.limits)),
            Err(e) => h.update(format!("invalid: {e}")),
        }
        if let Err(e) = &approved {
            tracing::warn!(plugin = name, error = %e, "approval not usable: the plugin is refused");
        }
        self.entries.insert(
            name.to_string(),
            Entry {
                approved,
                source: source.to_path_buf(),
                fingerprint: hex::encode(h.finalize()),
            },
        );
    }

    /// What the operator approved for plugin `name`; None when nothing is (no Plugin of
    /// that name, or an unusable one: see [`Approvals::problem`]).
    pub fn get(&self, name: &str) -> Option<&Approval> {
        self.entries
            .get(name)
            .and_then(|e| e.approved.as_ref().ok())
            .map(|a| &a.approval)
    }

    /// The limits the plugin's Plugin object sets (`spec.limits`), in place of those of its
    /// settings file; None when it sets none.
    pub fn limits(&self, name: &str) -> Option<&LimitOverrides> {
        self.entries
            .get(name)
            .and_then(|e| e.approved.as_ref().ok())
            .and_then(|a| a.limits.as_ref())
    }

    /// Why the Plugin object approving `name` is not used (malformed, or approved twice).
    pub fn problem(&self, name: &str) -> Option<&str> {
        self.entries
            .get(name)
            .and_then(|e| e.approved.as_ref().err())
            .map(String::as_str)
    }

    /// The names of the plugins with a Plugin object (usable or not), sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Changes when plugin `name`'s approval or limits change (appear, narrow, widen, go
    /// away, become unusable): part of the fingerprint the reloader compares, so a change
    /// re-evaluates the plugin.
    pub fn fingerprint_of(&self, name: &str) -> String {
        self.entries
            .get(name)
            .map(|e| e.fingerprint.clone())
            .unwrap_or_else(|| "none".into())
    }

    /// Changes when any approval changes.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        for (name, e) in &self.entries {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(e.fingerprint.as_bytes());
        }
        hex::encode(h.finalize())
    }
}

/// The `.yaml`/`.yml` files of an approvals directory, sorted; hidden entries skipped.
fn approval_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
        context: format!("reading approvals directory {}", dir.display()),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.')
                && p.extension().is_some_and(|e| e == "yaml" || e == "yml")
                && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

fn read_bounded(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let io = |source: std::io::Error| Error::Io {
        context: format!("reading approvals {}", path.display()),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_APPROVALS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_APPROVALS_BYTES {
        return Err(Error::Approvals {
            path: path.to_path_buf(),
            reason: format!("over the limit of {MAX_APPROVALS_BYTES} bytes"),
        });
    }
    String::from_utf8(bytes).map_err(|e| Error::Approvals {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_core::manifest::Verb;

    const STREAM: &str = "\
apiVersion: kubewasm.dev/v1alpha1
kind: Plugin
metadata: {name: a}
spec:
  module: oci://127.0.0.1:5000/a@sha256:00
  permissions:
    watches:
    - {apiVersion: v1, kind: ConfigMap, namespaces: [shop]}
    reads: [{resource: secrets}]
    grants:
    - {apiGroups: [''], kinds: [Service], verbs: [create, patch-status], finalizers: [x.io/f]}
  limits: {memoryMiB: 64}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kubewasm-a, namespace: kubewasm}
---
apiVersion: kubewasm.dev/v1alpha1
kind: Plugin
metadata: {name: b}
spec:
  permissions:
    grants:
    - {apiGroups: [''], kinds: [Service], verbs: [update]}
";

    #[test]
    fn plugin_objects_approve_by_name_and_other_documents_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("approvals.yaml");
        std::fs::write(&file, STREAM).unwrap();
        let a = Approvals::read(&file).unwrap();
        assert_eq!(a.names().collect::<Vec<_>>(), ["a", "b"]);
        let ap = a.get("a").unwrap();
        assert_eq!(ap.watches[0].namespaces, ["shop"]);
        assert_eq!(ap.reads.len(), 1);
        // The form without namespaces still parses: read where the approved watches are.
        assert!(ap.reads[0].namespaces.is_empty());
        let where_ = ap.read_scopes();
        assert_eq!(
            where_.values().collect::<Vec<_>>(),
            [
                &kubewasm_core::grant::ReadWhere::Namespaces(["shop".to_string()].into()),
                &kubewasm_core::grant::ReadWhere::Namespaces(["shop".to_string()].into()),
            ]
        );
        assert_eq!(ap.grants[0].verbs, [Verb::Create, Verb::PatchStatus]);
        assert_eq!(ap.grants[0].finalizers, ["x.io/f"]);
        assert_eq!(a.limits("a").and_then(|l| l.memory_mib), Some(64));
        // b's verb is unknown: b has no approval, and the reason names it.
        assert!(a.get("b").is_none());
        let problem = a.problem("b").unwrap();
        assert!(
            problem.contains("Plugin b") && problem.contains("unknown verb \"update\""),
            "{problem}"
        );
        assert!(a.get("c").is_none() && a.problem("c").is_none());
        assert_eq!(a.fingerprint_of("c"), "none");

        // A directory: the same, one file per object; a change to one plugin's approval
        // changes its fingerprint only.
        let d = tempfile::tempdir().unwrap();
        let (first, second) = STREAM.split_at(STREAM.find("---\napiVersion: kubewasm").unwrap());
        std::fs::write(d.path().join("a.yaml"), first).unwrap();
        std::fs::write(d.path().join("b.yml"), second).unwrap();
        std::fs::write(d.path().join(".hidden.yaml"), "a: [").unwrap();
        std::fs::write(d.path().join("notes.txt"), "a: [").unwrap();
        let from_dir = Approvals::read(d.path()).unwrap();
        assert_eq!(from_dir.get("a"), a.get("a"));
        let before = (from_dir.fingerprint_of("a"), from_dir.fingerprint_of("b"));
        std::fs::write(
            d.path().join("a.yaml"),
            first.replace("namespaces: [shop]", "namespaces: [shop, web]"),
        )
        .unwrap();
        let after = Approvals::read(d.path()).unwrap();
        assert_ne!(after.fingerprint_of("a"), before.0);
        assert_eq!(after.fingerprint_of("b"), before.1);
        assert_ne!(after.fingerprint(), from_dir.fingerprint());
    }

    #[test]
    fn a_name_approved_twice_is_not_approved_and_bad_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("twice.yaml");
        let one = "apiVersion: kubewasm.dev/v1alpha1\nkind: Plugin\nmetadata: {name: a}\n\
                   spec: {permissions: {}}\n";
        std::fs::write(&file, format!("{one}---\n{one}")).unwrap();
        let a = Approvals::read(&file).unwrap();
        assert!(a.get("a").is_none());
        assert!(a.problem("a").unwrap().contains("approved twice"));

        for (text, needle) in [
            ("a: [", "malformed YAML"),
            (
                "apiVersion: kubewasm.dev/v1\nkind: Plugin\nmetadata: {name: a}\nspec: {}\n",
                "this kubewasm reads kubewasm.dev/v1alpha1",
            ),
            (
                "apiVersion: kubewasm.dev/v1alpha1\nkind: Plugin\nspec: {}\n",
                "without metadata.name",
            ),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = Approvals::read(&file).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains("twice.yaml"), "{err}");
        }
        let err = Approvals::read(&dir.path().join("missing.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.yaml"), "{err}");
    }

    #[test]
    fn limits_out_of_range_take_the_approval_away() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(
            &file,
            "apiVersion: kubewasm.dev/v1alpha1\nkind: Plugin\nmetadata: {name: a}\n\
             spec: {permissions: {}, limits: {memoryMiB: 0}}\n",
        )
        .unwrap();
        let a = Approvals::read(&file).unwrap();
        assert!(a.get("a").is_none());
        assert!(a.problem("a").unwrap().contains("spec.limits"), "{a:?}");
    }
}
