//! The `Plugin` kind (`plugins.kubewasm.dev/v1alpha1`, cluster-scoped): one plugin as a
//! Kubernetes object — where its module comes from, its settings, its limits, and the
//! operator's approval of what it may watch, read and write. RBAC on this kind decides
//! who approves plugins; the plugin's own files never do.
//!
//! The same document, without `spec.module`, is the operator's approval in directory mode
//! (`--approvals FILE|DIR`), so `kubewasm approve` prints one object for both routes.
//!
//! Pure types and conversions: the reconciler lives in the engine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::grant::{Approval, ApprovedRead, ApprovedWatch, Mode};
use crate::manifest::{Grant, Manifest, Verb};
use crate::resource::{ResourceArg, ResourceRef, TypeRef};

/// API group of the kind.
pub const GROUP: &str = "kubewasm.dev";
/// Version served.
pub const VERSION: &str = "v1alpha1";
/// `group/version`.
pub const API_VERSION: &str = "kubewasm.dev/v1alpha1";
/// The kind.
pub const KIND: &str = "Plugin";
/// The resource's plural name.
pub const PLURAL: &str = "plugins";
/// The namespaced kind: a team's plugin, confined to the object's namespace. `Plugin`
/// stays cluster-scoped: a CRD's scope cannot change, so the Role/ClusterRole naming
/// (namespaced kind plain, cluster kind prefixed) would mean deleting every Plugin.
pub const NAMESPACED_KIND: &str = "NamespacedPlugin";
/// The namespaced kind's plural name.
pub const NAMESPACED_PLURAL: &str = "namespacedplugins";

/// A `Plugin` object as read from the cluster or a file: metadata as JSON (only its name
/// and generation are used here), spec and status typed.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginObject {
    /// `kubewasm.dev/v1alpha1`.
    pub api_version: String,
    /// `Plugin`.
    pub kind: String,
    /// Object metadata (name, generation, uid, …).
    #[serde(default)]
    pub metadata: serde_json::Value,
    /// What the operator asks for.
    pub spec: PluginSpec,
    /// What the host reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PluginObjectStatus>,
}

impl PluginObject {
    /// `metadata.name` ("" when absent).
    pub fn name(&self) -> &str {
        self.metadata
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
    }

    /// `metadata.generation` (0 when absent: a file, not an object of a cluster).
    pub fn generation(&self) -> i64 {
        self.metadata
            .get("generation")
            .and_then(|g| g.as_i64())
            .unwrap_or_default()
    }

    /// Whether this is a `kubewasm.dev/v1alpha1` `Plugin`.
    pub fn is_plugin(api_version: &str, kind: &str) -> bool {
        api_version == API_VERSION && kind == KIND
    }
}

/// `spec` of a Plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSpec {
    /// Where the component comes from: `oci://HOST[:PORT]/REPO@sha256:…` (recommended) or
    /// `oci://…:TAG` (resolved to a digest, which status records). Required on a cluster
    /// (the CRD says so); absent in a directory-mode approvals file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Handed to the plugin as its settings (JSON text of this object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
    /// The operator's approval: what the plugin may watch, read and write. The plugin's
    /// `describe()` answer must fall inside it.
    #[serde(default)]
    pub permissions: Permissions,
    /// Limits for this plugin, as the `kubewasm` key of a settings file sets them
    /// (`callDeadline`, `memoryMiB`, `maxIntents`, …); checked by the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<serde_json::Value>,
    /// A `kubernetes.io/dockerconfigjson` Secret in the host's namespace holding the
    /// registry's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<LocalObjectReference>,
    /// `Enforce` (the default): admitted writes are applied. `DryRun`: each is sent with
    /// `dryRun=All` as the plugin's identity, and status reports what would change.
    /// Always written out, so `kubewasm approve`'s output shows the switch.
    #[serde(default)]
    pub mode: Mode,
    /// A new version run beside the serving one, in dry run, on the same events and the
    /// same view of the cluster, under this Plugin's permissions, limits and pull secret;
    /// status counts where the two disagree. Promotion: move its module into `module`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateSpec>,
}

/// `spec.candidate` of a Plugin: the module and settings of a shadow version.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CandidateSpec {
    /// Where the candidate's component comes from, as `spec.module` spells it.
    pub module: String,
    /// The candidate's settings (the serving version's are not inherited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
}

impl PluginSpec {
    /// What the operator approved: `permissions`, in `mode`.
    pub fn approval(&self) -> Result<Approval, String> {
        let mut approval = self.permissions.to_approval()?;
        approval.mode = self.mode;
        Ok(approval)
    }
}

/// A reference to an object by name, in a namespace the context gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LocalObjectReference {
    /// The object's name.
    pub name: String,
}

/// What a plugin may watch, read and write: `spec.permissions` of a Plugin, and what
/// `status.requested` reports a plugin asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Kinds (or resources) it may watch, and where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watches: Vec<WatchPermission>,
    /// Extra kinds (beyond its watches) it may read from the host's caches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<ReadPermission>,
    /// What it may write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<GrantPermission>,
}

/// One approved watch: a kind (`apiVersion` + `kind`) or a kubectl-style `resource`, in
/// some namespaces (empty: every namespace, and cluster-wide watches).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchPermission {
    /// `group/version` (with `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind (with `apiVersion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Or a kubectl-style resource argument (`secrets`, `deployments.v1.apps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Namespaces it may watch in; empty: all, and cluster-wide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

/// One approved read: a kind or a resource argument, in some namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadPermission {
    /// `group/version` (with `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind (with `apiVersion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Or a kubectl-style resource argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Namespaces it may be read in; `*`: every namespace (cluster-wide). Empty (the form
    /// before namespaces): the namespaces the approved watches list, never cluster-wide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

/// One approved grant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantPermission {
    /// API groups (`""` core, `"*"` any).
    pub api_groups: Vec<String>,
    /// Kinds (`"*"` any).
    pub kinds: Vec<String>,
    /// Namespaces; empty: all, and cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// `create`, `patch`, `patch-status`, `delete`.
    pub verbs: Vec<String>,
    /// Whether `force` may be used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_force: bool,
    /// Finalizers the plugin may set on the objects this grant covers (exact names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
}

/// `status` of a Plugin, written by the leading host through the status subresource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginObjectStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The pinned reference serving (`oci://…@sha256:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The manifest digest serving (`sha256:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The plugin's own version (its `describe()` answer) serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What the newest module asks for (its `describe()` answer), for review against
    /// `spec.permissions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Permissions>,
    /// What the plugin's dry run and its candidate would do (present while `spec.mode`
    /// is `DryRun` or `spec.candidate` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<PreviewStatus>,
    /// `Ready`, `Approved`, `Pulled`, `Previewing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// `status.preview`: a bounded summary; the host serves the whole per-object report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewStatus {
    /// `spec.mode` in force.
    #[serde(default)]
    pub mode: Mode,
    /// Events the plugin handled in dry run.
    #[serde(default)]
    pub events: u64,
    /// Objects its dry-run writes would change, as last seen.
    #[serde(default)]
    pub changes: u64,
    /// Objects whose last dry-run write the API server refused.
    #[serde(default)]
    pub refusals: u64,
    /// The shadow candidate, while `spec.candidate` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidatePreview>,
    /// The last few findings, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<PreviewItem>,
}

/// The candidate's part of `status.preview`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidatePreview {
    /// The digest of the candidate's component (`sha256:` of its bytes, as `kubewasm
    /// inspect` shows it; not the OCI manifest digest of `status.digest`); None: not
    /// running yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its own version (its `describe()` answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Events it was compared on.
    #[serde(default)]
    pub events: u64,
    /// Objects on which it agrees with the serving version, as last compared.
    #[serde(default)]
    pub agreements: u64,
    /// Objects on which it diverges, as last compared.
    #[serde(default)]
    pub divergences: u64,
}

/// One finding of a preview.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewItem {
    /// `Kind namespace/name` of the object written.
    pub object: String,
    /// `Create`, `Update`, `Delete`, `Refused` (the dry run), or `Diverges` (the
    /// candidate).
    pub action: String,
    /// Who found it: `dryRun` or `candidate`.
    pub source: String,
    /// The changed (or diverging) field paths, at most a few.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The refusal's or divergence's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A condition, as `metav1.Condition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// CamelCase type (`Ready`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The generation it was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// RFC 3339 time of the last status change.
    pub last_transition_time: String,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail (short).
    #[serde(default)]
    pub message: String,
}

fn resource_ref(
    what: &str,
    api_version: &Option<String>,
    kind: &Option<String>,
    resource: &Option<String>,
) -> Result<ResourceRef, String> {
    match (api_version, kind, resource) {
        (Some(av), Some(k), None) if !av.is_empty() && !k.is_empty() => {
            Ok(ResourceRef::Kind(TypeRef::new(av, k)))
        }
        (None, None, Some(r)) => ResourceArg::parse(r)
            .map(ResourceRef::Resource)
            .map_err(|e| format!("{what} {r:?}: {e}")),
        _ => Err(format!(
            "{what}: give either apiVersion and kind, or resource"
        )),
    }
}

fn parse_verb(v: &str) -> Result<Verb, String> {
    Ok(match v {
        "create" => Verb::Create,
        "patch" => Verb::Patch,
        "patch-status" => Verb::PatchStatus,
        "delete" => Verb::Delete,
        other => {
            return Err(format!(
                "unknown verb {other:?} (create, patch, patch-status, delete)"
            ));
        }
    })
}

fn spell(r: &ResourceRef) -> (Option<String>, Option<String>, Option<String>) {
    match r {
        ResourceRef::Kind(t) => (Some(t.api_version.clone()), Some(t.kind.clone()), None),
        ResourceRef::Resource(a) => (None, None, Some(a.to_string())),
    }
}

fn read_permission(r: &ResourceRef, namespaces: Vec<String>) -> ReadPermission {
    let (api_version, kind, resource) = spell(r);
    ReadPermission {
        api_version,
        kind,
        resource,
        namespaces,
    }
}

fn grant_permission(g: &Grant) -> GrantPermission {
    GrantPermission {
        api_groups: g.api_groups.clone(),
        kinds: g.kinds.clone(),
        namespaces: g.namespaces.clone(),
        verbs: g.verbs.iter().map(|v| v.as_str().to_string()).collect(),
        allow_force: g.allow_force,
        finalizers: g.finalizers.clone(),
    }
}

impl Permissions {
    /// The approval in the core model; an unknown verb or a malformed watch, read or
    /// resource is an error naming the entry.
    pub fn to_approval(&self) -> Result<Approval, String> {
        let watches = self
            .watches
            .iter()
            .map(|w| {
                Ok(ApprovedWatch {
                    resource: resource_ref("watch", &w.api_version, &w.kind, &w.resource)?,
                    namespaces: w.namespaces.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let reads = self
            .reads
            .iter()
            .map(|r| {
                Ok(ApprovedRead {
                    resource: resource_ref("read", &r.api_version, &r.kind, &r.resource)?,
                    namespaces: r.namespaces.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let grants = self
            .grants
            .iter()
            .map(|g| {
                Ok(Grant {
                    api_groups: g.api_groups.clone(),
                    kinds: g.kinds.clone(),
                    namespaces: g.namespaces.clone(),
                    verbs: g
                        .verbs
                        .iter()
                        .map(|v| parse_verb(v))
                        .collect::<Result<_, _>>()?,
                    allow_force: g.allow_force,
                    finalizers: g.finalizers.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Approval {
            mode: Mode::Enforce,
            watches,
            grants,
            reads,
        })
    }

    /// The approval in the spelling of a Plugin object (what `kubewasm inspect` shows as
    /// approved); [`Permissions::to_approval`] reads it back.
    pub fn from_approval(a: &Approval) -> Self {
        Permissions {
            watches: a
                .watches
                .iter()
                .map(|w| {
                    let (api_version, kind, resource) = spell(&w.resource);
                    WatchPermission {
                        api_version,
                        kind,
                        resource,
                        namespaces: w.namespaces.clone(),
                    }
                })
                .collect(),
            reads: a
                .reads
                .iter()
                .map(|r| read_permission(&r.resource, r.namespaces.clone()))
                .collect(),
            grants: a.grants.iter().map(grant_permission).collect(),
        }
    }

    /// Exactly what `manifest` asks for: its watches (by resource, with the one namespace
    /// each is limited to), reads and grants. What `kubewasm approve` prints and
    /// `status.requested` reports. A plugin reads where it watches, so its reads are
    /// approved in its watches' namespaces, or `*` (every namespace, said explicitly) when
    /// one of its watches is cluster-wide.
    pub fn requested_by(manifest: &Manifest) -> Self {
        // One entry per watched resource: the namespaces of its watches, or all when any
        // watch of it is cluster-wide.
        let mut watched: BTreeMap<ResourceRef, Option<Vec<String>>> = BTreeMap::new();
        for w in &manifest.watches {
            let entry = watched
                .entry(w.resource.clone())
                .or_insert_with(|| Some(Vec::new()));
            match (&w.namespace, entry.as_mut()) {
                (Some(ns), Some(list)) => {
                    if !list.contains(ns) {
                        list.push(ns.clone());
                    }
                }
                (None, _) => *entry = None,
                (Some(_), None) => {}
            }
        }
        let watches = watched
            .into_iter()
            .map(|(r, ns)| {
                let (api_version, kind, resource) = spell(&r);
                WatchPermission {
                    api_version,
                    kind,
                    resource,
                    namespaces: ns.unwrap_or_default(),
                }
            })
            .collect();
        let mut where_watched: Vec<String> = Vec::new();
        for w in &manifest.watches {
            match &w.namespace {
                None => {
                    where_watched = vec!["*".into()];
                    break;
                }
                Some(ns) if !where_watched.contains(ns) => where_watched.push(ns.clone()),
                Some(_) => {}
            }
        }
        let reads = manifest
            .reads
            .iter()
            .map(|r| read_permission(&r.resource, where_watched.clone()))
            .collect();
        let grants = manifest.grants.iter().map(grant_permission).collect();
        Permissions {
            watches,
            reads,
            grants,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Watch;

    fn watch(id: &str, av: &str, kind: &str, ns: Option<&str>) -> Watch {
        Watch {
            id: id.into(),
            resource: ResourceRef::Kind(TypeRef::new(av, kind)),
            namespace: ns.map(str::to_string),
            label_selector: None,
            field_selector: None,
            fields: crate::projection::Projection::whole(),
        }
    }

    #[test]
    fn what_a_manifest_requests_is_approved_by_itself_and_round_trips() {
        let m = Manifest {
            name: "p".into(),
            version: "1".into(),
            watches: vec![
                watch("a", "v1", "ConfigMap", Some("a")),
                watch("b", "v1", "ConfigMap", Some("b")),
                watch("c", "example.com/v1", "Site", None),
            ],
            grants: vec![Grant {
                api_groups: vec!["".into()],
                kinds: vec!["Service".into()],
                namespaces: vec![],
                verbs: vec![Verb::Create, Verb::PatchStatus],
                allow_force: false,
                finalizers: vec!["example.com/x".into()],
            }],
            reads: vec![crate::manifest::Read::whole(ResourceRef::Resource(
                ResourceArg::parse("secrets").unwrap(),
            ))],
        };
        let p = Permissions::requested_by(&m);
        assert_eq!(p.watches.len(), 2);
        let cm = p
            .watches
            .iter()
            .find(|w| w.kind.as_deref() == Some("ConfigMap"));
        assert_eq!(
            cm.map(|w| w.namespaces.clone()),
            Some(vec!["a".into(), "b".into()])
        );
        // One watch is cluster-wide: the read is approved everywhere, explicitly.
        assert_eq!(p.reads[0].namespaces, ["*"]);
        let approval = p.to_approval().unwrap();
        crate::grant::check_approval(&m, Some(&approval)).unwrap();
        assert_eq!(Permissions::from_approval(&approval), p);
        let yaml = serde_yaml_ng::to_string(&p).unwrap();
        let back: Permissions = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn malformed_entries_are_named() {
        let bad: Permissions = serde_json::from_value(serde_json::json!({
            "watches": [{"kind": "ConfigMap"}]
        }))
        .unwrap();
        let err = bad.to_approval().unwrap_err();
        assert!(err.contains("apiVersion and kind, or resource"), "{err}");
        let bad: Permissions = serde_json::from_value(serde_json::json!({
            "grants": [{"apiGroups": [""], "kinds": ["Service"], "verbs": ["update"]}]
        }))
        .unwrap();
        assert!(
            bad.to_approval()
                .unwrap_err()
                .contains("unknown verb \"update\"")
        );
        let unknown = serde_json::from_value::<Permissions>(serde_json::json!({"writes": []}));
        assert!(unknown.is_err());
    }

    #[test]
    fn a_plugin_object_reads_from_yaml() {
        let o: PluginObject = serde_yaml_ng::from_str(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: Plugin\nmetadata: {name: p, generation: 3}\n\
             spec:\n  module: oci://127.0.0.1:5000/p@sha256:00\n  settings: {domain: a}\n  \
             pullSecretRef: {name: regcred}\n  permissions:\n    watches:\n    - {resource: configmaps}\n",
        )
        .unwrap();
        assert_eq!(o.name(), "p");
        assert_eq!(o.generation(), 3);
        assert_eq!(
            o.spec.pull_secret_ref.as_ref().map(|r| r.name.as_str()),
            Some("regcred")
        );
        assert_eq!(o.spec.permissions.watches.len(), 1);
        assert!(PluginObject::is_plugin(&o.api_version, &o.kind));
    }
}
