//! The manifest a plugin returns from `describe`: what it watches and what it may write.
//!
//! ```
//! use kubewasm_sdk::{Grant, Manifest};
//!
//! let manifest = Manifest::new("mongodb-monitor", "0.1.0")
//!     .watch_kind("mongodbs", "mongodb.com/v1", "MongoDB")
//!     .watch_resource("models", "seldondeployments.v1.machinelearning.seldon.io")
//!     .grant(Grant::on("monitoring.coreos.com", "ServiceMonitor").create());
//! assert!(manifest.validate().is_ok());
//! ```
//!
//! A watch or a read may declare the fields the plugin uses (its projection): the plugin
//! then receives, in events and from [`host::get`](crate::host::get) /
//! [`host::list`](crate::host::list), only those fields plus the object's identity
//! (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`, `metadata.uid`,
//! `metadata.resourceVersion`), and the host caches less. No fields: whole objects.
//!
//! ```
//! use kubewasm_sdk::{Manifest, Read, Watch};
//!
//! let manifest = Manifest::new("pod-counter", "0.1.0")
//!     .watch(Watch::kind("pods", "v1", "Pod").fields(["metadata.labels", "status.phase"]))
//!     .read(Read::kind("v1", "Namespace").fields(["metadata"])); // metadata only
//! assert_eq!(manifest.watches[0].fields, ["metadata.labels", "status.phase"]);
//! assert_eq!(manifest.reads[0].fields, ["metadata"]);
//! ```

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::intent::{Intent, group_of};

/// What a watch selects: a kind, or a resource argument as kubectl takes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResourceRef {
    /// By apiVersion and kind, e.g. `mongodb.com/v1` + `MongoDB`.
    Kind {
        /// `group/version`, or `v1` for the core group.
        api_version: String,
        /// The kind.
        kind: String,
    },
    /// By resource argument: `plural.version.group`, `plural.group` or `plural`.
    Resource(String),
}

impl ResourceRef {
    /// By apiVersion and kind.
    pub fn kind(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        ResourceRef::Kind {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// By resource argument, e.g. `seldondeployments.v1.machinelearning.seldon.io`.
    pub fn resource(resource: impl Into<String>) -> Self {
        ResourceRef::Resource(resource.into())
    }
}

/// One kind of object the plugin wants events for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Watch {
    /// A name the plugin chooses; events carry it ([`Event::watch_id`](crate::Event::watch_id)).
    pub id: String,
    /// The kind or resource.
    pub resource: ResourceRef,
    /// Only this namespace; None: all namespaces.
    pub namespace: Option<String>,
    /// A label selector, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// A field selector, e.g. `metadata.name=main`.
    pub field_selector: Option<String>,
    /// The fields the plugin uses (its projection); empty: whole objects. See
    /// [`Watch::fields`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

impl Watch {
    /// Watch a kind, e.g. `Watch::kind("dbs", "mongodb.com/v1", "MongoDB")`.
    pub fn kind(
        id: impl Into<String>,
        api_version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self::new(id, ResourceRef::kind(api_version, kind))
    }

    /// Watch a resource argument, e.g. `seldondeployments.v1.machinelearning.seldon.io`.
    pub fn resource(id: impl Into<String>, resource: impl Into<String>) -> Self {
        Self::new(id, ResourceRef::resource(resource))
    }

    /// Watch what `resource` selects.
    pub fn new(id: impl Into<String>, resource: ResourceRef) -> Self {
        Self {
            id: id.into(),
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
            fields: Vec::new(),
        }
    }

    /// Only objects in `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects matching this label selector.
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects matching this field selector.
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Declares the fields the plugin uses (added to those declared before), e.g.
    /// `["spec.database", "status.phase", "metadata.labels"]`: events (and reads of this
    /// kind) then carry only these and the object's identity. Each is a path of keys joined
    /// by `.`; a path keeps the whole value it reaches, a path crossing a list applies to
    /// every element, and `metadata` alone is a metadata-only projection. A key containing
    /// `.` (a label) is kept through its parent (`metadata.labels`).
    pub fn fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fields.extend(fields.into_iter().map(Into::into));
        self
    }
}

/// A kind the plugin reads through [`host::get`](crate::host::get) /
/// [`host::list`](crate::host::list) without watching it, and the fields it uses there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Read {
    /// The kind or resource.
    pub resource: ResourceRef,
    /// The fields the plugin uses (its projection); empty: whole objects. See
    /// [`Watch::fields`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

impl Read {
    /// Read a kind, e.g. `Read::kind("v1", "Secret")`.
    pub fn kind(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self::new(ResourceRef::kind(api_version, kind))
    }

    /// Read a resource argument, e.g. `deployments.apps`.
    pub fn resource(resource: impl Into<String>) -> Self {
        Self::new(ResourceRef::resource(resource))
    }

    /// Read what `resource` selects, whole objects.
    pub fn new(resource: ResourceRef) -> Self {
        Self {
            resource,
            fields: Vec::new(),
        }
    }

    /// Declares the fields the plugin uses, as [`Watch::fields`] does.
    pub fn fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fields.extend(fields.into_iter().map(Into::into));
        self
    }
}

/// A verb a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// `create` intents (server-side apply of a whole object).
    Create,
    /// `patch` intents on the main resource.
    Patch,
    /// `patch` intents on the `status` subresource.
    PatchStatus,
    /// `delete` intents.
    Delete,
}

/// Permission to write some objects. Every intent must fall inside a grant.
///
/// ```
/// use kubewasm_sdk::Grant;
/// let g = Grant::on("", "Service").kind("ConfigMap").namespace("web").create().delete();
/// assert_eq!(g.api_groups, vec![""]);
/// assert_eq!(g.kinds, vec!["Service", "ConfigMap"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// API groups, `""` for core, `"*"` for any.
    pub api_groups: Vec<String>,
    /// Kinds, `"*"` for any kind in those groups.
    pub kinds: Vec<String>,
    /// Namespaces; empty: every namespace and cluster-scoped objects.
    pub namespaces: Vec<String>,
    /// What may be done.
    pub verbs: Vec<Verb>,
    /// Whether intents under this grant may set `force`.
    pub allow_force: bool,
}

impl Grant {
    /// A grant on one kind of one API group (`""` for the core group). Add verbs with
    /// [`create`](Self::create), [`patch`](Self::patch), [`patch_status`](Self::patch_status),
    /// [`delete`](Self::delete).
    pub fn on(api_group: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            api_groups: vec![api_group.into()],
            kinds: vec![kind.into()],
            ..Self::default()
        }
    }

    /// Also cover this API group.
    pub fn group(mut self, api_group: impl Into<String>) -> Self {
        self.api_groups.push(api_group.into());
        self
    }

    /// Also cover this kind.
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kinds.push(kind.into());
        self
    }

    /// Restrict to (or add) a namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespaces.push(namespace.into());
        self
    }

    /// Allow a verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        if !self.verbs.contains(&verb) {
            self.verbs.push(verb);
        }
        self
    }

    /// Allow `create` intents.
    pub fn create(self) -> Self {
        self.verb(Verb::Create)
    }

    /// Allow `patch` intents on the main resource.
    pub fn patch(self) -> Self {
        self.verb(Verb::Patch)
    }

    /// Allow `patch` intents on the `status` subresource.
    pub fn patch_status(self) -> Self {
        self.verb(Verb::PatchStatus)
    }

    /// Allow `delete` intents.
    pub fn delete(self) -> Self {
        self.verb(Verb::Delete)
    }

    /// Allow intents under this grant to set `force`.
    pub fn allow_force(mut self) -> Self {
        self.allow_force = true;
        self
    }

    /// Whether this grant covers `verb` on `kind` in `api_group` and `namespace`.
    pub fn covers(
        &self,
        verb: Verb,
        api_group: &str,
        kind: &str,
        namespace: Option<&str>,
        force: bool,
    ) -> bool {
        let any_or = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        self.verbs.contains(&verb)
            && any_or(&self.api_groups, api_group)
            && any_or(&self.kinds, kind)
            && (self.namespaces.is_empty()
                || namespace.is_some_and(|ns| self.namespaces.iter().any(|x| x == ns)))
            && (!force || self.allow_force)
    }
}

/// What a plugin is and what it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Letters, digits and `-`, at most 63 characters; the field manager is `kubewasm-<name>`.
    pub name: String,
    /// Free text, semver recommended.
    pub version: String,
    /// Kinds the plugin receives events for.
    pub watches: Vec<Watch>,
    /// What the plugin may write.
    pub grants: Vec<Grant>,
    /// Extra kinds the plugin may read with [`host::get`](crate::host::get) /
    /// [`host::list`](crate::host::list), each with its projection.
    pub reads: Vec<Read>,
}

impl Manifest {
    /// A manifest with no watches, grants or reads yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            watches: Vec::new(),
            grants: Vec::new(),
            reads: Vec::new(),
        }
    }

    /// Watch a kind by apiVersion and kind (all namespaces).
    pub fn watch_kind(
        self,
        id: impl Into<String>,
        api_version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        self.watch(Watch::kind(id, api_version, kind))
    }

    /// Watch by resource argument, e.g. `seldondeployments.v1.machinelearning.seldon.io`.
    pub fn watch_resource(self, id: impl Into<String>, resource: impl Into<String>) -> Self {
        self.watch(Watch::resource(id, resource))
    }

    /// Add a watch built with [`Watch`] (namespace, selectors).
    pub fn watch(mut self, watch: Watch) -> Self {
        self.watches.push(watch);
        self
    }

    /// Add a grant.
    pub fn grant(mut self, grant: Grant) -> Self {
        self.grants.push(grant);
        self
    }

    /// Declare a kind the plugin reads through the host's cache without watching it
    /// (whole objects).
    pub fn read_kind(self, api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        self.read(Read::kind(api_version, kind))
    }

    /// Declare a resource the plugin reads through the host's cache without watching it
    /// (whole objects).
    pub fn read_resource(self, resource: impl Into<String>) -> Self {
        self.read(Read::resource(resource))
    }

    /// Add a read built with [`Read`] (its fields).
    pub fn read(mut self, read: Read) -> Self {
        self.reads.push(read);
        self
    }

    /// Checks what the host checks on load: the name's shape, at least one watch, unique
    /// non-empty watch ids.
    pub fn validate(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 63
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !name_ok {
            return Err(format!(
                "plugin name {:?} must be 1-63 letters, digits or '-'",
                self.name
            ));
        }
        if self.watches.is_empty() {
            return Err(format!("plugin {} declares no watches", self.name));
        }
        let mut ids = BTreeSet::new();
        for w in &self.watches {
            if w.id.is_empty() {
                return Err("a watch has an empty id".to_owned());
            }
            if !ids.insert(w.id.as_str()) {
                return Err(format!("watch id {:?} is declared twice", w.id));
            }
        }
        Ok(())
    }

    /// Whether the grants allow `intent`, as the host checks it. `Err` names what is
    /// missing. Use it in your tests to keep grants and intents in step.
    pub fn permits(&self, intent: &Intent) -> Result<(), String> {
        let target = intent.target().map_err(|e| e.message)?;
        let (verb, force) = (intent.verb(), intent.is_forced());
        let group = group_of(&target.api_version);
        if self.grants.iter().any(|g| {
            g.covers(
                verb,
                group,
                &target.kind,
                target.namespace.as_deref(),
                force,
            )
        }) {
            Ok(())
        } else {
            Err(format!(
                "no grant allows {verb:?}{} on {} {} in namespace {}",
                if force { " (forced)" } else { "" },
                target.api_version,
                target.kind,
                target.namespace.as_deref().unwrap_or("<cluster>")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intent::ObjectRef;
    use serde_json::json;

    #[test]
    fn validate() {
        let ok = Manifest::new("a-b1", "1").watch_kind("x", "v1", "ConfigMap");
        assert!(ok.validate().is_ok());
        assert!(
            Manifest::new("a_b", "1")
                .watch_kind("x", "v1", "C")
                .validate()
                .is_err()
        );
        assert!(
            Manifest::new("a".repeat(64), "1")
                .watch_kind("x", "v1", "C")
                .validate()
                .is_err()
        );
        assert!(Manifest::new("a", "1").validate().is_err());
        let dup = Manifest::new("a", "1")
            .watch_kind("x", "v1", "C")
            .watch_resource("x", "pods");
        assert!(dup.validate().unwrap_err().contains("twice"));
    }

    #[test]
    fn permits() {
        let m = Manifest::new("p", "1")
            .watch(
                Watch::kind("x", "v1", "ConfigMap")
                    .namespace("web")
                    .label_selector("a=b"),
            )
            .grant(Grant::on("", "Service").namespace("web").create())
            .grant(
                Grant::on("mongodb.com", "*")
                    .patch()
                    .patch_status()
                    .allow_force(),
            );
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "web"}});
        assert!(m.permits(&Intent::create(svc.clone()).into()).is_ok());
        assert!(
            m.permits(&Intent::create(svc.clone()).force().into())
                .is_err()
        );
        let other_ns = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "x"}});
        assert!(m.permits(&Intent::create(other_ns).into()).is_err());
        let db = ObjectRef::namespaced("mongodb.com/v1", "MongoDB", "any", "db");
        assert!(
            m.permits(
                &Intent::apply_patch(db.clone(), json!({}))
                    .status()
                    .force()
                    .into()
            )
            .is_ok()
        );
        let err = m.permits(&Intent::delete(db).into()).unwrap_err();
        assert!(err.contains("Delete"), "{err}");
    }
}
