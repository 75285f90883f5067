//! The catalogue of served resources: the built-in kinds and the kinds that
//! CustomResourceDefinitions register while the server runs.

use crate::builtins::{BUILTINS, Verbs};
use crate::schema::{self, Schema};
use crate::validation::Validator;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Group and plural resource name: the storage identity of a resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GroupResource {
    /// API group ("" for core).
    pub(crate) group: String,
    /// Plural resource name.
    pub(crate) resource: String,
}

/// An additional printer column of a CRD version.
#[derive(Debug, Clone)]
pub(crate) struct PrinterColumn {
    /// Column header.
    pub(crate) name: String,
    /// OpenAPI type (`string`, `integer`, `date`, ...).
    pub(crate) ty: String,
    /// OpenAPI format.
    pub(crate) format: String,
    /// Description.
    pub(crate) description: String,
    /// Priority (0 shown by default).
    pub(crate) priority: i64,
    /// Simple JSONPath (`.spec.x`).
    pub(crate) json_path: String,
}

/// One served version of a resource.
#[derive(Debug, Clone)]
pub(crate) struct VersionInfo {
    /// Version name (`v1`).
    pub(crate) name: String,
    /// SSA/pruning schema.
    pub(crate) schema: Schema,
    /// Extra printer columns.
    pub(crate) columns: Vec<PrinterColumn>,
    /// True when unknown fields are pruned (CRDs with a structural schema).
    pub(crate) prune: bool,
    /// OpenAPI validation of the CRD version's schema (`None` for built-ins).
    pub(crate) validator: Option<Arc<Validator>>,
    /// The CRD version's `openAPIV3Schema` as written, for the OpenAPI documents.
    pub(crate) openapi: Option<Arc<Value>>,
}

impl VersionInfo {
    /// What the apiserver's decoder does to a custom resource before validation: drops
    /// unknown fields and `null`s of non-nullable fields (when the schema prunes).
    pub(crate) fn prune(&self, obj: &mut Value) {
        if !self.prune {
            return;
        }
        self.schema.prune(obj);
        if let Some(v) = &self.validator {
            v.prune_nulls(obj);
        }
    }

    /// The object to store: pruned ([`VersionInfo::prune`]), then given the schema's
    /// defaults. (Not an apply configuration: a defaulted field is no manager's.)
    pub(crate) fn prune_and_default(&self, obj: &mut Value) {
        self.prune(obj);
        if let Some(v) = &self.validator {
            v.default(obj);
        }
    }
}

/// A served resource.
#[derive(Debug, Clone)]
pub(crate) struct ResourceInfo {
    /// API group.
    pub(crate) group: String,
    /// Plural name.
    pub(crate) plural: String,
    /// Singular name.
    pub(crate) singular: String,
    /// Kind.
    pub(crate) kind: String,
    /// List kind.
    pub(crate) list_kind: String,
    /// Namespaced or cluster-scoped.
    pub(crate) namespaced: bool,
    /// Short names.
    pub(crate) short_names: Vec<String>,
    /// Categories (`all`).
    pub(crate) categories: Vec<String>,
    /// Served versions, in priority order.
    pub(crate) versions: Vec<VersionInfo>,
    /// Has a `status` subresource.
    pub(crate) status: bool,
    /// Maintains `metadata.generation`.
    pub(crate) generation: bool,
    /// Built-in (not from a CRD).
    pub(crate) builtin: bool,
    /// Which verbs it has (custom resources: all of them).
    pub(crate) access: Verbs,
    /// DELETE answers the object, not a Status (built-ins whose registry says so).
    pub(crate) returns_deleted: bool,
    /// Has a `scale` subresource.
    pub(crate) scale: bool,
    /// Subresources kube-apiserver has that are not emulated here (refused, saying so).
    pub(crate) unemulated: &'static [&'static str],
}

impl ResourceInfo {
    /// Storage identity.
    pub(crate) fn gr(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    /// `group/version` or `version` for the core group.
    pub(crate) fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The served version named `v`.
    pub(crate) fn version(&self, v: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|x| x.name == v)
    }

    /// The verbs of the main resource.
    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        match self.access {
            Verbs::Crud => {}
            Verbs::Read => return vec!["get", "list"],
            Verbs::Create => return vec!["create"],
        }
        let mut v = vec!["create", "delete"];
        if self.plural != "namespaces" {
            v.push("deletecollection");
        }
        v.extend(["get", "list", "patch", "update", "watch"]);
        v
    }
}

/// The served resources.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    resources: BTreeMap<GroupResource, Arc<ResourceInfo>>,
    group_order: Vec<String>,
}

impl Registry {
    /// A registry with the built-in kinds (`builtins::BUILTINS`).
    pub(crate) fn new() -> Self {
        let mut resources: BTreeMap<GroupResource, Arc<ResourceInfo>> = BTreeMap::new();
        let mut group_order: Vec<String> = Vec::new();
        for b in BUILTINS {
            if !group_order.iter().any(|g| g == b.group) {
                group_order.push(b.group.to_string());
            }
            let version = VersionInfo {
                name: b.version.into(),
                schema: schema::builtin(b.group, b.kind),
                columns: vec![],
                prune: false,
                validator: None,
                openapi: None,
            };
            let gr = GroupResource {
                group: b.group.into(),
                resource: b.plural.into(),
            };
            // A resource served in several versions (autoscaling v2 and v1) is one
            // stored resource; the table lists its preferred version first.
            if let Some(info) = resources.get_mut(&gr) {
                Arc::make_mut(info).versions.push(version);
                continue;
            }
            let e = &b.extra;
            let info = ResourceInfo {
                group: b.group.into(),
                plural: b.plural.into(),
                singular: b.kind.to_lowercase(),
                kind: b.kind.into(),
                list_kind: format!("{}List", b.kind),
                namespaced: b.namespaced,
                short_names: e.short.iter().map(|s| s.to_string()).collect(),
                categories: e.categories.iter().map(|s| s.to_string()).collect(),
                versions: vec![version],
                status: e.status,
                generation: e.generation,
                builtin: true,
                access: e.verbs,
                returns_deleted: e.returns_deleted,
                unemulated: e.unemulated,
                scale: e.scale,
            };
            resources.insert(gr, Arc::new(info));
        }
        Registry {
            resources,
            group_order,
        }
    }

    /// Looks a resource up by group, version and plural.
    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceInfo>> {
        let info = self.resources.get(&GroupResource {
            group: group.into(),
            resource: plural.into(),
        })?;
        info.version(version)?;
        Some(info.clone())
    }

    /// Looks a resource up by storage identity.
    pub(crate) fn get(&self, gr: &GroupResource) -> Option<Arc<ResourceInfo>> {
        self.resources.get(gr).cloned()
    }

    /// All resources.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.resources.values()
    }

    /// Served groups in discovery order, each with its versions in priority order.
    pub(crate) fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut names = self.group_order.clone();
        let mut extra: Vec<String> = self
            .resources
            .values()
            .map(|r| r.group.clone())
            .filter(|g| !names.contains(g))
            .collect();
        extra.sort();
        extra.dedup();
        names.extend(extra);
        names
            .into_iter()
            .filter_map(|g| {
                let mut versions: Vec<String> = self
                    .resources
                    .values()
                    .filter(|r| r.group == g)
                    .flat_map(|r| r.versions.iter().map(|v| v.name.clone()))
                    .collect();
                if versions.is_empty() {
                    return None;
                }
                versions
                    .sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
                versions.dedup();
                Some((g, versions))
            })
            .collect()
    }

    /// Resources served at group/version.
    pub(crate) fn in_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.resources
            .values()
            .filter(|r| r.group == group && r.version(version).is_some())
            .cloned()
            .collect()
    }

    /// Registers (or replaces) the resource a CRD defines; `None` when the CRD is unusable.
    pub(crate) fn register_crd(&mut self, crd: &Value) -> Option<Arc<ResourceInfo>> {
        let info = Arc::new(crd_info(crd)?);
        if self.resources.get(&info.gr()).is_some_and(|r| r.builtin) {
            return None;
        }
        self.resources.insert(info.gr(), info.clone());
        Some(info)
    }

    /// Removes the resource a CRD defined.
    pub(crate) fn unregister(&mut self, gr: &GroupResource) {
        if self.resources.get(gr).is_some_and(|r| !r.builtin) {
            self.resources.remove(gr);
        }
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// Kubernetes version priority: GA > beta > alpha > other, higher numbers first.
pub(crate) fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let minor = |t: &str| t.parse::<u64>().ok();
    if let Some(n) = tail.strip_prefix("beta").and_then(minor) {
        return (2, major, n);
    }
    if let Some(n) = tail.strip_prefix("alpha").and_then(minor) {
        return (1, major, n);
    }
    (0, 0, 0)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

fn crd_info(crd: &Value) -> Option<ResourceInfo> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let names = spec.get("names")?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let singular = str_at(names, &["singular"])
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = str_at(names, &["listKind"])
        .map(String::from)
        .unwrap_or_else(|| format!("{kind}List"));
    let strings = |key: &str| -> Vec<String> {
        names
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = str_at(spec, &["scope"]) != Some("Cluster");
    let mut status = false;
    let mut versions = Vec::new();
    for v in spec.get("versions")?.as_array()? {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let name = v.get("name")?.as_str()?.to_string();
        if v.pointer("/subresources/status").is_some() {
            status = true;
        }
        let root = v.pointer("/schema/openAPIV3Schema");
        let prune = root.is_some()
            && spec.get("preserveUnknownFields").and_then(Value::as_bool) != Some(true)
            && root
                .and_then(|r| r.get("x-kubernetes-preserve-unknown-fields"))
                .and_then(Value::as_bool)
                != Some(true);
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .filter_map(|c| {
                        Some(PrinterColumn {
                            name: c.get("name")?.as_str()?.to_string(),
                            ty: str_at(c, &["type"]).unwrap_or("string").to_string(),
                            format: str_at(c, &["format"]).unwrap_or("").to_string(),
                            description: str_at(c, &["description"]).unwrap_or("").to_string(),
                            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                            json_path: c.get("jsonPath")?.as_str()?.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        versions.push(VersionInfo {
            name,
            schema: schema::from_openapi(root),
            columns,
            prune,
            validator: root.map(|r| Arc::new(Validator::new(r))),
            openapi: root.map(|r| Arc::new(r.clone())),
        });
    }
    if versions.is_empty() {
        return None;
    }
    versions.sort_by(|a, b| {
        version_priority(&b.name)
            .cmp(&version_priority(&a.name))
            .then(a.name.cmp(&b.name))
    });
    Some(ResourceInfo {
        group,
        plural,
        singular,
        kind,
        list_kind,
        namespaced,
        short_names: strings("shortNames"),
        categories: strings("categories"),
        versions,
        status,
        generation: true,
        builtin: false,
        access: Verbs::Crud,
        returns_deleted: false,
        unemulated: &[],
        scale: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order() {
        let mut v = vec!["v1alpha1", "v2", "v1beta1", "v1", "foo"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v1beta1", "v1alpha1", "foo"]);
    }
}
