//! The opt-in end-to-end suite: the seed scenarios on a real cluster, with the host running
//! as a ServiceAccount that holds only what `kubewasm rbac --kubeconfig` printed.
//!
//! Runs when `KUBEWASM_E2E_KUBECONFIG` names a cluster-admin kubeconfig; otherwise it says
//! SKIPPED and exits 0 (CI has no cluster). See `tests/e2e/README.md` for the variables and
//! for how to stand up a control plane on your own machine. A plain runner (no libtest):
//! scenarios run in order on one host and share what they set up, and each is reported as
//! `ok` or `FAIL`, then `N passed, N failed`.

#[path = "../support/mod.rs"]
mod support;

mod common;
mod preview;
mod scrape;
mod sharded;
mod swap;
mod tenants;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, Stdio};

use common::{
    BoxFuture, CONVERGE, HostLog, SELDON_CRD, Seed, api, apply, client_for, crd_names, create,
    delete_crd, panic_message, rand_id, read_crds, site,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::registry::Registry;
use support::{HostProcess, eventually, field, get, managers, root};

fn main() {
    let Some(kubeconfig) = std::env::var_os("KUBEWASM_E2E_KUBECONFIG").map(PathBuf::from) else {
        println!(
            "SKIPPED: the end-to-end suite needs a real cluster: set KUBEWASM_E2E_KUBECONFIG to \
             a cluster-admin kubeconfig (tests/e2e/README.md)"
        );
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let failed = runtime.block_on(run(kubeconfig));
    std::process::exit(i32::from(failed > 0));
}

/// Everything the scenarios share.
struct Suite {
    admin: Client,
    /// This run's id, in every name the suite creates.
    id: String,
    /// Where the host's ServiceAccount, roles and Lease live.
    host_ns: String,
    /// Where the scenarios' objects live.
    ns: String,
    plugins: PathBuf,
    /// The operator's approvals of the plugins (`--approvals`).
    approvals: PathBuf,
    sa_kubeconfig: PathBuf,
    crds: Vec<Value>,
    /// Names of the cluster-scoped RBAC objects `kubewasm rbac` printed.
    cluster_rbac: Vec<(String, String)>,
    host: tokio::sync::Mutex<Option<HostProcess>>,
    /// The OCI registry on loopback that Plugin objects' modules come from; stopped at
    /// cleanup (the suite is leaked, so nothing drops it).
    registry: std::sync::Mutex<Option<Registry>>,
    /// `127.0.0.1:PORT` of that registry (`--insecure-registry`).
    registry_host: String,
    admin_kubeconfig: PathBuf,
    /// Cluster-scoped objects the scenarios created (`apiVersion`, kind, plural, name).
    created: std::sync::Mutex<Vec<(String, String, String, String)>>,
    _dir: tempfile::TempDir,
}

type Scenario = fn(&'static Suite) -> Pin<Box<dyn Future<Output = ()> + Send>>;

async fn run(admin_kubeconfig: PathBuf) -> usize {
    let admin = client_for(&admin_kubeconfig).await;
    let version = admin.apiserver_version().await.expect("server version");
    println!(
        "e2e against {} (kube-apiserver {}, {})",
        admin.default_namespace(),
        version.git_version,
        version.platform
    );
    let suite: &'static Suite = Box::leak(Box::new(setup(admin, &admin_kubeconfig).await));
    let scenarios: &[(&str, Scenario)] = &[
        (
            "provision on demand: MongoDB and Service owned by the ContentSite, status set",
            |s| Box::pin(provision_on_demand(s)),
        ),
        (
            "garbage collection by the controller-manager removes the children",
            |s| Box::pin(garbage_collection(s)),
        ),
        (
            "watch what you don't own: a foreign MongoDB gets a ServiceMonitor",
            |s| Box::pin(foreign_mongodb(s)),
        ),
        (
            "know when it's ready: a CRD installed after the host started",
            |s| Box::pin(late_crd_and_readiness(s)),
        ),
        (
            "two plugins write one field: 409 names the other manager, the forcing one wins",
            |s| Box::pin(conflict(s)),
        ),
        (
            "per-plugin identity: a plugin whose own role lacks a verb gets 403, though the host could",
            |s| Box::pin(own_identity(s)),
        ),
        (
            "a plugin labels its trigger: the apply names the trigger's uid, kube-apiserver takes it",
            |s| Box::pin(label_self(s)),
        ),
        (
            "a Plugin object from a registry: Ready, writes as its ServiceAccount, swapped in place",
            |s| Box::pin(plugin_object_from_a_registry(s)),
        ),
        (
            "a swap to a version that reads a new kind: staged until its cache syncs, no failed event, no ERROR",
            |s| Box::pin(swap::reads_a_new_kind(s)),
        ),
        (
            "the apiserver is SIGKILLed and restarted; changes right after are handled",
            |s| Box::pin(apiserver_crash(s)),
        ),
        (
            "the host restarts: nothing lost, nothing written twice",
            |s| Box::pin(host_restart(s)),
        ),
        (
            "two sharded hosts: the seed scenarios pass, one SIGKILLed mid-run loses nothing",
            |s| Box::pin(sharded::two_sharded_hosts(s)),
        ),
        (
            "preview: a Plugin in DryRun writes nothing, reports each would-be write, and an RBAC refusal with the server's reason",
            |s| Box::pin(preview::dry_run(s)),
        ),
        (
            "preview: a shadow candidate diverges exactly where its settings differ, writes nothing, and is promoted by a swap",
            |s| Box::pin(preview::shadow(s)),
        ),
        (
            "secure scrape: /metrics over HTTPS, no token 401, a ServiceAccount without the reader role 403, with it the metrics",
            |s| Box::pin(scrape::secure_scrape(s)),
        ),
        (
            "teams' plugins: a user holding only its namespace delivers one from a registry, and cannot reach another namespace",
            // Last: it replaces the suite's host with one run with --tenant-registry.
            |s| Box::pin(tenants::team_delivers_its_own_plugin(s)),
        ),
    ];
    // KUBEWASM_E2E_ONLY: run only the scenarios whose name contains it (one scenario
    // while working on it; the setup and cleanup run all the same).
    let only = std::env::var("KUBEWASM_E2E_ONLY").unwrap_or_default();
    let (mut passed, mut failed) = (0, 0);
    for (name, scenario) in scenarios {
        if !name.contains(only.as_str()) {
            println!("skip {name} (KUBEWASM_E2E_ONLY={only})");
            continue;
        }
        let started = std::time::Instant::now();
        match tokio::spawn(scenario(suite)).await {
            Ok(()) => {
                passed += 1;
                println!("ok   {name} ({:.1?})", started.elapsed());
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {name}: {}", panic_message(e));
                if let Some(host) = suite.host.lock().await.as_ref() {
                    let logs = host.dump();
                    let tail: Vec<&str> = logs.lines().rev().take(40).collect();
                    println!("  last host log lines:");
                    for l in tail.iter().rev() {
                        println!("    {l}");
                    }
                }
            }
        }
    }
    cleanup(suite).await;
    println!("{passed} passed, {failed} failed");
    failed
}

fn kubewasm() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log", "warn"]);
    cmd
}

/// Namespaces, CRDs, the plugin directory, RBAC from `kubewasm rbac`, the ServiceAccount's
/// token, and the host started under it (without the SeldonDeployment CRD, which a
/// scenario installs later).
async fn setup(admin: Client, admin_kubeconfig: &Path) -> Suite {
    let id = format!("{:08x}", rand_id());
    let host_ns = format!("kubewasm-e2e-{id}");
    let ns = format!("kubewasm-e2e-{id}-apps");
    let dir = tempfile::tempdir().expect("tempdir");
    for n in [&host_ns, &ns] {
        apply(
            &admin,
            vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})],
        )
        .await;
    }

    // The CRDs: ours, or the upstream ones when KUBEWASM_E2E_CRDS names a directory.
    let crds = read_crds();
    println!("CRDs: {}", crd_names(&crds));
    apply(&admin, crds.clone()).await;
    // The Plugin kind (plugins.kubewasm.dev), which the host follows by default.
    let plugin_crd: Vec<Value> = kubewasm::apply::manifests::read_manifests(&[
        root().join("deploy/kubernetes/base/crd-plugins.yaml")
    ])
    .expect("read the Plugin CRD")
    .into_iter()
    .map(|d| d.object)
    .collect();
    apply(&admin, plugin_crd).await;
    // Where Plugin objects' modules come from: a registry on loopback (the host runs on
    // this machine), reached over plain HTTP (`--insecure-registry`).
    let registry = Registry::start();
    let registry_host = registry.host();

    // The plugins: the three seed plugins, and testkit twice as two writers of one field.
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    // The operator's approvals: the seed plugins' (plugins/approvals.yaml, as the demo
    // uses them) and one per testkit.
    let approvals = dir.path().join("approvals");
    std::fs::create_dir(&approvals).unwrap();
    std::fs::copy(
        root().join("plugins/approvals.yaml"),
        approvals.join("seed.yaml"),
    )
    .unwrap();
    for name in [
        "contentsite-provisioner",
        "mongodb-monitor",
        "seldon-endpoint",
    ] {
        std::fs::copy(
            support::example_plugin(name),
            plugins.join(format!("{name}.wasm")),
        )
        .unwrap();
        let settings = root().join(format!("target/plugins/rust/{name}.yaml"));
        if settings.is_file() {
            std::fs::copy(settings, plugins.join(format!("{name}.yaml"))).unwrap();
        }
    }
    for (name, extra) in [
        ("writer-a", "value: a\n"),
        ("writer-b", "value: b\nforce: true\nallowForce: true\n"),
        // Approved to create ConfigMaps, but its own role will lack `patch`.
        ("narrow", ""),
        // Server-side applies a label on its trigger (with the trigger's uid).
        ("labeller", "patchSelf: true\n"),
        // The sharded hosts' scenario: `<cm>-out`, and `<cm>-deleted` once a deletion is
        // handled (the trackers say `action: track-deletion`).
        ("tracker", ""),
    ] {
        let selector = match name {
            "narrow" | "labeller" | "tracker" => name,
            _ => "writer",
        };
        // The operator's approval of exactly what testkit then asks for.
        support::install_approved(
            &support::test_plugin("testkit"),
            &plugins,
            &approvals,
            name,
            Some(&format!(
                "name: {name}\nselector: kubewasm.dev/e2e-{selector}={id}\n{extra}"
            )),
        );
    }

    // RBAC exactly as `kubewasm rbac` prints it, resolved on this cluster.
    let rbac_name = format!("kubewasm-e2e-{id}");
    let out = kubewasm()
        .args(["rbac", "--plugins"])
        .arg(&plugins)
        .arg("--approvals")
        .arg(&approvals)
        .arg("--kubeconfig")
        .arg(admin_kubeconfig)
        .args(["--name", &rbac_name, "--service-account", "kubewasm"])
        .args(["--service-account-namespace", &host_ns])
        .output()
        .expect("kubewasm rbac");
    assert!(
        out.status.success(),
        "kubewasm rbac: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(dir.path().join("rbac.yaml"), &yaml).unwrap();
    let rbac: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("RBAC YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect();
    assert!(
        rbac.iter()
            .all(|d| d["metadata"]["annotations"]["kubewasm.dev/guessed"].is_null()),
        "kubewasm rbac guessed on a cluster that serves every kind:\n{yaml}"
    );
    // The host follows Plugin objects (the default), so its RBAC must let it.
    let rule_on = |resource: &str, verb: &str| {
        rbac.iter().any(|d| {
            d["rules"].as_array().is_some_and(|rules| {
                rules.iter().any(|r| {
                    r["apiGroups"] == json!(["kubewasm.dev"])
                        && r["resources"]
                            .as_array()
                            .is_some_and(|x| x.contains(&json!(resource)))
                        && r["verbs"]
                            .as_array()
                            .is_some_and(|x| x.contains(&json!(verb)))
                })
            })
        })
    };
    for (resource, verb) in [
        ("plugins", "get"),
        ("plugins", "list"),
        ("plugins", "watch"),
        ("plugins/status", "patch"),
    ] {
        assert!(
            rule_on(resource, verb),
            "kubewasm rbac gave the host no {verb} on {resource}:\n{yaml}"
        );
    }
    let cluster_rbac = rbac
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "ClusterRoleBinding")
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    println!("RBAC from kubewasm rbac: {} objects", rbac.len());
    apply(&admin, rbac).await;

    // Per-plugin identity: `narrow`'s own role loses `patch` (server-side apply is a
    // PATCH), while the host's ServiceAccount may do anything to ConfigMaps. Its writes
    // must still be refused: they are sent as kubewasm-narrow. It keeps the reads its
    // approval needs (get, list, watch), or it would not be loaded at all.
    let host_extra = format!("{rbac_name}-host-configmaps");
    let roles = api(
        &admin,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        None,
    );
    // Cluster-scoped: named after the install (kubewasm rbac --service-account-namespace).
    let narrow_role = format!("{host_ns}:{rbac_name}-narrow");
    let _ = roles.delete(&narrow_role, &DeleteParams::default()).await;
    apply(
        &admin,
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   // Still this install's (the label `kubewasm rbac` checks before it
                   // would take a role over): narrowed, not replaced by someone else's.
                   "metadata": {"name": narrow_role, "labels": {"kubewasm.dev/install": host_ns}},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": host_extra},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": host_extra},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": host_extra},
                   "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": host_ns}]}),
        ],
    )
    .await;
    let mut cluster_rbac: Vec<(String, String)> = cluster_rbac;
    cluster_rbac.push(("ClusterRole".into(), host_extra.clone()));
    cluster_rbac.push(("ClusterRoleBinding".into(), host_extra));

    // The host's identity: a bound token of its ServiceAccount (TokenRequest API).
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &host_ns);
    let token = sas
        .create_token_request(
            "kubewasm",
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
        .expect("token status")
        .token
        .expect("a token in the TokenRequest status");
    let sa_kubeconfig = dir.path().join("sa.kubeconfig");
    write_token_kubeconfig(admin_kubeconfig, &token, &sa_kubeconfig);

    // The SeldonDeployment CRD goes away until the scenario that installs it late.
    delete_crd(&admin, SELDON_CRD).await;

    let suite = Suite {
        admin,
        id,
        host_ns,
        ns,
        plugins,
        approvals,
        sa_kubeconfig,
        crds,
        cluster_rbac,
        host: tokio::sync::Mutex::new(None),
        registry: std::sync::Mutex::new(Some(registry)),
        registry_host,
        admin_kubeconfig: admin_kubeconfig.to_path_buf(),
        created: std::sync::Mutex::new(Vec::new()),
        _dir: dir,
    };
    let host = start_host(&suite).await;
    *suite.host.lock().await = Some(host);
    suite
}

/// A kubeconfig for the same cluster as `admin` that authenticates with `token` only.
fn write_token_kubeconfig(admin: &Path, token: &str, out: &Path) {
    let text = std::fs::read_to_string(admin).expect("admin kubeconfig");
    let kc: Value = serde_yaml_ng::from_str(&text).expect("admin kubeconfig YAML");
    let current = kc["current-context"].as_str().expect("current-context");
    let ctx = kc["contexts"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == current))
        .expect("current context");
    let cluster_name = ctx["context"]["cluster"].as_str().expect("context cluster");
    let cluster = kc["clusters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == cluster_name))
        .expect("cluster")
        .clone();
    let doc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "kubewasm-sa", "user": {"token": token}}],
        "contexts": [{"name": "kubewasm-sa", "context": {"cluster": cluster_name, "user": "kubewasm-sa"}}],
        "current-context": "kubewasm-sa",
    });
    std::fs::write(out, serde_yaml_ng::to_string(&doc).unwrap()).unwrap();
}

async fn start_host(s: &Suite) -> HostProcess {
    start_host_with(s, &[]).await
}

/// `kubewasm run` as the suite's ServiceAccount with `extra` flags (the sharded hosts').
async fn start_host_with(s: &Suite, extra: &[&str]) -> HostProcess {
    start_host_from(s, Some((&s.plugins, &s.approvals)), extra).await
}

/// `kubewasm run` as the suite's ServiceAccount, serving the plugin directory and its
/// approvals `dir` (None: Plugin objects only), with `extra` flags.
async fn start_host_from(s: &Suite, dir: Option<(&Path, &Path)>, extra: &[&str]) -> HostProcess {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args([
        "--log-format",
        "json",
        "--log",
        "info",
        "run",
        "--kubeconfig",
    ])
    .arg(&s.sa_kubeconfig);
    if let Some((plugins, approvals)) = dir {
        cmd.arg("--plugins")
            .arg(plugins)
            .arg("--approvals")
            .arg(approvals);
    }
    // No status listener unless `extra` asks for one (the preview scenario reads /preview).
    if !extra.contains(&"--metrics-addr") {
        cmd.args(["--metrics-addr", "off"]);
    }
    // Each plugin writes as its ServiceAccount in the host's namespace (impersonated).
    cmd.args(["--plugin-namespace", &s.host_ns])
        .args([
            "--discovery-interval",
            "2s",
            "--no-reload",
            // Plugin accounts' reads reviewed again every few seconds: a role granted
            // during a scenario is seen without waiting minutes.
            "--access-review-interval",
            "3s",
        ])
        // Plugin objects' modules: from the loopback registry, kept in the suite's folder,
        // with no credentials of this machine's user.
        .args(["--insecure-registry", &s.registry_host])
        .arg("--module-store")
        .arg(s._dir.path().join("modules"))
        .env("DOCKER_CONFIG", docker_config(s))
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Ok(cache) = std::env::var("KUBEWASM_CACHE_DIR") {
        cmd.args(["--cache-dir", &cache]);
    }
    cmd.args(extra);
    let host = HostProcess::spawn_command(cmd);
    host.wait_log_for("the host to run", CONVERGE, |l| {
        field(l, "message").starts_with("host running")
    })
    .await;
    host
}

/// The seed scenarios read the host process's log.
impl HostLog for Suite {
    fn lines(&self) -> BoxFuture<'_, Vec<Value>> {
        Box::pin(async move {
            self.host
                .lock()
                .await
                .as_ref()
                .map(HostProcess::logs)
                .unwrap_or_default()
        })
    }
}

fn seed(s: &Suite) -> Seed<'_> {
    Seed {
        admin: &s.admin,
        ns: &s.ns,
        log: s,
    }
}

async fn provisioned(s: &Suite, site: &DynamicObject) -> (DynamicObject, DynamicObject) {
    seed(s).provisioned(site).await
}

async fn provision_on_demand(s: &'static Suite) {
    seed(s).provision_on_demand("blog").await;
}

async fn garbage_collection(s: &'static Suite) {
    seed(s).garbage_collection("blog").await;
}

async fn foreign_mongodb(s: &'static Suite) {
    seed(s).foreign_mongodb().await;
}

async fn late_crd_and_readiness(s: &'static Suite) {
    let crd = s
        .crds
        .iter()
        .find(|c| c["metadata"]["name"] == SELDON_CRD)
        .expect("the SeldonDeployment CRD is among the CRDs")
        .clone();
    apply(&s.admin, vec![crd]).await;
    eventually("the host watches SeldonDeployments", CONVERGE, || async {
        with_host(s, |h| {
            h.logs()
                .iter()
                .any(|l| {
                    field(l, "message") == "watch started"
                        && field(l, "resource").starts_with("seldondeployments")
                })
                .then_some(())
        })
        .await
    })
    .await;
    seed(s).seldon_available().await;
}

async fn with_host<T>(s: &Suite, f: impl FnOnce(&HostProcess) -> T) -> T {
    let guard = s.host.lock().await;
    f(guard.as_ref().expect("host running"))
}

/// Wait for the host's log line that it applied `what` (`create MongoDB ns/name`) and
/// return the resourceVersion the server answered.
async fn applied_rv(s: &Suite, what: &str) -> String {
    let line = eventually(&format!("applied {what}"), CONVERGE, || async {
        with_host(s, |h| {
            h.logs()
                .into_iter()
                .find(|l| field(l, "message") == format!("applied {what}"))
        })
        .await
    })
    .await;
    field(&line, "resource_version").to_string()
}

async fn conflict(s: &'static Suite) {
    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&s.ns));
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "contested", "namespace": s.ns, "labels": {"kubewasm.dev/e2e-writer": s.id}},
            "data": {"action": "write-shared"}}),
    )
    .await;
    eventually("ConfigMap shared = b", CONVERGE, || {
        let cms = cms.clone();
        async move {
            get(&cms, "shared")
                .await
                .filter(|o| o.data["data"]["key"] == json!("b"))
        }
    })
    .await;
    // Whichever writer applied first, the forcing one owns the field now. Touch the trigger:
    // both write again, and the non-forcing writer's apply must conflict.
    cms.patch(
        "contested",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"round": "2"}})),
    )
    .await
    .expect("touch the trigger");
    let refusal = eventually("writer-a's 409 naming writer-b", CONVERGE, || async {
        with_host(s, |h| {
            h.logs().into_iter().find(|l| {
                field(l, "message") == "event failed"
                    && field(l, "plugin") == "writer-a"
                    && field(l, "error").contains("409")
            })
        })
        .await
    })
    .await;
    assert!(
        field(&refusal, "error").contains("kubewasm-writer-b"),
        "{refusal}"
    );
    let shared = get(&cms, "shared").await.expect("shared");
    assert_eq!(
        shared.data["data"]["key"],
        json!("b"),
        "the non-forcing writer took the field"
    );
    let owners: BTreeMap<String, String> = shared
        .managed_fields()
        .iter()
        .filter_map(|m| {
            let fields = m.fields_v1.as_ref()?.0.to_string();
            fields
                .contains("f:key")
                .then(|| (m.manager.clone().unwrap_or_default(), fields))
        })
        .collect();
    assert_eq!(
        owners.keys().collect::<Vec<_>>(),
        vec!["kubewasm-writer-b"],
        "{owners:?}"
    );
}

/// `narrow`'s write goes out as `kubewasm-narrow`, whose role lacks `patch`: the real
/// API server answers 403 naming that ServiceAccount, although the host's own identity
/// could write ConfigMaps; nothing is written, and the error names plugin and object.
async fn own_identity(s: &'static Suite) {
    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&s.ns));
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "narrow", "namespace": s.ns,
                            "labels": {"kubewasm.dev/e2e-narrow": s.id}},
               "data": {"value": "1"}}),
    )
    .await;
    let guard = s.host.lock().await;
    let host = guard.as_ref().expect("host running");
    let failed = host
        .wait_log_for("narrow's write refused", CONVERGE, |l| {
            field(l, "message") == "event failed" && field(l, "plugin") == "narrow"
        })
        .await;
    let error = field(&failed, "error").to_string();
    println!("  the refusal: {error}");
    let want = format!(
        "configmaps \"narrow-out\" is forbidden: User \"system:serviceaccount:{}:kubewasm-narrow\" \
         cannot patch resource \"configmaps\" in API group \"\" in the namespace \"{}\"",
        s.host_ns, s.ns
    );
    assert!(error.contains(&want), "{failed}");
    assert!(field(&failed, "object").contains("narrow"), "{failed}");
    drop(guard);
    assert!(
        cms.get_opt("narrow-out").await.expect("get").is_none(),
        "nothing written as the host"
    );
}

async fn label_self(s: &'static Suite) {
    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&s.ns));
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "labelled", "namespace": s.ns,
                            "labels": {"kubewasm.dev/e2e-labeller": s.id}},
               "data": {"action": "label-self"}}),
    )
    .await;
    let labelled = eventually("the trigger labelled by its plugin", CONVERGE, || async {
        cms.get_opt("labelled").await.ok().flatten().filter(|o| {
            o.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get("kubewasm.dev/labelled").map(String::as_str) == Some("yes"))
        })
    })
    .await;
    let fields = labelled
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some("kubewasm-labeller"))
        .and_then(|m| m.fields_v1.as_ref())
        .map(|f| f.0.clone())
        .expect("kubewasm-labeller's managedFields entry");
    println!("  kubewasm-labeller owns: {fields}");
    assert_eq!(
        fields,
        json!({"f:metadata": {"f:labels": {"f:kubewasm.dev/labelled": {}}}}),
        "the uid is not a managed field"
    );
    eventually("labelled-out", CONVERGE, || async {
        cms.get_opt("labelled-out").await.ok().flatten()
    })
    .await;
    let guard = s.host.lock().await;
    let host = guard.as_ref().expect("host running");
    let failed = host
        .matching(|l| field(l, "message") == "event failed" && field(l, "plugin") == "labeller");
    assert!(failed.is_empty(), "{failed:?}");
}

async fn apiserver_crash(s: &'static Suite) {
    let Ok(restart) = std::env::var("KUBEWASM_E2E_RESTART_APISERVER") else {
        println!(
            "     (SKIPPED inside: set KUBEWASM_E2E_RESTART_APISERVER to a command that SIGKILLs and restarts kube-apiserver)"
        );
        return;
    };
    let status = Command::new("sh")
        .args(["-c", &restart])
        .status()
        .expect("restart command");
    assert!(status.success(), "{restart} failed");
    // Changes right after the restart: a new site is provisioned once the watches recover.
    let sites = api(
        &s.admin,
        "sites.kubewasm.dev/v1alpha1",
        "ContentSite",
        "contentsites",
        Some(&s.ns),
    );
    let after = create(&sites, site("after-crash", &s.ns)).await;
    provisioned(s, &after).await;
}

async fn host_restart(s: &'static Suite) {
    let sites = api(
        &s.admin,
        "sites.kubewasm.dev/v1alpha1",
        "ContentSite",
        "contentsites",
        Some(&s.ns),
    );
    let steady = create(&sites, site("steady", &s.ns)).await;
    let (db, svc) = provisioned(s, &steady).await;
    // Let the status write land too, then stop the host cleanly.
    eventually("steady's status", CONVERGE, || {
        let sites = sites.clone();
        async move {
            get(&sites, "steady")
                .await
                .filter(|o| !o.data["status"].is_null())
        }
    })
    .await;
    let host = s.host.lock().await.take().expect("host running");
    assert_eq!(host.stop(), Some(0), "the host did not stop cleanly");
    // While it is down: a new site.
    let down = create(&sites, site("while-down", &s.ns)).await;
    let host = start_host(s).await;
    *s.host.lock().await = Some(host);
    provisioned(s, &down).await;
    // Nothing written twice: the restarted host handles steady again (its initial list),
    // and the server answers its applies with the resourceVersions steady's children already
    // had: the same content, so no write happened.
    let ns = &s.ns;
    let db_rv = applied_rv(s, &format!("create MongoDB {ns}/steady-db")).await;
    let svc_rv = applied_rv(s, &format!("create Service {ns}/steady")).await;
    assert_eq!(
        Some(db_rv),
        db.resource_version(),
        "steady-db was written again"
    );
    assert_eq!(
        Some(svc_rv),
        svc.resource_version(),
        "Service steady was written again"
    );
}

async fn cleanup(s: &Suite) {
    if let Some(host) = s.host.lock().await.take() {
        let _ = host.stop();
    }
    if let Some(mut registry) = s.registry.lock().ok().and_then(|mut r| r.take()) {
        registry.stop();
    }
    let created: Vec<_> = s.created.lock().map(|c| c.clone()).unwrap_or_default();
    for (api_version, kind, plural, name) in &created {
        let _ = api(&s.admin, api_version, kind, plural, None)
            .delete(name, &DeleteParams::default())
            .await;
    }
    let namespaces = api(&s.admin, "v1", "Namespace", "namespaces", None);
    let sharded_ns = format!("{}-sharded", s.ns);
    for ns in [&s.ns, &s.host_ns, &sharded_ns] {
        let _ = namespaces.delete(ns, &DeleteParams::background()).await;
    }
    for (kind, name) in &s.cluster_rbac {
        let (api_version, plural) = (
            "rbac.authorization.k8s.io/v1",
            if kind == "ClusterRole" {
                "clusterroles"
            } else {
                "clusterrolebindings"
            },
        );
        let _ = api(&s.admin, api_version, kind, plural, None)
            .delete(name, &DeleteParams::default())
            .await;
    }
    println!(
        "cleaned up: namespaces {}, {} and {sharded_ns}, {} cluster RBAC objects, {} objects of \
         scenarios, the registry (CRDs stay installed)",
        s.ns,
        s.host_ns,
        s.cluster_rbac.len(),
        created.len()
    );
}

/// An empty Docker config folder for `kubewasm push` and the host: no credentials of this
/// machine's user leak in.
fn docker_config(s: &Suite) -> PathBuf {
    let dir = s._dir.path().join("docker-config");
    std::fs::create_dir_all(&dir).expect("docker config dir");
    dir
}

/// `kubewasm push FILE oci://REGISTRY/PATH --insecure-registry REGISTRY`: the pinned
/// reference it prints last.
fn push(s: &Suite, file: &Path, path: &str) -> String {
    let out = kubewasm()
        .arg("push")
        .arg(file)
        .arg(format!("oci://{}/{path}", s.registry_host))
        .args(["--insecure-registry", &s.registry_host])
        .env("DOCKER_CONFIG", docker_config(s))
        .output()
        .expect("run kubewasm push");
    assert!(
        out.status.success(),
        "kubewasm push {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pinned = stdout.lines().last().unwrap_or_default().trim().to_string();
    assert!(pinned.contains("@sha256:"), "push printed {stdout:?}");
    pinned
}

/// `kubewasm ARGS…` (`approve …` or `rbac …`) for this run's install (its name prefix,
/// the host's ServiceAccount and namespace, resolved on the cluster): the documents it
/// printed, which it must print.
fn install_docs(s: &Suite, args: &[&str]) -> Vec<Value> {
    let out = kubewasm()
        .args(args)
        .arg("--kubeconfig")
        .arg(&s.admin_kubeconfig)
        .args(["--name", &format!("kubewasm-e2e-{}", s.id)])
        .args(["--service-account", "kubewasm"])
        .args(["--service-account-namespace", &s.host_ns])
        .output()
        .expect("run kubewasm");
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubewasm {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("kubewasm's YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The cluster-scoped objects among `docs` (Plugins, ClusterRoles and their bindings),
/// for cleanup to delete should a scenario fail before it does.
fn created_cluster_objects(s: &Suite, docs: &[Value]) {
    for d in docs {
        let kind = d["kind"].as_str().unwrap_or_default();
        let plural = match kind {
            "Plugin" => "plugins",
            "ClusterRole" => "clusterroles",
            "ClusterRoleBinding" => "clusterrolebindings",
            _ => continue,
        };
        s.created.lock().expect("created").push((
            d["apiVersion"].as_str().unwrap_or_default().to_string(),
            kind.to_string(),
            plural.to_string(),
            d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ));
    }
}

/// `kubectl get plugins -o wide` as cluster-admin, printed into the suite's output (the
/// kubectl of `KUBEWASM_E2E_KUBECTL`, else the one on PATH; without one it says so).
fn print_plugins(s: &Suite, when: &str) {
    let kubectl = std::env::var_os("KUBEWASM_E2E_KUBECTL").unwrap_or_else(|| "kubectl".into());
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&s.admin_kubeconfig)
        .args(["get", "plugins", "-o", "wide"])
        .output();
    let text = match &out {
        Ok(o) => format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("(kubectl: {e})\n"),
    };
    println!("  kubectl get plugins ({when}):");
    for l in text.lines() {
        println!("    {l}");
    }
}

/// The condition `type_` of a Plugin's status.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// Wait until Plugin `name` is Ready=True (Serving) for its current generation with
/// `digest`; returns its status.
async fn serving(plugins: &Api<DynamicObject>, name: &str, digest: &str) -> Value {
    eventually(
        &format!("Plugin {name} Ready=True (Serving) with {digest}"),
        CONVERGE,
        || async {
            let o = get(plugins, name).await?;
            let generation = json!(o.metadata.generation?);
            let st = o.data.get("status")?.clone();
            let ready = condition(&st, "Ready");
            (st["observedGeneration"] == generation
                && ready["status"] == "True"
                && ready["reason"] == "Serving"
                && ready["observedGeneration"] == generation
                && st["digest"] == digest)
                .then_some(st)
        },
    )
    .await
}

/// testkit pushed to a real registry, delivered as the Plugin object `kubewasm approve`
/// prints (with its RBAC), served by the running host: Ready with the digest and version,
/// its writes sent as its own ServiceAccount (the real API server refuses them once that
/// ServiceAccount's role loses `patch`, though the host's own could), then swapped to
/// version 2 by changing spec.module, in the same host process.
async fn plugin_object_from_a_registry(s: &'static Suite) {
    let v1 = push(s, &support::test_plugin("testkit"), "e2e/testkit:v1");
    let v2 = push(s, &support::test_plugin("testkit-v2"), "e2e/testkit:v2");
    let digest = |pinned: &str| pinned.split_once('@').map(|(_, d)| d.to_string()).unwrap();
    println!("  pushed {v1}\n  pushed {v2}");

    // What the operator reviews and applies: the Plugin and its RBAC, for the host's
    // ServiceAccount in its namespace. The settings limit testkit to this run's objects.
    let settings = s._dir.path().join("testkit-object.yaml");
    std::fs::write(
        &settings,
        format!(
            "name: testkit\nselector: kubewasm.dev/e2e-object={}\n",
            s.id
        ),
    )
    .unwrap();
    let settings = settings.to_string_lossy().into_owned();
    let wasm = support::test_plugin("testkit")
        .to_string_lossy()
        .into_owned();
    let docs = install_docs(
        s,
        &["approve", &wasm, "--settings", &settings, "--module", &v1],
    );
    let yaml = serde_json::to_string_pretty(&docs).unwrap_or_default();
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]).replace('"', ""))
        .collect();
    println!("  kubewasm approve printed: {}", kinds.join(", "));
    assert_eq!(docs[0]["kind"], "Plugin", "{yaml}");
    assert_eq!(docs[0]["spec"]["module"], json!(v1), "{yaml}");
    created_cluster_objects(s, &docs);
    for d in &docs {
        if d["kind"] == "ServiceAccount" {
            assert_eq!(d["metadata"]["namespace"], json!(s.host_ns), "{d}");
        }
    }
    // testkit's own role: the one bound to its ServiceAccount.
    let own_role = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding"
                && d["subjects"].as_array().is_some_and(|subjects| {
                    subjects.iter().any(|x| {
                        x["name"] == "kubewasm-testkit" && x["namespace"] == json!(s.host_ns)
                    })
                })
        })
        .and_then(|b| b["roleRef"]["name"].as_str())
        .and_then(|r| {
            docs.iter()
                .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == r)
        })
        .cloned()
        .unwrap_or_else(|| panic!("no ClusterRole bound to kubewasm-testkit in:\n{yaml}"));
    let pid = with_host(s, |h| h.pid()).await;
    let plugins = api(&s.admin, "kubewasm.dev/v1alpha1", "Plugin", "plugins", None);

    // First without the read rules `approve` renders for the plugin's own account: the
    // host asks the real API server (SubjectAccessReview) whether kubewasm-testkit may
    // get, list and watch what the Plugin approves, and does not load it, naming each
    // missing rule in its status.
    let without_reads: Vec<Value> = docs
        .iter()
        .cloned()
        .map(|mut d| {
            if d == own_role
                && let Some(rules) = d["rules"].as_array_mut()
            {
                for r in rules.iter_mut() {
                    if let Some(verbs) = r["verbs"].as_array_mut() {
                        verbs.retain(|v| {
                            !["get", "list", "watch"].contains(&v.as_str().unwrap_or(""))
                        });
                    }
                }
                rules.retain(|r| r["verbs"].as_array().is_some_and(|v| !v.is_empty()));
            }
            d
        })
        .collect();
    apply(&s.admin, without_reads).await;
    let refused = eventually(
        "Plugin testkit refused for its account's missing reads",
        CONVERGE,
        || async {
            let o = get(&plugins, "testkit").await?;
            let st = o.data.get("status")?.clone();
            (condition(&st, "Approved")["status"] == "False"
                && condition(&st, "Ready")["reason"] == "AccessDenied")
                .then_some(st)
        },
    )
    .await;
    let message = condition(&refused, "Ready")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!("  refused without the read rules: {message}");
    for verb in ["list", "watch"] {
        assert!(
            message.contains(&format!("{verb} configmaps")),
            "the missing {verb} rule is not named: {refused}"
        );
    }
    assert_eq!(refused["digest"], Value::Null, "{refused}");
    print_plugins(s, "refused: its account may not read");

    // What `approve` printed, applied whole: the review finds the rules and it loads.
    apply(&s.admin, docs.clone()).await;
    let st = serving(&plugins, "testkit", &digest(&v1)).await;
    assert_eq!(st["version"], json!("1"), "{st}");
    assert_eq!(st["module"], json!(v1), "{st}");
    assert_eq!(condition(&st, "Approved")["status"], json!("True"), "{st}");
    print_plugins(s, "version 1 serving");

    // An object handled: `<cm>-out` written by kubewasm-testkit.
    let cms = api(&s.admin, "v1", "ConfigMap", "configmaps", Some(&s.ns));
    let label = json!({"kubewasm.dev/e2e-object": s.id});
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "object-a", "namespace": s.ns, "labels": label},
               "data": {"value": "1"}}),
    )
    .await;
    let out_at = |name: &'static str, version: &'static str| {
        let cms = cms.clone();
        async move {
            eventually(&format!("{name} at version {version}"), CONVERGE, || {
                let cms = cms.clone();
                async move {
                    get(&cms, name).await.filter(|o| {
                        o.data["data"]["version"] == json!(version)
                            && o.data["data"]["value"] == json!("1")
                    })
                }
            })
            .await
        }
    };
    let written = out_at("object-a-out", "1").await;
    assert!(
        managers(&written).contains(&"kubewasm-testkit".to_string()),
        "managers {:?}",
        managers(&written)
    );

    // Written as the plugin's ServiceAccount: without `patch` in its own role, the real
    // API server refuses its write, naming that ServiceAccount, although the host's own
    // identity may do anything to ConfigMaps (setup binds it).
    let roles = api(
        &s.admin,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        None,
    );
    let role_name = own_role["metadata"]["name"].as_str().unwrap().to_string();
    let without_patch: Vec<Value> = own_role["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut r| {
            if let Some(verbs) = r["verbs"].as_array_mut() {
                verbs.retain(|v| v != "patch");
            }
            r
        })
        .filter(|r| r["verbs"].as_array().is_some_and(|v| !v.is_empty()))
        .collect();
    roles
        .patch(
            &role_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": without_patch})),
        )
        .await
        .expect("take patch from testkit's role");
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "object-b", "namespace": s.ns, "labels": label},
               "data": {"value": "1"}}),
    )
    .await;
    let guard = s.host.lock().await;
    let failed = guard
        .as_ref()
        .expect("host running")
        .wait_log_for("testkit's write refused", CONVERGE, |l| {
            field(l, "message") == "event failed"
                && field(l, "plugin") == "testkit"
                && field(l, "object").contains("object-b")
        })
        .await;
    drop(guard);
    let error = field(&failed, "error").to_string();
    println!("  the refusal: {error}");
    let want = format!(
        "configmaps \"object-b-out\" is forbidden: User \"system:serviceaccount:{}:kubewasm-testkit\" \
         cannot patch resource \"configmaps\" in API group \"\" in the namespace \"{}\"",
        s.host_ns, s.ns
    );
    assert!(error.contains(&want), "{failed}");
    assert!(
        cms.get_opt("object-b-out").await.expect("get").is_none(),
        "object-b-out written although testkit's role lacks patch"
    );
    // The role as approved again; a touch of the trigger is handled.
    roles
        .patch(
            &role_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": own_role["rules"]})),
        )
        .await
        .expect("restore testkit's role");
    cms.patch(
        "object-b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"round": "2"}})),
    )
    .await
    .expect("touch object-b");
    out_at("object-b-out", "1").await;

    // Swapped in place: spec.module names version 2's digest.
    plugins
        .patch(
            "testkit",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"module": v2}})),
        )
        .await
        .expect("point the Plugin at version 2");
    let st = serving(&plugins, "testkit", &digest(&v2)).await;
    assert_eq!(st["version"], json!("2"), "{st}");
    assert_eq!(st["module"], json!(v2), "{st}");
    out_at("object-a-out", "2").await;
    out_at("object-b-out", "2").await;
    print_plugins(s, "swapped to version 2");
    let guard = s.host.lock().await;
    let host = guard.as_ref().expect("host running");
    assert_eq!(host.pid(), pid, "the host restarted");
    let replaced = host
        .matching(|l| field(l, "message") == "plugin replaced" && field(l, "plugin") == "testkit");
    assert_eq!(replaced.len(), 1, "{replaced:?}");
    assert_eq!(
        field(&replaced[0], "source"),
        "plugins.kubewasm.dev/testkit"
    );
    drop(guard);

    // Deleted: unloaded (cleanup deletes it too, should this scenario fail before).
    plugins
        .delete("testkit", &DeleteParams::default())
        .await
        .expect("delete the Plugin");
    let guard = s.host.lock().await;
    guard
        .as_ref()
        .expect("host running")
        .wait_log_for("testkit removed", CONVERGE, |l| {
            field(l, "message") == "plugin removed" && field(l, "plugin") == "testkit"
        })
        .await;
}
