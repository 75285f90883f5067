//! What the host's caches cost, against a kube-rs reflector holding the same objects, in one
//! run: `cargo bench -p kubewasm-cli --bench cache_memory` (after `bash plugins/build.sh`).
//!
//! For each object count (0, 1,000 and 10,000 by default; `KUBEWASM_BENCH_COUNTS=0,500`
//! overrides) an embedded API server is filled with MongoDB objects of about 2 KiB each,
//! written with server-side apply so the server sends managedFields, as a real one does.
//! Then, one after the other, two processes list and watch them and their resident memory
//! is read from `/proc/PID/status` once synced:
//!
//! - `kubewasm run` with one small Rust plugin (`mongodb-monitor`, limited by its settings
//!   to another namespace, so it writes nothing: what is measured is the cache);
//! - this bench's own binary as a plain `kube::runtime::reflector` of `DynamicObject`s
//!   (what a kube-rs controller holds per watched kind).
//!
//! Bytes per object are `(RSS(n) - RSS(0)) / n` for each. Nothing here asserts a figure:
//! it reports them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kubewasm_apiserver::{ApiServer, Config};
use serde_json::json;

const REFLECTOR_ENV: &str = "KUBEWASM_BENCH_REFLECTOR_KUBECONFIG";

fn mongodb() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("mongodb.com", "v1", "MongoDB"),
        "mongodb",
    )
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Resident and peak resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let f = status_kib(pid);
    (f("VmRSS:"), f("VmHWM:"))
}

/// A reader of `/proc/PID/status` fields, in KiB (0 when absent).
fn status_kib(pid: u32) -> impl Fn(&str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    move |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// The reflector role: list and watch every MongoDB into a reflector store, say `synced N`
/// on stdout, then keep the store until stdin closes.
async fn reflector_role(kubeconfig: &str) {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let ar = mongodb();
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
    let reader = writer.as_reader();
    let stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.expect("reflector ready");
    println!("synced {}", reader.state().len());
    // Hold the store until the bench is done measuring.
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    })
    .await
    .ok();
    task.abort();
}

/// A MongoDB of about 2 KiB, as JSON.
fn object(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {
            "name": format!("db-{i:05}"), "namespace": "bench",
            "labels": {"app.kubernetes.io/name": "mongodb", "app.kubernetes.io/part-of": "bench",
                       "team": format!("team-{}", i % 17)},
            "annotations": {"bench.kubewasm.dev/notes": "x".repeat(600)},
        },
        "spec": {
            "type": "ReplicaSet", "members": 3, "version": "7.0.12",
            "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}},
            "additionalMongodConfig": {"net": {"maxIncomingConnections": 2000},
                                        "storage": {"wiredTiger": {"engineConfig": {"cacheSizeGB": 1}}}},
            "podSpec": {"cpu": "500m", "memory": "1Gi", "persistence": {"single": {"storage": "10Gi"}}},
            "description": "y".repeat(500),
        }
    })
}

struct Measured {
    rss_kib: u64,
    hwm_kib: u64,
    /// RSS split: anonymous (heap, stacks), file-backed (code), shared memory (memfds).
    anon_kib: u64,
    file_kib: u64,
    shmem_kib: u64,
}

/// Wait for a line on `reader` containing `needle`; the line.
fn wait_line(reader: &mut impl BufRead, needle: &str, within: Duration) -> String {
    let start = Instant::now();
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).expect("read child output");
        assert!(n > 0, "child exited before printing {needle:?}");
        if line.contains(needle) {
            return line;
        }
        assert!(start.elapsed() < within, "no {needle:?} within {within:?}");
    }
}

const SETTINGS: &str = "namespace: databases\n";

/// The operator's approval of exactly what the plugin asks for with [`SETTINGS`], as
/// `kubewasm inspect --approval` prints it, written to DIR/approvals.yaml.
fn approvals(wasm: &Path, dir: &Path) -> PathBuf {
    let staged = dir.join("stage");
    std::fs::create_dir_all(&staged).expect("stage dir");
    std::fs::copy(wasm, staged.join("mongodb-monitor.wasm")).expect("stage plugin");
    std::fs::write(staged.join("mongodb-monitor.yaml"), SETTINGS).expect("stage settings");
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "error", "inspect", "--approval"])
        .arg(staged.join("mongodb-monitor.wasm"))
        .output()
        .expect("kubewasm inspect --approval");
    let path = dir.join("approvals.yaml");
    std::fs::write(&path, &out.stdout).expect("approvals");
    path
}

async fn measure(n: usize, wasm: &Path) -> (Measured, Measured) {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let client = kube::Client::try_from(server.client_config()).expect("client");
    let docs =
        kubewasm::apply::manifests::read_manifests(&[root().join("examples/crds")]).expect("CRDs");
    kubewasm::apply::manifests::apply_manifests(&client, &docs, Duration::from_secs(20))
        .await
        .expect("apply CRDs");
    let ns: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("", "v1", "Namespace"),
            "namespaces",
        ),
    );
    for name in ["bench", "databases"] {
        ns.patch(
            name,
            &PatchParams::apply("bench"),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            ),
        )
        .await
        .expect("namespace");
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "bench", &mongodb());
    let writes = futures::stream::iter((0..n).map(|i| {
        let api = api.clone();
        async move {
            let o = object(i);
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            api.patch(&name, &PatchParams::apply("bench-writer"), &Patch::Apply(o))
                .await
                .expect("create MongoDB");
        }
    }))
    .buffer_unordered(16);
    writes.collect::<Vec<_>>().await;

    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins dir");
    let approvals = approvals(wasm, dir.path());
    std::fs::write(plugins.join("mongodb-monitor.yaml"), SETTINGS).expect("settings");
    std::fs::copy(wasm, plugins.join("mongodb-monitor.wasm")).expect("plugin");

    // The host.
    let mut host = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args([
            "--log-format",
            "json",
            "--log",
            "info",
            "run",
            "--metrics-addr",
            "off",
            "--no-reload",
        ])
        .arg("--plugins")
        .arg(&plugins)
        .arg("--approvals")
        .arg(&approvals)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubewasm run");
    let host_measure = {
        let mut err = BufReader::new(host.stderr.take().expect("stderr"));
        let line = wait_line(&mut err, "cache synced", Duration::from_secs(300));
        assert!(
            line.contains(&format!("\"objects\":{n}")),
            "host synced a different count: {line}"
        );
        settle_and_read(&host)
    };
    stop(&mut host);

    // The reflector.
    let mut refl = Command::new(std::env::current_exe().expect("bench binary"))
        .env(REFLECTOR_ENV, &kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start reflector");
    let refl_measure = {
        let mut out = BufReader::new(refl.stdout.take().expect("stdout"));
        let line = wait_line(&mut out, "synced", Duration::from_secs(300));
        assert_eq!(line.trim(), format!("synced {n}"), "reflector count");
        settle_and_read(&refl)
    };
    stop(&mut refl);
    server.shutdown().await;
    (host_measure, refl_measure)
}

/// Read the resident size once it stops moving (allocations of the sync settle).
fn settle_and_read(child: &Child) -> Measured {
    let mut last = rss_kib(child.id()).0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(250));
        let now = rss_kib(child.id()).0;
        if now.abs_diff(last) < 64 {
            break;
        }
        last = now;
    }
    let (rss_kib, hwm_kib) = rss_kib(child.id());
    let f = status_kib(child.id());
    Measured {
        rss_kib,
        hwm_kib,
        anon_kib: f("RssAnon:"),
        file_kib: f("RssFile:"),
        shmem_kib: f("RssShmem:"),
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(kubeconfig) = std::env::var(REFLECTOR_ENV) {
        runtime.block_on(reflector_role(&kubeconfig));
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: then run a
    // small count only, so the bench is exercised without its full cost.
    let full = std::env::args().any(|a| a == "--bench");
    let counts: Vec<usize> = match std::env::var("KUBEWASM_BENCH_COUNTS") {
        Ok(list) => list
            .split(',')
            .filter_map(|c| c.trim().parse().ok())
            .collect(),
        Err(_) if full => vec![0, 1_000, 10_000],
        Err(_) => vec![0, 100],
    };
    let wasm = root().join("target/plugins/rust/mongodb-monitor.wasm");
    if !wasm.is_file() {
        eprintln!(
            "cache_memory: {} is missing; run `bash plugins/build.sh` first",
            wasm.display()
        );
        return;
    }
    let mut rows = Vec::new();
    for &n in &counts {
        let (h, r) = runtime.block_on(measure(n, &wasm));
        rows.push((n, h, r));
    }
    let base = rows
        .iter()
        .find(|(n, _, _)| *n == 0)
        .map(|(_, h, r)| (h.rss_kib, r.rss_kib));
    println!(
        "objects | kubewasm RSS (peak) MiB | kubewasm anon / file / shmem MiB | reflector RSS (peak) MiB | kubewasm B/object | reflector B/object | ratio"
    );
    println!("---|---|---|---|---|---|---");
    for (n, h, r) in &rows {
        let mib = |k: u64| k as f64 / 1024.0;
        let per = |now: u64, zero: u64| {
            if *n == 0 {
                None
            } else {
                Some((now.saturating_sub(zero) as f64 * 1024.0) / *n as f64)
            }
        };
        let (hp, rp) = match base {
            Some((h0, r0)) => (per(h.rss_kib, h0), per(r.rss_kib, r0)),
            None => (None, None),
        };
        let fmt = |v: Option<f64>| v.map(|b| format!("{b:.0}")).unwrap_or_else(|| "-".into());
        let ratio = match (hp, rp) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        println!(
            "{n} | {:.1} ({:.1}) | {:.1} / {:.1} / {:.1} | {:.1} ({:.1}) | {} | {} | {ratio}",
            mib(h.rss_kib),
            mib(h.hwm_kib),
            mib(h.anon_kib),
            mib(h.file_kib),
            mib(h.shmem_kib),
            mib(r.rss_kib),
            mib(r.hwm_kib),
            fmt(hp),
            fmt(rp)
        );
    }
}
