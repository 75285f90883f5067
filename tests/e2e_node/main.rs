//! The opt-in suite on a real node: the host image imported into the node's container
//! runtime, `deploy/` applied (the kustomize example overlay with two replicas and leader
//! election, then the Helm chart), and what the deployment does checked as its pods see
//! it: readiness, the Lease, the in-cluster configuration, the security context, the seed
//! scenarios, hot reload through the kubelet's ConfigMap volume, a Plugin object from a
//! registry, failover on pod deletion and on a killed container, a rolling update, the
//! JSON log and `/metrics`.
//!
//! Runs when `KUBEWASM_E2E_KUBECONFIG` names a cluster-admin kubeconfig **and**
//! `KUBEWASM_E2E_NODE=1` says the cluster has a node that runs pods, with
//! `KUBEWASM_E2E_IMPORT_IMAGE` the command that imports an image tarball into that node's
//! runtime; otherwise it says SKIPPED and exits 0 (CI has no cluster). See
//! `tests/e2e_node/README.md`. A plain runner (no libtest): checks run in order on one
//! deployment, each reported as `ok` or `FAIL` with its duration, then the timings and
//! `N passed, N failed`.

#[path = "../support/mod.rs"]
mod support;

#[path = "../e2e/common.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node as KubeNode, Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use common::{BoxFuture, CONVERGE, HostLog, Seed, api, apply, client_for, create, run_check};
use support::registry::Registry;
use support::{eventually, field, get, root};

/// The namespace of the kustomize overlays (fixed in `deploy/kubernetes`).
const KUSTOMIZE_NS: &str = "kubewasm-system";
/// The namespace the suite installs the Helm chart into.
const HELM_NS: &str = "kubewasm-helm";
/// The Deployment, Lease and release name, in both installs.
const NAME: &str = "kubewasm";
/// The host pods' labels.
const SELECTOR: &str = "app.kubernetes.io/name=kubewasm,app.kubernetes.io/component=host";
/// The host container.
const CONTAINER: &str = "kubewasm";
/// Pods of a fresh install or a rollout: image present, plugins compiled, caches synced.
const READY: Duration = Duration::from_secs(180);
/// The kubelet propagates a ConfigMap update within its sync period plus its cache TTL
/// (about a minute by default); three minutes is generous.
const KUBELET_SYNC: Duration = Duration::from_secs(180);
/// `--lease-duration` and `--retry-period` of the deployed host (its defaults).
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The label that routes a ConfigMap to one of the suite's testkit instances.
const ROUTE: &str = "kubewasm.dev/e2e-node";

fn main() {
    let Some(kubeconfig) = std::env::var_os("KUBEWASM_E2E_KUBECONFIG").map(PathBuf::from) else {
        println!(
            "SKIPPED: the real-node suite needs a cluster with a node: set KUBEWASM_E2E_KUBECONFIG \
             (cluster-admin), KUBEWASM_E2E_NODE=1 and KUBEWASM_E2E_IMPORT_IMAGE \
             (tests/e2e_node/README.md)"
        );
        return;
    };
    if std::env::var("KUBEWASM_E2E_NODE").as_deref() != Ok("1") {
        println!(
            "SKIPPED: KUBEWASM_E2E_NODE=1 is not set: it says the cluster has a node that runs \
             pods and KUBEWASM_E2E_IMPORT_IMAGE imports images into it (tests/e2e_node/README.md)"
        );
        return;
    }
    let Ok(import) = std::env::var("KUBEWASM_E2E_IMPORT_IMAGE") else {
        println!(
            "FAIL: KUBEWASM_E2E_NODE=1 needs KUBEWASM_E2E_IMPORT_IMAGE, a command that imports \
             an image tarball (appended as its last argument) into the node's runtime, e.g. \
             'ctr --address /run/containerd/containerd.sock -n k8s.io images import'"
        );
        std::process::exit(1);
    };
    // A failed check prints its message on its FAIL line; the panic itself only says where.
    std::panic::set_hook(Box::new(|info| {
        if let Some(at) = info.location() {
            println!(
                "     (panicked at {}:{})",
                at.file().rsplit('/').next().unwrap_or(""),
                at.line()
            );
        }
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let failed = runtime.block_on(run(kubeconfig, import));
    std::process::exit(i32::from(failed > 0));
}

/// Everything the checks share.
struct Node {
    admin: Client,
    admin_kubeconfig: PathBuf,
    kubectl: PathBuf,
    /// `KUBEWASM_E2E_IMPORT_IMAGE`.
    import: String,
    /// `KUBEWASM_E2E_CTR`: a `ctr` command for the node's containerd (namespace `k8s.io`),
    /// for killing a container and finding its process to read /proc. None: those parts
    /// are skipped (and say so).
    ctr: Option<String>,
    /// `KUBEWASM_E2E_PREPARE_NAMESPACE`: run with a namespace appended before pods start
    /// in it.
    prepare_ns: Option<String>,
    /// This run's id, in the scenarios' namespaces.
    id: String,
    /// The host image tarball and the name:tag in it.
    image_tar: PathBuf,
    image: String,
    /// The test overlay (over a copy of `deploy/kubernetes`, example overlay included).
    overlay: PathBuf,
    /// The image name the example overlay renders (what the test overlay replaces).
    example_image: String,
    /// The rendered Helm chart, once installed (for the teardown).
    helm_rendered: PathBuf,
    /// A registry the pods reach (`KUBEWASM_E2E_REGISTRY_ADDR`), for Plugin objects.
    registry: Option<Mutex<Registry>>,
    /// What `kubewasm approve` printed for the Plugin object, applied (for the teardown).
    approved: PathBuf,
    /// Named durations, printed at the end.
    timings: Mutex<Vec<(String, Duration)>>,
    dir: tempfile::TempDir,
}

type Check = fn(&'static Node) -> BoxFuture<'static, ()>;

async fn run(admin_kubeconfig: PathBuf, import: String) -> usize {
    let admin = client_for(&admin_kubeconfig).await;
    let node = Box::leak(Box::new(setup(admin, admin_kubeconfig, import).await));
    let node: &'static Node = node;
    print_versions(node).await;

    let checks: &[(&str, Check)] = &[
        ("the host image is imported into the node's runtime", |n| {
            Box::pin(import_image(n))
        }),
        (
            "kustomize (example overlay, 2 replicas, leader election): both pods Running and Ready",
            |n| Box::pin(install_overlay(n)),
        ),
        ("exactly one pod holds the Lease; the other follows", |n| {
            Box::pin(one_leader(n, KUSTOMIZE_NS))
        }),
        (
            "the in-cluster configuration (token, CA, namespace) is what the host uses",
            |n| Box::pin(in_cluster_config(n, KUSTOMIZE_NS)),
        ),
        (
            "the securityContext as deployed runs (pod spec and /proc)",
            |n| Box::pin(security_context(n, KUSTOMIZE_NS)),
        ),
        (
            "seed: a ContentSite gets its MongoDB and Service, owned, and its status",
            |n| Box::pin(seed_provision(n, KUSTOMIZE_NS)),
        ),
        ("seed: a foreign MongoDB gets a ServiceMonitor", |n| {
            Box::pin(seed_foreign(n, KUSTOMIZE_NS))
        }),
        (
            "seed: a SeldonDeployment that becomes Available gets an Ingress",
            |n| Box::pin(seed_seldon(n, KUSTOMIZE_NS)),
        ),
        (
            "kubectl logs: every line is a structured JSON record",
            |n| Box::pin(structured_logs(n, KUSTOMIZE_NS)),
        ),
        (
            "JSON log values carry no Rust debug formatting (Some(..), [\"..\"], quoted strings)",
            |n| Box::pin(log_values_plain(n, KUSTOMIZE_NS)),
        ),
        (
            "/metrics and /status through kubectl port-forward over HTTPS, 401 without a token, the page with a reader's; only the probes on the pod IP",
            |n| Box::pin(metrics(n)),
        ),
        (
            "hot reload through the kubelet: ConfigMap applied server-side, ..data swap, v2 serves, nothing lost",
            |n| Box::pin(hot_reload(n)),
        ),
        (
            "a Plugin object from a registry swapped in place, no pod restart",
            |n| Box::pin(plugin_object(n)),
        ),
        (
            "the leader pod deleted: the other takes over; changes during the handover handled once",
            |n| Box::pin(leader_deleted(n)),
        ),
        (
            "the leader's container killed: the other takes over within the lease duration",
            |n| Box::pin(leader_killed(n)),
        ),
        (
            "a rolling update (flag change) completes with readiness gating, no event lost",
            |n| Box::pin(rolling_update(n)),
        ),
        ("the kustomize install is removed", |n| {
            Box::pin(uninstall_overlay(n))
        }),
        (
            "Helm chart (2 replicas, leader election): both pods Running and Ready",
            |n| Box::pin(install_helm(n)),
        ),
        ("helm: exactly one pod holds the Lease", |n| {
            Box::pin(one_leader(n, HELM_NS))
        }),
        (
            "helm: the in-cluster configuration is what the host uses",
            |n| Box::pin(in_cluster_config(n, HELM_NS)),
        ),
        ("helm: the securityContext as deployed runs", |n| {
            Box::pin(security_context(n, HELM_NS))
        }),
        ("helm: seed: a ContentSite is provisioned", |n| {
            Box::pin(seed_provision(n, HELM_NS))
        }),
        ("helm: seed: a foreign MongoDB gets a ServiceMonitor", |n| {
            Box::pin(seed_foreign(n, HELM_NS))
        }),
        (
            "helm: seed: an Available SeldonDeployment gets an Ingress",
            |n| Box::pin(seed_seldon(n, HELM_NS)),
        ),
        ("helm: kubectl logs are structured JSON", |n| {
            Box::pin(structured_logs(n, HELM_NS))
        }),
        ("the Helm install is removed", |n| {
            Box::pin(uninstall_helm(n))
        }),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, check) in checks {
        if run_check(name, check(node)).await {
            passed += 1;
        } else {
            failed += 1;
            dump_pods(node).await;
        }
    }
    cleanup(node).await;
    println!("timings:");
    for (what, took) in node.timings.lock().expect("timings").iter() {
        println!("  {what}: {:.1} s", took.as_secs_f64());
    }
    println!("{passed} passed, {failed} failed");
    failed
}

/// A duration worth reporting (handovers, reloads, rollouts).
fn record(n: &Node, what: impl Into<String>, took: Duration) {
    let what = what.into();
    println!("     {what}: {:.1} s", took.as_secs_f64());
    n.timings.lock().expect("timings").push((what, took));
}

// ---------------------------------------------------------------------------------------
// Setup: the image, a copy of deploy/kubernetes with the built plugins, the test overlay.

async fn setup(admin: Client, admin_kubeconfig: PathBuf, import: String) -> Node {
    let id = format!("{:08x}", common::rand_id());
    let dir = tempfile::tempdir().expect("tempdir");
    let kubectl = std::env::var_os("KUBEWASM_E2E_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("kubectl"));
    let image_tar = match std::env::var_os("KUBEWASM_E2E_IMAGE_TAR") {
        Some(tar) => PathBuf::from(tar),
        None => build_image(dir.path()),
    };
    let image = image_name(&image_tar);
    let registry = std::env::var("KUBEWASM_E2E_REGISTRY_ADDR")
        .ok()
        .map(|addr| {
            let (ip, port) = addr
                .rsplit_once(':')
                .expect("KUBEWASM_E2E_REGISTRY_ADDR is IP:PORT");
            Mutex::new(Registry::start_on(
                ip,
                port.parse().expect("KUBEWASM_E2E_REGISTRY_ADDR port"),
            ))
        });
    let mut node = Node {
        admin,
        admin_kubeconfig,
        kubectl,
        import,
        ctr: std::env::var("KUBEWASM_E2E_CTR").ok(),
        prepare_ns: std::env::var("KUBEWASM_E2E_PREPARE_NAMESPACE").ok(),
        id,
        image_tar,
        image,
        overlay: dir.path().join("kubernetes/overlays/e2e-node"),
        example_image: String::new(),
        helm_rendered: dir.path().join("helm-rendered.yaml"),
        registry,
        approved: dir.path().join("approved-oci-kit.yaml"),
        timings: Mutex::new(Vec::new()),
        dir,
    };
    node.example_image = prepare_overlay(&node);
    write_kustomization(&node, &[]);
    // A previous run's install, if one was left: gone before this one starts.
    remove_installs(&node).await;
    let crds = common::read_crds();
    println!("CRDs: {}", common::crd_names(&crds));
    apply(&node.admin, crds).await;
    for ns in [apps_ns(&node, KUSTOMIZE_NS), apps_ns(&node, HELM_NS)] {
        apply(
            &node.admin,
            vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})],
        )
        .await;
    }
    node
}

/// Where the scenarios' objects live for the host installed in `ns`.
fn apps_ns(n: &Node, ns: &str) -> String {
    let phase = if ns == HELM_NS { "helm" } else { "kustomize" };
    format!("kubewasm-node-{}-{phase}", n.id)
}

/// `deploy/build-image.sh OUT.tar`, when the suite is given no tarball.
fn build_image(dir: &Path) -> PathBuf {
    let script = root().join("deploy/build-image.sh");
    assert!(
        script.is_file(),
        "no KUBEWASM_E2E_IMAGE_TAR and no {} to build the image",
        script.display()
    );
    let out = dir.join("kubewasm-image.tar");
    let status = Command::new("bash")
        .arg(&script)
        .arg(&out)
        .current_dir(root())
        .status()
        .expect("run deploy/build-image.sh");
    assert!(status.success(), "deploy/build-image.sh failed");
    out
}

/// The image name:tag in a docker-archive tarball (`manifest.json`, RepoTags) or an OCI
/// layout tarball (`index.json`, the ref-name annotation).
fn image_name(tar: &Path) -> String {
    let read = |member: &str| {
        Command::new("tar")
            .arg("-xOf")
            .arg(tar)
            .arg(member)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
    };
    if let Some(m) = read("manifest.json")
        && let Some(tag) = m[0]["RepoTags"][0].as_str()
    {
        return tag.to_string();
    }
    if let Some(index) = read("index.json") {
        let a = &index["manifests"][0]["annotations"];
        for key in [
            "io.containerd.image.name",
            "org.opencontainers.image.ref.name",
        ] {
            if let Some(name) = a[key].as_str() {
                return name.to_string();
            }
        }
    }
    panic!(
        "{}: neither a docker-archive with RepoTags nor an OCI layout with a ref name",
        tar.display()
    )
}

/// `name:tag` split (a registry port is not a tag).
fn split_image(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, tag),
        _ => (image, "latest"),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("dir entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// The YAML documents of `text` (nulls dropped).
fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn to_yaml_stream(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| serde_yaml_ng::to_string(d).expect("YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The settings of the testkit instance `name`: it copies ConfigMaps labelled
/// `ROUTE=name` to `<cm>-out`, and records their deletion as `<cm>-deleted`.
fn testkit_settings(name: &str) -> String {
    format!("name: {name}\nselector: {ROUTE}={name}\n")
}

/// `kubewasm approve FILE [--module REF]` for the suite's namespace: the YAML stream.
fn approve(n: &Node, wasm: &Path, settings: &Path, module: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log", "warn", "approve"])
        .arg(wasm)
        .arg("--settings")
        .arg(settings)
        .arg("--kubeconfig")
        .arg(&n.admin_kubeconfig)
        .args(["--service-account-namespace", KUSTOMIZE_NS]);
    if let Some(m) = module {
        cmd.args(["--module", m]);
    }
    let out = cmd.output().expect("run kubewasm approve");
    assert!(
        out.status.success(),
        "kubewasm approve: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("approve prints UTF-8")
}

/// A copy of deploy/kubernetes with the example plugins built in, and the test overlay
/// over the example overlay: the image of the tarball, one more plugin (`reloader`, the
/// test plugin testkit, for the reload and failover checks) with its approval and the
/// RBAC `kubewasm approve` prints for it, and `--insecure-registry` for the suite's
/// registry, with an egress rule to it in the NetworkPolicy (a private address).
fn prepare_overlay(n: &Node) -> String {
    let kube_dir = n.dir.path().join("kubernetes");
    copy_dir(&root().join("deploy/kubernetes"), &kube_dir);
    let example_plugins = kube_dir.join("overlays/example/plugins");
    for name in [
        "contentsite-provisioner",
        "mongodb-monitor",
        "seldon-endpoint",
    ] {
        let wasm = support::example_plugin(name);
        std::fs::copy(&wasm, example_plugins.join(format!("{name}.wasm"))).expect("copy");
        std::fs::copy(
            wasm.with_extension("yaml"),
            example_plugins.join(format!("{name}.yaml")),
        )
        .expect("copy settings");
    }
    std::fs::copy(
        root().join("plugins/approvals.yaml"),
        example_plugins.join("approvals.yaml"),
    )
    .expect("copy approvals");

    // The example overlay's image and plugin volume, as rendered.
    let rendered = kubectl_ok(
        n,
        &[
            "kustomize",
            &kube_dir.join("overlays/example").to_string_lossy(),
        ],
    );
    let docs = yaml_docs(&rendered);
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the example overlay renders a Deployment");
    let example_image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .expect("container image")
        .to_string();
    let mut plugins_volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "plugins"))
        .expect("the plugins volume")
        .clone();
    plugins_volume["projected"]["sources"]
        .as_array_mut()
        .expect("projected sources")
        .push(json!({"configMap": {"name": "kubewasm-plugin-reloader"}}));

    let overlay = &n.overlay;
    std::fs::create_dir_all(overlay.join("plugins")).expect("mkdir");
    std::fs::create_dir_all(overlay.join("approvals")).expect("mkdir");
    let reloader = overlay.join("plugins/reloader.wasm");
    std::fs::copy(support::test_plugin("testkit"), &reloader).expect("copy testkit");
    let settings = overlay.join("plugins/reloader.yaml");
    std::fs::write(&settings, testkit_settings("reloader")).expect("settings");
    // The operator's approval and RBAC for it, as `kubewasm approve` prints them.
    let approved = yaml_docs(&approve(n, &reloader, &settings, None));
    let approval: Vec<Value> = approved
        .iter()
        .filter(|d| d["kind"] == "Plugin")
        .cloned()
        .collect();
    assert_eq!(approval.len(), 1, "approve printed one Plugin object");
    std::fs::write(
        overlay.join("approvals/reloader.yaml"),
        to_yaml_stream(&approval),
    )
    .expect("approval");
    let rbac: Vec<Value> = approved
        .into_iter()
        .filter(|d| d["kind"] != "Plugin")
        // The host's ServiceAccount is the base's already.
        .filter(|d| !(d["kind"] == "ServiceAccount" && d["metadata"]["name"] == NAME))
        .collect();
    std::fs::write(overlay.join("rbac-reloader.yaml"), to_yaml_stream(&rbac)).expect("rbac");
    std::fs::write(
        overlay.join("deployment-patch.yaml"),
        serde_json::to_string_pretty(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME},
            "spec": {"template": {"spec": {"volumes": [plugins_volume]}}}
        }))
        .expect("JSON"),
    )
    .expect("patch");
    example_image
}

/// The test overlay's kustomization.yaml; `extra_args` are added to the host's.
fn write_kustomization(n: &Node, extra_args: &[&str]) {
    let (old_name, _) = split_image(&n.example_image);
    let (new_name, new_tag) = split_image(&n.image);
    let mut args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
    if let Some(r) = &n.registry {
        args.insert(
            0,
            format!("--insecure-registry={}", r.lock().expect("registry").host()),
        );
    }
    let ops: Vec<Value> = args
        .iter()
        .map(
            |a| json!({"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": a}),
        )
        .collect();
    let mut patches = vec![json!({"path": "deployment-patch.yaml"})];
    if let Some(r) = &n.registry {
        // The base's NetworkPolicy opens registries at public addresses only; a registry
        // of the operator's at a private one is added, as deploy/README says.
        let host = r.lock().expect("registry").host();
        let (ip, port) = host.rsplit_once(':').expect("registry IP:PORT");
        let rule = json!({
            "ports": [{"port": port.parse::<u16>().expect("registry port"), "protocol": "TCP"}],
            "to": [{"ipBlock": {"cidr": format!("{ip}/32")}}],
        });
        patches.push(json!({
            "target": {"group": "networking.k8s.io", "version": "v1", "kind": "NetworkPolicy", "name": NAME},
            "patch": serde_json::to_string(&json!([{"op": "add", "path": "/spec/egress/-", "value": rule}]))
                .expect("JSON"),
        }));
    }
    if !ops.is_empty() {
        patches.push(json!({
            "target": {"group": "apps", "version": "v1", "kind": "Deployment", "name": NAME},
            "patch": serde_json::to_string(&ops).expect("JSON"),
        }));
    }
    let k = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": KUSTOMIZE_NS,
        "resources": ["../example", "rbac-reloader.yaml"],
        "images": [{"name": old_name, "newName": new_name, "newTag": new_tag}],
        "generatorOptions": {"disableNameSuffixHash": true,
            "labels": {"app.kubernetes.io/name": "kubewasm", "app.kubernetes.io/component": "plugins"}},
        "configMapGenerator": [
            {"name": "kubewasm-plugin-reloader", "files": ["plugins/reloader.wasm", "plugins/reloader.yaml"]},
            {"name": "kubewasm-approvals", "behavior": "merge", "files": ["approvals/reloader.yaml"]},
        ],
        "patches": patches,
    });
    let text = format!(
        "# Written by tests/e2e_node: the example overlay, this run's image, a test plugin.\n{}",
        serde_yaml_ng::to_string(&k).expect("YAML")
    );
    std::fs::write(n.overlay.join("kustomization.yaml"), text).expect("kustomization");
}

// ---------------------------------------------------------------------------------------
// Commands.

fn kubectl_cmd(n: &Node) -> Command {
    let mut cmd = Command::new(&n.kubectl);
    cmd.arg("--kubeconfig").arg(&n.admin_kubeconfig);
    cmd
}

fn kubectl(n: &Node, args: &[&str]) -> Output {
    kubectl_cmd(n)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", n.kubectl.display()))
}

/// kubectl that must succeed; its stdout.
fn kubectl_ok(n: &Node, args: &[&str]) -> String {
    let out = kubectl(n, args);
    assert!(
        out.status.success(),
        "kubectl {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `sh -c 'COMMAND "$@"' ARGS…`: a configured command with arguments appended.
fn shell(command: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{command} \"$@\""))
        .arg("sh")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {command}: {e}"))
}

fn shell_ok(command: &str, args: &[&str]) -> String {
    let out = shell(command, args);
    assert!(
        out.status.success(),
        "{command} {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn helm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KUBEWASM_HELM") {
        return Some(PathBuf::from(p));
    }
    let on_path = Command::new("helm")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return Some(PathBuf::from("helm"));
    }
    let local = root().join("target/tools/helm/helm");
    local.is_file().then_some(local)
}

async fn print_versions(n: &Node) {
    let v = n.admin.apiserver_version().await.expect("server version");
    println!(
        "real-node e2e: kube-apiserver {} ({}), run {}",
        v.git_version, v.platform, n.id
    );
    let nodes: Api<KubeNode> = Api::all(n.admin.clone());
    for node in nodes.list(&ListParams::default()).await.expect("nodes") {
        let info = node.status.as_ref().and_then(|s| s.node_info.as_ref());
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
            .unwrap_or_default();
        if let Some(i) = info {
            println!(
                "node {}: Ready={ready}, kubelet {}, {}, {}, kernel {}",
                node.name_any(),
                i.kubelet_version,
                i.container_runtime_version,
                i.os_image,
                i.kernel_version
            );
        }
    }
    let client = kubectl(n, &["version", "--client"]);
    println!(
        "kubectl: {}",
        String::from_utf8_lossy(&client.stdout).replace('\n', "; ")
    );
    if let Some(helm) = helm() {
        let out = Command::new(helm).args(["version", "--short"]).output();
        if let Ok(o) = out {
            println!("helm: {}", String::from_utf8_lossy(&o.stdout).trim());
        }
    }
    let size = std::fs::metadata(&n.image_tar)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "image: {} from {} ({:.1} MiB)",
        n.image,
        n.image_tar.display(),
        size as f64 / 1048576.0
    );
    match &n.registry {
        Some(r) => println!(
            "registry for Plugin objects: {}",
            r.lock().expect("registry").host()
        ),
        None => println!("registry: none (KUBEWASM_E2E_REGISTRY_ADDR unset)"),
    }
}

// ---------------------------------------------------------------------------------------
// The deployment as the API server and the node see it.

fn pods_api(n: &Node, ns: &str) -> Api<Pod> {
    Api::namespaced(n.admin.clone(), ns)
}

/// The host's pods (terminating ones included).
async fn host_pods(n: &Node, ns: &str) -> Vec<Pod> {
    pods_api(n, ns)
        .list(&ListParams::default().labels(SELECTOR))
        .await
        .expect("list pods")
        .items
}

fn is_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Wait until the Deployment has exactly `replicas` pods, all Running and Ready, of its
/// current template, and none terminating.
async fn wait_ready(n: &Node, ns: &str, replicas: usize, timeout: Duration) -> Vec<Pod> {
    let deployments: Api<Deployment> = Api::namespaced(n.admin.clone(), ns);
    eventually(
        &format!("{replicas} Ready pods of deployment {ns}/{NAME}"),
        timeout,
        || async {
            let d = deployments.get_opt(NAME).await.ok().flatten()?;
            let st = d.status.as_ref()?;
            let current = st.observed_generation >= d.metadata.generation
                && st.updated_replicas == Some(replicas as i32)
                && st.ready_replicas == Some(replicas as i32)
                && st.replicas == Some(replicas as i32);
            if !current {
                return None;
            }
            let pods = host_pods(n, ns).await;
            (pods.len() == replicas && pods.iter().all(is_ready)).then_some(pods)
        },
    )
    .await
}

async fn lease(n: &Node, ns: &str) -> Option<Lease> {
    Api::<Lease>::namespaced(n.admin.clone(), ns)
        .get_opt(NAME)
        .await
        .ok()
        .flatten()
}

fn holder(l: &Lease) -> String {
    l.spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// Whether Lease holder `identity` is pod `pod` (the pod name, or the pod's hostname with
/// a per-process suffix).
fn held_by(identity: &str, pod: &str) -> bool {
    identity == pod
        || identity
            .strip_prefix(pod)
            .is_some_and(|rest| rest.starts_with(['_', '-', '.']))
}

/// The current leader pod and the other Ready pods.
async fn leader_and_followers(n: &Node, ns: &str) -> (Pod, Vec<Pod>) {
    eventually("a Ready pod holding the Lease", CONVERGE, || async {
        let l = lease(n, ns).await?;
        let h = holder(&l);
        let pods: Vec<Pod> = host_pods(n, ns)
            .await
            .into_iter()
            .filter(is_ready)
            .collect();
        let leader = pods.iter().find(|p| held_by(&h, &p.name_any()))?.clone();
        let others = pods
            .into_iter()
            .filter(|p| p.name_any() != leader.name_any())
            .collect();
        Some((leader, others))
    })
    .await
}

/// The host container's log lines, parsed (a line that is not JSON is kept as
/// `{"message": LINE, "raw": true}`).
async fn pod_log(n: &Node, ns: &str, pod: &str) -> Vec<Value> {
    let text = pods_api(n, ns)
        .logs(
            pod,
            &LogParams {
                container: Some(CONTAINER.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!({"message": l, "raw": true})))
        .collect()
}

/// The log of every host pod of a namespace: what the seed scenarios read.
struct PodLogs<'a> {
    node: &'a Node,
    ns: String,
}

impl HostLog for PodLogs<'_> {
    fn lines(&self) -> BoxFuture<'_, Vec<Value>> {
        Box::pin(async move {
            let mut all = Vec::new();
            for p in host_pods(self.node, &self.ns).await {
                all.extend(pod_log(self.node, &self.ns, &p.name_any()).await);
            }
            all
        })
    }
}

fn container_id(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == CONTAINER)?
        .container_id
        .as_ref()
        .map(|id| id.rsplit("://").next().unwrap_or(id).to_string())
}

fn restart_count(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == CONTAINER))
        .map(|c| c.restart_count)
        .unwrap_or(-1)
}

/// The host process of pod `p` on this machine (`ctr tasks ls`), for /proc.
fn container_pid(n: &Node, p: &Pod) -> Option<u32> {
    let ctr = n.ctr.as_ref()?;
    let id = container_id(p)?;
    let listing = shell_ok(ctr, &["tasks", "ls"]);
    listing.lines().find_map(|l| {
        let mut cols = l.split_whitespace();
        (cols.next() == Some(id.as_str()))
            .then(|| cols.next().and_then(|pid| pid.parse().ok()))
            .flatten()
    })
}

fn proc_read(pid: u32, rel: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/{rel}"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/{rel}: {e}"))
}

/// A `Key:\tvalue` line of /proc/PID/status.
fn proc_status(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no {key} in /proc/PID/status"))
}

/// After a failed check: where the host pods stand, and each one's last log lines.
async fn dump_pods(n: &Node) {
    for ns in [KUSTOMIZE_NS, HELM_NS] {
        for p in host_pods(n, ns).await {
            let st = p.status.clone().unwrap_or_default();
            println!(
                "  pod {ns}/{}: phase {:?}, ready {}, restarts {}, terminating {}",
                p.name_any(),
                st.phase,
                is_ready(&p),
                restart_count(&p),
                p.metadata.deletion_timestamp.is_some()
            );
            let log = pod_log(n, ns, &p.name_any()).await;
            for l in log
                .iter()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                println!("    {l}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Install.

async fn import_image(n: &'static Node) {
    let tar = n.image_tar.to_string_lossy().into_owned();
    let started = Instant::now();
    let out = shell_ok(&n.import, &[&tar]);
    print!("{}", indent(&out));
    record(n, "image import", started.elapsed());
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("     {l}\n")).collect()
}

/// Create `ns` as `deploy/` renders it, then run the prepare hook, so pods may start.
async fn create_namespace(n: &Node, namespace: Value) {
    let name = namespace["metadata"]["name"]
        .as_str()
        .expect("namespace name")
        .to_string();
    apply(&n.admin, vec![namespace]).await;
    if let Some(cmd) = &n.prepare_ns {
        shell_ok(cmd, &[&name]);
    }
}

async fn install_overlay(n: &'static Node) {
    let overlay = n.overlay.to_string_lossy().into_owned();
    let rendered = yaml_docs(&kubectl_ok(n, &["kustomize", &overlay]));
    let ns = rendered
        .iter()
        .find(|d| d["kind"] == "Namespace")
        .expect("the overlay renders its Namespace")
        .clone();
    create_namespace(n, ns).await;
    let started = Instant::now();
    print!(
        "{}",
        indent(
            &kubectl_ok(n, &["apply", "--server-side", "-k", &overlay])
                .lines()
                .filter(|l| l.contains("Deployment")
                    || l.contains("configmap")
                    || l.contains("deployment"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    );
    let pods = wait_ready(n, KUSTOMIZE_NS, 2, READY).await;
    record(
        n,
        "kustomize install: apply to 2 pods Ready",
        started.elapsed(),
    );
    for p in &pods {
        let image = p
            .spec
            .as_ref()
            .map(|s| s.containers[0].image.clone().unwrap_or_default());
        println!(
            "     pod {} on {} ({}), image {}",
            p.name_any(),
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            p.status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default(),
            image.unwrap_or_default()
        );
        assert_eq!(
            p.spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some(n.image.clone())),
            "the pod runs the imported image"
        );
    }
}

async fn remove_installs(n: &Node) {
    let overlay = n.overlay.to_string_lossy().into_owned();
    let _ = kubectl(
        n,
        &[
            "delete",
            "-k",
            &overlay,
            "--ignore-not-found",
            "--wait=true",
            "--timeout=180s",
        ],
    );
    if n.approved.is_file() {
        let _ = kubectl(
            n,
            &[
                "delete",
                "-f",
                &n.approved.to_string_lossy(),
                "--ignore-not-found",
                "--wait=true",
            ],
        );
    }
    for ns in [KUSTOMIZE_NS, HELM_NS] {
        let _ = kubectl(
            n,
            &[
                "delete",
                "namespace",
                ns,
                "--ignore-not-found",
                "--wait=true",
                "--timeout=180s",
            ],
        );
    }
    // What the chart creates outside its namespace: its ClusterRoles and bindings.
    let _ = kubectl(
        n,
        &[
            "delete",
            "clusterrole,clusterrolebinding",
            "-l",
            "app.kubernetes.io/instance=kubewasm",
            "--ignore-not-found",
        ],
    );
}

async fn uninstall_overlay(n: &'static Node) {
    let overlay = n.overlay.to_string_lossy().into_owned();
    let started = Instant::now();
    if n.approved.is_file() {
        kubectl_ok(
            n,
            &[
                "delete",
                "-f",
                &n.approved.to_string_lossy(),
                "--ignore-not-found",
                "--wait=true",
            ],
        );
    }
    kubectl_ok(
        n,
        &[
            "delete",
            "-k",
            &overlay,
            "--ignore-not-found",
            "--wait=true",
            "--timeout=180s",
        ],
    );
    assert!(host_pods(n, KUSTOMIZE_NS).await.is_empty(), "pods left");
    record(n, "kustomize uninstall", started.elapsed());
}

// ---------------------------------------------------------------------------------------
// Leader election, in-cluster configuration, security context.

async fn one_leader(n: &'static Node, ns: &str) {
    let ns = ns.to_string();
    let (leader, followers) = leader_and_followers(n, &ns).await;
    assert_eq!(followers.len(), 1, "two Ready replicas");
    let l = lease(n, &ns).await.expect("the Lease");
    let spec = l.spec.clone().unwrap_or_default();
    println!(
        "     Lease {ns}/{NAME}: holder {}, duration {:?} s, transitions {:?}",
        holder(&l),
        spec.lease_duration_seconds,
        spec.lease_transitions
    );
    assert_eq!(
        spec.lease_duration_seconds,
        Some(LEASE_DURATION.as_secs() as i32)
    );
    let pods = host_pods(n, &ns).await;
    let holding: Vec<String> = pods
        .iter()
        .filter(|p| held_by(&holder(&l), &p.name_any()))
        .map(|p| p.name_any())
        .collect();
    assert_eq!(holding, vec![leader.name_any()], "exactly one holder");
    // Only the leader handles events: the follower's log has none, and says it leads not.
    let follower = &followers[0];
    let flog = pod_log(n, &ns, &follower.name_any()).await;
    let llog = pod_log(n, &ns, &leader.name_any()).await;
    assert!(
        llog.iter().any(|l| field(l, "message") == "became leader"),
        "the leader's log says it became leader"
    );
    assert!(
        !flog.iter().any(|l| field(l, "message") == "became leader"),
        "the follower's log says it became leader"
    );
    assert!(
        !flog.iter().any(|l| field(l, "message") == "event"),
        "the follower handled events"
    );
    assert!(
        flog.iter()
            .any(|l| field(l, "message").starts_with("host running")),
        "the follower runs (warm)"
    );
}

/// The service-account files, the environment and the API server connection, from the
/// host process's own view (/proc/PID/root, environ, net/tcp), and the writes that only
/// its ServiceAccount may send (impersonation).
async fn in_cluster_config(n: &'static Node, ns: &str) {
    let ns = ns.to_string();
    let (leader, followers) = leader_and_followers(n, &ns).await;
    let cas: Api<ConfigMap> = Api::namespaced(n.admin.clone(), &ns);
    let cluster_ca = cas
        .get("kube-root-ca.crt")
        .await
        .expect("kube-root-ca.crt")
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .expect("ca.crt");
    let svc: Api<Service> = Api::namespaced(n.admin.clone(), "default");
    let kubernetes_ip = svc
        .get("kubernetes")
        .await
        .expect("Service kubernetes")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("its ClusterIP");
    let sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    for p in std::iter::once(&leader).chain(followers.iter()) {
        let spec = p.spec.clone().expect("pod spec");
        assert_eq!(spec.automount_service_account_token, Some(false));
        let c = &spec.containers[0];
        assert!(
            c.env.iter().flatten().all(|e| e.name != "KUBECONFIG"),
            "KUBECONFIG set in the pod"
        );
        assert!(
            c.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == sa_dir && m.read_only == Some(true)),
            "the token volume mounted read-only at {sa_dir}"
        );
        let Some(pid) = container_pid(n, p) else {
            println!(
                "     (SKIPPED inside: KUBEWASM_E2E_CTR unset, the process's view is not read)"
            );
            continue;
        };
        let rootfs = format!("/proc/{pid}/root{sa_dir}");
        let token = std::fs::read_to_string(format!("{rootfs}/token")).expect("token file");
        let ca = std::fs::read_to_string(format!("{rootfs}/ca.crt")).expect("ca.crt");
        let namespace = std::fs::read_to_string(format!("{rootfs}/namespace")).expect("namespace");
        assert_eq!(ca.trim(), cluster_ca.trim(), "ca.crt is the cluster's CA");
        assert_eq!(namespace.trim(), ns, "namespace file");
        let claims = jwt_claims(&token);
        assert_eq!(
            claims["sub"],
            json!(format!("system:serviceaccount:{ns}:{NAME}")),
            "{claims}"
        );
        assert_eq!(
            claims["kubernetes.io"]["pod"]["name"],
            json!(p.name_any()),
            "the token is bound to this pod: {claims}"
        );
        let environ = proc_read(pid, "environ");
        let env: BTreeMap<&str, &str> = environ
            .split('\0')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        assert!(!env.contains_key("KUBECONFIG"), "KUBECONFIG in the process");
        let host = env
            .get("KUBERNETES_SERVICE_HOST")
            .expect("KUBERNETES_SERVICE_HOST in the process");
        assert_eq!(*host, kubernetes_ip);
        let port: u16 = env
            .get("KUBERNETES_SERVICE_PORT")
            .and_then(|p| p.parse().ok())
            .expect("KUBERNETES_SERVICE_PORT");
        // A connection to the API server's Service address, ESTABLISHED, as the process's
        // network namespace sees it.
        let want = tcp_hex(host, port);
        let tcp = proc_read(pid, "net/tcp");
        let established = tcp.lines().skip(1).any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3 && cols[2] == want && cols[3] == "01"
        });
        assert!(
            established,
            "no ESTABLISHED connection to {host}:{port}:\n{tcp}"
        );
        println!(
            "     {}: token of {} (bound to the pod, expires in {} s), CA = kube-root-ca.crt, namespace {}, connected to {host}:{port}",
            p.name_any(),
            claims["sub"].as_str().unwrap_or(""),
            claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0),
            namespace.trim()
        );
    }
    // Only this ServiceAccount may impersonate the plugins' accounts: the leader's
    // impersonated writes (the seed scenarios') prove it authenticated with that token.
    let llog = pod_log(n, &ns, &leader.name_any()).await;
    let line = llog
        .iter()
        .find(|l| field(l, "message").starts_with("each plugin writes as its ServiceAccount"))
        .expect("the impersonation line");
    assert_eq!(field(line, "namespace"), ns, "{line}");
}

fn jwt_claims(token: &str) -> Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .expect("JWT payload base64");
    serde_json::from_slice(&bytes).expect("JWT claims JSON")
}

/// `ADDR:PORT` as /proc/net/tcp spells it (IPv4, little-endian address).
fn tcp_hex(ip: &str, port: u16) -> String {
    let o: Vec<u8> = ip
        .split('.')
        .map(|x| x.parse().expect("an IPv4 address"))
        .collect();
    format!(
        "{:02X}{:02X}{:02X}{:02X}:{port:04X}",
        o[3], o[2], o[1], o[0]
    )
}

async fn security_context(n: &'static Node, ns: &str) {
    let ns = ns.to_string();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(n.admin.clone());
    let labels = namespaces
        .get(&ns)
        .await
        .expect("namespace")
        .labels()
        .clone();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("restricted"),
        "the namespace enforces the restricted Pod Security Standard"
    );
    for p in host_pods(n, &ns).await.iter().filter(|p| is_ready(p)) {
        let spec = p.spec.clone().expect("pod spec");
        let psc = spec.security_context.clone().expect("pod securityContext");
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(
            psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault")
        );
        assert_eq!(spec.automount_service_account_token, Some(false));
        // The token volume: mounted by the host container only, and no other token volume.
        let token_volumes: Vec<String> = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| {
                v.projected.as_ref().is_some_and(|pr| {
                    pr.sources
                        .iter()
                        .flatten()
                        .any(|s| s.service_account_token.is_some())
                })
            })
            .map(|v| v.name.clone())
            .collect();
        assert_eq!(token_volumes, vec!["kube-api-access".to_string()]);
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter().skip(1))
        {
            assert!(
                c.volume_mounts
                    .iter()
                    .flatten()
                    .all(|m| m.name != "kube-api-access"),
                "container {} mounts the host's token",
                c.name
            );
        }
        let c = &spec.containers[0];
        let sc = c
            .security_context
            .clone()
            .expect("container securityContext");
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(
            sc.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_string()])
        );
        let Some(pid) = container_pid(n, p) else {
            println!("     (SKIPPED inside: KUBEWASM_E2E_CTR unset, /proc is not read)");
            continue;
        };
        let status = proc_read(pid, "status");
        let uid = proc_status(&status, "Uid");
        let gid = proc_status(&status, "Gid");
        assert!(uid.split_whitespace().all(|u| u == "65532"), "Uid: {uid}");
        assert!(gid.split_whitespace().all(|g| g == "65532"), "Gid: {gid}");
        assert_eq!(proc_status(&status, "NoNewPrivs"), "1");
        // 2 = SECCOMP_MODE_FILTER (RuntimeDefault is a filter).
        assert_eq!(proc_status(&status, "Seccomp"), "2");
        for cap in ["CapEff", "CapPrm", "CapBnd"] {
            assert_eq!(
                proc_status(&status, cap),
                "0000000000000000",
                "{cap} of the host process"
            );
        }
        // The root filesystem read-only; the cache writable.
        let mounts = proc_read(pid, "mountinfo");
        let opts = |point: &str| {
            mounts
                .lines()
                .find(|l| l.split_whitespace().nth(4) == Some(point))
                .map(|l| l.split_whitespace().nth(5).unwrap_or("").to_string())
                .unwrap_or_else(|| panic!("no mount at {point}:\n{mounts}"))
        };
        let root_opts = opts("/");
        assert!(
            root_opts.split(',').any(|o| o == "ro"),
            "/ mounted {root_opts}"
        );
        let cache_opts = opts("/var/cache/kubewasm");
        assert!(
            cache_opts.split(',').any(|o| o == "rw"),
            "/var/cache/kubewasm mounted {cache_opts}"
        );
        let plugins_opts = opts("/plugins");
        assert!(
            plugins_opts.split(',').any(|o| o == "ro"),
            "/plugins mounted {plugins_opts}"
        );
        println!(
            "     {}: Uid {uid}, Gid {gid}, NoNewPrivs 1, Seccomp 2 (filter), no capabilities, / {root_opts}, cache {cache_opts}",
            p.name_any()
        );
    }
}

// ---------------------------------------------------------------------------------------
// The seed scenarios through the deployed host.

fn seed_logs(n: &'static Node, ns: &str) -> PodLogs<'static> {
    PodLogs {
        node: n,
        ns: ns.to_string(),
    }
}

async fn seed_provision(n: &'static Node, ns: &str) {
    let apps = apps_ns(n, ns);
    let log = seed_logs(n, ns);
    Seed {
        admin: &n.admin,
        ns: &apps,
        log: &log,
    }
    .provision_on_demand("blog")
    .await;
}

async fn seed_foreign(n: &'static Node, ns: &str) {
    let apps = apps_ns(n, ns);
    let log = seed_logs(n, ns);
    Seed {
        admin: &n.admin,
        ns: &apps,
        log: &log,
    }
    .foreign_mongodb()
    .await;
}

async fn seed_seldon(n: &'static Node, ns: &str) {
    let apps = apps_ns(n, ns);
    let log = seed_logs(n, ns);
    Seed {
        admin: &n.admin,
        ns: &apps,
        log: &log,
    }
    .seldon_available()
    .await;
}

// ---------------------------------------------------------------------------------------
// Logs and metrics.

async fn structured_logs(n: &'static Node, ns: &str) {
    for p in host_pods(n, ns).await.iter().filter(|p| is_ready(p)) {
        let text = kubectl_ok(n, &["logs", "-n", ns, &p.name_any(), "-c", CONTAINER]);
        let mut lines = 0;
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"));
            for key in ["timestamp", "level", "message"] {
                assert!(v[key].is_string(), "no {key} in {l}");
            }
            lines += 1;
        }
        assert!(lines > 0, "{} logged nothing", p.name_any());
        let first = text.lines().next().unwrap_or("");
        println!("     {}: {lines} JSON lines, e.g. {first}", p.name_any());
    }
}

/// Values that are Rust `Debug` renderings rather than the value: `Some(..)` wrappers,
/// lists of quoted strings (`["a", "b"]` as one string), strings inside quotes.
async fn log_values_plain(n: &'static Node, ns: &str) {
    let mut bad = Vec::new();
    for p in host_pods(n, ns).await.iter().filter(|p| is_ready(p)) {
        for l in pod_log(n, ns, &p.name_any()).await {
            let Some(obj) = l.as_object() else { continue };
            for (k, v) in obj {
                if let Some(s) = v.as_str()
                    && (s.starts_with("Some(")
                        || s.starts_with("[\"")
                        || (s.len() > 1 && s.starts_with('"') && s.ends_with('"')))
                {
                    bad.push(format!("{k}={s} in {l}"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} value(s) in Rust debug format, e.g.:\n{}",
        bad.len(),
        bad.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// `GET path` (HTTP/1.1, `Connection: close`): status and body. The body ends at its
/// Content-Length or last chunk, not only at EOF: a connection through `kubectl
/// port-forward` stays open after the pod's side closed it.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let sock: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        if let Some((code, body)) = http_response(&buf) {
            return Ok((code, body));
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return http_response(&buf).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "incomplete HTTP response",
                )
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A complete HTTP response in `buf`: status and (de-chunked) body; None while incomplete.
fn http_response(buf: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if let Some(len) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        return (body.len() >= len).then(|| (code, body[..len].to_string()));
    }
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        let mut out = String::new();
        let mut rest = body;
        loop {
            let (size, after) = rest.split_once("\r\n")?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                return Some((code, out));
            }
            if after.len() < size + 2 {
                return None;
            }
            out.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
    }
    None
}

/// `kubectl port-forward pod/NAME :PORT`, as the deploy README tells operators: the child
/// and the local address.
fn port_forward(n: &Node, ns: &str, pod: &str, port: u16) -> (std::process::Child, String) {
    let mut child = kubectl_cmd(n)
        .args([
            "port-forward",
            "-n",
            ns,
            &format!("pod/{pod}"),
            &format!(":{port}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl port-forward");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("port-forward output");
    // kubectl prints a line per connection: keep reading, or it dies of SIGPIPE.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    // "Forwarding from 127.0.0.1:41234 -> 9090"
    let addr = line
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("port-forward said: {line}"))
        .to_string();
    (child, addr)
}

/// The ClusterRoleBinding giving the ServiceAccount `e2e-scraper` of the install the
/// reader role of `--metrics-secure` (deleted at the end of the scenario and at cleanup).
const SCRAPER_BINDING: &str = "kubewasm-system:e2e-scraper";

/// A bound token of the install's ServiceAccount `e2e-scraper`, bound to the base's
/// `kubewasm-system:kubewasm-metrics-reader`: what Prometheus's would be.
async fn scraper_token(n: &Node) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::PostParams;
    apply(
        &n.admin,
        vec![
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "e2e-scraper", "namespace": KUSTOMIZE_NS}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": SCRAPER_BINDING},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "kubewasm-system:kubewasm-metrics-reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "e2e-scraper",
                                 "namespace": KUSTOMIZE_NS}]}),
        ],
    )
    .await;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(n.admin.clone(), KUSTOMIZE_NS)
        .create_token_request("e2e-scraper", &PostParams::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .and_then(|st| st.token)
        .expect("a token in the TokenRequest status")
}

async fn metrics(n: &'static Node) {
    let (leader, followers) = leader_and_followers(n, KUSTOMIZE_NS).await;
    let pod = leader.name_any();
    let token = scraper_token(n).await;
    let (mut child, addr) =
        tokio::task::spawn_blocking(move || port_forward(n, KUSTOMIZE_NS, &pod, 9090))
            .await
            .expect("port-forward task");
    // --metrics-secure (the base's default): HTTPS with a self-signed certificate, and no
    // page without a token the API server knows.
    let (code, body) = support::https_get(&addr, None, "/metrics", None).await;
    assert_eq!(code, 401, "no token: {body}");
    // The authorizer sees the new binding through its informer: a moment later.
    let metrics = eventually("the scraper's token reads /metrics", CONVERGE, || {
        let (addr, token) = (addr.clone(), token.clone());
        async move {
            let got = support::https_get(&addr, None, "/metrics", Some(&token)).await;
            (got.0 == 200).then_some(got)
        }
    })
    .await;
    let status = support::https_get(&addr, None, "/status", Some(&token)).await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = api(
        &n.admin,
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        None,
    )
    .delete(SCRAPER_BINDING, &DeleteParams::default())
    .await;
    assert_eq!(metrics.0, 200, "{}", metrics.1);
    for want in [
        "kubewasm_events_total{",
        "plugin=\"contentsite-provisioner\"",
        "plugin=\"mongodb-monitor\"",
        "plugin=\"seldon-endpoint\"",
    ] {
        assert!(metrics.1.contains(want), "/metrics lacks {want}");
    }
    let families = metrics
        .1
        .lines()
        .filter(|l| l.starts_with("# TYPE"))
        .count();
    println!(
        "     /metrics of {} via port-forward, over HTTPS with a reader's token (none: 401): {} bytes, {families} metric families",
        leader.name_any(),
        metrics.1.len()
    );
    assert_eq!(status.0, 200, "{}", status.1);
    let st: Value = serde_json::from_str(&status.1).expect("/status is JSON");
    assert!(
        st.to_string().contains("contentsite-provisioner"),
        "/status: {st}"
    );
    // What the deployment exposes on the pod's address: the probes, not /metrics.
    for p in std::iter::once(&leader).chain(followers.iter()) {
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .expect("pod IP");
        let probes = format!("{ip}:8081");
        let readyz = tokio::task::spawn_blocking(move || http_get(&probes, "/readyz"))
            .await
            .expect("task");
        assert_eq!(readyz.as_ref().map(|r| r.0).ok(), Some(200), "{readyz:?}");
        let metrics_addr = format!("{ip}:9090");
        let refused = tokio::task::spawn_blocking(move || http_get(&metrics_addr, "/metrics"))
            .await
            .expect("task");
        assert!(
            refused.is_err(),
            "/metrics answers on the pod IP {ip}: {refused:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The test plugin's traffic: triggers, their copies, their deletions.

fn cms(n: &Node) -> Api<DynamicObject> {
    api(
        &n.admin,
        "v1",
        "ConfigMap",
        "configmaps",
        Some(&apps_ns(n, KUSTOMIZE_NS)),
    )
}

/// A ConfigMap for testkit instance `route`; it copies it to `<name>-out` and records its
/// deletion as `<name>-deleted`.
async fn trigger(n: &Node, route: &str, name: &str) {
    create(
        &cms(n),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": apps_ns(n, KUSTOMIZE_NS),
                            "labels": {ROUTE: route}},
               "data": {"action": "track-deletion", "value": name}}),
    )
    .await;
}

async fn untrigger(n: &Node, name: &str) {
    cms(n)
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete trigger");
}

/// Wait for `<name>-out` written by `version` of the plugin.
async fn out_version(n: &Node, name: &str, version: &str, timeout: Duration) -> DynamicObject {
    let cms = cms(n);
    eventually(
        &format!("{name}-out from version {version}"),
        timeout,
        || async {
            get(&cms, &format!("{name}-out"))
                .await
                .filter(|o| o.data["data"]["version"] == json!(version))
        },
    )
    .await
}

async fn deletion_recorded(n: &Node, name: &str, timeout: Duration) {
    let cms = cms(n);
    eventually(&format!("{name}-deleted"), timeout, || async {
        get(&cms, &format!("{name}-deleted")).await
    })
    .await;
}

/// The `-out` ConfigMaps of a route and their resourceVersions.
async fn outs(n: &Node, route: &str) -> BTreeMap<String, String> {
    let cms = cms(n);
    let triggers = cms
        .list(&ListParams::default().labels(&format!("{ROUTE}={route}")))
        .await
        .expect("list triggers");
    let mut out = BTreeMap::new();
    for t in triggers {
        let name = format!("{}-out", t.name_any());
        if let Some(o) = get(&cms, &name).await {
            out.insert(name, o.resource_version().unwrap_or_default());
        }
    }
    out
}

/// The names of a route's live triggers.
async fn triggers(n: &Node, route: &str) -> BTreeSet<String> {
    cms(n)
        .list(&ListParams::default().labels(&format!("{ROUTE}={route}")))
        .await
        .expect("list triggers")
        .items
        .iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .map(|o| o.name_any())
        .collect()
}

/// Until `pod` has handled (logged `event` for) every live trigger of `plugin` since it
/// started: a new leader's resync is complete.
async fn resynced(n: &Node, pod: &str, plugin: &str) {
    let apps = apps_ns(n, KUSTOMIZE_NS);
    eventually(
        &format!("{pod} handled every {plugin} trigger"),
        CONVERGE,
        || async {
            let live = triggers(n, plugin).await;
            let seen: BTreeSet<String> = pod_log(n, KUSTOMIZE_NS, pod)
                .await
                .iter()
                .filter(|l| field(l, "message") == "event" && field(l, "plugin") == plugin)
                .filter_map(|l| {
                    field(l, "object")
                        .rsplit_once(&format!("{apps}/"))
                        .map(|(_, name)| name.to_string())
                })
                .collect();
            live.is_subset(&seen).then_some(())
        },
    )
    .await;
}

/// No `event failed` line for `plugin` in any host pod.
async fn no_failed_events(n: &Node, plugin: &str) {
    let failed: Vec<Value> = seed_logs_lines(n, KUSTOMIZE_NS)
        .await
        .into_iter()
        .filter(|l| field(l, "message") == "event failed" && field(l, "plugin") == plugin)
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
}

async fn seed_logs_lines(n: &Node, ns: &str) -> Vec<Value> {
    PodLogs {
        node: n,
        ns: ns.to_string(),
    }
    .lines()
    .await
}

/// Triggers created (and some deleted) every `every` until `stop` is set: traffic while
/// something happens to the host. Returns (created, deleted).
fn traffic(
    n: &'static Node,
    route: &'static str,
    prefix: String,
    every: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<String>, Vec<String>)> {
    tokio::spawn(async move {
        let (mut created, mut deleted) = (Vec::new(), Vec::new());
        let mut i = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let name = format!("{prefix}-{i}");
            trigger(n, route, &name).await;
            created.push(name);
            // Every third one: delete the one made two steps before.
            if i % 3 == 2 {
                let gone = format!("{prefix}-{}", i - 2);
                untrigger(n, &gone).await;
                deleted.push(gone);
            }
            i += 1;
            tokio::time::sleep(every).await;
        }
        (created, deleted)
    })
}

/// Every created trigger that still exists has its `-out` from `version`, every deleted
/// one its `-deleted`.
async fn nothing_lost(n: &Node, created: &[String], deleted: &[String], version: &str) {
    for name in created.iter().filter(|c| !deleted.contains(c)) {
        out_version(n, name, version, CONVERGE).await;
    }
    for name in deleted {
        deletion_recorded(n, name, CONVERGE).await;
    }
    println!(
        "     traffic: {} triggers created, {} deleted: every copy and deletion handled",
        created.len(),
        deleted.len()
    );
}

// ---------------------------------------------------------------------------------------
// Hot reload, Plugin objects.

/// The time in a log line.
fn log_time(l: &Value) -> Option<Timestamp> {
    field(l, "timestamp").parse().ok()
}

fn since(t0: Timestamp, t: Timestamp) -> Duration {
    let d = t.duration_since(t0);
    Duration::from_secs_f64(d.as_secs_f64().max(0.0))
}

async fn hot_reload(n: &'static Node) {
    let pods_before: Vec<(String, i32)> = wait_ready(n, KUSTOMIZE_NS, 2, CONVERGE)
        .await
        .iter()
        .map(|p| (p.name_any(), restart_count(p)))
        .collect();
    for i in 0..3 {
        trigger(n, "reloader", &format!("before-{i}")).await;
    }
    for i in 0..3 {
        out_version(n, &format!("before-{i}"), "1", CONVERGE).await;
    }
    // The upgrade: the new build in the overlay, applied server-side (deploy/README.md).
    std::fs::copy(
        support::test_plugin("testkit-v2"),
        n.overlay.join("plugins/reloader.wasm"),
    )
    .expect("copy testkit-v2");
    let overlay = n.overlay.to_string_lossy().into_owned();
    let t0 = Timestamp::now();
    let started = Instant::now();
    let applied = kubectl_ok(n, &["apply", "--server-side", "-k", &overlay]);
    let changed: Vec<&str> = applied
        .lines()
        .filter(|l| !l.ends_with("unchanged"))
        .collect();
    println!("     applied: {}", changed.join("; "));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = traffic(
        n,
        "reloader",
        "reload".into(),
        Duration::from_secs(2),
        stop.clone(),
    );
    // Each pod's kubelet swaps ..data on its own sync; each host reloads then.
    let mut per_pod = Vec::new();
    for (pod, _) in &pods_before {
        let line = eventually(
            &format!("{pod}: reloader replaced 1 -> 2"),
            KUBELET_SYNC,
            || async {
                pod_log(n, KUSTOMIZE_NS, pod).await.into_iter().find(|l| {
                    field(l, "message") == "plugin replaced"
                        && field(l, "plugin") == "reloader"
                        && field(l, "to") == "2"
                })
            },
        )
        .await;
        per_pod.push((pod.clone(), line));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (created, deleted) = load.await.expect("traffic");
    for (pod, line) in &per_pod {
        let at = log_time(line).map(|t| since(t0, t));
        assert_eq!(field(line, "from"), "1", "{line}");
        assert!(
            field(line, "source").starts_with("/plugins/"),
            "the reload came from the mounted volume: {line}"
        );
        println!(
            "     {pod}: {} (the load itself took {} ms)",
            at.map(|d| format!("v2 serving {:.1} s after the apply", d.as_secs_f64()))
                .unwrap_or_else(|| "no timestamp".into()),
            line.get("took_ms")
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
        if let Some(d) = at {
            record(
                n,
                format!("hot reload via kubelet, apply -> v2 serving on {pod}"),
                d,
            );
        }
    }
    record(
        n,
        "hot reload: apply -> both pods serving v2 (observed)",
        started.elapsed(),
    );
    // The replay: every trigger's copy is now from version 2, and nothing was lost.
    for i in 0..3 {
        out_version(n, &format!("before-{i}"), "2", CONVERGE).await;
    }
    nothing_lost(n, &created, &deleted, "2").await;
    no_failed_events(n, "reloader").await;
    // No restart.
    let pods_after: Vec<(String, i32)> = wait_ready(n, KUSTOMIZE_NS, 2, CONVERGE)
        .await
        .iter()
        .map(|p| (p.name_any(), restart_count(p)))
        .collect();
    assert_eq!(pods_after, pods_before, "pods restarted");
}

/// The deployed NetworkPolicy lets the host's pods reach `ip:port` (an egress rule with
/// that TCP port and an ipBlock holding the address, not excepted). The node's CNI may not
/// enforce policies; this is what an enforcing one would do.
async fn network_policy_allows(n: &Node, addr: &str) {
    let (ip, port) = addr.rsplit_once(':').expect("IP:PORT");
    let ip: std::net::Ipv4Addr = ip.parse().expect("an IPv4 registry address");
    let port: i64 = port.parse().expect("port");
    let policies = api(
        &n.admin,
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "networkpolicies",
        Some(KUSTOMIZE_NS),
    );
    let policy = get(&policies, NAME).await.expect("NetworkPolicy kubewasm");
    let in_block = |cidr: &str, except: &[Value]| {
        let Some((net, bits)) = cidr.split_once('/') else {
            return false;
        };
        let (Ok(net), Ok(bits)) = (net.parse::<std::net::Ipv4Addr>(), bits.parse::<u32>()) else {
            return false;
        };
        let mask = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - bits)
        };
        (u32::from(ip) & mask) == (u32::from(net) & mask)
            && !except.iter().filter_map(Value::as_str).any(|e| {
                e.split_once('/').is_some_and(|(en, eb)| {
                    let (Ok(en), Ok(eb)) = (en.parse::<std::net::Ipv4Addr>(), eb.parse::<u32>())
                    else {
                        return false;
                    };
                    let m = if eb == 0 { 0 } else { u32::MAX << (32 - eb) };
                    (u32::from(ip) & m) == (u32::from(en) & m)
                })
            })
    };
    let allowed = policy.data["spec"]["egress"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|rule| {
            let port_ok = rule["ports"].as_array().is_none_or(|ps| {
                ps.iter().any(|p| {
                    p["port"] == json!(port) && p["protocol"].as_str().unwrap_or("TCP") == "TCP"
                })
            });
            let to_ok = rule["to"].as_array().is_none_or(|to| {
                to.iter().any(|peer| {
                    peer["ipBlock"]["cidr"].as_str().is_some_and(|c| {
                        in_block(
                            c,
                            peer["ipBlock"]["except"]
                                .as_array()
                                .map(Vec::as_slice)
                                .unwrap_or(&[]),
                        )
                    })
                })
            });
            port_ok && to_ok
        })
        .cloned();
    let rule = allowed.unwrap_or_else(|| {
        panic!(
            "NetworkPolicy {KUSTOMIZE_NS}/{NAME} lets no egress to {addr}: {}",
            policy.data["spec"]["egress"]
        )
    });
    println!("     NetworkPolicy egress to the registry {addr}: allowed by {rule}");
}

/// `kubewasm push FILE REF --insecure-registry HOST`: the pinned reference.
fn push(registry: &Registry, file: &Path, path: &str) -> String {
    let empty = tempfile::tempdir().expect("docker config dir");
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args([
            "--log",
            "warn",
            "push",
            &file.to_string_lossy(),
            &registry.reference(path),
        ])
        .args(["--insecure-registry", &registry.host()])
        .env("DOCKER_CONFIG", empty.path())
        .output()
        .expect("run kubewasm push");
    assert!(
        out.status.success(),
        "push failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pinned = stdout.lines().last().expect("push printed nothing").trim();
    assert!(pinned.contains("@sha256:"), "{pinned}");
    pinned.to_string()
}

fn plugins_api(n: &Node) -> Api<DynamicObject> {
    api(&n.admin, "kubewasm.dev/v1alpha1", "Plugin", "plugins", None)
}

/// Wait until Plugin `name`'s status says Ready with `digest` and `version`.
async fn plugin_serving(n: &Node, name: &str, digest: &str, version: &str) -> Value {
    let plugins = plugins_api(n);
    eventually(
        &format!("Plugin {name} Ready with {digest} (version {version})"),
        CONVERGE,
        || async {
            let st = get(&plugins, name).await?.data["status"].clone();
            let ready = st["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (ready && st["digest"] == json!(digest) && st["version"] == json!(version))
                .then_some(st)
        },
    )
    .await
}

async fn plugin_object(n: &'static Node) {
    let Some(registry) = &n.registry else {
        println!(
            "     (SKIPPED inside: set KUBEWASM_E2E_REGISTRY_ADDR to an IP:PORT of this machine that pods reach)"
        );
        return;
    };
    // The module as its author names it: oci-kit.wasm (a plugin's manifest name is its
    // file name), v1 and v2 builds of testkit.
    let staged = n.dir.path().join("oci-kit");
    std::fs::create_dir_all(staged.join("v1")).expect("mkdir");
    std::fs::create_dir_all(staged.join("v2")).expect("mkdir");
    let (file_v1, file_v2) = (
        staged.join("v1/oci-kit.wasm"),
        staged.join("v2/oci-kit.wasm"),
    );
    std::fs::copy(support::test_plugin("testkit"), &file_v1).expect("copy testkit");
    std::fs::copy(support::test_plugin("testkit-v2"), &file_v2).expect("copy testkit-v2");
    let (v1, v2) = {
        let r = registry.lock().expect("registry");
        (
            push(&r, &file_v1, "oci-kit:v1"),
            push(&r, &file_v2, "oci-kit:v2"),
        )
    };
    let registry_host = registry.lock().expect("registry").host();
    network_policy_allows(n, &registry_host).await;
    let digest = |pinned: &str| pinned.split_once('@').expect("pinned").1.to_string();
    let pods_before: Vec<(String, String, i32)> = wait_ready(n, KUSTOMIZE_NS, 2, CONVERGE)
        .await
        .iter()
        .map(|p| {
            (
                p.name_any(),
                container_id(p).unwrap_or_default(),
                restart_count(p),
            )
        })
        .collect();
    // The operator's review: `kubewasm approve` prints the Plugin object and its RBAC.
    let settings = n.dir.path().join("oci-kit.yaml");
    std::fs::write(&settings, testkit_settings("oci-kit")).expect("settings");
    let approved = approve(n, &file_v1, &settings, Some(&v1));
    std::fs::write(&n.approved, &approved).expect("approved YAML");
    kubectl_ok(
        n,
        &[
            "apply",
            "--server-side",
            "-f",
            &n.approved.to_string_lossy(),
        ],
    );
    let st = plugin_serving(n, "oci-kit", &digest(&v1), "1").await;
    println!("     Plugin oci-kit Ready: {}", st["digest"]);
    trigger(n, "oci-kit", "oci-a").await;
    out_version(n, "oci-a", "1", CONVERGE).await;

    // A new module: spec.module patched to the v2 digest; swapped in place.
    let started = Instant::now();
    plugins_api(n)
        .patch(
            "oci-kit",
            &PatchParams::apply("e2e-node").force(),
            &Patch::Apply(
                json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "oci-kit"}, "spec": {"module": v2}}),
            ),
        )
        .await
        .expect("patch spec.module");
    let st = plugin_serving(n, "oci-kit", &digest(&v2), "2").await;
    record(
        n,
        "Plugin object: spec.module patched -> status Ready on v2",
        started.elapsed(),
    );
    assert_eq!(st["module"], json!(v2), "{st}");
    out_version(n, "oci-a", "2", CONVERGE).await;
    trigger(n, "oci-kit", "oci-b").await;
    out_version(n, "oci-b", "2", CONVERGE).await;
    // In place: the same pods, containers and restart counts.
    let pods_after: Vec<(String, String, i32)> = wait_ready(n, KUSTOMIZE_NS, 2, CONVERGE)
        .await
        .iter()
        .map(|p| {
            (
                p.name_any(),
                container_id(p).unwrap_or_default(),
                restart_count(p),
            )
        })
        .collect();
    assert_eq!(pods_after, pods_before, "a pod or container was replaced");
    // Every replica pulled from the registry itself (the access log names pod addresses)
    // and swapped the plugin in (followers keep it warm too).
    let pods = host_pods(n, KUSTOMIZE_NS).await;
    let log = registry.lock().expect("registry").log();
    for p in &pods {
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .expect("pod IP");
        assert!(
            log.lines()
                .any(|l| l.contains(&ip) && l.contains(&digest(&v2))),
            "the registry did not serve {} ({ip}) the v2 digest:\n{}",
            p.name_any(),
            log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
        );
        let replaced = pod_log(n, KUSTOMIZE_NS, &p.name_any())
            .await
            .into_iter()
            .find(|l| field(l, "message") == "plugin replaced" && field(l, "plugin") == "oci-kit")
            .unwrap_or_else(|| panic!("{} did not swap oci-kit", p.name_any()));
        assert_eq!(field(&replaced, "source"), "plugins.kubewasm.dev/oci-kit");
        assert_eq!(field(&replaced, "to"), "2", "{replaced}");
    }
    no_failed_events(n, "oci-kit").await;
}

// ---------------------------------------------------------------------------------------
// Failover.

/// What a handover must show: the other pod holds the Lease within `bound`, a trigger
/// created and one deleted while it happens are handled, and the objects written before
/// are not written again (same resourceVersions after the new leader's resync).
async fn handover(
    n: &'static Node,
    what: &str,
    bound: Duration,
    act: impl FnOnce(Pod) -> BoxFuture<'static, ()>,
) {
    let (leader, followers) = leader_and_followers(n, KUSTOMIZE_NS).await;
    let old = leader.name_any();
    let old_lease = lease(n, KUSTOMIZE_NS).await.expect("Lease");
    let old_transitions = old_lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0);
    // Before: a trigger to delete during the handover, and every copy settled.
    let tag = what.replace(' ', "-");
    trigger(n, "reloader", &format!("{tag}-gone")).await;
    for t in triggers(n, "reloader").await {
        out_version(n, &t, "2", CONVERGE).await;
    }
    let before = outs(n, "reloader").await;
    let t0 = Timestamp::now();
    let started = Instant::now();
    act(leader.clone()).await;
    // During: one created, one deleted.
    trigger(n, "reloader", &format!("{tag}-new")).await;
    untrigger(n, &format!("{tag}-gone")).await;
    // The Lease with another holder, or, after the wait, why not.
    let deadline = Instant::now() + bound + CONVERGE;
    let new_lease = loop {
        let l = lease(n, KUSTOMIZE_NS).await.expect("the Lease");
        let h = holder(&l);
        if !h.is_empty() && !held_by(&h, &old) {
            break l;
        }
        if Instant::now() > deadline {
            let pod = pods_api(n, KUSTOMIZE_NS).get_opt(&old).await.ok().flatten();
            panic!(
                "after {:?} the Lease is still held by {h:?} (transitions {:?}, renewed {:?}); pod {old}: {}",
                started.elapsed(),
                l.spec.as_ref().and_then(|s| s.lease_transitions),
                l.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| t.0.to_string()),
                pod.map(|p| format!(
                    "restarts {}, ready {} (its restarted container renews the Lease under the same identity)",
                    restart_count(&p),
                    is_ready(&p)
                ))
                .unwrap_or_else(|| "gone".into())
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let observed = started.elapsed();
    let new_holder = holder(&new_lease);
    let acquired = new_lease
        .spec
        .as_ref()
        .and_then(|s| s.acquire_time.as_ref())
        .map(|t| since(t0, t.0));
    let to_follower = followers
        .iter()
        .any(|f| held_by(&new_holder, &f.name_any()));
    println!(
        "     {old} -> {new_holder} ({}; Lease acquired {} after the {what}; observed after {:.1} s; transitions {} -> {:?})",
        if to_follower {
            "the warm follower"
        } else {
            "NOT the warm follower"
        },
        acquired
            .map(|d| format!("{:.1} s", d.as_secs_f64()))
            .unwrap_or_else(|| "?".into()),
        observed.as_secs_f64(),
        old_transitions,
        new_lease.spec.as_ref().and_then(|s| s.lease_transitions)
    );
    let took = acquired.unwrap_or(observed);
    record(n, format!("handover after the {what}"), took);
    // The changes made during the handover, handled by the new leader.
    let new_out = out_version(n, &format!("{tag}-new"), "2", CONVERGE).await;
    deletion_recorded(n, &format!("{tag}-gone"), CONVERGE).await;
    let new_pod = host_pods(n, KUSTOMIZE_NS)
        .await
        .iter()
        .find(|p| held_by(&new_holder, &p.name_any()))
        .map(|p| p.name_any())
        .expect("the new leader's pod");
    resynced(n, &new_pod, "reloader").await;
    // Nothing written twice: the new leader's resync applied every copy again with the
    // same content, which the API server answers without a write.
    let after = outs(n, "reloader").await;
    let gone_out = format!("{tag}-gone-out");
    let rewritten: Vec<String> = before
        .iter()
        .filter(|(name, _)| **name != gone_out)
        .filter(|(name, rv)| after.get(*name) != Some(*rv))
        .map(|(name, rv)| format!("{name}: {rv} -> {:?}", after.get(name)))
        .collect();
    assert!(rewritten.is_empty(), "written again: {rewritten:?}");
    assert_eq!(
        after.get(&format!("{tag}-new-out")),
        new_out.resource_version().as_ref(),
        "the copy made during the handover was written twice"
    );
    println!(
        "     {} copies kept their resourceVersions through the handover",
        before.len() - usize::from(before.contains_key(&gone_out))
    );
    no_failed_events(n, "reloader").await;
    // The deployment heals: two Ready pods again.
    wait_ready(n, KUSTOMIZE_NS, 2, READY).await;
    record(
        n,
        format!("two Ready pods again after the {what}"),
        started.elapsed(),
    );
    // Last, so that what happened is reported either way: the warm follower took over,
    // within the bound.
    if !to_follower {
        let holder_pod = pods_api(n, KUSTOMIZE_NS)
            .get_opt(&new_pod)
            .await
            .ok()
            .flatten();
        let ready_at = holder_pod
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| since(t0, t.0));
        panic!(
            "the Lease went to {new_holder} (acquired {acquired:?} after the {what}; its pod Ready {ready_at:?} after), \
             not to the warm follower {:?}",
            followers.iter().map(|f| f.name_any()).collect::<Vec<_>>()
        );
    }
    assert!(took <= bound, "handover took {took:?}, more than {bound:?}");
}

async fn leader_deleted(n: &'static Node) {
    // A deleted pod's host releases the Lease on SIGTERM: the follower takes it at its
    // next retry, well inside the lease duration.
    handover(n, "leader pod deletion", LEASE_DURATION, |leader| {
        Box::pin(async move {
            pods_api(n, KUSTOMIZE_NS)
                .delete(&leader.name_any(), &DeleteParams::default())
                .await
                .expect("delete the leader pod");
        })
    })
    .await;
}

async fn leader_killed(n: &'static Node) {
    let Some(ctr) = n.ctr.clone() else {
        println!("     (SKIPPED inside: set KUBEWASM_E2E_CTR to kill a container)");
        return;
    };
    let (leader, _) = leader_and_followers(n, KUSTOMIZE_NS).await;
    let restarts = restart_count(&leader);
    // SIGKILL: no release; the follower waits until the lease expires by its own clock:
    // a lease duration after it saw the last renewal (which it sees at its next retry, at
    // most a retry period after the renewal, itself before the kill), then takes it at its
    // next retry: at most a lease duration and two retry periods after the kill.
    handover(
        n,
        "leader container kill",
        LEASE_DURATION + 2 * RETRY_PERIOD,
        |leader| {
            Box::pin(async move {
                let id = container_id(&leader).expect("container id");
                shell_ok(&ctr, &["tasks", "kill", "--signal", "SIGKILL", &id]);
            })
        },
    )
    .await;
    // The killed container was restarted in its pod, which is Ready again as a follower.
    let pods = wait_ready(n, KUSTOMIZE_NS, 2, READY).await;
    let same = pods
        .iter()
        .find(|p| p.name_any() == leader.name_any())
        .expect("the killed pod is still there");
    assert_eq!(restart_count(same), restarts + 1, "restart count");
}

// ---------------------------------------------------------------------------------------
// Rolling update.

async fn rolling_update(n: &'static Node) {
    let before: BTreeSet<String> = wait_ready(n, KUSTOMIZE_NS, 2, CONVERGE)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    // A flag change in the overlay: the pod template changes, the Deployment rolls.
    write_kustomization(n, &["--event-interval=61s"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = traffic(
        n,
        "reloader",
        "roll".into(),
        Duration::from_secs(1),
        stop.clone(),
    );
    let started = Instant::now();
    kubectl_ok(
        n,
        &["apply", "--server-side", "-k", &n.overlay.to_string_lossy()],
    );
    // Watch the rollout: Ready pods never below 2 (maxUnavailable 0), an old pod goes
    // only after a new one is Ready.
    let mut min_ready = usize::MAX;
    let mut first_new_ready: Option<Duration> = None;
    let mut first_old_gone: Option<Duration> = None;
    let deployments: Api<Deployment> = Api::namespaced(n.admin.clone(), KUSTOMIZE_NS);
    let deadline = Instant::now() + READY;
    loop {
        let pods = host_pods(n, KUSTOMIZE_NS).await;
        let ready: Vec<&Pod> = pods.iter().filter(|p| is_ready(p)).collect();
        min_ready = min_ready.min(ready.len());
        if first_new_ready.is_none() && ready.iter().any(|p| !before.contains(&p.name_any())) {
            first_new_ready = Some(started.elapsed());
        }
        let old_alive = pods
            .iter()
            .filter(|p| before.contains(&p.name_any()) && p.metadata.deletion_timestamp.is_none())
            .count();
        if first_old_gone.is_none() && old_alive < before.len() {
            first_old_gone = Some(started.elapsed());
        }
        let d = deployments.get(NAME).await.expect("deployment");
        let st = d.status.clone().unwrap_or_default();
        let done = st.observed_generation >= d.metadata.generation
            && st.updated_replicas == Some(2)
            && st.ready_replicas == Some(2)
            && st.replicas == Some(2)
            && pods.len() == 2
            && pods.iter().all(|p| !before.contains(&p.name_any()));
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rollout did not complete in {READY:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (created, deleted) = load.await.expect("traffic");
    record(
        n,
        "rolling update: apply -> 2 new pods Ready, old gone",
        took,
    );
    println!(
        "     Ready pods never fewer than {min_ready}; first new pod Ready at {:.1} s, first old pod terminating at {:.1} s",
        first_new_ready.unwrap_or_default().as_secs_f64(),
        first_old_gone.unwrap_or_default().as_secs_f64()
    );
    assert!(
        min_ready >= 2,
        "Ready pods fell to {min_ready} during the rollout"
    );
    assert!(
        first_new_ready <= first_old_gone,
        "an old pod went before a new one was Ready"
    );
    // The new pods run the new flag, one of them leads, and nothing was lost.
    let (leader, _) = leader_and_followers(n, KUSTOMIZE_NS).await;
    let args = leader.spec.as_ref().expect("spec").containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(args.iter().any(|a| a == "--event-interval=61s"), "{args:?}");
    nothing_lost(n, &created, &deleted, "2").await;
    no_failed_events(n, "reloader").await;
}

// ---------------------------------------------------------------------------------------
// Helm.

async fn install_helm(n: &'static Node) {
    let helm = helm().expect(
        "no helm: set KUBEWASM_HELM, put helm on PATH, or run deploy/tools/install-helm.sh",
    );
    let (repo, tag) = split_image(&n.image);
    let chart = root().join("deploy/helm/kubewasm");
    let approvals = root().join("plugins/approvals.yaml");
    let plugin_cms = [
        "kubewasm-plugin-contentsite-provisioner",
        "kubewasm-plugin-mongodb-monitor",
        "kubewasm-plugin-seldon-endpoint",
    ];
    let out = Command::new(&helm)
        .args(["template", NAME])
        .arg(&chart)
        .args(["--namespace", HELM_NS, "--include-crds"])
        .args(["--set", "namespace.create=true"])
        .args([
            "--set",
            "replicas=2",
            "--set",
            "leaderElection.enabled=true",
        ])
        .args(["--set", &format!("image.repository={repo}")])
        .args(["--set", &format!("image.tag={tag}")])
        .args([
            "--set",
            &format!("plugins.configMaps={{{}}}", plugin_cms.join(",")),
        ])
        .args(["--set", "extraArgs={--memory-mib=64}"])
        .arg("--set-file")
        .arg(format!(
            "approvals.data.approvals\\.yaml={}",
            approvals.display()
        ))
        .output()
        .expect("helm template");
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&n.helm_rendered, &out.stdout).expect("rendered chart");
    let docs = yaml_docs(&String::from_utf8_lossy(&out.stdout));
    let ns = docs
        .iter()
        .find(|d| d["kind"] == "Namespace")
        .expect("the chart renders its Namespace (namespace.create)")
        .clone();
    create_namespace(n, ns).await;
    // The plugins, one ConfigMap each, as the chart's values say to deliver them.
    for (cm, name) in plugin_cms.into_iter().zip([
        "contentsite-provisioner",
        "mongodb-monitor",
        "seldon-endpoint",
    ]) {
        let wasm = support::example_plugin(name);
        let yaml = kubectl_ok(
            n,
            &[
                "create",
                "configmap",
                cm,
                "-n",
                HELM_NS,
                &format!("--from-file={}", wasm.display()),
                &format!("--from-file={}", wasm.with_extension("yaml").display()),
                "--dry-run=client",
                "-o",
                "yaml",
            ],
        );
        let file = n.dir.path().join(format!("{cm}.yaml"));
        std::fs::write(&file, yaml).expect("configmap YAML");
        kubectl_ok(
            n,
            &["apply", "--server-side", "-f", &file.to_string_lossy()],
        );
    }
    let started = Instant::now();
    kubectl_ok(
        n,
        &[
            "apply",
            "--server-side",
            "-f",
            &n.helm_rendered.to_string_lossy(),
        ],
    );
    let pods = wait_ready(n, HELM_NS, 2, READY).await;
    record(n, "helm install: apply to 2 pods Ready", started.elapsed());
    for p in &pods {
        assert_eq!(
            p.spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some(n.image.clone())),
            "the pod runs the imported image"
        );
    }
}

async fn uninstall_helm(n: &'static Node) {
    let started = Instant::now();
    kubectl_ok(
        n,
        &[
            "delete",
            "-f",
            &n.helm_rendered.to_string_lossy(),
            "--ignore-not-found",
            "--wait=true",
            "--timeout=180s",
        ],
    );
    assert!(host_pods(n, HELM_NS).await.is_empty(), "pods left");
    record(n, "helm uninstall", started.elapsed());
}

async fn cleanup(n: &Node) {
    remove_installs(n).await;
    let _ = api(
        &n.admin,
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        None,
    )
    .delete(SCRAPER_BINDING, &DeleteParams::default())
    .await;
    let namespaces = api(&n.admin, "v1", "Namespace", "namespaces", None);
    for ns in [apps_ns(n, KUSTOMIZE_NS), apps_ns(n, HELM_NS)] {
        let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
    }
    if let Some(r) = &n.registry {
        r.lock().expect("registry").stop();
    }
    println!(
        "cleaned up: the installs, namespaces {} and {} (CRDs stay installed)",
        apps_ns(n, KUSTOMIZE_NS),
        apps_ns(n, HELM_NS)
    );
}
