"""Conversions between the layer's types and the componentize-py bindings (component only)."""

from __future__ import annotations

import json

from wit_world.imports import types as w

from .event import Event
from .intents import CreateIntent, DeleteIntent, Intent, ObjectRef, PatchIntent
from .manifest import Grant, KindRef, Manifest, Read, Watch

_EVENT_TYPES = {
    w.EventType.ADDED: "added",
    w.EventType.MODIFIED: "modified",
    w.EventType.DELETED: "deleted",
    w.EventType.RESYNC: "resync",
}
_VERBS = {
    "create": w.Verb.CREATE,
    "patch": w.Verb.PATCH,
    "patch-status": w.Verb.PATCH_STATUS,
    "delete": w.Verb.DELETE,
}
_STRATEGIES = {"apply": w.PatchStrategy.APPLY, "merge": w.PatchStrategy.MERGE}
_PROPAGATIONS = {
    "Background": w.Propagation.BACKGROUND,
    "Foreground": w.Propagation.FOREGROUND,
    "Orphan": w.Propagation.ORPHAN,
}


# Compact and strict (NaN/Infinity are not JSON); built once, as json.dumps with arguments
# builds an encoder per call.
_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _resource(r):
    if isinstance(r, KindRef):
        return w.ResourceRef_Kind(w.TypeRef(api_version=r.api_version, kind=r.kind))
    return w.ResourceRef_Resource(r)


def _watch(x: Watch) -> w.Watch:
    return w.Watch(
        id=x.id,
        resource=_resource(x.resource),
        namespace=x.namespace,
        label_selector=x.label_selector,
        field_selector=x.field_selector,
        fields=list(x.fields),
    )


def _read(r: Read) -> w.Read:
    return w.Read(resource=_resource(r.resource), fields=list(r.fields))


def _grant(g: Grant) -> w.Grant:
    return w.Grant(
        api_groups=list(g.api_groups),
        kinds=list(g.kinds),
        namespaces=list(g.namespaces),
        verbs=[_VERBS[v] for v in g.verbs],
        allow_force=bool(g.allow_force),
    )


def manifest(m: Manifest) -> w.Manifest:
    return w.Manifest(
        name=m.name,
        version=m.version,
        watches=[_watch(x) for x in m.watches],
        grants=[_grant(g) for g in m.grants],
        reads=[_read(r) for r in m.reads],
    )


def event(e: w.Event) -> Event:
    return Event(_EVENT_TYPES[e.event_type], e.watch_id, e.object, e.old_object)


def _ref(r: ObjectRef) -> w.ObjectRef:
    return w.ObjectRef(api_version=r.api_version, kind=r.kind, namespace=r.namespace, name=r.name)


def intent(i: Intent):
    if isinstance(i, CreateIntent):
        return w.Intent_Create(
            w.CreateIntent(object=_json(i.object), force=bool(i.force), owned_by_trigger=bool(i.owned_by_trigger))
        )
    if isinstance(i, PatchIntent):
        return w.Intent_Patch(
            w.PatchIntent(
                target=_ref(i.target),
                body=_json(i.body),
                strategy=_STRATEGIES[i.strategy],
                status=bool(i.status),
                force=bool(i.force),
            )
        )
    if isinstance(i, DeleteIntent):
        return w.Intent_Delete(
            w.DeleteIntent(
                target=_ref(i.target),
                uid=i.uid,
                resource_version=i.resource_version,
                propagation=None if i.propagation is None else _PROPAGATIONS[i.propagation],
            )
        )
    raise TypeError(f"not an intent: {i!r} (use kubewasm.create/apply_patch/merge_patch/delete)")


def handle_error(message: str, retry: bool) -> w.HandleError:
    return w.HandleError(message=message, retry=retry)
