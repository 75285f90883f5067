//! The grant check: a plugin may only write what its manifest declared, and its manifest
//! may only declare what the operator approved ([`check_approval`]).

use crate::manifest::{Grant, Manifest, Verb};
use crate::resource::{ResourceRef, split_api_version};

/// What an intent will touch, once its kind and namespace are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access<'a> {
    /// `group/version`.
    pub api_version: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace, None for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    /// The verb.
    pub verb: Verb,
    /// Whether the intent asks to force.
    pub force: bool,
}

fn covers(grant: &Grant, a: &Access<'_>) -> bool {
    let group = split_api_version(a.api_version).0;
    let any_or = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
    any_or(&grant.api_groups, group)
        && any_or(&grant.kinds, a.kind)
        && grant.verbs.contains(&a.verb)
        && (grant.namespaces.is_empty()
            || a.namespace
                .is_some_and(|ns| grant.namespaces.iter().any(|g| g == "*" || g == ns)))
}

/// Why an access was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// No grant covers the group, kind, namespace and verb.
    #[error("no grant allows {verb} on {api_version} {kind} {}", where_(.namespace))]
    NotGranted {
        /// The verb.
        verb: &'static str,
        /// `group/version`.
        api_version: String,
        /// Kind.
        kind: String,
        /// Namespace (None: cluster-scoped).
        namespace: Option<String>,
    },
    /// A grant covers it, but none allows force.
    #[error("force on {api_version} {kind} {} needs a grant with allow-force", where_(.namespace))]
    ForceNotAllowed {
        /// `group/version`.
        api_version: String,
        /// Kind.
        kind: String,
        /// Namespace (None: cluster-scoped).
        namespace: Option<String>,
    },
}

fn where_(namespace: &Option<String>) -> String {
    namespace
        .as_ref()
        .map(|ns| format!("in namespace {ns}"))
        .unwrap_or_else(|| "(cluster-scoped)".into())
}

/// Allow or refuse, with the reason.
pub fn check(manifest: &Manifest, a: &Access<'_>) -> Result<(), GrantError> {
    let matching: Vec<&Grant> = manifest.grants.iter().filter(|g| covers(g, a)).collect();
    if matching.is_empty() {
        return Err(GrantError::NotGranted {
            verb: a.verb.as_str(),
            api_version: a.api_version.to_string(),
            kind: a.kind.to_string(),
            namespace: a.namespace.map(str::to_string),
        });
    }
    if a.force && !matching.iter().any(|g| g.allow_force) {
        return Err(GrantError::ForceNotAllowed {
            api_version: a.api_version.to_string(),
            kind: a.kind.to_string(),
            namespace: a.namespace.map(str::to_string),
        });
    }
    Ok(())
}

/// Whether a grant covering `a` allows finalizer `name` on the object (a grant's
/// `finalizers` names the finalizers it allows; none by default).
pub(crate) fn finalizer_granted(manifest: &Manifest, a: &Access<'_>, name: &str) -> bool {
    manifest
        .grants
        .iter()
        .filter(|g| covers(g, a))
        .any(|g| g.finalizers.iter().any(|f| f == name))
}

/// What the operator approved for one plugin, outside its `.wasm` (`spec.permissions` of
/// its Plugin object, see [`crate::plugin_object`]): the watches, grants and extra reads
/// the plugin may hold, and whether its writes take effect ([`Mode`]). A manifest asking
/// for more is refused at load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approval {
    /// Whether the plugin's writes are applied or only previewed (`spec.mode`).
    pub mode: Mode,
    /// Watches the plugin may declare.
    pub watches: Vec<ApprovedWatch>,
    /// Grants the plugin may ask for (each requested grant must be covered by these).
    pub grants: Vec<Grant>,
    /// Extra kinds (beyond its watches) the plugin may read from the host's caches, and
    /// where.
    pub reads: Vec<ApprovedRead>,
}

/// Whether a plugin's admitted writes take effect: `spec.mode` of its Plugin (or of its
/// entry in `--approvals`), the operator's choice like the permissions.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize,
)]
pub enum Mode {
    /// Written (the default).
    #[default]
    Enforce,
    /// Sent with `dryRun=All`: the API server validates each write as the plugin's
    /// identity and stores nothing; the host reports what would change.
    DryRun,
}

impl Mode {
    /// As `spec.mode` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "Enforce",
            Mode::DryRun => "DryRun",
        }
    }
}

/// One approved read: a resource (compared as written, like a watch), in some namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedRead {
    /// What may be read.
    pub resource: ResourceRef,
    /// Where: `*` is every namespace (a cluster-wide read, approved explicitly); empty (the
    /// form before namespaces) is where the approved watches are, the namespaces they list:
    /// an approved cluster-wide watch does not make a read cluster-wide.
    pub namespaces: Vec<String>,
}

/// Where a plugin may read one resource: what its ServiceAccount must be allowed to
/// `get`, `list` and `watch`, and what the host's view of its caches answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReadWhere {
    /// Every namespace, and cluster-wide lists.
    ClusterWide,
    /// Only these namespaces (empty: none; a cluster-scoped kind is read cluster-wide
    /// wherever it is approved).
    Namespaces(std::collections::BTreeSet<String>),
}

impl ReadWhere {
    /// Both: the union.
    fn widen(&mut self, other: &ReadWhere) {
        match (&mut *self, other) {
            (ReadWhere::ClusterWide, _) => {}
            (_, ReadWhere::ClusterWide) => *self = ReadWhere::ClusterWide,
            (ReadWhere::Namespaces(a), ReadWhere::Namespaces(b)) => a.extend(b.iter().cloned()),
        }
    }

    /// From an approved list of namespaces (`*`: every one).
    fn listed(namespaces: &[String]) -> ReadWhere {
        if namespaces.iter().any(|n| n == "*") {
            ReadWhere::ClusterWide
        } else {
            ReadWhere::Namespaces(namespaces.iter().cloned().collect())
        }
    }
}

/// Where an approved plugin may read each resource it may watch or read (as the approval
/// spells it).
pub type ReadScopes = std::collections::BTreeMap<ResourceRef, ReadWhere>;

/// One approved watch: a resource, as the plugin names it (a kind or a resource
/// argument, compared as written: `kubewasm approve` prints the plugin's own spelling), in
/// some namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedWatch {
    /// What may be watched.
    pub resource: ResourceRef,
    /// Where; empty: every namespace, and cluster-wide watches.
    pub namespaces: Vec<String>,
}

impl ApprovedWatch {
    fn covers(&self, w: &crate::manifest::Watch) -> bool {
        self.resource == w.resource
            && (self.namespaces.is_empty()
                || w.namespace
                    .as_deref()
                    .is_some_and(|ns| entry_covered(&self.namespaces, ns)))
    }
}

impl Approval {
    /// The approval of exactly what `manifest` asks for (`kubewasm test` without an
    /// operator's approval): each watch in its namespace (everywhere without one), each
    /// read where the watches are, its grants.
    pub fn asked_by(manifest: &Manifest) -> Approval {
        Approval {
            mode: Default::default(),
            watches: manifest
                .watches
                .iter()
                .map(|w| ApprovedWatch {
                    resource: w.resource.clone(),
                    namespaces: w.namespace.iter().cloned().collect(),
                })
                .collect(),
            grants: manifest.grants.clone(),
            reads: manifest
                .reads
                .iter()
                .map(|r| ApprovedRead {
                    resource: r.resource.clone(),
                    namespaces: Vec::new(),
                })
                .collect(),
        }
    }

    /// Where the approval lets the plugin read: each approved watch's resource where it
    /// is approved (no namespaces: cluster-wide), each approved read where it lists
    /// (`*`: cluster-wide; none: the namespaces the approved watches list). The union
    /// when a resource is approved more than once. Never wider than what is approved for
    /// that resource: a cluster-wide watch of one kind widens no read of another.
    pub fn read_scopes(&self) -> ReadScopes {
        let mut scopes = ReadScopes::new();
        let mut add = |r: &ResourceRef, w: ReadWhere| match scopes.get_mut(r) {
            Some(have) => have.widen(&w),
            None => {
                scopes.insert(r.clone(), w);
            }
        };
        let mut watched = std::collections::BTreeSet::new();
        for w in &self.watches {
            if w.namespaces.is_empty() {
                add(&w.resource, ReadWhere::ClusterWide);
            } else {
                add(&w.resource, ReadWhere::listed(&w.namespaces));
                watched.extend(w.namespaces.iter().filter(|n| *n != "*").cloned());
            }
        }
        for r in &self.reads {
            if r.namespaces.is_empty() {
                add(&r.resource, ReadWhere::Namespaces(watched.clone()));
            } else {
                add(&r.resource, ReadWhere::listed(&r.namespaces));
            }
        }
        scopes
    }

    /// A manifest holding exactly what is approved (named `name`, no version): what the
    /// RBAC of an approved plugin derives from, whatever version of it runs. One watch per
    /// approved watch and namespace (ids `approved-N`), no selectors.
    pub fn to_manifest(&self, name: &str) -> Manifest {
        let mut watches = Vec::new();
        for w in &self.watches {
            let namespaces: Vec<Option<String>> = if w.namespaces.is_empty() {
                vec![None]
            } else {
                w.namespaces.iter().cloned().map(Some).collect()
            };
            for namespace in namespaces {
                watches.push(crate::manifest::Watch {
                    id: format!("approved-{}", watches.len()),
                    resource: w.resource.clone(),
                    namespace,
                    label_selector: None,
                    field_selector: None,
                    fields: crate::projection::Projection::whole(),
                });
            }
        }
        Manifest {
            name: name.to_string(),
            version: String::new(),
            watches,
            grants: self.grants.clone(),
            reads: self
                .reads
                .iter()
                .map(|r| crate::manifest::Read::whole(r.resource.clone()))
                .collect(),
        }
    }
}

/// Whether a plugin already serving under the manifest `enforced` (as [`approve`] left
/// it: finalizers filled in) may go on serving under `approval`: everything it asks for
/// is still approved, with the same finalizers. A narrowed or deleted approval makes this
/// false, and the host unloads the plugin rather than leave it with its old rights.
pub fn still_fits(enforced: &Manifest, approval: Option<&Approval>) -> bool {
    let mut asked = enforced.clone();
    for g in &mut asked.grants {
        g.finalizers.clear();
    }
    approve(&mut asked, approval).is_ok() && asked.grants == enforced.grants
}

/// A manifest asks for more than the operator approved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe_excess(.plugin, .excess, *.approved))]
pub struct NotApproved {
    /// The plugin.
    pub plugin: String,
    /// Whether an approval was present at all (None: nothing approved).
    pub approved: bool,
    /// The rules asked for beyond the approval, one per entry, e.g.
    /// `create apps Deployment (all namespaces)` or `read v1/Secret`.
    pub excess: Vec<String>,
}

fn describe_excess(plugin: &str, excess: &[String], approved: bool) -> String {
    let hint = if approved {
        "widen spec.permissions of its Plugin object if this is intended"
    } else {
        "nothing is approved for it: `kubewasm approve FILE.wasm` prints a Plugin object \
         approving exactly what it asks for, to review and apply (in directory mode: to put \
         in the file or directory given to --approvals)"
    };
    format!(
        "plugin {plugin} asks for more than the operator approved: {}; {hint}",
        excess.join("; ")
    )
}

/// Whether one approved list entry covers one requested entry: `*` covers anything, a
/// requested `*` only by an approved `*`.
fn entry_covered(approved: &[String], wanted: &str) -> bool {
    approved.iter().any(|a| a == "*" || a == wanted)
}

/// Whether approved grant `a` covers the requested (group, kind, verb, force) in the
/// requested namespaces.
fn approved_covers(a: &Grant, group: &str, kind: &str, verb: Verb, g: &Grant) -> bool {
    entry_covered(&a.api_groups, group)
        && entry_covered(&a.kinds, kind)
        && a.verbs.contains(&verb)
        && (!g.allow_force || a.allow_force)
        && (a.namespaces.is_empty()
            || (!g.namespaces.is_empty()
                && g.namespaces
                    .iter()
                    .all(|ns| entry_covered(&a.namespaces, ns))))
}

fn describe_rule(group: &str, kind: &str, verb: Verb, g: &Grant) -> String {
    let group = if group.is_empty() { "core" } else { group };
    let scope = if g.namespaces.is_empty() {
        "all namespaces and cluster-scoped".to_string()
    } else {
        format!("in namespaces {}", g.namespaces.join(","))
    };
    let force = if g.allow_force { ", with force" } else { "" };
    format!("{} {group} {kind} ({scope}{force})", verb.as_str())
}

/// [`check_approval`], then give each requested grant the finalizers the operator approved
/// for all of it (a plugin never sets finalizers itself): the manifest the host enforces.
pub fn approve(manifest: &mut Manifest, approval: Option<&Approval>) -> Result<(), NotApproved> {
    check_approval(manifest, approval)?;
    let Some(a) = approval else {
        return Ok(());
    };
    for g in &mut manifest.grants {
        let mut allowed: Option<Vec<String>> = None;
        for group in &g.api_groups {
            for kind in &g.kinds {
                for verb in &g.verbs {
                    // Finalizers some approved grant covering this part of g allows.
                    let here: Vec<String> = a
                        .grants
                        .iter()
                        .filter(|ag| approved_covers(ag, group, kind, *verb, g))
                        .flat_map(|ag| ag.finalizers.iter().cloned())
                        .collect();
                    allowed = Some(match allowed {
                        None => here,
                        Some(prev) => prev.into_iter().filter(|f| here.contains(f)).collect(),
                    });
                }
            }
        }
        let mut allowed = allowed.unwrap_or_default();
        allowed.sort();
        allowed.dedup();
        g.finalizers = allowed;
    }
    Ok(())
}

/// Check the manifest's grants and reads against the operator's approval (None: nothing
/// approved, so only a plugin that writes and reads nothing beyond its watches loads).
/// The error lists every rule asked for beyond the approval.
pub fn check_approval(manifest: &Manifest, approval: Option<&Approval>) -> Result<(), NotApproved> {
    let empty = Approval::default();
    let a = approval.unwrap_or(&empty);
    let mut excess = Vec::new();
    for w in &manifest.watches {
        if !a.watches.iter().any(|aw| aw.covers(w)) {
            let scope = w
                .namespace
                .as_deref()
                .map(|ns| format!("in namespace {ns}"))
                .unwrap_or_else(|| "in all namespaces".into());
            excess.push(format!("watch {} {scope} (watch {:?})", w.resource, w.id));
        }
    }
    for g in &manifest.grants {
        for group in &g.api_groups {
            for kind in &g.kinds {
                for verb in &g.verbs {
                    if !a
                        .grants
                        .iter()
                        .any(|ag| approved_covers(ag, group, kind, *verb, g))
                    {
                        excess.push(describe_rule(group, kind, *verb, g));
                    }
                }
            }
        }
    }
    for r in manifest.reads.iter().map(|r| &r.resource) {
        if !a.reads.iter().any(|ar| ar.resource == *r) {
            excess.push(format!("read {r}"));
        }
    }
    if excess.is_empty() {
        Ok(())
    } else {
        Err(NotApproved {
            plugin: manifest.name.clone(),
            approved: approval.is_some(),
            excess,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(grants: Vec<Grant>) -> Manifest {
        Manifest {
            name: "p".into(),
            version: "1".into(),
            watches: vec![],
            grants,
            reads: vec![],
        }
    }

    fn grant(groups: &[&str], kinds: &[&str], ns: &[&str], verbs: &[Verb], force: bool) -> Grant {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        Grant {
            api_groups: s(groups),
            kinds: s(kinds),
            namespaces: s(ns),
            verbs: verbs.to_vec(),
            allow_force: force,
            finalizers: vec![],
        }
    }

    fn access<'a>(
        av: &'a str,
        kind: &'a str,
        ns: Option<&'a str>,
        verb: Verb,
        force: bool,
    ) -> Access<'a> {
        Access {
            api_version: av,
            kind,
            namespace: ns,
            verb,
            force,
        }
    }

    #[test]
    fn matches_group_kind_namespace_and_verb() {
        let m = manifest(vec![grant(
            &["mongodb.com"],
            &["MongoDB"],
            &["shop"],
            &[Verb::Create],
            false,
        )]);
        assert!(
            check(
                &m,
                &access(
                    "mongodb.com/v1",
                    "MongoDB",
                    Some("shop"),
                    Verb::Create,
                    false
                )
            )
            .is_ok()
        );
        for bad in [
            access(
                "mongodb.com/v1",
                "MongoDB",
                Some("other"),
                Verb::Create,
                false,
            ),
            access("mongodb.com/v1", "MongoDB", None, Verb::Create, false),
            access(
                "mongodb.com/v1",
                "MongoDB",
                Some("shop"),
                Verb::Delete,
                false,
            ),
            access("mongodb.com/v1", "Other", Some("shop"), Verb::Create, false),
            access("v1", "MongoDB", Some("shop"), Verb::Create, false),
        ] {
            let err = check(&m, &bad).unwrap_err();
            assert!(err.to_string().starts_with("no grant allows"), "{err}");
        }
    }

    #[test]
    fn core_group_and_wildcards() {
        let m = manifest(vec![grant(
            &[""],
            &["*"],
            &[],
            &[Verb::Patch, Verb::PatchStatus],
            false,
        )]);
        assert!(check(&m, &access("v1", "Service", Some("a"), Verb::Patch, false)).is_ok());
        assert!(
            check(
                &m,
                &access("v1", "Namespace", None, Verb::PatchStatus, false)
            )
            .is_ok()
        );
        assert!(
            check(
                &m,
                &access("apps/v1", "Deployment", Some("a"), Verb::Patch, false)
            )
            .is_err()
        );
    }

    #[test]
    fn force_needs_allow_force() {
        let m = manifest(vec![grant(&["*"], &["*"], &[], &[Verb::Create], false)]);
        let err = check(
            &m,
            &access("v1", "ConfigMap", Some("a"), Verb::Create, true),
        )
        .unwrap_err();
        assert!(matches!(err, GrantError::ForceNotAllowed { .. }), "{err}");
        let m = manifest(vec![grant(&["*"], &["*"], &[], &[Verb::Create], true)]);
        assert!(
            check(
                &m,
                &access("v1", "ConfigMap", Some("a"), Verb::Create, true)
            )
            .is_ok()
        );
    }

    #[test]
    fn approval_covers_requests_and_names_the_extra_rules() {
        let mut m = manifest(vec![
            grant(&["apps"], &["Deployment"], &["web"], &[Verb::Patch], false),
            grant(
                &[""],
                &["Service"],
                &[],
                &[Verb::Create, Verb::Delete],
                false,
            ),
        ]);
        let approval = Approval {
            mode: Default::default(),
            watches: vec![],
            grants: vec![
                grant(&["apps"], &["*"], &["web", "shop"], &[Verb::Patch], false),
                grant(
                    &[""],
                    &["Service"],
                    &[],
                    &[Verb::Create, Verb::Delete],
                    false,
                ),
            ],
            reads: vec![],
        };
        assert!(check_approval(&m, Some(&approval)).is_ok());
        // Nothing approved: every write is extra, and the message says how to approve.
        let err = check_approval(&m, None).unwrap_err();
        assert_eq!(err.excess.len(), 3, "{err}");
        assert!(
            err.to_string().contains("kubewasm approve FILE.wasm"),
            "{err}"
        );
        // More namespaces, all namespaces, force, a wildcard kind, a read: each named.
        m.grants = vec![
            grant(
                &["apps"],
                &["Deployment"],
                &["web", "other"],
                &[Verb::Patch],
                false,
            ),
            grant(&["apps"], &["Deployment"], &[], &[Verb::Patch], false),
            grant(&[""], &["Service"], &[], &[Verb::Create], true),
            grant(&[""], &["*"], &[], &[Verb::Delete], false),
        ];
        m.reads = vec![crate::manifest::Read::whole(ResourceRef::Kind(
            crate::resource::TypeRef::new("v1", "Secret"),
        ))];
        let err = check_approval(&m, Some(&approval)).unwrap_err();
        assert_eq!(
            err.excess,
            [
                "patch apps Deployment (in namespaces web,other)",
                "patch apps Deployment (all namespaces and cluster-scoped)",
                "create core Service (all namespaces and cluster-scoped, with force)",
                "delete core * (all namespaces and cluster-scoped)",
                "read v1/Secret",
            ],
            "{err}"
        );
        let line = err.to_string();
        assert!(
            !line.contains('\n') && line.starts_with("plugin p asks for more"),
            "{line}"
        );
        // An approved `*` covers everything, reads are approved by name.
        let all = Approval {
            mode: Default::default(),
            watches: vec![],
            grants: vec![grant(
                &["*"],
                &["*"],
                &[],
                &[Verb::Create, Verb::Patch, Verb::PatchStatus, Verb::Delete],
                true,
            )],
            reads: m
                .reads
                .iter()
                .map(|r| ApprovedRead {
                    resource: r.resource.clone(),
                    namespaces: vec![],
                })
                .collect(),
        };
        assert!(check_approval(&m, Some(&all)).is_ok());
    }

    #[test]
    fn approved_finalizers_reach_only_the_grants_they_fully_cover() {
        let mut with_fin = grant(&["apps"], &["Deployment"], &[], &[Verb::Create], false);
        with_fin.finalizers = vec!["example.com/cleanup".into()];
        let approval = Approval {
            mode: Default::default(),
            watches: vec![],
            grants: vec![
                with_fin,
                grant(&[""], &["Service"], &[], &[Verb::Create], false),
            ],
            reads: vec![],
        };
        let mut m = manifest(vec![
            grant(&["apps"], &["Deployment"], &[], &[Verb::Create], false),
            grant(
                &["apps", ""],
                &["Deployment", "Service"],
                &[],
                &[Verb::Create],
                false,
            ),
        ]);
        // The second asks for apps/Service and core/Deployment too: not approved.
        assert!(approve(&mut m, Some(&approval)).is_err());
        m.grants.pop();
        approve(&mut m, Some(&approval)).unwrap();
        assert_eq!(m.grants[0].finalizers, ["example.com/cleanup"]);
    }

    #[test]
    fn a_serving_plugin_fits_only_an_approval_that_still_covers_it() {
        let mut fin = grant(&[""], &["ConfigMap"], &[], &[Verb::Create], false);
        fin.finalizers = vec!["example.com/keep".into()];
        let wide = Approval {
            grants: vec![fin],
            ..Default::default()
        };
        let mut m = manifest(vec![grant(
            &[""],
            &["ConfigMap"],
            &[],
            &[Verb::Create],
            false,
        )]);
        approve(&mut m, Some(&wide)).unwrap();
        assert!(still_fits(&m, Some(&wide)));
        // The finalizer withdrawn: the enforced manifest would change, so it does not fit.
        let no_fin = Approval {
            grants: vec![grant(&[""], &["ConfigMap"], &[], &[Verb::Create], false)],
            ..Default::default()
        };
        assert!(!still_fits(&m, Some(&no_fin)));
        // The grant withdrawn, or the approval deleted.
        assert!(!still_fits(&m, Some(&Approval::default())));
        assert!(!still_fits(&m, None));
    }

    #[test]
    fn an_approval_as_a_manifest_holds_one_watch_per_namespace() {
        use crate::resource::TypeRef;
        let a = Approval {
            mode: Default::default(),
            watches: vec![
                ApprovedWatch {
                    resource: ResourceRef::Kind(TypeRef::new("v1", "ConfigMap")),
                    namespaces: vec!["a".into(), "b".into()],
                },
                ApprovedWatch {
                    resource: ResourceRef::Kind(TypeRef::new("v1", "Secret")),
                    namespaces: vec![],
                },
            ],
            grants: vec![grant(&[""], &["Service"], &[], &[Verb::Create], false)],
            reads: vec![],
        };
        let m = a.to_manifest("p");
        assert_eq!(m.name, "p");
        let scopes: Vec<_> = m.watches.iter().map(|w| w.namespace.clone()).collect();
        assert_eq!(scopes, [Some("a".into()), Some("b".into()), None]);
        m.validate().unwrap();
        assert!(check_approval(&m, Some(&a)).is_ok());
    }

    #[test]
    fn watches_are_approved_by_resource_and_namespace() {
        use crate::manifest::Watch;
        use crate::resource::TypeRef;
        let secrets = ResourceRef::Kind(TypeRef::new("v1", "Secret"));
        let mut m = manifest(vec![]);
        m.watches = vec![Watch {
            id: "s".into(),
            resource: secrets.clone(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            fields: crate::projection::Projection::whole(),
        }];
        // Nothing approved: even a watch is refused.
        let err = check_approval(&m, None).unwrap_err();
        assert_eq!(
            err.excess,
            [r#"watch v1/Secret in all namespaces (watch "s")"#]
        );
        let in_a = Approval {
            watches: vec![ApprovedWatch {
                resource: secrets.clone(),
                namespaces: vec!["a".into()],
            }],
            ..Default::default()
        };
        // Approved in one namespace: a cluster-wide watch is more than that.
        assert!(check_approval(&m, Some(&in_a)).is_err());
        m.watches[0].namespace = Some("a".into());
        assert!(check_approval(&m, Some(&in_a)).is_ok());
        m.watches[0].namespace = Some("b".into());
        assert!(check_approval(&m, Some(&in_a)).is_err());
        // Another kind is not covered by the Secret approval.
        m.watches[0].resource = ResourceRef::Kind(TypeRef::new("v1", "ConfigMap"));
        m.watches[0].namespace = Some("a".into());
        assert!(check_approval(&m, Some(&in_a)).is_err());
    }

    #[test]
    fn reads_are_scoped_by_what_is_approved_for_their_resource() {
        use crate::resource::TypeRef;
        use std::collections::BTreeSet;
        let kind = |k: &str| ResourceRef::Kind(TypeRef::new("v1", k));
        let ns = |list: &[&str]| {
            ReadWhere::Namespaces(list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>())
        };
        let read = |k: &str, namespaces: &[&str]| ApprovedRead {
            resource: kind(k),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        };
        let a = Approval {
            mode: Default::default(),
            watches: vec![
                ApprovedWatch {
                    resource: kind("ConfigMap"),
                    namespaces: vec!["a".into()],
                },
                // Cluster-wide, and of another kind: widens no read.
                ApprovedWatch {
                    resource: kind("Service"),
                    namespaces: vec![],
                },
            ],
            grants: vec![],
            reads: vec![
                read("Secret", &[]),
                read("Pod", &["b", "c"]),
                read("Node", &["*"]),
                read("ConfigMap", &["d"]),
            ],
        };
        let s = a.read_scopes();
        assert_eq!(s[&kind("Service")], ReadWhere::ClusterWide);
        // The form before namespaces: where the approved watches list.
        assert_eq!(s[&kind("Secret")], ns(&["a"]));
        assert_eq!(s[&kind("Pod")], ns(&["b", "c"]));
        assert_eq!(s[&kind("Node")], ReadWhere::ClusterWide);
        // Approved twice: both.
        assert_eq!(s[&kind("ConfigMap")], ns(&["a", "d"]));
        // Only cluster-wide watches: a read without namespaces reads in none.
        let wide = Approval {
            mode: Default::default(),
            watches: vec![a.watches[1].clone()],
            grants: vec![],
            reads: vec![read("Secret", &[])],
        };
        assert_eq!(wide.read_scopes()[&kind("Secret")], ns(&[]));
    }
}
