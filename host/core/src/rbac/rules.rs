//! The permissions a set of manifests needs, collected per scope before they are rendered
//! as roles: what each grant verb costs in RBAC verbs, and where (see the module docs of
//! [`super`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::RbacOptions;
use crate::grant::{ReadScopes, ReadWhere};
use crate::kind::{KindInfo, grant_ref, guess, guess_plural};
use crate::manifest::{Manifest, Verb};
use crate::resource::ResourceRef;

/// Canonical order of verbs in a rule.
const VERB_ORDER: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

pub(super) const READ: &[&str] = &["get", "list", "watch"];

fn verb_rank(v: &str) -> usize {
    VERB_ORDER
        .iter()
        .position(|x| *x == v)
        .unwrap_or(VERB_ORDER.len())
}

/// Where a rule is granted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    Cluster,
    Namespace(String),
}

impl Scope {
    /// Where something that applies to every namespace is granted: the ClusterRole, or
    /// with [`RbacOptions::namespace`] a Role there for what is namespaced.
    pub(super) fn everywhere(opts: &RbacOptions, namespaced: bool) -> Scope {
        match (&opts.namespace, namespaced) {
            (Some(ns), true) => Scope::Namespace(ns.clone()),
            _ => Scope::Cluster,
        }
    }
}

/// Rules being collected: per scope, per (group, resource), the verbs.
#[derive(Default)]
pub(super) struct Rules {
    pub(super) by_scope: BTreeMap<Scope, BTreeMap<(String, String), BTreeSet<&'static str>>>,
}

impl Rules {
    pub(super) fn add(
        &mut self,
        scope: &Scope,
        group: &str,
        resource: &str,
        verbs: &[&'static str],
    ) {
        self.by_scope
            .entry(scope.clone())
            .or_default()
            .entry((group.to_string(), resource.to_string()))
            .or_default()
            .extend(verbs.iter().copied());
    }

    /// What was guessed among the resources of one scope.
    pub(super) fn guessed_in(&self, scope: &Scope, guessed: &Guessed) -> Vec<String> {
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
    pub(super) fn rules(&self, scope: &Scope) -> Vec<Value> {
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

/// One plugin's permissions: what `grant` adds for each grant, and the `<plural>/finalizers`
/// rule `owned-by-trigger` needs on the watched kinds of a plugin that may create.
pub(super) fn add_grants(
    m: &Manifest,
    rules: &mut Rules,
    guessed: &mut Guessed,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) {
    let everywhere = |namespaced: bool| Scope::everywhere(opts, namespaced);
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
pub(super) type Guessed = BTreeMap<(String, String), String>;

pub(super) fn resolve_or_guess(
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

/// Where a plugin's ServiceAccount must be allowed to read a resource (`get`, `list`,
/// `watch`) for the host to serve it what its approval lets it read: one namespace each
/// (Some), or cluster-wide (None) for a cluster-scoped kind or a read approved everywhere.
pub(super) fn read_places(k: &KindInfo, w: &ReadWhere) -> Vec<Option<String>> {
    match (k.namespaced, w) {
        (false, _) | (true, ReadWhere::ClusterWide) => vec![None],
        (true, ReadWhere::Namespaces(ns)) => ns.iter().cloned().map(Some).collect(),
    }
}

/// One resource a plugin's own ServiceAccount must be allowed to `get`, `list` and
/// `watch`, and where: what [`read_rules`] lists, and what the roles of
/// [`render`](super::render) give it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadRule {
    /// The API group (`""` core).
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The namespace; None: cluster-wide.
    pub namespace: Option<String>,
    /// Whether the resource is namespaced (a cluster-wide rule of a namespaced kind may
    /// be narrowed to the namespaces a host watches).
    pub namespaced: bool,
}

/// The read rules a plugin's ServiceAccount needs for `scopes` (what its approval lets it
/// read, [`crate::grant::Approval::read_scopes`]), each kind resolved by `resolve` or
/// [`guess`]ed: the one derivation the host's access review and `kubewasm rbac` share.
pub fn read_rules(
    scopes: &ReadScopes,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
) -> Vec<ReadRule> {
    let mut out = BTreeSet::new();
    for (r, w) in scopes {
        let k = resolve(r).unwrap_or_else(|| guess(r));
        for place in read_places(&k, w) {
            out.insert(ReadRule {
                group: k.group.clone(),
                resource: k.plural.clone(),
                namespace: place,
                namespaced: k.namespaced,
            });
        }
    }
    out.into_iter().collect()
}

/// A plugin's own read rules (see [`read_rules`]) into `rules`: a Role per namespace,
/// the ClusterRole (or with [`RbacOptions::namespace`] its Role) for what is cluster-wide.
pub(super) fn add_reads(
    scopes: &ReadScopes,
    rules: &mut Rules,
    guessed: &mut Guessed,
    resolve: &dyn Fn(&ResourceRef) -> Option<KindInfo>,
    opts: &RbacOptions,
) {
    for (r, w) in scopes {
        let k = resolve_or_guess(r, resolve, guessed);
        for place in read_places(&k, w) {
            let scope = match place {
                Some(ns) => Scope::Namespace(ns),
                None => Scope::everywhere(opts, k.namespaced),
            };
            rules.add(&scope, &k.group, &k.plural, READ);
        }
    }
}
