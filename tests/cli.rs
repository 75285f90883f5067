//! The command line: `inspect`, `test` (including that it fails with a diff), and `dev`
//! (the README's demo) run end to end.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

fn kubewasm(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn"])
        .args(args)
        .output()
        .expect("run kubewasm");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inspect_prints_the_world_and_the_manifest() {
    let wasm = example_plugin("mongodb-monitor");
    let (code, out, err) = kubewasm(&["inspect", wasm.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_yaml_ng::from_str(&out).expect("YAML");
    assert_eq!(doc["manifest"]["name"], "mongodb-monitor");
    assert_eq!(doc["fieldManager"], "kubewasm-mongodb-monitor");
    assert_eq!(doc["manifest"]["watches"][0]["resource"]["kind"], "MongoDB");
    let exports = doc["world"]["exports"].as_array().unwrap();
    let handler = exports
        .iter()
        .find(|e| e["name"] == "kubewasm:plugin/handler@0.2.0")
        .unwrap_or_else(|| panic!("no handler export: {out}"));
    assert!(
        handler["means"].as_str().unwrap().contains("describe"),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.wasm");
    std::fs::write(&bad, "not wasm").unwrap();
    let (code, _, err) = kubewasm(&["inspect", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not a WebAssembly component"), "{err}");
}

/// Settings the plugin refuses (a leftover key) do not hide what it asks for: `inspect
/// --approval` prints the approval as described without settings, the error beside it as a
/// comment and on stderr, and exits 1; plain `inspect` shows both too.
#[test]
fn inspect_approval_survives_invalid_settings() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("mongodb-monitor.wasm");
    std::fs::copy(example_plugin("mongodb-monitor"), &wasm).unwrap();
    std::fs::write(dir.path().join("mongodb-monitor.yaml"), "suffix: copy\n").unwrap();
    let (code, out, err) = kubewasm(&["inspect", "--approval", wasm.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("unknown field `suffix`"), "{err}");
    assert!(
        out.contains("WITHOUT settings") && out.contains("#   plugin ") && out.contains("`suffix`"),
        "{out}"
    );
    let doc: serde_json::Value = serde_yaml_ng::from_str(&out).expect("YAML");
    assert_eq!(doc["kind"], "Plugin", "{out}");
    assert_eq!(doc["metadata"]["name"], "mongodb-monitor", "{out}");
    assert_eq!(
        doc["spec"]["permissions"]["grants"][0]["kinds"],
        serde_json::json!(["ServiceMonitor"]),
        "{out}"
    );
    assert_eq!(
        doc["spec"]["permissions"]["watches"][0]["kind"], "MongoDB",
        "{out}"
    );

    let (code, out, _) = kubewasm(&["inspect", wasm.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let doc: serde_json::Value = serde_yaml_ng::from_str(&out).expect("YAML");
    assert!(doc["error"].as_str().unwrap().contains("`suffix`"), "{out}");
    assert!(
        doc["withoutSettings"]["requested"]["grants"].is_array(),
        "{out}"
    );
}

/// A bare file name (no `./`) is a file of the current directory, for `inspect` as for
/// `test --plugin`.
#[test]
fn a_bare_file_name_is_read_from_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        example_plugin("mongodb-monitor"),
        dir.path().join("mongodb-monitor.wasm"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "inspect", "mongodb-monitor.wasm"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("name: mongodb-monitor"), "{stdout}");
}

/// `inspect` compiles through the code cache: the second run of the same file is a cache
/// hit (said in its log), and WASI imports are explained. Entries outlive a process only
/// under a key file (`KUBEWASM_CACHE_KEY_FILE`, outside the cache directory).
#[test]
fn inspect_uses_the_code_cache_and_explains_imports() {
    let cache = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("cache.key");
    std::fs::write(&key, "inspect-test-key-of-at-least-32-bytes").unwrap();
    let wasm = lang_plugin("python", "mongodb-monitor");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .env("KUBEWASM_CACHE_KEY_FILE", &key)
            .args(["--log-format", "json", "--log", "info", "inspect"])
            .arg(&wasm)
            .arg("--cache-dir")
            .arg(cache.path())
            .output()
            .expect("run kubewasm");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let how: Vec<String> = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["message"] == "component ready")
            .map(|l| l["how"].as_str().unwrap_or_default().to_string())
            .collect();
        (how, String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (first, _) = run();
    // In a worker, as `run` compiles: inspect is run on plugins others wrote.
    assert_eq!(first, ["compiled in a worker"]);
    let (second, out) = run();
    assert_eq!(second, ["cache hit"]);
    let doc: serde_json::Value = serde_yaml_ng::from_str(&out).expect("YAML");
    let wasi: Vec<&serde_json::Value> = doc["world"]["imports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["name"].as_str().unwrap().starts_with("wasi:"))
        .collect();
    assert!(!wasi.is_empty(), "a Python component imports WASI: {out}");
    assert!(
        wasi.iter()
            .all(|i| i["means"].as_str().unwrap().contains("empty context")),
        "{out}"
    );
}

/// Without cache settings, `inspect` and `test` share a per-user cache: the second run
/// of the same file is a cache hit, its key created 0600 beside the cache directory.
#[test]
fn inspect_and_test_share_a_per_user_cache_by_default() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let xdg = home.path().join("xdg");
    let wasm = example_plugin("mongodb-monitor");
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .env("HOME", home.path())
            .env("XDG_CACHE_HOME", &xdg)
            .env_remove("KUBEWASM_CACHE_DIR")
            .env_remove("KUBEWASM_CACHE_KEY_FILE")
            .args(["--log-format", "json", "--log", "info"])
            .args(args)
            .output()
            .expect("run kubewasm");
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|l| l["how"].as_str().map(str::to_string))
            .collect::<Vec<String>>()
    };
    let inspect = [std::ffi::OsStr::new("inspect"), wasm.as_os_str()];
    assert_eq!(run(&inspect), ["compiled in a worker"]);
    assert_eq!(run(&inspect), ["cache hit"]);
    let key = xdg.join("kubewasm/code.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", key.display());
    assert!(xdg.join("kubewasm/code").is_dir());

    // `test` loads through the same cache.
    let cases = home.path().join("cases.yaml");
    std::fs::write(
        &cases,
        "name: a\nevent: {type: added, object: {apiVersion: mongodb.com/v1, kind: MongoDB, \
         metadata: {name: a, namespace: b, uid: u}}}\nexpect: {intents: []}\n",
    )
    .unwrap();
    // A custom kind is served by its CRD (`--crds`), as on a cluster.
    let crds = root().join("examples/crds");
    let test = [
        std::ffi::OsStr::new("--log"),
        std::ffi::OsStr::new("kubewasm::cases=debug"),
        std::ffi::OsStr::new("test"),
        std::ffi::OsStr::new("--crds"),
        crds.as_os_str(),
        std::ffi::OsStr::new("--plugin"),
        wasm.as_os_str(),
        cases.as_os_str(),
    ];
    let how = run(&test);
    assert!(
        !how.is_empty() && how.iter().all(|h| h == "cache hit"),
        "{how:?}"
    );
}

/// One directory given to every command (`--cache-dir`), no key file: each command keys
/// it with the same per-user key, so what `inspect` compiled `approve` and `dev` load as
/// cache hits (a per-process key made each recompile, and `approve` say the entry "does
/// not verify under this host's key").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_cache_dir_is_keyed_per_user_so_no_command_recompiles() {
    let home = tempfile::tempdir().unwrap();
    let xdg = home.path().join("xdg");
    let cache = home.path().join("shared-cache");
    let plugins = home.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let wasm = plugins.join("mongodb-monitor.wasm");
    std::fs::copy(example_plugin("mongodb-monitor"), &wasm).unwrap();
    let command = |args: &[&std::ffi::OsStr]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
        cmd.env("HOME", home.path())
            .env("XDG_CACHE_HOME", &xdg)
            .env_remove("KUBEWASM_CACHE_DIR")
            .env_remove("KUBEWASM_CACHE_KEY_FILE")
            .args(["--log-format", "json", "--log", "info"])
            .args(args)
            .arg("--cache-dir")
            .arg(&cache);
        cmd
    };
    let hows = |stderr: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(stderr)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|l| l["how"].as_str().map(str::to_string))
            .collect()
    };
    let out = command(&["inspect".as_ref(), wasm.as_os_str()])
        .output()
        .unwrap();
    assert_eq!(hows(&out.stderr), ["compiled in a worker"]);
    let out = command(&["approve".as_ref(), wasm.as_os_str()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(hows(&out.stderr), ["cache hit"], "{err}");
    let approvals = home.path().join("approvals.yaml");
    std::fs::write(&approvals, &out.stdout).unwrap();

    let mut dev = command(&[
        "dev".as_ref(),
        "--plugins".as_ref(),
        plugins.as_os_str(),
        "--approvals".as_ref(),
        approvals.as_os_str(),
        "--metrics-addr".as_ref(),
        "off".as_ref(),
    ]);
    dev.stdout(Stdio::null()).stderr(Stdio::piped());
    let dev = HostProcess::spawn_command(dev);
    let loaded = dev
        .wait_log("the plugin loaded", |l| {
            field(l, "message") == "plugin loaded"
        })
        .await;
    assert_eq!(field(&loaded, "how"), "cache hit", "{loaded}");
    dev.stop();
}

/// A case naming a watch the plugin does not declare fails, naming the watches it has; a
/// case file that is not YAML is reported with its line and the run goes on.
#[test]
fn the_test_runner_refuses_unknown_watches_and_reports_malformed_files() {
    let wasm = example_plugin("mongodb-monitor");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a-unknown-watch.yaml"),
        "name: unknown watch
event:
  type: added
  watch: nope
  object: {apiVersion: mongodb.com/v1, kind: MongoDB, metadata: {name: a, namespace: b, uid: u}}
expect:
  intents: []
",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b-malformed.yaml"),
        "name: x: y
",
    )
    .unwrap();
    let crds = root().join("examples/crds");
    let (code, out, err) = kubewasm(&[
        "test",
        "--crds",
        crds.to_str().unwrap(),
        "--plugin",
        wasm.to_str().unwrap(),
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains(
            r#"watch "nope" is not in the manifest of mongodb-monitor (its watches: mongodbs (mongodb.com/v1/MongoDB))"#
        ),
        "{out}"
    );
    assert!(
        out.contains("b-malformed.yaml: not a test case: malformed YAML"),
        "{out}"
    );
    assert!(out.contains("line 1 column"), "{out}");
    assert!(out.trim_end().ends_with("0 passed, 2 failed"), "{out}");
}

#[test]
fn the_test_runner_passes_good_cases_and_fails_with_a_diff() {
    let wasm = example_plugin("mongodb-monitor");
    let cases = root().join("plugins/conformance/mongodb-monitor");
    let crds = root().join("examples/crds");
    let (code, out, err) = kubewasm(&[
        "test",
        "--crds",
        crds.to_str().unwrap(),
        "--plugin",
        wasm.to_str().unwrap(),
        cases.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.trim_end().ends_with("5 passed, 0 failed"), "{out}");

    // The same case with a wrong expectation must fail, showing where.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(cases.join("cases.yaml")).unwrap();
    let first = text.split("\n---").next().unwrap();
    // Change the expectation only, not the settings.
    let (input, expect) = first.split_once("expect:").unwrap();
    let first = format!(
        "{input}expect:{}",
        expect.replace("interval: 15s", "interval: 99s")
    );
    let case = dir.path().join("wrong.yaml");
    std::fs::write(&case, first).unwrap();
    let (code, out, _) = kubewasm(&[
        "test",
        "--crds",
        crds.to_str().unwrap(),
        "--plugin",
        wasm.to_str().unwrap(),
        case.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL"), "{out}");
    assert!(
        out.contains(
            r#"intents[0].create.object.spec.endpoints[0].interval: expected "99s", got "15s""#
        ),
        "{out}"
    );
    assert!(out.trim_end().ends_with("0 passed, 1 failed"), "{out}");
}

/// `dev`'s start-up banner ends with the plugins loaded and refused, with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_ends_its_banner_with_the_plugins_loaded_and_refused() {
    let dir = tempfile::tempdir().unwrap();
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
    // Not in the approvals: refused at load.
    std::fs::copy(
        example_plugin("seldon-endpoint"),
        plugins.join("seldon-endpoint.wasm"),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", "json", "dev", "--plugins"])
        .arg(&plugins)
        .arg("--approvals")
        .arg(&approvals)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = HostProcess::spawn_command(cmd);
    host.wait_log("the banner's end", |l| {
        field(l, "message") == "--- Ctrl-C to stop ---"
    })
    .await;
    let banner: Vec<String> = host
        .logs()
        .iter()
        .filter(|l| l["raw"] == true)
        .map(|l| field(l, "message").to_string())
        .collect();
    let text = banner.join("\n");
    let at = |line: &str| {
        banner
            .iter()
            .position(|l| l.starts_with(line))
            .unwrap_or_else(|| panic!("no {line:?} in {text}"))
    };
    assert!(at("API server: http") < at("plugins loaded: 1"), "{text}");
    assert!(
        banner[at("plugins loaded: 1") + 1].starts_with("  mongodb-monitor "),
        "{text}"
    );
    let refused = &banner[at("plugins refused: 1") + 1];
    assert!(
        refused.contains("seldon-endpoint.wasm: ")
            && refused.contains("asks for more than the operator approved")
            && refused.contains("nothing is approved for it"),
        "{text}"
    );
    host.stop();
}

/// The README's demo command: the built Rust plugins with their settings, approved by
/// `plugins/approvals.yaml`, on the examples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_serves_the_examples_with_the_example_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = example_plugin("mongodb-monitor")
        .parent()
        .unwrap()
        .to_path_buf();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", "json", "dev", "--plugins"])
        .arg(&plugins)
        .arg("--approvals")
        .arg(root().join("plugins/approvals.yaml"))
        .arg("--apply")
        .arg(root().join("examples"))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = HostProcess::spawn_command(cmd);
    let running = host
        .wait_log("host running", |l| {
            field(l, "message").starts_with("host running")
        })
        .await;
    for name in [
        "contentsite-provisioner",
        "mongodb-monitor",
        "seldon-endpoint",
    ] {
        assert!(
            running.to_string().contains(name),
            "{name} not loaded: {running}\n{}",
            host.dump()
        );
    }

    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig written");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api = |av: &str, kind: &str, plural: &str| {
        let (g, v) = av.split_once('/').unwrap_or(("", av));
        kube::Api::<kube::api::DynamicObject>::namespaced_with(
            client.clone(),
            "default",
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(g, v, kind),
                plural,
            ),
        )
    };
    // The sample ContentSite and MongoDB from examples/ are provisioned and monitored.
    let dbs = api("mongodb.com/v1", "MongoDB", "mongodb");
    let monitors = api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
    );
    let sites = api("sites.kubewasm.dev/v1alpha1", "ContentSite", "contentsites");
    let site_names: Vec<String> = sites
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    assert!(!site_names.is_empty(), "examples/ has a ContentSite");
    for site in &site_names {
        let db = format!("{site}-db");
        eventually(&format!("MongoDB {db}"), CONVERGE, || async {
            get(&dbs, &db).await
        })
        .await;
        let sm = format!("{db}-monitor");
        eventually(&format!("ServiceMonitor {sm}"), CONVERGE, || async {
            get(&monitors, &sm).await
        })
        .await;
    }
    // The live log names plugin, object and manager of each applied intent (logged once
    // the answer is read, which may be after the object is visible: waited on).
    host.wait_log("the provisioner's applied MongoDB in the log", |l| {
        field(l, "message").starts_with("applied")
            && field(l, "manager") == "kubewasm-contentsite-provisioner"
            && field(l, "message").contains("MongoDB default/")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(host.stop(), Some(0));
}

/// The example plugins in DIR/plugins, each approved for what it asks in DIR/approvals.
fn example_plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (plugins, approvals) = (dir.path().join("plugins"), dir.path().join("approvals"));
    std::fs::create_dir(&plugins).unwrap();
    std::fs::create_dir(&approvals).unwrap();
    for name in [
        "contentsite-provisioner",
        "mongodb-monitor",
        "seldon-endpoint",
    ] {
        install_approved(&example_plugin(name), &plugins, &approvals, name, None);
    }
    dir
}

fn rbac_docs(yaml: &str) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| serde_json::Value::deserialize(d).expect("YAML document"))
        .filter(|d| !d.is_null())
        .collect()
}

/// (group, resource) of every rule of every role.
fn rbac_resources(docs: &[serde_json::Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in docs {
        for rule in d["rules"].as_array().into_iter().flatten() {
            for g in rule["apiGroups"].as_array().into_iter().flatten() {
                for r in rule["resources"].as_array().into_iter().flatten() {
                    out.push((g.as_str().unwrap().into(), r.as_str().unwrap().into()));
                }
            }
        }
    }
    out
}

/// With a cluster, `kubewasm rbac` uses the plurals the cluster serves: MongoDB's CRD says
/// `mongodb`, which no guess gives; nothing is marked guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_resolves_kinds_through_discovery() {
    let env = Env::new().await;
    let plugins = example_plugin_dir();
    let (code, out, err) = kubewasm(&[
        "rbac",
        "--plugins",
        plugins.path().join("plugins").to_str().unwrap(),
        "--approvals",
        plugins.path().join("approvals").to_str().unwrap(),
        "--kubeconfig",
        env.kubeconfig.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let docs = rbac_docs(&out);
    let resources = rbac_resources(&docs);
    for want in ["mongodb", "mongodb/finalizers"] {
        assert!(
            resources.contains(&("mongodb.com".into(), want.into())),
            "{want} missing: {resources:?}"
        );
    }
    assert!(
        !resources.iter().any(|(_, r)| r.starts_with("mongodbs")),
        "a guessed plural: {resources:?}"
    );
    assert!(
        docs.iter()
            .all(|d| d["metadata"]["annotations"]["kubewasm.dev/guessed"].is_null()),
        "{out}"
    );
    assert!(!err.contains("guessed"), "{err}");
}

/// A kind the cluster does not serve is an error naming the plugin and the kind, unless
/// --allow-guess, which marks exactly the guessed kinds. Offline, the command says it guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_refuses_unserved_kinds_unless_allowed_to_guess() {
    let env = Env::with_crds(false).await;
    let plugins = example_plugin_dir();
    let dir = plugins.path().join("plugins");
    let dir = dir.to_str().unwrap();
    let approvals = plugins.path().join("approvals");
    let approvals = approvals.to_str().unwrap();
    let kubeconfig = env.kubeconfig.to_str().unwrap();
    let (code, out, err) = kubewasm(&[
        "rbac",
        "--plugins",
        dir,
        "--approvals",
        approvals,
        "--kubeconfig",
        kubeconfig,
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.is_empty(), "printed RBAC anyway: {out}");
    assert!(
        err.contains("plugin mongodb-monitor: mongodb.com/v1/MongoDB"),
        "{err}"
    );
    assert!(err.contains("--allow-guess"), "{err}");

    let (code, out, err) = kubewasm(&[
        "rbac",
        "--plugins",
        dir,
        "--approvals",
        approvals,
        "--kubeconfig",
        kubeconfig,
        "--allow-guess",
    ]);
    assert_eq!(code, 0, "{err}");
    let docs = rbac_docs(&out);
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let guessed = role["metadata"]["annotations"]["kubewasm.dev/guessed"]
        .as_str()
        .unwrap_or_default();
    assert!(guessed.contains("MongoDB"), "{guessed}");
    assert!(
        !guessed.contains("Service,") && !guessed.ends_with("/Service"),
        "Service is served and must not be marked guessed: {guessed}"
    );

    let (code, _, err) = kubewasm(&["rbac", "--plugins", dir, "--approvals", approvals]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("guessed"), "{err}");
}

/// The test-case format is at hand: at the end of `kubewasm test --help`, and as
/// `tests/README.md` in every project `kubewasm new` makes, beside its cases.
#[test]
fn the_case_format_is_in_the_help_and_in_every_new_project() {
    let (code, help, err) = kubewasm(&["test", "--help"]);
    assert_eq!(code, 0, "{err}");
    for word in [
        "event:",
        "watch:",
        "oldObject:",
        "expect:",
        "intents:",
        "ownedByTrigger",
        "match: exact",
        "subset",
        "cluster:",
        "settings:",
        "approval:",
        "error:",
        "<<: *cm",
        "after:",
        "managedFields",
        "--crds",
    ] {
        assert!(help.contains(word), "{word} is not in the help: {help}");
    }
    let tmp = tempfile::tempdir().unwrap();
    for lang in ["go", "rust", "python", "js", "c"] {
        let project = tmp.path().join(lang);
        let (code, _, err) = kubewasm(&["new", lang, "x", project.to_str().unwrap()]);
        assert_eq!(code, 0, "{lang}: {err}");
        let reference = std::fs::read_to_string(project.join("tests/README.md"))
            .unwrap_or_else(|e| panic!("{lang}: no tests/README.md: {e}"));
        assert!(
            help.contains(reference.trim()),
            "{lang}: the project's reference is the help's"
        );
        let cases = std::fs::read_to_string(project.join("tests/cases.yaml")).unwrap();
        assert!(cases.contains("tests/README.md"), "{lang}: {cases}");
    }
}

/// A plugin that traps while loading is reported with what it wrote to stderr (here a Rust
/// panic message; a Go panic in `init` alike), escaped, not as a bare `unreachable`.
#[test]
fn a_trap_at_load_carries_the_plugins_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = test_plugin("hostile");
    let case = format!(
        "name: describe traps\nplugin: {}\nsettings: {{describe: trap}}\nevent:\n  type: added\n  \
         object: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: a, namespace: default}}}}\n\
         expect:\n  intents: []\n",
        wasm.display()
    );
    std::fs::write(dir.path().join("case.yaml"), case).unwrap();
    let (code, out, err) = kubewasm(&["test", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("the plugin's stderr: \"")
            && all.contains("hostile describe was asked to trap"),
        "{all}"
    );
}

/// A failed command prints its error and causes, never a Rust backtrace, even with
/// RUST_BACKTRACE set: the failure is the author's to fix, not a bug.
#[test]
fn a_failed_build_prints_no_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["build", dir.path().to_str().unwrap()])
        .env("RUST_BACKTRACE", "full")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("run kubewasm build");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("Error: ") && err.contains("is not a plugin project"),
        "{err}"
    );
    assert!(!err.to_lowercase().contains("backtrace"), "{err}");
}
