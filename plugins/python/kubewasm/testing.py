"""Stand-ins for the host when a plugin runs natively (pytest, unittest).

``log`` lines are kept for :func:`take_logs`; ``host.get``/``host.list`` read the objects
given to :func:`set_objects`. Inside the component these are never used.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

__all__ = ["set_objects", "take_logs", "objects", "MAX_LOGS"]

MAX_LOGS = 10_000
_logs: list[tuple[str, str]] = []
_objects: list[dict] = []


def record_log(level: str, message: str) -> None:
    if len(_logs) >= MAX_LOGS:
        del _logs[: MAX_LOGS // 2]
    _logs.append((level, message))


def take_logs() -> list[tuple[str, str]]:
    """The ``(level, message)`` lines logged since the last call."""
    out = list(_logs)
    _logs.clear()
    return out


def set_objects(objs: Iterable[dict]) -> None:
    """The objects ``host.get``/``host.list`` serve natively (the cluster of a test)."""
    _objects[:] = [copy.deepcopy(o) for o in objs]


def objects() -> list[dict]:
    return _objects


def matches_selector(obj: dict, selector: str | None) -> bool:
    """Equality-based label selectors (``a=b,c!=d,e``, ``!f``) for the native stand-in."""
    if not selector:
        return True
    labels: dict[str, Any] = (obj.get("metadata") or {}).get("labels") or {}
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            continue
        if "!=" in term:
            k, v = (s.strip() for s in term.split("!=", 1))
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True
