//! Teams deliver their own plugins (issue 35), on the real cluster: a user holding only an
//! `edit`-like Role in its namespace, `kubewasm-tenant` there (as `kubewasm rbac --tenants`
//! prints it), and nothing else, applies what `kubewasm approve --namespace` printed for
//! testkit pushed to the registry, with `kubectl --as` from the admin kubeconfig; a host
//! run with `--tenant-registry` under a ServiceAccount of its own (only the host's base
//! RBAC and `rbac --tenants`, no right in the team's namespace but what the team grants)
//! serves it. The same user cannot create the Role and RoleBinding in another namespace
//! (the real API server says Forbidden), and a NamespacedPlugin whose permissions name
//! another namespace is refused by the host with `OutsideNamespace` on its status.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{CONVERGE, api, apply, create};
use crate::support::{self, HostProcess, eventually, field, get, managers, root};
use crate::{
    Suite, condition, created_cluster_objects, docker_config, kubewasm, push,
    write_token_kubeconfig,
};

/// The host's ServiceAccount for teams' plugins, in the suite's host namespace.
const TENANT_HOST: &str = "kubewasm-tenants";

/// The kubectl of `KUBEWASM_E2E_KUBECTL`, else the one on PATH.
fn kubectl() -> Command {
    Command::new(std::env::var_os("KUBEWASM_E2E_KUBECTL").unwrap_or_else(|| "kubectl".into()))
}

/// `kubectl apply -f FILE` as `user` (impersonated from the admin kubeconfig): whether it
/// succeeded, and what it said.
fn apply_as(s: &Suite, user: &str, file: &Path) -> (bool, String) {
    let out = kubectl()
        .arg("--kubeconfig")
        .arg(&s.admin_kubeconfig)
        .args(["--as", user, "apply", "-f"])
        .arg(file)
        .output()
        .expect("run kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Documents as one YAML stream in a file of the suite's folder.
fn write_stream(s: &Suite, name: &str, docs: &[Value]) -> PathBuf {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).expect("YAML")))
        .collect();
    let path = s._dir.path().join(name);
    std::fs::write(&path, text).expect("write manifests");
    path
}

/// `kubewasm ARGS…` printing YAML (resolved on the cluster): its documents.
fn printed(args: &[&str]) -> Vec<Value> {
    let out = kubewasm().args(args).output().expect("run kubewasm");
    assert!(
        out.status.success(),
        "kubewasm {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("kubewasm's YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The tenant host's ServiceAccount, its RBAC (the host's base part from `kubewasm rbac`
/// with no plugin: discovery, its reviews, Plugin objects, its Lease; and `--tenants`),
/// and a kubeconfig with its token. Returns the
/// kubeconfig's path.
async fn tenant_host_identity(s: &Suite) -> PathBuf {
    let empty = s._dir.path().join("tenants-empty");
    std::fs::create_dir_all(&empty).expect("empty dir");
    let kc = s.admin_kubeconfig.to_string_lossy().into_owned();
    let dir = empty.to_string_lossy().into_owned();
    let rbac = printed(&[
        "rbac",
        "--plugins",
        &dir,
        "--approvals",
        &dir,
        "--tenants",
        "--kubeconfig",
        &kc,
        "--name",
        &format!("kubewasm-e2e-{}-tenants", s.id),
        "--service-account",
        TENANT_HOST,
        "--service-account-namespace",
        &s.host_ns,
    ]);
    created_cluster_objects(s, &rbac);
    apply(&s.admin, rbac).await;
    let sas: Api<ServiceAccount> = Api::namespaced(s.admin.clone(), &s.host_ns);
    let token = sas
        .create_token_request(
            TENANT_HOST,
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("TokenRequest")
        .status
        .and_then(|st| st.token)
        .expect("a token in the TokenRequest status");
    let path = s._dir.path().join("tenants.kubeconfig");
    write_token_kubeconfig(&s.admin_kubeconfig, &token, &path);
    path
}

/// `kubewasm run` as the tenant host: no plugin of its own (an empty directory; Plugin
/// objects followed, though the scenarios before deleted theirs: NamespacedPlugins are
/// followed only beside them), teams' plugins from the suite's registry.
async fn start_tenant_host(s: &Suite, kubeconfig: &Path) -> HostProcess {
    let empty = s._dir.path().join("tenants-empty");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args([
        "--log-format",
        "json",
        "--log",
        "info",
        "run",
        "--kubeconfig",
    ])
    .arg(kubeconfig)
    .arg("--plugins")
    .arg(&empty)
    .arg("--approvals")
    .arg(&empty)
    .args(["--metrics-addr", "off", "--no-reload"])
    .args([
        "--discovery-interval",
        "2s",
        "--access-review-interval",
        "3s",
    ])
    .args(["--tenant-registry", &s.registry_host])
    .args(["--insecure-registry", &s.registry_host])
    .arg("--module-store")
    .arg(s._dir.path().join("tenant-modules"))
    .env("DOCKER_CONFIG", docker_config(s))
    .env_remove("KUBECONFIG")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if let Ok(cache) = std::env::var("KUBEWASM_CACHE_DIR") {
        cmd.args(["--cache-dir", &cache]);
    }
    let host = HostProcess::spawn_command(cmd);
    host.wait_log_for("the tenant host to run", CONVERGE, |l| {
        field(l, "message").starts_with("host running")
    })
    .await;
    host
}

/// The team's `edit`-like Role in `ns` (the rights `edit` holds on what testkit touches,
/// plus `update` on `configmaps/finalizers`, which its owner references need and `edit`
/// lacks), `kubewasm-tenant` bound there, and nothing else for `user`.
fn team_rbac(s: &Suite, ns: &str, user: &str) -> Vec<Value> {
    let all = json!([
        "get", "list", "watch", "create", "update", "patch", "delete"
    ]);
    let subject = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]);
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "team-edit", "namespace": ns},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps", "configmaps/finalizers"], "verbs": all},
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "team-edit", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-edit"},
               "subjects": subject}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "kubewasm-tenant", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": format!("kubewasm-e2e-{}-tenants-tenant", s.id)},
               "subjects": subject}),
    ]
}

/// Wait until NamespacedPlugin `name` has a condition with `reason` (Ready or Approved);
/// returns its status.
async fn reason_of(plugins: &Api<DynamicObject>, name: &str, reason: &str) -> Value {
    eventually(
        &format!("NamespacedPlugin {name} with reason {reason}"),
        CONVERGE,
        || async {
            let st = get(plugins, name).await?.data.get("status")?.clone();
            ["Ready", "Approved"]
                .iter()
                .any(|t| condition(&st, t)["reason"] == reason)
                .then_some(st)
        },
    )
    .await
}

pub async fn team_delivers_its_own_plugin(s: &'static Suite) {
    let team_ns = format!("kubewasm-e2e-{}-team", s.id);
    let other_ns = format!("kubewasm-e2e-{}-other", s.id);
    let user = format!("kubewasm-e2e-{}-team-user", s.id);
    let namespaces: Vec<Value> = [&team_ns, &other_ns]
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    for n in [&team_ns, &other_ns] {
        s.created.lock().expect("created").push((
            "v1".into(),
            "Namespace".into(),
            "namespaces".into(),
            n.to_string(),
        ));
    }
    apply(&s.admin, namespaces).await;
    let crd: Vec<Value> = kubewasm::apply::manifests::read_manifests(&[
        root().join("deploy/kubernetes/base/crd-namespacedplugins.yaml")
    ])
    .expect("read the NamespacedPlugin CRD")
    .into_iter()
    .map(|d| d.object)
    .collect();
    apply(&s.admin, crd).await;

    // The platform: the tenant host's identity and RBAC, the team's rights in team_ns.
    let kubeconfig = tenant_host_identity(s).await;
    apply(&s.admin, team_rbac(s, &team_ns, &user)).await;
    // It replaces the suite's host (the last scenario's, serving Plugin objects: none is
    // left), so a failure prints its log.
    let host = start_tenant_host(s, &kubeconfig).await;
    *s.host.lock().await = Some(host);

    // The team: testkit from the registry, approved for its namespace, applied as itself.
    let pinned = push(s, &support::test_plugin("testkit"), "e2e/team-testkit:v1");
    let settings = s._dir.path().join("teamkit.yaml");
    std::fs::write(
        &settings,
        format!("name: teamkit\nselector: kubewasm.dev/e2e-team={}\n", s.id),
    )
    .unwrap();
    // Described with these settings it calls itself teamkit: a file of that name.
    let wasm = s._dir.path().join("teamkit.wasm");
    std::fs::copy(support::test_plugin("testkit"), &wasm).expect("copy testkit");
    let approve = |ns: &str| {
        printed(&[
            "approve",
            "--namespace",
            ns,
            &wasm.to_string_lossy(),
            "--settings",
            &settings.to_string_lossy(),
            "--module",
            &pinned,
            "--kubeconfig",
            &s.admin_kubeconfig.to_string_lossy(),
            "--service-account",
            TENANT_HOST,
            "--service-account-namespace",
            &s.host_ns,
        ])
    };
    let docs = approve(&team_ns);
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]).replace('"', ""))
        .collect();
    println!(
        "  kubewasm approve --namespace printed: {}",
        kinds.join(", ")
    );
    assert!(
        docs.iter()
            .all(|d| d["metadata"]["namespace"] == json!(team_ns)),
        "{docs:#?}"
    );
    let file = write_stream(s, "team.yaml", &docs);
    let (ok, said) = apply_as(s, &user, &file);
    assert!(ok, "the team could not apply its plugin: {said}");
    println!("  applied as {user}:\n{said}");

    let plugins = api(
        &s.admin,
        "kubewasm.dev/v1alpha1",
        "NamespacedPlugin",
        "namespacedplugins",
        Some(&team_ns),
    );
    let st = reason_of(&plugins, "teamkit", "Serving").await;
    assert_eq!(condition(&st, "Ready")["status"], "True", "{st}");
    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&team_ns));
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "team-object", "namespace": team_ns,
                            "labels": {"kubewasm.dev/e2e-team": s.id}},
               "data": {"value": "1"}}),
    )
    .await;
    let written = eventually("team-object-out written", CONVERGE, || async {
        get(&cms, "team-object-out").await
    })
    .await;
    assert_eq!(written.data["data"]["value"], json!("1"));
    assert!(
        managers(&written).contains(&"kubewasm-teamkit".to_string()),
        "managers {:?}",
        managers(&written)
    );

    // The same objects in other_ns: the real API server refuses the team.
    let elsewhere: Vec<Value> = approve(&other_ns);
    let file = write_stream(s, "other.yaml", &elsewhere);
    let (ok, said) = apply_as(s, &user, &file);
    println!("  applying in {other_ns} as {user}:\n{said}");
    assert!(!ok && said.contains("Forbidden"), "{said}");
    let roles = api(
        &s.admin,
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        Some(&other_ns),
    );
    assert!(
        roles
            .get_opt("kubewasm-teamkit")
            .await
            .expect("get")
            .is_none(),
        "the team created a Role in {other_ns}"
    );

    // A NamespacedPlugin of the team's whose permissions reach into other_ns: the team may
    // create it, the host refuses it, naming the namespace.
    let mut reach = docs[0].clone();
    reach["metadata"]["name"] = json!("teamkit-reach");
    for list in ["watches", "grants"] {
        if let Some(entries) = reach["spec"]["permissions"][list].as_array_mut() {
            for e in entries {
                e["namespaces"] = json!([other_ns]);
            }
        }
    }
    let file = write_stream(s, "reach.yaml", &[reach]);
    let (ok, said) = apply_as(s, &user, &file);
    assert!(
        ok,
        "the team may create NamespacedPlugins in its namespace: {said}"
    );
    let st = reason_of(&plugins, "teamkit-reach", "OutsideNamespace").await;
    let message = ["Ready", "Approved"]
        .iter()
        .map(|t| condition(&st, t)["message"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ");
    println!("  refused: {message}");
    assert!(message.contains(other_ns.as_str()), "{st}");

    for name in ["teamkit", "teamkit-reach"] {
        let _ = plugins.delete(name, &DeleteParams::default()).await;
    }
}
