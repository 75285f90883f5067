//! Plugins as Kubernetes objects, end to end: modules pushed with `kubewasm push` to a real
//! registry (Debian's docker-registry on loopback), Plugin objects applied to the embedded
//! API server, the real `kubewasm run` reconciling them — Ready with the digest and version
//! in status, swapped in place to a new digest, refusals that leave the old version
//! serving, permissions that bound what loads, and the seed plugins of every language
//! delivered and hot-swapped this way.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use support::registry::Registry;
use support::*;

/// The host's token when a test must tell its requests from the test's own.
const HOST_TOKEN: &str = "kubewasm-host";

fn digest_of(pinned: &str) -> &str {
    pinned.split_once('@').expect("a pinned reference").1
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What testkit asks for: its ConfigMap watch, and the grants of `TESTKIT_APPROVAL`.
fn testkit_permissions() -> Value {
    json!({
        "watches": [{"apiVersion": "v1", "kind": "ConfigMap"}],
        "grants": [
            {"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["create"], "allowForce": true},
            {"apiGroups": [""], "kinds": ["Namespace"], "namespaces": ["*"], "verbs": ["create"]},
        ],
    })
}

fn plugin(name: &str, module: &str, permissions: Value) -> Value {
    json!({
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "Plugin",
        "metadata": {"name": name},
        "spec": {"module": module, "permissions": permissions},
    })
}

fn cm(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"value": value}})
}

struct World {
    env: Env,
    registry: Registry,
    plugins: Api<DynamicObject>,
    cms: Api<DynamicObject>,
}

impl World {
    /// A registry, the API server with the Plugin CRD (and the examples' CRDs when
    /// `crds`), no plugin files.
    async fn new(crds: bool) -> World {
        let registry = Registry::start();
        let env = Env::with_crds(crds).await;
        env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
            .await;
        let plugins = env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
        let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
        World {
            env,
            registry,
            plugins,
            cms,
        }
    }

    fn host_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "--insecure-registry",
            &self.registry.host(),
            "--reload-debounce",
            "100ms",
            "--module-store",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(self.env.dir.path().join("modules").display().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn start_host(&self, extra: &[&str]) -> HostProcess {
        let args = self.host_args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.env.start_host_with_env(
            &args,
            &[(
                "DOCKER_CONFIG",
                &empty_docker_config().display().to_string(),
            )],
        )
    }

    fn start_host_as_token(&self, extra: &[&str]) -> HostProcess {
        let args = self.host_args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.env.start_host_as(HOST_TOKEN, &args)
    }

    async fn apply_plugin(&self, obj: Value) {
        let name = obj["metadata"]["name"].as_str().expect("name").to_string();
        let obj: DynamicObject = serde_json::from_value(obj).expect("a Plugin object");
        self.plugins
            .patch(
                &name,
                &PatchParams::apply("plugin-objects-test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("apply the Plugin");
    }

    async fn set_module(&self, name: &str, module: &str) {
        self.plugins
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"module": module}})),
            )
            .await
            .expect("patch spec.module");
    }

    async fn set_permissions(&self, name: &str, permissions: Value) {
        self.plugins
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"permissions": null}})),
            )
            .await
            .expect("clear spec.permissions");
        self.plugins
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"permissions": permissions}})),
            )
            .await
            .expect("patch spec.permissions");
    }

    /// Wait until the Plugin's status has condition `type_` at `status` with `reason`, for
    /// its current generation; returns the status. On timeout, says what the status and
    /// the host's log were.
    async fn condition(
        &self,
        host: &HostProcess,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let o = get(&self.plugins, name).await;
            if let Some(o) = &o
                && let Some(generation) = o.metadata.generation
                && let Some(st) = o.data.get("status")
            {
                let found = st["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == type_
                            && c["status"] == status
                            && c["reason"] == reason
                            && c["observedGeneration"] == json!(generation)
                    })
                });
                if found && st["observedGeneration"] == json!(generation) {
                    return st.clone();
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for Plugin {name}: {type_}={status} ({reason}); the object: {}\nhost log:\n{}",
                o.map(|o| serde_json::to_string_pretty(&o.data).unwrap_or_default())
                    .unwrap_or_default(),
                host.dump()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until `<name>-out` carries `version` and `value`.
    async fn out_has(&self, name: &str, version: &str, value: &str) {
        let out = format!("{name}-out");
        eventually(&format!("{out} at version {version}"), CONVERGE, || async {
            get(&self.cms, &out).await.filter(|o| {
                o.data["data"]["version"] == json!(version)
                    && o.data["data"]["value"] == json!(value)
            })
        })
        .await;
    }
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_module_serves_as_a_plugin_object_and_swaps_in_place() {
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let v2 = push_module(&w.registry, &test_plugin("testkit-v2"), "testkit:v2");
    let host = w.start_host(&[]);
    w.apply_plugin(plugin("testkit", &v1, testkit_permissions()))
        .await;
    let st = w
        .condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    assert_eq!(st["digest"], json!(digest_of(&v1)), "{st}");
    assert_eq!(st["module"], json!(v1), "{st}");
    assert_eq!(st["version"], json!("1"), "{st}");
    assert_eq!(condition(&st, "Approved")["status"], json!("True"), "{st}");
    assert_eq!(
        st["requested"]["watches"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        "{st}"
    );
    w.env.create(&w.cms, cm("a", "1")).await;
    w.out_has("a", "1", "1").await;

    // A tag: resolved to its digest, which status records; the new code swaps in place.
    let pid = host.pid();
    w.set_module("testkit", &w.registry.reference("testkit:v2"))
        .await;
    let st = w
        .condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    assert_eq!(st["digest"], json!(digest_of(&v2)), "{st}");
    assert_eq!(st["module"], json!(v2), "{st}");
    assert_eq!(st["version"], json!("2"), "{st}");
    w.out_has("a", "2", "1").await;
    w.env.create(&w.cms, cm("b", "1")).await;
    w.out_has("b", "2", "1").await;
    assert_eq!(host.pid(), pid);
    let replaced = host.matching(|l| field(l, "message") == "plugin replaced");
    assert_eq!(replaced.len(), 1, "{replaced:?}");
    assert_eq!(
        field(&replaced[0], "source"),
        "plugins.kubewasm.dev/testkit"
    );

    // Deleted: unloaded.
    w.plugins
        .delete("testkit", &DeleteParams::default())
        .await
        .expect("delete the Plugin");
    wait_or_dump(&host, "testkit removed", |l| {
        field(l, "message") == "plugin removed" && field(l, "plugin") == "testkit"
    })
    .await;
    w.env.create(&w.cms, cm("c", "1")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        get(&w.cms, "c-out").await.is_none(),
        "a deleted Plugin's module handled an event"
    );
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// Every way the newest module can fail to arrive leaves the running version serving, and
/// a condition says which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_cannot_be_pulled_leaves_the_old_version_serving() {
    let mut w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    // Over the cap below (1 MiB): a Python component is ~19 MB.
    let big = push_module(
        &w.registry,
        &lang_plugin("python", "contentsite-provisioner"),
        "big:v1",
    );
    // A blob whose bytes are not what its digest says: the registry serves whatever is
    // in its storage.
    // (A module no other step pushes: the registry keeps one blob per digest.)
    let other = lang_plugin("c", "contentsite-provisioner");
    let other_bytes = std::fs::read(&other).expect("the C plugin");
    let corrupt = push_module(&w.registry, &other, "corrupt:v1");
    let blob = w.registry.blob_data(&sha256(&other_bytes));
    let mut bad = other_bytes.clone();
    bad[other_bytes.len() / 2] ^= 0xff;
    std::fs::write(&blob, &bad).expect("corrupt the blob");

    let host = w.start_host(&["--max-module-mib", "1"]);
    w.apply_plugin(plugin("testkit", &v1, testkit_permissions()))
        .await;
    w.condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    w.env.create(&w.cms, cm("a", "1")).await;
    w.out_has("a", "1", "1").await;

    let unknown = w
        .registry
        .reference(&format!("testkit@sha256:{}", "0".repeat(64)));
    let cases = [
        (unknown.as_str(), "ManifestNotFound"),
        (big.as_str(), "ModuleTooLarge"),
        (corrupt.as_str(), "DigestMismatch"),
    ];
    for (i, (module, reason)) in cases.iter().enumerate() {
        w.set_module("testkit", module).await;
        let st = w.condition(&host, "testkit", "Ready", "True", reason).await;
        let ready = condition(&st, "Ready");
        assert!(
            ready["message"]
                .as_str()
                .unwrap_or("")
                .contains("keeps serving"),
            "{st}"
        );
        assert_eq!(condition(&st, "Pulled")["status"], json!("False"), "{st}");
        assert_eq!(st["digest"], json!(digest_of(&v1)), "{st}");
        // The old version still handles events.
        let name = format!("during-{i}");
        w.env.create(&w.cms, cm(&name, "1")).await;
        w.out_has(&name, "1", "1").await;
    }
    // Nothing over the cap was downloaded, and nothing half-written is left in the store.
    let tmp = w.env.dir.path().join("modules/tmp");
    let leftovers: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}\n{}", host.dump());

    // The registry down: a module not in the store cannot arrive.
    w.registry.stop();
    w.set_module("testkit", &w.registry.reference("testkit:v2"))
        .await;
    let st = w
        .condition(&host, "testkit", "Ready", "True", "RegistryUnavailable")
        .await;
    assert_eq!(st["version"], json!("1"), "{st}");
    w.env.create(&w.cms, cm("down", "1")).await;
    w.out_has("down", "1", "1").await;
    // Back up: the retry at the next rescan or change pulls it.
    w.registry.restart();
    let v2 = push_module(&w.registry, &test_plugin("testkit-v2"), "testkit:v2");
    w.set_module("testkit", &v2).await;
    let st = w
        .condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    assert_eq!(st["version"], json!("2"), "{st}");
    // Each pull that failed is counted (three refused modules, the registry down, its
    // retries), and each module that arrived: v1, then v2.
    let metrics = host_metrics(&host).await;
    let pulls = |result: &str| {
        metric_sample(
            &metrics,
            &format!(r#"kubewasm_pulls_total{{plugin="testkit",result="{result}"}}"#),
        )
    };
    assert!(pulls("failed") >= 4.0, "{metrics}");
    assert_eq!(pulls("pulled"), 2.0, "{metrics}");
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// The operator's registry rules hold for what a Plugin names: under `--require-digest` a
/// tag is refused; a registry at a loopback or link-local address that the operator did
/// not name is refused before any connection, even the test registry itself under another
/// name. The version serving keeps serving throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registries_the_operator_did_not_allow_are_refused() {
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let host = w.start_host(&["--require-digest"]);
    w.apply_plugin(plugin("testkit", &v1, testkit_permissions()))
        .await;
    w.condition(&host, "testkit", "Ready", "True", "Serving")
        .await;

    w.set_module("testkit", &w.registry.reference("testkit:v1"))
        .await;
    let st = w
        .condition(&host, "testkit", "Ready", "True", "DigestRequired")
        .await;
    let message = condition(&st, "Ready")["message"].as_str().unwrap_or("");
    assert!(message.contains("--require-digest"), "{st}");
    w.env.create(&w.cms, cm("tag", "1")).await;
    w.out_has("tag", "1", "1").await;

    // The same registry, by a name the operator did not give (`--insecure-registry`
    // names 127.0.0.1:PORT), and the cloud metadata address.
    let port = w
        .registry
        .host()
        .rsplit_once(':')
        .expect("port")
        .1
        .to_string();
    let digest = digest_of(&v1).to_string();
    let before = w.registry.log().matches("GET /v2/").count();
    for (i, registry) in [format!("localhost:{port}"), "169.254.169.254".to_string()]
        .iter()
        .enumerate()
    {
        w.set_module("testkit", &format!("oci://{registry}/testkit@{digest}"))
            .await;
        let st = w
            .condition(&host, "testkit", "Ready", "True", "RegistryNotAllowed")
            .await;
        let message = condition(&st, "Ready")["message"].as_str().unwrap_or("");
        assert!(
            message.contains(registry.as_str()) && message.contains("named explicitly"),
            "{st}"
        );
        assert_eq!(st["digest"], json!(digest), "{st}");
        let name = format!("refused-{i}");
        w.env.create(&w.cms, cm(&name, "1")).await;
        w.out_has(&name, "1", "1").await;
    }
    assert_eq!(
        w.registry.log().matches("GET /v2/").count(),
        before,
        "no request reached the registry under a name not allowed"
    );
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// `spec.permissions` bound what loads: a module asking for more is refused naming each
/// extra rule; narrowing them under a running version unloads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_bound_what_loads_and_narrowing_them_unloads() {
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let host = w.start_host(&[]);
    // Nothing approved but the watch: each grant it asks for is named.
    w.apply_plugin(plugin(
        "testkit",
        &v1,
        json!({"watches": [{"apiVersion": "v1", "kind": "ConfigMap"}]}),
    ))
    .await;
    let st = w
        .condition(&host, "testkit", "Approved", "False", "NotApproved")
        .await;
    let msg = condition(&st, "Approved")["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        msg.contains("create core ConfigMap (all namespaces and cluster-scoped)"),
        "{msg}"
    );
    assert_eq!(condition(&st, "Ready")["status"], json!("False"), "{st}");
    assert_eq!(st["digest"], Value::Null, "{st}");
    assert_eq!(
        st["requested"]["grants"],
        json!([{"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["create"]}]),
        "{st}"
    );
    w.env.create(&w.cms, cm("a", "1")).await;

    // Approved: it loads and handles what is there.
    w.set_permissions("testkit", testkit_permissions()).await;
    w.condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    w.out_has("a", "1", "1").await;

    // Narrowed under the running version (the watch limited to another namespace):
    // unloaded, not left serving with what it had.
    let mut narrowed = testkit_permissions();
    narrowed["watches"][0]["namespaces"] = json!(["elsewhere"]);
    w.set_permissions("testkit", narrowed).await;
    let st = w
        .condition(&host, "testkit", "Ready", "False", "NotApproved")
        .await;
    assert!(
        condition(&st, "Ready")["message"]
            .as_str()
            .unwrap_or("")
            .contains("watch v1/ConfigMap in all namespaces"),
        "{st}"
    );
    host.wait_log("testkit unloaded", |l| {
        field(l, "message").starts_with("plugin unloaded") && field(l, "plugin") == "testkit"
    })
    .await;
    w.env.create(&w.cms, cm("b", "1")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        get(&w.cms, "b-out").await.is_none(),
        "an unloaded plugin handled an event"
    );
    assert_eq!(host.stop(), Some(0));
}

/// A tag is resolved again at every rescan: found where it was, nothing is pulled, loaded
/// or reloaded; moved, the move is logged at INFO (plugin, reference, both digests), said in
/// the Ready condition, and the digest it names now serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_tag_reloads_nothing_and_a_moved_tag_is_said() {
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:live");
    let tag = w.registry.reference("testkit:live");
    let host = w.start_host(&["--rescan-interval", "300ms"]);
    w.apply_plugin(plugin("testkit", &tag, testkit_permissions()))
        .await;
    let st = w
        .condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    assert_eq!(st["digest"], json!(digest_of(&v1)), "{st}");
    w.env.create(&w.cms, cm("a", "1")).await;
    w.out_has("a", "1", "1").await;

    // Rescans find the tag where it was: nothing pulled, loaded, replaced or said.
    let resolved = |host: &HostProcess| {
        host.matching(|l| field(l, "message") == "tag resolved" && field(l, "plugin") == "testkit")
            .len()
    };
    let before = resolved(&host);
    eventually("three more rescans", CONVERGE, || async {
        (resolved(&host) >= before + 3).then_some(())
    })
    .await;
    let count = |message: &str| host.matching(|l| field(l, "message") == message).len();
    assert_eq!(count("module pulled"), 1, "{}", host.dump());
    assert_eq!(count("plugin loaded"), 1, "{}", host.dump());
    assert_eq!(count("plugin replaced"), 0, "{}", host.dump());
    assert_eq!(count("tag moved"), 0, "{}", host.dump());
    let st = get(&w.plugins, "testkit").await.expect("the Plugin").data["status"].clone();
    assert_eq!(condition(&st, "Ready")["reason"], json!("Serving"), "{st}");

    // The tag moved: said once, in the log and in status, and the new digest serves.
    let v2 = push_module(&w.registry, &test_plugin("testkit-v2"), "testkit:live");
    let moved = host
        .wait_log("tag moved", |l| field(l, "message") == "tag moved")
        .await;
    assert_eq!(field(&moved, "level"), "INFO", "{moved}");
    assert_eq!(field(&moved, "plugin"), "testkit", "{moved}");
    assert_eq!(field(&moved, "reference"), tag, "{moved}");
    assert_eq!(field(&moved, "from"), digest_of(&v1), "{moved}");
    assert_eq!(field(&moved, "to"), digest_of(&v2), "{moved}");
    let st = eventually("version 2 serving", CONVERGE, || async {
        get(&w.plugins, "testkit")
            .await
            .map(|o| o.data["status"].clone())
            .filter(|st| st["digest"] == json!(digest_of(&v2)))
    })
    .await;
    assert_eq!(st["version"], json!("2"), "{st}");
    let ready = condition(&st, "Ready");
    assert_eq!(ready["reason"], json!("Serving"), "{st}");
    assert!(
        ready["message"].as_str().unwrap_or("").contains(&format!(
            "tag {tag} moved from {} to {}",
            digest_of(&v1),
            digest_of(&v2)
        )),
        "{st}"
    );
    w.out_has("a", "2", "1").await;
    assert_eq!(count("plugin replaced"), 1, "{}", host.dump());
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// A Plugin may name only the pull secrets the operator allowed: another is refused
/// before any Secret is read (the API server sees no request for it); an allowed one is
/// read and used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allowed_pull_secrets_are_read() {
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    // Pull secrets are read in the host's namespace: without flags, out of a pod, the
    // one `kubewasm rbac` renders (kubewasm-system).
    let namespaces = w.env.api("v1", "Namespace", "namespaces", None);
    w.env
        .create(
            &namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubewasm-system"}}),
        )
        .await;
    let secrets = w
        .env
        .api("v1", "Secret", "secrets", Some("kubewasm-system"));
    let config = json!({"auths": {w.registry.host(): {"auth": "dXNlcjpwYXNz"}}}).to_string();
    let config = base64::engine::general_purpose::STANDARD.encode(config);
    for name in ["regcred", "database-password"] {
        w.env
            .create(
                &secrets,
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": name, "namespace": "kubewasm-system"},
                       "type": "kubernetes.io/dockerconfigjson",
                       "data": {".dockerconfigjson": config}}),
            )
            .await;
    }
    w.env.server.record_requests();
    let host = w.start_host_as_token(&["--allowed-pull-secret", "regcred"]);
    let with_secret = |name: &str, secret: &str| {
        let mut p = plugin(name, &v1, testkit_permissions());
        p["spec"]["pullSecretRef"] = json!({"name": secret});
        p
    };
    w.apply_plugin(with_secret("testkit", "database-password"))
        .await;
    let st = w
        .condition(&host, "testkit", "Ready", "False", "PullSecretNotAllowed")
        .await;
    let message = condition(&st, "Ready")["message"].as_str().unwrap_or("");
    assert!(
        message.contains("database-password")
            && message.contains("--allowed-pull-secret")
            && message.contains("regcred"),
        "{st}"
    );
    let read = |name: &str| {
        w.env
            .server
            .requests()
            .iter()
            .filter(|r| r.client == HOST_TOKEN && r.path.contains(&format!("/secrets/{name}")))
            .count()
    };
    assert_eq!(
        read("database-password"),
        0,
        "a Secret not allowed was read"
    );

    // The allowed one is read, and the module pulled with it.
    w.apply_plugin(with_secret("testkit", "regcred")).await;
    w.condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    assert!(read("regcred") >= 1, "the allowed pull secret was not read");
    assert_eq!(read("database-password"), 0);
    assert_eq!(host.stop(), Some(0));
}

/// Wait for a log line; on timeout, say what the host logged.
async fn wait_or_dump(host: &HostProcess, what: &str, pred: impl Fn(&Value) -> bool) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while host.matching(&pred).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}; host log:\n{}",
            host.dump()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A host that cannot see Plugin objects any more (its RBAC for them revoked) does not keep
/// serving what it last saw: once the watch has failed for `--plugin-watch-grace`, the
/// plugins of Plugin objects are unloaded; when it works again, they load again and handle
/// what changed meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_objects_stop_serving_when_their_watch_fails_past_the_grace() {
    let registry = Registry::start();
    let env = Env::with_rbac(false, &[(HOST_TOKEN, "kubewasm-host")]).await;
    env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
        .await;
    let roles = env.api(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        None,
    );
    let bindings = env.api(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        None,
    );
    let role = |name: &str, groups: &[&str]| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name},
               "rules": [{"apiGroups": groups, "resources": ["*"], "verbs": ["*"]}]})
    };
    let binding = |name: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "User", "name": "kubewasm-host"}]})
    };
    env.create(
        &roles,
        role(
            "host-core",
            &[
                "",
                "authorization.k8s.io",
                "events.k8s.io",
                "apiextensions.k8s.io",
            ],
        ),
    )
    .await;
    env.create(&bindings, binding("host-core")).await;
    env.create(&roles, role("host-plugins", &["kubewasm.dev"]))
        .await;
    env.create(&bindings, binding("host-plugins")).await;
    let w = World {
        plugins: env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None),
        cms: env.api("v1", "ConfigMap", "configmaps", Some("default")),
        env,
        registry,
    };
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let host = w.start_host_as_token(&["--no-impersonation", "--plugin-watch-grace", "2s"]);
    w.apply_plugin(plugin("testkit", &v1, testkit_permissions()))
        .await;
    w.condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    w.env.create(&w.cms, cm("a", "1")).await;
    w.out_has("a", "1", "1").await;

    // The host loses its rights on Plugin objects; its open watch is cut, so it watches
    // again and is refused.
    bindings
        .delete("host-plugins", &DeleteParams::default())
        .await
        .expect("delete the binding");
    w.env.server.record_requests();
    let cut = std::time::Instant::now();
    w.env.server.pause_watches();
    eventually(
        "the host's Plugin watch cut and sent again",
        CONVERGE,
        || async {
            w.env
                .server
                .requests()
                .iter()
                .any(|r| {
                    r.client == HOST_TOKEN
                        && r.arrived > cut
                        && r.path.contains("/plugins")
                        && r.path.contains("watch=true")
                })
                .then_some(())
        },
    )
    .await;
    w.env.server.resume_watches();
    wait_or_dump(&host, "Plugin objects withheld", |l| {
        field(l, "message").starts_with("the watch of Plugin objects has been failing")
    })
    .await;
    wait_or_dump(&host, "testkit removed", |l| {
        field(l, "message") == "plugin removed" && field(l, "plugin") == "testkit"
    })
    .await;
    w.env.create(&w.cms, cm("b", "1")).await;

    // Its rights back: it loads again and handles what it missed.
    w.env.create(&bindings, binding("host-plugins")).await;
    wait_or_dump(&host, "Plugin objects back", |l| {
        field(l, "message").starts_with("the watch of Plugin objects works again")
    })
    .await;
    w.out_has("b", "1", "1").await;
    let lines = host.logs();
    let at = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred);
    let removed =
        at(&|l| field(l, "message") == "plugin removed" && field(l, "plugin") == "testkit")
            .expect("removed");
    let handled_b =
        at(&|l| field(l, "message") == "event" && field(l, "object").ends_with("default/b"))
            .expect("b handled");
    let back = at(&|l| field(l, "message").starts_with("the watch of Plugin objects works again"))
        .expect("back");
    assert!(
        removed < back && back < handled_b,
        "b was handled while the Plugin watch was failing:\n{}",
        host.dump()
    );
    assert_eq!(host.stop(), Some(0));
}

/// Across a swap, every change is handled, by exactly one version, and none by the old
/// version once the new one serves. Deterministic: the host's writes are held by the API
/// server while the swap happens, so changes handled before it have their applies in
/// flight across it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_change_is_lost_or_handled_twice_across_a_swap() {
    const N: usize = 8;
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let v2 = push_module(&w.registry, &test_plugin("testkit-v2"), "testkit:v2");
    let host = w.start_host_as_token(&["--concurrency", "4"]);
    w.apply_plugin(plugin("testkit", &v1, testkit_permissions()))
        .await;
    w.condition(&host, "testkit", "Ready", "True", "Serving")
        .await;
    for i in 0..N {
        w.env.create(&w.cms, cm(&format!("o{i}"), "0")).await;
    }
    for i in 0..N {
        w.out_has(&format!("o{i}"), "1", "0").await;
    }
    let events = |version: &str, object: &str| {
        host.matching(|l| {
            field(l, "message") == "event"
                && field(l, "version") == version
                && field(l, "object").ends_with(&format!("default/{object}"))
        })
        .len()
    };
    let before: Vec<usize> = (0..N).map(|i| events("1", &format!("o{i}"))).collect();

    // Hold the host's writes; the first half changes and is handled by version 1, whose
    // applies wait at the server.
    w.env.server.stall_client(HOST_TOKEN);
    let set = |i: usize, v: &str| {
        let cms = w.cms.clone();
        let v = v.to_string();
        async move {
            cms.patch(
                &format!("o{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"value": v}})),
            )
            .await
            .expect("patch");
        }
    };
    for i in 0..N / 2 {
        set(i, "1").await;
    }
    for (i, handled) in before.iter().enumerate().take(N / 2) {
        let o = format!("o{i}");
        eventually(&format!("{o} handled by version 1"), CONVERGE, || async {
            (events("1", &o) > *handled).then_some(())
        })
        .await;
    }
    // Swap while those applies are in flight; then the second half changes.
    w.set_module("testkit", &v2).await;
    host.wait_log("testkit replaced", |l| {
        field(l, "message") == "plugin replaced"
    })
    .await;
    let v1_at_swap: Vec<usize> = (0..N).map(|i| events("1", &format!("o{i}"))).collect();
    for i in N / 2..N {
        set(i, "1").await;
    }
    w.env.server.release_client(HOST_TOKEN);

    for i in 0..N {
        w.out_has(&format!("o{i}"), "2", "1").await;
    }
    for i in 0..N {
        let o = format!("o{i}");
        // Version 1 handled each change before the swap exactly once, and nothing after.
        let expected = before[i] + usize::from(i < N / 2);
        assert_eq!(events("1", &o), expected, "{o}: version 1 events");
        assert_eq!(v1_at_swap[i], expected, "{o}: version 1 events at the swap");
        assert!(events("2", &o) >= 1, "{o}: never handled by version 2");
    }
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// `kubewasm approve FILE --module REF`: the Plugin object of its YAML stream.
fn approved_plugin(file: &Path, module: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["approve", &file.to_string_lossy(), "--module", module])
        .output()
        .expect("run kubewasm approve");
    assert!(
        out.status.success(),
        "approve failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .find(|d: &Value| d["kind"] == "Plugin")
        .expect("a Plugin in approve's output")
}

/// The seed plugin of each language that makes one, delivered as a Plugin object and
/// hot-swapped from one language's module to the next: Go, JavaScript and Python (the
/// ones too big for a ConfigMap), each Ready with its digest and handling a ContentSite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_javascript_and_python_seed_plugins_are_delivered_and_swapped() {
    let w = World::new(true).await;
    let mut modules = Vec::new();
    for lang in ["go", "js", "python"] {
        let file = lang_plugin(lang, "contentsite-provisioner");
        let pinned = push_module(
            &w.registry,
            &file,
            &format!("contentsite-provisioner:{lang}"),
        );
        modules.push((lang, file, pinned));
    }
    let host = w.start_host(&[]);
    let sites = w.env.sites();
    let mongodbs = w
        .env
        .api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let mut digests = Vec::new();
    for (i, (lang, file, pinned)) in modules.iter().enumerate() {
        // The object `kubewasm approve` prints for this module: permissions exactly what
        // it asks for.
        let obj = approved_plugin(file, pinned);
        assert_eq!(
            obj["metadata"]["name"],
            json!("contentsite-provisioner"),
            "{obj}"
        );
        w.apply_plugin(obj).await;
        let st = eventually(&format!("{lang} module serving"), CONVERGE, || async {
            let o = get(&w.plugins, "contentsite-provisioner").await?;
            let st = o.data.get("status")?.clone();
            (st["digest"] == json!(digest_of(pinned))
                && condition(&st, "Ready")["reason"] == json!("Serving"))
            .then_some(st)
        })
        .await;
        digests.push(st["digest"].clone());
        let site = format!("blog-{lang}");
        w.env.create(&sites, content_site(&site, 1)).await;
        eventually(
            &format!("MongoDB for {site} ({lang})"),
            CONVERGE,
            || async { get(&mongodbs, &format!("{site}-db")).await },
        )
        .await;
        if i > 0 {
            let swaps = host.matching(|l| {
                field(l, "message") == "plugin replaced"
                    && field(l, "plugin") == "contentsite-provisioner"
            });
            assert_eq!(swaps.len(), i, "{swaps:?}");
        }
    }
    digests.dedup();
    assert_eq!(digests.len(), 3, "{digests:?}");
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// `status.preview.candidate` once its events reach `events` (the shadow runs apart from
/// the serving path: it is waited for, not assumed).
async fn candidate_after(w: &World, host: &HostProcess, events: u64) -> Value {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let st = get(&w.plugins, "testkit")
            .await
            .and_then(|o| o.data.get("status").cloned())
            .unwrap_or_default();
        let seen = st["preview"]["candidate"]["events"].as_u64().unwrap_or(0);
        if seen >= events {
            return st;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the candidate was compared on {seen} events, not {events}: {st}\nhost log:\n{}",
            host.dump()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A shadow candidate runs beside the serving version on the same events, in dry run: it
/// diverges exactly where it would write something else (the one field its settings
/// change, on the objects that carry it) and agrees elsewhere, while the serving
/// version's writes land as before; promotion is the existing swap, and removing the
/// candidate stops the shadow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_candidate_diverges_where_it_differs_and_promotes_by_a_swap() {
    let w = World::new(false).await;
    let v1 = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let host = w.start_host(&[]);
    w.apply_plugin(plugin("testkit", &v1, testkit_permissions()))
        .await;
    w.condition(&host, "testkit", "Previewing", "False", "Enforcing")
        .await;
    w.env.create(&w.cms, cm("a", "1")).await;
    w.out_has("a", "1", "1").await;

    // The candidate: the same module with settings that change `data.version` only.
    let candidate = json!({"module": v1, "settings": {"version": "2"}});
    w.plugins
        .patch(
            "testkit",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"candidate": candidate}})),
        )
        .await
        .expect("set spec.candidate");
    let st = w
        .condition(&host, "testkit", "Previewing", "True", "Shadow")
        .await;
    assert_eq!(condition(&st, "Ready")["reason"], json!("Serving"), "{st}");
    host.wait_log("candidate loaded", |l| {
        field(l, "message").starts_with("candidate loaded")
    })
    .await;
    // Adding a candidate does not reload the serving version.
    assert!(
        host.matching(|l| field(l, "message") == "plugin replaced")
            .is_empty()
    );

    // `b` is copied (the candidate writes another version: diverges on data.version);
    // `s` writes the shared ConfigMap, the same from both (agrees).
    let mut shared = cm("s", "1");
    shared["data"]["action"] = json!("write-shared");
    w.env.create(&w.cms, shared).await;
    w.env.create(&w.cms, cm("b", "1")).await;
    w.out_has("b", "1", "1").await;
    let st = candidate_after(&w, &host, 2).await;
    let c = &st["preview"]["candidate"];
    assert_eq!(c["divergences"], json!(1), "{st}");
    assert_eq!(c["agreements"], json!(1), "{st}");
    let recent = st["preview"]["recent"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let diverged: Vec<&Value> = recent
        .iter()
        .filter(|i| i["action"] == "Diverges")
        .collect();
    assert_eq!(diverged.len(), 1, "{st}");
    assert_eq!(
        diverged[0]["object"],
        json!("ConfigMap default/b-out"),
        "{st}"
    );
    assert_eq!(diverged[0]["paths"], json!(["data.version"]), "{st}");
    // The serving version's writes landed as before; the candidate's did not.
    w.out_has("b", "1", "1").await;
    let shared = get(&w.cms, "shared").await.expect("shared written");
    assert_eq!(
        managers(&shared),
        vec!["kubewasm-testkit".to_string()],
        "only the serving version's apply owns fields"
    );
    let metrics = host_metrics(&host).await;
    assert!(
        metrics.contains(r#"kubewasm_shadow_divergences_total{plugin="testkit"} 1"#),
        "{metrics}"
    );

    // Promotion: the candidate's module and settings become the spec; the candidate goes.
    w.plugins
        .patch(
            "testkit",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"settings": {"version": "2"}, "candidate": null}})),
        )
        .await
        .expect("promote");
    // Changes made while the promotion swaps are each handled, by one version or the
    // other, and end at the promoted version's output.
    for i in 0..4 {
        w.env.create(&w.cms, cm(&format!("p{i}"), "1")).await;
    }
    w.condition(&host, "testkit", "Previewing", "False", "Enforcing")
        .await;
    wait_or_dump(&host, "the promoted version serves", |l| {
        field(l, "message") == "plugin replaced" && field(l, "to") == "2"
    })
    .await;
    w.out_has("a", "2", "1").await;
    w.out_has("b", "2", "1").await;
    for i in 0..4 {
        w.out_has(&format!("p{i}"), "2", "1").await;
    }
    w.env.create(&w.cms, cm("c", "1")).await;
    w.out_has("c", "2", "1").await;
    host.wait_log("the shadow stops", |l| {
        field(l, "message").starts_with("candidate removed")
    })
    .await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// The host's `/metrics` text, from the address its start-up line names.
async fn host_metrics(host: &HostProcess) -> String {
    use std::io::{Read, Write};
    let line = host
        .wait_log("the ops endpoint", |l| {
            field(l, "message").starts_with("serving /healthz")
        })
        .await;
    let addr = field(&line, "addr").to_string();
    let mut s = std::net::TcpStream::connect(&addr).expect("connect to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read /metrics");
    text
}
