//! What a plugin declares about itself: its watches, grants and reads.
//!
//! These are plain Rust types, independent of the wasm bindings, so the rest of the
//! host (watch, grant, rbac) never depends on wasmtime.

use std::collections::HashSet;

use crate::resource::ResourceRef;

/// A plugin's manifest, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Plugin name (DNS label).
    pub name: String,
    /// Free-text version.
    pub version: String,
    /// What the plugin receives events for.
    pub watches: Vec<Watch>,
    /// What it may write.
    pub grants: Vec<Grant>,
    /// Extra kinds it may read from the cache.
    pub reads: Vec<ResourceRef>,
}

/// One watch of a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// The plugin's name for the watch.
    pub id: String,
    /// What to watch.
    pub resource: ResourceRef,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Label selector text.
    pub label_selector: Option<String>,
    /// Field selector text.
    pub field_selector: Option<String>,
}

/// A verb a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Create (SSA of a whole object).
    Create,
    /// Patch the main resource.
    Patch,
    /// Patch the status subresource.
    PatchStatus,
    /// Delete.
    Delete,
}

impl Verb {
    /// Lowercase name as used in logs and RBAC.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Patch => "patch",
            Verb::PatchStatus => "patch-status",
            Verb::Delete => "delete",
        }
    }
}

/// Permission to write some objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// API groups (`""` core, `"*"` any).
    pub api_groups: Vec<String>,
    /// Kinds (`"*"` any).
    pub kinds: Vec<String>,
    /// Namespaces; empty = all (and cluster-scoped).
    pub namespaces: Vec<String>,
    /// Allowed verbs.
    pub verbs: Vec<Verb>,
    /// Whether `force` may be used.
    pub allow_force: bool,
}

impl Manifest {
    /// The field manager the host uses for this plugin's writes.
    pub fn field_manager(&self) -> String {
        format!("kubewasm-{}", self.name)
    }

    /// Check the manifest for things the host cannot serve. Returns the first problem.
    pub fn validate(&self) -> Result<(), String> {
        if !is_dns_label(&self.name) {
            return Err(format!(
                "name {:?} must be a DNS label: lowercase letters, digits and '-', at most 63 characters",
                self.name
            ));
        }
        let mut ids = HashSet::new();
        for w in &self.watches {
            if w.id.is_empty() {
                return Err(format!("a watch on {} has an empty id", w.resource));
            }
            if !ids.insert(w.id.as_str()) {
                return Err(format!("watch id {:?} is used twice", w.id));
            }
            if let Some(sel) = &w.label_selector {
                crate::selector::LabelSelector::parse(sel)
                    .map_err(|e| format!("watch {:?}: label selector {sel:?}: {e}", w.id))?;
            }
            if let Some(sel) = &w.field_selector {
                crate::selector::FieldSelector::parse(sel)
                    .map_err(|e| format!("watch {:?}: field selector {sel:?}: {e}", w.id))?;
            }
            if let ResourceRef::Kind(t) = &w.resource
                && (t.api_version.is_empty() || t.kind.is_empty())
            {
                return Err(format!(
                    "watch {:?}: apiVersion and kind are required",
                    w.id
                ));
            }
        }
        for (i, g) in self.grants.iter().enumerate() {
            if g.verbs.is_empty() || g.kinds.is_empty() || g.api_groups.is_empty() {
                return Err(format!(
                    "grant #{i} needs at least one api group, kind and verb"
                ));
            }
        }
        Ok(())
    }
}

/// RFC 1123 label: what Kubernetes accepts in names and what we use in field managers.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{ResourceArg, TypeRef};

    fn manifest() -> Manifest {
        Manifest {
            name: "mongodb-monitor".into(),
            version: "0.1.0".into(),
            watches: vec![Watch {
                id: "dbs".into(),
                resource: ResourceRef::Kind(TypeRef::new("mongodb.com/v1", "MongoDB")),
                namespace: None,
                label_selector: Some("app=db,tier!=x".into()),
                field_selector: None,
            }],
            grants: vec![Grant {
                api_groups: vec!["monitoring.coreos.com".into()],
                kinds: vec!["ServiceMonitor".into()],
                namespaces: vec![],
                verbs: vec![Verb::Create],
                allow_force: false,
            }],
            reads: vec![],
        }
    }

    #[test]
    fn accepts_a_good_manifest() {
        assert_eq!(manifest().validate(), Ok(()));
        assert_eq!(manifest().field_manager(), "kubewasm-mongodb-monitor");
    }

    #[test]
    fn rejects_bad_names() {
        for bad in ["", "Upper", "has space", "-lead", "trail-", &"x".repeat(64)] {
            let mut m = manifest();
            m.name = bad.to_string();
            assert!(m.validate().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rejects_duplicate_watch_ids_and_bad_selectors() {
        let mut m = manifest();
        m.watches.push(m.watches[0].clone());
        assert!(m.validate().unwrap_err().contains("used twice"));
        let mut m = manifest();
        m.watches[0].label_selector = Some("a in (".into());
        assert!(m.validate().unwrap_err().contains("label selector"));
        let mut m = manifest();
        m.watches[0].resource = ResourceRef::Resource(ResourceArg::parse("x").unwrap());
        m.watches[0].id = String::new();
        assert!(m.validate().unwrap_err().contains("empty id"));
    }

    #[test]
    fn rejects_empty_grants() {
        let mut m = manifest();
        m.grants[0].verbs.clear();
        assert!(m.validate().is_err());
    }
}
