//! `kubewasm new` → the project's own command (`./build.sh`: `kubewasm build && kubewasm
//! test --approvals approvals tests/`) → `kubewasm dev` on what it built, under the
//! approval the project ships, for every language, in a temporary
//! folder outside the repository: the scaffold builds with nothing but `kubewasm` on PATH,
//! its two test cases pass against the real component, and loaded by the host it copies the
//! sample ConfigMap, as cluster state on the embedded API server shows.
//!
//! The toolchains are the ones `plugins/build.sh` installed under target/tools (tests/run.sh
//! runs it first): `KUBEWASM_TOOLS_DIR` points there, so nothing is reinstalled.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use support::*;

/// The toolchain directory plugins/build.sh fills; `what` must be in it for `lang`.
fn tools(lang: &str, what: &[&str]) -> PathBuf {
    let dir = root().join("target/tools");
    for w in what {
        assert!(
            dir.join(w).exists(),
            "{} is missing: run plugins/build.sh first (tests/run.sh does), so the {lang} \
             toolchain is installed",
            dir.join(w).display()
        );
    }
    dir
}

fn field<'a>(line: &'a Value, key: &str) -> &'a str {
    line.get(key)
        .or_else(|| line.pointer(&format!("/fields/{key}")))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// PATH with the binary under test first, as `kubewasm`.
fn path_with_kubewasm() -> std::ffi::OsString {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kubewasm"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH")
}

/// `kubewasm new LANG NAME DIR`, then the project's own build-and-test command.
fn new_and_build(lang: &str, name: &str, tools: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join(name);
    assert!(
        !project.starts_with(root().canonicalize().expect("root")),
        "the project must be outside the repository"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["new", lang, name])
        .arg(&project)
        .output()
        .expect("run kubewasm new");
    assert!(
        out.status.success(),
        "kubewasm new {lang}: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The project's one command, with the binary under test as `kubewasm` on PATH.
    let out = Command::new("sh")
        .arg("build.sh")
        .current_dir(&project)
        .env("PATH", path_with_kubewasm())
        .env("KUBEWASM_TOOLS_DIR", tools)
        .env("KUBEWASM_LOG", "warn")
        .output()
        .expect("run build.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{lang}: build.sh failed\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.trim_end().ends_with("2 passed, 0 failed"),
        "{lang}: the project's test cases:\n{stdout}"
    );
    // `kubewasm build` prints one timed line per step, and builds no code generator.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let steps: &[&str] = match lang {
        "go" => &["toolchain", "bindings", "go build", "component"],
        "c" => &["toolchain", "bindings", "clang", "component"],
        "rust" => &["toolchain", "cargo build"],
        "python" => &["toolchain", "componentize-py"],
        _ => &["toolchain", "componentize-js"],
    };
    for step in steps {
        assert!(
            stderr.lines().any(|l| l
                .strip_prefix("  ")
                .and_then(|l| l.strip_prefix(step))
                .is_some_and(|rest| rest.starts_with(' ') && rest.ends_with(" s"))),
            "{lang}: no timed line for the step {step:?}:\n{stderr}"
        );
    }
    assert!(
        !stdout.contains("cargo install") && !stderr.contains("cargo install"),
        "{lang}: {stdout}\n{stderr}"
    );
    assert!(project.join(format!("dist/{name}.wasm")).is_file());
    assert!(project.join(format!("dist/{name}.yaml")).is_file());
    (tmp, project)
}

/// `kubewasm dev --plugins dist --approvals approvals --apply examples` (the README's):
/// the sample ConfigMap gets its copy, annotated and owned by it, written by the plugin's
/// field manager.
async fn dev_applies_the_copy(project: &Path, name: &str) {
    let kubeconfig = project.join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.args(["--log-format", "json", "dev", "--plugins"])
        .arg(project.join("dist"))
        .arg("--approvals")
        .arg(project.join("approvals"))
        .arg("--apply")
        .arg(project.join("examples"))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = HostProcess::spawn_command(cmd);
    // Big components (Python, JavaScript) take a while to compile in a debug host.
    host.wait_log_for("host running", std::time::Duration::from_secs(300), |l| {
        field(l, "message").starts_with("host running")
    })
    .await;

    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig written");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let cms = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client,
        "shop",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"),
            "configmaps",
        ),
    );
    let copy = eventually(
        "ConfigMap shop/app-config-copy",
        std::time::Duration::from_secs(120),
        || async { get(&cms, "app-config-copy").await },
    )
    .await;
    let original = get(&cms, "app-config").await.expect("the sample ConfigMap");
    let copy = serde_json::to_value(&copy).expect("json");
    assert_eq!(
        copy["metadata"]["annotations"]["kubewasm.dev/copied-from"], "shop/app-config",
        "{copy:#}"
    );
    assert_eq!(copy["data"]["color"], "blue", "{copy:#}");
    let owner = &copy["metadata"]["ownerReferences"][0];
    assert_eq!(
        owner["uid"].as_str(),
        original.metadata.uid.as_deref(),
        "{copy:#}"
    );
    assert_eq!(owner["controller"], true, "{copy:#}");
    let managers: Vec<&str> = copy["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        managers.contains(&format!("kubewasm-{name}").as_str()),
        "field managers {managers:?}\n{}",
        host.dump()
    );
    host.stop();
}

async fn round_trip(lang: &str, needs: &[&str]) {
    let tools = tools(lang, needs);
    let name = format!("demo-{lang}");
    let (_tmp, project) = new_and_build(lang, &name, &tools);
    dev_applies_the_copy(&project, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_project() {
    round_trip("rust", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_project() {
    round_trip("go", &["go-venv"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_project() {
    round_trip("python", &["python-venv"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_project() {
    round_trip("js", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_project() {
    round_trip("c", &[]).await;
}

/// Runs PROGRAM ARGS in a generated project as its author would (the binary under test as
/// `kubewasm`), and returns its output; fails the test when it fails.
fn in_project(project: &Path, tools: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(project)
        .env("PATH", path_with_kubewasm())
        .env("KUBEWASM_TOOLS_DIR", tools)
        .env("KUBEWASM_LOG", "warn")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{program} {args:?} failed\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `kubewasm build` from scratch (dist/ removed, so an up-to-date check cannot skip it).
fn rebuild_js(project: &Path, tools: &Path, name: &str, after: &str) {
    let dist = project.join("dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist).expect("remove dist");
    }
    in_project(project, tools, "kubewasm", &["build"]);
    assert!(
        project.join(format!("dist/{name}.wasm")).is_file(),
        "no component after {after}"
    );
}

/// The frictions a new JavaScript author hit (issue 23): ordinary npm commands in a
/// generated project leave `kubewasm build` working (the toolchain's undeclared
/// preview2-shim is pinned), its node unit test runs with `npm test` against the layer's fake
/// host, and `tsc --noEmit -p .` typechecks it through its jsconfig.json.
#[test]
fn js_project_survives_npm_and_runs_its_node_tests() {
    let tools = tools("js", &[]);
    let name = "demo-js-npm";
    let (_tmp, project) = new_and_build("js", name, &tools);

    // An unrelated package: npm prunes what package.json does not name.
    in_project(
        &project,
        &tools,
        "npm",
        &[
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "is-number@7.0.0",
        ],
    );
    assert!(
        project
            .join("node_modules/@bytecodealliance/preview2-shim")
            .is_dir(),
        "npm install removed preview2-shim"
    );
    rebuild_js(&project, &tools, name, "npm install --no-save is-number");
    in_project(&project, &tools, "npm", &["ci", "--no-audit", "--no-fund"]);
    rebuild_js(&project, &tools, name, "npm ci");

    let tests = in_project(&project, &tools, "npm", &["test"]);
    assert!(
        tests.contains("# pass 4") && tests.contains("# fail 0"),
        "npm test:\n{tests}"
    );
    in_project(&project, &tools, "npx", &["tsc", "--noEmit", "-p", "."]);
}

/// A generated JavaScript project pins every devDependency of plugins/js at the same
/// version (componentize-js and the preview2-shim its packaging leaves out).
#[test]
fn js_project_pins_the_repositorys_npm_toolchain() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("pins");
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["new", "js", "pins"])
        .arg(&project)
        .output()
        .expect("run kubewasm new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(p).expect("read package.json")).expect("JSON")
    };
    let ours = read(&root().join("plugins/js/package.json"));
    let generated = read(&project.join("package.json"));
    let ours = ours["devDependencies"]
        .as_object()
        .expect("devDependencies");
    assert!(ours.contains_key("@bytecodealliance/preview2-shim"));
    for (dep, version) in ours {
        assert_eq!(
            generated["devDependencies"].get(dep),
            Some(version),
            "{dep}: the generated package.json pins another version (or none)"
        );
    }
    for file in ["jsconfig.json", "tsconfig.json", "index.test.js"] {
        assert!(project.join(file).is_file(), "no {file}");
    }
}

/// `kubewasm new` refuses a bad name and a non-empty folder, and writes nothing then.
#[test]
fn new_refuses_bad_names_and_non_empty_folders() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(args)
            .current_dir(tmp.path())
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run kubewasm new")
    };
    let out = run(&["new", "go", "Not_A_Name"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a valid plugin name"), "{err}");
    assert!(!tmp.path().join("Not_A_Name").exists());

    std::fs::create_dir(tmp.path().join("taken")).expect("mkdir");
    std::fs::write(tmp.path().join("taken/keep.txt"), "mine").expect("write");
    let out = run(&["new", "python", "demo", "taken"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exists and is not empty"), "{err}");
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("taken"))
        .expect("read")
        .collect();
    assert_eq!(left.len(), 1, "nothing was written beside keep.txt");
}
