//! Applying manifest files the way `kubectl apply --server-side` does, CRDs first, waiting
//! until their resources are served (`kubewasm dev --apply`, and the tests).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde::Deserialize;
use serde_json::Value;

use kubewasm_core::kind::ResolveError;
use kubewasm_core::resource::{ResourceRef, TypeRef};

use crate::Error;
use crate::watch::discovery::{Discovery, api_resource};

/// Field manager used for manifests applied by `kubewasm dev --apply`.
pub const DEV_MANAGER: &str = "kubewasm-dev";

/// One manifest document and where it came from.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file.
    pub source: PathBuf,
    /// The object.
    pub object: Value,
}

impl Document {
    fn type_ref(&self) -> Option<TypeRef> {
        Some(TypeRef::new(
            self.object.get("apiVersion")?.as_str()?,
            self.object.get("kind")?.as_str()?,
        ))
    }

    fn name(&self) -> &str {
        self.object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// The files under `paths` (directories recursively, sorted) whose extension is one of
/// `extensions`; a path given as a file is taken whatever its extension.
pub fn files_with_extensions(
    paths: &[PathBuf],
    extensions: &[&str],
) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for p in paths {
        collect(p, extensions, &mut files)?;
    }
    Ok(files)
}

/// Read YAML/JSON manifests from files and directories (recursively, sorted), skipping
/// empty documents. `List` kinds are flattened.
pub fn read_manifests(paths: &[PathBuf]) -> Result<Vec<Document>, Error> {
    let files = files_with_extensions(paths, &["yaml", "yml", "json"])?;
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            context: format!("reading {}", file.display()),
            source,
        })?;
        for de in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = Value::deserialize(de).map_err(|e| Error::Document {
                path: file.clone(),
                reason: e.to_string(),
            })?;
            if value.is_null() {
                continue;
            }
            match value.get("items").and_then(Value::as_array) {
                Some(items) if value.get("kind").and_then(Value::as_str) == Some("List") => docs
                    .extend(items.iter().map(|o| Document {
                        source: file.clone(),
                        object: o.clone(),
                    })),
                _ => docs.push(Document {
                    source: file.clone(),
                    object: value,
                }),
            }
        }
    }
    Ok(docs)
}

fn collect(p: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) -> Result<(), Error> {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|source| Error::Io {
                context: format!("reading {}", p.display()),
                source,
            })?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for e in entries {
            if e.is_dir() {
                collect(&e, extensions, out)?;
            } else if e
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| extensions.contains(&x))
            {
                out.push(e);
            }
        }
        Ok(())
    } else if p.is_file() {
        out.push(p.to_path_buf());
        Ok(())
    } else {
        Err(Error::Io {
            context: format!("manifest path {}", p.display()),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        })
    }
}

fn is_crd(d: &Document) -> bool {
    d.type_ref().is_some_and(|t| {
        t.kind == "CustomResourceDefinition" && t.group() == "apiextensions.k8s.io"
    })
}

fn is_namespace(d: &Document) -> bool {
    d.type_ref()
        .is_some_and(|t| t.kind == "Namespace" && t.api_version == "v1")
}

/// Apply documents with server-side apply: namespaces and CRDs first, then wait until each
/// CRD's kinds are served, then the rest. Returns how many objects were applied.
pub async fn apply_manifests(
    client: &Client,
    docs: &[Document],
    wait: Duration,
) -> Result<usize, Error> {
    let discovery = Discovery::new(client.clone());
    let (first, rest): (Vec<&Document>, Vec<&Document>) =
        docs.iter().partition(|d| is_crd(d) || is_namespace(d));
    for d in &first {
        apply_one(client, &discovery, d).await?;
    }
    // Wait for every CRD's served versions to appear in discovery.
    let deadline = Instant::now() + wait;
    for d in first.iter().filter(|d| is_crd(d)) {
        let group = d
            .object
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = d
            .object
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let versions = d
            .object
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for v in versions {
            if v.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            let Some(name) = v.get("name").and_then(Value::as_str) else {
                continue;
            };
            let t = TypeRef::new(format!("{group}/{name}"), kind);
            loop {
                match discovery.resolve(&ResourceRef::Kind(t.clone())).await {
                    Ok(_) => break,
                    Err(ResolveError::NotServed(_)) if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    for d in &rest {
        apply_one(client, &discovery, d).await?;
    }
    Ok(docs.len())
}

async fn apply_one(client: &Client, discovery: &Discovery, d: &Document) -> Result<(), Error> {
    let bad = |reason: &str| Error::Document {
        path: d.source.clone(),
        reason: reason.to_string(),
    };
    let t = d
        .type_ref()
        .ok_or_else(|| bad("document lacks apiVersion or kind"))?;
    if d.name().is_empty() {
        return Err(bad("document lacks metadata.name"));
    }
    let res = discovery.resolve(&ResourceRef::Kind(t.clone())).await?;
    let api: Api<DynamicObject> = if res.namespaced {
        let ns = d
            .object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &api_resource(&res))
    } else {
        Api::all_with(client.clone(), &api_resource(&res))
    };
    let what = format!("{} {}", t.kind, d.name());
    api.patch(
        d.name(),
        &PatchParams::apply(DEV_MANAGER).force(),
        &Patch::Apply(&d.object),
    )
    .await
    .map_err(|e| Error::from_kube("apply", what.clone(), e))?;
    tracing::info!(target: "dev", source = %d.source.display(), "applied {what}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_multi_document_yaml_and_lists_from_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("crds")).unwrap();
        std::fs::write(
            dir.path().join("crds/a.yaml"),
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.yaml"),
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: n}}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let docs = read_manifests(&[dir.path().to_path_buf()]).unwrap();
        let kinds: Vec<_> = docs.iter().map(|d| d.type_ref().unwrap().kind).collect();
        assert_eq!(
            kinds,
            ["ConfigMap", "Namespace", "CustomResourceDefinition"]
        );
        assert!(is_crd(&docs[2]) && is_namespace(&docs[1]));
    }

    #[test]
    fn missing_paths_and_bad_yaml_are_errors() {
        assert!(read_manifests(&[PathBuf::from("/nonexistent/x.yaml")]).is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.yaml"), "a: [").unwrap();
        let err = read_manifests(&[dir.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.yaml"), "{err}");
    }
}
