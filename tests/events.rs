//! Warning Events on the triggering object, rate limited per (object, reason), against
//! the embedded API server.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kubewasm::apply::events::EventRecorder;
use kubewasm_apiserver::{ApiServer, Config};

async fn events_about(client: &Client, ns: &str, uid: &str) -> Vec<Event> {
    let mut events: Vec<Event> = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.uid.as_deref() == Some(uid))
        .collect();
    events.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    events
}

#[tokio::test]
async fn warnings_are_recorded_once_per_interval_with_the_suppressed_count() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("start API server");
    let client = Client::try_from(server.client_config()).expect("client");
    let cms = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    );
    let object: DynamicObject =
        Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar)
            .get("settings")
            .await
            .expect("get configmap");
    let uid = object.metadata.uid.clone().expect("uid");

    let interval = Duration::from_secs(3);
    let recorder = EventRecorder::new(client.clone(), "kubewasm-0".into(), interval);
    recorder.warning(&object, "PluginFailed", "boom 1").await;
    recorder.warning(&object, "PluginFailed", "boom 2").await;
    let events = events_about(&client, "default", &uid).await;
    assert_eq!(
        events.len(),
        1,
        "the repeat within the interval is suppressed"
    );
    let e = &events[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some("PluginFailed"));
    assert_eq!(e.message.as_deref(), Some("boom 1"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(e.involved_object.api_version.as_deref(), Some("v1"));
    assert_eq!(e.involved_object.name.as_deref(), Some("settings"));
    assert_eq!(e.involved_object.namespace.as_deref(), Some("default"));
    assert_eq!(
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("kubewasm")
    );
    assert_eq!(e.reporting_instance.as_deref(), Some("kubewasm-0"));
    assert_eq!(e.count, Some(1));
    assert!(e.first_timestamp.is_some() && e.last_timestamp.is_some());

    // Another reason is another stream.
    let long = "x".repeat(5000);
    recorder.warning(&object, "IntentRefused", &long).await;
    let events = events_about(&client, "default", &uid).await;
    assert_eq!(events.len(), 2);
    let refused = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("IntentRefused"))
        .expect("IntentRefused event");
    assert!(refused.message.as_deref().unwrap_or("").len() <= 1024);

    // After the interval the next one is recorded, saying one was suppressed.
    tokio::time::sleep(interval + Duration::from_millis(200)).await;
    recorder.warning(&object, "PluginFailed", "boom 3").await;
    let events = events_about(&client, "default", &uid).await;
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("PluginFailed"))
        .collect();
    assert_eq!(failed.len(), 2);
    assert!(
        failed.iter().any(
            |e| e.message.as_deref() == Some("boom 3 (1 similar suppressed)") && e.count == Some(2)
        ),
        "{failed:?}"
    );

    // A failure to record (server gone) is not the caller's problem.
    server.shutdown().await;
    tokio::time::timeout(
        Duration::from_secs(30),
        recorder.warning(&object, "Other", "nobody hears this"),
    )
    .await
    .expect("warning returns even when the API server is gone");
}
