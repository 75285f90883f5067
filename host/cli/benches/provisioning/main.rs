//! N ContentSites provisioned by kubewasm and by a kube-rs `Controller` doing the same job,
//! one after the other on the same API server:
//! `cargo bench --workspace --bench provisioning` (after `bash plugins/build.sh`).
//!
//! For each operator, in a namespace of its own:
//! - `kubewasm run` with the Rust `contentsite-provisioner` plugin alone (copied with its
//!   settings file from `target/plugins/rust`, approved by `plugins/approvals.yaml`), scoped to the namespace with `--namespace`,
//!   writing as itself (`--no-impersonation`), loading the directory once (`--no-reload`,
//!   `--no-plugin-objects`);
//! - this bench's own binary as the `Controller` of `controller.rs`.
//!
//! Once the operator's cache is synced, the bench creates N ContentSites (16 at a time) and
//! waits until every MongoDB and Service exists (e2e create), then changes every site's
//! `spec.database.members` from 1 to 3 and waits until every MongoDB says 3 (update). It
//! reports both times, the operator's peak RSS (VmHWM) over its whole life, its CPU time
//! (utime + stime) from the first create to the last MongoDB updated, and the writes
//! (POST, PUT, PATCH, DELETE, not those sent with `dryRun`, which store nothing) the
//! embedded API server received from it, counted once two seconds pass without one; then kubewasm / Controller for each figure. Nothing asserts a figure.
//!
//! Variables:
//! - `KUBEWASM_BENCH_PARENTS`: N (default 1,000; 20 under `cargo test --benches`);
//! - `KUBEWASM_BENCH_REPS`: repetitions of the pair (default 1);
//! - `KUBEWASM_BENCH_CONCURRENCY`: reconciles at once, for both (default 16: kubewasm's
//!   `--concurrency`, the Controller's `Config::concurrency`);
//! - `KUBEWASM_BENCH_KUBECONFIG`: a real cluster instead of the embedded API server (admin
//!   credentials; the CRDs of `examples/crds` are created if missing, existing ones kept;
//!   the namespaces are deleted afterwards). Writes are then read from kube-apiserver's
//!   `apiserver_request_total` (MongoDB, Service and ContentSite creates, updates and
//!   patches not in dry run, less the bench's own), so other clients writing those kinds at the same time
//!   are counted too;
//! - `KUBEWASM_BENCH_SERVER_PIDS`: with a real cluster, the pids of kube-apiserver and etcd
//!   (comma-separated) whose CPU time to report too.

#[path = "../common/mod.rs"]
mod common;
mod controller;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_apiserver::{ApiServer, Config};
use serde_json::json;

use common::{cpu_seconds, mib, rss_kib};

const CONTROLLER_KUBECONFIG_ENV: &str = "KUBEWASM_BENCH_CONTROLLER_KUBECONFIG";
const CONTROLLER_NAMESPACE_ENV: &str = "KUBEWASM_BENCH_CONTROLLER_NAMESPACE";
/// The bearer token the operators send to the embedded server, so their writes can be told
/// from the bench's.
const OPERATOR_TOKEN: &str = "operator";
const PLUGIN: &str = "contentsite-provisioner";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let concurrency: u16 = env_or("KUBEWASM_BENCH_CONCURRENCY", 16);
    if let Ok(kubeconfig) = std::env::var(CONTROLLER_KUBECONFIG_ENV) {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .init();
        let namespace = std::env::var(CONTROLLER_NAMESPACE_ENV).unwrap_or_default();
        runtime.block_on(async {
            controller::run(
                client_from(Path::new(&kubeconfig)).await,
                &namespace,
                concurrency,
            )
            .await
        });
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: then a few
    // parents only, so the bench is exercised without its full cost.
    let full = std::env::args().any(|a| a == "--bench");
    let parents = env_or("KUBEWASM_BENCH_PARENTS", if full { 1_000 } else { 20 });
    let reps = env_or("KUBEWASM_BENCH_REPS", 1usize);
    let built = common::root().join("target/plugins/rust");
    if !built.join(format!("{PLUGIN}.wasm")).is_file() {
        eprintln!(
            "provisioning: {}/{PLUGIN}.wasm is missing; run `bash plugins/build.sh` first",
            built.display()
        );
        return;
    }
    // The plugin alone: the directory it is built in holds other plugins (mongodb-monitor
    // watches the MongoDBs and fails on each without the ServiceMonitor CRD) that would
    // cache, call and write beside it, which the Controller does not.
    let plugins = tempfile::tempdir().expect("tempdir");
    for file in [format!("{PLUGIN}.wasm"), format!("{PLUGIN}.yaml")] {
        if built.join(&file).is_file() {
            std::fs::copy(built.join(&file), plugins.path().join(&file)).expect("copy the plugin");
        }
    }
    runtime.block_on(drive(plugins.path(), parents, reps, concurrency));
}

async fn client_from(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// The API server the operators run against.
struct Cluster {
    /// The bench's client.
    client: kube::Client,
    /// The operators' kubeconfig.
    kubeconfig: PathBuf,
    /// The embedded server (None: a real cluster).
    server: Option<ApiServer>,
    server_pids: Vec<u32>,
    dir: tempfile::TempDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let (client, kubeconfig, server) = match std::env::var("KUBEWASM_BENCH_KUBECONFIG") {
            Ok(path) => {
                let path = PathBuf::from(path);
                (client_from(&path).await, path, None)
            }
            Err(_) => {
                let config = Config {
                    history_limit: 100_000,
                    ..Config::default()
                };
                let server = ApiServer::start(config).await.expect("server");
                let client = kube::Client::try_from(server.client_config()).expect("client");
                let path = dir.path().join("kubeconfig");
                std::fs::write(&path, server.kubeconfig_for(OPERATOR_TOKEN)).expect("kubeconfig");
                server.record_requests();
                (client, path, Some(server))
            }
        };
        let server_pids = std::env::var("KUBEWASM_BENCH_SERVER_PIDS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        let cluster = Cluster {
            client,
            kubeconfig,
            server,
            server_pids,
            dir,
        };
        cluster.crds().await;
        cluster
    }

    /// The ContentSite and MongoDB CRDs, created where missing.
    async fn crds(&self) {
        let crds: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(
                    "apiextensions.k8s.io",
                    "v1",
                    "CustomResourceDefinition",
                ),
                "customresourcedefinitions",
            ),
        );
        let root = common::root().join("examples/crds");
        let mut missing = Vec::new();
        for name in ["contentsites.sites.kubewasm.dev", "mongodb.mongodb.com"] {
            if crds.get_opt(name).await.expect("read CRD").is_none() {
                missing.push(root.join(format!("{name}.yaml")));
            }
        }
        if missing.is_empty() {
            return;
        }
        let docs = kubewasm::apply::manifests::read_manifests(&missing).expect("CRDs");
        kubewasm::apply::manifests::apply_manifests(&self.client, &docs, Duration::from_secs(30))
            .await
            .expect("apply CRDs");
    }

    /// Writes the operators sent so far: counted by the embedded server, or read from
    /// kube-apiserver's metrics (then including the bench's own: see [`Cluster::bench_writes`]).
    async fn writes(&self) -> u64 {
        match &self.server {
            Some(server) => server
                .requests()
                .iter()
                .filter(|r| r.client == OPERATOR_TOKEN && r.is_write() && !dry_run(&r.path))
                .count() as u64,
            None => self.metric_writes().await,
        }
    }

    /// The operators' writes so far by method and resource (embedded server only), for the log.
    fn write_kinds(&self) -> std::collections::BTreeMap<String, u64> {
        let mut kinds = std::collections::BTreeMap::new();
        if let Some(server) = &self.server {
            for r in server.requests() {
                if r.client == OPERATOR_TOKEN && r.is_write() {
                    let path = r.path.split('?').next().unwrap_or_default();
                    // .../namespaces/NS/RESOURCE[/NAME[/SUBRESOURCE]]
                    let segs: Vec<&str> = path.split('/').collect();
                    let at = segs.iter().position(|s| *s == "namespaces").unwrap_or(0);
                    let resource = segs.get(at + 2).copied().unwrap_or(path);
                    let sub = segs
                        .get(at + 4)
                        .map(|s| format!("/{s}"))
                        .unwrap_or_default();
                    let dry = if dry_run(&r.path) { " (dry run)" } else { "" };
                    let key = format!("{} {resource}{sub}{dry}", r.method);
                    *kinds.entry(key).or_insert(0) += 1;
                }
            }
        }
        kinds
    }

    /// Writes of the bench itself among [`Cluster::writes`] for `n` ContentSites changed.
    fn bench_writes(&self, n: u64) -> u64 {
        if self.server.is_some() { 0 } else { n }
    }

    /// MongoDB, Service and ContentSite creates, updates and patches (not in dry run) in kube-apiserver's
    /// `apiserver_request_total` (not deletes: the namespace controller clearing an earlier
    /// run's namespace would count).
    async fn metric_writes(&self) -> u64 {
        let request = hyper::Request::get("/metrics")
            .body(Vec::new())
            .expect("request");
        let text = self
            .client
            .request_text(request)
            .await
            .expect("kube-apiserver /metrics");
        text.lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
            .filter(|l| {
                ["APPLY", "PATCH", "POST", "PUT"]
                    .iter()
                    .any(|v| l.contains(&format!("verb=\"{v}\"")))
            })
            .filter(|l| !l.contains("dry_run=\"All\""))
            .filter(|l| {
                ["mongodb", "services", "contentsites"]
                    .iter()
                    .any(|r| l.contains(&format!("resource=\"{r}\"")))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    fn server_cpu(&self) -> f64 {
        self.server_pids.iter().map(|&p| cpu_seconds(p)).sum()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Operator {
    Kubewasm,
    Controller,
}

impl Operator {
    fn label(self) -> &'static str {
        match self {
            Operator::Kubewasm => "kubewasm, Rust plugin",
            Operator::Controller => "kube-rs Controller",
        }
    }

    fn start(
        self,
        cluster: &Cluster,
        plugins: &Path,
        ns: &str,
        concurrency: u16,
        log: &Path,
    ) -> Child {
        let log = std::fs::File::create(log).expect("log file");
        let mut cmd = match self {
            Operator::Kubewasm => {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
                cmd.args(["--log-format", "json", "run", "--metrics-addr", "off"])
                    .args(["--no-reload", "--no-plugin-objects", "--no-impersonation"])
                    .arg("--concurrency")
                    .arg(concurrency.to_string())
                    .args(["--namespace", ns])
                    .arg("--plugins")
                    .arg(plugins)
                    .arg("--approvals")
                    .arg(common::root().join("plugins/approvals.yaml"))
                    .arg("--kubeconfig")
                    .arg(&cluster.kubeconfig);
                cmd
            }
            Operator::Controller => {
                let mut cmd = Command::new(std::env::current_exe().expect("bench binary"));
                cmd.env(CONTROLLER_KUBECONFIG_ENV, &cluster.kubeconfig)
                    .env(CONTROLLER_NAMESPACE_ENV, ns)
                    .env("KUBEWASM_BENCH_CONCURRENCY", concurrency.to_string())
                    // kube logs its ready line at debug.
                    .env("RUST_LOG", "info,kube_runtime::controller=debug");
                cmd
            }
        };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the operator")
    }

    /// The log line saying the operator's cache of ContentSites is synced.
    fn ready_line(self) -> &'static str {
        match self {
            Operator::Kubewasm => "cache synced",
            Operator::Controller => "store is ready",
        }
    }
}

/// One operator's figures.
struct Figures {
    create: Duration,
    update: Duration,
    hwm_kib: u64,
    cpu: f64,
    writes: u64,
    server_cpu: f64,
}

/// The bench's view of the children: reflectors of the namespace's MongoDBs and Services.
struct Children {
    dbs: Store<DynamicObject>,
    services: Store<Service>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Children {
    async fn watch(client: &kube::Client, ns: &str) -> Children {
        let ar = common::mongodb();
        let db_writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
        let dbs = db_writer.as_reader();
        let db_stream = watcher::watcher(
            Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar),
            watcher::Config::default(),
        )
        .default_backoff()
        .reflect(db_writer);
        let svc_writer = reflector::store::Writer::<Service>::default();
        let services = svc_writer.as_reader();
        let svc_stream = watcher::watcher(
            Api::<Service>::namespaced(client.clone(), ns),
            watcher::Config::default(),
        )
        .default_backoff()
        .reflect(svc_writer);
        let tasks = vec![
            tokio::spawn(db_stream.for_each(|_| async {})),
            tokio::spawn(svc_stream.for_each(|_| async {})),
        ];
        dbs.wait_until_ready().await.expect("MongoDB reflector");
        services
            .wait_until_ready()
            .await
            .expect("Service reflector");
        Children {
            dbs,
            services,
            tasks,
        }
    }

    /// Waits until `done` holds for the MongoDBs and Services (checked every 50 ms).
    async fn until(
        &self,
        what: &str,
        within: Duration,
        done: impl Fn(&[std::sync::Arc<DynamicObject>], usize) -> bool,
    ) {
        let start = Instant::now();
        while !done(&self.dbs.state(), self.services.len()) {
            assert!(
                start.elapsed() < within,
                "{what}: not done within {within:?} ({} MongoDB, {} Service)",
                self.dbs.len(),
                self.services.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Whether a request was sent with `dryRun` (a write that stores nothing: kubewasm reads
/// an object it may not delete that way before a create adopting it would write owner
/// references, see `event/preflight.rs`), which the writes leave out.
fn dry_run(path: &str) -> bool {
    path.split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(|p| p.starts_with("dryRun=")))
}

/// Waits for `needle` in the operator's log file.
async fn wait_log(child: &mut Child, log: &Path, needle: &str, within: Duration) {
    let start = Instant::now();
    loop {
        if std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(needle)
        {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            panic!("the operator exited ({status}) before {needle:?}:\n{text}");
        }
        if start.elapsed() > within {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            panic!(
                "no {needle:?} within {within:?}; the log ends:\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A ContentSite asking for `members` database members.
fn site(i: usize, ns: &str, members: u32) -> serde_json::Value {
    json!({
        "apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
        "metadata": {"name": format!("site-{i}"), "namespace": ns},
        "spec": {"title": format!("Site {i}"), "hostname": format!("site-{i}.example.com"),
                 "database": {"members": members, "version": "7.0.12"}},
    })
}

/// Writes the operator sent until two seconds pass without a new one (the last
/// reconciles of a burst may land after the children match).
async fn settled_writes(cluster: &Cluster) -> u64 {
    let mut last = cluster.writes().await;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = cluster.writes().await;
        if now == last {
            return now;
        }
        last = now;
    }
}

async fn run_one(
    cluster: &Cluster,
    op: Operator,
    plugins: &Path,
    (parents, concurrency): (usize, u16),
    ns: &str,
) -> Figures {
    let client = &cluster.client;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let log = cluster.dir.path().join(format!("{ns}.log"));
    let mut child = op.start(cluster, plugins, ns, concurrency, &log);
    wait_log(&mut child, &log, op.ready_line(), Duration::from_secs(300)).await;
    let children = Children::watch(client, ns).await;
    let pid = child.id();
    let sites: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("sites.kubewasm.dev", "v1alpha1", "ContentSite"),
            "contentsites",
        ),
    );
    let (cpu0, server0, writes0) = (
        cpu_seconds(pid),
        cluster.server_cpu(),
        cluster.writes().await,
    );
    let within = Duration::from_secs(600);

    let started = Instant::now();
    futures::stream::iter(0..parents)
        .for_each_concurrent(16, |i| {
            let sites = sites.clone();
            async move {
                let object = serde_json::from_value(site(i, ns, 1)).expect("site");
                sites
                    .create(&PostParams::default(), &object)
                    .await
                    .expect("create ContentSite");
            }
        })
        .await;
    children
        .until("create", within, |dbs, services| {
            dbs.len() == parents && services == parents
        })
        .await;
    let create = started.elapsed();

    let started = Instant::now();
    futures::stream::iter(0..parents)
        .for_each_concurrent(16, |i| {
            let sites = sites.clone();
            async move {
                let patch = json!({"spec": {"database": {"members": 3}}});
                sites
                    .patch(
                        &format!("site-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .expect("change ContentSite");
            }
        })
        .await;
    children
        .until("update", within, |dbs, _| {
            dbs.iter()
                .filter(|d| d.data.pointer("/spec/members") == Some(&json!(3)))
                .count()
                == parents
        })
        .await;
    let update = started.elapsed();
    let cpu = cpu_seconds(pid) - cpu0;
    let server_cpu = cluster.server_cpu() - server0;
    let writes = (settled_writes(cluster).await - writes0)
        .saturating_sub(cluster.bench_writes(2 * parents as u64));
    let hwm_kib = rss_kib(pid).1;
    let _ = child.kill();
    let _ = child.wait();
    drop(children);
    if cluster.server.is_none() {
        let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    }
    Figures {
        create,
        update,
        hwm_kib,
        cpu,
        writes,
        server_cpu,
    }
}

async fn drive(plugins: &Path, parents: usize, reps: usize, concurrency: u16) {
    let cluster = Cluster::start().await;
    let tag = std::process::id();
    let mut rows = Vec::new();
    for rep in 1..=reps {
        for op in [Operator::Kubewasm, Operator::Controller] {
            let short = if op == Operator::Kubewasm {
                "kubewasm"
            } else {
                "controller"
            };
            let ns = format!("bench-{short}-{tag}-{rep}");
            let f = run_one(&cluster, op, plugins, (parents, concurrency), &ns).await;
            eprintln!(
                "{} (rep {rep}): create {:.1} s, update {:.1} s, peak RSS {:.1} MiB, CPU {:.2} s, writes {}",
                op.label(),
                f.create.as_secs_f64(),
                f.update.as_secs_f64(),
                mib(f.hwm_kib),
                f.cpu,
                f.writes
            );
            eprintln!(
                "writes so far by method and resource: {:?}",
                cluster.write_kinds()
            );
            rows.push((rep, op, f));
        }
    }
    report(&cluster, parents, &rows);
    if let Some(server) = cluster.server {
        server.shutdown().await;
    }
}

fn report(cluster: &Cluster, parents: usize, rows: &[(usize, Operator, Figures)]) {
    let where_ = if cluster.server.is_some() {
        "the embedded API server"
    } else {
        "a real cluster"
    };
    let server_col = !cluster.server_pids.is_empty();
    println!("{parents} ContentSites on {where_}");
    println!(
        "operator | rep | e2e create s | update s | peak RSS MiB | CPU s | writes{}",
        if server_col {
            " | API server + etcd CPU s"
        } else {
            ""
        }
    );
    println!(
        "---|---|---|---|---|---|---{}",
        if server_col { "|---" } else { "" }
    );
    for (rep, op, f) in rows {
        println!(
            "{} | {rep} | {:.1} | {:.1} | {:.1} | {:.2} | {}{}",
            op.label(),
            f.create.as_secs_f64(),
            f.update.as_secs_f64(),
            mib(f.hwm_kib),
            f.cpu,
            f.writes,
            if server_col {
                format!(" | {:.1}", f.server_cpu)
            } else {
                String::new()
            }
        );
    }
    // kubewasm / Controller per repetition.
    for pair in rows.chunks(2) {
        if let [(rep, _, k), (_, _, c)] = pair {
            let r = |a: f64, b: f64| {
                if b > 0.0 {
                    format!("{:.2}x", a / b)
                } else {
                    "-".into()
                }
            };
            println!(
                "kubewasm / Controller | {rep} | {} | {} | {} | {} | {}{}",
                r(k.create.as_secs_f64(), c.create.as_secs_f64()),
                r(k.update.as_secs_f64(), c.update.as_secs_f64()),
                r(k.hwm_kib as f64, c.hwm_kib as f64),
                r(k.cpu, c.cpu),
                r(k.writes as f64, c.writes as f64),
                if server_col {
                    format!(" | {}", r(k.server_cpu, c.server_cpu))
                } else {
                    String::new()
                }
            );
        }
    }
}
