//! RBAC of a team's plugin (a `NamespacedPlugin`): everything in the team's namespace, so a
//! team holding only rights there can apply it; and the cluster part the platform gives
//! the host once, with the ClusterRole a platform binds to each team.
//!
//! A `NamespacedPlugin` `P` in namespace `NS` writes as ServiceAccount `kubewasm-P` there;
//! the team grants it its rules (Role `kubewasm-P`) and grants the host (Role
//! `kubewasm-host-P`) what it needs for P alone: `get`, `list`, `watch` on what P watches
//! and reads (the host watches those kinds in NS only), `impersonate` on `kubewasm-P`, and
//! `get` on P's pull secret by name.

use serde_json::{Value, json};

use super::RbacOptions;
use super::qualified;
use super::render::RBAC_API;
use super::rules::{
    Guessed, READ, Rules, Scope, add_grants, add_reads, grant_ref, resolve_or_guess,
};
use crate::grant::{Approval, ApprovedRead, ApprovedWatch};
use crate::kind::KindInfo;
use crate::plugin_object::{GROUP, NAMESPACED_PLURAL};
use crate::resource::ResourceRef;

/// Reason: a watch, read or grant names a cluster-scoped kind.
pub const CLUSTER_SCOPED_KIND: &str = "ClusterScopedKind";
/// Reason: a watch, read or grant names a namespace other than the plugin's own.
pub const OUTSIDE_NAMESPACE: &str = "OutsideNamespace";

/// Why a team's plugin cannot be confined to its namespace: the reason (as the object's
/// status spells it) and the watch, read or grant at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Confinement {
    /// [`CLUSTER_SCOPED_KIND`] or [`OUTSIDE_NAMESPACE`].
    pub reason: &'static str,
    /// What is asked, and where it would reach.
    pub message: String,
}

/// `approval` confined to `namespace`: every watch, read and grant bound to it (an
/// approval without namespaces means "the plugin's namespace" for a team's plugin), or
/// the first watch, read or grant that names a cluster-scoped kind (by `resolve`, falling
/// back to [`guess`](crate::kind::guess)) or another namespace. A wildcard kind in a
/// grant stays: bound to the namespace it covers only namespaced kinds there.
pub fn confine(
    approval: &Approval,
    namespace: &str,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
) -> Result<Approval, Confinement> {
    let outside = |what: String, listed: &[String]| {
        if listed.iter().all(|n| n == namespace) {
            Ok(())
        } else {
            Err(Confinement {
                reason: OUTSIDE_NAMESPACE,
                message: format!(
                    "{what} names namespaces [{}]; a NamespacedPlugin in {namespace} may \
                     reach only its own",
                    listed.join(", ")
                ),
            })
        }
    };
    let namespaced = |what: String, r: &ResourceRef| {
        let k = resolve(r).unwrap_or_else(|| crate::kind::guess(r));
        if k.namespaced {
            Ok(())
        } else {
            Err(Confinement {
                reason: CLUSTER_SCOPED_KIND,
                message: format!(
                    "{what}: {} is cluster-scoped; a NamespacedPlugin may reach only \
                     namespaced kinds in {namespace}",
                    if k.kind.is_empty() {
                        &k.plural
                    } else {
                        &k.kind
                    }
                ),
            })
        }
    };
    let here = vec![namespace.to_string()];
    let mut bound = Approval {
        mode: approval.mode,
        ..Approval::default()
    };
    for w in &approval.watches {
        outside(format!("watch {}", w.resource), &w.namespaces)?;
        namespaced(format!("watch {}", w.resource), &w.resource)?;
        if !bound.watches.iter().any(|b| b.resource == w.resource) {
            bound.watches.push(ApprovedWatch {
                resource: w.resource.clone(),
                namespaces: here.clone(),
            });
        }
    }
    for r in &approval.reads {
        outside(format!("read {}", r.resource), &r.namespaces)?;
        namespaced(format!("read {}", r.resource), &r.resource)?;
        if !bound.reads.iter().any(|b| b.resource == r.resource) {
            bound.reads.push(ApprovedRead {
                resource: r.resource.clone(),
                namespaces: here.clone(),
            });
        }
    }
    for g in &approval.grants {
        let what = format!(
            "grant of {} on {}",
            g.kinds.join(","),
            g.api_groups.join(",")
        );
        outside(what.clone(), &g.namespaces)?;
        for group in g.api_groups.iter().filter(|g| *g != "*") {
            for kind in g.kinds.iter().filter(|k| *k != "*") {
                namespaced(what.clone(), &grant_ref(group, kind))?;
            }
        }
        let mut g = g.clone();
        g.namespaces = here.clone();
        bound.grants.push(g);
    }
    Ok(bound)
}

/// Where the host runs: its ServiceAccount, which the team's Role `kubewasm-host-P` binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAccount {
    /// The host's namespace.
    pub namespace: String,
    /// The host's ServiceAccount.
    pub name: String,
}

/// The RBAC of the team's plugin `plugin` in `namespace`, all in that namespace, for an
/// approval already [`confine`]d to it: ServiceAccount `kubewasm-<plugin>`; Role and
/// RoleBinding `kubewasm-<plugin>` (its reads and grants, nothing else); Role and
/// RoleBinding `kubewasm-host-<plugin>` for `host` (get/list/watch on what the plugin
/// watches and reads, `impersonate` on its ServiceAccount, `get` on `pull_secret`).
pub fn render_tenant(
    plugin: &str,
    namespace: &str,
    approval: &Approval,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    host: &HostAccount,
    pull_secret: Option<&str>,
) -> Vec<Value> {
    let opts = RbacOptions {
        namespace: Some(namespace.to_string()),
        ..RbacOptions::default()
    };
    let here = Scope::Namespace(namespace.to_string());
    let manifest = approval.to_manifest(plugin);
    let account = manifest.field_manager();
    let mut guessed = Guessed::new();
    let mut own = Rules::default();
    add_reads(
        &approval.read_scopes(),
        &mut own,
        &mut guessed,
        resolve,
        &opts,
    );
    add_grants(&manifest, &mut own, &mut guessed, resolve, &opts);
    let mut host_rules = Rules::default();
    for r in manifest.read_resources() {
        let k = resolve_or_guess(r, resolve, &mut guessed);
        host_rules.add(&here, &k.group, &k.plural, READ);
    }
    let mut host_extra = vec![json!({"apiGroups": [""], "resources": ["serviceaccounts"],
                                     "resourceNames": [account], "verbs": ["impersonate"]})];
    if let Some(secret) = pull_secret {
        host_extra.push(json!({"apiGroups": [""], "resources": ["secrets"],
                               "resourceNames": [secret], "verbs": ["get"]}));
    }
    let meta = |name: &str, rules: Option<&Rules>| {
        let mut m = json!({
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "kubewasm",
                       "app.kubernetes.io/component": "rbac"},
            "annotations": {"kubewasm.dev/plugins": plugin},
        });
        let guessed_here = rules.map(|r| r.guessed_in(&here, &guessed));
        if let Some(g) = guessed_here.filter(|g| !g.is_empty()) {
            m["annotations"]["kubewasm.dev/guessed"] = json!(g.join(","));
        }
        m
    };
    let role = |name: &str, rules: &Rules, extra: &[Value], subject: Value| {
        // A confined approval has nothing outside `here`; anything else is left out.
        let mut all = rules.rules(&here);
        all.extend(extra.iter().cloned());
        [
            json!({"apiVersion": RBAC_API, "kind": "Role",
                   "metadata": meta(name, Some(rules)), "rules": all}),
            json!({"apiVersion": RBAC_API, "kind": "RoleBinding",
                   "metadata": meta(name, None),
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                   "subjects": [subject]}),
        ]
    };
    let mut out = vec![json!({"apiVersion": "v1", "kind": "ServiceAccount",
                              "metadata": meta(&account, None)})];
    out.extend(role(
        &account,
        &own,
        &[],
        json!({"kind": "ServiceAccount", "name": account, "namespace": namespace}),
    ));
    out.extend(role(
        &format!("kubewasm-host-{plugin}"),
        &host_rules,
        &host_extra,
        json!({"kind": "ServiceAccount", "name": host.name, "namespace": host.namespace}),
    ));
    out
}

/// What the host needs cluster-wide to serve teams' plugins (`kubewasm rbac --tenants`):
/// a ClusterRole and binding `<install>:<name>-tenants` for the host's ServiceAccount
/// (`get`, `list`, `watch` on `namespacedplugins`, `patch` on their status, Events in the
/// teams' namespaces), and the ClusterRole `<name>-tenant` (`kubewasm-tenant`) a platform
/// binds to a team with a RoleBinding in the team's namespace, beside `edit`
/// (NamespacedPlugins, ServiceAccounts, Roles and RoleBindings there). Not qualified by
/// the install: it names no install's account, and one kind serves every install.
pub fn tenant_cluster(opts: &RbacOptions) -> Vec<Value> {
    let install = opts.service_account_namespace.as_str();
    let name = qualified(install, &format!("{}-tenants", opts.name));
    let labels = json!({"app.kubernetes.io/name": "kubewasm",
                        "app.kubernetes.io/component": "rbac",
                        super::INSTALL_LABEL: install});
    let status = format!("{NAMESPACED_PLURAL}/status");
    let crud = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    vec![
        json!({
            "apiVersion": RBAC_API, "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": [
                {"apiGroups": [GROUP], "resources": [NAMESPACED_PLURAL], "verbs": READ},
                {"apiGroups": [GROUP], "resources": [status], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
                {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
        }),
        json!({
            "apiVersion": RBAC_API, "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": opts.service_account,
                          "namespace": install}],
        }),
        json!({
            "apiVersion": RBAC_API, "kind": "ClusterRole",
            "metadata": {"name": format!("{}-tenant", opts.name), "labels": labels},
            "rules": [
                {"apiGroups": [GROUP], "resources": [NAMESPACED_PLURAL], "verbs": crud},
                {"apiGroups": [GROUP], "resources": [format!("{NAMESPACED_PLURAL}/status")], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": crud},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "roles"], "verbs": crud},
            ],
        }),
    ]
}
