//! The RBAC objects: ServiceAccounts, then per identity its roles and bindings, and the
//! YAML stream `kubectl apply -f -` takes.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::RbacOptions;
use super::rules::{Guessed, READ, Rules, Scope, add_grants, add_reads, resolve_or_guess};
use crate::grant::{Approval, ReadScopes};
use crate::kind::KindInfo;
use crate::manifest::Manifest;
use crate::plugin_object::Permissions;
use crate::resource::ResourceRef;

pub(super) const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// The label naming the install (its namespace) on every object rendered: what `kubewasm
/// rbac --kubeconfig` compares before it would take over an object of the same name.
pub const INSTALL_LABEL: &str = "kubewasm.dev/install";

/// The name of a role or binding outside the install's namespace (cluster-scoped, or in
/// another namespace), where another install's objects live too: prefixed with the
/// install's namespace, as the ServiceAccount it binds is `system:serviceaccount:NS:NAME`.
/// Two installs in two namespaces never share one; inside its own namespace a role keeps
/// its plain name.
pub fn qualified(install: &str, name: &str) -> String {
    format!("{install}:{name}")
}

/// The ServiceAccount a plugin's writes are impersonated as: named like its field manager.
fn plugin_service_account(m: &Manifest) -> String {
    m.field_manager()
}

/// The least-privilege RBAC objects for `manifests`, in apply order.
///
/// With [`RbacOptions::impersonation`] (the default): the host's ServiceAccount gets the
/// reads its caches need, Events, its Lease, and `impersonate` on exactly the plugins'
/// ServiceAccounts (by resourceNames, in its own namespace); each plugin gets a
/// ServiceAccount `kubewasm-<plugin>` with a ClusterRole and Roles holding only its own
/// grants. Without it, the host's roles hold every plugin's grants too.
///
/// Objects: ServiceAccounts, then per identity its ClusterRole and ClusterRoleBinding (when
/// anything needs cluster scope), then a Role and RoleBinding per namespace. Roles and
/// bindings outside the install's namespace are named [`qualified`]
/// (`kubewasm-system:kubewasm`), and every object carries [`INSTALL_LABEL`]. `resolve` maps
/// a kind or resource argument to its resource; None falls back to
/// [`guess`](crate::kind::guess). Pass each plugin's manifest with the grants and reads the
/// operator approved.
///
/// With [`RbacOptions::host_roles_per_plugin`], the host's roles and bindings are one set
/// per plugin, named `<name>:<plugin>`, each holding what the host needs for that plugin
/// alone (its reads, Events, the Lease, impersonating its ServiceAccount): RBAC is
/// additive, so the sets of several plugins, applied one by one (`kubewasm approve`),
/// add up to the host's rights and never overwrite each other.
///
/// Each plugin's ServiceAccount also gets `get`, `list` and `watch` where the plugin reads
/// ([`super::read_rules`]): here where a manifest's own watches are, as
/// [`Permissions::requested_by`] approves them; [`render_approved`] takes them from the
/// approvals instead.
pub fn render(
    manifests: &[&Manifest],
    resolve: impl Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) -> Vec<Value> {
    let plugins: Vec<(&Manifest, ReadScopes)> = manifests
        .iter()
        .map(|m| {
            let scopes = Permissions::requested_by(m)
                .to_approval()
                .map(|a| a.read_scopes())
                .unwrap_or_default();
            (*m, scopes)
        })
        .collect();
    render_plugins(&plugins, &resolve, opts)
}

/// [`render`] for approved plugins, by name: each approval as the manifest the RBAC
/// derives from ([`Approval::to_manifest`]), each plugin's ServiceAccount reading exactly
/// where its approval lets it read ([`Approval::read_scopes`]).
pub fn render_approved(
    approved: &[(&str, &Approval)],
    resolve: impl Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) -> Vec<Value> {
    let owned: Vec<(Manifest, ReadScopes)> = approved
        .iter()
        .map(|(name, a)| (a.to_manifest(name), a.read_scopes()))
        .collect();
    let plugins: Vec<(&Manifest, ReadScopes)> = owned.iter().map(|(m, s)| (m, s.clone())).collect();
    render_plugins(&plugins, &resolve, opts)
}

/// The name of the ClusterRole [`metrics_reader`]: `<name>-metrics-reader`, the name
/// kubebuilder's scaffold gives it, [`qualified`] by the install
/// (`kubewasm-system:kubewasm-metrics-reader`).
pub fn metrics_reader_name(opts: &RbacOptions) -> String {
    qualified(
        &opts.service_account_namespace,
        &format!("{}-metrics-reader", opts.name),
    )
}

/// The ClusterRole a scraper of `kubewasm run --metrics-secure` is bound to (Prometheus's
/// ServiceAccount, by a ClusterRoleBinding of the operator's): `get` on `/metrics` and
/// `/status`, the URLs the host's SubjectAccessReview asks about. `/preview` is left out:
/// it shows objects' fields, so it needs a rule of its own (`/preview`, `/preview/*`).
pub fn metrics_reader(opts: &RbacOptions) -> Value {
    json!({
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {
            "name": metrics_reader_name(opts),
            "labels": {"app.kubernetes.io/name": "kubewasm",
                       "app.kubernetes.io/component": "metrics",
                       INSTALL_LABEL: opts.service_account_namespace},
        },
        "rules": [{"nonResourceURLs": ["/metrics", "/status"], "verbs": ["get"]}],
    })
}

fn render_plugins(
    plugins: &[(&Manifest, ReadScopes)],
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) -> Vec<Value> {
    let mut out = render_host(plugins, resolve, opts);
    if opts.metrics_secure {
        out.push(metrics_reader(opts));
    }
    out
}

fn render_host(
    plugins: &[(&Manifest, ReadScopes)],
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) -> Vec<Value> {
    if !opts.host_roles_per_plugin {
        return render_with(plugins, resolve, opts, &opts.name);
    }
    let mut manifests: Vec<(&Manifest, ReadScopes)> = plugins.to_vec();
    manifests.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    manifests.dedup_by(|a, b| a.0.name == b.0.name);
    let mut accounts: Vec<Value> = Vec::new();
    let mut rest: Vec<Value> = Vec::new();
    for m in &manifests {
        let host_name = format!("{}:{}", opts.name, m.0.name);
        for o in render_with(std::slice::from_ref(m), resolve, opts, &host_name) {
            let same = |a: &Value| {
                a["metadata"]["name"] == o["metadata"]["name"]
                    && a["metadata"]["namespace"] == o["metadata"]["namespace"]
            };
            if o["kind"] != "ServiceAccount" {
                rest.push(o);
            } else if !accounts.iter().any(same) {
                // The host's account comes with each plugin's set: kept once.
                accounts.push(o);
            }
        }
    }
    // The host's account names every plugin it serves.
    let plugins: Vec<&str> = manifests.iter().map(|m| m.0.name.as_str()).collect();
    for a in &mut accounts {
        if a["metadata"]["name"] == opts.service_account.as_str() {
            a["metadata"]["annotations"]["kubewasm.dev/plugins"] = json!(plugins.join(","));
        }
    }
    accounts.extend(rest);
    accounts
}

/// [`render`] with the host's roles and bindings named `host_name`.
fn render_with(
    plugins: &[(&Manifest, ReadScopes)],
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
    host_name: &str,
) -> Vec<Value> {
    let mut guessed = Guessed::new();
    let mut host = Rules::default();
    let everywhere = |namespaced: bool| Scope::everywhere(opts, namespaced);

    let mut plugins: Vec<(&Manifest, ReadScopes)> = plugins.to_vec();
    plugins.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    plugins.dedup_by(|a, b| a.0.name == b.0.name);
    let manifests: Vec<&Manifest> = plugins.iter().map(|(m, _)| *m).collect();
    let mut read_scopes = BTreeSet::new();
    let mut per_plugin: Vec<(&Manifest, Rules)> = Vec::new();
    for (m, scopes) in &plugins {
        for r in m.read_resources() {
            let k = resolve_or_guess(r, resolve, &mut guessed);
            let scope = everywhere(k.namespaced);
            host.add(&scope, &k.group, &k.plural, READ);
            read_scopes.insert(scope);
        }
        if opts.impersonation {
            let mut own = Rules::default();
            // The plugin reads as itself: its account may read where it is approved to.
            add_reads(scopes, &mut own, &mut guessed, resolve, opts);
            add_grants(m, &mut own, &mut guessed, resolve, opts);
            per_plugin.push((m, own));
        } else {
            add_grants(m, &mut host, &mut guessed, resolve, opts);
        }
    }
    for scope in &read_scopes {
        for group in ["", "events.k8s.io"] {
            host.add(scope, group, "events", &["create", "patch"]);
        }
    }
    let home = Scope::Namespace(opts.service_account_namespace.clone());
    let lease_verbs: &[&str] = if opts.sharded {
        &["get", "list", "create", "update", "delete"]
    } else {
        &["get", "create", "update"]
    };
    host.add(&home, "coordination.k8s.io", "leases", lease_verbs);
    // The host asks whether each plugin's account may read what it is approved to read.
    if opts.impersonation {
        host.add(
            &Scope::Cluster,
            "authorization.k8s.io",
            "subjectaccessreviews",
            &["create"],
        );
    }
    // --metrics-secure: whom each request's token authenticates as, and whether that user
    // may get the URL.
    if opts.metrics_secure {
        for (group, resource) in [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ] {
            host.add(&Scope::Cluster, group, resource, &["create"]);
        }
    }
    // Plugin objects, which `run` follows unless --no-plugin-objects: read them, write
    // their status; the pull secrets they may name live in the host's own namespace, read
    // by name only (below).
    if opts.plugin_objects {
        host.add(
            &Scope::Cluster,
            crate::plugin_object::GROUP,
            crate::plugin_object::PLURAL,
            READ,
        );
        host.add(
            &Scope::Cluster,
            crate::plugin_object::GROUP,
            &format!("{}/status", crate::plugin_object::PLURAL),
            &["patch"],
        );
    }
    let impersonated: Vec<String> = per_plugin
        .iter()
        .map(|(m, _)| plugin_service_account(m))
        .collect();

    let plugins: Vec<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
    let install = opts.service_account_namespace.as_str();
    let metadata =
        |name: &str, namespace: Option<&str>, for_plugins: &[&str], guessed_here: Vec<String>| {
            let mut meta = json!({
                "name": name,
                "labels": {"app.kubernetes.io/name": "kubewasm",
                           "app.kubernetes.io/component": "rbac",
                           INSTALL_LABEL: install},
                "annotations": {"kubewasm.dev/plugins": for_plugins.join(",")},
            });
            if let Some(ns) = namespace {
                meta["namespace"] = json!(ns);
            }
            if !guessed_here.is_empty() {
                meta["annotations"]["kubewasm.dev/guessed"] = json!(guessed_here.join(","));
            }
            meta
        };

    let mut out = vec![json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(&opts.service_account, Some(&opts.service_account_namespace), &plugins, vec![]),
    })];
    for (m, _) in &per_plugin {
        out.push(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(&plugin_service_account(m), Some(&opts.service_account_namespace), &[m.name.as_str()], vec![]),
        }));
    }
    // The roles and bindings of one identity.
    let mut roles = |name: &str,
                     account: &str,
                     rules: &Rules,
                     for_plugins: &[&str],
                     discovery: bool,
                     extra_home: &[Value]| {
        let subject = json!([{"kind": "ServiceAccount", "name": account,
                              "namespace": opts.service_account_namespace}]);
        let outside = qualified(install, name);
        if rules.by_scope.contains_key(&Scope::Cluster) {
            let name = outside.as_str();
            let mut cluster_rules = Vec::new();
            // Discovery is needed whenever anything is cluster-wide.
            if discovery {
                cluster_rules.push(json!({
                    "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version"],
                    "verbs": ["get"],
                }));
                // The host asks whether it may do what it needs before doing it.
                cluster_rules.push(json!({
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews"],
                    "verbs": ["create"],
                }));
            }
            cluster_rules.extend(rules.rules(&Scope::Cluster));
            out.push(json!({
                "apiVersion": RBAC_API,
                "kind": "ClusterRole",
                "metadata": metadata(name, None, for_plugins, rules.guessed_in(&Scope::Cluster, &guessed)),
                "rules": cluster_rules,
            }));
            out.push(json!({
                "apiVersion": RBAC_API,
                "kind": "ClusterRoleBinding",
                "metadata": metadata(name, None, for_plugins, vec![]),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subject,
            }));
        }
        for scope in rules.by_scope.keys() {
            let Scope::Namespace(ns) = scope else {
                continue;
            };
            let mut ns_rules = rules.rules(scope);
            if *scope == home {
                ns_rules.extend(extra_home.iter().cloned());
            }
            let name = if *scope == home {
                name
            } else {
                outside.as_str()
            };
            out.push(json!({
                "apiVersion": RBAC_API,
                "kind": "Role",
                "metadata": metadata(name, Some(ns), for_plugins, rules.guessed_in(scope, &guessed)),
                "rules": ns_rules,
            }));
            out.push(json!({
                "apiVersion": RBAC_API,
                "kind": "RoleBinding",
                "metadata": metadata(name, Some(ns), for_plugins, vec![]),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subject,
            }));
        }
    };
    let mut by_name = Vec::new();
    // The host may read exactly the pull secrets the operator allowed (an empty
    // resourceNames would be every Secret, so none allowed is no rule).
    if opts.plugin_objects && !opts.pull_secrets.is_empty() {
        let mut names = opts.pull_secrets.clone();
        names.sort();
        names.dedup();
        by_name.push(json!({"apiGroups": [""], "resources": ["secrets"],
                            "resourceNames": names, "verbs": ["get"]}));
    }
    // The host may act as exactly its plugins' ServiceAccounts, nobody else.
    if !impersonated.is_empty() {
        by_name.push(json!({"apiGroups": [""], "resources": ["serviceaccounts"],
                            "resourceNames": impersonated, "verbs": ["impersonate"]}));
    }
    roles(
        host_name,
        &opts.service_account,
        &host,
        &plugins,
        true,
        &by_name,
    );
    for (m, own) in &per_plugin {
        // The account is named like the field manager; its roles carry `--name` as prefix.
        let account = plugin_service_account(m);
        let name = format!("{}-{}", opts.name, m.name);
        roles(&name, &account, own, &[m.name.as_str()], false, &[]);
    }
    out
}

/// The objects as one multi-document YAML stream, ready for `kubectl apply -f -`.
pub fn to_yaml(objects: &[Value]) -> String {
    let mut text = String::new();
    for o in objects {
        text.push_str("---\n");
        // Serializing a serde_json::Value to YAML cannot fail (string keys, no tags).
        match serde_yaml_ng::to_string(o) {
            Ok(doc) => text.push_str(&doc),
            Err(e) => text.push_str(&format!("# cannot render object: {e}\n")),
        }
    }
    text
}
