//! What the host's caches cost, against a kube-rs reflector holding the same objects, in one
//! run: `cargo bench --workspace --bench cache_memory` (after `bash tests/plugins/build.sh`).
//!
//! For each object count (0, 1,000 and 10,000 by default; `KUBEWASM_BENCH_LARGE=1` adds
//! 100,000; `KUBEWASM_BENCH_COUNTS=0,500` overrides) an embedded API server is seeded with
//! MongoDB objects of about 1 KiB each (as stored, without managedFields), their
//! managedFields as a server-side apply writes them, so the server sends managedFields as a
//! real one does. Then, one after the other, processes list and watch them; for each, the
//! time from its start to its first sync, and its resident memory once synced and steady
//! (from `/proc/PID/status`):
//!
//! - `kubewasm run` with the test plugin `observer`, which watches MongoDBs and writes
//!   nothing (what is measured is the cache): once declaring no fields (whole objects), once
//!   declaring three (`watch.fields`: the projected cache); other plugins through
//!   `KUBEWASM_BENCH_PLUGIN` and `KUBEWASM_BENCH_PROJECTION_PLUGIN` (see [`variants`]);
//! - this bench's own binary as a plain `kube::runtime::reflector` of `DynamicObject`s
//!   (what a kube-rs controller holds per watched kind).
//!
//! Bytes per object are `(RSS(n) - RSS(0)) / n` for each. Nothing here asserts a figure:
//! it reports them.

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kubewasm_apiserver::{ApiServer, Config};
use serde_json::json;

use common::{mib, mongodb, root, rss_kib, status_kib};

const REFLECTOR_ENV: &str = "KUBEWASM_BENCH_REFLECTOR_KUBECONFIG";

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

/// A MongoDB of about 1 KiB as stored (without managedFields), as JSON.
fn object(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {
            "name": format!("db-{i:06}"), "namespace": "bench",
            "labels": {"app.kubernetes.io/name": "mongodb", "app.kubernetes.io/part-of": "bench",
                       "team": format!("team-{}", i % 17)},
            "annotations": {"bench.kubewasm.dev/notes": "x".repeat(200)},
        },
        "spec": {
            "type": "ReplicaSet", "members": 3, "version": "7.0.12",
            "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}},
            "additionalMongodConfig": {"net": {"maxIncomingConnections": 2000},
                                        "storage": {"wiredTiger": {"engineConfig": {"cacheSizeGB": 1}}}},
            "podSpec": {"cpu": "500m", "memory": "1Gi", "persistence": {"single": {"storage": "10Gi"}}},
            "description": "y".repeat(150),
        }
    })
}

struct Measured {
    /// From the process's start to its first sync.
    sync: Duration,
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

/// The whole-object run's settings for the default plugin (`observer`, a test plugin that
/// watches MongoDBs and writes nothing): no fields declared.
const WHOLE_SETTINGS: &str = "{}\n";
/// The projected run's: a few fields, as a plugin reading only these would declare.
const PROJECTED_SETTINGS: &str = "fields: [spec.members, spec.version, status.phase]\n";

/// One configuration of the host: a plugin and its settings.
#[derive(Clone)]
struct Variant {
    label: &'static str,
    wasm: PathBuf,
    settings: String,
}

impl Variant {
    /// The plugin's file name without `.wasm`: its name in the plugins directory.
    fn name(&self) -> String {
        self.wasm
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The variants to run, one after the other: whole objects and a projection of a few
/// fields, both with `target/test-plugins/observer.wasm` (tests/plugins/build.sh) unless
/// `KUBEWASM_BENCH_PLUGIN` / `KUBEWASM_BENCH_PROJECTION_PLUGIN` name other plugins (with
/// `KUBEWASM_BENCH_SETTINGS` / `KUBEWASM_BENCH_PROJECTION_SETTINGS`, YAML text).
fn variants(root: &Path) -> Vec<Variant> {
    let observer = root.join("target/test-plugins/observer.wasm");
    let plugin = |var: &str| {
        std::env::var(var)
            .map(PathBuf::from)
            .unwrap_or_else(|_| observer.clone())
    };
    let settings = |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.into());
    vec![
        Variant {
            label: "whole",
            wasm: plugin("KUBEWASM_BENCH_PLUGIN"),
            settings: settings("KUBEWASM_BENCH_SETTINGS", WHOLE_SETTINGS),
        },
        Variant {
            label: "projected",
            wasm: plugin("KUBEWASM_BENCH_PROJECTION_PLUGIN"),
            settings: settings("KUBEWASM_BENCH_PROJECTION_SETTINGS", PROJECTED_SETTINGS),
        },
    ]
}

/// The operator's approval of exactly what the plugin asks for with its settings, as
/// `kubewasm inspect --approval` prints it, written to DIR/approvals.yaml.
fn approvals(variant: &Variant, dir: &Path) -> PathBuf {
    let staged = dir.join("stage");
    std::fs::create_dir_all(&staged).expect("stage dir");
    let name = variant.name();
    std::fs::copy(&variant.wasm, staged.join(format!("{name}.wasm"))).expect("stage plugin");
    std::fs::write(staged.join(format!("{name}.yaml")), &variant.settings).expect("stage settings");
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "error", "inspect", "--approval"])
        .arg(staged.join(format!("{name}.wasm")))
        .output()
        .expect("kubewasm inspect --approval");
    let path = dir.join("approvals.yaml");
    std::fs::write(&path, &out.stdout).expect("approvals");
    path
}

/// An embedded API server holding `n` MongoDBs (seeded in batches, each object's fields
/// owned by `bench-writer` as a server-side apply would make them).
async fn filled_server(n: usize) -> ApiServer {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let client = kube::Client::try_from(server.client_config()).expect("client");
    let docs =
        kubewasm::apply::manifests::read_manifests(&[root().join("examples/crds")]).expect("CRDs");
    kubewasm::apply::manifests::apply_manifests(&client, &docs, Duration::from_secs(20))
        .await
        .expect("apply CRDs");
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "databases"}});
    server
        .seed(vec![namespace], "bench-writer")
        .expect("seed namespace");
    for batch in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let objects = batch.iter().map(|&i| object(i)).collect();
        server.seed(objects, "bench-writer").expect("seed MongoDBs");
    }
    server
}

/// One `kubewasm run` of `variant` over the server's objects, measured once synced.
fn measure_host(n: usize, variant: &Variant, kubeconfig: &Path) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins dir");
    let approvals = approvals(variant, dir.path());
    let name = variant.name();
    std::fs::write(plugins.join(format!("{name}.yaml")), &variant.settings).expect("settings");
    std::fs::copy(&variant.wasm, plugins.join(format!("{name}.wasm"))).expect("plugin");
    let started = Instant::now();
    let mut host = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log-format", "json", "--log", "info", "run"])
        .args(["--metrics-addr", "off", "--no-reload"])
        .arg("--plugins")
        .arg(&plugins)
        .arg("--approvals")
        .arg(&approvals)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubewasm run");
    let mut err = BufReader::new(host.stderr.take().expect("stderr"));
    let line = wait_line(&mut err, "cache synced", Duration::from_secs(600));
    let sync = started.elapsed();
    assert!(
        line.contains(&format!("\"objects\":{n}")),
        "host synced a different count: {line}"
    );
    // Keep draining the log so the host never blocks on a full pipe.
    let drain = std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let measured = settle_and_read(&host, sync);
    stop(&mut host);
    let _ = drain.join();
    measured
}

/// The reflector over the same objects, measured once synced.
fn measure_reflector(n: usize, kubeconfig: &Path) -> Measured {
    let started = Instant::now();
    let mut refl = Command::new(std::env::current_exe().expect("bench binary"))
        .env(REFLECTOR_ENV, kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start reflector");
    let mut out = BufReader::new(refl.stdout.take().expect("stdout"));
    let line = wait_line(&mut out, "synced", Duration::from_secs(600));
    let sync = started.elapsed();
    assert_eq!(line.trim(), format!("synced {n}"), "reflector count");
    let measured = settle_and_read(&refl, sync);
    stop(&mut refl);
    measured
}

/// The host per variant, then the reflector, over `n` objects.
async fn measure(n: usize, variants: &[Variant]) -> (Vec<Measured>, Measured) {
    let server = filled_server(n).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    // The server runs on this runtime: measure from a blocking thread.
    let variants = variants.to_vec();
    let (hosts, refl) = tokio::task::spawn_blocking(move || {
        let hosts: Vec<Measured> = variants
            .iter()
            .map(|v| measure_host(n, v, &kubeconfig))
            .collect();
        (hosts, measure_reflector(n, &kubeconfig))
    })
    .await
    .expect("measure");
    server.shutdown().await;
    (hosts, refl)
}

/// Read the resident size once it stops moving (allocations of the sync settle).
fn settle_and_read(child: &Child, sync: Duration) -> Measured {
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
        sync,
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
    let large = std::env::var("KUBEWASM_BENCH_LARGE").is_ok_and(|v| v == "1");
    let counts: Vec<usize> = match std::env::var("KUBEWASM_BENCH_COUNTS") {
        Ok(list) => list
            .split(',')
            .filter_map(|c| c.trim().parse().ok())
            .collect(),
        Err(_) if full && large => vec![0, 1_000, 10_000, 100_000],
        Err(_) if full => vec![0, 1_000, 10_000],
        Err(_) => vec![0, 100],
    };
    let variants = variants(&root());
    if let Some(v) = variants.iter().find(|v| !v.wasm.is_file()) {
        eprintln!(
            "cache_memory: {} is missing; run `bash plugins/build.sh` first",
            v.wasm.display()
        );
        return;
    }
    let mut rows = Vec::new();
    for &n in &counts {
        let (hosts, refl) = runtime.block_on(measure(n, &variants));
        rows.push((n, hosts, refl));
    }
    report(&variants, &rows);
}

/// The table: per count, first-sync times, RSS, and bytes per object against the reflector's.
fn report(variants: &[Variant], rows: &[(usize, Vec<Measured>, Measured)]) {
    let base = rows.iter().find(|(n, _, _)| *n == 0);
    let per = |n: usize, now: u64, zero: Option<u64>| match zero {
        Some(zero) if n > 0 => Some((now.saturating_sub(zero) as f64 * 1024.0) / n as f64),
        _ => None,
    };
    let fmt = |v: Option<f64>| v.map(|b| format!("{b:.0}")).unwrap_or_else(|| "-".into());
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    let mut header = String::from(
        "objects | reflector first sync s | reflector RSS (peak) MiB | reflector B/object",
    );
    for v in variants {
        header += &format!(
            " | kubewasm {l} first sync s | kubewasm {l} RSS (peak) MiB, anon / file / shmem | kubewasm {l} B/object | {l} / reflector",
            l = v.label
        );
    }
    println!("{header}");
    println!("{}", vec!["---"; 4 + 4 * variants.len()].join("|"));
    for (n, hosts, r) in rows {
        let rp = per(*n, r.rss_kib, base.map(|(_, _, r0)| r0.rss_kib));
        let mut line = format!(
            "{n} | {:.2} | {:.1} ({:.1}) | {}",
            r.sync.as_secs_f64(),
            mib(r.rss_kib),
            mib(r.hwm_kib),
            fmt(rp)
        );
        for (i, h) in hosts.iter().enumerate() {
            let hp = per(
                *n,
                h.rss_kib,
                base.and_then(|(_, h0, _)| h0.get(i)).map(|m| m.rss_kib),
            );
            line += &format!(
                " | {:.2} | {:.1} ({:.1}), {:.1} / {:.1} / {:.1} | {} | {}",
                h.sync.as_secs_f64(),
                mib(h.rss_kib),
                mib(h.hwm_kib),
                mib(h.anon_kib),
                mib(h.file_kib),
                mib(h.shmem_kib),
                fmt(hp),
                ratio(hp, rp)
            );
        }
        println!("{line}");
    }
}
