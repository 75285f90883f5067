"""The event a plugin handles, with its objects decoded on demand.

Objects arrive as JSON text, exactly as the API server serves them. ``event.object`` is that
text parsed into a dict; ``event.decode(MyView)`` decodes it strictly into a dataclass (see
:mod:`kubewasm.schema`). A malformed object raises :class:`PermanentError`, so the host drops
the event instead of retrying it forever.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Type, TypeVar

from .errors import PermanentError
from .schema import DecodeError, decode_json, loads

__all__ = ["Event", "EVENT_TYPES"]

EVENT_TYPES = ("added", "modified", "deleted", "resync")
T = TypeVar("T")


def _parse_object(text: str, what: str) -> dict:
    try:
        value = loads(text)
    except ValueError as e:
        raise PermanentError(f"{what} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise PermanentError(f"{what} is not a JSON object")
    return value


class Event:
    """One change to one object: ``type`` is ``added``, ``modified``, ``deleted`` or
    ``resync``; ``watch_id`` the id of the watch that matched."""

    __slots__ = ("type", "watch_id", "raw_object", "raw_old_object", "_object", "_old")

    def __init__(
        self, type: str, watch_id: str, raw_object: str, raw_old_object: Optional[str] = None
    ) -> None:
        if type not in EVENT_TYPES:
            raise ValueError(f"event type must be one of {EVENT_TYPES}, not {type!r}")
        self.type = type
        self.watch_id = watch_id
        self.raw_object = raw_object
        self.raw_old_object = raw_old_object
        self._object: Optional[dict] = None
        self._old: Optional[dict] = None

    # Constructors for tests.
    @classmethod
    def added(cls, watch_id: str, obj: Any) -> "Event":
        return cls("added", watch_id, json.dumps(obj))

    @classmethod
    def modified(cls, watch_id: str, old: Any, new: Any) -> "Event":
        return cls("modified", watch_id, json.dumps(new), json.dumps(old))

    @classmethod
    def deleted(cls, watch_id: str, obj: Any) -> "Event":
        return cls("deleted", watch_id, json.dumps(obj))

    @classmethod
    def resync(cls, watch_id: str, obj: Any) -> "Event":
        return cls("resync", watch_id, json.dumps(obj))

    @property
    def is_added(self) -> bool:
        return self.type == "added"

    @property
    def is_modified(self) -> bool:
        return self.type == "modified"

    @property
    def is_deleted(self) -> bool:
        return self.type == "deleted"

    @property
    def is_resync(self) -> bool:
        return self.type == "resync"

    @property
    def object(self) -> dict:
        """The object as a dict (parsed once). :class:`PermanentError` unless it is a JSON
        object."""
        if self._object is None:
            self._object = _parse_object(self.raw_object, "object")
        return self._object

    @property
    def old_object(self) -> Optional[dict]:
        """The previous object of a ``modified`` event, or ``None``."""
        if self.raw_old_object is None:
            return None
        if self._old is None:
            self._old = _parse_object(self.raw_old_object, "old object")
        return self._old

    def decode(self, view: Type[T]) -> T:
        """The object decoded into ``view`` (a dataclass; unknown fields are ignored).
        :class:`PermanentError` when it does not fit."""
        return _decode(view, self.raw_object, "object")

    def decode_old(self, view: Type[T]) -> Optional[T]:
        """The previous object decoded into ``view``, or ``None`` when there is none."""
        if self.raw_old_object is None:
            return None
        return _decode(view, self.raw_old_object, "old object")

    def __repr__(self) -> str:
        return f"Event({self.type!r}, {self.watch_id!r}, {self.raw_object[:60]!r}...)"


def _decode(view: Type[T], text: str, what: str) -> T:
    try:
        return decode_json(view, text, strict=False)
    except DecodeError as e:
        name = f"{view.__module__}::{view.__qualname__}"
        raise PermanentError(f"{what} does not decode as {name}: {e}") from None
