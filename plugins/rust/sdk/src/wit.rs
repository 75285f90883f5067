//! Conversions between the SDK's types and the generated WIT bindings.

use crate::bindings::kubewasm::plugin::types as w;
use crate::intent::{ObjectRef, PatchStrategy, Propagation};
use crate::manifest::{Grant, Read, ResourceRef, Watch};
use crate::{Event, EventType, HandleError, Intent, Manifest, Verb};

pub(crate) fn manifest(m: Manifest) -> w::Manifest {
    w::Manifest {
        name: m.name,
        version: m.version,
        watches: m.watches.into_iter().map(watch).collect(),
        grants: m.grants.into_iter().map(grant).collect(),
        reads: m.reads.into_iter().map(read).collect(),
    }
}

fn resource_ref(r: ResourceRef) -> w::ResourceRef {
    match r {
        ResourceRef::Kind { api_version, kind } => {
            w::ResourceRef::Kind(w::TypeRef { api_version, kind })
        }
        ResourceRef::Resource(s) => w::ResourceRef::Resource(s),
    }
}

fn watch(x: Watch) -> w::Watch {
    w::Watch {
        id: x.id,
        resource: resource_ref(x.resource),
        namespace: x.namespace,
        label_selector: x.label_selector,
        field_selector: x.field_selector,
        fields: x.fields,
    }
}

fn read(r: Read) -> w::Read {
    w::Read {
        resource: resource_ref(r.resource),
        fields: r.fields,
    }
}

fn grant(g: Grant) -> w::Grant {
    w::Grant {
        api_groups: g.api_groups,
        kinds: g.kinds,
        namespaces: g.namespaces,
        verbs: g.verbs.into_iter().map(verb).collect(),
        allow_force: g.allow_force,
    }
}

fn verb(v: Verb) -> w::Verb {
    match v {
        Verb::Create => w::Verb::Create,
        Verb::Patch => w::Verb::Patch,
        Verb::PatchStatus => w::Verb::PatchStatus,
        Verb::Delete => w::Verb::Delete,
    }
}

pub(crate) fn event(e: w::Event) -> Event {
    let event_type = match e.event_type {
        w::EventType::Added => EventType::Added,
        w::EventType::Modified => EventType::Modified,
        w::EventType::Deleted => EventType::Deleted,
        w::EventType::Resync => EventType::Resync,
    };
    let ev = Event::new(event_type, e.watch_id, e.object);
    match e.old_object {
        Some(old) => ev.with_old_object(old),
        None => ev,
    }
}

fn object_ref(r: ObjectRef) -> w::ObjectRef {
    w::ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}

pub(crate) fn intent(i: Intent) -> w::Intent {
    match i {
        Intent::Create(c) => w::Intent::Create(w::CreateIntent {
            object: c.object.to_string(),
            force: c.force,
            owned_by_trigger: c.owned_by_trigger,
        }),
        Intent::Patch(p) => w::Intent::Patch(w::PatchIntent {
            target: object_ref(p.target),
            body: p.body.to_string(),
            strategy: match p.strategy {
                PatchStrategy::Apply => w::PatchStrategy::Apply,
                PatchStrategy::Merge => w::PatchStrategy::Merge,
            },
            status: p.status,
            force: p.force,
        }),
        Intent::Delete(d) => w::Intent::Delete(w::DeleteIntent {
            target: object_ref(d.target),
            uid: d.uid,
            resource_version: d.resource_version,
            propagation: d.propagation.map(|p| match p {
                Propagation::Background => w::Propagation::Background,
                Propagation::Foreground => w::Propagation::Foreground,
                Propagation::Orphan => w::Propagation::Orphan,
            }),
        }),
    }
}

pub(crate) fn handle_error(e: HandleError) -> w::HandleError {
    w::HandleError {
        message: e.message,
        retry: e.retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Grant;
    use serde_json::json;

    #[test]
    fn converts_manifest_and_intents() {
        let m = Manifest::new("p", "1")
            .watch(
                Watch::resource("sd", "seldondeployments.v1.machinelearning.seldon.io")
                    .namespace("ml")
                    .fields(["spec.predictors"])
                    .fields(["status.state".to_owned()]),
            )
            .grant(
                Grant::on("", "Service")
                    .create()
                    .patch_status()
                    .allow_force(),
            )
            .read_kind("v1", "Secret")
            .read(Read::resource("deployments.apps").fields(["metadata"]));
        let wm = manifest(m);
        assert_eq!(wm.watches[0].namespace.as_deref(), Some("ml"));
        assert!(
            matches!(&wm.watches[0].resource, w::ResourceRef::Resource(s) if s.starts_with("seldon"))
        );
        assert!(matches!(
            wm.grants[0].verbs[..],
            [w::Verb::Create, w::Verb::PatchStatus]
        ));
        assert_eq!(wm.watches[0].fields, ["spec.predictors", "status.state"]);
        assert!(matches!(&wm.reads[0].resource, w::ResourceRef::Kind(t) if t.kind == "Secret"));
        assert!(wm.reads[0].fields.is_empty());
        assert!(
            matches!(&wm.reads[1].resource, w::ResourceRef::Resource(s) if s == "deployments.apps")
        );
        assert_eq!(wm.reads[1].fields, ["metadata"]);

        let target = ObjectRef::namespaced("v1", "Service", "n", "s");
        let i = intent(
            Intent::apply_patch(target.clone(), json!({"a": 1}))
                .status()
                .into(),
        );
        let w::Intent::Patch(p) = i else {
            panic!("not a patch")
        };
        assert_eq!(p.body, r#"{"a":1}"#);
        assert!(p.status && !p.force);
        let i = intent(
            Intent::delete(target)
                .propagation(Propagation::Foreground)
                .into(),
        );
        assert!(
            matches!(i, w::Intent::Delete(d) if matches!(d.propagation, Some(w::Propagation::Foreground)))
        );

        let e = event(w::Event {
            event_type: w::EventType::Modified,
            watch_id: "x".into(),
            object: "{}".into(),
            old_object: Some("{}".into()),
        });
        assert!(e.is_modified() && e.raw_old_object() == Some("{}"));
    }
}
