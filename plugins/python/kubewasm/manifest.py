"""The manifest a plugin returns from ``describe``: what it watches and what it may write.

>>> from kubewasm import Manifest, Grant, Watch
>>> m = (Manifest("mongodb-monitor", "0.1.0")
...      .watch(Watch.kind("mongodbs", "mongodb.com/v1", "MongoDB", namespace="shop"))
...      .grant(Grant.on("monitoring.coreos.com", "ServiceMonitor").create()))
>>> m.validate()
>>> m.watches[0].namespace
'shop'

A watch or a read may declare the fields the plugin uses (its projection, keyword
``fields``): events and reads of that kind then carry only those fields and the object's
identity (``apiVersion``, ``kind``, ``metadata.name``, ``namespace``, ``uid``,
``resourceVersion``), and the host caches less. No fields: whole objects.

>>> from kubewasm import Read
>>> m = (Manifest("pod-counter", "0.1.0")
...      .watch(Watch.kind("pods", "v1", "Pod", fields=["metadata.labels", "status.phase"]))
...      .read(Read.kind("v1", "Namespace", fields=["metadata"])))  # metadata only
>>> m.reads[0].fields
['metadata']
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, List, Literal, Optional, Union

from .intents import Intent
from .obj import group_of

__all__ = ["Grant", "Manifest", "Read", "ResourceRef", "Watch", "VERBS"]

Verb = Literal["create", "patch", "patch-status", "delete"]
VERBS = ("create", "patch", "patch-status", "delete")


@dataclasses.dataclass(frozen=True)
class KindRef:
    """A kind by apiVersion and kind."""

    api_version: str
    kind: str


#: What a watch (or a read) selects: a :class:`KindRef`, or a resource argument string as
#: kubectl takes it (``seldondeployments.v1.machinelearning.seldon.io``, ``configmaps``).
ResourceRef = Union[KindRef, str]


@dataclasses.dataclass
class Watch:
    """One kind of object the plugin wants events for.

    ``fields``: the fields the plugin uses (its projection), e.g.
    ``["spec.database", "status.phase", "metadata.labels"]``; empty: whole objects. Each is
    a path of keys joined by ``.``; a path keeps the whole value it reaches, a path crossing
    a list applies to every element (``spec.containers.image``), and ``metadata`` alone is a
    metadata-only projection. A key containing ``.`` (a label) is kept through its parent
    (``metadata.labels``). The identity is always kept.
    """

    id: str
    resource: ResourceRef
    namespace: Optional[str] = None
    label_selector: Optional[str] = None
    field_selector: Optional[str] = None
    fields: List[str] = dataclasses.field(default_factory=list)

    @classmethod
    def kind(cls, id: str, api_version: str, kind: str, **options: Any) -> "Watch":
        """Watch a kind: ``Watch.kind("dbs", "mongodb.com/v1", "MongoDB", namespace="x",
        fields=["status.phase"])``."""
        return cls(id, KindRef(api_version, kind), **options)

    @classmethod
    def resource(cls, id: str, resource: str, **options: Any) -> "Watch":
        """Watch a resource argument: ``seldondeployments.v1.machinelearning.seldon.io``."""
        return cls(id, resource, **options)


@dataclasses.dataclass
class Read:
    """A kind the plugin reads with ``host.get``/``host.list`` without watching it, and the
    fields it uses there (``fields``, as :class:`Watch`'s; empty: whole objects)."""

    resource: ResourceRef
    fields: List[str] = dataclasses.field(default_factory=list)

    @classmethod
    def kind(cls, api_version: str, kind: str, fields: Iterable[str] = ()) -> "Read":
        """Read a kind: ``Read.kind("v1", "Secret", fields=["data"])``."""
        return cls(KindRef(api_version, kind), list(fields))

    @classmethod
    def resource(cls, resource: str, fields: Iterable[str] = ()) -> "Read":
        """Read a resource argument: ``Read.resource("deployments.apps")``."""
        return cls(resource, list(fields))


@dataclasses.dataclass
class Grant:
    """Permission to write some objects; every intent must fall inside a grant.

    ``Grant.on("", "Service").create()`` or
    ``Grant(api_groups=[""], kinds=["Service"], verbs=["create"], namespaces=["web"])``.
    """

    api_groups: List[str] = dataclasses.field(default_factory=list)
    kinds: List[str] = dataclasses.field(default_factory=list)
    namespaces: List[str] = dataclasses.field(default_factory=list)
    verbs: List[Verb] = dataclasses.field(default_factory=list)
    allow_force: bool = False

    @classmethod
    def on(cls, api_group: str, kind: str) -> "Grant":
        """A grant on one kind of one API group (``""`` for the core group); add verbs
        with :meth:`create`, :meth:`patch`, :meth:`patch_status`, :meth:`delete`."""
        return cls(api_groups=[api_group], kinds=[kind])

    def group(self, api_group: str) -> "Grant":
        """Also cover this API group."""
        self.api_groups.append(api_group)
        return self

    def kind(self, kind: str) -> "Grant":
        """Also cover this kind."""
        self.kinds.append(kind)
        return self

    def namespace(self, namespace: Optional[str]) -> "Grant":
        """Restrict to (or add) a namespace; ``None`` leaves the grant as it is."""
        if namespace is not None:
            self.namespaces.append(namespace)
        return self

    def verb(self, verb: Verb) -> "Grant":
        if verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; one of {VERBS}")
        if verb not in self.verbs:
            self.verbs.append(verb)
        return self

    def create(self) -> "Grant":
        return self.verb("create")

    def patch(self) -> "Grant":
        return self.verb("patch")

    def patch_status(self) -> "Grant":
        return self.verb("patch-status")

    def delete(self) -> "Grant":
        return self.verb("delete")

    def force(self) -> "Grant":
        """Allow intents under this grant to set ``force``."""
        self.allow_force = True
        return self

    def covers(self, verb: str, api_group: str, kind: str, namespace: Optional[str], force: bool) -> bool:
        """Whether this grant allows ``verb`` on that kind and namespace, as the host checks."""
        return (
            verb in self.verbs
            and any(g in ("*", api_group) for g in self.api_groups)
            and any(k in ("*", kind) for k in self.kinds)
            and (not self.namespaces or (namespace is not None and namespace in self.namespaces))
            and (not force or self.allow_force)
        )


@dataclasses.dataclass
class Manifest:
    """What a plugin is and what it needs. Build it fluently:
    ``Manifest(name, version).watch(...).grant(...)``."""

    name: str
    version: str
    watches: List[Watch] = dataclasses.field(default_factory=list)
    grants: List[Grant] = dataclasses.field(default_factory=list)
    reads: List[Read] = dataclasses.field(default_factory=list)

    def watch(self, watch: Watch) -> "Manifest":
        self.watches.append(watch)
        return self

    def watch_kind(self, id: str, api_version: str, kind: str, **options: Any) -> "Manifest":
        return self.watch(Watch.kind(id, api_version, kind, **options))

    def watch_resource(self, id: str, resource: str, **options: Any) -> "Manifest":
        return self.watch(Watch.resource(id, resource, **options))

    def grant(self, grant: Grant) -> "Manifest":
        self.grants.append(grant)
        return self

    def read(self, read: Read) -> "Manifest":
        """A kind read with ``host.get``/``host.list`` without watching it (a :class:`Read`)."""
        self.reads.append(read)
        return self

    def read_kind(self, api_version: str, kind: str, fields: Iterable[str] = ()) -> "Manifest":
        """A kind read with ``host.get``/``host.list`` without watching it."""
        return self.read(Read.kind(api_version, kind, fields))

    def read_resource(self, resource: str, fields: Iterable[str] = ()) -> "Manifest":
        """A resource argument read without watching it."""
        return self.read(Read.resource(resource, fields))

    def validate(self) -> None:
        """Checks what the host checks on load; raises ``ValueError``."""
        ok = (
            0 < len(self.name) <= 63
            and self.name.isascii()
            and all(c.isalnum() or c == "-" for c in self.name)
        )
        if not ok:
            raise ValueError(f"plugin name {self.name!r} must be 1-63 letters, digits or '-'")
        if not self.watches:
            raise ValueError(f"plugin {self.name} declares no watches")
        seen = set()
        for w in self.watches:
            if not w.id:
                raise ValueError("a watch has an empty id")
            if w.id in seen:
                raise ValueError(f"watch id {w.id!r} is declared twice")
            seen.add(w.id)

    def permits(self, intent: Intent) -> None:
        """Raises ``PermissionError`` unless a grant allows ``intent`` (the host's check;
        use it in tests to keep grants and intents in step)."""
        target = intent.target
        force = bool(getattr(intent, "force", False))
        group = group_of(target.api_version)
        if any(g.covers(intent.verb, group, target.kind, target.namespace, force) for g in self.grants):
            return
        raise PermissionError(
            f"no grant allows {intent.verb}{' (forced)' if force else ''} on "
            f"{target.api_version} {target.kind} in namespace {target.namespace or '<cluster>'}"
        )
