//! Shared harness for the host's integration tests: an embedded API server on loopback,
//! the example CRDs, a plugin directory with the operator's approvals beside it (a
//! directory of Plugin objects, passed as `--approvals`), and the real `kubewasm` binary
//! as a child process whose JSON logs the tests can read.
#![allow(dead_code)]

pub mod registry;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kubewasm_apiserver::{ApiServer, Config};
use serde_json::Value;

/// `kubewasm run` flags for leader election with short durations, on a Lease in
/// `default`: 3 s lease, 2 s renew deadline, 200 ms retry period.
pub const LEADER_ELECT: [&str; 9] = [
    "--leader-elect",
    "--lease-namespace",
    "default",
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "200ms",
];

/// Repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A built Rust example plugin (`plugins/build.sh`): target/plugins/rust/NAME.wasm, with
/// its settings NAME.yaml beside it.
pub fn example_plugin(name: &str) -> PathBuf {
    lang_plugin("rust", name)
}

/// A built example plugin of one language (`plugins/build.sh`): `lang` is `rust`, `js`,
/// `python`, `c` or `go`.
pub fn lang_plugin(lang: &str, name: &str) -> PathBuf {
    let p = root()
        .join("target/plugins")
        .join(lang)
        .join(format!("{name}.wasm"));
    assert!(
        p.is_file(),
        "{} is missing: run plugins/build.sh (tests/run.sh does)",
        p.display()
    );
    p
}

/// A built test plugin (`tests/plugins/build.sh`).
pub fn test_plugin(name: &str) -> PathBuf {
    let p = root()
        .join("target/test-plugins")
        .join(format!("{name}.wasm"));
    assert!(
        p.is_file(),
        "{} is missing: run tests/plugins/build.sh (tests/run.sh does)",
        p.display()
    );
    p
}

/// One test's world.
pub struct Env {
    pub server: ApiServer,
    pub client: Client,
    pub dir: tempfile::TempDir,
    pub plugins: PathBuf,
    /// The operator's approvals: one `NAME.yaml` Plugin object per approved plugin, given
    /// to every host this Env starts as `--approvals`.
    pub approvals: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Env {
    /// Server up, example CRDs applied, empty plugin directory.
    pub async fn new() -> Env {
        Self::with_crds(true).await
    }

    /// Server up; the example CRDs applied when `crds`.
    pub async fn with_crds(crds: bool) -> Env {
        Self::with_config(Config::default(), crds).await
    }

    /// Server up with RBAC enforced ([`Config::with_rbac`]): the test's client and
    /// [`Env::kubeconfig`] are cluster-admin (token [`ADMIN_TOKEN`]); each of `users`
    /// (token, user name) is judged by the roles and bindings the test applies.
    pub async fn with_rbac(crds: bool, users: &[(&str, &str)]) -> Env {
        Self::with_config(Config::default().with_rbac(ADMIN_TOKEN, users), crds).await
    }

    /// A kubeconfig file authenticating with `token` (one of [`Env::with_rbac`]'s users).
    pub fn kubeconfig_for(&self, token: &str) -> PathBuf {
        let path = self.dir.path().join(format!("kubeconfig-{token}"));
        std::fs::write(&path, self.server.kubeconfig_for(token)).expect("kubeconfig");
        path
    }

    /// Server up with `config`; the example CRDs applied when `crds`.
    pub async fn with_config(config: Config, crds: bool) -> Env {
        let server = ApiServer::start(config).await.expect("start API server");
        let client = Client::try_from(server.client_config()).expect("client");
        let dir = tempfile::tempdir().expect("tempdir");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        let approvals = dir.path().join("approvals");
        std::fs::create_dir(&approvals).expect("approvals dir");
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let env = Env {
            server,
            client,
            dir,
            plugins,
            approvals,
            kubeconfig,
        };
        if crds {
            env.apply_path(&root().join("examples/crds")).await;
        }
        env
    }

    /// Apply manifests the way `kubewasm dev --apply` does.
    pub async fn apply_path(&self, path: &Path) {
        let docs = kubewasm::apply::manifests::read_manifests(&[path.to_path_buf()])
            .expect("read manifests");
        kubewasm::apply::manifests::apply_manifests(&self.client, &docs, Duration::from_secs(20))
            .await
            .expect("apply manifests");
    }

    /// Copy a plugin into the plugin directory as `NAME.wasm`, with optional settings YAML,
    /// approved by the operator for exactly what it asks for (see [`approval_of`]).
    pub fn add_plugin(&self, wasm: &Path, name: &str, settings: Option<&str>) {
        install_approved(wasm, &self.plugins, &self.approvals, name, settings);
    }

    /// Approve plugin `name` for `permissions` (YAML of a Plugin's `spec.permissions`),
    /// replacing its approval (written atomically: a running host never reads half).
    pub fn approve(&self, name: &str, permissions: &str) {
        write_approval(&self.approvals, name, &approval_yaml(name, permissions));
    }

    /// Approve plugin `name` for everything the test plugin `testkit` can ask for without
    /// `readAll`/`patchSelf` ([`TESTKIT_PERMISSIONS`]).
    pub fn approve_testkit(&self, name: &str) {
        self.approve(name, TESTKIT_PERMISSIONS);
    }

    /// Take plugin `name`'s approval away.
    pub fn unapprove(&self, name: &str) {
        let _ = std::fs::remove_file(self.approvals.join(format!("{name}.yaml")));
    }

    /// Copy a plugin into the plugin directory with its settings as given: no approval
    /// added, so the plugin is refused at load.
    pub fn add_plugin_unapproved(&self, wasm: &Path, name: &str, settings: Option<&str>) {
        std::fs::copy(wasm, self.plugins.join(format!("{name}.wasm"))).expect("copy plugin");
        if let Some(s) = settings {
            std::fs::write(self.plugins.join(format!("{name}.yaml")), s).expect("settings");
        }
    }

    /// Start `kubewasm run` on the plugin directory.
    pub fn start_host(&self, extra: &[&str]) -> HostProcess {
        self.start_host_with_env(extra, &[])
    }

    /// Start `kubewasm run` like [`Env::start_host`], with extra environment variables
    /// (e.g. a canary a plugin must not be able to read).
    pub fn start_host_with_env(&self, extra: &[&str], vars: &[(&str, &str)]) -> HostProcess {
        self.start_host_on(&self.kubeconfig, extra, vars)
    }

    /// Start `kubewasm run` like [`Env::start_host`], sending bearer token `token`: a server
    /// without a required token accepts any, and its request hooks
    /// ([`kubewasm_apiserver::ApiServer::stall_client`], the request records) tell this
    /// host's requests from the test's own.
    pub fn start_host_as(&self, token: &str, extra: &[&str]) -> HostProcess {
        self.start_host_as_with_env(token, extra, &[])
    }

    /// [`Env::start_host_as`] with extra environment variables.
    pub fn start_host_as_with_env(
        &self,
        token: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> HostProcess {
        let kubeconfig = self.dir.path().join(format!("kubeconfig-as-{token}"));
        let text = kubewasm_apiserver::kubeconfig::render(&self.server.url(), None, Some(token))
            .expect("render kubeconfig");
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        self.start_host_on(&kubeconfig, extra, vars)
    }

    fn start_host_on(
        &self,
        kubeconfig: &Path,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> HostProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
        cmd.args(["--log-format", "json", "--log", "info,kubewasm=debug"])
            .arg("run")
            .arg("--plugins")
            .arg(&self.plugins)
            .arg("--approvals")
            .arg(&self.approvals)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--discovery-interval",
                "300ms",
                "--retry-base",
                "100ms",
                "--retry-max",
                "2s",
            ])
            // A free port per host: tests run in parallel.
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(extra)
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        HostProcess::spawn(cmd)
    }

    /// `Api<DynamicObject>` for a kind.
    pub fn api(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        ns: Option<&str>,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// `Api` for the example ContentSites in `default`.
    pub fn sites(&self) -> Api<DynamicObject> {
        self.api(
            "sites.kubewasm.dev/v1alpha1",
            "ContentSite",
            "contentsites",
            Some("default"),
        )
    }

    /// Create an object from JSON.
    pub async fn create(&self, api: &Api<DynamicObject>, obj: Value) -> DynamicObject {
        let o: DynamicObject = serde_json::from_value(obj).expect("object");
        api.create(&PostParams::default(), &o)
            .await
            .expect("create")
    }

    /// Apply a JSON object with server-side apply as `manager`.
    pub async fn apply(
        &self,
        api: &Api<DynamicObject>,
        manager: &str,
        obj: Value,
    ) -> DynamicObject {
        let name = obj["metadata"]["name"].as_str().expect("name").to_string();
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&obj),
        )
        .await
        .expect("apply")
    }
}

/// A ContentSite in `default` that the example CRD accepts, asking for a database of
/// `members` members.
pub fn content_site(name: &str, members: u32) -> Value {
    serde_json::json!({
        "apiVersion": "sites.kubewasm.dev/v1alpha1",
        "kind": "ContentSite",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"title": format!("Site {name}"), "hostname": format!("{name}.example.com"),
                 "database": {"members": members, "version": "7.0.12"}}
    })
}

/// The admin token of [`Env::with_rbac`] servers.
pub const ADMIN_TOKEN: &str = "admin-token";

/// Poll `f` until it returns Some, or panic after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Default wait for the host to converge.
pub const CONVERGE: Duration = Duration::from_secs(30);

/// Get an object, None when absent.
pub async fn get(api: &Api<DynamicObject>, name: &str) -> Option<DynamicObject> {
    api.get_opt(name).await.expect("get")
}

/// The `kubewasm` child process and its parsed JSON log lines.
pub struct HostProcess {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl HostProcess {
    /// Spawn a `kubewasm` command built by the test itself (stderr must be piped).
    pub fn spawn_command(cmd: Command) -> HostProcess {
        Self::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> HostProcess {
        let mut child = cmd.spawn().expect("spawn kubewasm");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let v = serde_json::from_str::<Value>(&line)
                    .unwrap_or_else(|_| serde_json::json!({"message": line, "raw": true}));
                if std::env::var_os("KUBEWASM_TEST_ECHO").is_some() {
                    eprintln!("{line}");
                }
                sink.lock().expect("log lock").push(v);
            }
        });
        HostProcess {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// The child's process id (for /proc inspection).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<Value> {
        self.lines.lock().expect("log lock").clone()
    }

    /// Log lines matching `pred`.
    pub fn matching(&self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.logs().into_iter().filter(|l| pred(l)).collect()
    }

    /// Wait until a log line matches `pred`; returns it.
    pub async fn wait_log(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_log_for(what, CONVERGE, pred).await
    }

    /// Like [`HostProcess::wait_log`] with an explicit timeout (loading big plugins).
    pub async fn wait_log_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        eventually(what, timeout, || {
            let found = self.logs().into_iter().find(|l| pred(l));
            async move { found }
        })
        .await
        .clone()
    }

    /// Assert that no event failed. The failed lines come first in the message, before the
    /// whole log, so a truncated CI log still shows why.
    pub fn assert_no_failed_events(&self) {
        let failed = self.matching(|l| field(l, "message") == "event failed");
        assert!(
            failed.is_empty(),
            "{} event(s) failed:\n{}\n--- the whole log ---\n{}",
            failed.len(),
            failed
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            self.dump()
        );
    }

    /// Assert that no JSON log line carries Rust's debug formatting of a value: `Some(…)`,
    /// a string quoted inside the string (`"\"x\""`), a list of quoted strings
    /// (`"[\"a\"]"`). Data is logged as plain values; an absent value is omitted.
    pub fn assert_plain_values(&self) {
        let mut bad = Vec::new();
        for line in self.logs() {
            let Some(fields) = line.as_object() else {
                continue;
            };
            if line.get("raw").is_some() {
                continue;
            }
            for (key, value) in fields {
                let Some(text) = value.as_str() else {
                    continue;
                };
                if text.contains("Some(") || text.starts_with('"') || text.starts_with("[\"") {
                    bad.push(format!("{key}: {text}  in  {line}"));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "log values in Rust's debug form:\n{}",
            bad.join("\n")
        );
    }

    /// Dump the logs (for failure messages).
    pub fn dump(&self) -> String {
        self.logs()
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The exit code once the process has ended on its own (`Some(None)` when killed by
    /// a signal), `None` while it runs: for a bounded poll with [`eventually`].
    pub fn exited(&mut self) -> Option<Option<i32>> {
        let status = self.child.try_wait().expect("try_wait kubewasm")?;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Some(status.code())
    }

    /// SIGKILL (no clean shutdown: nothing released) and wait; the logs stay readable.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    /// SIGTERM and wait; returns the exit code.
    pub fn stop(mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait kubewasm");
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        status.code()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Field of a log line as a string.
pub fn field<'a>(line: &'a Value, key: &str) -> &'a str {
    line.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The managers in an object's managedFields.
pub fn managers(o: &DynamicObject) -> Vec<String> {
    o.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect()
}

/// The operator's approval of exactly what plugin `wasm`, installed as `name` with
/// `settings` (YAML), asks for: the Plugin object `kubewasm inspect --approval` prints (the
/// real binary, on a staged copy, since a plugin's manifest may depend on its settings).
/// None when the plugin does not load (a test of a broken plugin: nothing to approve).
pub fn approval_of(wasm: &Path, name: &str, settings: Option<&str>) -> Option<String> {
    let staging = tempfile::tempdir().expect("staging dir");
    let staged = staging.path().join(format!("{name}.wasm"));
    std::fs::copy(wasm, &staged).expect("stage plugin");
    if let Some(text) = settings {
        std::fs::write(staging.path().join(format!("{name}.yaml")), text).expect("stage settings");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "error", "inspect", "--approval"])
        .arg(&staged)
        .output()
        .expect("run kubewasm inspect --approval");
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).expect("inspect --approval prints UTF-8"))
}

/// A Plugin object approving `permissions` (YAML of `spec.permissions`) for plugin `name`.
pub fn approval_yaml(name: &str, permissions: &str) -> String {
    let permissions: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(permissions).expect("permissions YAML");
    let object = serde_json::json!({
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "Plugin",
        "metadata": {"name": name},
        "spec": {"permissions": permissions},
    });
    serde_yaml_ng::to_string(&object).expect("Plugin YAML")
}

/// Write `approvals/NAME.yaml` atomically (beside it, then renamed into place).
pub fn write_approval(approvals: &Path, name: &str, text: &str) {
    let dest = approvals.join(format!("{name}.yaml"));
    let tmp = approvals.join(format!(".{name}.yaml.tmp"));
    std::fs::write(&tmp, text).expect("write approval");
    std::fs::rename(&tmp, &dest).expect("approval into place");
}

/// Install `wasm` as `dir/NAME.wasm` with its settings, approved in `approvals` for
/// exactly what it asks for (the approval written first, so a running host never sees the
/// plugin without it).
pub fn install_approved(
    wasm: &Path,
    dir: &Path,
    approvals: &Path,
    name: &str,
    settings: Option<&str>,
) {
    if let Some(approval) = approval_of(wasm, name, settings) {
        write_approval(approvals, name, &approval);
    }
    if let Some(text) = settings {
        std::fs::write(dir.join(format!("{name}.yaml")), text).expect("settings");
    }
    std::fs::copy(wasm, dir.join(format!("{name}.wasm"))).expect("copy plugin");
}

/// The operator's approval (`spec.permissions`) of everything the test plugin `testkit`
/// can ask for without `readAll`/`patchSelf`: its ConfigMap watch in either spelling,
/// create ConfigMaps with force, create Namespaces in listed namespaces.
pub const TESTKIT_PERMISSIONS: &str = "\
watches:
- {apiVersion: v1, kind: ConfigMap}
- {resource: configmaps}
grants:
- {apiGroups: [\"\"], kinds: [ConfigMap], verbs: [create], allowForce: true}
- {apiGroups: [\"\"], kinds: [Namespace], namespaces: [\"*\"], verbs: [create]}
";

/// Peak resident memory of a process (VmHWM of /proc/PID/status), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmHWM")
}

/// Where a host serves its status listener (`/metrics`, `/status`, `/preview`): the address
/// its start-up line names.
pub async fn ops_endpoint(host: &HostProcess) -> String {
    let line = host
        .wait_log("the status listener's address", |l| {
            field(l, "message").starts_with("serving /healthz, /readyz, /status, /metrics")
        })
        .await;
    field(&line, "addr").to_string()
}

/// GET `path` over plain HTTP/1.0 from `addr`: the status code and the body.
pub fn http_get_status(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, body.to_string())
}

/// The value of the metric sample `series` (name and labels as exposed), 0 when absent.
pub fn metric_sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// An empty Docker config folder for `kubewasm push` and hosts pulling from a test
/// registry: no credentials of this machine's user leak in.
pub fn empty_docker_config() -> PathBuf {
    let dir = std::env::temp_dir().join("kubewasm-tests-empty-docker-config");
    std::fs::create_dir_all(&dir).expect("docker config dir");
    dir
}

/// `kubewasm push FILE REF --insecure-registry HOST` to a test registry: the pinned
/// reference it prints last.
pub fn push_module(registry: &registry::Registry, file: &Path, path: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["push", &file.to_string_lossy(), &registry.reference(path)])
        .args(["--insecure-registry", &registry.host()])
        .env("DOCKER_CONFIG", empty_docker_config())
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

/// GET `path` over HTTPS from `addr`, trusting only the CA in `ca_file` (None: any
/// certificate, for a listener's self-signed one reached through `kubectl port-forward`),
/// with `token` as the bearer: (status, body).
pub async fn https_get(
    addr: &str,
    ca_file: Option<&std::path::Path>,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    use http_body_util::BodyExt as _;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let config = match ca_file {
        Some(ca) => builder
            .with_root_certificates(roots(ca))
            .with_no_client_auth(),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("a TLS handshake");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("HTTP handshake");
    tokio::spawn(conn);
    let mut request = hyper::Request::get(path).header(hyper::header::HOST, addr);
    if let Some(t) = token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let response = sender
        .send_request(
            request
                .body(http_body_util::Empty::<hyper::body::Bytes>::new())
                .expect("request"),
        )
        .await
        .expect("response");
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// The CAs of a PEM file.
fn roots(ca_file: &std::path::Path) -> rustls::RootCertStore {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_file).expect("CA file") {
        roots
            .add(cert.expect("CA certificate"))
            .expect("a trusted CA");
    }
    roots
}

/// Accepts any server certificate (its signatures still checked): what Prometheus's
/// `insecureSkipVerify` does with the host's self-signed one.
#[derive(Debug)]
struct AnyCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `kubewasm test ARGS... PATHS...`: (exit code, stdout followed by stderr).
pub fn kubewasm_test(args: &[&str], paths: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "test"])
        .args(args)
        .args(paths)
        .output()
        .expect("run kubewasm test");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

/// Asserts that the CRD `deploy/kubernetes/base/<base>` is byte for byte the chart's
/// `deploy/helm/kubewasm/crds/<chart>` and is listed in the base's kustomization.
pub fn assert_crd_has_one_source(base: &str, chart: &str) {
    let base_path = root().join("deploy/kubernetes/base").join(base);
    let chart_path = root().join("deploy/helm/kubewasm/crds").join(chart);
    assert!(
        std::fs::read(&base_path).unwrap() == std::fs::read(&chart_path).unwrap(),
        "{} and {} differ: copy the first over the second",
        base_path.display(),
        chart_path.display()
    );
    let kustomization =
        std::fs::read_to_string(root().join("deploy/kubernetes/base/kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains(&format!("- {base}")),
        "{base} is not in the base's kustomization: {kustomization}"
    );
}
