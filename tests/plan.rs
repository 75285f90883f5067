//! `kubewasm plan`: the real binary against the embedded API server (the one `kubewasm
//! dev` serves): the plan of a seed scenario's plugin printed and exit code 2, nothing
//! written by it, nothing to change (exit 0) once the host has made the writes, an update
//! with its field diff, a write the plugin's ServiceAccount may not make shown refused
//! with the API server's reason, `--output json` with the same content, and exit 1 for a
//! bad module, an unreachable cluster and a failing plugin call.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use support::*;

const PROVISIONER: &str = "contentsite-provisioner";

/// `kubewasm ARGS…`: exit code, stdout, stderr.
fn kubewasm(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn"])
        .args(args)
        .output()
        .expect("kubewasm runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubewasm plan WASM --kubeconfig KUBECONFIG EXTRA…`: exit code, stdout, stderr.
fn plan(wasm: &Path, kubeconfig: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let (wasm, kubeconfig) = (
        wasm.to_str().expect("utf-8"),
        kubeconfig.to_str().expect("utf-8"),
    );
    kubewasm(&[&["plan", wasm, "--kubeconfig", kubeconfig][..], extra].concat())
}

/// The provisioner installed and approved in `env`; its plugin file.
fn provisioner(env: &Env) -> std::path::PathBuf {
    env.add_plugin(&example_plugin(PROVISIONER), PROVISIONER, None);
    env.plugins.join(format!("{PROVISIONER}.wasm"))
}

fn approvals(env: &Env) -> String {
    env.approvals.display().to_string()
}

fn dbs(env: &Env) -> Api<DynamicObject> {
    env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"))
}

fn services(env: &Env) -> Api<DynamicObject> {
    env.api("v1", "Service", "services", Some("default"))
}

fn resource_version(o: &DynamicObject) -> Option<String> {
    o.metadata.resource_version.clone()
}

/// The sign the text plan shows for a JSON change's `action`.
fn sign(action: &str) -> &'static str {
    match action {
        "create" => "+",
        "update" => "~",
        "delete" => "-",
        "refused" => "!",
        other => panic!("a listed change is never {other:?}"),
    }
}

/// Every change of the JSON plan is in the text plan: its header line and each field line.
fn same_content(text: &str, plan: &Value) {
    let changes = plan["changes"].as_array().expect("changes");
    assert!(!changes.is_empty(), "{plan:#}");
    for c in changes {
        let header = format!(
            "{} {} {}  (for {})",
            sign(c["change"]["action"].as_str().expect("action")),
            c["verb"].as_str().expect("verb"),
            c["object"].as_str().expect("object"),
            c["trigger"].as_str().expect("trigger"),
        );
        assert!(text.contains(&header), "{header:?} missing from\n{text}");
        for f in c["change"]["fields"].as_array().into_iter().flatten() {
            let path = f["path"].as_str().expect("path");
            let to = f["to"].as_str().unwrap_or("(removed)");
            let line = match f["from"].as_str() {
                Some(from) => format!("    {path}: {from} → {to}"),
                None if c["change"]["action"] == "create" => format!("    {path}: {to}"),
                None => format!("    {path}: (absent) → {to}"),
            };
            // Two runs, two clocks: a timestamp the plugin writes (a condition's
            // lastTransitionTime) may differ by a second; its path must still be there.
            let stamped = to.contains("Time\":");
            let expected = if stamped {
                format!("    {path}: ")
            } else {
                line
            };
            assert!(
                text.contains(&expected),
                "{expected:?} missing from\n{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_shows_the_writes_to_come_makes_none_and_is_empty_once_they_are_made() {
    let env = Env::new().await;
    let wasm = provisioner(&env);
    let sites = env.sites();
    let site = env.create(&sites, content_site("blog", 3)).await;
    let approvals = approvals(&env);

    let (code, out, err) = plan(&wasm, &env.kubeconfig, &["--approvals", &approvals]);
    assert_eq!(code, Some(2), "something would change:\n{out}\n{err}");
    for line in [
        "kubewasm plan: contentsite-provisioner 0.1.0, 1 objects watched",
        "+ create MongoDB default/blog-db  (for ContentSite default/blog)",
        "    spec.members: 3",
        "    spec.version: \"7.0.12\"",
        "+ create Service default/blog  (for ContentSite default/blog)",
        "    spec.selector.app: \"blog\"",
        "~ patch-status ContentSite default/blog  (for ContentSite default/blog)",
        "    status.databaseRef: (absent) → \"blog-db\"",
        "Plan: 2 to create, 1 to change, 0 to delete, 0 refused; 0 objects unchanged",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}\n{err}");
    }

    let (code, json_out, err) = plan(
        &wasm,
        &env.kubeconfig,
        &["--approvals", &approvals, "--output", "json"],
    );
    assert_eq!(code, Some(2), "{json_out}\n{err}");
    let v: Value = serde_json::from_str(&json_out).expect("--output json is JSON");
    assert_eq!(
        v["summary"],
        json!({"create": 2, "update": 1, "delete": 0, "refused": 0, "unchanged": 0})
    );
    assert_eq!(v["plugin"], json!(PROVISIONER));
    assert_eq!(v["calls"], json!(1));
    assert_eq!(v["changes"].as_array().map(Vec::len), Some(3), "{v:#}");
    assert_eq!(v["errors"], json!([]));
    same_content(&out, &v);

    // Listed only where --namespace says: nothing of `default` is planned.
    let (code, out, err) = plan(
        &wasm,
        &env.kubeconfig,
        &["--approvals", &approvals, "--namespace", "elsewhere"],
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains(", 0 objects watched"), "{out}");

    // The plan wrote nothing: no child, the site untouched (no status, same version).
    assert!(get(&dbs(&env), "blog-db").await.is_none());
    assert!(get(&services(&env), "blog").await.is_none());
    let now = get(&sites, "blog").await.expect("the site");
    assert_eq!(resource_version(&now), resource_version(&site));
    assert!(now.data.get("status").is_none_or(Value::is_null), "{now:?}");

    // The host makes the writes: the plan then has nothing to change.
    let host = env.start_host(&[]);
    eventually("the site's status and children", CONVERGE, || async {
        let status = get(&sites, "blog").await?.data["status"]["serviceRef"].clone();
        let children = get(&dbs(&env), "blog-db").await.is_some()
            && get(&services(&env), "blog").await.is_some();
        (status == json!("blog") && children).then_some(())
    })
    .await;
    assert_eq!(host.stop(), Some(0));
    let (code, out, err) = plan(&wasm, &env.kubeconfig, &["--approvals", &approvals]);
    assert_eq!(code, Some(0), "nothing to change:\n{out}\n{err}");
    assert!(
        out.contains("Plan: 0 to create, 0 to change, 0 to delete, 0 refused; 3 objects unchanged"),
        "{out}"
    );
    assert!(!out.contains("+ ") && !out.contains("~ "), "{out}");

    // A spec change: the child's update with its field diff, still not made.
    env.apply(&sites, "test-user", content_site("blog", 5))
        .await;
    let db = get(&dbs(&env), "blog-db").await.expect("blog-db");
    let (code, out, err) = plan(&wasm, &env.kubeconfig, &["--approvals", &approvals]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    for line in [
        "~ create MongoDB default/blog-db  (for ContentSite default/blog)",
        "    spec.members: 3 → 5",
        "    status.observedGeneration: 1 → 2",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}");
    }
    let after = get(&dbs(&env), "blog-db").await.expect("blog-db");
    assert_eq!(resource_version(&after), resource_version(&db));
    assert_eq!(after.data["spec"]["members"], json!(3));
}

/// The plugin's ServiceAccount may write MongoDBs, only read Services, and not write the
/// site's status: its Service (whose owner check reads as the plugin, a dry-run PATCH it
/// may not send either) and its status patch are refused, with the API server's reason,
/// as they would be on apply; as the kubeconfig's user (cluster-admin) they would not be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_plugins_service_account_may_not_make_shows_refused_with_the_reason() {
    let env = Env::with_rbac(true, &[]).await;
    let wasm = provisioner(&env);
    let rbac =
        |kind: &str, plural: &str| env.api("rbac.authorization.k8s.io/v1", kind, plural, None);
    let writes = ["get", "list", "watch", "create", "patch"];
    env.create(
        &rbac("ClusterRole", "clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "provisioner-without-status"},
               "rules": [
                   {"apiGroups": ["mongodb.com"], "resources": ["mongodb"], "verbs": writes},
                   {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["sites.kubewasm.dev"], "resources": ["contentsites"],
                    "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    env.create(
        &rbac("ClusterRoleBinding", "clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "provisioner-without-status"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "provisioner-without-status"},
               "subjects": [{"kind": "ServiceAccount", "name": "kubewasm-contentsite-provisioner",
                             "namespace": "default"}]}),
    )
    .await;
    let site = env.create(&env.sites(), content_site("blog", 3)).await;
    let approvals = approvals(&env);
    let as_plugin = ["--approvals", &approvals, "--plugin-namespace", "default"];

    let (code, out, err) = plan(&wasm, &env.kubeconfig, &as_plugin);
    assert_eq!(
        code,
        Some(2),
        "a refusal is something apply would do:\n{out}\n{err}"
    );
    let refused = out
        .split("\n\n")
        .find(|block| {
            block.starts_with(
                "! patch-status ContentSite default/blog  (for ContentSite default/blog)",
            )
        })
        .unwrap_or_else(|| panic!("no refused status patch in\n{out}\n{err}"));
    assert!(
        refused.contains("refused (403): ")
            && refused.contains("system:serviceaccount:default:kubewasm-contentsite-provisioner")
            && refused.contains("contentsites"),
        "the API server's code and reason: {refused}"
    );
    let service = out
        .split("\n\n")
        .find(|block| {
            block.starts_with("! create Service default/blog  (for ContentSite default/blog)")
        })
        .unwrap_or_else(|| panic!("no refused Service in\n{out}\n{err}"));
    assert!(
        service.contains("refused (403): ") && service.contains("services"),
        "the API server's code and reason: {service}"
    );
    for line in [
        "+ create MongoDB default/blog-db  (for ContentSite default/blog)",
        "Plan: 1 to create, 0 to change, 0 to delete, 2 refused; 0 objects unchanged",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}");
    }
    let (code, json_out, _) = plan(
        &wasm,
        &env.kubeconfig,
        &[&as_plugin[..], &["--output", "json"]].concat(),
    );
    assert_eq!(code, Some(2));
    let v: Value = serde_json::from_str(&json_out).expect("JSON");
    same_content(&out, &v);
    let change = v["changes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["verb"] == "patch-status"))
        .map(|c| c["change"].clone())
        .unwrap_or_default();
    assert_eq!(change["action"], json!("refused"), "{v:#}");
    assert_eq!(change["code"], json!(403), "{v:#}");

    // As the kubeconfig's user, nothing is refused.
    let (code, out, err) = plan(
        &wasm,
        &env.kubeconfig,
        &["--approvals", &approvals, "--no-impersonation"],
    );
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(
        out.contains("Plan: 2 to create, 1 to change, 0 to delete, 0 refused; 0 objects unchanged"),
        "{out}"
    );
    assert!(get(&services(&env), "blog").await.is_none());
    assert!(get(&dbs(&env), "blog-db").await.is_none());
    let now = get(&env.sites(), "blog").await.expect("the site");
    assert_eq!(resource_version(&now), resource_version(&site));
}

/// A cluster whose MongoDB CRD allows at most 3 members: a site asking 5 has its MongoDB
/// refused by the schema (422), with the API server's reason; the rest is planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_schema_refuses_shows_refused_with_the_reason() {
    let env = Env::with_crds(false).await;
    let crds = env.dir.path().join("crds");
    std::fs::create_dir(&crds).expect("crds dir");
    let sites_crd = root().join("examples/crds/contentsites.sites.kubewasm.dev.yaml");
    std::fs::copy(&sites_crd, crds.join("contentsites.yaml")).expect("copy CRD");
    let mongodb = std::fs::read_to_string(root().join("examples/crds/mongodb.mongodb.com.yaml"))
        .expect("MongoDB CRD");
    assert!(
        mongodb.contains("maximum: 50"),
        "the CRD's members bound moved"
    );
    std::fs::write(
        crds.join("mongodb.yaml"),
        mongodb.replace("maximum: 50", "maximum: 3"),
    )
    .expect("write CRD");
    env.apply_path(&crds).await;
    let wasm = provisioner(&env);
    env.create(&env.sites(), content_site("big", 5)).await;

    let approvals = approvals(&env);
    let (code, out, err) = plan(&wasm, &env.kubeconfig, &["--approvals", &approvals]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    let refused = out
        .split("\n\n")
        .find(|b| b.starts_with("! create MongoDB default/big-db  (for ContentSite default/big)"))
        .unwrap_or_else(|| panic!("no refused MongoDB in\n{out}\n{err}"));
    assert!(
        refused.contains("refused (422): ") && refused.contains("members"),
        "the API server's code and reason: {refused}"
    );
    assert!(
        out.contains("Plan: 1 to create, 1 to change, 0 to delete, 1 refused; 0 objects unchanged"),
        "{out}"
    );
    assert!(get(&dbs(&env), "big-db").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_module_an_unreachable_cluster_and_a_failing_call_exit_1() {
    let env = Env::with_crds(false).await;
    let broken = env.dir.path().join("broken.wasm");
    std::fs::write(&broken, b"not a component").expect("write");
    let (code, out, err) = plan(&broken, &env.kubeconfig, &[]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(
        err.contains("broken.wasm") && err.contains("not a WebAssembly component"),
        "{err}"
    );

    // Nothing listens on a port just given back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let nowhere = env.dir.path().join("kubeconfig-nowhere");
    let text =
        kubewasm_apiserver::kubeconfig::render(&format!("http://127.0.0.1:{port}"), None, None)
            .expect("kubeconfig");
    std::fs::write(&nowhere, text).expect("write kubeconfig");
    let testkit = test_plugin("testkit");
    let (code, out, err) = plan(&testkit, &nowhere, &[]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("Error: making the plan"), "{err}");
    assert!(err.contains("Connection refused"), "{err}");

    // A watched kind the cluster does not serve (no CRDs here) is said, and planned as
    // nothing.
    let (code, out, err) = plan(&example_plugin(PROVISIONER), &env.kubeconfig, &[]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("note: sites.kubewasm.dev/v1alpha1/ContentSite is not served by the cluster"),
        "{out}"
    );

    // testkit calls ConfigMaps labelled for it: one fails, one is copied, one it does not
    // watch is not called.
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for (name, labels, action) in [
        ("bad", json!({"kubewasm.dev/testkit": "testkit"}), "error"),
        ("ok", json!({"kubewasm.dev/testkit": "testkit"}), "copy"),
        ("other", json!({}), "copy"),
    ] {
        env.create(
            &cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "default", "labels": labels},
                   "data": {"action": action, "value": "1"}}),
        )
        .await;
    }
    let (code, out, err) = plan(&testkit, &env.kubeconfig, &["--no-impersonation"]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains(", 2 objects watched"), "{out}");
    assert!(
        out.contains("+ create ConfigMap default/ok-out  (for ConfigMap default/ok)"),
        "the rest of the plan is printed:\n{out}"
    );
    let failure = err
        .lines()
        .find(|l| l.starts_with("error: ConfigMap default/bad"))
        .unwrap_or_else(|| panic!("the failing call, named:\n{err}"));
    assert!(
        failure.contains("plugin testkit") && failure.contains("testkit was asked to fail"),
        "the plugin, the object and the reason: {failure}"
    );
    assert!(get(&cms, "ok-out").await.is_none());
}

/// `kubewasm dev`'s API server, through the kubeconfig it writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_works_against_kubewasm_dev() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins dir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args([
        "--log-format",
        "json",
        "--log",
        "info",
        "dev",
        "--no-plugin-objects",
    ])
    .arg("--plugins")
    .arg(&plugins)
    .arg("--apply")
    .arg(root().join("examples/crds"))
    .arg("--apply")
    .arg(root().join("examples/provision-on-demand"))
    .arg("--kubeconfig-out")
    .arg(&kubeconfig)
    .args(["--metrics-addr", "127.0.0.1:0"])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let dev = HostProcess::spawn_command(cmd);
    dev.wait_log("the dev host running", |l| {
        field(l, "message").starts_with("host running")
    })
    .await;

    let wasm = example_plugin(PROVISIONER);
    let (code, out, err) = plan(&wasm, &kubeconfig, &[]);
    assert_eq!(code, Some(2), "{out}\n{err}\n{}", dev.dump());
    for line in [
        ", 2 objects watched",
        "+ create MongoDB default/blog-db  (for ContentSite default/blog)",
        "+ create MongoDB default/docs-db  (for ContentSite default/docs)",
        "+ create Service default/docs  (for ContentSite default/docs)",
        "Plan: 4 to create, 2 to change, 0 to delete, 0 refused; 0 objects unchanged",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}");
    }
    assert_eq!(dev.stop(), Some(0));
}

/// `--module`: the plugin pulled from a registry (its tag resolved to a digest), named by
/// its own manifest for its approval, and planned as its file is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_pulls_the_module_from_a_registry() {
    let registry = support::registry::Registry::start();
    let env = Env::new().await;
    let wasm = provisioner(&env);
    env.create(&env.sites(), content_site("blog", 3)).await;
    let tag = registry.reference("plugins/contentsite:v1");
    let host = registry.host();
    let wasm = wasm.to_str().expect("utf-8");
    let (code, _, err) = kubewasm(&["push", wasm, &tag, "--insecure-registry", &host]);
    assert_eq!(code, Some(0), "push: {err}");

    let kubeconfig = env.kubeconfig.to_str().expect("utf-8");
    let approvals = approvals(&env);
    let (code, out, err) = kubewasm(&[
        "plan",
        "--module",
        &tag,
        "--insecure-registry",
        &host,
        "--kubeconfig",
        kubeconfig,
        "--approvals",
        &approvals,
    ]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    for line in [
        "kubewasm plan: contentsite-provisioner 0.1.0, 1 objects watched",
        "+ create MongoDB default/blog-db  (for ContentSite default/blog)",
        "Plan: 2 to create, 1 to change, 0 to delete, 0 refused; 0 objects unchanged",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}");
    }

    // Its approval is looked up by the name it gives itself: without one, it is refused.
    env.unapprove(PROVISIONER);
    let (code, out, err) = kubewasm(&[
        "plan",
        "--module",
        &tag,
        "--insecure-registry",
        &host,
        "--kubeconfig",
        kubeconfig,
        "--approvals",
        &approvals,
    ]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains(PROVISIONER), "{err}");
}
