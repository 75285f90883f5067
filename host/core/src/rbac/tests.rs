//! `render` on manifests, checked on the roles it produces.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;
use crate::kind::{KindInfo, guess};
use crate::manifest::{Grant, Manifest, Verb, Watch};
use crate::resource::{ResourceArg, ResourceRef, TypeRef};

fn watch(id: &str, r: ResourceRef) -> Watch {
    Watch {
        id: id.into(),
        resource: r,
        namespace: None,
        label_selector: None,
        field_selector: None,
        fields: crate::projection::Projection::whole(),
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
        plugin_objects: false,
        ..RbacOptions::default()
    }
}

/// The host's own rules for following Plugin objects: read them cluster-wide, write their
/// status, read the allowed pull secrets by name in its own namespace (none allowed: no
/// Secret at all); none of it with `plugin_objects` off.
#[test]
fn the_host_reads_plugin_objects_writes_their_status_and_reads_pull_secrets_at_home() {
    let m = provisioner();
    let on = render(&[&m], |r| Some(guess(r)), &RbacOptions::default());
    let cluster = perms(find(&on, "ClusterRole", None));
    assert_eq!(
        cluster.get(&key("kubewasm.dev", "plugins")),
        Some(&set(&["get", "list", "watch"]))
    );
    assert_eq!(
        cluster.get(&key("kubewasm.dev", "plugins/status")),
        Some(&set(&["patch"]))
    );
    let home = perms(find(&on, "Role", Some("kubewasm-system")));
    assert_eq!(
        home.get(&key("", "secrets")),
        None,
        "no pull secret allowed"
    );
    let allowed = render(
        &[&m],
        |r| Some(guess(r)),
        &RbacOptions {
            pull_secrets: vec!["regcred".into(), "other".into()],
            ..RbacOptions::default()
        },
    );
    let home = find(&allowed, "Role", Some("kubewasm-system"));
    let secrets: Vec<&Value> = home["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resources"] == json!(["secrets"]))
        .collect();
    assert_eq!(
        secrets,
        [&json!({"apiGroups": [""], "resources": ["secrets"],
                 "resourceNames": ["other", "regcred"], "verbs": ["get"]})],
        "{home}"
    );
    let off = render(
        &[&m],
        |r| Some(guess(r)),
        &RbacOptions {
            plugin_objects: false,
            pull_secrets: vec!["regcred".into()],
            ..RbacOptions::default()
        },
    );
    let text = serde_json::to_string(&off).unwrap_or_default();
    assert!(!text.contains("plugins/status"), "{text}");
    assert!(!perms(find(&off, "Role", Some("kubewasm-system"))).contains_key(&key("", "secrets")));
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
        reads: vec![crate::manifest::Read::whole(ResourceRef::Resource(
            ResourceArg::parse("secrets").unwrap(),
        ))],
    }
}

fn find<'a>(objs: &'a [Value], kind: &str, ns: Option<&str>) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["namespace"].as_str() == ns)
        .unwrap_or_else(|| panic!("no {kind} in {ns:?}: {objs:#?}"))
}

/// The rule every host ClusterRole carries beside discovery: asking what it may do.
fn is_self_review(rule: &Value) -> bool {
    rule["apiGroups"] == serde_json::json!(["authorization.k8s.io"])
        && rule["resources"] == serde_json::json!(["selfsubjectaccessreviews"])
}

/// (group, resource) → verbs, flattened from a role's rules (without the discovery and
/// self-review rules of the host's ClusterRole, checked on their own).
fn perms(role: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in role["rules"].as_array().unwrap() {
        if is_self_review(rule) {
            continue;
        }
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
            ("ServiceAccount", Some("kubewasm-system")),
            ("ClusterRole", None),
            ("ClusterRoleBinding", None),
            ("Role", Some("kubewasm-system")),
            ("RoleBinding", Some("kubewasm-system")),
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
    let leases = perms(find(&objs, "Role", Some("kubewasm-system")));
    assert_eq!(
        leases,
        [(
            key("coordination.k8s.io", "leases"),
            set(&["get", "create", "update"])
        )]
        .into()
    );
    let binding = find(&objs, "ClusterRoleBinding", None);
    // Cluster-scoped: named after the install, as its ServiceAccount is.
    assert_eq!(binding["metadata"]["name"], "kubewasm-system:kubewasm");
    assert_eq!(binding["roleRef"]["name"], "kubewasm-system:kubewasm");
    assert_eq!(
        binding["metadata"]["labels"]["kubewasm.dev/install"],
        "kubewasm-system"
    );
    assert_eq!(binding["subjects"][0]["name"], "kubewasm");
    assert_eq!(binding["subjects"][0]["namespace"], "kubewasm-system");
}

/// `kubewasm run --shards S` lists the shard and member Leases and deletes its member
/// Lease on a clean shutdown: `sharded` adds exactly `list` and `delete` on leases in the
/// host's namespace, nothing elsewhere.
#[test]
fn sharded_hosts_also_list_and_delete_their_leases() {
    let m = provisioner();
    let plain = render(&[&m], |r| Some(guess(r)), &host_only());
    let sharded = render(
        &[&m],
        |r| Some(guess(r)),
        &RbacOptions {
            sharded: true,
            ..host_only()
        },
    );
    let home = |objs: &[Value]| perms(find(objs, "Role", Some("kubewasm-system")));
    assert_eq!(
        home(&plain)[&key("coordination.k8s.io", "leases")],
        set(&["get", "create", "update"])
    );
    let mut want = home(&plain);
    want.insert(
        key("coordination.k8s.io", "leases"),
        set(&["get", "list", "create", "update", "delete"]),
    );
    assert_eq!(home(&sharded), want);
    let lease_rule = find(&sharded, "Role", Some("kubewasm-system"))["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resources"] == json!(["leases"]))
        .unwrap()
        .clone();
    assert_eq!(
        lease_rule["verbs"],
        json!(["get", "list", "create", "update", "delete"]),
        "verbs in canonical order"
    );
    // Everything else is the same.
    assert_eq!(
        perms(find(&sharded, "ClusterRole", None)),
        perms(find(&plain, "ClusterRole", None))
    );
    assert_eq!(sharded.len(), plain.len());
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
    let objs = render(
        &[&p, &other],
        |r| Some(guess(r)),
        &RbacOptions {
            plugin_objects: false,
            ..RbacOptions::default()
        },
    );
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
        ("ServiceAccount", "kubewasm", Some("kubewasm-system")),
        (
            "ServiceAccount",
            "kubewasm-provisioner",
            Some("kubewasm-system"),
        ),
        ("ServiceAccount", "kubewasm-other", Some("kubewasm-system")),
        ("ClusterRole", "kubewasm-system:kubewasm-provisioner", None),
        (
            "ClusterRoleBinding",
            "kubewasm-system:kubewasm-provisioner",
            None,
        ),
        ("Role", "kubewasm-system:kubewasm-provisioner", Some("web")),
        (
            "RoleBinding",
            "kubewasm-system:kubewasm-provisioner",
            Some("shop"),
        ),
        ("ClusterRole", "kubewasm-system:kubewasm-other", None),
    ] {
        assert!(names.contains(&want), "{want:?} in {names:?}");
    }
    // The host reads, records Events, holds its Lease, impersonates by name, and asks
    // whether each plugin's account may read what the plugin is approved to read.
    let host = perms(
        objs.iter()
            .find(|o| {
                o["kind"] == "ClusterRole" && o["metadata"]["name"] == "kubewasm-system:kubewasm"
            })
            .unwrap(),
    );
    assert!(
        host.iter()
            .all(|((_, r), v)| *v == set(&["get", "list", "watch"])
                || r == "events"
                || (r == "subjectaccessreviews" && *v == set(&["create"]))),
        "{host:?}"
    );
    assert!(host.contains_key(&key("authorization.k8s.io", "subjectaccessreviews")));
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
    // Each plugin's role holds its grants and its reads (where its watches are: here
    // cluster-wide), bound to its own account.
    let own = |name: &str| {
        perms(
            objs.iter()
                .find(|o| {
                    o["kind"] == "ClusterRole"
                        && o["metadata"]["name"] == format!("kubewasm-system:{name}")
                })
                .unwrap(),
        )
    };
    let read = set(&["get", "list", "watch"]);
    assert_eq!(
        own("kubewasm-other"),
        [
            (key("apps", "deployments"), set(&["delete"])),
            (key("sites.kubewasm.dev", "contentsites"), read.clone()),
            (key("", "secrets"), read.clone()),
        ]
        .into()
    );
    let prov = own("kubewasm-provisioner");
    assert_eq!(
        prov[&key("mongodb.com", "mongodbs")],
        set(&["create", "patch"])
    );
    assert!(!prov.contains_key(&key("apps", "deployments")));
    assert_eq!(
        prov.get(&key("", "secrets")),
        Some(&read),
        "the plugin reads as itself"
    );
    let binding = objs
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRoleBinding"
                && o["metadata"]["name"] == "kubewasm-system:kubewasm-other"
        })
        .unwrap();
    assert_eq!(binding["subjects"][0]["name"], "kubewasm-other");
    assert_eq!(binding["roleRef"]["name"], "kubewasm-system:kubewasm-other");
}

/// Per-plugin host roles: each plugin's set is what rendering it alone gives (under its
/// own names), so sets applied one by one add up and never overwrite each other.
#[test]
fn host_roles_per_plugin_are_each_plugin_s_own() {
    let a = provisioner();
    let mut b = provisioner();
    b.name = "other".into();
    let opts = RbacOptions {
        host_roles_per_plugin: true,
        plugin_objects: false,
        ..RbacOptions::default()
    };
    let both = render(&[&a, &b], |r| Some(guess(r)), &opts);
    let alone = render(&[&a], |r| Some(guess(r)), &opts);
    let names = |objs: &[serde_json::Value], kind: &str| -> Vec<String> {
        objs.iter()
            .filter(|o| o["kind"] == kind)
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&both, "ServiceAccount"),
        ["kubewasm", "kubewasm-other", "kubewasm-provisioner"]
    );
    assert!(
        names(&both, "ClusterRole").contains(&"kubewasm-system:kubewasm:provisioner".to_string())
    );
    assert!(names(&both, "ClusterRole").contains(&"kubewasm-system:kubewasm:other".to_string()));
    assert!(!names(&both, "ClusterRole").contains(&"kubewasm-system:kubewasm".to_string()));
    // Every role of `a` alone is in the rendering of both, unchanged.
    for o in alone.iter().filter(|o| o["kind"] != "ServiceAccount") {
        assert!(both.contains(o), "{o:#}");
    }
    // The host may impersonate only `a`'s account through `a`'s role.
    let role = find(&alone, "Role", Some("kubewasm-system"));
    assert!(
        role["metadata"]["name"] == "kubewasm:provisioner",
        "{role:#}"
    );
    let impersonate = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verbs"] == serde_json::json!(["impersonate"]))
        .unwrap();
    assert_eq!(
        impersonate["resourceNames"],
        serde_json::json!(["kubewasm-provisioner"])
    );
}

/// The host asks whether it may do what it needs (SelfSubjectAccessReviews): its
/// ClusterRole says so beside discovery; a plugin's role does not; a namespace-only setup
/// has no ClusterRole and relies on the default `system:basic-user` binding.
#[test]
fn the_host_may_review_its_own_access_and_plugins_need_not() {
    let m = provisioner();
    let objs = render(&[&m], |r| Some(guess(r)), &RbacOptions::default());
    let host = objs
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "kubewasm-system:kubewasm")
        .expect("the host's ClusterRole");
    let rules = host["rules"].as_array().unwrap();
    assert!(rules.iter().any(is_self_review), "{host:#}");
    let review = rules.iter().find(|r| is_self_review(r)).unwrap();
    assert_eq!(review["verbs"], serde_json::json!(["create"]));
    for plugin in objs.iter().filter(|o| {
        o["kind"] == "ClusterRole" && o["metadata"]["name"] != "kubewasm-system:kubewasm"
    }) {
        assert!(
            !plugin["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(is_self_review),
            "{plugin:#}"
        );
    }
}

/// Approved reads land on the plugin's own account where they are approved: a Role per
/// namespace, the ClusterRole for what is cluster-wide or cluster-scoped; the form
/// without namespaces where the approved watches list; the host's reads unchanged.
#[test]
fn a_plugins_account_reads_where_its_approval_lets_it() {
    use crate::grant::{Approval, ApprovedRead, ApprovedWatch};
    let kind = |av: &str, k: &str| ResourceRef::Kind(TypeRef::new(av, k));
    let approval = Approval {
        mode: Default::default(),
        watches: vec![
            ApprovedWatch {
                resource: kind("v1", "ConfigMap"),
                namespaces: vec!["a".into()],
            },
            ApprovedWatch {
                resource: kind("v1", "Service"),
                namespaces: vec![],
            },
        ],
        grants: vec![],
        reads: vec![
            ApprovedRead {
                resource: kind("v1", "Secret"),
                namespaces: vec![],
            },
            ApprovedRead {
                resource: kind("v1", "Pod"),
                namespaces: vec!["b".into()],
            },
            ApprovedRead {
                resource: kind("v1", "Node"),
                namespaces: vec!["b".into()],
            },
        ],
    };
    let objs = render_approved(
        &[("p", &approval)],
        |r| Some(guess(r)),
        &RbacOptions {
            plugin_objects: false,
            ..RbacOptions::default()
        },
    );
    let role = |kind: &str, ns: Option<&str>| {
        perms(
            objs.iter()
                .find(|o| {
                    o["kind"] == kind
                        && o["metadata"]["name"] == "kubewasm-system:kubewasm-p"
                        && o["metadata"]["namespace"].as_str() == ns
                })
                .unwrap_or_else(|| panic!("no {kind} kubewasm-p in {ns:?}: {objs:#?}")),
        )
    };
    let read = set(&["get", "list", "watch"]);
    assert_eq!(
        role("Role", Some("a")),
        [
            (key("", "configmaps"), read.clone()),
            (key("", "secrets"), read.clone())
        ]
        .into()
    );
    assert_eq!(
        role("Role", Some("b")),
        [(key("", "pods"), read.clone())].into()
    );
    // Cluster-wide: the cluster-wide watch, and a cluster-scoped kind.
    assert_eq!(
        role("ClusterRole", None),
        [
            (key("", "nodes"), read.clone()),
            (key("", "services"), read.clone())
        ]
        .into()
    );
    // The same rules, listed for the host's access review.
    let rules = read_rules(&approval.read_scopes(), &|r| Some(guess(r)));
    let spelled: Vec<String> = rules
        .iter()
        .map(|r| format!("{} {}", r.resource, r.namespace.as_deref().unwrap_or("*")))
        .collect();
    assert_eq!(
        spelled,
        [
            "configmaps a",
            "nodes *",
            "pods b",
            "secrets a",
            "services *"
        ]
    );
}

/// `--metrics-secure`: the host may ask both reviews, and the reader's ClusterRole comes
/// with it, unbound (the operator binds the scraper); none of it without the option.
#[test]
fn secure_metrics_add_the_reviews_and_a_reader_role() {
    let m = provisioner();
    let off = render(&[&m], |r| Some(guess(r)), &RbacOptions::default());
    let host_off = perms(find(&off, "ClusterRole", None));
    assert!(!host_off.contains_key(&key("authentication.k8s.io", "tokenreviews")));
    assert!(
        !off.iter()
            .any(|o| o["metadata"]["name"] == "kubewasm-system:kubewasm-metrics-reader")
    );
    for per_plugin in [false, true] {
        let opts = RbacOptions {
            metrics_secure: true,
            host_roles_per_plugin: per_plugin,
            ..RbacOptions::default()
        };
        let on = render(&[&m], |r| Some(guess(r)), &opts);
        let host = perms(find(&on, "ClusterRole", None));
        assert_eq!(
            host.get(&key("authentication.k8s.io", "tokenreviews")),
            Some(&set(&["create"]))
        );
        assert_eq!(
            host.get(&key("authorization.k8s.io", "subjectaccessreviews")),
            Some(&set(&["create"]))
        );
        let readers: Vec<&Value> = on
            .iter()
            .filter(|o| o["metadata"]["name"] == "kubewasm-system:kubewasm-metrics-reader")
            .collect();
        assert_eq!(readers.len(), 1, "one reader role: {on:#?}");
        assert_eq!(readers[0]["kind"], "ClusterRole");
        assert_eq!(
            readers[0]["rules"],
            json!([{"nonResourceURLs": ["/metrics", "/status"], "verbs": ["get"]}])
        );
        assert!(
            !on.iter()
                .any(|o| o["roleRef"]["name"] == "kubewasm-system:kubewasm-metrics-reader"),
            "not bound: whom to bind is the operator's choice"
        );
    }
}

/// `asked` confined to `namespace` ([`crate::tenant::confine_approval`]), as `approve
/// --namespace` does.
fn confine(
    asked: &crate::grant::Approval,
    namespace: &str,
    resolve: crate::tenant::Resolve<'_>,
) -> Result<crate::grant::Approval, crate::tenant::Confinement> {
    let mut a = asked.clone();
    crate::tenant::confine_approval(namespace, &mut a, resolve).map(|()| a)
}

/// A team's plugin: every watch, read and grant bound to its namespace; a cluster-scoped
/// kind or another namespace refused, naming the watch, read or grant and the reason.
#[test]
fn confine_binds_to_the_namespace_and_refuses_what_reaches_out() {
    use crate::grant::Approval;
    let resolve = |r: &ResourceRef| Some(guess(r));
    let mut m = provisioner();
    m.grants[1].namespaces = vec![];
    m.reads = vec![crate::manifest::Read::whole(ResourceRef::Kind(
        TypeRef::new("v1", "Secret"),
    ))];
    let bound = confine(&Approval::asked_by(&m), "team-a", &resolve).expect("confined");
    let here = vec!["team-a".to_string()];
    assert!(bound.watches.iter().all(|w| w.namespaces == here));
    assert!(bound.reads.iter().all(|r| r.namespaces == here));
    assert!(bound.grants.iter().all(|g| g.namespaces == here));
    assert_eq!(bound.grants.len(), m.grants.len());

    let mut elsewhere = m.clone();
    elsewhere.grants[1].namespaces = vec!["team-b".into()];
    let e = confine(&Approval::asked_by(&elsewhere), "team-a", &resolve).unwrap_err();
    assert_eq!(e.reason, crate::tenant::OUTSIDE_NAMESPACE);
    assert!(
        e.message.contains(" on Service in namespace \"team-b\""),
        "{e}"
    );

    let mut watch_elsewhere = m.clone();
    watch_elsewhere.watches[0].namespace = Some("team-b".into());
    let e = confine(&Approval::asked_by(&watch_elsewhere), "team-a", &resolve).unwrap_err();
    assert_eq!(e.reason, crate::tenant::OUTSIDE_NAMESPACE);
    assert!(e.message.starts_with("watch "), "{e}");

    let mut cluster = m.clone();
    cluster
        .grants
        .push(grant(&[""], &["Namespace"], &[], &[Verb::Create]));
    let e = confine(&Approval::asked_by(&cluster), "team-a", &resolve).unwrap_err();
    assert_eq!(e.reason, crate::tenant::CLUSTER_SCOPED_KIND);
    assert!(
        e.message
            .starts_with("grant on Namespace: it is cluster-scoped"),
        "{e}"
    );

    let mut reads_nodes = m.clone();
    reads_nodes.reads = vec![crate::manifest::Read::whole(ResourceRef::Kind(
        TypeRef::new("v1", "Node"),
    ))];
    let e = confine(&Approval::asked_by(&reads_nodes), "team-a", &resolve).unwrap_err();
    assert_eq!(e.reason, crate::tenant::CLUSTER_SCOPED_KIND);
    assert!(e.message.starts_with("read "), "{e}");

    // What discovery says wins over the guess: a CRD the cluster serves cluster-scoped.
    let cluster_sites = |r: &ResourceRef| {
        let mut k = guess(r);
        k.namespaced = k.kind != "ContentSite";
        Some(k)
    };
    let e = confine(&Approval::asked_by(&m), "team-a", &cluster_sites).unwrap_err();
    assert_eq!(e.reason, crate::tenant::CLUSTER_SCOPED_KIND);
}

/// A team's RBAC: everything in its namespace; the plugin's Role exactly its reads and
/// grants there; the host's Role its reads, impersonating the plugin's account and its
/// pull secret, by name; no cluster-scoped object.
#[test]
fn render_tenant_puts_everything_in_the_namespace() {
    use crate::grant::Approval;
    let resolve = |r: &ResourceRef| Some(guess(r));
    let bound = confine(
        &Approval::asked_by(&provisioner_in_one_namespace()),
        "team-a",
        &resolve,
    )
    .expect("confined");
    let host = HostAccount {
        namespace: "kubewasm-system".into(),
        name: "kubewasm".into(),
    };
    let out = render_tenant(
        "provisioner",
        "team-a",
        &bound,
        &resolve,
        &host,
        Some("regcred"),
    );
    let kinds: Vec<(&str, &str)> = out
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("ServiceAccount", "kubewasm-provisioner"),
            ("Role", "kubewasm-provisioner"),
            ("RoleBinding", "kubewasm-provisioner"),
            ("Role", "kubewasm-host-provisioner"),
            ("RoleBinding", "kubewasm-host-provisioner"),
        ]
    );
    assert!(out.iter().all(|o| o["metadata"]["namespace"] == "team-a"));
    let own = perms(&out[1]);
    let expected: BTreeMap<(String, String), BTreeSet<String>> = [
        (
            key("sites.kubewasm.dev", "contentsites"),
            set(&["get", "list", "watch"]),
        ),
        (
            key("sites.kubewasm.dev", "contentsites/status"),
            set(&["patch"]),
        ),
        (
            key("sites.kubewasm.dev", "contentsites/finalizers"),
            set(&["update"]),
        ),
        (key("mongodb.com", "mongodbs"), set(&["create", "patch"])),
        (key("", "services"), set(&["create", "patch", "delete"])),
        (key("", "secrets"), set(&["get", "list", "watch"])),
    ]
    .into_iter()
    .collect();
    assert_eq!(own, expected);
    assert_eq!(
        out[2]["subjects"],
        json!([{"kind": "ServiceAccount",
        "name": "kubewasm-provisioner", "namespace": "team-a"}])
    );
    let host_rules = out[3]["rules"].as_array().unwrap();
    assert_eq!(
        host_rules,
        &vec![
            json!({"apiGroups": [""], "resources": ["secrets"],
                   "verbs": ["get", "list", "watch"]}),
            json!({"apiGroups": ["sites.kubewasm.dev"], "resources": ["contentsites"],
                   "verbs": ["get", "list", "watch"]}),
            json!({"apiGroups": [""], "resources": ["serviceaccounts"],
                   "resourceNames": ["kubewasm-provisioner"], "verbs": ["impersonate"]}),
            json!({"apiGroups": [""], "resources": ["secrets"],
                   "resourceNames": ["regcred"], "verbs": ["get"]}),
        ]
    );
    assert_eq!(
        out[4]["subjects"],
        json!([{"kind": "ServiceAccount",
        "name": "kubewasm", "namespace": "kubewasm-system"}])
    );
}

/// The provisioner with every grant in no namespace: a team's plugin's natural form.
fn provisioner_in_one_namespace() -> Manifest {
    let mut m = provisioner();
    for g in &mut m.grants {
        g.namespaces.clear();
    }
    m
}

/// `rbac --tenants`: the host's cluster part (NamespacedPlugins read cluster-wide, their
/// status, Events) and the team's ClusterRole.
#[test]
fn tenant_cluster_is_the_hosts_part_and_the_teams_role() {
    let out = tenant_cluster(&RbacOptions::default());
    let host = find(&out, "ClusterRole", None);
    assert_eq!(host["metadata"]["name"], "kubewasm-system:kubewasm-tenants");
    let p = perms(host);
    assert_eq!(
        p.get(&key("kubewasm.dev", "namespacedplugins")),
        Some(&set(&["get", "list", "watch"]))
    );
    assert_eq!(
        p.get(&key("kubewasm.dev", "namespacedplugins/status")),
        Some(&set(&["patch"]))
    );
    assert_eq!(p.get(&key("", "events")), Some(&set(&["create", "patch"])));
    assert_eq!(p.len(), 4, "{host}");
    let team = out
        .iter()
        .find(|o| o["metadata"]["name"] == "kubewasm-tenant")
        .expect("the team's ClusterRole");
    let p = perms(team);
    let crud = set(&[
        "get", "list", "watch", "create", "update", "patch", "delete",
    ]);
    for r in [
        key("kubewasm.dev", "namespacedplugins"),
        key("", "serviceaccounts"),
        key("rbac.authorization.k8s.io", "roles"),
        key("rbac.authorization.k8s.io", "rolebindings"),
    ] {
        assert_eq!(p.get(&r), Some(&crud), "{r:?}");
    }
}
