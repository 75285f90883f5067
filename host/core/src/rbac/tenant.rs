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
use super::rules::{Guessed, READ, Rules, Scope, add_grants, add_reads, resolve_or_guess};
use crate::grant::Approval;
use crate::kind::KindInfo;
use crate::plugin_object::{GROUP, NAMESPACED_PLURAL};
use crate::resource::ResourceRef;

/// Where the host runs: its ServiceAccount, which the team's Role `kubewasm-host-P` binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAccount {
    /// The host's namespace.
    pub namespace: String,
    /// The host's ServiceAccount.
    pub name: String,
}

/// The RBAC of the team's plugin `plugin` in `namespace`, all in that namespace, for an
/// approval already confined to it ([`crate::tenant::confine_approval`]): ServiceAccount
/// `kubewasm-<plugin>`; Role and RoleBinding `kubewasm-<plugin>` (its reads and grants,
/// nothing else); Role and RoleBinding `kubewasm-host-<plugin>` for `host` (get/list/watch on what the plugin
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
