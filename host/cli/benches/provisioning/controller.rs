//! The job of the Rust `contentsite-provisioner` plugin, written as a kube-rs user would
//! write it: a `Controller` over ContentSites that owns MongoDBs and Services.
//!
//! For each ContentSite (not being deleted) `reconcile` applies, with server-side apply
//! under its own field manager, a MongoDB `<site>-db` and a Service `<site>`, both with a
//! controller ownerReference to the site, then the site's status (`databaseRef`,
//! `serviceRef`, `observedGeneration`, a `Provisioned` condition): the same objects the
//! plugin asks for with its settings file (`contentsite-provisioner.yaml`: one member,
//! 7.0.12, ReplicaSet, port 80 → 8080). Deleting a site is left to the garbage collector,
//! as the plugin leaves it.
//!
//! The ContentSite type is written out instead of derived with `#[derive(CustomResource)]`
//! because the workspace builds kube without its `derive` feature (turning it on for a
//! bench would rebuild kube for everything).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The field manager of every apply.
const MANAGER: &str = "contentsite-controller";
/// The label every child carries (the plugin's `MANAGED_BY`).
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kubewasm");

/// A `sites.kubewasm.dev/v1alpha1` ContentSite.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) struct ContentSite {
    metadata: ObjectMeta,
    spec: ContentSiteSpec,
    #[serde(default)]
    status: Option<ContentSiteStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct ContentSiteSpec {
    #[serde(default)]
    database: Option<DatabaseSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct DatabaseSpec {
    #[serde(rename = "type")]
    type_: Option<String>,
    members: Option<u32>,
    version: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct ContentSiteStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
}

impl Resource for ContentSite {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ContentSite".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "sites.kubewasm.dev".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "contentsites".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What every reconcile shares.
struct Context {
    client: Client,
    mongodb: ApiResource,
}

/// Runs the controller over `namespace` until the process is stopped (kube logs `store is
/// ready` at debug once its ContentSite cache is synced).
pub(crate) async fn run(client: Client, namespace: &str, concurrency: u16) {
    let mongodb = super::common::mongodb();
    let sites: Api<ContentSite> = Api::namespaced(client.clone(), namespace);
    let dbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &mongodb);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let controller = Controller::new(sites, watcher::Config::default())
        .owns_with(dbs, mongodb.clone(), watcher::Config::default())
        .owns(services, watcher::Config::default())
        .with_config(Config::default().concurrency(concurrency));
    let ctx = Arc::new(Context { client, mongodb });
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((site, _)) => tracing::info!("reconciled {site}"),
                Err(e) => tracing::warn!("reconcile failed: {e}"),
            }
        })
        .await;
}

async fn reconcile(site: Arc<ContentSite>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    if site.metadata.deletion_timestamp.is_some() {
        // The children's ownerReferences let the garbage collector remove them.
        return Ok(Action::await_change());
    }
    // Both are always set on an object read from the API server.
    let (Some(namespace), Some(owner)) = (site.namespace(), site.controller_owner_ref(&())) else {
        return Ok(Action::await_change());
    };
    let name = site.name_any();
    let db_name = format!("{name}-db");
    let db = site.spec.database.clone().unwrap_or_default();
    let params = PatchParams::apply(MANAGER).force();

    let database = json!({
        "apiVersion": "mongodb.com/v1",
        "kind": "MongoDB",
        "metadata": {
            "name": db_name,
            "namespace": namespace,
            "labels": {MANAGED_BY.0: MANAGED_BY.1, "app.kubernetes.io/part-of": name},
            "ownerReferences": [owner],
        },
        "spec": {
            "type": db.type_.as_deref().unwrap_or("ReplicaSet"),
            "members": db.members.unwrap_or(1),
            "version": db.version.as_deref().unwrap_or("7.0.12"),
            "credentials": "mongodb-credentials",
            "opsManager": {"configMapRef": {"name": "mongodb-project"}},
        },
    });
    Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &namespace, &ctx.mongodb)
        .patch(&db_name, &params, &Patch::Apply(&database))
        .await?;

    let service = Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(BTreeMap::from([
                ("app".to_owned(), name.clone()),
                (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
            ])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([("app".to_owned(), name.clone())])),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                protocol: Some("TCP".to_owned()),
                port: 80,
                target_port: Some(IntOrString::Int(8080)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Api::<Service>::namespaced(ctx.client.clone(), &namespace)
        .patch(&name, &params, &Patch::Apply(&service))
        .await?;

    let status = json!({
        "apiVersion": "sites.kubewasm.dev/v1alpha1",
        "kind": "ContentSite",
        "metadata": {"name": name, "namespace": namespace},
        "status": {
            "databaseRef": db_name,
            "serviceRef": name,
            "observedGeneration": site.metadata.generation,
            "conditions": [provisioned(&site, &db_name, &name)],
        },
    });
    Api::<ContentSite>::namespaced(ctx.client.clone(), &namespace)
        .patch_status(&name, &params, &Patch::Apply(&status))
        .await?;
    // The plugin's host re-delivers every object each 10 minutes (`run --resync`).
    Ok(Action::requeue(Duration::from_secs(600)))
}

/// The `Provisioned` condition, keeping its transition time while it stays true.
fn provisioned(site: &ContentSite, db_name: &str, name: &str) -> Condition {
    let previous = site
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Provisioned"))
        .filter(|c| c.status == "True");
    Condition {
        type_: "Provisioned".to_owned(),
        status: "True".to_owned(),
        reason: "ChildrenRequested".to_owned(),
        message: format!("MongoDB {db_name} and Service {name} requested"),
        observed_generation: site.metadata.generation,
        last_transition_time: previous.map_or_else(
            || Time(k8s_openapi::jiff::Timestamp::now()),
            |c| c.last_transition_time.clone(),
        ),
    }
}

fn error_policy(site: Arc<ContentSite>, error: &kube::Error, _: Arc<Context>) -> Action {
    tracing::warn!("reconciling {} failed: {error}", site.name_any());
    Action::requeue(Duration::from_secs(5))
}
