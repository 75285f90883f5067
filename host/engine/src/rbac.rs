//! `kubewasm rbac`: the least-privilege RBAC objects the host needs to serve a set of
//! plugins, derived from their manifests alone.
//!
//! What the host does against the API server, and the permission each needs:
//!
//! | host action | RBAC |
//! | --- | --- |
//! | discovery of kinds and resource arguments | `get` on the non-resource URLs `/api`, `/api/*`, `/apis`, `/apis/*`, `/version` (ClusterRole only; a namespace-only setup relies on the default `system:discovery` binding) |
//! | one list+watch per watched or read kind (cache) | `get`, `list`, `watch` on its resource |
//! | `create` intent: server-side apply of a whole object | `create` + `patch` (SSA is a PATCH that may create) |
//! | `patch` intent, apply or merge | `patch` on the resource |
//! | `patch` intent with `status` | `patch` on `<plural>/status` |
//! | `delete` intent | `delete` |
//! | `owned-by-trigger` (a controller ownerReference with `blockOwnerDeletion`) | `update` on `<plural>/finalizers` of the watched kinds, when the plugin may create (the `OwnerReferencesPermissionEnforcement` admission plugin checks it) |
//! | Kubernetes Events about handled objects | `create`, `patch` on `events` (core and `events.k8s.io`) |
//! | leader election | `get`, `create`, `update` on `leases` in the host's own namespace |
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
//! cluster, or [`guess`] offline). Grants name API groups but no version, so the resolver
//! is asked with an `api_version` of `group/*` (`v1` for the core group); `*` there means
//! "whichever version is served". A kind the resolver does not know falls back to
//! [`guess`] and is listed in the annotation `kubewasm.dev/guessed` of the role it lands in.
//! Wildcard groups or kinds in a grant become wildcards in the rule, which a reviewer
//! should notice.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use kubewasm_core::kind::{KindInfo, guess, guess_plural};
use kubewasm_core::manifest::{Manifest, Verb};
use kubewasm_core::resource::{ResourceRef, TypeRef};

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
}

impl Default for RbacOptions {
    fn default() -> Self {
        RbacOptions {
            namespace: None,
            name: "kubewasm".into(),
            service_account: "kubewasm".into(),
            service_account_namespace: "kubewasm".into(),
            impersonation: true,
        }
    }
}

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// Canonical order of verbs in a rule.
const VERB_ORDER: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

const READ: &[&str] = &["get", "list", "watch"];

fn verb_rank(v: &str) -> usize {
    VERB_ORDER
        .iter()
        .position(|x| *x == v)
        .unwrap_or(VERB_ORDER.len())
}

/// Where a rule is granted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Scope {
    Cluster,
    Namespace(String),
}

/// Rules being collected: per scope, per (group, resource), the verbs.
#[derive(Default)]
struct Rules {
    by_scope: BTreeMap<Scope, BTreeMap<(String, String), BTreeSet<&'static str>>>,
}

impl Rules {
    fn add(&mut self, scope: &Scope, group: &str, resource: &str, verbs: &[&'static str]) {
        self.by_scope
            .entry(scope.clone())
            .or_default()
            .entry((group.to_string(), resource.to_string()))
            .or_default()
            .extend(verbs.iter().copied());
    }

    /// What was guessed among the resources of one scope.
    fn guessed_in(&self, scope: &Scope, guessed: &Guessed) -> Vec<String> {
        let mut out = BTreeSet::new();
        for (group, resource) in self
            .by_scope
            .get(scope)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let plural = resource.split('/').next().unwrap_or_default();
            if let Some(asked) = guessed.get(&(group.clone(), plural.to_string())) {
                out.insert(asked.clone());
            }
        }
        out.into_iter().collect()
    }

    /// RBAC rules of one scope: resources of one group with the same verbs share a rule.
    fn rules(&self, scope: &Scope) -> Vec<Value> {
        let mut merged: BTreeMap<(String, Vec<&str>), BTreeSet<&str>> = BTreeMap::new();
        for ((group, resource), verbs) in self.by_scope.get(scope).into_iter().flatten() {
            let mut verbs: Vec<&str> = verbs.iter().copied().collect();
            verbs.sort_by_key(|v| verb_rank(v));
            merged
                .entry((group.clone(), verbs))
                .or_default()
                .insert(resource);
        }
        merged
            .into_iter()
            .map(|((group, verbs), resources)| {
                json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
            })
            .collect()
    }
}

/// What the resolver is asked for a grant's group and kind (see the module docs): the kind
/// in whichever version the group serves.
pub fn grant_ref(group: &str, kind: &str) -> ResourceRef {
    ResourceRef::Kind(TypeRef::new(grant_api_version(group), kind))
}

/// The API version the resolver is asked with for a grant's group (see the module docs).
fn grant_api_version(group: &str) -> String {
    if group.is_empty() {
        "v1".to_string()
    } else {
        format!("{group}/*")
    }
}

/// One plugin's permissions: what `grant` adds for each grant, and the `<plural>/finalizers`
/// rule `owned-by-trigger` needs on the watched kinds of a plugin that may create.
fn add_grants(
    m: &Manifest,
    rules: &mut Rules,
    guessed: &mut Guessed,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) {
    let everywhere = |namespaced: bool| match (&opts.namespace, namespaced) {
        (Some(ns), true) => Scope::Namespace(ns.clone()),
        _ => Scope::Cluster,
    };
    let may_create = m.grants.iter().any(|g| g.verbs.contains(&Verb::Create));
    if may_create {
        for w in &m.watches {
            let k = resolve_or_guess(&w.resource, resolve, guessed);
            rules.add(
                &everywhere(k.namespaced),
                &k.group,
                &format!("{}/finalizers", k.plural),
                &["update"],
            );
        }
    }
    for g in &m.grants {
        let mut verbs: Vec<(&str, &[&'static str])> = Vec::new();
        for v in &g.verbs {
            verbs.push(match v {
                Verb::Create => ("", &["create", "patch"]),
                Verb::Patch => ("", &["patch"]),
                Verb::PatchStatus => ("/status", &["patch"]),
                Verb::Delete => ("", &["delete"]),
            });
        }
        // A grant naming namespaces (even `*`) covers only namespaced objects.
        let namespaced_only = !g.namespaces.is_empty();
        let listed: Option<Vec<&String>> =
            if g.namespaces.is_empty() || g.namespaces.iter().any(|n| n == "*") {
                None
            } else {
                Some(g.namespaces.iter().collect())
            };
        for group in &g.api_groups {
            for kind in &g.kinds {
                // Wildcards stay wildcards; the scope of "any kind" is unknown, so it
                // is treated as namespaced (a Role) when namespaces are listed or given.
                let k = if group == "*" || kind == "*" {
                    KindInfo {
                        group: group.clone(),
                        version: "*".into(),
                        kind: kind.clone(),
                        plural: if kind == "*" {
                            "*".into()
                        } else {
                            guess_plural(kind)
                        },
                        namespaced: namespaced_only || opts.namespace.is_some(),
                        has_status: true,
                        guessed: false,
                    }
                } else {
                    resolve_or_guess(&grant_ref(group, kind), resolve, guessed)
                };
                let scopes: Vec<Scope> = match &listed {
                    // A grant with namespaces never covers cluster-scoped objects.
                    _ if namespaced_only && !k.namespaced => vec![],
                    Some(ns) => ns.iter().map(|n| Scope::Namespace((*n).clone())).collect(),
                    None => vec![everywhere(k.namespaced)],
                };
                for scope in &scopes {
                    for (suffix, rbac_verbs) in &verbs {
                        rules.add(
                            scope,
                            &k.group,
                            &format!("{}{suffix}", k.plural),
                            rbac_verbs,
                        );
                    }
                }
            }
        }
    }
}

/// Resources found by [`guess`] rather than the resolver: (group, plural) → what was asked.
type Guessed = BTreeMap<(String, String), String>;

fn resolve_or_guess(
    r: &ResourceRef,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    guessed: &mut Guessed,
) -> KindInfo {
    match resolve(r) {
        Some(k) => k,
        None => {
            let k = guess(r);
            guessed.insert((k.group.clone(), k.plural.clone()), r.to_string());
            k
        }
    }
}

/// The ServiceAccount a plugin's writes are impersonated as: named like its field manager.
pub fn plugin_service_account(m: &Manifest) -> String {
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
/// anything needs cluster scope), then a Role and RoleBinding per namespace. `resolve` maps
/// a kind or resource argument to its resource; None falls back to [`guess`]. Pass each
/// plugin's manifest with the grants and reads the operator approved.
pub fn render(
    manifests: &[&Manifest],
    resolve: impl Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) -> Vec<Value> {
    let resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo> = &resolve;
    let mut guessed = Guessed::new();
    let mut host = Rules::default();
    // Where something that applies to every namespace is granted.
    let everywhere = |namespaced: bool| match (&opts.namespace, namespaced) {
        (Some(ns), true) => Scope::Namespace(ns.clone()),
        _ => Scope::Cluster,
    };

    let mut manifests: Vec<&Manifest> = manifests.to_vec();
    manifests.sort_by(|a, b| a.name.cmp(&b.name));
    manifests.dedup_by(|a, b| a.name == b.name);
    let mut read_scopes = BTreeSet::new();
    let mut per_plugin: Vec<(&Manifest, Rules)> = Vec::new();
    for m in &manifests {
        for r in m.read_resources() {
            let k = resolve_or_guess(r, resolve, &mut guessed);
            let scope = everywhere(k.namespaced);
            host.add(&scope, &k.group, &k.plural, READ);
            read_scopes.insert(scope);
        }
        if opts.impersonation {
            let mut own = Rules::default();
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
    host.add(
        &home,
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    );
    let impersonated: Vec<String> = per_plugin
        .iter()
        .map(|(m, _)| plugin_service_account(m))
        .collect();

    let plugins: Vec<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
    let metadata =
        |name: &str, namespace: Option<&str>, for_plugins: &[&str], guessed_here: Vec<String>| {
            let mut meta = json!({
                "name": name,
                "labels": {"app.kubernetes.io/name": "kubewasm",
                           "app.kubernetes.io/component": "rbac"},
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
                     extra_home: Option<Value>| {
        let subject = json!([{"kind": "ServiceAccount", "name": account,
                              "namespace": opts.service_account_namespace}]);
        if rules.by_scope.contains_key(&Scope::Cluster) {
            let mut cluster_rules = Vec::new();
            // Discovery is needed whenever anything is cluster-wide.
            if discovery {
                cluster_rules.push(json!({
                    "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version"],
                    "verbs": ["get"],
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
            if *scope == home
                && let Some(extra) = &extra_home
            {
                ns_rules.push(extra.clone());
            }
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
    // The host may act as exactly its plugins' ServiceAccounts, nobody else.
    let impersonate = (!impersonated.is_empty()).then(|| {
        json!({"apiGroups": [""], "resources": ["serviceaccounts"],
               "resourceNames": impersonated, "verbs": ["impersonate"]})
    });
    roles(
        &opts.name,
        &opts.service_account,
        &host,
        &plugins,
        true,
        impersonate,
    );
    for (m, own) in &per_plugin {
        // The account is named like the field manager; its roles carry `--name` as prefix.
        let account = plugin_service_account(m);
        let name = format!("{}-{}", opts.name, m.name);
        roles(&name, &account, own, &[m.name.as_str()], false, None);
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

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_core::manifest::{Grant, Watch};
    use kubewasm_core::resource::ResourceArg;

    fn watch(id: &str, r: ResourceRef) -> Watch {
        Watch {
            id: id.into(),
            resource: r,
            namespace: None,
            label_selector: None,
            field_selector: None,
        }
    }

    fn grant(groups: &[&str], kinds: &[&str], ns: &[&str], verbs: &[Verb]) -> Grant {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        Grant {
            api_groups: s(groups),
            kinds: s(kinds),
            namespaces: s(ns),
            verbs: verbs.to_vec(),
            allow_force: false,
            finalizers: vec![],
        }
    }

    /// Everything on the host's ServiceAccount (`--no-impersonation`).
    fn host_only() -> RbacOptions {
        RbacOptions {
            impersonation: false,
            ..RbacOptions::default()
        }
    }

    fn provisioner() -> Manifest {
        Manifest {
            name: "provisioner".into(),
            version: "1".into(),
            watches: vec![watch(
                "sites",
                ResourceRef::Kind(TypeRef::new("sites.kubewasm.dev/v1", "ContentSite")),
            )],
            grants: vec![
                grant(&["mongodb.com"], &["MongoDB"], &[], &[Verb::Create]),
                grant(
                    &[""],
                    &["Service"],
                    &["web", "shop"],
                    &[Verb::Create, Verb::Delete],
                ),
                grant(
                    &["sites.kubewasm.dev"],
                    &["ContentSite"],
                    &[],
                    &[Verb::PatchStatus],
                ),
            ],
            reads: vec![ResourceRef::Resource(
                ResourceArg::parse("secrets").unwrap(),
            )],
        }
    }

    fn find<'a>(objs: &'a [Value], kind: &str, ns: Option<&str>) -> &'a Value {
        objs.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["namespace"].as_str() == ns)
            .unwrap_or_else(|| panic!("no {kind} in {ns:?}: {objs:#?}"))
    }

    /// (group, resource) → verbs, flattened from a role's rules.
    fn perms(role: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
        let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for rule in role["rules"].as_array().unwrap() {
            let Some(groups) = rule["apiGroups"].as_array() else {
                continue;
            };
            for g in groups {
                for r in rule["resources"].as_array().unwrap() {
                    for v in rule["verbs"].as_array().unwrap() {
                        out.entry((
                            g.as_str().unwrap().to_string(),
                            r.as_str().unwrap().to_string(),
                        ))
                        .or_default()
                        .insert(v.as_str().unwrap().to_string());
                    }
                }
            }
        }
        out
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn key(g: &str, r: &str) -> (String, String) {
        (g.to_string(), r.to_string())
    }

    #[test]
    fn guesses_plurals_like_kubectl() {
        let g = |k: &str| guess(&ResourceRef::Kind(TypeRef::new("x.io/v1", k)));
        assert_eq!(g("MongoDB").plural, "mongodbs");
        assert_eq!(g("Ingress").plural, "ingresses");
        assert_eq!(g("NetworkPolicy").plural, "networkpolicies");
        assert_eq!(g("MongoDB").group, "x.io");
        assert!(g("MongoDB").namespaced);
        let ns = guess(&ResourceRef::Kind(TypeRef::new("v1", "Namespace")));
        assert_eq!((ns.group.as_str(), ns.plural.as_str()), ("", "namespaces"));
        assert!(!ns.namespaced);
        let arg = guess(&ResourceRef::Resource(
            ResourceArg::parse("seldondeployments.v1.machinelearning.seldon.io").unwrap(),
        ));
        assert_eq!(arg.plural, "seldondeployments");
        assert_eq!(arg.group, "machinelearning.seldon.io");
    }

    #[test]
    fn cluster_role_has_reads_grants_and_events_namespaced_grants_get_roles() {
        let m = provisioner();
        let objs = render(&[&m], |r| Some(guess(r)), &host_only());
        let kinds: Vec<(&str, Option<&str>)> = objs
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("ServiceAccount", Some("kubewasm")),
                ("ClusterRole", None),
                ("ClusterRoleBinding", None),
                ("Role", Some("kubewasm")),
                ("RoleBinding", Some("kubewasm")),
                ("Role", Some("shop")),
                ("RoleBinding", Some("shop")),
                ("Role", Some("web")),
                ("RoleBinding", Some("web")),
            ]
        );
        let cr = perms(find(&objs, "ClusterRole", None));
        let want: BTreeMap<_, _> = [
            (
                key("sites.kubewasm.dev", "contentsites"),
                set(&["get", "list", "watch"]),
            ),
            (
                key("sites.kubewasm.dev", "contentsites/finalizers"),
                set(&["update"]),
            ),
            (
                key("sites.kubewasm.dev", "contentsites/status"),
                set(&["patch"]),
            ),
            (key("", "secrets"), set(&["get", "list", "watch"])),
            (key("mongodb.com", "mongodbs"), set(&["create", "patch"])),
            (key("", "events"), set(&["create", "patch"])),
            (key("events.k8s.io", "events"), set(&["create", "patch"])),
        ]
        .into();
        assert_eq!(cr, want);
        let cr = find(&objs, "ClusterRole", None);
        assert_eq!(cr["rules"][0]["nonResourceURLs"][0], "/api");
        assert_eq!(
            cr["metadata"]["annotations"]["kubewasm.dev/plugins"],
            "provisioner"
        );
        for ns in ["web", "shop"] {
            let role = perms(find(&objs, "Role", Some(ns)));
            assert_eq!(
                role,
                [(key("", "services"), set(&["create", "patch", "delete"]))].into()
            );
        }
        let leases = perms(find(&objs, "Role", Some("kubewasm")));
        assert_eq!(
            leases,
            [(
                key("coordination.k8s.io", "leases"),
                set(&["get", "create", "update"])
            )]
            .into()
        );
        let binding = find(&objs, "ClusterRoleBinding", None);
        assert_eq!(binding["roleRef"]["name"], "kubewasm");
        assert_eq!(binding["subjects"][0]["name"], "kubewasm");
        assert_eq!(binding["subjects"][0]["namespace"], "kubewasm");
    }

    #[test]
    fn namespace_option_uses_a_role_when_everything_is_namespaced() {
        let m = provisioner();
        let opts = RbacOptions {
            namespace: Some("web".into()),
            ..host_only()
        };
        let objs = render(&[&m], |r| Some(guess(r)), &opts);
        assert!(objs.iter().all(|o| o["kind"] != "ClusterRole"), "{objs:#?}");
        let role = perms(find(&objs, "Role", Some("web")));
        assert_eq!(
            role[&key("", "services")],
            set(&["create", "patch", "delete"])
        );
        assert_eq!(
            role[&key("mongodb.com", "mongodbs")],
            set(&["create", "patch"])
        );
        assert_eq!(
            role[&key("sites.kubewasm.dev", "contentsites")],
            set(&["get", "list", "watch"])
        );
        assert_eq!(role[&key("", "events")], set(&["create", "patch"]));

        // A cluster-scoped kind still needs the ClusterRole, and only it goes there.
        let mut m = provisioner();
        m.grants
            .push(grant(&[""], &["Namespace"], &[], &[Verb::Create]));
        let objs = render(&[&m], |r| Some(guess(r)), &opts);
        let cr = perms(find(&objs, "ClusterRole", None));
        assert_eq!(
            cr,
            [(key("", "namespaces"), set(&["create", "patch"]))].into()
        );
    }

    #[test]
    fn verbs_map_to_rbac_verbs_and_merge_across_plugins() {
        let a = Manifest {
            name: "a".into(),
            version: "1".into(),
            watches: vec![],
            grants: vec![grant(&["apps"], &["Deployment"], &[], &[Verb::Patch])],
            reads: vec![],
        };
        let b = Manifest {
            name: "b".into(),
            version: "1".into(),
            watches: vec![],
            grants: vec![grant(
                &["apps"],
                &["Deployment"],
                &[],
                &[Verb::Delete, Verb::PatchStatus],
            )],
            reads: vec![],
        };
        let objs = render(&[&a, &b], |r| Some(guess(r)), &host_only());
        let cr = find(&objs, "ClusterRole", None);
        assert_eq!(cr["metadata"]["annotations"]["kubewasm.dev/plugins"], "a,b");
        let p = perms(cr);
        assert_eq!(p[&key("apps", "deployments")], set(&["patch", "delete"]));
        assert_eq!(p[&key("apps", "deployments/status")], set(&["patch"]));
        // No reads: no events rule.
        assert!(!p.contains_key(&key("", "events")));
        // Verbs in canonical order within a rule.
        let rule = cr["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resources"] == json!(["deployments"]))
            .unwrap();
        assert_eq!(rule["verbs"], json!(["patch", "delete"]));
    }

    #[test]
    fn resolver_is_asked_and_unknown_kinds_are_guessed_and_flagged() {
        let m = provisioner();
        let asked = std::cell::RefCell::new(Vec::new());
        let objs = render(
            &[&m],
            |r| {
                asked.borrow_mut().push(r.to_string());
                match r {
                    ResourceRef::Kind(t) if t.kind == "MongoDB" => Some(KindInfo {
                        group: "mongodb.com".into(),
                        version: "v1".into(),
                        kind: "MongoDB".into(),
                        plural: "mongodbcommunity".into(),
                        namespaced: true,
                        has_status: true,
                        guessed: false,
                    }),
                    _ => None,
                }
            },
            &host_only(),
        );
        let asked = asked.into_inner();
        assert!(
            asked.contains(&"mongodb.com/*/MongoDB".to_string()),
            "{asked:?}"
        );
        assert!(asked.contains(&"v1/Service".to_string()), "{asked:?}");
        let cr = find(&objs, "ClusterRole", None);
        assert!(perms(cr).contains_key(&key("mongodb.com", "mongodbcommunity")));
        let guessed = cr["metadata"]["annotations"]["kubewasm.dev/guessed"]
            .as_str()
            .unwrap();
        assert!(guessed.contains("ContentSite"), "{guessed}");
        assert!(!guessed.contains("MongoDB"), "{guessed}");
    }

    #[test]
    fn wildcards_stay_wildcards_and_namespaced_grants_skip_cluster_scoped_kinds() {
        let m = Manifest {
            name: "w".into(),
            version: "1".into(),
            watches: vec![],
            grants: vec![
                grant(&["*"], &["*"], &["team"], &[Verb::PatchStatus]),
                grant(&[""], &["Namespace"], &["team"], &[Verb::Create]),
            ],
            reads: vec![],
        };
        let objs = render(&[&m], |r| Some(guess(r)), &host_only());
        let role = perms(find(&objs, "Role", Some("team")));
        assert_eq!(role, [(key("*", "*/status"), set(&["patch"]))].into());
        assert!(objs.iter().all(|o| o["kind"] != "ClusterRole"));
    }

    #[test]
    fn any_namespace_grants_skip_cluster_scoped_kinds() {
        let m = Manifest {
            name: "s".into(),
            version: "1".into(),
            watches: vec![],
            grants: vec![grant(
                &[""],
                &["Namespace", "ConfigMap"],
                &["*"],
                &[Verb::Delete],
            )],
            reads: vec![],
        };
        let objs = render(&[&m], |r| Some(guess(r)), &host_only());
        let cr = perms(find(&objs, "ClusterRole", None));
        assert_eq!(cr, [(key("", "configmaps"), set(&["delete"]))].into());
    }

    #[test]
    fn yaml_round_trips() {
        let m = provisioner();
        let objs = render(&[&m], |r| Some(guess(r)), &host_only());
        let yaml = to_yaml(&objs);
        assert!(yaml.starts_with("---\n"));
        let back: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert_eq!(back, objs);
    }

    #[test]
    fn each_plugin_gets_its_own_account_and_the_host_impersonates_exactly_those() {
        let p = provisioner();
        let mut other = provisioner();
        other.name = "other".into();
        other.grants = vec![grant(&["apps"], &["Deployment"], &[], &[Verb::Delete])];
        let objs = render(&[&p, &other], |r| Some(guess(r)), &RbacOptions::default());
        let names: Vec<(&str, &str, Option<&str>)> = objs
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str(),
                )
            })
            .collect();
        for want in [
            ("ServiceAccount", "kubewasm", Some("kubewasm")),
            ("ServiceAccount", "kubewasm-provisioner", Some("kubewasm")),
            ("ServiceAccount", "kubewasm-other", Some("kubewasm")),
            ("ClusterRole", "kubewasm-provisioner", None),
            ("ClusterRoleBinding", "kubewasm-provisioner", None),
            ("Role", "kubewasm-provisioner", Some("web")),
            ("RoleBinding", "kubewasm-provisioner", Some("shop")),
            ("ClusterRole", "kubewasm-other", None),
        ] {
            assert!(names.contains(&want), "{want:?} in {names:?}");
        }
        // The host reads, records Events, holds its Lease, and impersonates by name.
        let host = perms(
            objs.iter()
                .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "kubewasm")
                .unwrap(),
        );
        assert!(
            host.iter()
                .all(|((_, r), v)| *v == set(&["get", "list", "watch"]) || r == "events"),
            "{host:?}"
        );
        let home = objs
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == "kubewasm")
            .unwrap();
        let imp = home["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["verbs"] == json!(["impersonate"]))
            .unwrap();
        assert_eq!(
            imp["resourceNames"],
            json!(["kubewasm-other", "kubewasm-provisioner"])
        );
        // Each plugin's role holds its grants only, bound to its own account.
        let own = |name: &str| {
            perms(
                objs.iter()
                    .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == name)
                    .unwrap(),
            )
        };
        assert_eq!(
            own("kubewasm-other"),
            [(key("apps", "deployments"), set(&["delete"]))].into()
        );
        let prov = own("kubewasm-provisioner");
        assert_eq!(
            prov[&key("mongodb.com", "mongodbs")],
            set(&["create", "patch"])
        );
        assert!(!prov.contains_key(&key("apps", "deployments")));
        assert!(
            !prov.contains_key(&key("", "secrets")),
            "reads stay the host's"
        );
        let binding = objs
            .iter()
            .find(|o| {
                o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == "kubewasm-other"
            })
            .unwrap();
        assert_eq!(binding["subjects"][0]["name"], "kubewasm-other");
        assert_eq!(binding["roleRef"]["name"], "kubewasm-other");
    }
}
