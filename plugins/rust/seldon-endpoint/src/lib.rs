//! # seldon-endpoint
//!
//! Know when it's ready: watch `SeldonDeployment`s by resource string
//! (`seldondeployments.v1.machinelearning.seldon.io`) and, when one **becomes** `Available`
//! (`status.state`), ask for
//!
//! 1. an `Ingress` (`networking.k8s.io/v1`) named `<sd>` for host
//!    `<sd>.<namespace>.<domain>`, path `/` (Prefix) to Service `<sd>-<predictor>` port 8000,
//!    owned by the SeldonDeployment;
//! 2. an annotation `kubewasm.dev/public-url: http://<host>/` on the SeldonDeployment
//!    (server-side apply, so only that annotation is this plugin's).
//!
//! "Becomes" means: an `added` or `resync` event of an Available object, or a `modified`
//! event whose previous state was not Available. Updates while it stays Available (including
//! the plugin's own annotation) produce no intents, so they cause no writes.
//!
//! The logic is [`handle_event`] / [`expose`], callable natively.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::collections::BTreeMap;

use kubewasm_sdk::k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use kubewasm_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_sdk::{
    Event, Grant, HandleError, Intent, Manifest, ObjectRef, Plugin, Result, Watch, log,
};
use serde::Deserialize;
use serde_json::json;

/// The plugin's name in its manifest.
pub const NAME: &str = "seldon-endpoint";
/// The watch id for SeldonDeployments.
pub const WATCH_ID: &str = "seldondeployments";
/// The resource watched.
pub const RESOURCE: &str = "seldondeployments.v1.machinelearning.seldon.io";
/// The annotation recording the public URL.
pub const URL_ANNOTATION: &str = "kubewasm.dev/public-url";

/// Settings (`seldon-endpoint.yaml`); every field is optional.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Only watch (and write in) this namespace. None: all namespaces.
    pub namespace: Option<String>,
    /// DNS suffix: the host is `<name>.<namespace>.<domain>`.
    pub domain: String,
    /// `spec.ingressClassName` of the Ingress; None: the cluster's default class.
    pub ingress_class_name: Option<String>,
    /// The predictor Service's HTTP port.
    pub service_port: i32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            domain: "example.com".to_owned(),
            ingress_class_name: None,
            service_port: 8000,
        }
    }
}

/// The parts of a SeldonDeployment this plugin reads (a user serde type: unknown fields
/// are ignored, so the real CRD's huge schema does not matter).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeldonDeployment {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata`.
    pub metadata: Metadata,
    /// `spec`.
    #[serde(default)]
    pub spec: Spec,
    /// `status`.
    #[serde(default)]
    pub status: Option<Status>,
}

/// The metadata fields used.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<String>,
}

/// The spec fields used.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Spec {
    /// `spec.predictors`.
    #[serde(default)]
    pub predictors: Vec<Predictor>,
}

/// One predictor.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Predictor {
    /// `spec.predictors[].name`.
    pub name: Option<String>,
}

/// The status fields used.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Status {
    /// `status.state`: `Creating`, `Available`, `Failed`.
    pub state: Option<String>,
}

impl SeldonDeployment {
    /// `status.state == "Available"`.
    pub fn is_available(&self) -> bool {
        self.status.as_ref().and_then(|s| s.state.as_deref()) == Some("Available")
    }
}

/// The plugin type exported to the host.
pub struct SeldonEndpoint;

impl Plugin for SeldonEndpoint {
    type Settings = Settings;

    fn describe(settings: &Settings) -> std::result::Result<Manifest, String> {
        if settings.domain.is_empty() || settings.domain.starts_with('.') {
            return Err(format!("domain {:?} is not a DNS suffix", settings.domain));
        }
        Ok(manifest(settings))
    }

    fn handle(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
        handle_event(event, settings)
    }
}

kubewasm_sdk::export_plugin!(SeldonEndpoint);

/// The manifest: watch SeldonDeployments; create Ingresses; patch SeldonDeployments.
pub fn manifest(settings: &Settings) -> Manifest {
    let mut watch = Watch::resource(WATCH_ID, RESOURCE);
    let mut ingress = Grant::on("networking.k8s.io", "Ingress").create();
    let mut sd = Grant::on("machinelearning.seldon.io", "SeldonDeployment").patch();
    if let Some(ns) = &settings.namespace {
        watch = watch.namespace(ns.clone());
        ingress = ingress.namespace(ns.clone());
        sd = sd.namespace(ns.clone());
    }
    Manifest::new(NAME, env!("CARGO_PKG_VERSION"))
        .watch(watch)
        .grant(ingress)
        .grant(sd)
}

/// Whether this event is the moment the deployment becomes Available.
pub fn becomes_available(event: &Event) -> Result<bool> {
    if event.is_deleted() {
        return Ok(false);
    }
    let now: SeldonDeployment = event.object_as()?;
    if !now.is_available() || now.metadata.deletion_timestamp.is_some() {
        return Ok(false);
    }
    if event.is_modified() {
        let before: Option<SeldonDeployment> = event.old_object_as()?;
        return Ok(!before.is_some_and(|b| b.is_available()));
    }
    Ok(true)
}

/// Handles one event: exposes the deployment when it becomes Available; nothing otherwise.
pub fn handle_event(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
    if !becomes_available(event)? {
        return Ok(Vec::new());
    }
    expose(&event.object_as()?, settings)
}

/// The public host name: `<name>.<namespace>.<domain>`.
pub fn host_for(sd: &SeldonDeployment, settings: &Settings) -> Result<String> {
    let ns = namespace_of(sd)?;
    Ok(format!("{}.{ns}.{}", sd.metadata.name, settings.domain))
}

fn namespace_of(sd: &SeldonDeployment) -> Result<&str> {
    sd.metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| HandleError::permanent("SeldonDeployment has no metadata.namespace"))
}

/// The Ingress and the URL annotation for an Available deployment.
pub fn expose(sd: &SeldonDeployment, settings: &Settings) -> Result<Vec<Intent>> {
    let name = sd.metadata.name.as_str();
    if name.is_empty() {
        return Err(HandleError::permanent(
            "SeldonDeployment has no metadata.name",
        ));
    }
    let namespace = namespace_of(sd)?;
    let host = host_for(sd, settings)?;
    let predictor = sd
        .spec
        .predictors
        .first()
        .and_then(|p| p.name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let url = format!("http://{host}/");

    let ingress = Ingress {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "kubewasm".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(IngressSpec {
            ingress_class_name: settings.ingress_class_name.clone(),
            rules: Some(vec![IngressRule {
                host: Some(host.clone()),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".to_owned()),
                        path_type: "Prefix".to_owned(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: format!("{name}-{predictor}"),
                                port: Some(ServiceBackendPort {
                                    number: Some(settings.service_port),
                                    name: None,
                                }),
                            }),
                            resource: None,
                        },
                    }],
                }),
            }]),
            ..IngressSpec::default()
        }),
        ..Ingress::default()
    };

    let target = ObjectRef::namespaced(&sd.api_version, &sd.kind, namespace, name);
    let annotation = json!({
        "apiVersion": sd.api_version,
        "kind": sd.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {URL_ANNOTATION: url},
        },
    });
    log::info!("{namespace}/{name} is Available: exposing {url}");
    Ok(vec![
        Intent::create_from(&ingress)?.owned_by_trigger().into(),
        Intent::apply_patch(target, annotation).into(),
    ])
}

#[cfg(test)]
mod tests;
