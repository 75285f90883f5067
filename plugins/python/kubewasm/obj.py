"""Plain-dict Kubernetes objects: metadata accessors, owner references, conditions.

Objects are the dicts ``json.loads`` gives (unstructured, as the API server serves them).
The accessors never raise on odd shapes: they return ``None`` when a field is missing or
has the wrong type.

>>> from kubewasm import obj
>>> cm = {"apiVersion": "v1", "kind": "ConfigMap",
...       "metadata": {"name": "c", "namespace": "ns", "labels": {"app": "web"}},
...       "status": {"state": "Available"}}
>>> obj.name(cm), obj.label(cm, "app"), obj.str_at(cm, "/status/state")
('c', 'web', 'Available')
>>> obj.is_being_deleted(cm)
False
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from .errors import PermanentError
from .schema import is_json_int

__all__ = [
    "Condition",
    "OwnerReference",
    "annotation",
    "api_version",
    "generation",
    "group_of",
    "is_being_deleted",
    "is_owned_by",
    "kind",
    "label",
    "name",
    "namespace",
    "now_rfc3339",
    "pointer",
    "require_name",
    "resource_version",
    "str_at",
    "uid",
]

_MISSING = object()


def pointer(obj: Any, path: str, default: Any = None) -> Any:
    """The value at a JSON pointer (RFC 6901), e.g. ``"/status/conditions/0/type"``;
    ``default`` when there is none. ``""`` is the whole object."""
    if path == "":
        return obj
    if not path.startswith("/"):
        return default
    current = obj
    for token, index in _tokens(path):
        if isinstance(current, dict):
            current = current.get(token, _MISSING)
        elif isinstance(current, list):
            if index < 0:
                return default
            current = current[index] if index < len(current) else _MISSING
        else:
            return default
        if current is _MISSING:
            return default
    return current


# Parsed pointers by text: plugins read a handful of constant paths on every call. Paths
# built at run time must not grow the cache forever.
_pointers: dict[str, tuple[tuple[str, int], ...]] = {}
_MAX_CACHED_POINTERS = 512


def _tokens(path: str) -> tuple[tuple[str, int], ...]:
    """``path``'s unescaped tokens, each with the list index it names (-1 if none)."""
    tokens = _pointers.get(path)
    if tokens is None:
        parsed = []
        for token in path[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            is_index = token.isascii() and token.isdigit() and (len(token) == 1 or token[0] != "0")
            parsed.append((token, int(token) if is_index else -1))
        tokens = tuple(parsed)
        if len(_pointers) < _MAX_CACHED_POINTERS:
            _pointers[path] = tokens
    return tokens


def str_at(obj: Any, path: str) -> str | None:
    """The string at a JSON pointer, or ``None``."""
    value = pointer(obj, path)
    return value if isinstance(value, str) else None


def _top_str(obj: Any, key: str) -> str | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def api_version(obj: Any) -> str | None:
    """``apiVersion``."""
    return _top_str(obj, "apiVersion")


def kind(obj: Any) -> str | None:
    """``kind``."""
    return _top_str(obj, "kind")


def name(obj: Any) -> str | None:
    """``metadata.name``."""
    return str_at(obj, "/metadata/name")


def namespace(obj: Any) -> str | None:
    """``metadata.namespace``."""
    return str_at(obj, "/metadata/namespace")


def uid(obj: Any) -> str | None:
    """``metadata.uid``."""
    return str_at(obj, "/metadata/uid")


def resource_version(obj: Any) -> str | None:
    """``metadata.resourceVersion``."""
    return str_at(obj, "/metadata/resourceVersion")


def generation(obj: Any) -> int | None:
    """``metadata.generation`` when it is an integer."""
    value = pointer(obj, "/metadata/generation")
    return value if is_json_int(value) else None


def _map_entry(obj: Any, path: str, key: str) -> str | None:
    mapping = pointer(obj, path)
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, str) else None


def label(obj: Any, key: str) -> str | None:
    """``metadata.labels[key]``."""
    return _map_entry(obj, "/metadata/labels", key)


def annotation(obj: Any, key: str) -> str | None:
    """``metadata.annotations[key]``."""
    return _map_entry(obj, "/metadata/annotations", key)


def is_being_deleted(obj: Any) -> bool:
    """``metadata.deletionTimestamp`` is set: the object is going away."""
    return pointer(obj, "/metadata/deletionTimestamp") is not None


def require_name(obj: Any) -> str:
    """``metadata.name``; a :class:`PermanentError` when it is missing or empty."""
    value = name(obj)
    if not value:
        raise PermanentError("object has no metadata.name")
    return value


def group_of(api_version: str) -> str:
    """The API group of an apiVersion (``""`` for the core group ``v1``)."""
    group, sep, _ = api_version.rpartition("/")
    return group if sep else ""


@dataclasses.dataclass
class OwnerReference:
    """An entry of ``metadata.ownerReferences``.

    Usually not needed: ``create(obj, owned_by_trigger=True)`` makes the host add a controller
    reference to the triggering object. Use this to point at another owner.
    """

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None

    @classmethod
    def of(cls, owner: dict) -> "OwnerReference":
        """A plain reference to ``owner`` (needs apiVersion, kind, metadata.name, .uid)."""
        values = {}
        for attr, what, getter in (
            ("api_version", "apiVersion", api_version),
            ("kind", "kind", kind),
            ("name", "metadata.name", name),
            ("uid", "metadata.uid", uid),
        ):
            value = getter(owner)
            if value is None:
                raise PermanentError(f"owner has no {what}")
            values[attr] = value
        return cls(**values)

    @classmethod
    def controller_of(cls, owner: dict) -> "OwnerReference":
        """A controller reference (``controller: true``, ``blockOwnerDeletion: true``)."""
        ref = cls.of(owner)
        ref.controller = True
        ref.block_owner_deletion = True
        return ref

    def to_dict(self) -> dict:
        out = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        }
        if self.controller is not None:
            out["controller"] = self.controller
        if self.block_owner_deletion is not None:
            out["blockOwnerDeletion"] = self.block_owner_deletion
        return out

    def add_to(self, child: dict) -> dict:
        """Adds this reference to ``child``'s ``metadata.ownerReferences`` (replacing one
        with the same uid) and returns ``child``."""
        if not isinstance(child, dict):
            raise PermanentError("not a JSON object")
        metadata = child.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise PermanentError("metadata is not an object")
        refs = metadata.setdefault("ownerReferences", [])
        if not isinstance(refs, list):
            raise PermanentError("metadata.ownerReferences is not a list")
        refs[:] = [r for r in refs if not (isinstance(r, dict) and r.get("uid") == self.uid)]
        refs.append(self.to_dict())
        return child


def is_owned_by(obj: Any, owner_uid: str) -> bool:
    """Whether ``obj`` has an owner reference to the object with uid ``owner_uid``."""
    refs = pointer(obj, "/metadata/ownerReferences")
    return isinstance(refs, list) and any(
        isinstance(r, dict) and r.get("uid") == owner_uid for r in refs
    )


def now_rfc3339() -> str:
    """The current UTC time, RFC 3339 with second precision (``2026-01-02T03:04:05Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclasses.dataclass
class Condition:
    """A status condition in the Kubernetes convention (``metav1.Condition``).

    >>> site = {"metadata": {"generation": 2}, "status": {"conditions": [
    ...     {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    >>> c = (Condition("Ready", True, reason="ChildrenApplied")
    ...      .observed_generation_of(site).transitioned_from(site))
    >>> c.to_dict()["lastTransitionTime"], c.observed_generation
    ('2026-01-01T00:00:00Z', 2)
    """

    type: str
    status: str | bool = "Unknown"
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.status, bool):
            self.status = "True" if self.status else "False"

    def observed_generation_of(self, obj: Any) -> "Condition":
        """Sets ``observedGeneration`` from ``obj``'s ``metadata.generation``, if any."""
        self.observed_generation = generation(obj)
        return self

    def transitioned_from(self, obj: Any) -> "Condition":
        """Sets ``lastTransitionTime``: keeps the time of the same-type condition in
        ``obj``'s ``status.conditions`` when its status is unchanged (so re-applying is a
        no-op); the current time otherwise."""
        previous = None
        conditions = pointer(obj, "/status/conditions")
        if isinstance(conditions, list):
            previous = next(
                (c for c in conditions if isinstance(c, dict) and c.get("type") == self.type),
                None,
            )
        kept = None
        if previous is not None and previous.get("status") == self.status:
            kept = previous.get("lastTransitionTime")
        self.last_transition_time = kept if isinstance(kept, str) else now_rfc3339()
        return self

    def to_dict(self) -> dict:
        """The condition as JSON (empty reason/message and unset fields left out)."""
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        if self.last_transition_time is not None:
            out["lastTransitionTime"] = self.last_transition_time
        return out
