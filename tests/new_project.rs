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

/// The Go that plugins/build.sh installed under target/tools (tests/run.sh runs it first).
fn go_binary(tools: &Path) -> PathBuf {
    let lib = tools.join("go-venv/lib");
    std::fs::read_dir(&lib)
        .unwrap_or_else(|e| panic!("{}: {e}: run plugins/build.sh first", lib.display()))
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages/go/bin/go"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no go under {}", lib.display()))
}

/// A Go module proxy in a folder (served as `GOPROXY=file://DIR`): one module, `path` at
/// `version`, with `files` (name, contents) besides its go.mod. The zip is made with
/// Python's zipfile (python3 is what installs Go here).
fn file_proxy(dir: &Path, path: &str, version: &str, files: &[(&str, &str)]) {
    let at = dir.join(path).join("@v");
    std::fs::create_dir_all(&at).unwrap();
    let go_mod = format!("module {path}\n\ngo 1.27\n");
    std::fs::write(at.join("list"), format!("{version}\n")).unwrap();
    std::fs::write(
        at.join(format!("{version}.info")),
        format!(r#"{{"Version":"{version}","Time":"2026-01-01T00:00:00Z"}}"#),
    )
    .unwrap();
    std::fs::write(at.join(format!("{version}.mod")), &go_mod).unwrap();
    let mut entries = vec![("go.mod".to_string(), go_mod)];
    entries.extend(files.iter().map(|(n, t)| (n.to_string(), t.to_string())));
    let spec = serde_json::to_string(&entries).unwrap();
    let status = Command::new("python3")
        .args([
            "-c",
            "import json, sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
             \x20   for name, text in json.loads(sys.argv[3]):\n\
             \x20       z.writestr(sys.argv[2] + '/' + name, text)\n",
        ])
        .arg(at.join(format!("{version}.zip")))
        .arg(format!("{path}@{version}"))
        .arg(spec)
        .status()
        .expect("python3");
    assert!(status.success(), "zipping the module");
}

/// Runs PROGRAM ARGS in a project with the author's environment `env` (an empty value
/// unsets the variable); returns (success, stdout, stderr).
fn go_author(
    project: &Path,
    env: &[(&str, String)],
    program: &str,
    args: &[&str],
) -> (bool, String, String) {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(project)
        .env("KUBEWASM_LOG", "warn");
    for (k, v) in env {
        // Empty: unset (the caller's value must not leak in).
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A plugin over a module of the test's own and the typed helpers: a copy of the
/// ConfigMap, typed, its server-set fields carried over and stripped by `typed.Create`.
const GREETING_PLUGIN: &str = r#"package main

import (
	"example.com/greeting"
	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/typed"
)

const Name = "NAME"

type Settings struct {
	Suffix string `json:"suffix"`
}

func (s *Settings) Default() { s.Suffix = "copy" }

// ConfigMap is shaped as k8s.io/api/core/v1's: TypeMeta inline, a creationTimestamp that
// encodes as null, server-set fields.
type ConfigMap struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Metadata   struct {
		Name              string            `json:"name,omitempty"`
		Namespace         string            `json:"namespace,omitempty"`
		UID               string            `json:"uid,omitempty"`
		ResourceVersion   string            `json:"resourceVersion,omitempty"`
		CreationTimestamp *string           `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels,omitempty"`
		Annotations       map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Data map[string]string `json:"data,omitempty"`
}

type Copier struct{}

func init() {
	typed.Register(&ConfigMap{}, "v1", "ConfigMap")
	kubewasm.Export(Copier{})
}

func main() {}

func (Copier) Describe(s Settings) (kubewasm.Manifest, error) {
	return kubewasm.NewManifest(Name, "0.1.0").
		Watch(kubewasm.WatchKind("configmaps", "v1", "ConfigMap").WithLabelSelector("kubewasm.dev/copy=true")).
		Grant(kubewasm.GrantOn("", "ConfigMap").Create()), nil
}

func (Copier) Handle(ev kubewasm.Event, s Settings) ([]kubewasm.Intent, error) {
	if ev.IsDeleted() {
		return nil, nil
	}
	var cm ConfigMap
	if err := ev.Object(&cm); err != nil {
		return nil, err
	}
	out := cm
	out.Metadata.Name = cm.Metadata.Name + "-" + s.Suffix
	out.Metadata.Labels = nil
	out.Metadata.Annotations = map[string]string{
		"kubewasm.dev/copied-from": cm.Metadata.Namespace + "/" + cm.Metadata.Name,
		"kubewasm.dev/greeting":    greeting.Hello(),
	}
	in, err := typed.Create(&out)
	if err != nil {
		return nil, err
	}
	return []kubewasm.Intent{in.OwnedByTrigger()}, nil
}
"#;

const GREETING_TEST: &str = r#"package main

import (
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

func TestGreetsAndStrips(t *testing.T) {
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "a", "namespace": "web", "uid": "u", "resourceVersion": "9"}, "data": map[string]any{"k": "v"}}
	out, err := kubewasm.CallHandle(Copier{}, kwtest.Added("configmaps", cm), "")
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, out, `[{"create": {"force": false, "ownedByTrigger": true, "object": {
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a-copy", "namespace": "web",
		"annotations": {"kubewasm.dev/copied-from": "web/a", "kubewasm.dev/greeting": "hello from example.com/greeting"}},
		"data": {"k": "v"}}}}]`)
}
"#;

/// A generated Go project is a Go module like any other: a module of our own, served by a
/// `file://` module proxy, is added with `go mod tidy` (the layer, the typed helpers and the
/// bindings resolve from deps/ through go.mod's replace directives), `go vet` and `go test`
/// pass natively, and `kubewasm build` downloads it through the author's GOPROXY into the
/// author's (empty) module cache; the typed helpers strip the server-set fields in the
/// real component (`kubewasm test`). The build pre-fills the code cache, and a second
/// build with nothing changed builds nothing.
#[test]
fn go_project_uses_the_authors_modules_and_the_typed_helpers() {
    let tools = tools("go", &["go-venv"]);
    let go = go_binary(&tools);
    let tmp = tempfile::tempdir().expect("tempdir");
    let proxy = tmp.path().join("proxy");
    file_proxy(
        &proxy,
        "example.com/greeting",
        "v1.0.0",
        &[(
            "greeting.go",
            "// Package greeting is a module served by the test's own proxy.\npackage greeting\n\n\
             // Hello says where it comes from.\nfunc Hello() string { return \"hello from example.com/greeting\" }\n",
        )],
    );
    let name = "demo-modules";
    let project = tmp.path().join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["new", "go", name])
        .arg(&project)
        .output()
        .expect("kubewasm new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(
        project.join("main.go"),
        GREETING_PLUGIN.replace("NAME", name),
    )
    .unwrap();
    std::fs::write(project.join("main_test.go"), GREETING_TEST).unwrap();
    let cases = std::fs::read_to_string(project.join("tests/cases.yaml")).unwrap();
    let copied = "              kubewasm.dev/copied-from: shop/app-config\n";
    assert!(cases.contains(copied), "{cases}");
    std::fs::write(
        project.join("tests/cases.yaml"),
        cases.replace(
            copied,
            &format!(
                "{copied}              kubewasm.dev/greeting: hello from example.com/greeting\n"
            ),
        ),
    )
    .unwrap();

    // The author's Go environment: their proxy, no checksum database for their module,
    // their module cache; the pinned Go and the binary under test on PATH; a per-user code
    // cache of their own.
    let go_dir = go.parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(go_dir).chain(std::env::split_paths(&path_with_kubewasm())),
    )
    .unwrap()
    .into_string()
    .unwrap();
    let xdg = tmp.path().join("xdg-cache");
    let mut env: Vec<(&str, String)> = vec![
        ("PATH", path),
        ("GOPROXY", format!("file://{}", proxy.display())),
        ("GONOSUMDB", "example.com".into()),
        ("GOFLAGS", "-mod=mod".into()),
        ("GOTOOLCHAIN", "local".into()),
        ("GOENV", "off".into()),
        ("GOPATH", tmp.path().join("gopath").display().to_string()),
        (
            "GOMODCACHE",
            tmp.path().join("modcache-tidy").display().to_string(),
        ),
        ("GOCACHE", tools.join("go-cache").display().to_string()),
        ("KUBEWASM_TOOLS_DIR", tools.display().to_string()),
        ("XDG_CACHE_HOME", xdg.display().to_string()),
        ("KUBEWASM_CACHE_DIR", String::new()),
        ("KUBEWASM_CACHE_KEY_FILE", String::new()),
        ("RUST_BACKTRACE", "0".into()),
    ];
    let run = |env: &[(&str, String)], program: &str, args: &[&str]| {
        let (ok, stdout, stderr) = go_author(&project, env, program, args);
        assert!(
            ok,
            "{program} {args:?} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
        (stdout, stderr)
    };
    run(&env, "go", &["mod", "tidy"]);
    let go_mod = std::fs::read_to_string(project.join("go.mod")).unwrap();
    assert!(go_mod.contains("example.com/greeting v1.0.0"), "{go_mod}");
    assert!(go_mod.contains("kubewasm.dev/kubewasm/typed"), "{go_mod}");
    run(&env, "go", &["vet", "./..."]);
    let (tests, _) = run(&env, "go", &["test", "./..."]);
    assert!(tests.starts_with("ok"), "{tests}");

    // The build downloads the module again, into another empty module cache: only the
    // author's GOPROXY has it.
    let build_cache = tmp.path().join("modcache-build");
    env.retain(|(k, _)| *k != "GOMODCACHE");
    env.push(("GOMODCACHE", build_cache.display().to_string()));
    let (_, stderr) = run(&env, "kubewasm", &["build"]);
    assert!(
        build_cache.join("example.com/greeting@v1.0.0").is_dir(),
        "{stderr}"
    );
    assert!(stderr.contains("  go build"), "{stderr}");
    assert!(stderr.contains("  code cache"), "{stderr}");
    let code = xdg.join("kubewasm/code");
    assert!(
        std::fs::read_dir(&code).map(|d| d.count()).unwrap_or(0) > 0,
        "the build left nothing in {}:\n{stderr}",
        code.display()
    );
    let (report, _) = run(
        &env,
        "kubewasm",
        &["test", "--approvals", "approvals", "tests/"],
    );
    assert!(
        report.trim_end().ends_with("2 passed, 0 failed"),
        "{report}"
    );

    // Nothing changed: nothing is built. A changed source builds again.
    let (_, stderr) = run(&env, "kubewasm", &["build"]);
    assert!(stderr.contains("is up to date"), "{stderr}");
    assert!(!stderr.contains("  go build"), "{stderr}");
    let main = project.join("main.go");
    let text = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, format!("{text}\n// changed\n")).unwrap();
    let (_, stderr) = run(&env, "kubewasm", &["build"]);
    assert!(stderr.contains("  go build"), "{stderr}");
    let (_, stderr) = run(&env, "kubewasm", &["build", "--force"]);
    assert!(stderr.contains("  go build"), "{stderr}");
}

/// A Go plugin that panics in `init` (as k8s.io/klog did on an empty argv) fails to load
/// with its panic message, and sees its name as argv[0].
#[test]
fn a_go_plugin_panicking_in_init_shows_its_panic_and_argv0() {
    let tools = tools("go", &["go-venv"]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let name = "demo-panic";
    let project = tmp.path().join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["new", "go", name])
        .arg(&project)
        .output()
        .expect("kubewasm new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // After main.go's init (files initialise in name order): the plugin is exported, then this panics.
    std::fs::write(
        project.join("panic.go"),
        "package main\n\nimport \"os\"\n\nfunc init() { panic(\"boom in init, argv[0]=\" + os.Args[0]) }\n",
    )
    .unwrap();
    let go_cache = tools.join("go-cache").display().to_string();
    let env = [
        ("KUBEWASM_TOOLS_DIR", tools.display().to_string()),
        ("GOCACHE", go_cache),
        ("GOPROXY", "off".to_string()),
        ("RUST_BACKTRACE", "0".to_string()),
    ];
    let (ok, _, stderr) = go_author(&project, &env, env!("CARGO_BIN_EXE_kubewasm"), &["build"]);
    assert!(ok, "{stderr}");
    let wasm = project.join(format!("dist/{name}.wasm"));
    let (ok, stdout, stderr) = go_author(
        &project,
        &env,
        env!("CARGO_BIN_EXE_kubewasm"),
        &["inspect", wasm.to_str().unwrap()],
    );
    // inspect prints the load error in its report (stdout) and exits 1.
    assert!(!ok, "{stdout}");
    // The report is YAML: read its `error` as a string, whatever quoting YAML chose.
    let report: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the plugin's stderr: \"panic: boom in init, argv[0]=demo-panic"),
        "{stdout}{stderr}"
    );
}

/// The typed plugin of the opt-in `k8s.io/api` run: an Ingress decoded into
/// `networkingv1.Ingress`, its hosts written into a typed `corev1.ConfigMap` owned by it
/// (through the typed helpers: TypeMeta from the Go type, `creationTimestamp: null` and
/// status stripped, a controller reference to the typed Ingress).
const INGRESS_PLUGIN: &str = r#"package main

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/typed"
)

type Settings struct{}

type Hosts struct{}

func init() { kubewasm.Export(Hosts{}) }

func main() {}

func (Hosts) Describe(Settings) (kubewasm.Manifest, error) {
	return kubewasm.NewManifest("NAME", "0.1.0").
		Watch(kubewasm.WatchKind("ingresses", "networking.k8s.io/v1", "Ingress")).
		Grant(kubewasm.GrantOn("", "ConfigMap").Create()), nil
}

func (Hosts) Handle(ev kubewasm.Event, _ Settings) ([]kubewasm.Intent, error) {
	if ev.IsDeleted() {
		return nil, nil
	}
	var ing networkingv1.Ingress
	if err := ev.Object(&ing); err != nil {
		return nil, err
	}
	var hosts []string
	for _, r := range ing.Spec.Rules {
		hosts = append(hosts, r.Host)
	}
	sort.Strings(hosts)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ing.Name + "-hosts", Namespace: ing.Namespace},
		Data:       map[string]string{"hosts": strings.Join(hosts, ",")},
	}
	in, err := typed.Create(cm, typed.ControlledBy(&ing))
	if err != nil {
		return nil, err
	}
	return []kubewasm.Intent{in}, nil
}
"#;

const INGRESS: &str = r#"{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
  "metadata": {"name": "web", "namespace": "shop", "uid": "5b2c0d1e-0000-4000-8000-000000000002",
    "resourceVersion": "7", "creationTimestamp": "2026-01-02T03:04:05Z"},
  "spec": {"rules": [{"host": "b.example.com"}, {"host": "a.example.com"}]}}"#;

const INGRESS_CASE: &str = r#"name: an Ingress gets a ConfigMap of its hosts, owned by it
plugin: ../dist/NAME.wasm
event:
  type: added
  object: INGRESS
expect:
  intents:
    - create:
        object:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: web-hosts
            namespace: shop
            ownerReferences:
              - apiVersion: networking.k8s.io/v1
                kind: Ingress
                name: web
                uid: 5b2c0d1e-0000-4000-8000-000000000002
                controller: true
                blockOwnerDeletion: true
          data:
            hosts: a.example.com,b.example.com
"#;

/// Seconds of one timed step in `kubewasm build`'s output ("  go build   12.3 s").
fn step_seconds(stderr: &str, step: &str) -> f64 {
    stderr
        .lines()
        .find_map(|l| {
            // "  code cache         1.6 s (cache hit)"
            let rest = l.strip_prefix("  ")?.strip_prefix(step)?;
            let mut words = rest.split_whitespace();
            let seconds = words.next()?.parse().ok()?;
            (words.next() == Some("s")).then_some(seconds)
        })
        .unwrap_or_else(|| panic!("no {step:?} step in:\n{stderr}"))
}

/// Mean time of `n` calls of `handle` with `event`, on fresh instances (each call
/// instantiates) or on a reused one (after one warm-up call).
async fn mean_call(
    wasm: &Path,
    event: &str,
    watch: &str,
    reuse: bool,
    n: u32,
) -> std::time::Duration {
    use kubewasm::core::event::EventType;
    use kubewasm::runtime::{LoadOptions, NoCluster, PluginEngine, PluginEvent, load_plugin};
    let engine = PluginEngine::new().unwrap();
    let options = LoadOptions {
        reuse_instances: reuse,
        ..LoadOptions::default()
    };
    let plugin = load_plugin(&engine, wasm, &options)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
    let event = PluginEvent {
        event_type: EventType::Added,
        watch_id: watch.into(),
        object: event.into(),
        old_object: None,
    };
    let call = || async {
        plugin
            .handle(&event, "the object", std::sync::Arc::new(NoCluster))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", wasm.display()))
    };
    if reuse {
        call().await;
    }
    let started = std::time::Instant::now();
    for _ in 0..n {
        assert_eq!(call().await.len(), 1);
    }
    started.elapsed() / n
}

/// Opt-in: the real `k8s.io/api` and `k8s.io/apimachinery` (v1.36 here), from a Kubernetes
/// source tree (KUBEWASM_K8S_SRC: a `file://` proxy is built from its staging/ and vendor/
/// with tests/tools/go-file-proxy.py) or a module proxy (KUBEWASM_K8S_PROXY, e.g.
/// `file://$(go env GOMODCACHE)/cache/download`). A Go plugin decodes a typed
/// `networkingv1.Ingress` and writes a typed ConfigMap through the typed helpers; `go mod
/// tidy`, `go vet`, `kubewasm build` and `kubewasm test` pass; the figures (size, compile
/// time, instantiate + call, reused call) are printed beside the untyped scaffold's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: set KUBEWASM_K8S_SRC (a Kubernetes source tree) or KUBEWASM_K8S_PROXY (a GOPROXY with k8s.io/api)"]
async fn go_plugin_with_the_real_k8s_api_types() {
    let tools = tools("go", &["go-venv"]);
    let go = go_binary(&tools);
    let tmp = tempfile::tempdir().expect("tempdir");
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let proxy = match (var("KUBEWASM_K8S_PROXY"), var("KUBEWASM_K8S_SRC")) {
        (Some(url), _) => url,
        (None, Some(src)) => {
            let dir = tmp.path().join("proxy");
            let started = std::time::Instant::now();
            let status = Command::new("python3")
                .arg(root().join("tests/tools/go-file-proxy.py"))
                .arg(&src)
                .arg(&dir)
                .status()
                .expect("python3");
            assert!(status.success(), "building the proxy from {src}");
            eprintln!("proxy from {src}: {:.1} s", started.elapsed().as_secs_f64());
            format!("file://{}", dir.display())
        }
        _ => panic!("set KUBEWASM_K8S_SRC or KUBEWASM_K8S_PROXY"),
    };
    let go_dir = go.parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(go_dir).chain(std::env::split_paths(&path_with_kubewasm())),
    )
    .unwrap()
    .into_string()
    .unwrap();
    let env: Vec<(&str, String)> = vec![
        ("PATH", path),
        ("GOPROXY", proxy),
        ("GOFLAGS", "-mod=mod".into()),
        ("GOSUMDB", "off".into()),
        ("GOTOOLCHAIN", "local".into()),
        ("GOENV", "off".into()),
        ("GOPATH", tmp.path().join("gopath").display().to_string()),
        ("KUBEWASM_TOOLS_DIR", tools.display().to_string()),
        (
            "XDG_CACHE_HOME",
            tmp.path().join("xdg").display().to_string(),
        ),
        ("KUBEWASM_CACHE_DIR", String::new()),
        ("KUBEWASM_CACHE_KEY_FILE", String::new()),
        ("RUST_BACKTRACE", "0".into()),
    ];
    let mut figures = Vec::new();
    for (name, typed) in [("demo-untyped", false), ("demo-typed", true)] {
        let project = tmp.path().join(name);
        let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(["new", "go", name])
            .arg(&project)
            .output()
            .expect("kubewasm new");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if typed {
            std::fs::write(
                project.join("main.go"),
                INGRESS_PLUGIN.replace("NAME", name),
            )
            .unwrap();
            std::fs::remove_file(project.join("main_test.go")).unwrap();
            // It takes no settings (the scaffold's file has the copier's `suffix`).
            std::fs::write(project.join(format!("{name}.yaml")), "{}\n").unwrap();
            let object =
                serde_json::to_string(&serde_json::from_str::<Value>(INGRESS).unwrap()).unwrap();
            std::fs::write(
                project.join("tests/cases.yaml"),
                INGRESS_CASE
                    .replace("NAME", name)
                    .replace("INGRESS", &object),
            )
            .unwrap();
        }
        // A Go build cache of its own: the first build's figure is a cold compile (the
        // standard library for wasip1 included), the forced second one a warm one.
        let mut env = env.clone();
        env.push((
            "GOCACHE",
            tmp.path()
                .join(format!("gocache-{name}"))
                .display()
                .to_string(),
        ));
        let run = |program: &str, args: &[&str]| {
            let (ok, stdout, stderr) = go_author(&project, &env, program, args);
            assert!(
                ok,
                "{name}: {program} {args:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
            );
            (stdout, stderr)
        };
        let started = std::time::Instant::now();
        run("go", &["mod", "tidy"]);
        let tidy = started.elapsed().as_secs_f64();
        run("go", &["vet", "./..."]);
        let (_, stderr) = run("kubewasm", &["build"]);
        let cold = step_seconds(&stderr, "go build");
        // The first build compiles the component into the (empty) code cache.
        let prefill = step_seconds(&stderr, "code cache");
        let (_, stderr) = run("kubewasm", &["build", "--force"]);
        let warm = step_seconds(&stderr, "go build");
        let (report, _) = run("kubewasm", &["test", "tests/"]);
        let passed = if typed {
            "1 passed, 0 failed"
        } else {
            "2 passed, 0 failed"
        };
        assert!(report.trim_end().ends_with(passed), "{name}: {report}");
        let wasm = project.join(format!("dist/{name}.wasm"));
        let size = std::fs::metadata(&wasm).unwrap().len();
        let (event, watch) = if typed {
            (INGRESS.to_string(), "ingresses")
        } else {
            (
                r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "shop",
                    "labels": {"kubewasm.dev/copy": "true"}}, "data": {"k": "v"}}"#
                    .to_string(),
                "configmaps",
            )
        };
        let fresh = mean_call(&wasm, &event, watch, false, 5).await;
        let reused = mean_call(&wasm, &event, watch, true, 50).await;
        figures.push(format!(
            "{name:<14} {:>6.2} MB  tidy {tidy:>5.1} s  go build cold {cold:>5.1} s, warm \
             {warm:>4.1} s  compile to native {prefill:>4.1} s  instantiate+call {:>7.1} ms  \
             reused call {:>7.3} ms",
            size as f64 / 1e6,
            fresh.as_secs_f64() * 1e3,
            reused.as_secs_f64() * 1e3
        ));
    }
    eprintln!("{}", figures.join("\n"));
}
