//! Names of kinds, resources and objects, and parsing of kubectl-style resource arguments.

use std::fmt;

/// Why a resource argument or apiVersion did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// The resource argument is empty.
    #[error("empty resource")]
    Empty,
    /// The plural is not lowercase alphanumerics and `-`.
    #[error("bad resource name in {0:?}")]
    BadName(String),
    /// The apiVersion is not `version` or `group/version` with a DNS-1123 group.
    #[error("apiVersion {0:?} is not `version` or `group/version`")]
    BadApiVersion(String),
}

/// A kind as objects name it: `apiVersion` + `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeRef {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// The kind, e.g. `MongoDB`.
    pub kind: String,
}

impl TypeRef {
    /// Build from parts.
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        TypeRef {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// The API group (`""` for core).
    pub fn group(&self) -> &str {
        split_api_version(&self.api_version).0
    }

    /// The version.
    pub fn version(&self) -> &str {
        split_api_version(&self.api_version).1
    }
}

impl fmt::Display for TypeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// Split `group/version` (or `version`) into `(group, version)`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Check an apiVersion's syntax: a DNS-1123 label version, optionally behind a DNS-1123
/// subdomain group (what the API server's URL paths can carry).
pub fn check_api_version(api_version: &str) -> Result<(), ResourceError> {
    let (group, version) = split_api_version(api_version);
    let group_ok = api_version.contains('/') != group.is_empty()
        && (group.is_empty() || crate::names::is_dns1123_subdomain(group));
    if group_ok && crate::names::is_dns_label(version) {
        Ok(())
    } else {
        Err(ResourceError::BadApiVersion(api_version.to_string()))
    }
}

/// Identity of a served resource: group, version, plural.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// API group, `""` for core.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name.
    pub plural: String,
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}.{}", self.plural, self.version)
        } else {
            write!(f, "{}.{}.{}", self.plural, self.version, self.group)
        }
    }
}

/// Namespace and name of an object within one resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace, None when cluster-scoped.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A resource argument as kubectl takes it: `plural.version.group`, `plural.group` or `plural`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceArg {
    /// Plural resource name, e.g. `seldondeployments`.
    pub plural: String,
    /// The version when given, e.g. `v1`.
    pub version: Option<String>,
    /// The group, `""` for core.
    pub group: String,
}

impl ResourceArg {
    /// Parse `seldondeployments.v1.machinelearning.seldon.io`, `deployments.apps`,
    /// `configmaps`. Like kubectl, the second segment is taken as a version when it
    /// looks like one (`v1`, `v1beta2`, `v2alpha1`).
    pub fn parse(arg: &str) -> Result<Self, ResourceError> {
        let arg = arg.trim();
        if arg.is_empty() {
            return Err(ResourceError::Empty);
        }
        let mut parts = arg.splitn(3, '.');
        let plural = parts.next().unwrap_or_default().to_ascii_lowercase();
        if plural.is_empty()
            || !plural
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(ResourceError::BadName(arg.to_string()));
        }
        let second = parts.next();
        let rest = parts.next();
        let (version, group) = match (second, rest) {
            (None, _) => (None, String::new()),
            (Some(s), rest) if looks_like_version(s) => {
                (Some(s.to_string()), rest.unwrap_or_default().to_string())
            }
            (Some(s), Some(rest)) => (None, format!("{s}.{rest}")),
            (Some(s), None) => (None, s.to_string()),
        };
        Ok(ResourceArg {
            plural,
            version,
            group,
        })
    }
}

impl fmt::Display for ResourceArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.plural)?;
        if let Some(v) = &self.version {
            write!(f, ".{v}")?;
        }
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        Ok(())
    }
}

/// `v1`, `v2beta1`, `v1alpha3`.
fn looks_like_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else {
        return false;
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        return false;
    }
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return true;
    }
    for pre in ["alpha", "beta"] {
        if let Some(n) = tail.strip_prefix(pre) {
            return !n.is_empty() && n.chars().all(|c| c.is_ascii_digit());
        }
    }
    false
}

/// What a watch or read names: a kind, or a resource argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceRef {
    /// By apiVersion + kind.
    Kind(TypeRef),
    /// By kubectl-style resource argument.
    Resource(ResourceArg),
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceRef::Kind(t) => t.fmt(f),
            ResourceRef::Resource(r) => r.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_resource_argument() {
        let r = ResourceArg::parse("seldondeployments.v1.machinelearning.seldon.io").unwrap();
        assert_eq!(r.plural, "seldondeployments");
        assert_eq!(r.version.as_deref(), Some("v1"));
        assert_eq!(r.group, "machinelearning.seldon.io");
        assert_eq!(
            r.to_string(),
            "seldondeployments.v1.machinelearning.seldon.io"
        );
    }

    #[test]
    fn parses_group_without_version() {
        let r = ResourceArg::parse("deployments.apps").unwrap();
        assert_eq!(
            (r.plural.as_str(), r.version, r.group.as_str()),
            ("deployments", None, "apps")
        );
        let r = ResourceArg::parse("mongodbs.mongodb.com").unwrap();
        assert_eq!(r.group, "mongodb.com");
        assert_eq!(r.version, None);
    }

    #[test]
    fn parses_core_and_versioned_core() {
        let r = ResourceArg::parse("configmaps").unwrap();
        assert_eq!((r.group.as_str(), r.version.as_deref()), ("", None));
        let r = ResourceArg::parse("configmaps.v1").unwrap();
        assert_eq!((r.group.as_str(), r.version.as_deref()), ("", Some("v1")));
    }

    #[test]
    fn version_detection() {
        assert!(looks_like_version("v1"));
        assert!(looks_like_version("v2beta1"));
        assert!(looks_like_version("v1alpha3"));
        assert!(!looks_like_version("volumes"));
        assert!(!looks_like_version("v1beta"));
        assert!(!looks_like_version("vx"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(ResourceArg::parse("").is_err());
        assert!(ResourceArg::parse("a b").is_err());
    }

    #[test]
    fn api_version_syntax() {
        for ok in [
            "v1",
            "apps/v1",
            "mongodb.com/v1",
            "machinelearning.seldon.io/v1alpha2",
        ] {
            assert_eq!(check_api_version(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "/v1", "apps/", "a/b/c", "Apps/v1", "v1?x=1", "apps/v1#", "x y/v1",
        ] {
            assert!(check_api_version(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn splits_api_versions() {
        assert_eq!(split_api_version("v1"), ("", "v1"));
        assert_eq!(split_api_version("mongodb.com/v1"), ("mongodb.com", "v1"));
        let t = TypeRef::new("apps/v1", "Deployment");
        assert_eq!((t.group(), t.version()), ("apps", "v1"));
    }
}
