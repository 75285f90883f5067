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

/// Namespaces a, b and c.
async fn namespaces(admin: &kube::Client) {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(admin.clone());
    for ns in ["a", "b", "c"] {
        let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns");
        api.create(&PostParams::default(), &namespace)
            .await
            .expect("create namespace");
    }
}

/// A ConfigMap `ns/name` with `data`.
async fn put_configmap(admin: &kube::Client, ns: &str, name: &str, data: &str) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns}, "data": {"v": data}}))
    .expect("configmap");
    match api.get_opt(name).await.expect("get") {
        None => {
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create");
        }
        Some(_) => {
            let patch = kube::api::Patch::Merge(json!({"data": {"v": data}}));
            api.patch(name, &kube::api::PatchParams::default(), &patch)
                .await
                .expect("patch");
        }
    }
}

/// Role `kubewasm-host` in `ns` granting the host list and watch on ConfigMaps there (a
/// team's grant, printed by `approve --namespace`).
async fn grant_configmaps_in(admin: &kube::Client, ns: &str) {
    let ar = |kind: &str, plural: &str| {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
            plural,
        )
    };
    let roles: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &ar("Role", "roles"));
    let role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "kubewasm-host", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}))
    .expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    let bindings: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), ns, &ar("RoleBinding", "rolebindings"));
    let binding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "kubewasm-host", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubewasm-host"},
        "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kw"}]}))
    .expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
}

/// A manager of the host's client, not started, with its caches, its access and its
/// events.
fn manager(
    host: &kube::Client,
) -> (
    Arc<WatchManager>,
    Arc<Caches>,
    Arc<Access>,
    mpsc::Receiver<WatchSignal>,
) {
    let caches = Arc::new(Caches::default());
    let access = Arc::new(Access::default());
    let (tx, rx) = mpsc::channel::<WatchSignal>(1024);
    let manager = WatchManager::new(
        host.clone(),
        Arc::new(Discovery::new(host.clone())),
        caches.clone(),
        WatchConfig {
            resync: None,
            ..WatchConfig::default()
        },
        tx,
        Arc::new(Metrics::new()),
        access.clone(),
    );
    (manager, caches, access, rx)
}

fn configmaps() -> ResourceRef {
    ResourceRef::Kind(TypeRef::new("v1", "ConfigMap"))
}

/// Only tenant plugins need `namespaces` of ConfigMaps (empty: a cluster plugin needs
/// them too); takes effect now.
fn tenants_need(manager: &WatchManager, namespaces: &[&str]) {
    let scopes = match namespaces {
        [] => BTreeMap::new(),
        ns => BTreeMap::from([(configmaps(), ns.iter().map(|n| n.to_string()).collect())]),
    };
    manager.set_tenant_scopes(scopes);
    manager.set_desired(BTreeMap::from([(configmaps(), None)]));
}

/// The ConfigMaps the cache holds, as `ns/name`.
fn cached(caches: &Caches) -> std::collections::BTreeSet<String> {
    caches
        .get(&TypeRef::new("v1", "ConfigMap"))
        .map(|c| c.snapshot())
        .unwrap_or_default()
        .iter()
        .map(|o| format!("{}/{}", o.namespace().unwrap_or(""), o.name()))
        .collect()
}

/// The events received until markers in `markers` (namespaces; created or changed now)
/// arrived, as `TYPE ns/name`
/// in order, the markers' own left out. A marker's event follows its scope's list:
/// created once the first round came, a second round closes every relist begun before.
async fn events_until(
    admin: &kube::Client,
    rx: &mut mpsc::Receiver<WatchSignal>,
    markers: &[&str],
) -> Vec<String> {
    let mut seen = Vec::new();
    for round in ["m1", "m2"] {
        let mut waiting: std::collections::BTreeSet<String> =
            markers.iter().map(|ns| format!("{ns}/{round}")).collect();
        for ns in markers {
            // A new value each time: a marker that exists already changes.
            static MARKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let mark = MARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            put_configmap(admin, ns, round, &mark.to_string()).await;
        }
        while !waiting.is_empty() {
            let Ok(signal) = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await else {
                panic!("no event in a minute; waiting for {waiting:?}, seen {seen:?}")
            };
            let signal = signal.expect("the manager runs");
            let WatchSignal::Event(e) = signal else {
                continue;
            };
            let key = format!("{}/{}", e.object.namespace().unwrap_or(""), e.object.name());
            if key.ends_with("/m1") || key.ends_with("/m2") {
                waiting.remove(&key);
            } else {
                seen.push(format!("{:?} {key}", e.event_type));
            }
        }
    }
    seen
}

/// A resource only tenant plugins need is watched in their namespaces only, with the
/// RBAC the teams granted there (a Role each) and nothing cluster-wide; a namespace
/// added holds the cache unsynced until it is listed.
#[tokio::test]
async fn a_resource_only_tenants_need_is_watched_only_in_their_namespaces() {
    let server = ApiServer::start(Config::default().with_rbac("admin", &[("host", HOST)]))
        .await
        .expect("server");
    let admin = kube::Client::try_from(server.client_config()).expect("client");
    let host = client_as(&server, "host");
    namespaces(&admin).await;
    for (ns, name) in [("a", "one"), ("b", "two"), ("c", "three")] {
        put_configmap(&admin, ns, name, "0").await;
    }
    grant_configmaps_in(&admin, "a").await;
    grant_configmaps_in(&admin, "b").await;
    server.record_requests();
    let (manager, caches, access, mut rx) = manager(&host);
    tenants_need(&manager, &["a", "b"]);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.clone().run(cancel.clone()));

    let events = events_until(&admin, &mut rx, &["a", "b"]).await;
    assert_eq!(events, ["Added a/one", "Added b/two"]);
    assert_eq!(manager.readiness().synced, ["v1/ConfigMap"]);
    assert!(access.missing().is_empty(), "{:?}", access.missing());
    assert_eq!(
        cached(&caches),
        ["a/m1", "a/m2", "a/one", "b/m1", "b/m2", "b/two"]
            .map(String::from)
            .into()
    );
    let paths: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.client == "host" && r.path.contains("configmaps"))
        .map(|r| r.path)
        .collect();
    assert!(!paths.is_empty());
    for path in &paths {
        assert!(
            path.starts_with("/api/v1/namespaces/a/configmaps")
                || path.starts_with("/api/v1/namespaces/b/configmaps"),
            "{path}"
        );
    }

    // Namespace c's tenant arrives before its team granted the host anything there: the
    // restarted watch is not synced until c is listed too (what waits for the cache
    // waits for that list), and once granted c's objects come, nothing else.
    tenants_need(&manager, &["a", "b", "c"]);
    let since = std::time::Instant::now();
    while manager.readiness().syncing.is_empty() {
        assert!(since.elapsed() < Duration::from_secs(60), "never restarted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let missing: Vec<String> = access.missing().into_iter().map(|m| m.rule).collect();
    assert_eq!(
        missing,
        [
            "list configmaps in namespace c",
            "watch configmaps in namespace c"
        ]
    );
    grant_configmaps_in(&admin, "c").await;
    access.recheck(&host).await;
    assert_eq!(
        events_until(&admin, &mut rx, &["a", "b", "c"]).await,
        ["Added c/three"]
    );
    assert_eq!(manager.readiness().synced, ["v1/ConfigMap"]);
    cancel.cancel();
    run.await.expect("manager");
}

/// The namespaces of a tenants-only resource change: its watch restarts over its kept
/// cache, each scope's relist diffed by resourceVersion. A namespace added brings its
/// objects as added; a change made while the watch restarts comes once; nothing is
/// invented for the namespaces still watched; a cluster plugin needing it too widens it
/// to the cluster; a namespace dropped leaves the cache without events.
#[tokio::test]
async fn a_change_of_the_tenant_namespaces_rewatches_over_the_kept_cache() {
    let server = ApiServer::start(Config::default().with_rbac("admin", &[("host", HOST)]))
        .await
        .expect("server");
    let admin = kube::Client::try_from(server.client_config()).expect("client");
    let host = client_as(&server, "host");
    grant_configmaps(&admin).await;
    namespaces(&admin).await;
    for (ns, name) in [("a", "one"), ("b", "two"), ("c", "three")] {
        put_configmap(&admin, ns, name, "0").await;
    }
    let (manager, caches, _, mut rx) = manager(&host);
    tenants_need(&manager, &["a"]);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.clone().run(cancel.clone()));
    assert_eq!(events_until(&admin, &mut rx, &["a"]).await, ["Added a/one"]);

    // Namespace b's tenant arrives; a/one changes while the watch restarts (the host's
    // requests held meanwhile).
    server.stall_client("host");
    tenants_need(&manager, &["a", "b"]);
    put_configmap(&admin, "a", "one", "1").await;
    server.release_client("host");
    let mut events = events_until(&admin, &mut rx, &["a", "b"]).await;
    events.sort();
    assert_eq!(events, ["Added b/two", "Modified a/one"]);

    // A cluster plugin needs ConfigMaps too: cluster-wide, c's objects added, nothing
    // else.
    tenants_need(&manager, &[]);
    assert_eq!(
        events_until(&admin, &mut rx, &["a", "b", "c"]).await,
        ["Added c/three"]
    );

    // Only b's tenant is left: the other namespaces leave the cache, silently, and b's
    // changes still come.
    tenants_need(&manager, &["b"]);
    put_configmap(&admin, "b", "two", "2").await;
    assert_eq!(
        events_until(&admin, &mut rx, &["b"]).await,
        ["Modified b/two"]
    );
    assert_eq!(
        cached(&caches),
        ["b/m1", "b/m2", "b/two"].map(String::from).into()
    );
    cancel.cancel();
    run.await.expect("manager");
}
