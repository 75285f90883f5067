//! # contentsite-provisioner
//!
//! Provision on demand: for every `ContentSite` (`sites.kubewasm.dev/v1alpha1`) that is
//! added, modified or resynced (and not being deleted), ask for
//!
//! 1. a `MongoDB` (`mongodb.com/v1`) named `<site>-db` in the site's namespace, its spec
//!    from the site's `spec.database` with defaults from the settings, and the credentials
//!    Secret and project ConfigMap the MongoDB Enterprise operator requires from the
//!    settings,
//! 2. a `Service` named `<site>` selecting `app: <site>`, port 80 → 8080,
//! 3. the site's status (`status` subresource, server-side apply): `databaseRef`,
//!    `serviceRef`, `observedGeneration` and a `Provisioned` condition.
//!
//! Both children are owned by the site (`owned_by_trigger`), so deleting the site lets the
//! garbage collector remove them: a `deleted` event needs no intents.
//!
//! The logic is [`handle_event`] / [`provision`], plain functions callable natively.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::collections::BTreeMap;

use kubewasm_sdk::k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kubewasm_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_sdk::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubewasm_sdk::{
    Condition, Context, Event, Grant, HandleError, Intent, Manifest, ObjectExt, ObjectRef, Plugin,
    Result, Watch, log,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The plugin's name in its manifest (and field manager `kubewasm-contentsite-provisioner`).
pub const NAME: &str = "contentsite-provisioner";
/// The watch id for ContentSites.
pub const WATCH_ID: &str = "sites";
/// The ContentSite apiVersion.
pub const SITE_API_VERSION: &str = "sites.kubewasm.dev/v1alpha1";
/// The ContentSite kind.
pub const SITE_KIND: &str = "ContentSite";
/// The label every object this plugin creates carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kubewasm");

/// Settings (`contentsite-provisioner.yaml`); every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Only watch (and write in) this namespace. None: all namespaces.
    pub namespace: Option<String>,
    /// Database defaults for sites that do not say.
    pub database: DatabaseDefaults,
    /// The Service's ports.
    pub service: ServiceSettings,
}

/// Defaults for the MongoDB spec. The MongoDB Enterprise operator's CRD requires
/// `credentials`, `type` and `version`, and the operator needs the project's ConfigMap
/// under `opsManager` (or `cloudManager`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DatabaseDefaults {
    /// `spec.type` (`ReplicaSet`, `Standalone`, `ShardedCluster`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `spec.members`.
    pub members: u32,
    /// `spec.version`.
    pub version: String,
    /// `spec.credentials`: the Secret with the Ops Manager / Cloud Manager API key.
    pub credentials: String,
    /// The ConfigMap naming the Ops Manager / Cloud Manager project.
    pub project_config_map: String,
    /// Which manager the project lives in: `opsManager` or `cloudManager`.
    pub manager: Manager,
}

/// Where the MongoDB's project lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Manager {
    /// `spec.opsManager.configMapRef`.
    OpsManager,
    /// `spec.cloudManager.configMapRef`.
    CloudManager,
}

impl Manager {
    /// The spec field naming the project ConfigMap.
    pub fn field(self) -> &'static str {
        match self {
            Manager::OpsManager => "opsManager",
            Manager::CloudManager => "cloudManager",
        }
    }
}

impl Default for DatabaseDefaults {
    fn default() -> Self {
        Self {
            type_: "ReplicaSet".to_owned(),
            members: 3,
            version: "7.0.12".to_owned(),
            credentials: "mongodb-credentials".to_owned(),
            project_config_map: "mongodb-project".to_owned(),
            manager: Manager::OpsManager,
        }
    }
}

/// The Service's ports.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSettings {
    /// The Service port.
    pub port: i32,
    /// The container port it forwards to.
    pub target_port: i32,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            port: 80,
            target_port: 8080,
        }
    }
}

/// What a site may say about its database (`spec.database`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DatabaseSpec {
    #[serde(rename = "type")]
    type_: Option<String>,
    members: Option<u32>,
    version: Option<String>,
}

/// The plugin type exported to the host.
pub struct ContentSiteProvisioner;

impl Plugin for ContentSiteProvisioner {
    type Settings = Settings;

    fn describe(settings: &Settings) -> std::result::Result<Manifest, String> {
        Ok(manifest(settings))
    }

    fn handle(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
        handle_event(event, settings)
    }
}

kubewasm_sdk::export_plugin!(ContentSiteProvisioner);

/// The manifest: watch ContentSites; create MongoDBs and Services; patch ContentSite status.
pub fn manifest(settings: &Settings) -> Manifest {
    let scoped = |g: Grant| match &settings.namespace {
        Some(ns) => g.namespace(ns.clone()),
        None => g,
    };
    let mut watch = Watch::kind(WATCH_ID, SITE_API_VERSION, SITE_KIND);
    if let Some(ns) = &settings.namespace {
        watch = watch.namespace(ns.clone());
    }
    Manifest::new(NAME, env!("CARGO_PKG_VERSION"))
        .watch(watch)
        .grant(scoped(Grant::on("mongodb.com", "MongoDB").create()))
        .grant(scoped(Grant::on("", "Service").create()))
        .grant(scoped(
            Grant::on("sites.kubewasm.dev", SITE_KIND).patch_status(),
        ))
}

/// Handles one event: provisions on added/modified/resync, nothing on deleted or while the
/// site is being deleted.
pub fn handle_event(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
    if event.is_deleted() {
        // ownerReferences make the garbage collector remove the children.
        return Ok(Vec::new());
    }
    let site = event.object()?;
    if site.is_being_deleted() {
        log::debug!(
            "{} is being deleted; nothing to do",
            site.name().unwrap_or("?")
        );
        return Ok(Vec::new());
    }
    provision(&site, settings)
}

/// The intents for one live ContentSite: its MongoDB, its Service, its status.
pub fn provision(site: &Value, settings: &Settings) -> Result<Vec<Intent>> {
    if site.api_version() != Some(SITE_API_VERSION) || site.kind() != Some(SITE_KIND) {
        return Err(HandleError::permanent(format!(
            "expected a {SITE_API_VERSION} {SITE_KIND}, got {} {}",
            site.api_version().unwrap_or("?"),
            site.kind().unwrap_or("?")
        )));
    }
    let name = site.require_name()?;
    let namespace = site
        .namespace()
        .permanent("ContentSite has no metadata.namespace")?;
    let db_spec: DatabaseSpec = match site.pointer("/spec/database") {
        None | Some(Value::Null) => DatabaseSpec::default(),
        Some(v) => DatabaseSpec::deserialize(v).permanent("invalid spec.database")?,
    };
    let members = db_spec.members.unwrap_or(settings.database.members);
    if members == 0 {
        return Err(HandleError::permanent(
            "spec.database.members must be at least 1",
        ));
    }
    let db_name = format!("{name}-db");

    let database = json!({
        "apiVersion": "mongodb.com/v1",
        "kind": "MongoDB",
        "metadata": {
            "name": db_name,
            "namespace": namespace,
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                "app.kubernetes.io/part-of": name,
            },
        },
        "spec": {
            "type": db_spec.type_.as_deref().unwrap_or(&settings.database.type_),
            "members": members,
            "version": db_spec.version.as_deref().unwrap_or(&settings.database.version),
            "credentials": settings.database.credentials,
            settings.database.manager.field(): {
                "configMapRef": {"name": settings.database.project_config_map},
            },
        },
    });

    let service = Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                ("app".to_owned(), name.to_owned()),
                (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([("app".to_owned(), name.to_owned())])),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                protocol: Some("TCP".to_owned()),
                port: settings.service.port,
                target_port: Some(IntOrString::Int(settings.service.target_port)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };

    let condition = Condition::new("Provisioned", true)
        .reason("ChildrenRequested")
        .message(format!("MongoDB {db_name} and Service {name} requested"))
        .observed_generation_of(site)
        .transitioned_from(site);
    let mut status = json!({
        "databaseRef": db_name,
        "serviceRef": name,
        "conditions": [condition.to_value()],
    });
    if let Some(generation) = site.generation() {
        status["observedGeneration"] = json!(generation);
    }
    let status_patch = json!({
        "apiVersion": SITE_API_VERSION,
        "kind": SITE_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    });

    log::info!("provisioning {namespace}/{name}: MongoDB {db_name}, Service {name}");
    Ok(vec![
        Intent::create(database).owned_by_trigger().into(),
        Intent::create_from(&service)?.owned_by_trigger().into(),
        Intent::apply_patch(ObjectRef::of(site)?, status_patch)
            .status()
            .into(),
    ])
}

#[cfg(test)]
mod tests;
