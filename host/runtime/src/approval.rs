//! The operator's approval of a plugin's grants and reads, read from the host's own key of
//! the plugin's settings file:
//!
//! ```yaml
//! kubewasm:
//!   approved:
//!     grants:
//!     - apiGroups: [mongodb.com]
//!       kinds: [MongoDB]
//!       namespaces: []          # empty: every namespace and cluster-scoped objects
//!       verbs: [create]         # create, patch, patch-status, delete
//!       allowForce: false
//!       finalizers: [example.com/cleanup]   # finalizers it may set (none by default)
//!     reads:
//!     - resource: secrets       # a kubectl-style resource argument
//!     - apiVersion: v1          # or a kind
//!       kind: ConfigMap
//! ```
//!
//! Why there: the settings file is already the operator's (a ConfigMap beside the plugin,
//! hot-reloaded, and the plugin never sees the `kubewasm` key), while everything inside the
//! `.wasm` — its `describe()` answer included — is the plugin author's. `kubewasm inspect
//! --approval` prints the block that approves exactly what a plugin asks for.

use kubewasm_core::grant::Approval;
use kubewasm_core::manifest::{Grant, Verb};
use kubewasm_core::resource::{ResourceArg, ResourceRef, TypeRef};
use serde::{Deserialize, Serialize};

/// One approved grant, as written in the settings file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GrantSpec {
    /// API groups (`""` core, `"*"` any).
    pub api_groups: Vec<String>,
    /// Kinds (`"*"` any).
    pub kinds: Vec<String>,
    /// Namespaces; empty: all, and cluster-scoped objects.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// `create`, `patch`, `patch-status`, `delete`.
    pub verbs: Vec<String>,
    /// Whether `force` may be used.
    #[serde(default)]
    pub allow_force: bool,
    /// Finalizers the plugin may set on the objects this grant covers (exact names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
}

/// One approved read: a kind or a resource argument.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged, deny_unknown_fields)]
pub(crate) enum ReadSpec {
    /// By apiVersion and kind.
    #[serde(rename_all = "camelCase")]
    Kind {
        /// `group/version`.
        api_version: String,
        /// Kind.
        kind: String,
    },
    /// By kubectl-style resource argument (`secrets`, `deployments.v1.apps`).
    Resource {
        /// The argument.
        resource: String,
    },
}

/// The `approved` block, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSpec {
    /// Approved grants.
    #[serde(default)]
    pub(crate) grants: Vec<GrantSpec>,
    /// Approved extra reads.
    #[serde(default)]
    pub(crate) reads: Vec<ReadSpec>,
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

impl ApprovalSpec {
    /// The approval in the core model; an unknown verb or bad resource is an error.
    pub fn to_approval(&self) -> Result<Approval, String> {
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
        let reads = self
            .reads
            .iter()
            .map(|r| match r {
                ReadSpec::Kind { api_version, kind } => {
                    Ok(ResourceRef::Kind(TypeRef::new(api_version, kind)))
                }
                ReadSpec::Resource { resource } => ResourceArg::parse(resource)
                    .map(ResourceRef::Resource)
                    .map_err(|e| format!("read {resource:?}: {e}")),
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Approval {
            watches: Vec::new(),
            grants,
            reads,
        })
    }

    /// The block that approves exactly `grants` and `reads` (what `inspect --approval`
    /// prints).
    pub fn from_parts(grants: &[Grant], reads: &[ResourceRef]) -> Self {
        ApprovalSpec {
            grants: grants
                .iter()
                .map(|g| GrantSpec {
                    api_groups: g.api_groups.clone(),
                    kinds: g.kinds.clone(),
                    namespaces: g.namespaces.clone(),
                    verbs: g.verbs.iter().map(|v| v.as_str().to_string()).collect(),
                    allow_force: g.allow_force,
                    finalizers: g.finalizers.clone(),
                })
                .collect(),
            reads: reads
                .iter()
                .map(|r| match r {
                    ResourceRef::Kind(t) => ReadSpec::Kind {
                        api_version: t.api_version.clone(),
                        kind: t.kind.clone(),
                    },
                    ResourceRef::Resource(a) => ReadSpec::Resource {
                        resource: a.to_string(),
                    },
                })
                .collect(),
        }
    }
}

/// Take the `approved` key out of the host's part of the settings: None when absent.
pub(crate) fn take(host_part: &mut serde_json::Value) -> Result<Option<Approval>, String> {
    let Some(raw) = host_part.as_object_mut().and_then(|o| o.remove("approved")) else {
        return Ok(None);
    };
    let spec: ApprovalSpec =
        serde_json::from_value(raw).map_err(|e| format!("kubewasm.approved: {e}"))?;
    spec.to_approval()
        .map(Some)
        .map_err(|e| format!("kubewasm.approved: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grants_and_reads_and_round_trips() {
        let mut v = serde_json::json!({"approved": {
            "grants": [{"apiGroups": [""], "kinds": ["Service"], "verbs": ["create", "patch-status"]}],
            "reads": [{"resource": "secrets"}, {"apiVersion": "v1", "kind": "ConfigMap"}],
        }, "memoryMiB": 1});
        let a = take(&mut v).unwrap().unwrap();
        assert_eq!(v, serde_json::json!({"memoryMiB": 1}));
        assert_eq!(a.grants[0].verbs, [Verb::Create, Verb::PatchStatus]);
        assert!(a.grants[0].namespaces.is_empty() && !a.grants[0].allow_force);
        assert_eq!(a.reads.len(), 2);
        let back = ApprovalSpec::from_parts(&a.grants, &a.reads)
            .to_approval()
            .unwrap();
        assert_eq!(back, a);
        let mut bad = serde_json::json!({"approved": {"grants": [
            {"apiGroups": [""], "kinds": ["Service"], "verbs": ["update"]}]}});
        let err = take(&mut bad).unwrap_err();
        assert!(err.contains("unknown verb \"update\""), "{err}");
        let mut none = serde_json::json!({"memoryMiB": 1});
        assert_eq!(take(&mut none).unwrap(), None);
    }
}
