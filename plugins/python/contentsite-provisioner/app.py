"""contentsite-provisioner, in Python: the twin of plugins/rust/contentsite-provisioner (Rust).

Provision on demand: for every ``ContentSite`` (``sites.kubewasm.dev/v1alpha1``) that is
added, modified or resynced (and not being deleted), ask for

1. a ``MongoDB`` (``mongodb.com/v1``) named ``<site>-db`` in the site's namespace, its spec
   from the site's ``spec.database`` with defaults from the settings,
2. a ``Service`` named ``<site>`` selecting ``app: <site>``, port 80 -> 8080,
3. the site's status (``status`` subresource, server-side apply): ``databaseRef``,
   ``serviceRef``, ``observedGeneration`` and a ``Provisioned`` condition.

Both children are owned by the site, so a ``deleted`` event needs no intents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import kubewasm
from kubewasm import U32, I32, Condition, Event, Grant, Manifest, PermanentError, Watch
from kubewasm import apply_patch, create, log, obj
from kubewasm.schema import DecodeError, decode

NAME = "contentsite-provisioner"
VERSION = "0.1.0"
WATCH_ID = "sites"
SITE_API_VERSION = "sites.kubewasm.dev/v1alpha1"
SITE_KIND = "ContentSite"
MANAGED_BY = ("app.kubernetes.io/managed-by", "kubewasm")


# Where a MongoDB's project lives; the operator reads ``spec.<manager>.configMapRef``.
MANAGERS = ("opsManager", "cloudManager")


@dataclass
class DatabaseDefaults:
    """Defaults for the MongoDB spec, with the credentials Secret and project ConfigMap the
    MongoDB Enterprise operator requires."""

    type: str = field(default="ReplicaSet", metadata={"json": "type"})
    members: U32 = 3
    version: str = "7.0.12"
    credentials: str = "mongodb-credentials"
    project_config_map: str = "mongodb-project"
    manager: str = "opsManager"


@dataclass
class ServiceSettings:
    """The Service's ports."""

    port: I32 = 80
    target_port: I32 = 8080


@dataclass
class Settings:
    """contentsite-provisioner.yaml; every field is optional."""

    namespace: Optional[str] = None
    database: DatabaseDefaults = field(default_factory=DatabaseDefaults)
    service: ServiceSettings = field(default_factory=ServiceSettings)


@dataclass
class DatabaseSpec:
    """What a site may say about its database (``spec.database``); no defaults, like the
    Rust struct: every field is an Optional."""

    type: Optional[str] = field(metadata={"json": "type"})
    members: Optional[U32]
    version: Optional[str]


def manifest(settings: Settings) -> Manifest:
    """Watch ContentSites; create MongoDBs and Services; patch ContentSite status."""
    if settings.database.manager not in MANAGERS:
        raise ValueError(
            f"database.manager must be one of {', '.join(MANAGERS)}, not {settings.database.manager!r}"
        )
    ns = settings.namespace
    return (
        Manifest(NAME, VERSION)
        .watch(Watch.kind(WATCH_ID, SITE_API_VERSION, SITE_KIND, namespace=ns))
        .grant(Grant.on("mongodb.com", "MongoDB").create().namespace(ns))
        .grant(Grant.on("", "Service").create().namespace(ns))
        .grant(Grant.on("sites.kubewasm.dev", SITE_KIND).patch_status().namespace(ns))
    )


def handle_event(event: Event, settings: Settings) -> list:
    """Provisions on added/modified/resync; nothing on deleted or while being deleted."""
    if event.is_deleted:
        return []  # ownerReferences make the garbage collector remove the children
    site = event.object
    if obj.is_being_deleted(site):
        log.debug(f"{obj.name(site) or '?'} is being deleted; nothing to do")
        return []
    return provision(site, settings)


def provision(site: dict, settings: Settings) -> list:
    """The intents for one live ContentSite: its MongoDB, its Service, its status."""
    if obj.api_version(site) != SITE_API_VERSION or obj.kind(site) != SITE_KIND:
        raise PermanentError(
            f"expected a {SITE_API_VERSION} {SITE_KIND}, got "
            f"{obj.api_version(site) or '?'} {obj.kind(site) or '?'}"
        )
    name = obj.require_name(site)
    namespace = obj.namespace(site)
    if namespace is None:
        raise PermanentError("ContentSite has no metadata.namespace")
    raw = obj.pointer(site, "/spec/database")
    if raw is None:
        db_spec = DatabaseSpec(None, None, None)
    else:
        try:
            db_spec = decode(DatabaseSpec, raw, strict=False)
        except DecodeError as e:
            raise PermanentError(f"invalid spec.database: {e}") from None
    members = db_spec.members if db_spec.members is not None else settings.database.members
    if members == 0:
        raise PermanentError("spec.database.members must be at least 1")
    db_name = f"{name}-db"

    database = {
        "apiVersion": "mongodb.com/v1",
        "kind": "MongoDB",
        "metadata": {
            "name": db_name,
            "namespace": namespace,
            "labels": {MANAGED_BY[0]: MANAGED_BY[1], "app.kubernetes.io/part-of": name},
        },
        "spec": {
            "type": db_spec.type if db_spec.type is not None else settings.database.type,
            "members": members,
            "version": db_spec.version if db_spec.version is not None else settings.database.version,
            "credentials": settings.database.credentials,
            settings.database.manager: {"configMapRef": {"name": settings.database.project_config_map}},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": name, MANAGED_BY[0]: MANAGED_BY[1]},
        },
        "spec": {
            "selector": {"app": name},
            "ports": [
                {
                    "name": "http",
                    "protocol": "TCP",
                    "port": settings.service.port,
                    "targetPort": settings.service.target_port,
                }
            ],
        },
    }

    condition = (
        Condition("Provisioned", True, reason="ChildrenRequested",
                  message=f"MongoDB {db_name} and Service {name} requested")
        .observed_generation_of(site)
        .transitioned_from(site)
    )
    status = {"databaseRef": db_name, "serviceRef": name, "conditions": [condition.to_dict()]}
    generation = obj.generation(site)
    if generation is not None:
        status["observedGeneration"] = generation
    status_patch = {
        "apiVersion": SITE_API_VERSION,
        "kind": SITE_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    }

    log.info(f"provisioning {namespace}/{name}: MongoDB {db_name}, Service {name}")
    return [
        create(database, owned_by_trigger=True),
        create(service, owned_by_trigger=True),
        apply_patch(site, status_patch, status=True),
    ]


@kubewasm.plugin
class ContentSiteProvisioner(kubewasm.Plugin):
    Settings = Settings

    def describe(self, settings: Settings) -> Manifest:
        return manifest(settings)

    def handle(self, event: Event, settings: Settings) -> list:
        return handle_event(event, settings)
