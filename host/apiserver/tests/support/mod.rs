//! Shared helpers for the integration tests (`mod support;` in each; a test file uses
//! only some of them, hence `dead_code` allowed here).
#![allow(dead_code)]

pub mod kubectl;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use kubewasm_apiserver::{ApiServer, Config};
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;

/// Starts a server with the default configuration and a client for it.
pub async fn server() -> (ApiServer, Client) {
    server_with(Config::default()).await
}

/// Starts a server with `config` and a client for it.
pub async fn server_with(config: Config) -> (ApiServer, Client) {
    let s = ApiServer::start(config).await.expect("server starts");
    let c = Client::try_from(s.client_config()).expect("client");
    (s, c)
}

/// A CRD `widgets.example.com` (kind Widget, namespaced, status subresource), with a
/// structural schema: spec.{a,b,replicas,ports (map list keyed by name),tags (set)}, status.{state}.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "State", "type": "string", "jsonPath": ".status.state"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "a": {"type": "string"},
                            "b": {"type": "string"},
                            "replicas": {"type": "integer"},
                            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "properties": {
                                    "name": {"type": "string"}, "port": {"type": "integer"}}}},
                            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                "items": {"type": "string"}},
                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }},
                        "status": {"type": "object", "properties": {"state": {"type": "string"}}}
                    }
                }}
            }]
        }
    })
}

/// The ApiResource of Widget.
pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

/// Creates the Widget CRD and returns a namespaced Api for widgets in `default`.
pub async fn install_widgets(client: &Client) -> Api<DynamicObject> {
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    let crd: DynamicObject = serde_json::from_value(widget_crd()).expect("crd json");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("crd created");
    Api::namespaced_with(client.clone(), "default", &widget_resource())
}

/// The ApiResource of CustomResourceDefinition.
pub fn crd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    )
}

/// A Widget object.
pub fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec
    }))
    .expect("widget json")
}

/// Polls `f` until it returns Some, failing after 20 seconds.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The API error of a failed call.
pub fn api_err<T: std::fmt::Debug>(r: kube::Result<T>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// resourceVersion of an object as a number.
pub fn rv(o: &impl kube::ResourceExt) -> u64 {
    o.resource_version()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

/// Sends a raw request; returns the status code and JSON body.
pub async fn raw(client: &Client, req: http::Request<Vec<u8>>) -> (u16, Value) {
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .expect("response");
    let code = resp.status().as_u16();
    let body = http_body_util_collect(resp).await;
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn http_body_util_collect(resp: http::Response<kube::client::Body>) -> Vec<u8> {
    use http_body_util::BodyExt;
    resp.into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec()
}
