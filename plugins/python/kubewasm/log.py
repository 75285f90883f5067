"""Logging through the host: lines go to the host's log, tagged with the plugin and the
object being handled. ``from kubewasm import log; log.info(f"provisioning {name}")``.

Natively (tests) lines are kept for :func:`kubewasm.testing.take_logs`.
"""

from __future__ import annotations

import sys

from . import testing

__all__ = ["log", "trace", "debug", "info", "warn", "warning", "error", "LEVELS"]

LEVELS = ("trace", "debug", "info", "warn", "error")

if sys.platform == "wasi":  # inside the component: the WIT import
    from wit_world.imports import host as _host
    from wit_world.imports import types as _types

    _WIT_LEVELS = {
        "trace": _types.LogLevel.TRACE,
        "debug": _types.LogLevel.DEBUG,
        "info": _types.LogLevel.INFO,
        "warn": _types.LogLevel.WARN,
        "error": _types.LogLevel.ERROR,
    }

    def log(level: str, message: str) -> None:
        """Writes one line at ``level`` (trace, debug, info, warn, error)."""
        _host.log(_WIT_LEVELS[level], str(message))

else:

    def log(level: str, message: str) -> None:
        """Writes one line at ``level`` (trace, debug, info, warn, error)."""
        if level not in LEVELS:
            raise ValueError(f"log level must be one of {LEVELS}, not {level!r}")
        testing.record_log(level, str(message))


def trace(message: str) -> None:
    log("trace", message)


def debug(message: str) -> None:
    log("debug", message)


def info(message: str) -> None:
    log("info", message)


def warn(message: str) -> None:
    log("warn", message)


warning = warn


def error(message: str) -> None:
    log("error", message)
