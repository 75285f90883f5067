"""seldon-endpoint, in Python: the twin of plugins/rust/seldon-endpoint (Rust).

Know when it's ready: watch ``SeldonDeployment``s by resource string
(``seldondeployments.v1.machinelearning.seldon.io``) and, when one **becomes** ``Available``
(``status.state``), ask for

1. an ``Ingress`` (``networking.k8s.io/v1``) named ``<sd>`` for host
   ``<sd>.<namespace>.<domain>``, path ``/`` (Prefix) to Service ``<sd>-<predictor>`` port
   8000, owned by the SeldonDeployment;
2. an annotation ``kubewasm.dev/public-url: http://<host>/`` on the SeldonDeployment
   (server-side apply, so only that annotation is this plugin's).

"Becomes" means: an ``added`` or ``resync`` event of an Available object, or a ``modified``
event whose previous state was not Available.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import List, Optional

import kubewasm
from kubewasm import I32, Event, Grant, Manifest, ObjectRef, PermanentError, Watch
from kubewasm import apply_patch, create, log

NAME = "seldon-endpoint"
VERSION = "0.1.0"
WATCH_ID = "seldondeployments"
RESOURCE = "seldondeployments.v1.machinelearning.seldon.io"
URL_ANNOTATION = "kubewasm.dev/public-url"


@dataclass
class Settings:
    """seldon-endpoint.yaml; every field is optional."""

    namespace: Optional[str] = None
    domain: str = "example.com"  # hosts are <name>.<namespace>.<domain>
    ingress_class_name: Optional[str] = None  # None: the cluster's default class
    service_port: I32 = 8000


# The parts of a SeldonDeployment this plugin reads: typed views, unknown fields ignored.
@dataclass
class Metadata:
    name: str
    namespace: Optional[str]
    deletion_timestamp: Optional[str]


@dataclass
class Predictor:
    name: Optional[str]


@dataclass
class Spec:
    predictors: List[Predictor] = field(default_factory=list)


@dataclass
class Status:
    state: Optional[str]


@dataclass
class SeldonDeployment:
    api_version: str
    kind: str
    metadata: Metadata
    spec: Spec = field(default_factory=Spec)
    status: Optional[Status] = None

    @property
    def is_available(self) -> bool:
        return self.status is not None and self.status.state == "Available"


def manifest(settings: Settings) -> Manifest:
    """Watch SeldonDeployments; create Ingresses; patch SeldonDeployments."""
    ns = settings.namespace
    return (
        Manifest(NAME, VERSION)
        .watch(Watch.resource(WATCH_ID, RESOURCE, namespace=ns))
        .grant(Grant.on("networking.k8s.io", "Ingress").create().namespace(ns))
        .grant(Grant.on("machinelearning.seldon.io", "SeldonDeployment").patch().namespace(ns))
    )


def becomes_available(event: Event) -> bool:
    """Whether this event is the moment the deployment becomes Available."""
    if event.is_deleted:
        return False
    now = event.decode(SeldonDeployment)
    if not now.is_available or now.metadata.deletion_timestamp is not None:
        return False
    if event.is_modified:
        before = event.decode_old(SeldonDeployment)
        return not (before is not None and before.is_available)
    return True


def handle_event(event: Event, settings: Settings) -> list:
    """Exposes the deployment when it becomes Available; nothing otherwise."""
    if not becomes_available(event):
        return []
    return expose(event.decode(SeldonDeployment), settings)


def _namespace_of(sd: SeldonDeployment) -> str:
    if not sd.metadata.namespace:
        raise PermanentError("SeldonDeployment has no metadata.namespace")
    return sd.metadata.namespace


def host_for(sd: SeldonDeployment, settings: Settings) -> str:
    """The public host name: ``<name>.<namespace>.<domain>``."""
    return f"{sd.metadata.name}.{_namespace_of(sd)}.{settings.domain}"


def expose(sd: SeldonDeployment, settings: Settings) -> list:
    """The Ingress and the URL annotation for an Available deployment."""
    name = sd.metadata.name
    if not name:
        raise PermanentError("SeldonDeployment has no metadata.name")
    namespace = _namespace_of(sd)
    host = host_for(sd, settings)
    first = sd.spec.predictors[0].name if sd.spec.predictors else None
    predictor = first or "default"
    url = f"http://{host}/"

    spec: dict = {}
    if settings.ingress_class_name is not None:
        spec["ingressClassName"] = settings.ingress_class_name
    spec["rules"] = [
        {
            "host": host,
            "http": {
                "paths": [
                    {
                        "path": "/",
                        "pathType": "Prefix",
                        "backend": {
                            "service": {
                                "name": f"{name}-{predictor}",
                                "port": {"number": settings.service_port},
                            }
                        },
                    }
                ]
            },
        }
    ]
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "kubewasm"},
        },
        "spec": spec,
    }
    annotation = {
        "apiVersion": sd.api_version,
        "kind": sd.kind,
        "metadata": {"name": name, "namespace": namespace, "annotations": {URL_ANNOTATION: url}},
    }
    log.info(f"{namespace}/{name} is Available: exposing {url}")
    return [
        create(ingress, owned_by_trigger=True),
        apply_patch(ObjectRef.namespaced(sd.api_version, sd.kind, namespace, name), annotation),
    ]


@kubewasm.plugin
class SeldonEndpoint(kubewasm.Plugin):
    Settings = Settings

    def describe(self, settings: Settings) -> Manifest:
        if not settings.domain or settings.domain.startswith("."):
            raise ValueError(
                f"domain {json.dumps(settings.domain, ensure_ascii=False)} is not a DNS suffix"
            )
        return manifest(settings)

    def handle(self, event: Event, settings: Settings) -> list:
        return handle_event(event, settings)
