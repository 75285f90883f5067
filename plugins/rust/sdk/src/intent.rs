//! Intents: the writes a plugin asks the host to make, and builders for them.
//!
//! ```
//! use kubewasm_sdk::{Intent, ObjectRef, Propagation};
//! use serde_json::json;
//!
//! let site = json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
//!                   "metadata": {"name": "blog", "namespace": "web"}});
//! let create: Intent = Intent::create(json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "blog-config", "namespace": "web"},
//! })).owned_by_trigger().into();
//! let status: Intent = Intent::apply_patch(ObjectRef::of(&site)?, json!({"status": {"ok": true}}))
//!     .status()
//!     .into();
//! let delete: Intent = Intent::delete(ObjectRef::namespaced("v1", "ConfigMap", "web", "old"))
//!     .propagation(Propagation::Foreground)
//!     .into();
//! # Ok::<(), kubewasm_sdk::HandleError>(())
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{HandleError, Result};
use crate::manifest::Verb;
use crate::object::ObjectExt;

/// Which object an intent acts on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// e.g. `mongodb.com/v1`, `v1`.
    pub api_version: String,
    /// e.g. `MongoDB`.
    pub kind: String,
    /// None for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectRef {
    /// A reference to a namespaced object.
    pub fn namespaced(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A reference to a cluster-scoped object.
    pub fn cluster(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            name: name.into(),
        }
    }

    /// The reference of an unstructured object (`apiVersion`, `kind`, `metadata.name` and
    /// `metadata.namespace` if present). Errors (permanent) when one is missing.
    pub fn of(object: &Value) -> Result<Self> {
        let missing = |what: &str| HandleError::permanent(format!("object has no {what}"));
        Ok(Self {
            api_version: object
                .api_version()
                .ok_or_else(|| missing("apiVersion"))?
                .to_owned(),
            kind: object.kind().ok_or_else(|| missing("kind"))?.to_owned(),
            namespace: object.namespace().map(str::to_owned),
            name: object.require_name()?.to_owned(),
        })
    }

    /// The reference of a k8s-openapi object.
    #[cfg(feature = "k8s-openapi")]
    pub fn of_resource<K>(object: &K) -> Result<Self>
    where
        K: k8s_openapi::Resource
            + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    {
        let meta = object.metadata();
        Ok(Self {
            api_version: K::API_VERSION.to_owned(),
            kind: K::KIND.to_owned(),
            namespace: meta.namespace.clone(),
            name: meta
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| HandleError::permanent("object has no metadata.name"))?,
        })
    }

    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        group_of(&self.api_version)
    }
}

/// The API group of an `apiVersion` (`""` for the core group `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// A write the plugin asks the host to make. Build one with [`Intent::create`],
/// [`Intent::apply_patch`], [`Intent::merge_patch`] or [`Intent::delete`], then `.into()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "intent", rename_all = "lowercase")]
pub enum Intent {
    /// Create or converge a whole object with server-side apply.
    Create(CreateIntent),
    /// Change part of an existing object.
    Patch(PatchIntent),
    /// Delete an object.
    Delete(DeleteIntent),
}

impl Intent {
    /// Create or converge `object` (a complete object: `apiVersion`, `kind`,
    /// `metadata.name`, and `metadata.namespace` for namespaced kinds).
    pub fn create(object: Value) -> CreateIntent {
        CreateIntent {
            object,
            force: false,
            owned_by_trigger: false,
        }
    }

    /// Like [`Intent::create`], from any serializable object (e.g. a k8s-openapi type).
    pub fn create_from<T: Serialize>(object: &T) -> Result<CreateIntent> {
        Ok(Self::create(crate::object::to_value(object)?))
    }

    /// Patch `target` with server-side apply: `body` is a partial object holding the
    /// fields this plugin manages.
    pub fn apply_patch(target: ObjectRef, body: Value) -> PatchIntent {
        PatchIntent {
            target,
            body,
            strategy: PatchStrategy::Apply,
            status: false,
            force: false,
        }
    }

    /// Patch `target` with a JSON merge patch (RFC 7386): no field ownership.
    pub fn merge_patch(target: ObjectRef, body: Value) -> PatchIntent {
        PatchIntent {
            strategy: PatchStrategy::Merge,
            ..Self::apply_patch(target, body)
        }
    }

    /// Delete `target`.
    pub fn delete(target: ObjectRef) -> DeleteIntent {
        DeleteIntent {
            target,
            uid: None,
            resource_version: None,
            propagation: None,
        }
    }

    /// The verb a grant must allow for this intent.
    pub fn verb(&self) -> Verb {
        match self {
            Intent::Create(_) => Verb::Create,
            Intent::Patch(p) if p.status => Verb::PatchStatus,
            Intent::Patch(_) => Verb::Patch,
            Intent::Delete(_) => Verb::Delete,
        }
    }

    /// Whether this intent asks to take fields from other managers.
    pub fn is_forced(&self) -> bool {
        match self {
            Intent::Create(c) => c.force,
            Intent::Patch(p) => p.force,
            Intent::Delete(_) => false,
        }
    }

    /// The object this intent writes. For `create`, read from the object itself.
    pub fn target(&self) -> Result<ObjectRef> {
        match self {
            Intent::Create(c) => ObjectRef::of(&c.object),
            Intent::Patch(p) => Ok(p.target.clone()),
            Intent::Delete(d) => Ok(d.target.clone()),
        }
    }

    /// The create intent, if this is one.
    pub fn as_create(&self) -> Option<&CreateIntent> {
        match self {
            Intent::Create(c) => Some(c),
            _ => None,
        }
    }

    /// The patch intent, if this is one.
    pub fn as_patch(&self) -> Option<&PatchIntent> {
        match self {
            Intent::Patch(p) => Some(p),
            _ => None,
        }
    }

    /// The delete intent, if this is one.
    pub fn as_delete(&self) -> Option<&DeleteIntent> {
        match self {
            Intent::Delete(d) => Some(d),
            _ => None,
        }
    }
}

/// Create or converge a whole object with server-side apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateIntent {
    /// The complete object.
    pub object: Value,
    /// Take fields owned by other managers (the grant must allow force).
    pub force: bool,
    /// The host adds a controller ownerReference to the triggering object.
    pub owned_by_trigger: bool,
}

impl CreateIntent {
    /// Take ownership of fields another manager owns (needs a grant with `allow_force`).
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }

    /// Make the triggering object the controller owner, so deleting it deletes this.
    pub fn owned_by_trigger(mut self) -> Self {
        self.owned_by_trigger = true;
        self
    }
}

/// How a patch body is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchStrategy {
    /// Server-side apply under the plugin's field manager.
    Apply,
    /// JSON merge patch (RFC 7386).
    Merge,
}

/// Change part of an existing object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchIntent {
    /// The object to patch.
    pub target: ObjectRef,
    /// The patch body.
    pub body: Value,
    /// Apply or merge.
    pub strategy: PatchStrategy,
    /// Patch the `status` subresource.
    pub status: bool,
    /// Take ownership of conflicting fields (apply only; the grant must allow force).
    pub force: bool,
}

impl PatchIntent {
    /// Patch the `status` subresource instead of the main resource.
    pub fn status(mut self) -> Self {
        self.status = true;
        self
    }

    /// Take ownership of conflicting fields (apply only; needs a grant with `allow_force`).
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }
}

/// How dependents are treated when an object is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Propagation {
    /// Delete now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete dependents first, then the object.
    Foreground,
    /// Keep dependents, removing their owner references.
    Orphan,
}

/// Delete an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteIntent {
    /// The object to delete.
    pub target: ObjectRef,
    /// Precondition: only if the object still has this uid.
    pub uid: Option<String>,
    /// Precondition: only if the object still has this resourceVersion.
    pub resource_version: Option<String>,
    /// None: the server's default.
    pub propagation: Option<Propagation>,
}

impl DeleteIntent {
    /// Only delete if the object still has this uid.
    pub fn uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }

    /// Only delete if the object still has this resourceVersion.
    pub fn resource_version(mut self, rv: impl Into<String>) -> Self {
        self.resource_version = Some(rv.into());
        self
    }

    /// How dependents are treated.
    pub fn propagation(mut self, propagation: Propagation) -> Self {
        self.propagation = Some(propagation);
        self
    }
}

impl From<CreateIntent> for Intent {
    fn from(i: CreateIntent) -> Self {
        Intent::Create(i)
    }
}

impl From<PatchIntent> for Intent {
    fn from(i: PatchIntent) -> Self {
        Intent::Patch(i)
    }
}

impl From<DeleteIntent> for Intent {
    fn from(i: DeleteIntent) -> Self {
        Intent::Delete(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builders() {
        let obj = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}});
        let c: Intent = Intent::create(obj.clone())
            .owned_by_trigger()
            .force()
            .into();
        assert_eq!(c.verb(), Verb::Create);
        assert!(c.is_forced());
        assert_eq!(
            c.target().unwrap(),
            ObjectRef::namespaced("v1", "Service", "n", "s")
        );
        let c = c.as_create().unwrap();
        assert!(c.owned_by_trigger);

        let p: Intent = Intent::apply_patch(ObjectRef::of(&obj).unwrap(), json!({}))
            .status()
            .into();
        assert_eq!(p.verb(), Verb::PatchStatus);
        assert!(!p.is_forced());
        let m: Intent =
            Intent::merge_patch(ObjectRef::cluster("v1", "Namespace", "n"), json!({})).into();
        assert_eq!(m.verb(), Verb::Patch);
        assert_eq!(m.as_patch().unwrap().strategy, PatchStrategy::Merge);

        let d: Intent = Intent::delete(ObjectRef::cluster("v1", "Namespace", "n"))
            .uid("u")
            .resource_version("5")
            .propagation(Propagation::Orphan)
            .into();
        assert_eq!(d.verb(), Verb::Delete);
        let d = d.as_delete().unwrap();
        assert_eq!(
            (d.uid.as_deref(), d.resource_version.as_deref()),
            (Some("u"), Some("5"))
        );
        assert_eq!(d.propagation, Some(Propagation::Orphan));
    }

    #[test]
    fn object_ref_errors_and_groups() {
        assert!(ObjectRef::of(&json!({"kind": "X", "metadata": {"name": "a"}})).is_err());
        assert!(ObjectRef::of(&json!({"apiVersion": "v1", "kind": "X", "metadata": {}})).is_err());
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("networking.k8s.io/v1"), "networking.k8s.io");
        assert_eq!(
            ObjectRef::cluster("mongodb.com/v1", "MongoDB", "x").group(),
            "mongodb.com"
        );
    }

    #[test]
    fn serializes_for_inspection() {
        let i: Intent = Intent::delete(ObjectRef::cluster("v1", "Namespace", "n")).into();
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(v["intent"], "delete");
        assert_eq!(v["target"]["kind"], "Namespace");
    }

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn typed_objects() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("n".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            ObjectRef::of_resource(&cm).unwrap(),
            ObjectRef::namespaced("v1", "ConfigMap", "n", "c")
        );
        let c = Intent::create_from(&cm).unwrap();
        assert_eq!(c.object["kind"], "ConfigMap");
        assert_eq!(c.object["apiVersion"], "v1");
        assert!(ObjectRef::of_resource(&ConfigMap::default()).is_err());
    }
}
