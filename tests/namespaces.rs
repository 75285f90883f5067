//! `kubewasm run --namespace NS`: every watcher, cache and read stays in NS, so the Roles
//! from `kubewasm rbac --namespace NS` are all the host needs. Against the embedded API
//! server with RBAC enforced and the real binary: the generated RBAC is applied, the host
//! runs as its ServiceAccount, and the server's record of requests shows each one the host
//! made.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::*;

const HOST_TOKEN: &str = "host-token";
const HOST_USER: &str = "system:serviceaccount:kubewasm:kubewasm";

fn trigger(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace,
                        "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"value": "1"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_mode_runs_on_the_roles_of_rbac_namespace_and_asks_nothing_cluster_wide() {
    let env = Env::with_rbac(false, &[(HOST_TOKEN, HOST_USER)]).await;
    let namespaces = env.api("v1", "Namespace", "namespaces", None);
    for ns in ["kubewasm", "team-a", "team-b"] {
        env.create(
            &namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    env.add_plugin(&test_plugin("testkit"), "testkit", None);

    // `kubewasm rbac --namespace team-a`: Roles only (nothing namespaced cluster-wide).
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "rbac", "--plugins"])
        .arg(&env.plugins)
        .arg("--approvals")
        .arg(&env.approvals)
        .args([
            "--namespace",
            "team-a",
            "--service-account-namespace",
            "kubewasm",
            // Plugin objects are cluster-scoped: a namespace-only install uses the
            // plugin directory.
            "--no-plugin-objects",
        ])
        .output()
        .expect("kubewasm rbac runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let docs: Vec<Value> = {
        use serde::Deserialize;
        serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap())
            .collect()
    };
    for d in &docs {
        if d["kind"] == "ClusterRole" {
            for rule in d["rules"].as_array().into_iter().flatten() {
                // Discovery, asking what the host may do (a SelfSubjectAccessReview is
                // cluster-scoped and reads nothing) and what each plugin's account may
                // read (a SubjectAccessReview, likewise), and Plugin objects
                // (cluster-scoped).
                let cluster_scoped = [
                    json!(["selfsubjectaccessreviews"]),
                    json!(["subjectaccessreviews"]),
                    json!(["plugins"]),
                    json!(["plugins/status"]),
                ];
                assert!(
                    rule.get("nonResourceURLs").is_some()
                        || cluster_scoped.contains(&rule["resources"]),
                    "a namespaced permission in a ClusterRole: {rule}"
                );
            }
        }
    }
    let file = env.dir.path().join("rbac.yaml");
    std::fs::write(&file, &text).unwrap();
    env.apply_path(&file).await;

    let cms_a = env.api("v1", "ConfigMap", "configmaps", Some("team-a"));
    let cms_b = env.api("v1", "ConfigMap", "configmaps", Some("team-b"));
    env.create(&cms_a, trigger("before", "team-a")).await;
    env.create(&cms_b, trigger("before", "team-b")).await;

    env.server.record_requests();
    let kubeconfig: PathBuf = env.kubeconfig_for(HOST_TOKEN);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", "json", "--log", "info", "run"])
        .arg("--plugins")
        .arg(&env.plugins)
        .arg("--approvals")
        .arg(&env.approvals)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--namespace", "team-a", "--plugin-namespace", "kubewasm"])
        .arg("--no-plugin-objects")
        .args(["--metrics-addr", "off", "--retry-base", "100ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = HostProcess::spawn_command(cmd);

    eventually("team-a's ConfigMap handled", CONVERGE, || async {
        get(&cms_a, "before-out").await
    })
    .await;
    env.create(&cms_a, trigger("after", "team-a")).await;
    env.create(&cms_b, trigger("after", "team-b")).await;
    eventually("the new team-a ConfigMap handled", CONVERGE, || async {
        get(&cms_a, "after-out").await
    })
    .await;
    // team-b is outside: never listed, watched, or handled.
    assert!(get(&cms_b, "before-out").await.is_none());
    assert!(get(&cms_b, "after-out").await.is_none());
    let failures = host.matching(|l| {
        let m = field(l, "message");
        m.starts_with("watch error") || m == "event failed" || m.starts_with("discovery failed")
    });
    assert!(failures.is_empty(), "{}", host.dump());

    let requests: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.client == HOST_TOKEN)
        .collect();
    let configmaps: Vec<_> = requests
        .iter()
        .filter(|r| r.path.contains("/configmaps"))
        .collect();
    assert!(
        configmaps.iter().any(|r| r.path.contains("watch=")),
        "no ConfigMap watch recorded: {requests:#?}"
    );
    for r in &configmaps {
        assert!(
            r.path.starts_with("/api/v1/namespaces/team-a/configmaps"),
            "a ConfigMap request outside team-a: {} {}",
            r.method,
            r.path
        );
    }
    // The watch's label selector is shared by every consumer of the resource (one plugin,
    // no declared read), so the server does the filtering: every list and watch carries it.
    let collection: Vec<_> = configmaps
        .iter()
        .filter(|r| {
            r.method == "GET"
                && r.path
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .ends_with("/configmaps")
        })
        .collect();
    assert!(collection.len() >= 2, "a list and a watch: {collection:#?}");
    for r in &collection {
        assert!(
            r.path
                .contains("labelSelector=kubewasm.dev%2Ftestkit%3Dtestkit"),
            "a ConfigMap list or watch without the plugin's label selector: {}",
            r.path
        );
    }
    // Nothing else namespaced was asked for cluster-wide either (discovery, the host's own
    // namespace and team-a only).
    for r in &requests {
        let p = r.path.split('?').next().unwrap_or_default();
        let namespaced_ok =
            p.contains("/namespaces/team-a/") || p.contains("/namespaces/kubewasm/");
        let discovery = p == "/api"
            || p == "/apis"
            || p == "/version"
            || p.starts_with("/api/v1") && !p.contains("/namespaces/") && p.split('/').count() <= 3
            || p.starts_with("/apis/") && p.split('/').count() <= 4;
        // The host asking whether it may list and watch in team-a, whether each plugin's
        // account may read in team-a, and who it is (none of which reads anything), and
        // the Plugin objects, which are cluster-scoped.
        let reviews = [
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        ];
        let cluster_scoped = r.method == "POST" && reviews.contains(&p)
            || p.starts_with("/apis/kubewasm.dev/v1alpha1/plugins");
        assert!(
            namespaced_ok || discovery || cluster_scoped,
            "a request outside the namespaces: {} {}",
            r.method,
            r.path
        );
    }
    assert_eq!(host.stop(), Some(0));
}
