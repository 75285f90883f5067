"""{{name}}: every ConfigMap labelled ``kubewasm.dev/copy: "true"`` gets a copy named
``<name>-<suffix>`` in its namespace, annotated ``kubewasm.dev/copied-from: <ns>/<name>`` and
owned by the original (so it is garbage-collected with it). The copy carries no labels, so it
is not copied again.

componentize-py exports this module's ``Handler`` (defined by ``@kubewasm.plugin``); import
everything at the top: the component has no file system at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

import kubewasm
from kubewasm import Event, Grant, Manifest, PermanentError, Watch, create, log, obj

NAME = "{{name}}"
WATCH_ID = "configmaps"
SELECTOR = "kubewasm.dev/copy=true"
COPIED_FROM = "kubewasm.dev/copied-from"


@dataclass
class Settings:
    """{{name}}.yaml; every field needs a default."""

    suffix: str = "copy"  # the copy of NAME is called NAME-<suffix>


@kubewasm.plugin
class Copier(kubewasm.Plugin):
    Settings = Settings

    def describe(self, settings: Settings) -> Manifest:
        return (
            Manifest(NAME, "0.1.0")
            .watch(Watch.kind(WATCH_ID, "v1", "ConfigMap", label_selector=SELECTOR))  # what to receive
            .grant(Grant.on("", "ConfigMap").create())  # what it may write
        )

    def handle(self, event: Event, settings: Settings) -> list:
        if event.is_deleted:
            return []  # the copy is owned by the original: GC removes it
        cm = event.object  # malformed JSON: a PermanentError
        if obj.is_being_deleted(cm):
            return []
        name = obj.require_name(cm)
        namespace = obj.namespace(cm)
        if namespace is None:
            raise PermanentError("ConfigMap has no metadata.namespace")
        copy = f"{name}-{settings.suffix}"
        log.info(f"copying ConfigMap {namespace}/{name} to {copy}")
        data = cm.get("data")
        return [
            create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": copy,
                        "namespace": namespace,
                        "annotations": {COPIED_FROM: f"{namespace}/{name}"},
                    },
                    "data": data if isinstance(data, dict) else {},
                },
                owned_by_trigger=True,
            )
        ]
