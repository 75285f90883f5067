//! The grant check: a plugin may only write what its manifest declared.

use crate::manifest::{Grant, Manifest, Verb};
use crate::resource::split_api_version;

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
}
