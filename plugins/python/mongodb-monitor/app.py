"""mongodb-monitor, in Python: the twin of plugins/rust/mongodb-monitor (Rust).

Watch what you don't own: for every ``MongoDB`` (``mongodb.com/v1``) in any namespace,
whoever created it, ask for a Prometheus Operator ``ServiceMonitor``
(``monitoring.coreos.com/v1``) named ``<db>-monitor`` in the same namespace, selecting the
database's Services (``app: <db>``) and scraping their ``metrics`` port. The ServiceMonitor is
owned by the MongoDB, so a ``deleted`` event needs no intents. It uses nothing of a MongoDB
but its identity and ``metadata.deletionTimestamp``, and declares so (``FIELDS``): the host
delivers and caches only those.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, Optional

import kubewasm
from kubewasm import Event, Grant, Manifest, PermanentError, Watch, create, log, obj

NAME = "mongodb-monitor"
VERSION = "0.1.0"
WATCH_ID = "mongodbs"
#: The fields of a MongoDB the plugin uses beyond its identity (apiVersion, kind, name,
#: namespace, uid), which the host always keeps: its projection.
FIELDS = ["metadata.deletionTimestamp"]


@dataclass
class Settings:
    """mongodb-monitor.yaml; every field is optional."""

    namespace: Optional[str] = None
    interval: str = "30s"  # a Prometheus duration
    port: str = "metrics"  # the Service port that serves metrics
    labels: Dict[str, str] = field(default_factory=dict)  # extra ServiceMonitor labels

    def validate(self) -> None:
        if not is_prometheus_duration(self.interval):
            raise ValueError(
                f"interval {json.dumps(self.interval, ensure_ascii=False)} is not a "
                "Prometheus duration (e.g. 30s, 1m30s)"
            )
        if not self.port:
            raise ValueError("port must not be empty")


# <digits><unit> groups, units in the order y w d h m s ms, each at most once.
_DURATION = re.compile(
    r"(?:[0-9]+y)?(?:[0-9]+w)?(?:[0-9]+d)?(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?(?:[0-9]+ms)?"
)


def is_prometheus_duration(s: str) -> bool:
    """Whether ``s`` is a Prometheus duration (``0`` alone is allowed too)."""
    return s == "0" or (s != "" and _DURATION.fullmatch(s) is not None)


def manifest(settings: Settings) -> Manifest:
    """Watch MongoDBs; create ServiceMonitors."""
    ns = settings.namespace
    return (
        Manifest(NAME, VERSION)
        .watch(Watch.kind(WATCH_ID, "mongodb.com/v1", "MongoDB", namespace=ns, fields=FIELDS))
        .grant(Grant.on("monitoring.coreos.com", "ServiceMonitor").create().namespace(ns))
    )


def handle_event(event: Event, settings: Settings) -> list:
    """A ServiceMonitor for every live MongoDB; nothing on deletion."""
    if event.is_deleted:
        return []
    db = event.object
    if obj.is_being_deleted(db):
        return []
    monitor = service_monitor_for(db, settings)
    log.info(
        f"monitoring MongoDB {obj.namespace(db) or ''}/{obj.name(db) or ''} "
        f"with ServiceMonitor {json.dumps(monitor['metadata']['name'], ensure_ascii=False)}"
    )
    return [create(monitor, owned_by_trigger=True)]


def service_monitor_for(db: dict, settings: Settings) -> dict:
    """The ServiceMonitor for one MongoDB."""
    if obj.api_version(db) != "mongodb.com/v1" or obj.kind(db) != "MongoDB":
        raise PermanentError(
            f"expected a mongodb.com/v1 MongoDB, got "
            f"{obj.api_version(db) or '?'} {obj.kind(db) or '?'}"
        )
    name = obj.require_name(db)
    namespace = obj.namespace(db)
    if namespace is None:
        raise PermanentError("MongoDB has no metadata.namespace")
    labels = dict(settings.labels)
    labels["app.kubernetes.io/managed-by"] = "kubewasm"
    labels["app"] = name
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": f"{name}-monitor", "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "endpoints": [{"port": settings.port, "interval": settings.interval}],
        },
    }


@kubewasm.plugin
class MongoDbMonitor(kubewasm.Plugin):
    Settings = Settings

    def describe(self, settings: Settings) -> Manifest:
        settings.validate()
        return manifest(settings)

    def handle(self, event: Event, settings: Settings) -> list:
        return handle_event(event, settings)
