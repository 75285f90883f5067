//! A team's plugin (a `NamespacedPlugin`) confined to its namespace: every watch, read and
//! grant bound to it, and refused when it names another namespace ([`OUTSIDE_NAMESPACE`])
//! or a cluster-scoped kind ([`CLUSTER_SCOPED_KIND`]). One rule for the three places that
//! apply it: the team's approval (`spec.permissions`) and its module's `describe()` answer
//! when `kubewasm run` loads it, and what `kubewasm approve --namespace` prints.
//!
//! Whether a kind is namespaced comes from a resolver (discovery, when the caller asked
//! it) and else from the offline table ([`guess`]): a kind neither knows is taken as
//! namespaced, since it is neither watched nor written while no cluster serves it.

use std::fmt;

use crate::grant::Approval;
use crate::kind::{KindInfo, grant_ref, guess};
use crate::manifest::{Grant, Manifest};
use crate::resource::ResourceRef;

/// Reason: a watch, read or grant names a cluster-scoped kind.
pub const CLUSTER_SCOPED_KIND: &str = "ClusterScopedKind";
/// Reason: a watch, read or grant names a namespace other than the plugin's own.
pub const OUTSIDE_NAMESPACE: &str = "OutsideNamespace";

/// What says whether a kind is namespaced (None: ask the offline table).
pub type Resolve<'a> = &'a dyn Fn(&ResourceRef) -> Option<KindInfo>;

/// The offline resolver: the built-in kinds' table only.
pub fn offline(_: &ResourceRef) -> Option<KindInfo> {
    None
}

/// Why a team's plugin cannot be confined to its namespace: the reason (as the object's
/// status spells it) and the watch, read or grant at fault, where it would reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// [`CLUSTER_SCOPED_KIND`] or [`OUTSIDE_NAMESPACE`].
    pub reason: &'static str,
    /// What is asked, and where it may act instead.
    pub message: String,
}

impl fmt::Display for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// Where a team's plugin is confined, and what says which kinds are namespaced.
struct Here<'a> {
    namespace: &'a str,
    resolve: Resolve<'a>,
}

impl Here<'_> {
    /// Bind `namespaces` (of `what`) to the namespace: empty means it; anything else must
    /// be exactly it (`*` is every namespace, so outside).
    fn bind(&self, namespaces: &mut Vec<String>, what: &str) -> Result<(), Confinement> {
        let namespace = self.namespace;
        if let Some(other) = namespaces.iter().find(|n| *n != namespace) {
            return Err(Confinement {
                reason: OUTSIDE_NAMESPACE,
                message: format!(
                    "{what} in namespace {other:?}: a NamespacedPlugin in {namespace} acts only in {namespace}"
                ),
            });
        }
        *namespaces = vec![namespace.to_string()];
        Ok(())
    }

    /// Refuse `r` (asked for as `what`) when the resolver, else the offline table, says
    /// it is cluster-scoped.
    fn kind(&self, what: &str, r: &ResourceRef) -> Result<(), Confinement> {
        self.kind_shown(what, r, &r.to_string())
    }

    /// [`Here::kind`], showing `r` as `shown`.
    fn kind_shown(&self, what: &str, r: &ResourceRef, shown: &str) -> Result<(), Confinement> {
        if (self.resolve)(r).unwrap_or_else(|| guess(r)).namespaced {
            return Ok(());
        }
        let namespace = self.namespace;
        Err(Confinement {
            reason: CLUSTER_SCOPED_KIND,
            message: format!(
                "{what} {shown}: it is cluster-scoped, and a NamespacedPlugin in {namespace} acts only on namespaced kinds in {namespace}"
            ),
        })
    }

    /// Bind a grant to the namespace and refuse it when it names a cluster-scoped kind. A
    /// `*` kind or group stays: bound to the namespace, it covers only namespaced kinds
    /// there (admission finds no namespaced grant covering a cluster-scoped object).
    fn grant(&self, g: &mut Grant) -> Result<(), Confinement> {
        let verbs: Vec<&str> = g.verbs.iter().map(|v| v.as_str()).collect();
        let what = format!("grant of {} on {}", verbs.join(","), g.kinds.join(","));
        self.bind(&mut g.namespaces, &what)?;
        for group in g.api_groups.iter().filter(|g| *g != "*") {
            for kind in g.kinds.iter().filter(|k| *k != "*") {
                self.kind_shown("grant on", &grant_ref(group, kind), kind)?;
            }
        }
        Ok(())
    }
}

/// Keep the first entry of each resource (`of` says an entry's).
fn once<T>(entries: &mut Vec<T>, of: impl Fn(&T) -> &ResourceRef) {
    let mut seen: Vec<ResourceRef> = Vec::new();
    entries.retain(|e| {
        let first = !seen.contains(of(e));
        seen.push(of(e).clone());
        first
    });
}

/// Confine a team's approval (its `spec.permissions`, or what `approve --namespace`
/// prints) to `namespace`: every watch, read and grant bound to it (none listed means the
/// plugin's namespace), each resource once; refused at the first that names another
/// namespace or a cluster-scoped kind.
pub fn confine_approval(
    namespace: &str,
    a: &mut Approval,
    resolve: Resolve<'_>,
) -> Result<(), Confinement> {
    let here = Here { namespace, resolve };
    for w in &mut a.watches {
        here.bind(&mut w.namespaces, &format!("watch {}", w.resource))?;
        here.kind("watch", &w.resource)?;
    }
    for r in &mut a.reads {
        here.bind(&mut r.namespaces, &format!("read {}", r.resource))?;
        here.kind("read", &r.resource)?;
    }
    for g in &mut a.grants {
        here.grant(g)?;
    }
    // Bound to one namespace, two entries of one resource say the same.
    once(&mut a.watches, |w| &w.resource);
    once(&mut a.reads, |r| &r.resource);
    Ok(())
}

/// Confine what a team's module asks for (its `describe()` answer) to `namespace`, before
/// it is checked against its confined approval: a watch without a namespace is bound to
/// it, and so is a grant without namespaces; another namespace or a cluster-scoped kind
/// is refused.
pub fn confine_manifest(
    namespace: &str,
    m: &mut Manifest,
    resolve: Resolve<'_>,
) -> Result<(), Confinement> {
    let here = Here { namespace, resolve };
    for w in &mut m.watches {
        let what = format!("watch {:?} of {}", w.id, w.resource);
        let mut listed: Vec<String> = w.namespace.iter().cloned().collect();
        here.bind(&mut listed, &what)?;
        w.namespace = Some(namespace.to_string());
        here.kind("watch", &w.resource)?;
    }
    for r in &m.reads {
        here.kind("read", &r.resource)?;
    }
    for g in &mut m.grants {
        here.grant(g)?;
    }
    Ok(())
}

/// Every kind [`confine_approval`] asks its resolver about for `a`: what a caller resolves
/// (through discovery) before confining.
pub fn kinds_asked(a: &Approval) -> Vec<ResourceRef> {
    let mut asked: Vec<ResourceRef> = a.watches.iter().map(|w| w.resource.clone()).collect();
    asked.extend(a.reads.iter().map(|r| r.resource.clone()));
    for g in &a.grants {
        for group in g.api_groups.iter().filter(|g| *g != "*") {
            asked.extend(
                g.kinds
                    .iter()
                    .filter(|k| *k != "*")
                    .map(|kind| grant_ref(group, kind)),
            );
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::ApprovedWatch;
    use crate::manifest::Verb;
    use crate::resource::TypeRef;

    fn approval(watch_ns: &[&str], kind: &str) -> Approval {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Approval {
            watches: vec![ApprovedWatch {
                resource: ResourceRef::Kind(TypeRef::new("v1", kind)),
                namespaces: s(watch_ns),
            }],
            grants: vec![Grant {
                api_groups: s(&[""]),
                kinds: s(&["ConfigMap"]),
                namespaces: vec![],
                verbs: vec![Verb::Create],
                allow_force: false,
                finalizers: vec![],
            }],
            ..Approval::default()
        }
    }

    #[test]
    fn a_tenant_approval_is_bound_to_its_namespace_and_refused_outside() {
        let mut a = approval(&[], "ConfigMap");
        confine_approval("team-a", &mut a, &offline).unwrap();
        assert_eq!(a.watches[0].namespaces, ["team-a"]);
        assert_eq!(a.grants[0].namespaces, ["team-a"]);
        let mut own = approval(&["team-a"], "ConfigMap");
        assert!(confine_approval("team-a", &mut own, &offline).is_ok());
        for ns in [&["team-b"][..], &["*"], &["team-a", "team-b"]] {
            let e =
                confine_approval("team-a", &mut approval(ns, "ConfigMap"), &offline).unwrap_err();
            assert_eq!(e.reason, OUTSIDE_NAMESPACE, "{ns:?}: {}", e.message);
        }
        let e = confine_approval("team-a", &mut approval(&[], "Namespace"), &offline).unwrap_err();
        assert_eq!(e.reason, CLUSTER_SCOPED_KIND, "{}", e.message);
        let mut node = approval(&[], "ConfigMap");
        node.grants[0].kinds = vec!["Node".into()];
        let e = confine_approval("team-a", &mut node, &offline).unwrap_err();
        assert_eq!(e.reason, CLUSTER_SCOPED_KIND, "{}", e.message);
    }

    #[test]
    fn a_tenant_manifest_is_bound_to_its_namespace() {
        let mut m = approval(&[], "ConfigMap").to_manifest("p");
        confine_manifest("team-a", &mut m, &offline).unwrap();
        assert_eq!(m.watches[0].namespace.as_deref(), Some("team-a"));
        assert_eq!(m.grants[0].namespaces, ["team-a"]);
        let mut other = approval(&["team-b"], "ConfigMap").to_manifest("p");
        let e = confine_manifest("team-a", &mut other, &offline).unwrap_err();
        assert_eq!(e.reason, OUTSIDE_NAMESPACE, "{}", e.message);
        let mut ns = approval(&[], "ConfigMap").to_manifest("p");
        ns.grants[0].kinds = vec!["Namespace".into()];
        ns.grants[0].namespaces = vec!["team-a".into()];
        let e = confine_manifest("team-a", &mut ns, &offline).unwrap_err();
        assert_eq!(e.reason, CLUSTER_SCOPED_KIND, "{}", e.message);
        let named = Manifest {
            name: "team-a/p".into(),
            ..m
        };
        assert_eq!(named.field_manager(), "kubewasm-p");
    }

    /// What the resolver says wins over the table: a custom kind served cluster-scoped is
    /// refused, in a watch as in a grant; a kind neither knows is taken as namespaced.
    #[test]
    fn the_resolver_says_which_kinds_are_cluster_scoped() {
        let cluster_sites = |r: &ResourceRef| {
            let mut k = guess(r);
            k.namespaced = k.kind != "Site";
            Some(k)
        };
        let mut a = approval(&[], "ConfigMap");
        a.watches[0].resource = ResourceRef::Kind(TypeRef::new("example.com/v1", "Site"));
        assert!(confine_approval("team-a", &mut a.clone(), &offline).is_ok());
        let e = confine_approval("team-a", &mut a, &cluster_sites).unwrap_err();
        assert_eq!(e.reason, CLUSTER_SCOPED_KIND);
        assert_eq!(
            e.message,
            "watch example.com/v1/Site: it is cluster-scoped, and a NamespacedPlugin in team-a acts only on namespaced kinds in team-a"
        );
        let mut g = approval(&[], "ConfigMap");
        g.grants[0].api_groups = vec!["example.com".into()];
        g.grants[0].kinds = vec!["Site".into()];
        assert!(kinds_asked(&g).contains(&grant_ref("example.com", "Site")));
        let e = confine_approval("team-a", &mut g, &cluster_sites).unwrap_err();
        assert!(e.message.starts_with("grant on Site: "), "{e}");
        // Two entries of one resource, bound to the namespace, are one.
        let mut twice = approval(&[], "ConfigMap");
        twice.watches.push(twice.watches[0].clone());
        confine_approval("team-a", &mut twice, &offline).unwrap();
        assert_eq!(twice.watches.len(), 1);
    }
}
