//! The call path: a ~2 KB ContentSite event in, intents out.
//!
//! Compares, in one process:
//! - `native`: the same plugin logic compiled natively (`contentsite_provisioner::handle_event`),
//!   including JSON parsing of the event and serialization of the intents — the baseline;
//! - `<lang>/reused-instance`: the real `.wasm` (Rust, JavaScript, Python builds of the same
//!   plugin) through the host's call path, reusing instances;
//! - `<lang>/fresh-instance`: a new Store + instantiation from the `InstancePre` per event.
//!
//! Needs `plugins/build.sh` to have built `target/plugins/contentsite-provisioner.wasm`.

use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kubewasm::core::event::EventType;
use kubewasm::runtime::{LoadOptions, load_plugin};
use kubewasm::runtime::{NoCluster, PluginEngine, PluginEvent};
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

fn bench(c: &mut Criterion) {
    let wasm = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/plugins/contentsite-provisioner.wasm");
    assert!(
        wasm.is_file(),
        "run plugins/build.sh first ({} missing)",
        wasm.display()
    );
    let object = site_json();
    eprintln!("event object: {} bytes", object.len());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let engine = PluginEngine::new().unwrap();
    let load = |path: &Path, reuse: bool| {
        let options = LoadOptions {
            reuse_instances: reuse,
            pool_size: 1,
            ..LoadOptions::default()
        };
        Arc::new(rt.block_on(load_plugin(&engine, path, &options)).unwrap())
    };
    let rust_reused = load(&wasm, true);
    let rust_fresh = load(&wasm, false);
    let event = PluginEvent {
        event_type: EventType::Added,
        watch_id: "sites".into(),
        object: object.clone().into(),
        old_object: None,
    };

    let mut group = c.benchmark_group("call_path");
    group.bench_function("native", |b| {
        let settings = contentsite_provisioner::Settings::default();
        b.iter(|| {
            let ev =
                kubewasm_sdk::Event::new(kubewasm_sdk::EventType::Added, "sites", object.as_str());
            let intents = contentsite_provisioner::handle_event(&ev, &settings).unwrap();
            let out: Vec<String> = intents
                .iter()
                .map(|i| serde_json::to_string(i).unwrap())
                .collect();
            assert_eq!(out.len(), 3);
            out
        })
    });
    let mut plugins = vec![
        ("rust/reused-instance".to_string(), rust_reused),
        ("rust/fresh-instance".to_string(), rust_fresh),
    ];
    // The same plugin in the other languages, when plugins/build.sh built them.
    for lang in ["js", "python"] {
        let path = wasm
            .parent()
            .unwrap()
            .join(lang)
            .join("contentsite-provisioner.wasm");
        if path.is_file() {
            plugins.push((format!("{lang}/reused-instance"), load(&path, true)));
            plugins.push((format!("{lang}/fresh-instance"), load(&path, false)));
        } else {
            eprintln!("skipping {lang}: {} not built", path.display());
        }
    }
    for (name, plugin) in &plugins {
        group.bench_function(name.as_str(), |b| {
            b.to_async(&rt).iter(|| async {
                let out = plugin
                    .handle(&event, "ContentSite shop/blog", Arc::new(NoCluster))
                    .await
                    .unwrap();
                assert_eq!(out.len(), 3);
                out
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
