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

/// [`LEADER_ELECT`] on the Lease `kubewasm-test`.
fn lease() -> Vec<&'static str> {
    [&LEADER_ELECT[..], &["--lease-name", "kubewasm-test"]].concat()
}

fn replica(env: &Env, id: &str) -> HostProcess {
    let mut args = lease();
    args.extend(["--identity", id]);
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
    // Each process stands under its pod name plus a random suffix.
    assert!(
        holder.starts_with("replica-a_") || holder.starts_with("replica-b_"),
        "{holder}"
    );
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
    let approvals = dir.path().join("approvals");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::create_dir(&approvals).unwrap();
    install_approved(
        &example_plugin("mongodb-monitor"),
        &plugins,
        &approvals,
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
        .arg("--approvals")
        .arg(&approvals)
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
    // A fixed text: what the plugin wrote is in the host's log only.
    assert!(
        event.data["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("is malformed; the host's log has the details"),
        "{:?}",
        event.data
    );
    assert_eq!(host.stop(), Some(0));
}

/// `kubewasm run` as one replica whose requests carry its own bearer token (its
/// identity), so the embedded server can tell the replicas apart and stall one.
fn replica_with_token(env: &Env, id: &str) -> HostProcess {
    let mut args = lease();
    args.extend(["--identity", id]);
    env.start_host_as(id, &args)
}

/// The renew deadline in [`LEADER_ELECT`].
const RENEW_DEADLINE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_mid_apply_writes_nothing_after_its_deadline_and_exits_and_the_new_leader_sees_the_deletion()
 {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    env.server.record_requests();
    let a = replica_with_token(&env, "replica-a");
    let b = replica_with_token(&env, "replica-b");
    let leases = env.api("coordination.k8s.io/v1", "Lease", "leases", Some("default"));
    let holder = || async {
        get(&leases, "kubewasm-test")
            .await
            .and_then(|l| {
                l.data["spec"]["holderIdentity"]
                    .as_str()
                    .map(str::to_string)
            })
            .filter(|h| !h.is_empty())
    };
    let first = eventually("a leader", CONVERGE, holder).await;
    // The holder is the replica's name plus its process's suffix.
    let (mut old, new, old_id, new_id) = if first.starts_with("replica-a_") {
        (a, b, "replica-a", "replica-b")
    } else {
        (b, a, "replica-b", "replica-a")
    };

    // The leader handles `victim` while it leads.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let label = json!({"kubewasm.dev/testkit": "testkit"});
    env.create(
        &cms,
        cm("victim", label.clone(), json!({"action": "track-deletion"})),
    )
    .await;
    eventually("victim-out by the first leader", CONVERGE, || async {
        get(&cms, "victim-out").await
    })
    .await;
    // The follower watches ConfigMaps (so it sees the deletion to come).
    eventually("the follower watching ConfigMaps", CONVERGE, || async {
        env.server
            .requests()
            .iter()
            .any(|r| {
                r.client == new_id
                    && r.path.contains("configmaps")
                    && r.path.contains("watch=true")
                    && r.executed.is_some()
            })
            .then_some(())
    })
    .await;

    // Cut the leader off: every request it sends from now on is held, unanswered (its
    // open watches keep flowing, so it still sees events and starts applies).
    let cut = std::time::Instant::now();
    env.server.stall_client(old_id);
    env.create(&cms, cm("trigger", label, json!({"action": "copy"})))
        .await;
    let held_apply = |name: &'static str| {
        let server = &env.server;
        move || {
            let found = server.requests().into_iter().any(|r| {
                r.client == old_id && r.is_write() && r.path.contains(name) && r.executed.is_none()
            });
            async move { found.then_some(()) }
        }
    };
    eventually(
        "the old leader's apply of trigger-out held mid-flight",
        CONVERGE,
        held_apply("trigger-out"),
    )
    .await;
    // An object is deleted in the handover window.
    cms.delete("victim", &Default::default())
        .await
        .expect("delete victim");

    // The old leader gives up at its deadline: it exits with one clear line.
    let code = eventually("the old leader exits", CONVERGE, || {
        let exited = old.exited();
        async move { exited }
    })
    .await;
    // 3: a lost lease, told from a crash (1) and from a clean stop (0); deploy/README.md.
    assert_eq!(
        code,
        Some(3),
        "the old leader exits with the lost-lease code"
    );
    let lines = old.matching(|l| field(l, "message").contains("lost the lease"));
    assert_eq!(lines.len(), 1, "{}", old.dump());
    assert!(
        field(&lines[0], "message").contains("exiting so the new leader takes over"),
        "{lines:?}"
    );
    // Its apply was abandoned by the leadership guard, not merely by the exit.
    assert!(
        old.logs().iter().any(|l| field(l, "message")
            .contains("leadership ended while handling the event")
            && l.to_string().contains("trigger")),
        "{}",
        old.dump()
    );

    // The follower takes over and handles what the old leader could not: the trigger
    // (resync) and the deletion in the window (`deleted`, replayed from its tombstones).
    eventually("the new leader holds the Lease", CONVERGE, || async {
        holder()
            .await
            .filter(|h| h.starts_with(&format!("{new_id}_")))
    })
    .await;
    let out = eventually("trigger-out by the new leader", CONVERGE, || async {
        get(&cms, "trigger-out").await
    })
    .await;
    assert_eq!(managers(&out), ["kubewasm-testkit"]);
    let deleted = eventually(
        "the new leader's plugin saw `deleted`",
        CONVERGE,
        || async { get(&cms, "victim-deleted").await },
    )
    .await;
    assert_eq!(deleted.data["data"]["deleted"], json!("victim"));
    // The object lands before the host reads the answer and logs it: the line is waited on.
    let applied_victim = |h: &HostProcess| {
        h.matching(|l| {
            field(l, "message").starts_with("applied") && l.to_string().contains("victim-deleted")
        })
        .len()
    };
    eventually(
        "the new leader's apply of victim-deleted logged",
        CONVERGE,
        || async { (applied_victim(&new) > 0).then_some(()) },
    )
    .await;
    assert_eq!(applied_victim(&new), 1, "{}", new.dump());

    // Nothing the old leader sent after the cut was executed: each held request was
    // given up (the process is gone), so releasing the stall lets nothing through.
    eventually(
        "the old leader's held requests given up",
        CONVERGE,
        || async { (env.server.held_requests(old_id) == 0).then_some(()) },
    )
    .await;
    env.server.release_client(old_id);
    let from_old: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.client == old_id && r.arrived >= cut)
        .collect();
    assert!(
        from_old
            .iter()
            .any(|r| r.is_write() && r.path.contains("trigger-out")),
        "not cut off mid-apply: {from_old:#?}"
    );
    for r in &from_old {
        assert!(
            r.abandoned && r.executed.is_none(),
            "executed after the cut: {r:#?}"
        );
    }
    // Its deadline is at most the renew deadline after the cut (its last successful
    // renewal started before): no write of its started after that.
    let late: Vec<_> = from_old
        .iter()
        .filter(|r| r.is_write() && r.arrived > cut + RENEW_DEADLINE)
        .collect();
    assert!(
        late.is_empty(),
        "writes started after the deadline: {late:#?}"
    );
    assert_eq!(new.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_process_is_a_new_candidate_and_its_takeover_counts_a_transition() {
    let env = Env::with_crds(false).await;
    env.add_plugin(&test_plugin("testkit"), "testkit", None);
    let leases = env.api("coordination.k8s.io/v1", "Lease", "leases", Some("default"));
    let first = replica(&env, "pod-0");
    let led = first
        .wait_log("the first process leads", |l| {
            field(l, "message") == "became leader"
        })
        .await;
    let before = field(&led, "identity").to_string();
    assert!(before.starts_with("pod-0_"), "{led}");
    let lease = get(&leases, "kubewasm-test").await.expect("lease");
    assert_eq!(lease.data["spec"]["holderIdentity"], before.as_str());
    assert_eq!(lease.data["spec"]["leaseTransitions"], 0);
    // The container dies without releasing the Lease (SIGKILL) and comes back under the
    // same pod name: a new process, so not the holder; it takes over only once the lease
    // expired, and that counts as a transition.
    drop(first);
    let second = replica(&env, "pod-0");
    let led = second
        .wait_log("the restarted process leads", |l| {
            field(l, "message") == "became leader"
        })
        .await;
    let after = field(&led, "identity").to_string();
    assert!(after.starts_with("pod-0_"), "{led}");
    assert_ne!(before, after, "the same identity for two processes");
    let lease = get(&leases, "kubewasm-test").await.expect("lease");
    assert_eq!(lease.data["spec"]["holderIdentity"], after.as_str());
    assert_eq!(
        lease.data["spec"]["leaseTransitions"], 1,
        "{:?}",
        lease.data
    );
    assert_eq!(second.stop(), Some(0));
}

/// Issue 33, item 12: two replicas of a Deployment, plugins from a kubelet-mounted
/// ConfigMap swapped once, reported `kubewasm_reloads_total` 3 and 4 for the same loads.
/// Both count what started serving now: two plugins added, one replaced, on each replica
/// (the leader and the follower alike), however each batched the loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_replicas_count_the_same_reloads() {
    let env = Env::with_crds(false).await;
    let dir = &env.plugins;
    // The layout the kubelet writes for a ConfigMap volume: two plugins.
    let volume = |stamp: &str, testkit: &str| {
        let v = dir.join(stamp);
        std::fs::create_dir(&v).unwrap();
        std::fs::copy(test_plugin(testkit), v.join("testkit.wasm")).unwrap();
        std::fs::copy(test_plugin("testkit"), v.join("other.wasm")).unwrap();
        std::fs::write(v.join("other.yaml"), "name: other\n").unwrap();
        v
    };
    let v1 = volume("..2026_12_04_00_00_00.000000001", "testkit");
    env.approve_testkit("testkit");
    env.approve_testkit("other");
    std::os::unix::fs::symlink(v1.file_name().unwrap(), dir.join("..data")).unwrap();
    for f in ["testkit.wasm", "other.wasm", "other.yaml"] {
        std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
    }
    let mut args = lease();
    args.extend(["--reload-debounce", "100ms"]);
    let a = env.start_host(&[args.as_slice(), &["--identity", "replica-a"]].concat());
    let b = env.start_host(&[args.as_slice(), &["--identity", "replica-b"]].concat());
    let loaded = |h: &HostProcess| h.matching(|l| field(l, "message") == "plugin loaded").len();
    eventually("both replicas load both plugins", CONVERGE, || async {
        (loaded(&a) == 2 && loaded(&b) == 2).then_some(())
    })
    .await;

    // The kubelet's update: testkit's new version, other unchanged, `..data` swapped.
    let v2 = volume("..2026_12_04_00_01_00.000000002", "testkit-v2");
    std::os::unix::fs::symlink(v2.file_name().unwrap(), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();

    let reloads = |text: &str| {
        ["added", "replaced", "removed"].map(|change| {
            metric_sample(
                text,
                &format!(r#"kubewasm_reloads_total{{change="{change}"}}"#),
            )
        })
    };
    let mut counts = Vec::new();
    for host in [&a, &b] {
        let addr = ops_endpoint(host).await;
        let text = eventually("the new version serves", CONVERGE, || {
            let (_, text) = http_get_status(&addr, "/metrics");
            let replaced = reloads(&text)[1] >= 1.0;
            async move { replaced.then_some(text) }
        })
        .await;
        counts.push(reloads(&text));
    }
    assert_eq!(counts[0], counts[1], "the replicas count alike");
    assert_eq!(counts[0], [2.0, 1.0, 0.0], "added, replaced, removed");
    let replaced = |h: &HostProcess| h.matching(|l| field(l, "message") == "plugin replaced");
    assert_eq!(replaced(&a).len(), 1, "{}", a.dump());
    assert_eq!(replaced(&b).len(), 1, "{}", b.dump());
    assert_eq!(a.stop(), Some(0));
    assert_eq!(b.stop(), Some(0));
}

/// A replica that cannot take its Lease (here its namespace, `kubewasm-system` by default
/// out of a pod, does not exist) says why once at WARN, naming the Lease and the API
/// server's answer, instead of waiting to lead in silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_take_its_lease_says_why() {
    let env = Env::new().await;
    let host = env.start_host(&["--leader-elect", "--retry-period", "100ms"]);
    let line = host
        .wait_log("the Lease refused", |l| {
            field(l, "message").starts_with("cannot acquire the lease")
        })
        .await;
    assert_eq!(field(&line, "level"), "WARN", "{line}");
    assert_eq!(field(&line, "lease"), "kubewasm-system/kubewasm", "{line}");
    assert!(
        field(&line, "error").contains("namespaces \"kubewasm-system\" not found"),
        "{line}"
    );
    // Said once, not at every retry.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let said = host.matching(|l| field(l, "message").starts_with("cannot acquire the lease"));
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(host.stop(), Some(0));
}
