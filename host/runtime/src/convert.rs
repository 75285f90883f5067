//! Conversions between the generated WIT types and the host's own types.

use kubewasm_core::intent::{ObjectRef, Propagation, RawIntent, Strategy};
use kubewasm_core::manifest::{Grant, Manifest, ManifestError, Read, Verb, Watch};
use kubewasm_core::resource::{ResourceArg, ResourceError, ResourceRef, TypeRef};

use crate::bindings::types as wit;

fn resource_ref(r: wit::ResourceRef) -> Result<ResourceRef, ResourceError> {
    Ok(match r {
        wit::ResourceRef::Kind(t) => ResourceRef::Kind(TypeRef::new(t.api_version, t.kind)),
        wit::ResourceRef::Resource(s) => ResourceRef::Resource(ResourceArg::parse(&s)?),
    })
}

/// The manifest the plugin described, with its selectors parsed: an unparsable selector
/// rejects the plugin here, at load time.
pub(crate) fn manifest(m: wit::Manifest) -> Result<Manifest, ManifestError> {
    bounded(&m)?;
    let watches = m
        .watches
        .into_iter()
        .map(|w| {
            let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.trim().is_empty());
            let (label_selector, field_selector) = Watch::parse_selectors(
                &w.id,
                non_empty(&w.label_selector).as_deref(),
                non_empty(&w.field_selector).as_deref(),
            )?;
            let fields = Watch::parse_fields(&w.id, &w.fields)?;
            Ok(Watch {
                fields,
                resource: resource_ref(w.resource).map_err(|source| {
                    ManifestError::BadResource {
                        id: w.id.clone(),
                        source,
                    }
                })?,
                id: w.id,
                namespace: w.namespace.filter(|s| !s.is_empty()),
                label_selector,
                field_selector,
            })
        })
        .collect::<Result<Vec<_>, ManifestError>>()?;
    let grants = m
        .grants
        .into_iter()
        .map(|g| Grant {
            api_groups: g.api_groups,
            kinds: g.kinds,
            namespaces: g.namespaces,
            verbs: g.verbs.into_iter().map(verb).collect(),
            allow_force: g.allow_force,
            // Finalizers are the operator's to grant, never the plugin's to ask for.
            finalizers: vec![],
        })
        .collect();
    let reads = m
        .reads
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let resource = resource_ref(r.resource).map_err(ManifestError::BadRead)?;
            let fields = Read::parse_fields(i, &resource, &r.fields)?;
            Ok(Read { resource, fields })
        })
        .collect::<Result<Vec<_>, ManifestError>>()?;
    Ok(Manifest {
        name: m.name,
        version: m.version,
        watches,
        grants,
        reads,
    })
}

/// Refuse a manifest with too many watches, reads or fields, or any string over
/// [`MAX_MANIFEST_STRING`](kubewasm_core::manifest::MAX_MANIFEST_STRING), before any of it
/// is parsed, validated or quoted in an error: a plugin's 100,000 watches or 8 MiB
/// selector cost the host a count and a length, not a parse and an error message.
fn bounded(m: &wit::Manifest) -> Result<(), ManifestError> {
    use kubewasm_core::manifest::{check_counts, check_length};
    check_counts(m.watches.len(), m.reads.len())?;
    check_length(|| "the name".into(), &m.name)?;
    check_length(|| "the version".into(), &m.version)?;
    let resource = |what: &dyn Fn() -> String, r: &wit::ResourceRef| match r {
        wit::ResourceRef::Kind(t) => {
            check_length(|| format!("{}'s apiVersion", what()), &t.api_version)?;
            check_length(|| format!("{}'s kind", what()), &t.kind)
        }
        wit::ResourceRef::Resource(s) => check_length(|| format!("{}'s resource", what()), s),
    };
    // Fields are checked on their count and length before they are parsed or quoted.
    let fields = |what: &dyn Fn() -> String, fields: &[String]| {
        kubewasm_core::projection::check_bounds(fields).map_err(|source| ManifestError::BadFields {
            what: what(),
            source,
        })
    };
    for (i, w) in m.watches.iter().enumerate() {
        let what = || format!("watch #{i}");
        check_length(|| format!("{}'s id", what()), &w.id)?;
        resource(&what, &w.resource)?;
        fields(&what, &w.fields)?;
        for (field, s) in [
            ("namespace", &w.namespace),
            ("label selector", &w.label_selector),
            ("field selector", &w.field_selector),
        ] {
            if let Some(s) = s {
                check_length(|| format!("{}'s {field}", what()), s)?;
            }
        }
    }
    for (i, r) in m.reads.iter().enumerate() {
        resource(&|| format!("read #{i}"), &r.resource)?;
        fields(&|| format!("read #{i}"), &r.fields)?;
    }
    for (i, g) in m.grants.iter().enumerate() {
        for s in g.api_groups.iter().chain(&g.kinds).chain(&g.namespaces) {
            check_length(|| format!("grant #{i}'s entry"), s)?;
        }
    }
    Ok(())
}

fn verb(v: wit::Verb) -> Verb {
    match v {
        wit::Verb::Create => Verb::Create,
        wit::Verb::Patch => Verb::Patch,
        wit::Verb::PatchStatus => Verb::PatchStatus,
        wit::Verb::Delete => Verb::Delete,
    }
}

fn object_ref(r: wit::ObjectRef) -> ObjectRef {
    ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace.filter(|s| !s.is_empty()),
        name: r.name,
    }
}

pub(crate) fn intent(i: wit::Intent) -> RawIntent {
    match i {
        wit::Intent::Create(c) => RawIntent::Create {
            object: c.object,
            force: c.force,
            owned_by_trigger: c.owned_by_trigger,
        },
        wit::Intent::Patch(p) => RawIntent::Patch {
            target: object_ref(p.target),
            body: p.body,
            strategy: match p.strategy {
                wit::PatchStrategy::Apply => Strategy::Apply,
                wit::PatchStrategy::Merge => Strategy::Merge,
            },
            status: p.status,
            force: p.force,
        },
        wit::Intent::Delete(d) => RawIntent::Delete {
            target: object_ref(d.target),
            uid: d.uid,
            resource_version: d.resource_version,
            propagation: d.propagation.map(|p| match p {
                wit::Propagation::Background => Propagation::Background,
                wit::Propagation::Foreground => Propagation::Foreground,
                wit::Propagation::Orphan => Propagation::Orphan,
            }),
        },
    }
}

fn ref_bytes(r: &wit::ObjectRef) -> usize {
    r.api_version.len() + r.kind.len() + r.namespace.as_ref().map_or(0, String::len) + r.name.len()
}

/// Size of everything an intent carries (JSON and reference strings), for the size limit.
pub(crate) fn intent_bytes(i: &wit::Intent) -> usize {
    match i {
        wit::Intent::Create(c) => c.object.len(),
        wit::Intent::Patch(p) => p.body.len() + ref_bytes(&p.target),
        wit::Intent::Delete(d) => {
            ref_bytes(&d.target)
                + d.uid.as_ref().map_or(0, String::len)
                + d.resource_version.as_ref().map_or(0, String::len)
        }
    }
}

/// `kubewasm:plugin@0.1.0`'s records, as the current version's: the same records but
/// for the manifest, whose watches and reads declare no fields (whole objects).
pub(crate) mod v01 {
    use super::wit;
    use crate::bindings::v01::kubewasm::plugin::types as old;

    fn resource_ref(r: old::ResourceRef) -> wit::ResourceRef {
        match r {
            old::ResourceRef::Kind(t) => wit::ResourceRef::Kind(wit::TypeRef {
                api_version: t.api_version,
                kind: t.kind,
            }),
            old::ResourceRef::Resource(s) => wit::ResourceRef::Resource(s),
        }
    }

    /// A 0.1.0 manifest: every watch and read of whole objects.
    pub(crate) fn manifest(m: old::Manifest) -> wit::Manifest {
        wit::Manifest {
            name: m.name,
            version: m.version,
            watches: m
                .watches
                .into_iter()
                .map(|w| wit::Watch {
                    id: w.id,
                    resource: resource_ref(w.resource),
                    namespace: w.namespace,
                    label_selector: w.label_selector,
                    field_selector: w.field_selector,
                    fields: Vec::new(),
                })
                .collect(),
            grants: m
                .grants
                .into_iter()
                .map(|g| wit::Grant {
                    api_groups: g.api_groups,
                    kinds: g.kinds,
                    namespaces: g.namespaces,
                    verbs: g.verbs.into_iter().map(verb).collect(),
                    allow_force: g.allow_force,
                })
                .collect(),
            reads: m
                .reads
                .into_iter()
                .map(|r| wit::Read {
                    resource: resource_ref(r),
                    fields: Vec::new(),
                })
                .collect(),
        }
    }

    fn verb(v: old::Verb) -> wit::Verb {
        match v {
            old::Verb::Create => wit::Verb::Create,
            old::Verb::Patch => wit::Verb::Patch,
            old::Verb::PatchStatus => wit::Verb::PatchStatus,
            old::Verb::Delete => wit::Verb::Delete,
        }
    }

    /// The event, as 0.1.0 spells it.
    pub(crate) fn event(e: &wit::Event) -> old::Event {
        old::Event {
            event_type: match e.event_type {
                wit::EventType::Added => old::EventType::Added,
                wit::EventType::Modified => old::EventType::Modified,
                wit::EventType::Deleted => old::EventType::Deleted,
                wit::EventType::Resync => old::EventType::Resync,
            },
            watch_id: e.watch_id.clone(),
            object: e.object.clone(),
            old_object: e.old_object.clone(),
        }
    }

    /// What `handle` returned, as the current version's.
    pub(crate) fn handled(
        r: Result<Vec<old::Intent>, old::HandleError>,
    ) -> Result<Vec<wit::Intent>, wit::HandleError> {
        match r {
            Ok(intents) => Ok(intents.into_iter().map(intent).collect()),
            Err(e) => Err(wit::HandleError {
                message: e.message,
                retry: e.retry,
            }),
        }
    }

    fn object_ref(r: old::ObjectRef) -> wit::ObjectRef {
        wit::ObjectRef {
            api_version: r.api_version,
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
        }
    }

    fn intent(i: old::Intent) -> wit::Intent {
        match i {
            old::Intent::Create(c) => wit::Intent::Create(wit::CreateIntent {
                object: c.object,
                force: c.force,
                owned_by_trigger: c.owned_by_trigger,
            }),
            old::Intent::Patch(p) => wit::Intent::Patch(wit::PatchIntent {
                target: object_ref(p.target),
                body: p.body,
                strategy: match p.strategy {
                    old::PatchStrategy::Apply => wit::PatchStrategy::Apply,
                    old::PatchStrategy::Merge => wit::PatchStrategy::Merge,
                },
                status: p.status,
                force: p.force,
            }),
            old::Intent::Delete(d) => wit::Intent::Delete(wit::DeleteIntent {
                target: object_ref(d.target),
                uid: d.uid,
                resource_version: d.resource_version,
                propagation: d.propagation.map(|p| match p {
                    old::Propagation::Background => wit::Propagation::Background,
                    old::Propagation::Foreground => wit::Propagation::Foreground,
                    old::Propagation::Orphan => wit::Propagation::Orphan,
                }),
            }),
        }
    }
}
