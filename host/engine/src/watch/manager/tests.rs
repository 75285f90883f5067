//! The watch manager against the embedded API server with RBAC enforced, on a paused
//! clock: a watch the host may not list is retried by its error class (seconds growing
//! to minutes), not every second, and starts at once when the permission is granted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kubewasm_apiserver::{ApiServer, Config};
use kubewasm_core::resource::{ResourceRef, TypeRef};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{WatchConfig, WatchManager, WatchSignal};
use crate::serve::access::Access;
use crate::serve::metrics::Metrics;
use crate::watch::cache::Caches;
use crate::watch::discovery::Discovery;

const HOST: &str = "system:serviceaccount:kw:kubewasm";

fn client_as(server: &ApiServer, token: &str) -> kube::Client {
    let mut c = server.client_config();
    c.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(c).expect("client")
}

/// List requests of the host for ConfigMaps (the watcher's relists).
fn lists(server: &ApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| {
            r.client == "host"
                && r.method == "GET"
                && r.path.starts_with("/api/v1/configmaps")
                && !r.path.contains("watch=true")
        })
        .count()
}

async fn grant_configmaps(admin: &kube::Client) {
    let ar = |kind: &str, plural: &str| {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
            plural,
        )
    };
    let roles: Api<DynamicObject> =
        Api::all_with(admin.clone(), &ar("ClusterRole", "clusterroles"));
    let role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "kubewasm"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}))
    .expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    let bindings: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ar("ClusterRoleBinding", "clusterrolebindings"),
    );
    let binding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubewasm"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubewasm"},
        "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kw"}]}))
    .expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
}

#[tokio::test(start_paused = true)]
async fn a_forbidden_watch_backs_off_to_minutes_and_starts_once_granted() {
    let server = ApiServer::start(Config::default().with_rbac("admin", &[("host", HOST)]))
        .await
        .expect("server");
    let admin = kube::Client::try_from(server.client_config()).expect("client");
    let host = client_as(&server, "host");
    server.record_requests();
    let access = Arc::new(Access::default());
    let (tx, mut rx) = mpsc::channel::<WatchSignal>(1024);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let manager = WatchManager::new(
        host.clone(),
        Arc::new(Discovery::new(host.clone())),
        Arc::new(Caches::default()),
        WatchConfig {
            resync: None,
            discovery_interval: Duration::from_secs(5),
            namespaces: Vec::new(),
            ..WatchConfig::default()
        },
        tx,
        Arc::new(Metrics::new()),
        access.clone(),
    );
    let configmaps = ResourceRef::Kind(TypeRef::new("v1", "ConfigMap"));
    manager.set_desired(BTreeMap::from([(configmaps.clone(), None)]));
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.clone().run(cancel.clone()));

    // Ten simulated minutes of a forbidden list: 5 s doubling to 5 min is 7 attempts
    // (0, 5, 15, 35, 75, 155, 315 s, each up to 20% later); kube's StreamBackoff, reset
    // by each relist's Init, made ~500.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let forbidden = lists(&server);
    eprintln!("{forbidden} lists of a forbidden resource in 600 simulated seconds");
    assert!(
        (4..=8).contains(&forbidden),
        "{forbidden} lists in 600 simulated seconds"
    );
    // The missing rules are known by name, from the review asked before the watch.
    let missing: Vec<String> = access.missing().into_iter().map(|m| m.rule).collect();
    assert_eq!(
        missing,
        [
            "list configmaps cluster-wide",
            "watch configmaps cluster-wide"
        ]
    );
    assert_eq!(manager.readiness().syncing, ["v1/ConfigMap"]);

    // Granted: the recheck notices, the watch stops waiting (its next attempt was minutes
    // away) and syncs within a few simulated seconds.
    grant_configmaps(&admin).await;
    access.recheck(&host).await;
    assert!(access.missing().is_empty(), "{:?}", access.missing());
    let granted_at = tokio::time::Instant::now();
    while manager.readiness().synced.is_empty() {
        assert!(
            granted_at.elapsed() < Duration::from_secs(5),
            "not synced 5 s after the grant: {:?}",
            manager.readiness()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(access.missing().is_empty());
    cancel.cancel();
    run.await.expect("manager");
    drain.abort();
}
