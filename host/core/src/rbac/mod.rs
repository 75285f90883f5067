//! `kubewasm rbac`: the least-privilege RBAC objects the host needs to serve a set of
//! plugins, derived from their manifests alone.
//!
//! What the host does against the API server, and the permission each needs:
//!
//! | host action | RBAC |
//! | --- | --- |
//! | discovery of kinds and resource arguments | `get` on the non-resource URLs `/api`, `/api/*`, `/apis`, `/apis/*`, `/version` (ClusterRole only; a namespace-only setup relies on the default `system:discovery` binding) |
//! | one list+watch per watched or read kind (cache) | `get`, `list`, `watch` on its resource |
//! | a plugin's watches and reads, served from the caches | the same, on the plugin's own ServiceAccount, where its approval lets it read ([`read_rules`]): the host asks with a SubjectAccessReview before it loads the plugin, and again on an interval |
//! | asking whether a plugin's ServiceAccount may read what it is approved to | `create` on `subjectaccessreviews.authorization.k8s.io` (with impersonation) |
//! | `create` intent: server-side apply of a whole object | `create` + `patch` (SSA is a PATCH that may create) |
//! | `patch` intent, apply or merge | `patch` on the resource |
//! | `patch` intent with `status` | `patch` on `<plural>/status` |
//! | `delete` intent | `delete` |
//! | `owned-by-trigger` (a controller ownerReference with `blockOwnerDeletion`) | `update` on `<plural>/finalizers` of the watched kinds, when the plugin may create (the `OwnerReferencesPermissionEnforcement` admission plugin checks it) |
//! | Kubernetes Events about handled objects | `create`, `patch` on `events` (core and `events.k8s.io`) |
//! | leader election | `get`, `create`, `update` on `leases` in the host's own namespace |
//! | shards (`kubewasm run --shards S`, [`RbacOptions::sharded`]) | also `list` (the shard and member Leases, by label) and `delete` (its member Lease, on a clean shutdown) on `leases` there |
//! | checking its own permissions at start (SelfSubjectAccessReviews) | `create` on `selfsubjectaccessreviews.authorization.k8s.io` (ClusterRole only, beside discovery; a namespace-only setup relies on the default `system:basic-user` binding, which gives it to every authenticated user) |
//! | `--metrics-secure`: reviewing each request to `/metrics` and `/status` ([`RbacOptions::metrics_secure`]) | `create` on `tokenreviews.authentication.k8s.io` and `subjectaccessreviews.authorization.k8s.io`; and, for the scraper (bound by the operator, not rendered), the ClusterRole `<install>:<name>-metrics-reader`: `get` on the non-resource URLs `/metrics` and `/status` ([`metrics_reader`]) |
//! | Plugin objects: their cache, their status | `get`, `list`, `watch` on `plugins.kubewasm.dev`; `patch` on `plugins/status` |
//! | a Plugin's pull secret | `get` on exactly the allowed pull secrets ([`RbacOptions::pull_secrets`], `resourceNames`) in the host's own namespace; none without them |
//!
//! Scope: without a namespace, reads and grants without namespaces go into one
//! ClusterRole. Grants that list namespaces go into a Role per namespace (they never cover
//! cluster-scoped objects, so cluster-scoped kinds are dropped from them, as the grant
//! check would refuse them anyway). With [`RbacOptions::namespace`], everything namespaced
//! goes into a Role in that namespace; only what is cluster-scoped still needs the
//! ClusterRole. (The host must then also be told to watch only that namespace: a Role does
//! not allow a cluster-wide list.)
//!
//! Kinds are resolved to resources by a caller-supplied function (discovery against a
//! cluster, or [`guess`](crate::kind::guess) offline). Grants name API groups but no
//! version, so the resolver is asked with an `api_version` of `group/*` (`v1` for the core
//! group); `*` there means "whichever version is served". A kind the resolver does not know
//! falls back to [`guess`](crate::kind::guess) and is listed in the annotation
//! `kubewasm.dev/guessed` of the role it lands in. Wildcard groups or kinds in a grant
//! become wildcards in the rule, which a reviewer should notice.
//!
//! A team's plugin (`NamespacedPlugin`) is confined to its namespace
//! ([`crate::tenant::confine_approval`]) and its RBAC lives there alone
//! ([`render_tenant`]): what `kubewasm approve --namespace` prints.
//! The host's cluster part for teams' plugins, and the ClusterRole a platform binds to a
//! team, are [`tenant_cluster`] (`kubewasm rbac --tenants`).
//!
//! The rules each plugin needs are collected in `rules`; `render` turns them into the
//! ServiceAccounts, roles and bindings.

mod render;
mod rules;
mod tenant;
#[cfg(test)]
mod tests;

pub use render::{
    INSTALL_LABEL, metrics_reader, metrics_reader_name, qualified, render, render_approved, to_yaml,
};
pub use rules::{ReadRule, read_rules};
pub use tenant::{HostAccount, render_tenant, tenant_cluster};

/// The namespace the host and the plugins' ServiceAccounts live in when nothing names
/// another: what `kubewasm rbac` and `approve` render, `run`, `plan` and `dev` impersonate
/// in out of a pod, and `deploy/` installs into. One name, so each command's default
/// output works with the others'.
pub const DEFAULT_NAMESPACE: &str = "kubewasm-system";

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacOptions {
    /// `--namespace NS`: put everything namespaced in a Role in NS.
    pub namespace: Option<String>,
    /// Name of the ClusterRole, Roles and bindings.
    pub name: String,
    /// The host's service account.
    pub service_account: String,
    /// The namespace of the service account, where the host runs (and its leases and the
    /// plugins' ServiceAccounts live).
    pub service_account_namespace: String,
    /// Each plugin writes as its own ServiceAccount, impersonated by the host (the default;
    /// `kubewasm run --no-impersonation` needs this off).
    pub impersonation: bool,
    /// The host's roles and bindings as one set per plugin, `<name>:<plugin>`, instead of
    /// one set `<name>` for all (see [`render`]): what Plugin objects use, whose RBAC is
    /// applied plugin by plugin.
    pub host_roles_per_plugin: bool,
    /// The host follows Plugin objects (`kubewasm run` does unless
    /// `--no-plugin-objects`): it reads them, writes their status and reads the allowed
    /// pull secrets in its own namespace.
    pub plugin_objects: bool,
    /// The pull secrets Plugin objects may name (`kubewasm run --allowed-pull-secret`):
    /// the host may `get` these Secrets of its namespace by name, and no other.
    pub pull_secrets: Vec<String>,
    /// The host runs with `kubewasm run --shards S`: besides get/create/update on its
    /// Leases it lists them (shard and member Leases, by label) and deletes its member
    /// Lease when it stops.
    pub sharded: bool,
    /// The host runs with `kubewasm run --metrics-secure`: it reviews each request to its
    /// metrics listener (TokenReview, SubjectAccessReview), and the ClusterRole a scraper
    /// is bound to is rendered with it ([`metrics_reader`]).
    pub metrics_secure: bool,
}

impl Default for RbacOptions {
    fn default() -> Self {
        RbacOptions {
            namespace: None,
            name: "kubewasm".into(),
            service_account: "kubewasm".into(),
            service_account_namespace: DEFAULT_NAMESPACE.into(),
            impersonation: true,
            host_roles_per_plugin: false,
            plugin_objects: true,
            pull_secrets: Vec::new(),
            sharded: false,
            metrics_secure: false,
        }
    }
}
