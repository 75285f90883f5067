//! Reload latency: a plugin file renamed into a watched plugin directory → the first event
//! handled by it (its output object exists), with a cold compile and with a code-cache hit.
//! Run with `cargo bench -p kubewasm --bench reload` after `plugins/build.sh` and
//! `tests/plugins/build.sh`. Prints medians and the cold/cached ratio per plugin.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kubewasm::event::QuarantinePolicy;
use kubewasm::event::QueueConfig;
use kubewasm::host::{
    Election, EventsConfig, Host, HostConfig, PluginsConfig, ReplicasConfig, ServeConfig,
};
use kubewasm::runtime::LoadOptions;
use kubewasm::watch::WatchConfig;
use serde_json::{Value, json};

const TRIALS: usize = 5;

struct Case {
    label: &'static str,
    /// The plugin's name: its file is NAME.wasm, approved as NAME.
    name: &'static str,
    wasm: PathBuf,
    /// Objects to create before the plugin arrives.
    objects: Vec<(ApiResource, Value)>,
    /// The output to wait for.
    output: (ApiResource, &'static str),
}

fn ar(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, kind), plural)
}

async fn trial(case: &Case, cache_dir: &Path) -> Duration {
    let server = kubewasm_apiserver::ApiServer::start(Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(server.client_config()).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let docs = kubewasm::apply::manifests::read_manifests(&[root.join("examples/crds")]).unwrap();
    kubewasm::apply::manifests::apply_manifests(&client, &docs, Duration::from_secs(20))
        .await
        .unwrap();
    for (r, obj) in &case.objects {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", r);
        api.create(
            &PostParams::default(),
            &serde_json::from_value(obj.clone()).unwrap(),
        )
        .await
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    // The operator's approval of the plugin: the seed plugins' (plugins/approvals.yaml),
    // and testkit's.
    let approvals = tempfile::tempdir().unwrap();
    std::fs::copy(
        root.join("plugins/approvals.yaml"),
        approvals.path().join("seed.yaml"),
    )
    .unwrap();
    std::fs::write(
        approvals.path().join("testkit.yaml"),
        "apiVersion: kubewasm.dev/v1alpha1\nkind: Plugin\nmetadata: {name: testkit}\n\
         spec:\n  permissions:\n    watches: [{apiVersion: v1, kind: ConfigMap}]\n    \
         grants: [{apiGroups: [''], kinds: [ConfigMap], verbs: [create]}]\n",
    )
    .unwrap();
    let config = HostConfig {
        identity: "bench".into(),
        plugins: PluginsConfig {
            dir: Some(dir.path().to_path_buf()),
            objects: None,
            approvals: Some(approvals.path().to_path_buf()),
            load: LoadOptions::default(),
            cache_dir: Some(cache_dir.to_path_buf()),
            cache_key_file: None,
            reload_debounce: Some(Duration::from_millis(50)),
            rescan_interval: None,
            access_review_interval: Duration::from_secs(120),
        },
        watch: WatchConfig {
            resync: None,
            discovery_interval: Duration::from_millis(200),
            namespaces: Vec::new(),
            ..WatchConfig::default()
        },
        events: EventsConfig {
            queue: QueueConfig::default(),
            quarantine: QuarantinePolicy::default(),
            event_interval: None,
            record: None,
            write_identity: kubewasm::apply::WriteIdentity::Host,
        },
        replicas: ReplicasConfig {
            election: Election::Alone,
            tombstone_retention: Duration::from_secs(30),
        },
        serve: ServeConfig::default(),
    };
    let host = Host::start(client.clone(), config).await.unwrap();
    let out: Api<DynamicObject> = Api::namespaced_with(client, "default", &case.output.0);
    let tmp = dir.path().join(".incoming");
    std::fs::copy(&case.wasm, &tmp).unwrap();
    let started = Instant::now();
    std::fs::rename(&tmp, dir.path().join(format!("{}.wasm", case.name))).unwrap();
    loop {
        if out.get_opt(case.output.1).await.unwrap().is_some() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{}: no output",
            case.label
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    host.shutdown().await;
    server.shutdown().await;
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cm = ar("v1", "ConfigMap", "configmaps");
    let mut cases = vec![Case {
        label: "rust testkit (146 KB)",
        name: "testkit",
        wasm: root.join("target/test-plugins/testkit.wasm"),
        objects: vec![(
            cm.clone(),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "t", "namespace": "default", "labels": {"kubewasm.dev/testkit": "testkit"}},
                   "data": {"value": "1"}}),
        )],
        output: (cm, "t-out"),
    }];
    let python = root.join("target/plugins/python/contentsite-provisioner.wasm");
    if python.is_file() {
        cases.push(Case {
            label: "python contentsite-provisioner (18 MB)",
            name: "contentsite-provisioner",
            wasm: python,
            objects: vec![(
                ar("sites.kubewasm.dev/v1alpha1", "ContentSite", "contentsites"),
                json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
                       "metadata": {"name": "blog", "namespace": "default"}, "spec": {}}),
            )],
            output: (ar("mongodb.com/v1", "MongoDB", "mongodb"), "blog-db"),
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for case in &cases {
        assert!(
            case.wasm.is_file(),
            "{} missing: build the plugins first",
            case.wasm.display()
        );
        let mut cold = Vec::new();
        for _ in 0..TRIALS {
            let empty = tempfile::tempdir().unwrap();
            cold.push(rt.block_on(trial(case, empty.path())));
        }
        let warm_cache = tempfile::tempdir().unwrap();
        rt.block_on(trial(case, warm_cache.path()));
        let mut cached = Vec::new();
        for _ in 0..TRIALS {
            cached.push(rt.block_on(trial(case, warm_cache.path())));
        }
        let (c, h) = (median(cold), median(cached));
        println!(
            "reload/{}: cold compile median {:?}, cache hit median {:?}, ratio {:.1}x",
            case.label,
            c,
            h,
            c.as_secs_f64() / h.as_secs_f64()
        );
    }
}
