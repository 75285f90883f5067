//! Kubernetes protobuf on the wire: request bodies of built-in kinds in the
//! `k8s\0` + runtime.Unknown envelope (encoded here with the k8s-pb types, the way
//! Go's encoder writes every non-pointer field), answers in the media type the
//! client accepts, protobuf error Status objects, and the refusals kube-apiserver
//! gives (415 for custom resources, 406 when protobuf cannot be served).

mod support;

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::Client;
use prost::Message;
use serde_json::{Value, json};
use support::*;

const PB: &str = "application/vnd.kubernetes.protobuf";

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let mut out = b"k8s\0".to_vec();
    out.extend(
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        }
        .encode_to_vec(),
    );
    out
}

fn unwrap_envelope(body: &[u8]) -> Unknown {
    let rest = body.strip_prefix(b"k8s\0").expect("k8s\\0 prefix");
    Unknown::decode(rest).expect("runtime.Unknown")
}

/// ObjectMeta as Go's encoder writes it: every string and integer, empty or not.
fn go_meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: [("tier".to_string(), "db".to_string())]
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

fn configmap(name: &str) -> Vec<u8> {
    let cm = core::ConfigMap {
        metadata: Some(go_meta(name)),
        immutable: None,
        data: [("k".to_string(), "v".to_string())].into_iter().collect(),
        binary_data: [("bin".to_string(), vec![0u8, 159, 146, 150])]
            .into_iter()
            .collect(),
    };
    envelope("v1", "ConfigMap", cm.encode_to_vec())
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(kube::client::Body::from(body))
        .expect("request");
    let resp = client.send(req).await.expect("response");
    let code = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    (code, ct, bytes)
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn protobuf_create_is_stored_as_json_and_answered_as_asked() {
    let (_s, client) = server().await;
    // kubectl's typed clients accept both: the answer is JSON.
    let (code, ct, body) = send(
        &client,
        "POST",
        CMS,
        PB,
        "application/vnd.kubernetes.protobuf,application/json",
        configmap("c1"),
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert!(ct.starts_with("application/json"), "{ct}");
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["data"], json!({"k": "v"}));
    assert_eq!(v["binaryData"], json!({"bin": "AJ+Slg=="}));
    // Go's empty strings and zero integers are not fields that were set.
    let meta = v["metadata"].as_object().expect("metadata");
    for absent in ["generateName", "selfLink"] {
        assert!(!meta.contains_key(absent), "{absent} in {v}");
    }
    assert_eq!(v["metadata"]["labels"], json!({"tier": "db"}));
    assert!(v["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));

    // A client that accepts only protobuf gets protobuf, for objects and lists.
    let (code, ct, body) = send(&client, "GET", &format!("{CMS}/c1"), PB, PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PB));
    let u = unwrap_envelope(&body);
    let tm = u.type_meta.expect("typeMeta");
    assert_eq!(
        (tm.api_version.as_deref(), tm.kind.as_deref()),
        (Some("v1"), Some("ConfigMap"))
    );
    let cm = core::ConfigMap::decode(u.raw.as_deref().expect("raw")).expect("ConfigMap");
    assert_eq!(cm.data.get("k").map(String::as_str), Some("v"));
    assert_eq!(cm.binary_data.get("bin"), Some(&vec![0u8, 159, 146, 150]));
    let m = cm.metadata.expect("metadata");
    assert_eq!(m.name.as_deref(), Some("c1"));
    assert_eq!(m.namespace.as_deref(), Some("default"));
    assert!(m.creation_timestamp.and_then(|t| t.seconds).is_some());

    let (code, ct, body) = send(&client, "GET", CMS, PB, PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PB));
    let u = unwrap_envelope(&body);
    assert_eq!(
        u.type_meta.and_then(|t| t.kind).as_deref(),
        Some("ConfigMapList")
    );
    let list = core::ConfigMapList::decode(u.raw.as_deref().expect("raw")).expect("list");
    assert_eq!(list.items.len(), 1);
    assert!(
        list.metadata
            .and_then(|m| m.resource_version)
            .is_some_and(|rv| !rv.is_empty())
    );

    // PUT with a protobuf body, JSON answer for a JSON client.
    let mut cm = core::ConfigMap::decode(
        unwrap_envelope(
            &send(&client, "GET", &format!("{CMS}/c1"), PB, PB, vec![])
                .await
                .2,
        )
        .raw
        .as_deref()
        .expect("raw"),
    )
    .expect("ConfigMap");
    cm.data.insert("k2".into(), "v2".into());
    let (code, ct, body) = send(
        &client,
        "PUT",
        &format!("{CMS}/c1"),
        PB,
        "application/json",
        envelope("v1", "ConfigMap", cm.encode_to_vec()),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert!(ct.starts_with("application/json"));
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["data"], json!({"k": "v", "k2": "v2"}));
}

#[tokio::test]
async fn protobuf_errors_and_refusals() {
    let (_s, client) = server().await;
    // Errors come as a protobuf Status to a protobuf-only client.
    let (code, ct, body) = send(&client, "GET", &format!("{CMS}/missing"), PB, PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (404, PB));
    let u = unwrap_envelope(&body);
    assert_eq!(u.type_meta.and_then(|t| t.kind).as_deref(), Some("Status"));
    let status = meta::Status::decode(u.raw.as_deref().expect("raw")).expect("Status");
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(status.code, Some(404));
    assert_eq!(
        status.message.as_deref(),
        Some("configmaps \"missing\" not found")
    );

    // A body that is not enveloped protobuf is a bad request.
    let (code, _, body) = send(&client, "POST", CMS, PB, "application/json", b"{}".to_vec()).await;
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(
        (code, v["reason"].as_str()),
        (400, Some("BadRequest")),
        "{v}"
    );

    // Custom resources have no protobuf form: 415 for bodies, 406 for answers.
    install_widgets(&client).await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let (code, _, body) = send(
        &client,
        "POST",
        widgets,
        PB,
        "application/json",
        envelope("example.com/v1", "Widget", vec![]),
    )
    .await;
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(
        (code, v["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{v}"
    );
    let (code, _, _) = send(&client, "GET", widgets, "application/json", PB, vec![]).await;
    assert_eq!(code, 406);
    // Watches stream JSON only.
    let (code, _, _) = send(&client, "GET", &format!("{CMS}?watch=true"), PB, PB, vec![]).await;
    assert_eq!(code, 406);
}
