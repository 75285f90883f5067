//! The call path: a ~2 KB ContentSite event in, intents out.
//!
//! Compares, in one process (so the ratios hold even on a busy machine):
//! - `native`: the same plugin logic compiled natively (`contentsite_provisioner::handle_event`),
//!   including JSON parsing of the event and serialization of the intents — the baseline;
//! - `<lang>/reused-instance`: the real `.wasm` (the Rust, Go, Python and JavaScript builds of
//!   the same plugin) through the host's call path, reusing instances;
//! - `<lang>/fresh-instance`: a new Store + instantiation from the `InstancePre` per event.
//!
//! A language whose build is missing is skipped with a message naming the file and the
//! build script (`plugins/build.sh` builds them all into `target/plugins/<lang>/`). Compiled code
//! goes through the host's code cache (`KUBEWASM_CACHE_DIR`, default
//! `target/kubewasm-cache`), so only the first run pays for compiling the big runtimes.
//! `KUBEWASM_BENCH_PLUGINS=DIR` takes the builds from DIR (same layout) instead.
//! The event and settings are the same for every language; each call must return the
//! three intents.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kubewasm::core::event::EventType;
use kubewasm::runtime::{
    CompiledPlugin, LoadOptions, Loader, NoCluster, PluginEngine, PluginEvent, PluginFile,
};
use serde_json::json;

fn site_json() -> String {
    let mut annotations = serde_json::Map::new();
    for i in 0..12 {
        annotations.insert(format!("example.com/note-{i}"), json!("x".repeat(100)));
    }
    let site = json!({
        "apiVersion": "sites.kubewasm.dev/v1alpha1",
        "kind": "ContentSite",
        "metadata": {
            "name": "blog", "namespace": "shop", "uid": "9b1f1c2e-5d7a-4c1b-8d3e-0f6a2b4c6d8e",
            "resourceVersion": "12345", "generation": 3,
            "labels": {"team": "content", "tier": "frontend"},
            "annotations": annotations,
        },
        "spec": {"domain": "blog.example.com", "database": {"members": 3, "version": "7.0.12"}},
    });
    site.to_string()
}

/// The plugin builds, in table order: (bench name prefix, file under target/plugins, script).
const BUILDS: [(&str, &str, &str); 4] = [
    (
        "rust",
        "rust/contentsite-provisioner.wasm",
        "plugins/rust/build.sh",
    ),
    (
        "go",
        "go/contentsite-provisioner.wasm",
        "plugins/go/build.sh",
    ),
    (
        "python",
        "python/contentsite-provisioner.wasm",
        "plugins/python/build.sh",
    ),
    (
        "js",
        "js/contentsite-provisioner.wasm",
        "plugins/js/build.sh",
    ),
];

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Another build folder (same layout as target/plugins), e.g. to compare a layer change.
    let plugins_dir = std::env::var_os("KUBEWASM_BENCH_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/plugins"));
    let cache_dir = std::env::var_os("KUBEWASM_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/kubewasm-cache"));
    let object = site_json();
    eprintln!("event object: {} bytes", object.len());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let engine = PluginEngine::new().expect("wasmtime engine");
    let loader = |reuse: bool| {
        let options = LoadOptions {
            reuse_instances: reuse,
            pool_size: 1,
            ..LoadOptions::default()
        };
        Loader::new(engine.clone(), options, Some(&cache_dir)).expect("code cache")
    };
    let (reusing, fresh) = (loader(true), loader(false));
    let load = |loader: &Loader, path: &Path| -> Arc<CompiledPlugin> {
        let file = PluginFile::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let loaded = rt
            .block_on(loader.load(file))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Arc::new(loaded.plugin)
    };

    let mut plugins = Vec::new();
    for (lang, file, script) in BUILDS {
        let path = plugins_dir.join(file);
        if !path.is_file() {
            eprintln!(
                "skipping {lang}: {} is not built (run {script})",
                path.display()
            );
            continue;
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        eprintln!("{lang}: {} ({size} bytes)", path.display());
        plugins.push((format!("{lang}/reused-instance"), load(&reusing, &path)));
        plugins.push((format!("{lang}/fresh-instance"), load(&fresh, &path)));
    }

    let event = PluginEvent {
        event_type: EventType::Added,
        watch_id: "sites".into(),
        object: object.clone().into(),
        old_object: None,
    };
    let mut group = c.benchmark_group("call_path");
    group.bench_function("native", |b| {
        // The SDK's native log echoes to stderr; a plugin's lines go to the host's log.
        kubewasm_sdk::testing::silence_logs();
        let settings = contentsite_provisioner::Settings::default();
        b.iter(|| {
            let ev =
                kubewasm_sdk::Event::new(kubewasm_sdk::EventType::Added, "sites", object.as_str());
            let intents =
                contentsite_provisioner::handle_event(&ev, &settings).expect("native intents");
            let out: Vec<String> = intents
                .iter()
                .map(|i| serde_json::to_string(i).expect("intent JSON"))
                .collect();
            assert_eq!(out.len(), 3);
            out
        })
    });
    for (name, plugin) in &plugins {
        group.bench_function(name.as_str(), |b| {
            b.to_async(&rt).iter(|| async {
                let out = plugin
                    .handle(&event, "ContentSite shop/blog", Arc::new(NoCluster))
                    .await
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(out.len(), 3, "{name}");
                out
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
