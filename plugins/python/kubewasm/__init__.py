"""kubewasm for Python: write kubewasm plugins with plain dicts.

A plugin is a class with ``describe(settings) -> Manifest`` and
``handle(event, settings) -> list of intents``; :func:`plugin` exports it as the
``kubewasm:plugin/plugin`` world's ``handler`` when componentize-py builds the component.
Everything except :mod:`kubewasm.log` and :mod:`kubewasm.host` is pure Python and runs
natively under pytest; natively those two use :mod:`kubewasm.testing`.
"""

from . import host, log, obj, schema, testing
from .errors import HandleError, PermanentError, RetryableError
from .event import Event
from .intents import (
    CreateIntent,
    DeleteIntent,
    Intent,
    ObjectRef,
    PatchIntent,
    apply_patch,
    create,
    delete,
    merge_patch,
)
from .manifest import Grant, KindRef, Manifest, Read, Watch
from .obj import Condition, OwnerReference
from .plugin import Plugin, SettingsError, describe, export, handle, parse_settings, plugin
from .schema import I32, I64, U32, U64

__all__ = [
    "Condition",
    "CreateIntent",
    "DeleteIntent",
    "Event",
    "Grant",
    "HandleError",
    "I32",
    "I64",
    "Intent",
    "KindRef",
    "Manifest",
    "ObjectRef",
    "OwnerReference",
    "PatchIntent",
    "PermanentError",
    "Plugin",
    "Read",
    "RetryableError",
    "SettingsError",
    "U32",
    "U64",
    "Watch",
    "apply_patch",
    "create",
    "delete",
    "describe",
    "export",
    "handle",
    "host",
    "log",
    "merge_patch",
    "obj",
    "parse_settings",
    "plugin",
    "schema",
    "testing",
]

__version__ = "0.1.0"
