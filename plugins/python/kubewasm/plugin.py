"""The plugin base class, running a plugin the way the host does, and the WIT export glue.

A plugin module (``app.py``) looks like::

    import kubewasm
    from kubewasm import Event, Manifest, Grant, create

    @dataclass
    class Settings:               # the NAME.yaml beside the .wasm; all fields need defaults
        suffix: str = "copy"

    @kubewasm.plugin              # defines the module's `Handler`, what componentize-py exports
    class Copier(kubewasm.Plugin):
        Settings = Settings

        def describe(self, settings: Settings) -> Manifest: ...
        def handle(self, event: Event, settings: Settings) -> list: ...
"""

from __future__ import annotations

import sys
import traceback
from typing import Any, List, Optional

from .errors import HandleError, PermanentError, RetryableError
from .event import Event
from .intents import Intent
from .manifest import Manifest
from .schema import DecodeError, decode_json

if sys.platform == "wasi":
    # Inside the component every import must happen now, while componentize-py snapshots the
    # interpreter: at run time there is no file system to import from.
    from componentize_py_types import Err

    from . import _wit

__all__ = ["Plugin", "SettingsError", "describe", "export", "handle", "parse_settings", "plugin"]


class SettingsError(ValueError):
    """The settings file does not fit the plugin's ``Settings``."""


class Plugin:
    """Base class of a plugin. Override :meth:`describe` and :meth:`handle`.

    ``Settings``: a dataclass whose fields all have defaults, decoded strictly from the
    settings file (unknown fields are errors, like the Rust SDK's ``deny_unknown_fields``);
    ``None`` (the default) passes the settings as a plain dict (``{}`` without a file).

    Plugins are stateless: the host may use a fresh instance for any event.
    """

    Settings: Optional[type] = None

    def describe(self, settings: Any) -> Manifest:
        """Name, version, watches, grants. Raise (any exception) to reject the plugin."""
        raise NotImplementedError

    def handle(self, event: Event, settings: Any) -> List[Intent]:
        """The writes for one event. Raise :class:`PermanentError` for input that retrying
        cannot fix, :class:`RetryableError` for transient trouble."""
        raise NotImplementedError


def parse_settings(settings_type: Optional[type], text: Optional[str]) -> Any:
    """Decodes the settings JSON the host passes. ``None``, empty or ``null`` give the
    defaults. Raises :class:`SettingsError`."""
    stripped = None if text is None else text.strip()
    if stripped in (None, "", "null"):
        if settings_type is None:
            return {}
        try:
            return settings_type()
        except TypeError as e:
            raise SettingsError(f"invalid settings: {e}") from None
    try:
        return decode_json(settings_type if settings_type is not None else Any, stripped)
    except DecodeError as e:
        raise SettingsError(f"invalid settings: {e}") from None


def _instance(p: Any) -> Plugin:
    return p() if isinstance(p, type) else p


def describe(plugin: Any, settings: Optional[str] = None) -> Manifest:
    """``describe`` as the host calls it: settings JSON in, validated manifest out."""
    p = _instance(plugin)
    manifest = p.describe(parse_settings(p.Settings, settings))
    if not isinstance(manifest, Manifest):
        raise TypeError(f"describe returned {type(manifest).__name__}, not a Manifest")
    manifest.validate()
    return manifest


# Decoded settings by (Settings type, settings text): the host passes the same text on every
# call of an instance, so it is decoded once. A plugin gets the same settings object on
# every call and must treat it as read-only.
_settings_cache: dict = {}
_MAX_CACHED_SETTINGS = 8


def _settings_for(settings_type: Optional[type], text: Optional[str]) -> Any:
    key = (settings_type, text)
    hit = _settings_cache.get(key)
    if hit is None:
        try:
            hit = (True, parse_settings(settings_type, text))
        except SettingsError as e:
            hit = (False, str(e))
        if len(_settings_cache) >= _MAX_CACHED_SETTINGS:
            _settings_cache.clear()
        _settings_cache[key] = hit
    ok, value = hit
    if not ok:
        raise PermanentError(value)
    return value


def handle(plugin: Any, event: Event, settings: Optional[str] = None) -> List[Intent]:
    """``handle`` as the host calls it. Invalid settings are a :class:`PermanentError`.
    Settings are decoded once per settings text and shared between calls (read-only)."""
    p = _instance(plugin)
    parsed = _settings_for(p.Settings, settings)
    intents = p.handle(event, parsed)
    return [] if intents is None else list(intents)


def export(plugin_cls: type) -> type:
    """The class componentize-py exports as the WIT ``handler`` interface for
    ``plugin_cls``. Assign it to ``Handler`` in the app module (or use :func:`plugin`)."""

    class Handler:
        def describe(self, settings: Optional[str]):
            try:
                return _wit.manifest(describe(plugin_cls, settings))
            except Exception as e:  # any failure rejects the plugin with a message
                raise Err(str(e) or type(e).__name__) from None

        def handle(self, event, settings: Optional[str]):
            try:
                intents = handle(plugin_cls, _wit.event(event), settings)
                return [_wit.intent(i) for i in intents]
            except HandleError as e:
                raise Err(_wit.handle_error(e.message, e.retry)) from None
            except Exception as e:
                # A bug in the plugin: report it with its location and let the host retry,
                # as it would after a trap.
                where = traceback.extract_tb(e.__traceback__)[-1:]
                at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
                raise Err(
                    _wit.handle_error(f"plugin raised {type(e).__name__}: {e}{at}", True)
                ) from None

    Handler.__name__ = Handler.__qualname__ = "Handler"
    Handler.__doc__ = f"WIT export glue for {plugin_cls.__name__}."
    return Handler


def plugin(cls: type) -> type:
    """Class decorator: exports ``cls`` by defining ``Handler`` in its module (what
    componentize-py looks for). Returns ``cls`` unchanged."""
    module = sys.modules.get(cls.__module__)
    if module is not None:
        module.Handler = export(cls)  # type: ignore[attr-defined]
    return cls
