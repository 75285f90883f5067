//! Memory of pooled plugin instances, per language: how much resident memory one more
//! warm (pooled) instance of a plugin costs the host.
//!
//! For each build of the ContentSite provisioner (Rust, Go, JavaScript, Python, C; built
//! by `plugins/build.sh` into `target/plugins/<lang>/`), the bench loads it, warms `N` instances
//! (`KUBEWASM_BENCH_INSTANCES`, default 8) that each handled one ~2 KB ContentSite event
//! and sit in the pool, and reports the host's RSS growth per instance and the linear
//! memory each instance holds (what the pool's memory budget counts). The instances of
//! one language share one compiled component, as a plugin's pool does.
//!
//! Run: `cargo bench -p kubewasm --bench pool_memory` (figures on stdout; no thresholds).
//! Compiled code goes through the code cache (`KUBEWASM_CACHE_DIR`, default
//! `target/kubewasm-cache`). The whole-host figure (peak RSS of `kubewasm dev` provisioning
//! 1,000 ContentSites with the Python plugin) is `tests/bench/python-provisioning-rss.sh`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kubewasm::core::event::EventType;
use kubewasm::runtime::{LoadOptions, Loader, NoCluster, PluginEngine, PluginEvent, PluginFile};
use serde_json::json;

const BUILDS: [(&str, &str); 5] = [
    ("rust", "rust/contentsite-provisioner.wasm"),
    ("go", "go/contentsite-provisioner.wasm"),
    ("js", "js/contentsite-provisioner.wasm"),
    ("python", "python/contentsite-provisioner.wasm"),
    ("c", "c/contentsite-provisioner.wasm"),
];

/// Resident and peak resident memory of this process, KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn event(i: usize) -> PluginEvent {
    let site = json!({
        "apiVersion": "sites.kubewasm.dev/v1alpha1",
        "kind": "ContentSite",
        "metadata": {"name": format!("site-{i}"), "namespace": "shop",
                     "uid": format!("9b1f1c2e-5d7a-4c1b-8d3e-{i:012}"),
                     "resourceVersion": "12345", "generation": 1,
                     "annotations": {"example.com/note": "x".repeat(1500)}},
        "spec": {"domain": format!("site-{i}.example.com"),
                 "database": {"members": 3, "version": "7.0.12"}},
    });
    PluginEvent {
        event_type: EventType::Added,
        watch_id: "sites".into(),
        object: site.to_string().into(),
        old_object: None,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let plugins_dir = std::env::var_os("KUBEWASM_BENCH_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/plugins"));
    let cache_dir = std::env::var_os("KUBEWASM_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/kubewasm-cache"));
    let n: usize = std::env::var("KUBEWASM_BENCH_INSTANCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let engine = PluginEngine::new().expect("wasmtime engine");
    // All n instances pooled, whatever the derived cap would be on this machine.
    let options = LoadOptions {
        pool_size: n,
        limits: kubewasm::runtime::Limits {
            max_instances: n,
            ..Default::default()
        },
        ..LoadOptions::default()
    };
    let loader = Loader::new(engine, options, Some(&cache_dir)).expect("code cache");

    println!(
        "| language | component | RSS per pooled instance | linear memory per instance | host RSS with {n} + 1 |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (lang, file) in BUILDS {
        let path = plugins_dir.join(file);
        if !path.is_file() {
            eprintln!(
                "skipping {lang}: {} is not built (run plugins/build.sh)",
                path.display()
            );
            continue;
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let load = || {
            rt.block_on(async {
                let file = PluginFile::read(&path).unwrap_or_else(|e| panic!("{lang}: {e}"));
                let loaded = loader
                    .load(file)
                    .await
                    .unwrap_or_else(|e| panic!("{lang}: {e}"));
                loaded.plugin
            })
        };
        let call = |plugin: &kubewasm::runtime::CompiledPlugin, i: usize| {
            let out = rt
                .block_on(plugin.handle(&event(i), "shop/site", Arc::new(NoCluster)))
                .unwrap_or_else(|e| panic!("{lang}: {e}"));
            assert!(!out.is_empty(), "{lang}: no intents");
        };
        // One plugin warmed first, so code pages and the engine's own lazies are
        // resident before the baseline.
        let first = load();
        call(&first, 0);
        let (before, _) = rss_kib();
        // `n` loads of the same file share one compiled component (the loader's cache),
        // as one plugin's pooled instances do; each keeps one warm instance.
        let plugins: Vec<_> = (0..n)
            .map(|i| {
                let p = load();
                call(&p, i + 1);
                p
            })
            .collect();
        let (after, _) = rss_kib();
        let pooled: usize = plugins.iter().map(|p| p.pool_stats().pooled).sum();
        let bytes: usize = plugins.iter().map(|p| p.pool_stats().pooled_bytes).sum();
        let per = after.saturating_sub(before) as f64 / pooled.max(1) as f64 / 1024.0;
        let linear = bytes as f64 / pooled.max(1) as f64 / (1 << 20) as f64;
        println!(
            "| {lang} | {:.1} MB | {per:.1} MiB | {linear:.1} MiB | {} MiB |",
            size as f64 / 1e6,
            after / 1024,
        );
        drop(plugins);
        drop(first);
    }
    let (_, peak) = rss_kib();
    println!("\npeak RSS of the bench process: {} MiB", peak / 1024);
}
