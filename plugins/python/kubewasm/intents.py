"""Intents: the writes a plugin asks the host to make.

>>> from kubewasm import create, apply_patch, delete, ObjectRef
>>> site = {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
...         "metadata": {"name": "blog", "namespace": "web"}}
>>> cm = create({"apiVersion": "v1", "kind": "ConfigMap",
...              "metadata": {"name": "blog-config", "namespace": "web"}},
...             owned_by_trigger=True)
>>> status = apply_patch(site, {"status": {"ok": True}}, status=True)
>>> gone = delete(ObjectRef.namespaced("v1", "ConfigMap", "web", "old"), propagation="Foreground")
>>> [i.verb for i in (cm, status, gone)]
['create', 'patch-status', 'delete']
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Optional, Union

from .errors import PermanentError
from .obj import api_version as _api_version
from .obj import group_of
from .obj import kind as _kind
from .obj import namespace as _namespace
from .obj import require_name

__all__ = [
    "CreateIntent",
    "DeleteIntent",
    "Intent",
    "ObjectRef",
    "PatchIntent",
    "apply_patch",
    "create",
    "delete",
    "merge_patch",
]

PatchStrategy = Literal["apply", "merge"]
Propagation = Literal["Background", "Foreground", "Orphan"]
PROPAGATIONS = ("Background", "Foreground", "Orphan")


@dataclasses.dataclass(frozen=True)
class ObjectRef:
    """Which object an intent acts on. ``namespace=None`` for cluster-scoped objects."""

    api_version: str
    kind: str
    name: str
    namespace: Optional[str] = None

    @classmethod
    def namespaced(cls, api_version: str, kind: str, namespace: str, name: str) -> "ObjectRef":
        """A namespaced object (arguments in the WIT order)."""
        return cls(api_version=api_version, kind=kind, name=name, namespace=namespace)

    @classmethod
    def cluster(cls, api_version: str, kind: str, name: str) -> "ObjectRef":
        """A cluster-scoped object."""
        return cls(api_version=api_version, kind=kind, name=name)

    @classmethod
    def of(cls, obj: dict) -> "ObjectRef":
        """The reference of an object: apiVersion, kind, metadata.name (and namespace if
        present). A :class:`PermanentError` when one is missing."""
        av = _api_version(obj)
        if av is None:
            raise PermanentError("object has no apiVersion")
        k = _kind(obj)
        if k is None:
            raise PermanentError("object has no kind")
        return cls(api_version=av, kind=k, namespace=_namespace(obj), name=require_name(obj))

    @property
    def group(self) -> str:
        """The API group (``""`` for the core group)."""
        return group_of(self.api_version)

    def to_dict(self) -> dict:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace is not None:
            out["namespace"] = self.namespace
        return out


def _ref(target: Union[ObjectRef, dict]) -> ObjectRef:
    return target if isinstance(target, ObjectRef) else ObjectRef.of(target)


@dataclasses.dataclass
class CreateIntent:
    """Create or converge a whole object with server-side apply."""

    object: dict
    force: bool = False
    owned_by_trigger: bool = False

    verb = "create"

    @property
    def target(self) -> ObjectRef:
        return ObjectRef.of(self.object)

    def to_dict(self) -> dict:
        """The intent as a conformance test case writes it."""
        return {
            "create": {
                "object": self.object,
                "ownedByTrigger": self.owned_by_trigger,
                "force": self.force,
            }
        }


@dataclasses.dataclass
class PatchIntent:
    """Change part of an existing object (server-side apply or JSON merge patch)."""

    target: ObjectRef
    body: dict
    strategy: PatchStrategy = "apply"
    status: bool = False
    force: bool = False

    @property
    def verb(self) -> str:
        return "patch-status" if self.status else "patch"

    def to_dict(self) -> dict:
        return {
            "patch": {
                "target": self.target.to_dict(),
                "body": self.body,
                "strategy": self.strategy,
                "status": self.status,
                "force": self.force,
            }
        }


@dataclasses.dataclass
class DeleteIntent:
    """Delete an object, optionally only if it still has this uid / resourceVersion."""

    target: ObjectRef
    uid: Optional[str] = None
    resource_version: Optional[str] = None
    propagation: Optional[Propagation] = None

    verb = "delete"
    force = False

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"target": self.target.to_dict()}
        if self.uid is not None:
            out["uid"] = self.uid
        if self.resource_version is not None:
            out["resourceVersion"] = self.resource_version
        if self.propagation is not None:
            out["propagation"] = self.propagation
        return {"delete": out}


Intent = Union[CreateIntent, PatchIntent, DeleteIntent]


def create(obj: dict, *, owned_by_trigger: bool = False, force: bool = False) -> CreateIntent:
    """Create or converge ``obj`` (a complete object: apiVersion, kind, metadata.name, and
    metadata.namespace for namespaced kinds). ``owned_by_trigger``: the host makes the
    triggering object its controller owner, so deleting that deletes this. ``force``: take
    fields other managers own (needs a grant with ``allow_force``)."""
    return CreateIntent(object=obj, force=force, owned_by_trigger=owned_by_trigger)


def apply_patch(
    target: Union[ObjectRef, dict], body: dict, *, status: bool = False, force: bool = False
) -> PatchIntent:
    """Server-side apply ``body`` (a partial object with the fields this plugin manages) to
    ``target`` (an :class:`ObjectRef` or an object). ``status``: patch the status
    subresource."""
    return PatchIntent(target=_ref(target), body=body, strategy="apply", status=status, force=force)


def merge_patch(
    target: Union[ObjectRef, dict], body: dict, *, status: bool = False
) -> PatchIntent:
    """A JSON merge patch (RFC 7386) of ``target``: no field ownership."""
    return PatchIntent(target=_ref(target), body=body, strategy="merge", status=status)


def delete(
    target: Union[ObjectRef, dict],
    *,
    uid: Optional[str] = None,
    resource_version: Optional[str] = None,
    propagation: Optional[Propagation] = None,
) -> DeleteIntent:
    """Delete ``target``. ``propagation``: ``"Background"``, ``"Foreground"`` or
    ``"Orphan"`` (``None``: the server's default)."""
    if propagation is not None and propagation not in PROPAGATIONS:
        raise ValueError(f"propagation must be one of {PROPAGATIONS}, not {propagation!r}")
    return DeleteIntent(
        target=_ref(target), uid=uid, resource_version=resource_version, propagation=propagation
    )
