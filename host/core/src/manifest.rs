//! What a plugin declares about itself: its watches, grants and reads.
//!
//! These are plain Rust types, independent of the wasm bindings, so the rest of the
//! host (watch, grant, rbac) never depends on wasmtime. Selectors are parsed when the
//! manifest is built from the plugin's answer, so an unparsable one rejects the plugin at
//! load time and is never matched.

use std::collections::HashSet;

use crate::projection::{FieldError, Projection};
use crate::resource::ResourceRef;
use crate::selector::{FieldSelector, LabelSelector, OBJECT_META_FIELDS, SelectorError};

/// Why a manifest was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The plugin name cannot be a field manager suffix and DNS label.
    #[error(
        "name {0:?} must be a DNS label: lowercase letters, digits and '-', at most 63 characters"
    )]
    BadName(String),
    /// A watch without an id.
    #[error("a watch on {0} has an empty id")]
    EmptyWatchId(String),
    /// Two watches share an id.
    #[error("watch id {0:?} is used twice")]
    DuplicateWatchId(String),
    /// A watch by kind misses apiVersion or kind.
    #[error("watch {0:?}: apiVersion and kind are required")]
    IncompleteKind(String),
    /// A watch names a resource argument that does not parse.
    #[error("watch {id:?}: {source}")]
    BadResource {
        /// The watch.
        id: String,
        /// Why.
        #[source]
        source: crate::resource::ResourceError,
    },
    /// An entry of `reads` that does not parse.
    #[error("reads: {0}")]
    BadRead(#[source] crate::resource::ResourceError),
    /// A watch's or read's `fields` that cannot be a projection.
    #[error("{what}: fields: {source}")]
    BadFields {
        /// The watch (`watch "dbs"`) or read (`read #0 (v1/Secret)`).
        what: String,
        /// Why.
        #[source]
        source: FieldError,
    },
    /// A watch's apiVersion is malformed.
    #[error("watch {id:?}: {source}")]
    BadApiVersion {
        /// The watch.
        id: String,
        /// Why.
        #[source]
        source: crate::resource::ResourceError,
    },
    /// A label selector that does not parse.
    #[error(
        "watch {id:?}: label selector {text:?}: {}",
        crate::excerpt::excerpt(&.source.to_string(), 1024)
    )]
    LabelSelector {
        /// The watch.
        id: String,
        /// The selector as written.
        text: String,
        /// Why.
        #[source]
        source: SelectorError,
    },
    /// A field selector that does not parse or selects an unsupported field.
    #[error(
        "watch {id:?}: field selector {text:?}: {}",
        crate::excerpt::excerpt(&.source.to_string(), 1024)
    )]
    FieldSelector {
        /// The watch.
        id: String,
        /// The selector as written.
        text: String,
        /// Why.
        #[source]
        source: SelectorError,
    },
    /// A version too long or with control characters (it becomes a log field and a
    /// metric label).
    #[error("version {0:?} must be at most 64 printable characters")]
    BadVersion(String),
    /// A watch id that is not 1–63 letters, digits, `.`, `_` or `-` (it appears in every
    /// event's log line).
    #[error("watch id {0:?} must be 1-63 letters, digits, '.', '_' or '-'")]
    BadWatchId(String),
    /// A grant with no group, kind or verb.
    #[error("grant #{0} needs at least one api group, kind and verb")]
    EmptyGrant(usize),
    /// More watches or reads than a manifest may list ([`MAX_WATCHES`], [`MAX_READS`]).
    #[error("{count} {what}, over the limit of {max} per plugin{hint}")]
    TooMany {
        /// `watches` or `reads`.
        what: &'static str,
        /// How many the manifest lists.
        count: usize,
        /// The limit.
        max: usize,
        /// What to do instead.
        hint: &'static str,
    },
    /// A string of the manifest longer than any field of it may be
    /// ([`MAX_MANIFEST_STRING`]), refused before it is parsed or quoted.
    #[error("{what} is {len} bytes, over the limit of {max}")]
    TooLong {
        /// Which string, e.g. `watch #3's label selector`.
        what: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Two watches select the same objects of the same resource: every event would be
    /// delivered twice.
    #[error(
        "watch {id:?} selects what watch {first:?} selects (same resource, namespace and \
         selectors); merge them"
    )]
    DuplicateWatch {
        /// The later watch.
        id: String,
        /// The earlier one.
        first: String,
    },
}

/// Most watches a manifest may list. Every watch is a route the host matches each event
/// on its resource against, for every plugin, so their number is a cost everyone pays
/// (100,000 watches would stall routing for all plugins). A manifest lists interests,
/// not objects: the example plugins have one to three; 64 leaves room for one watch per
/// namespace over a few dozen namespaces. More namespaces than that is a cluster-wide
/// watch narrowed by a label selector.
pub const MAX_WATCHES: usize = 64;

/// Most `reads` a manifest may list: each is a cache the host fills and keeps, so the
/// same reasoning and limit as [`MAX_WATCHES`].
pub const MAX_READS: usize = 64;

/// Longest string anywhere in a manifest (16 KiB): a label selector of a few hundred
/// maximum-length values. Names, kinds, versions and ids have tighter rules of their own,
/// checked after this one; this bound comes first so that no rule ever parses or quotes
/// megabytes a plugin handed over.
pub const MAX_MANIFEST_STRING: usize = 16 << 10;

/// A plugin's manifest, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Plugin name (DNS label).
    pub name: String,
    /// Free-text version.
    pub version: String,
    /// What the plugin receives events for.
    pub watches: Vec<Watch>,
    /// What it may write.
    pub grants: Vec<Grant>,
    /// Extra kinds it may read from the cache.
    pub reads: Vec<Read>,
}

/// A kind a plugin reads beyond its watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// What it reads.
    pub resource: ResourceRef,
    /// The fields it uses (see [`crate::projection`]).
    pub fields: Projection,
}

impl Read {
    /// A read of whole objects (what a manifest of WIT 0.1.0 declares).
    pub fn whole(resource: ResourceRef) -> Self {
        Read {
            resource,
            fields: Projection::whole(),
        }
    }

    /// Parse a read's `fields`; an error names the read by its index and resource.
    pub fn parse_fields<S: AsRef<str>>(
        index: usize,
        resource: &ResourceRef,
        fields: &[S],
    ) -> Result<Projection, ManifestError> {
        Projection::parse(fields).map_err(|source| ManifestError::BadFields {
            what: format!("read #{index} ({resource})"),
            source,
        })
    }
}

/// One watch of a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// The plugin's name for the watch.
    pub id: String,
    /// What to watch.
    pub resource: ResourceRef,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Label selector, parsed.
    pub label_selector: Option<LabelSelector>,
    /// Field selector, parsed (`metadata.name` and `metadata.namespace` only).
    pub field_selector: Option<FieldSelector>,
    /// The fields the plugin uses (see [`crate::projection`]).
    pub fields: Projection,
}

impl Watch {
    /// Parse a watch's `fields`; an error names the watch.
    pub fn parse_fields<S: AsRef<str>>(
        id: &str,
        fields: &[S],
    ) -> Result<Projection, ManifestError> {
        Projection::parse(fields).map_err(|source| ManifestError::BadFields {
            what: format!("watch {id:?}"),
            source,
        })
    }

    /// Parse a watch's selectors from their text: the one place plugin selector text
    /// becomes a selector.
    pub fn parse_selectors(
        id: &str,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<(Option<LabelSelector>, Option<FieldSelector>), ManifestError> {
        // Bounded before parsing: a parse error quotes the text and its parts.
        let quoted = |text: &str| crate::excerpt::excerpt(text, 1024).into_owned();
        let labels = label_selector
            .map(|text| {
                check_length(|| format!("watch {id:?}'s label selector"), text)?;
                LabelSelector::parse(text).map_err(|source| ManifestError::LabelSelector {
                    id: id.to_string(),
                    text: quoted(text),
                    source,
                })
            })
            .transpose()?;
        let fields = field_selector
            .map(|text| {
                check_length(|| format!("watch {id:?}'s field selector"), text)?;
                FieldSelector::parse_restricted(text, OBJECT_META_FIELDS).map_err(|source| {
                    ManifestError::FieldSelector {
                        id: id.to_string(),
                        text: quoted(text),
                        source,
                    }
                })
            })
            .transpose()?;
        Ok((labels, fields))
    }

    /// Whether an object with these labels, name and namespace is selected.
    pub fn selects<'a>(
        &self,
        labels: impl Fn(&str) -> Option<&'a str>,
        name: &str,
        namespace: Option<&str>,
    ) -> bool {
        self.rejects(labels, name, namespace).is_none()
    }

    /// Why an object with these labels, name and namespace is not selected (its
    /// namespace, the label selector or the field selector, as a phrase), or None when it
    /// is: the one selection check, whose answer [`Watch::selects`] gives.
    pub fn rejects<'a>(
        &self,
        labels: impl Fn(&str) -> Option<&'a str>,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<String> {
        if let Some(want) = self.namespace.as_deref()
            && namespace != Some(want)
        {
            return Some(format!(
                "it watches namespace {want}, the object is in {}",
                namespace.unwrap_or("no namespace")
            ));
        }
        if let Some(s) = &self.label_selector
            && !s.matches_with(labels)
        {
            return Some(format!(
                "its label selector {s} does not select the object's labels"
            ));
        }
        if let Some(s) = &self.field_selector
            && !s.matches_meta(name, namespace)
        {
            return Some(format!("its field selector {s} does not select the object"));
        }
        None
    }
}

/// A verb a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Create (SSA of a whole object).
    Create,
    /// Patch the main resource.
    Patch,
    /// Patch the status subresource.
    PatchStatus,
    /// Delete.
    Delete,
}

impl Verb {
    /// Lowercase name as used in logs and RBAC.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Patch => "patch",
            Verb::PatchStatus => "patch-status",
            Verb::Delete => "delete",
        }
    }
}

/// Permission to write some objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// API groups (`""` core, `"*"` any).
    pub api_groups: Vec<String>,
    /// Kinds (`"*"` any).
    pub kinds: Vec<String>,
    /// Namespaces; empty = all (and cluster-scoped).
    pub namespaces: Vec<String>,
    /// Allowed verbs.
    pub verbs: Vec<Verb>,
    /// Whether `force` may be used.
    pub allow_force: bool,
    /// Finalizers a create or patch body may carry on the objects this grant covers
    /// (exact names; empty: none). Set by the operator's approval, never by the plugin.
    pub finalizers: Vec<String>,
}

impl Manifest {
    /// The field manager the host uses for this plugin's writes.
    pub fn field_manager(&self) -> String {
        // A NamespacedPlugin's plugin is `NS/P` in the host; it writes as `kubewasm-P`.
        let own = self.name.rsplit('/').next().unwrap_or(&self.name);
        format!("kubewasm-{own}")
    }

    /// Check the manifest for things the host cannot serve. Returns the first problem.
    pub fn validate(&self) -> Result<(), ManifestError> {
        check_counts(self.watches.len(), self.reads.len())?;
        if !is_dns_label(&self.name) {
            return Err(ManifestError::BadName(self.name.clone()));
        }
        if self.version.len() > 64 || self.version.chars().any(char::is_control) {
            return Err(ManifestError::BadVersion(
                self.version.chars().take(64).collect(),
            ));
        }
        let mut ids = HashSet::new();
        for w in &self.watches {
            if w.id.is_empty() {
                return Err(ManifestError::EmptyWatchId(w.resource.to_string()));
            }
            if w.id.len() > 63
                || !w
                    .id
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
            {
                return Err(ManifestError::BadWatchId(w.id.chars().take(63).collect()));
            }
            if !ids.insert(w.id.as_str()) {
                return Err(ManifestError::DuplicateWatchId(w.id.clone()));
            }
            if let Some(first) = self
                .watches
                .iter()
                .take_while(|o| !std::ptr::eq(*o, w))
                .find(|o| {
                    o.resource == w.resource
                        && o.namespace == w.namespace
                        && o.label_selector == w.label_selector
                        && o.field_selector == w.field_selector
                })
            {
                return Err(ManifestError::DuplicateWatch {
                    id: w.id.clone(),
                    first: first.id.clone(),
                });
            }
            if let ResourceRef::Kind(t) = &w.resource {
                if t.api_version.is_empty() || t.kind.is_empty() {
                    return Err(ManifestError::IncompleteKind(w.id.clone()));
                }
                crate::resource::check_api_version(&t.api_version).map_err(|source| {
                    ManifestError::BadApiVersion {
                        id: w.id.clone(),
                        source,
                    }
                })?;
            }
        }
        for (i, g) in self.grants.iter().enumerate() {
            if g.verbs.is_empty() || g.kinds.is_empty() || g.api_groups.is_empty() {
                return Err(ManifestError::EmptyGrant(i));
            }
        }
        Ok(())
    }

    /// Everything the plugin reads: the resources it watches, then its extra `reads`.
    /// The one definition of "watches ∪ reads" (caches, read scoping, RBAC).
    pub fn read_resources(&self) -> impl Iterator<Item = &ResourceRef> {
        self.declarations().map(|(r, _)| r)
    }

    /// Every resource the plugin watches or reads, with the fields that watch or read
    /// declares.
    pub fn declarations(&self) -> impl Iterator<Item = (&ResourceRef, &Projection)> {
        self.watches
            .iter()
            .map(|w| (&w.resource, &w.fields))
            .chain(self.reads.iter().map(|r| (&r.resource, &r.fields)))
    }

    /// The plugin's projection of a kind: the union of what its watches and reads of it
    /// (those `is_kind` says name it) declare; whole objects if any declares nothing, or if
    /// none names it.
    pub fn projection(&self, is_kind: impl Fn(&ResourceRef) -> bool) -> Projection {
        self.declarations()
            .filter(|(r, _)| is_kind(r))
            .map(|(_, p)| p)
            .cloned()
            .reduce(|a, b| a.union(&b))
            .unwrap_or_default()
    }

    /// The watch with this id.
    pub fn watch(&self, id: &str) -> Option<&Watch> {
        self.watches.iter().find(|w| w.id == id)
    }
}

pub use crate::names::is_dns_label;

/// Refuse more than [`MAX_WATCHES`] watches or [`MAX_READS`] reads: checked on the
/// counts alone, before anything else of the manifest is looked at.
pub fn check_counts(watches: usize, reads: usize) -> Result<(), ManifestError> {
    if watches > MAX_WATCHES {
        return Err(ManifestError::TooMany {
            what: "watches",
            count: watches,
            max: MAX_WATCHES,
            hint: " (watch all namespaces with a label selector rather than one namespace per watch)",
        });
    }
    if reads > MAX_READS {
        return Err(ManifestError::TooMany {
            what: "reads",
            count: reads,
            max: MAX_READS,
            hint: "",
        });
    }
    Ok(())
}

/// Refuse a manifest string over [`MAX_MANIFEST_STRING`]; `what` names it.
pub fn check_length(what: impl FnOnce() -> String, s: &str) -> Result<(), ManifestError> {
    if s.len() > MAX_MANIFEST_STRING {
        return Err(ManifestError::TooLong {
            what: what(),
            len: s.len(),
            max: MAX_MANIFEST_STRING,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{ResourceArg, TypeRef};

    /// A watch says why it does not select an object: its namespace, then its label
    /// selector, then its field selector; `selects` is that answer being None.
    #[test]
    fn a_watch_says_why_it_does_not_select() {
        let (label_selector, field_selector) =
            Watch::parse_selectors("w", Some("app=web"), Some("metadata.name=a")).unwrap();
        let w = Watch {
            id: "w".into(),
            resource: ResourceRef::Kind(TypeRef::new("v1", "ConfigMap")),
            namespace: Some("shop".into()),
            label_selector,
            field_selector,
            fields: Projection::whole(),
        };
        let web = |k: &str| (k == "app").then_some("web");
        let db = |k: &str| (k == "app").then_some("db");
        assert_eq!(w.rejects(web, "a", Some("shop")), None);
        assert!(w.selects(web, "a", Some("shop")));
        assert_eq!(
            w.rejects(web, "a", Some("other")).as_deref(),
            Some("it watches namespace shop, the object is in other")
        );
        assert_eq!(
            w.rejects(db, "a", Some("shop")).as_deref(),
            Some("its label selector app=web does not select the object's labels")
        );
        assert_eq!(
            w.rejects(web, "b", Some("shop")).as_deref(),
            Some("its field selector metadata.name=a does not select the object")
        );
        assert!(!w.selects(web, "b", Some("shop")));
    }

    fn manifest() -> Manifest {
        Manifest {
            name: "mongodb-monitor".into(),
            version: "0.1.0".into(),
            watches: vec![Watch {
                id: "dbs".into(),
                resource: ResourceRef::Kind(TypeRef::new("mongodb.com/v1", "MongoDB")),
                namespace: None,
                label_selector: Some(LabelSelector::parse("app=db,tier!=x").unwrap()),
                field_selector: None,
                fields: Projection::whole(),
            }],
            grants: vec![Grant {
                api_groups: vec!["monitoring.coreos.com".into()],
                kinds: vec!["ServiceMonitor".into()],
                namespaces: vec![],
                verbs: vec![Verb::Create],
                allow_force: false,
                finalizers: vec![],
            }],
            reads: vec![],
        }
    }

    #[test]
    fn accepts_a_good_manifest() {
        assert_eq!(manifest().validate(), Ok(()));
        assert_eq!(manifest().field_manager(), "kubewasm-mongodb-monitor");
    }

    #[test]
    fn rejects_bad_names() {
        for bad in ["", "Upper", "has space", "-lead", "trail-", &"x".repeat(64)] {
            let mut m = manifest();
            m.name = bad.to_string();
            assert!(m.validate().is_err(), "{bad:?} accepted");
        }
    }

    /// 100,000 watches (what a hostile plugin may list within its transfer budget) are
    /// refused on their count, as are 65; 64 distinct ones load.
    #[test]
    fn watches_are_capped_and_deduplicated() {
        let watch = |i: usize| Watch {
            id: format!("w{i}"),
            resource: ResourceRef::Kind(TypeRef::new("v1", "ConfigMap")),
            namespace: Some(format!("ns-{i}")),
            label_selector: None,
            field_selector: None,
            fields: Projection::whole(),
        };
        let mut m = manifest();
        m.watches = (0..MAX_WATCHES).map(watch).collect();
        assert_eq!(m.validate(), Ok(()));
        for count in [MAX_WATCHES + 1, 100_000] {
            m.watches = (0..count).map(watch).collect();
            let err = m.validate().unwrap_err();
            assert!(
                matches!(err, ManifestError::TooMany { what: "watches", count: c, max: 64, .. } if c == count),
                "{err}"
            );
            assert!(
                err.to_string()
                    .starts_with(&format!("{count} watches, over the limit of 64 per plugin")),
                "{err}"
            );
        }
        assert!(check_counts(0, MAX_READS + 1).is_err());
        // Two watches on the same objects: refused, naming both.
        let mut m = manifest();
        let mut again = m.watches[0].clone();
        again.id = "again".into();
        m.watches.push(again.clone());
        assert_eq!(
            m.validate(),
            Err(ManifestError::DuplicateWatch {
                id: "again".into(),
                first: "dbs".into()
            })
        );
        // Another namespace or selector: distinct.
        m.watches[1].namespace = Some("b".into());
        assert_eq!(m.validate(), Ok(()));
        m.watches[1] = again;
        m.watches[1].label_selector = None;
        assert_eq!(m.validate(), Ok(()));
    }

    #[test]
    fn selectors_are_bounded_before_they_are_parsed() {
        let long = format!("a in ({})", "x".repeat(MAX_MANIFEST_STRING));
        let err = Watch::parse_selectors("w", Some(&long), None).unwrap_err();
        assert!(matches!(err, ManifestError::TooLong { .. }), "{err}");
        assert!(err.to_string().len() < 200, "{err}");
        // Under the bound but invalid: the error quotes an excerpt, escaped.
        let bad = format!("a\n=b,{}", "x".repeat(10_000));
        let err = Watch::parse_selectors("w", Some(&bad), None)
            .unwrap_err()
            .to_string();
        assert!(err.len() < 4096, "{}", err.len());
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn rejects_duplicate_watch_ids_and_bad_selectors() {
        let mut m = manifest();
        m.watches.push(m.watches[0].clone());
        assert!(matches!(
            m.validate(),
            Err(ManifestError::DuplicateWatchId(_))
        ));
        let err = Watch::parse_selectors("w", Some("a in ("), None).unwrap_err();
        assert!(err.to_string().contains("label selector"), "{err}");
        let err = Watch::parse_selectors("w", None, Some("status.phase=Running")).unwrap_err();
        assert!(matches!(err, ManifestError::FieldSelector { .. }), "{err}");
        let mut m = manifest();
        m.watches[0].resource = ResourceRef::Resource(ResourceArg::parse("x").unwrap());
        m.watches[0].id = String::new();
        assert!(matches!(m.validate(), Err(ManifestError::EmptyWatchId(_))));
        let mut m = manifest();
        m.watches[0].resource = ResourceRef::Kind(TypeRef::new("a/b/c", "X"));
        assert!(matches!(
            m.validate(),
            Err(ManifestError::BadApiVersion { .. })
        ));
    }

    #[test]
    fn strings_that_reach_logs_and_labels_are_bounded() {
        let mut m = manifest();
        m.version = "v".repeat(65);
        assert!(matches!(m.validate(), Err(ManifestError::BadVersion(_))));
        m.version = "1.0\n2.0".into();
        assert!(matches!(m.validate(), Err(ManifestError::BadVersion(_))));
        let mut m = manifest();
        m.watches[0].id = "x".repeat(64);
        assert!(matches!(m.validate(), Err(ManifestError::BadWatchId(_))));
        m.watches[0].id = "dbs\u{1b}[31m".into();
        assert!(matches!(m.validate(), Err(ManifestError::BadWatchId(_))));
        m.watches[0].id = "dbs.v1_main-2".into();
        assert_eq!(m.validate(), Ok(()));
    }

    /// A bad `fields` entry rejects the manifest naming the watch or read and the path; a
    /// plugin's projection of a kind is the union of its declarations of it, whole when
    /// one declares nothing.
    #[test]
    fn fields_are_checked_and_united_per_kind() {
        let err = Watch::parse_fields("dbs", &["spec..x"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "watch \"dbs\": fields: field \"spec..x\" must be keys joined by '.', each \
             non-empty and without control characters"
        );
        let secrets = ResourceRef::Kind(TypeRef::new("v1", "Secret"));
        let err = Read::parse_fields(2, &secrets, &["a".repeat(300)]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("read #2 (v1/Secret): fields: field \"aaa"),
            "{err}"
        );
        let mut m = manifest();
        let dbs = m.watches[0].resource.clone();
        m.watches[0].fields = Watch::parse_fields("dbs", &["spec.database"]).unwrap();
        m.reads = vec![Read {
            resource: dbs.clone(),
            fields: Read::parse_fields(0, &dbs, &["status.phase"]).unwrap(),
        }];
        let p = m.projection(|r| *r == dbs);
        assert!(p.paths().contains(&"spec.database".to_string()), "{p}");
        assert!(p.paths().contains(&"status.phase".to_string()), "{p}");
        assert!(m.projection(|r| *r == secrets).is_whole());
        m.reads.push(Read::whole(dbs.clone()));
        assert!(m.projection(|r| *r == dbs).is_whole());
    }

    #[test]
    fn rejects_empty_grants() {
        let mut m = manifest();
        m.grants[0].verbs.clear();
        assert!(m.validate().is_err());
    }
}
