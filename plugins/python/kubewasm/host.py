"""Read-only access to the host's caches (an informer lister, not a live API call).

A plugin may read the kinds it watches and those its manifest lists in ``reads``. Errors
from the host (a read that is not allowed, a kind not cached yet) raise
:class:`RetryableError`, so the host retries the event later.

Natively these read the objects given to :func:`kubewasm.testing.set_objects`.
"""

from __future__ import annotations

import sys
from typing import List, Optional

from . import testing
from .errors import RetryableError
from .schema import loads

__all__ = ["get", "list_objects"]


if sys.platform == "wasi":
    from componentize_py_types import Err as _Err
    from wit_world.imports import host as _host

    def _get(api_version: str, kind: str, namespace: Optional[str], name: str) -> Optional[str]:
        try:
            return _host.get(api_version, kind, namespace, name)
        except _Err as e:
            raise RetryableError(f"host.get {kind} {name}: {e.value}") from None

    def _list(api_version: str, kind: str, namespace: Optional[str], selector: Optional[str]) -> List[str]:
        try:
            return _host.list(api_version, kind, namespace, selector)
        except _Err as e:
            raise RetryableError(f"host.list {kind}: {e.value}") from None

else:
    import json

    def _native(api_version: str, kind: str, namespace: Optional[str]) -> List[dict]:
        out = []
        for o in testing.objects():
            meta = o.get("metadata") or {}
            if o.get("apiVersion") != api_version or o.get("kind") != kind:
                continue
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            out.append(o)
        return out

    def _get(api_version: str, kind: str, namespace: Optional[str], name: str) -> Optional[str]:
        for o in _native(api_version, kind, namespace):
            if (o.get("metadata") or {}).get("name") == name:
                return json.dumps(o)
        return None

    def _list(api_version: str, kind: str, namespace: Optional[str], selector: Optional[str]) -> List[str]:
        return [
            json.dumps(o)
            for o in _native(api_version, kind, namespace)
            if testing.matches_selector(o, selector)
        ]


def _parse(text: str, kind: str) -> dict:
    try:
        return loads(text)
    except ValueError as e:
        raise RetryableError(f"host returned invalid JSON for {kind}: {e}") from None


def get(api_version: str, kind: str, namespace: Optional[str], name: str) -> Optional[dict]:
    """One object from the cache, or ``None``. ``namespace=None`` for cluster-scoped kinds."""
    raw = _get(api_version, kind, namespace, name)
    return None if raw is None else _parse(raw, kind)


def list_objects(
    api_version: str, kind: str, namespace: Optional[str] = None, label_selector: Optional[str] = None
) -> List[dict]:
    """The cached objects of a kind, in one namespace (or all), optionally filtered by a
    label selector such as ``app=web``."""
    return [_parse(raw, kind) for raw in _list(api_version, kind, namespace, label_selector)]


# ``host.list(...)`` reads naturally; it shadows the builtin only inside this module's namespace.
list = list_objects  # noqa: A001
