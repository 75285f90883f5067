//! A registry that stalls holds back no reload. The registry here is written in the test:
//! it answers `/v2/`, then sends a manifest one byte at a time, for as long as the client
//! listens. A Plugin object naming it is pulled in a task of its own, beside reloads: a
//! plugin file added meanwhile loads and serves while the drip goes on, a well-behaved
//! plugin keeps handling its objects, the Plugin's status says `Pulling`, and with a short
//! `--pull-timeout` the pull fails with `PullTimeout` and is retried only after its backoff.
//! A Plugin deleted during its pull stops it: the registry sees its connection closed.
//! Another registry sends endless bodies, a redirect to another host and a token realm on
//! another host: each Plugin is refused with a short reason, the host reads a bounded part
//! of each body (its peak RSS and longest log line are printed), and reloads go on.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// What the dripping registry saw of one manifest request.
#[derive(Debug, Clone)]
struct Drip {
    path: String,
    started: Instant,
    /// When the client closed the connection (None: it still listens).
    closed: Option<Instant>,
    /// Bytes of the body sent so far.
    sent: usize,
}

/// A registry on loopback that answers `/v2/` at once and every manifest one byte per
/// `every`, announcing a 1 MiB body (under any manifest cap, so only a deadline on the
/// whole pull stops it).
struct DripRegistry {
    port: u16,
    drips: Arc<Mutex<Vec<Drip>>>,
    task: tokio::task::JoinHandle<()>,
}

impl DripRegistry {
    async fn start(every: Duration) -> DripRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let drips = Arc::new(Mutex::new(Vec::new()));
        let seen = drips.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, every, seen.clone()));
            }
        });
        DripRegistry { port, drips, task }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn drips(&self) -> Vec<Drip> {
        self.drips.lock().expect("drips").clone()
    }

    /// Manifest requests whose client still listens.
    fn open(&self) -> usize {
        self.drips().iter().filter(|d| d.closed.is_none()).count()
    }
}

impl Drop for DripRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One connection: requests one after another (keep-alive) until a manifest, which drips
/// until the client goes away.
async fn serve(conn: TcpStream, every: Duration, drips: Arc<Mutex<Vec<Drip>>>) {
    let (mut rd, mut wr) = conn.into_split();
    let mut buf = Vec::new();
    loop {
        let head = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                buf.drain(..end + 4);
                break head;
            }
            let mut chunk = [0u8; 4096];
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let mut words = head.split_whitespace();
        let method = words.next().unwrap_or("").to_string();
        let path = words.next().unwrap_or("").to_string();
        if path == "/v2/" || path == "/v2" {
            let answer = "HTTP/1.1 200 OK\r\nDocker-Distribution-API-Version: registry/2.0\r\n\
                          Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
            if wr.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        if !path.contains("/manifests/") {
            let answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
            if wr.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        let digest = path.rsplit('/').next().unwrap_or("").to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n\
             Docker-Content-Digest: {digest}\r\nContent-Length: {}\r\n\r\n",
            1 << 20
        );
        if wr.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        if method == "HEAD" {
            continue;
        }
        let index = {
            let mut d = drips.lock().expect("drips");
            d.push(Drip {
                path: path.clone(),
                started: Instant::now(),
                closed: None,
                sent: 0,
            });
            d.len() - 1
        };
        let closed = |drips: &Arc<Mutex<Vec<Drip>>>| {
            drips.lock().expect("drips")[index].closed = Some(Instant::now());
        };
        let mut tick = tokio::time::interval(every);
        let mut probe = [0u8; 1];
        loop {
            tokio::select! {
                // The client sends nothing more on this connection: a read ends only when
                // it goes away.
                r = rd.read(&mut probe) => {
                    if matches!(r, Ok(0) | Err(_)) {
                        closed(&drips);
                        return;
                    }
                }
                _ = tick.tick() => {
                    if wr.write_all(b" ").await.is_err() {
                        closed(&drips);
                        return;
                    }
                    drips.lock().expect("drips")[index].sent += 1;
                }
            }
        }
    }
}

/// An empty Docker config folder: no credentials of this machine's user leak in.
fn empty_docker_config() -> String {
    let dir = std::env::temp_dir().join("kubewasm-tests-empty-docker-config");
    std::fs::create_dir_all(&dir).expect("docker config dir");
    dir.display().to_string()
}

fn cm(name: &str, plugin: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"kubewasm.dev/testkit": plugin}},
           "data": {"value": "1"}})
}

struct World {
    env: Env,
    registry: DripRegistry,
    plugins: Api<DynamicObject>,
    cms: Api<DynamicObject>,
}

impl World {
    /// The API server with the Plugin CRD, the dripping registry, and a well-behaved
    /// plugin file (`steady`, testkit under another name).
    async fn new() -> World {
        let registry = DripRegistry::start(Duration::from_millis(500)).await;
        let env = Env::with_crds(false).await;
        env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
            .await;
        env.add_plugin(&test_plugin("testkit"), "steady", Some("name: steady\n"));
        let plugins = env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
        let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
        World {
            env,
            registry,
            plugins,
            cms,
        }
    }

    fn start_host(&self, extra: &[&str]) -> HostProcess {
        let host = self.registry.host();
        let mut args = vec!["--insecure-registry", &host, "--reload-debounce", "100ms"];
        args.extend_from_slice(extra);
        self.env
            .start_host_with_env(&args, &[("DOCKER_CONFIG", &empty_docker_config())])
    }

    /// A Plugin whose module is on the dripping registry.
    async fn apply_hostile(&self, name: &str, digest_byte: &str) {
        let module = format!(
            "oci://{}/evil/plugin@sha256:{}",
            self.registry.host(),
            digest_byte.repeat(32)
        );
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1",
            "kind": "Plugin",
            "metadata": {"name": name},
            "spec": {"module": module, "permissions": {
                "watches": [{"apiVersion": "v1", "kind": "ConfigMap"}]}},
        }))
        .expect("a Plugin object");
        self.plugins
            .patch(
                name,
                &PatchParams::apply("hostile-registry-test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("apply the Plugin");
    }

    /// Wait until Plugin `name` has condition `type_` at `status` with `reason`, for its
    /// current generation; returns the status.
    async fn condition(
        &self,
        host: &HostProcess,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> Value {
        let deadline = Instant::now() + CONVERGE;
        loop {
            let o = get(&self.plugins, name).await;
            if let Some(o) = &o
                && let Some(generation) = o.metadata.generation
                && let Some(st) = o.data.get("status")
                && st["observedGeneration"] == json!(generation)
                && st["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == type_
                            && c["status"] == status
                            && c["reason"] == reason
                            && c["observedGeneration"] == json!(generation)
                    })
                })
            {
                return st.clone();
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for Plugin {name}: {type_}={status} ({reason}); the object: {}\nhost log:\n{}",
                o.map(|o| serde_json::to_string_pretty(&o.data).unwrap_or_default())
                    .unwrap_or_default(),
                host.dump()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A ConfigMap for `plugin`, and wait until it has handled it.
    async fn handled_by(&self, host: &HostProcess, name: &str, plugin: &str) {
        self.env.create(&self.cms, cm(name, plugin)).await;
        let out = format!("{name}-out");
        let deadline = Instant::now() + CONVERGE;
        while get(&self.cms, &out)
            .await
            .is_none_or(|o| o.data["data"]["from"] != json!(plugin))
        {
            assert!(
                Instant::now() < deadline,
                "{plugin} did not handle {name}\nhost log:\n{}",
                host.dump()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until the registry has a manifest request whose client listens.
    async fn dripping(&self) -> Drip {
        eventually("a manifest request dripping", CONVERGE, || async {
            self.registry
                .drips()
                .into_iter()
                .find(|d| d.closed.is_none() && d.sent > 0)
        })
        .await
    }
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// The drip goes on (the default `--pull-timeout` is minutes) while a plugin file added
/// after it loads and handles its objects, and the Plugin's status says `Pulling`; a spec
/// changed during the pull stops it and pulls the new one; deleting the Plugin stops that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dripping_registry_holds_back_no_reload() {
    let w = World::new().await;
    let host = w.start_host(&[]);
    host.wait_log("steady loaded", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "steady"
    })
    .await;
    w.handled_by(&host, "before", "steady").await;

    w.apply_hostile("hostile", "ab").await;
    let drip = w.dripping().await;

    // A plugin file added while the manifest drips loads and serves.
    w.env
        .add_plugin(&test_plugin("testkit"), "late", Some("name: late\n"));
    host.wait_log("late loaded", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "late"
    })
    .await;
    w.handled_by(&host, "late-1", "late").await;
    w.handled_by(&host, "steady-1", "steady").await;
    let st = w
        .condition(&host, "hostile", "Ready", "False", "Pulling")
        .await;
    assert_eq!(condition(&st, "Pulled")["status"], json!("Unknown"), "{st}");
    assert_eq!(condition(&st, "Pulled")["reason"], json!("Pulling"), "{st}");
    // All of it while the same pull still drips: nothing waited for it to end.
    let now = w.registry.drips();
    let same = now
        .iter()
        .find(|d| d.started == drip.started)
        .expect("the drip");
    assert!(
        same.closed.is_none(),
        "the pull ended before the file loaded, so this shows nothing: {now:?}\n{}",
        host.dump()
    );
    assert!(same.sent > drip.sent, "the registry kept dripping: {now:?}");
    assert_eq!(w.registry.open(), 1, "one pull per Plugin: {now:?}");

    // The spec changed during its pull: that pull stops, the new spec's starts.
    w.apply_hostile("hostile", "ef").await;
    eventually(
        "the old pull stopped, the new one dripping",
        CONVERGE,
        || async {
            let drips = w.registry.drips();
            let old_closed = drips
                .iter()
                .filter(|d| d.path.ends_with(&"ab".repeat(32)))
                .all(|d| d.closed.is_some());
            let new_open = drips
                .iter()
                .any(|d| d.path.ends_with(&"ef".repeat(32)) && d.closed.is_none());
            (old_closed && new_open).then_some(())
        },
    )
    .await;
    assert_eq!(w.registry.open(), 1, "{:?}", w.registry.drips());

    // Deleted during its pull: the pull stops (the registry sees its client go away).
    w.plugins
        .delete("hostile", &DeleteParams::default())
        .await
        .expect("delete the Plugin");
    eventually("the pull stopped", CONVERGE, || async {
        (w.registry.open() == 0).then_some(())
    })
    .await;
    w.handled_by(&host, "after", "steady").await;
    assert!(
        host.matching(
            |l| field(l, "message") == "plugin rejected" && field(l, "source").contains("hostile")
        )
        .is_empty(),
        "a pull stopped by a change or a deletion is no failure\n{}",
        host.dump()
    );
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// With a short `--pull-timeout` the dripping pull fails with `PullTimeout`, naming the
/// deadline, and is tried again only after its backoff (5 s), while a well-behaved plugin
/// handles its objects throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_that_outlasts_the_pull_timeout_fails_and_waits_its_backoff() {
    let w = World::new().await;
    let host = w.start_host(&["--pull-timeout", "2s"]);
    host.wait_log("steady loaded", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "steady"
    })
    .await;

    w.apply_hostile("hostile", "cd").await;
    w.condition(&host, "hostile", "Ready", "False", "Pulling")
        .await;
    w.handled_by(&host, "pulling", "steady").await;
    let st = w
        .condition(&host, "hostile", "Ready", "False", "PullTimeout")
        .await;
    let ready = condition(&st, "Ready");
    let message = ready["message"].as_str().unwrap_or("");
    assert!(
        message.contains("--pull-timeout") && message.contains("2s"),
        "{st}"
    );
    assert!(message.contains(&w.registry.host()), "{st}");
    assert_eq!(condition(&st, "Pulled")["status"], json!("False"), "{st}");
    assert_eq!(
        condition(&st, "Pulled")["reason"],
        json!("PullTimeout"),
        "{st}"
    );
    let failed = host
        .wait_log("the failure said", |l| {
            field(l, "message") == "plugin rejected" && field(l, "source").contains("hostile")
        })
        .await;
    assert!(
        field(&failed, "error").contains("--pull-timeout"),
        "{failed}"
    );
    w.handled_by(&host, "timed-out", "steady").await;

    // Tried again, after the backoff: never hot.
    eventually("the pull tried again", CONVERGE, || async {
        (w.registry.drips().len() >= 2).then_some(())
    })
    .await;
    let drips = w.registry.drips();
    let first_end = drips[0].closed.expect("the first pull was stopped");
    let gap = drips[1].started - first_end;
    assert!(
        gap >= Duration::from_millis(4500),
        "retried {gap:?} after the timeout, before the 5 s backoff: {drips:?}"
    );
    w.handled_by(&host, "end", "steady").await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// What the other hostile registry saw.
#[derive(Debug, Default)]
struct Seen {
    /// Bytes of endless bodies sent, per request (the client cut each).
    endless: Vec<usize>,
    /// Connections made to the address only a redirect or a token realm names.
    elsewhere: usize,
}

/// A registry on loopback whose answers depend on the repository: `endless-404` and
/// `endless-manifest` send a body that never ends (as fast as the client reads),
/// `redirect` sends the client to another host (127.0.0.2), and every request to
/// `realm` is challenged with a Bearer realm on that other host. The listener on
/// 127.0.0.2 counts who comes: nobody should.
struct HostileRegistry {
    port: u16,
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl HostileRegistry {
    async fn start() -> HostileRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let elsewhere = TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind 127.0.0.2");
        let other = elsewhere.local_addr().expect("local addr").port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let counted = seen.clone();
        let lure = tokio::spawn(async move {
            while let Ok((conn, _)) = elsewhere.accept().await {
                counted.lock().expect("seen").elsewhere += 1;
                drop(conn);
            }
        });
        let served = seen.clone();
        let main = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve_hostile(conn, other, served.clone()));
            }
        });
        HostileRegistry {
            port,
            seen,
            tasks: vec![lure, main],
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One connection of [`HostileRegistry`].
async fn serve_hostile(conn: TcpStream, other: u16, seen: Arc<Mutex<Seen>>) {
    let (mut rd, mut wr) = conn.into_split();
    let mut buf = Vec::new();
    loop {
        let head = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                buf.drain(..end + 4);
                break head;
            }
            let mut chunk = [0u8; 4096];
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let plain = |status: &str, extra: &str| {
            format!("HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\n\r\n")
        };
        let answer = if path == "/v2/" || path == "/v2" {
            plain(
                "200 OK",
                "Docker-Distribution-API-Version: registry/2.0\r\n",
            )
        } else if path.starts_with("/v2/realm/") {
            plain(
                "401 Unauthorized",
                &format!(
                    "WWW-Authenticate: Bearer realm=\"http://127.0.0.2:{other}/token\",service=\"x\",scope=\"repository:realm/m:pull\"\r\n"
                ),
            )
        } else if path.starts_with("/v2/redirect/") {
            plain(
                "307 Temporary Redirect",
                &format!("Location: http://127.0.0.2:{other}{path}\r\n"),
            )
        } else if path.starts_with("/v2/endless-") {
            let status = if path.starts_with("/v2/endless-404/") {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            if wr.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            // 64 KiB chunks of printable text, until the client hangs up.
            let body = vec![b'A'; 64 << 10];
            let chunk = [
                format!("{:x}\r\n", body.len()).into_bytes(),
                body,
                b"\r\n".to_vec(),
            ]
            .concat();
            let index = {
                let mut s = seen.lock().expect("seen");
                s.endless.push(0);
                s.endless.len() - 1
            };
            while wr.write_all(&chunk).await.is_ok() {
                seen.lock().expect("seen").endless[index] += 64 << 10;
            }
            return;
        } else {
            plain("404 Not Found", "")
        };
        if wr.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Endless bodies (a manifest, a 404's error), a redirect to another host and a token
/// realm on another host: each Plugin fails with a short reason; the host reads a bounded
/// part of each body (its peak RSS stays far from the 4.1 GiB an endless 404 took before
/// bodies were bounded), connects nowhere it was not told to, and a plugin file added
/// meanwhile loads and serves while a well-behaved plugin keeps handling its objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_bodies_foreign_redirects_and_realms_cost_nothing_and_hold_back_nothing() {
    let registry = HostileRegistry::start().await;
    let env = Env::with_crds(false).await;
    env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
        .await;
    env.add_plugin(&test_plugin("testkit"), "steady", Some("name: steady\n"));
    let plugins = env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    let w = World {
        registry: DripRegistry::start(Duration::from_secs(1)).await,
        cms: env.api("v1", "ConfigMap", "configmaps", Some("default")),
        plugins: plugins.clone(),
        env,
    };
    let hostile_host = registry.host();
    let host = w.env.start_host_with_env(
        &[
            "--insecure-registry",
            &hostile_host,
            "--reload-debounce",
            "100ms",
        ],
        &[("DOCKER_CONFIG", &empty_docker_config())],
    );
    host.wait_log("steady loaded", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "steady"
    })
    .await;
    let attacks = ["endless-404", "endless-manifest", "redirect", "realm"];
    for (i, attack) in attacks.iter().enumerate() {
        let module = format!(
            "oci://{hostile_host}/{attack}/m@sha256:{}",
            format!("{i:x}{i:x}").repeat(32)
        );
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1",
            "kind": "Plugin",
            "metadata": {"name": attack},
            "spec": {"module": module, "permissions": {
                "watches": [{"apiVersion": "v1", "kind": "ConfigMap"}]}},
        }))
        .expect("a Plugin object");
        plugins
            .patch(
                attack,
                &PatchParams::apply("hostile-registry-test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("apply the Plugin");
    }
    w.env
        .add_plugin(&test_plugin("testkit"), "late", Some("name: late\n"));
    host.wait_log("late loaded", |l| {
        field(l, "message") == "plugin loaded" && field(l, "plugin") == "late"
    })
    .await;
    w.handled_by(&host, "late-1", "late").await;

    let mut reasons = Vec::new();
    for attack in attacks {
        let deadline = Instant::now() + CONVERGE;
        let st = loop {
            let o = get(&plugins, attack).await;
            let st = o.as_ref().and_then(|o| o.data.get("status")).cloned();
            // A registry failure is `Pulled=False`; a refusal by the operator's registry
            // rules is permanent until the spec changes: `Ready=False` with its reason.
            let refused = |st: &Value| {
                let ready = condition(st, "Ready");
                if condition(st, "Pulled")["status"] == json!("False") {
                    Some(condition(st, "Pulled").clone())
                } else if ready["status"] == json!("False")
                    && !["Pulling", "Loading"].contains(&ready["reason"].as_str().unwrap_or(""))
                {
                    Some(ready.clone())
                } else {
                    None
                }
            };
            if let Some(c) = st.as_ref().and_then(refused) {
                break c;
            }
            assert!(
                Instant::now() < deadline,
                "{attack} not refused; its status: {st:?}\nhost log:\n{}",
                host.dump()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let pulled = &st;
        let message = pulled["message"].as_str().unwrap_or("").to_string();
        assert!(
            message.len() <= 1024 && !message.contains("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            "{attack}: the body reached the status: {st}"
        );
        println!("{attack}: {} {message}", pulled["reason"]);
        reasons.push((attack, pulled["reason"].as_str().unwrap_or("").to_string()));
    }
    w.handled_by(&host, "steady-1", "steady").await;
    let reason = |a: &str| {
        reasons
            .iter()
            .find(|(x, _)| *x == a)
            .map(|(_, r)| r.as_str())
            .unwrap_or("")
    };
    assert_eq!(reason("redirect"), "RegistryNotAllowed", "{reasons:?}");
    assert_eq!(reason("realm"), "RegistryNotAllowed", "{reasons:?}");
    assert_eq!(reason("endless-404"), "ManifestNotFound", "{reasons:?}");
    assert!(!reason("endless-manifest").is_empty(), "{reasons:?}");

    let seen = registry.seen.lock().expect("seen");
    assert_eq!(
        seen.elsewhere, 0,
        "the host connected to the host only a redirect or a realm named"
    );
    assert!(
        seen.endless.len() >= 2,
        "both endless bodies were asked for: {seen:?}"
    );
    // Each endless body is cut by the client within its bound (4 MiB for a manifest, 64 KiB
    // for an error) plus what loopback socket buffers hold.
    assert!(
        seen.endless.iter().all(|sent| *sent < 32 << 20),
        "an endless body was read past its bound: {seen:?}"
    );
    drop(seen);
    let peak_mib = peak_rss_kib(host.pid()) / 1024;
    println!("host peak RSS under the attacks: {peak_mib} MiB; reasons: {reasons:?}");
    assert!(
        peak_mib < 512,
        "the host's peak RSS reached {peak_mib} MiB under endless registry bodies"
    );
    let longest = host.dump().lines().map(str::len).max().unwrap_or(0);
    println!("longest host log line: {longest} bytes");
    assert!(longest < 8192, "a log line of {longest} bytes");
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}
