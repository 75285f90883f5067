//! Operations in a cluster: two replicas with leader election (exactly one writes, the
//! other takes over when it stops), the host configured in-cluster from a service-account
//! directory over TLS, and Kubernetes Events on objects whose events fail.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use kubewasm_apiserver::{ApiServer, Config};
use serde_json::{Value, json};
use support::*;

fn cm(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": labels}, "data": data})
}

const LEASE: [&str; 8] = [
    "--leader-elect",
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "200ms",
    "--lease-name",
];

fn replica(env: &Env, id: &str) -> HostProcess {
    let mut args: Vec<&str> = LEASE.to_vec();
    args.extend(["kubewasm-test", "--identity", id]);
    env.start_host(&args)
}

fn applied(h: &HostProcess) -> usize {
    h.matching(|l| field(l, "message").starts_with("applied"))
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_writer_and_a_handover_without_double_writes() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let a = replica(&env, "replica-a");
    let b = replica(&env, "replica-b");
    let leader_line = |h: &HostProcess| {
        h.matching(|l| field(l, "message").contains("became leader"))
            .len()
    };
    eventually("a leader", CONVERGE, || async {
        (leader_line(&a) + leader_line(&b) > 0).then_some(())
    })
    .await;
    let (leader, follower) = if leader_line(&a) > 0 { (a, b) } else { (b, a) };

    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let label = json!({"kubewasm.dev/testkit": "testkit"});
    env.create(&cms, cm("x", label.clone(), json!({"value": "1"})))
        .await;
    let out = eventually("x-out", CONVERGE, || async { get(&cms, "x-out").await }).await;
    // Give the follower every chance to write too, then check it did not.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(applied(&leader) >= 1, "{}", leader.dump());
    assert_eq!(
        applied(&follower),
        0,
        "the follower wrote:\n{}",
        follower.dump()
    );
    let now = get(&cms, "x-out").await.unwrap();
    assert_eq!(
        now.metadata.resource_version, out.metadata.resource_version,
        "x-out written twice"
    );
    assert_eq!(managers(&now), ["kubewasm-testkit"]);

    // The leader stops (and releases the Lease): the follower takes over and handles
    // what changes next.
    assert_eq!(leader.stop(), Some(0));
    follower
        .wait_log("follower became leader", |l| {
            field(l, "message").contains("became leader")
        })
        .await;
    env.create(&cms, cm("y", label, json!({"value": "2"})))
        .await;
    eventually("y-out by the new leader", CONVERGE, || async {
        get(&cms, "y-out").await
    })
    .await;
    assert!(applied(&follower) >= 1);
    let lease = env.api("coordination.k8s.io/v1", "Lease", "leases", Some("default"));
    let lease = get(&lease, "kubewasm-test").await.expect("lease");
    let holder = lease.data["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(holder == "replica-a" || holder == "replica-b", "{holder}");
    assert!(
        follower
            .logs()
            .iter()
            .any(|l| field(l, "message").contains("became leader")
                && l.to_string().contains(&holder)),
        "the Lease names {holder}, not the new leader"
    );
    assert_eq!(follower.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_configuration_over_tls_runs_a_scenario() {
    let server = ApiServer::start(Config {
        tls: true,
        token: Some("in-cluster-token".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = kube::Client::try_from(server.client_config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sa = dir.path().join("serviceaccount");
    std::fs::create_dir(&sa).unwrap();
    std::fs::write(sa.join("token"), "in-cluster-token").unwrap();
    std::fs::write(sa.join("ca.crt"), server.ca_pem().unwrap()).unwrap();
    std::fs::write(sa.join("namespace"), "default").unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install_approved(
        &example_plugin("mongodb-monitor"),
        &plugins,
        "mongodb-monitor",
        None,
    );
    let docs = kubewasm::apply::manifests::read_manifests(&[root().join("examples/crds")]).unwrap();
    kubewasm::apply::manifests::apply_manifests(&client, &docs, Duration::from_secs(20))
        .await
        .unwrap();

    let port = server.url().rsplit(':').next().unwrap().to_string();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", "json", "run", "--plugins"])
        .arg(&plugins)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path())
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", &port)
        .env("KUBEWASM_SERVICEACCOUNT_DIR", &sa)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = HostProcess::spawn_command(cmd);

    let dbs = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("mongodb.com", "v1", "MongoDB"),
            "mongodb",
        ),
    );
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": "mongodb.com/v1",
        "kind": "MongoDB", "metadata": {"name": "incluster", "namespace": "default"}, "spec": {"type": "ReplicaSet", "members": 1, "version": "7.0.12", "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}}}}))
        .unwrap();
    dbs.create(&Default::default(), &obj).await.unwrap();
    let monitors = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client,
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
            "servicemonitors",
        ),
    );
    eventually("ServiceMonitor via in-cluster config", CONVERGE, || async {
        get(&monitors, "incluster-monitor").await
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_event_records_a_kubernetes_event_on_the_object() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let host = env.start_host(&[]);
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(
        &cms,
        cm(
            "broken",
            json!({"kubewasm.dev/testkit": "testkit"}),
            json!({"action": "bad-json"}),
        ),
    )
    .await;
    let events = env.api("v1", "Event", "events", Some("default"));
    let event = eventually("a Warning Event on the ConfigMap", CONVERGE, || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.data["involvedObject"]["name"] == json!("broken"))
    })
    .await;
    assert_eq!(event.data["type"], json!("Warning"));
    assert_eq!(event.data["reason"], json!("IntentRefused"));
    assert!(
        event.data["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not valid JSON"),
        "{:?}",
        event.data
    );
    assert_eq!(host.stop(), Some(0));
}
