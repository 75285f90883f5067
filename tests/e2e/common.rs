//! What the two opt-in suites on a real cluster share: the host run as a process
//! (`tests/e2e`) and the host deployed by `deploy/` on a real node (`tests/e2e_node`).
//! Clients and objects as cluster-admin, a runner that reports each check as `ok` or
//! `FAIL` with its duration, and the seed scenarios, which read the host's log through
//! [`HostLog`] so they run the same against a child process and against pods.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::{eventually, field, get, managers, root};

/// How long the real controller-manager may take to garbage-collect (it rediscovers
/// resources every 30 s, so a CRD created just before can take ~40 s).
pub const GC: Duration = Duration::from_secs(120);
/// How long the host may take to converge on a real cluster.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// The SeldonDeployment CRD's name.
pub const SELDON_CRD: &str = "seldondeployments.machinelearning.seldon.io";

/// A boxed future, as the check lists hold them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The message of a panicked task.
pub fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into()),
        Err(e) => e.to_string(),
    }
}

/// Runs `check` as a task and prints `ok   NAME (DURATION)` or `FAIL NAME: WHY`; true when
/// it passed. A panic inside is the failure (the suites assert with panics, as tests do).
pub async fn run_check(name: &str, check: BoxFuture<'static, ()>) -> bool {
    let started = Instant::now();
    match tokio::spawn(check).await {
        Ok(()) => {
            println!("ok   {name} ({:.1?})", started.elapsed());
            true
        }
        Err(e) => {
            println!(
                "FAIL {name} ({:.1?}): {}",
                started.elapsed(),
                panic_message(e)
            );
            false
        }
    }
}

/// A client from a kubeconfig file.
pub async fn client_for(path: &Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(path).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}

/// A dynamic API for a kind (cluster-wide when `ns` is None).
pub fn api(
    client: &Client,
    api_version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    );
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Server-side apply `docs` as cluster-admin (CRDs waited for until established).
pub async fn apply(client: &Client, docs: Vec<Value>) {
    let docs: Vec<kubewasm::apply::manifests::Document> = docs
        .into_iter()
        .map(|object| kubewasm::apply::manifests::Document {
            source: PathBuf::from("e2e"),
            object,
        })
        .collect();
    kubewasm::apply::manifests::apply_manifests(client, &docs, Duration::from_secs(60))
        .await
        .expect("apply as cluster-admin");
}

/// A run id, in every name a suite creates.
pub fn rand_id() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.subsec_nanos() ^ (std::process::id() << 8)
}

/// The CRDs the scenarios need: `examples/crds`, or the upstream ones when
/// `KUBEWASM_E2E_CRDS` names a directory.
pub fn read_crds() -> Vec<Value> {
    let crd_dir = std::env::var_os("KUBEWASM_E2E_CRDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("examples/crds"));
    kubewasm::apply::manifests::read_manifests(&[crd_dir])
        .expect("read CRDs")
        .into_iter()
        .map(|d| d.object)
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect()
}

/// The names of `crds`, comma-separated (for the suites' headers).
pub fn crd_names(crds: &[Value]) -> String {
    crds.iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap_or("?"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Delete a CRD and wait until it is gone.
pub async fn delete_crd(admin: &Client, name: &str) {
    let crds = api(
        admin,
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    );
    if crds.get_opt(name).await.expect("get CRD").is_none() {
        return;
    }
    let _ = crds.delete(name, &DeleteParams::default()).await;
    eventually(&format!("CRD {name} gone"), CONVERGE, || {
        let crds = crds.clone();
        async move {
            crds.get_opt(name)
                .await
                .ok()
                .flatten()
                .is_none()
                .then_some(())
        }
    })
    .await;
}

/// A ContentSite with a one-member database.
pub fn site(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"title": format!("Site {name}"), "database": {"members": 1}}})
}

/// Create `obj` as cluster-admin.
pub async fn create(api: &Api<DynamicObject>, obj: Value) -> DynamicObject {
    let obj: DynamicObject = serde_json::from_value(obj).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create as cluster-admin")
}

/// Where the scenarios read the host's JSON log lines: a child process, or the pods of
/// a Deployment.
pub trait HostLog: Send + Sync {
    /// Every line the host (every replica) logged so far.
    fn lines(&self) -> BoxFuture<'_, Vec<Value>>;
}

/// The seed scenarios, run in namespace `ns` against whatever host `log` reads.
pub struct Seed<'a> {
    /// cluster-admin: creates the scenarios' objects and judges the cluster's state.
    pub admin: &'a Client,
    /// Where the scenarios' objects live.
    pub ns: &'a str,
    /// The host's log.
    pub log: &'a dyn HostLog,
}

impl Seed<'_> {
    fn sites(&self) -> Api<DynamicObject> {
        api(
            self.admin,
            "sites.kubewasm.dev/v1alpha1",
            "ContentSite",
            "contentsites",
            Some(self.ns),
        )
    }

    fn mongodbs(&self) -> Api<DynamicObject> {
        api(
            self.admin,
            "mongodb.com/v1",
            "MongoDB",
            "mongodb",
            Some(self.ns),
        )
    }

    /// Wait for the site's MongoDB and Service, owned by it, written by the provisioner.
    pub async fn provisioned(&self, site: &DynamicObject) -> (DynamicObject, DynamicObject) {
        let name = site.name_any();
        let dbs = self.mongodbs();
        let svcs = api(self.admin, "v1", "Service", "services", Some(self.ns));
        let db = eventually(&format!("MongoDB {name}-db"), CONVERGE, || {
            let (dbs, n) = (dbs.clone(), format!("{name}-db"));
            async move { get(&dbs, &n).await }
        })
        .await;
        let svc = eventually(&format!("Service {name}"), CONVERGE, || {
            let (svcs, n) = (svcs.clone(), name.clone());
            async move { get(&svcs, &n).await }
        })
        .await;
        for (what, o) in [("MongoDB", &db), ("Service", &svc)] {
            let owner = o
                .owner_references()
                .first()
                .unwrap_or_else(|| panic!("{what} has no owner"));
            assert_eq!(owner.uid, site.uid().unwrap(), "{what} owner");
            assert_eq!(owner.controller, Some(true), "{what} controller");
            assert!(
                managers(o).contains(&"kubewasm-contentsite-provisioner".to_string()),
                "{what} managers {:?}",
                managers(o)
            );
        }
        (db, svc)
    }

    /// A ContentSite `name` gets its MongoDB (accepted by the CRD) and Service, owned by
    /// it and written as the provisioner, and its status.
    pub async fn provision_on_demand(&self, name: &str) {
        let sites = self.sites();
        let blog = create(&sites, site(name, self.ns)).await;
        let (db, _) = self.provisioned(&blog).await;
        assert_eq!(db.data["spec"]["credentials"], json!("mongodb-credentials"));
        assert_eq!(
            db.data["spec"]["opsManager"]["configMapRef"]["name"],
            json!("mongodb-project")
        );
        let with_status = eventually("ContentSite status", CONVERGE, || {
            let sites = sites.clone();
            let db_name = format!("{name}-db");
            async move {
                get(&sites, name)
                    .await
                    .filter(|o| o.data["status"]["databaseRef"] == json!(db_name))
            }
        })
        .await;
        assert_eq!(with_status.data["status"]["serviceRef"], json!(name));
    }

    /// Deleting site `name` lets the real controller-manager remove its children.
    pub async fn garbage_collection(&self, name: &str) {
        self.sites()
            .delete(name, &DeleteParams::background())
            .await
            .expect("delete site");
        let dbs = self.mongodbs();
        let svcs = api(self.admin, "v1", "Service", "services", Some(self.ns));
        eventually(
            &format!("the garbage collector removes {name}-db and {name}"),
            GC,
            || {
                let (dbs, svcs) = (dbs.clone(), svcs.clone());
                async move {
                    (get(&dbs, &format!("{name}-db")).await.is_none()
                        && get(&svcs, name).await.is_none())
                    .then_some(())
                }
            },
        )
        .await;
    }

    /// A MongoDB made by cluster-admin gets a ServiceMonitor owned by it.
    pub async fn foreign_mongodb(&self) {
        let orders = create(
            &self.mongodbs(),
            json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
                "metadata": {"name": "orders-db", "namespace": self.ns, "labels": {"team": "shop"}},
                "spec": {"type": "ReplicaSet", "members": 3, "version": "7.0.12",
                         "credentials": "shop-om-credentials",
                         "opsManager": {"configMapRef": {"name": "shop-project"}}}}),
        )
        .await;
        let monitors = api(
            self.admin,
            "monitoring.coreos.com/v1",
            "ServiceMonitor",
            "servicemonitors",
            Some(self.ns),
        );
        let monitor = eventually("ServiceMonitor orders-db-monitor", CONVERGE, || {
            let monitors = monitors.clone();
            async move { get(&monitors, "orders-db-monitor").await }
        })
        .await;
        assert_eq!(monitor.owner_references()[0].uid, orders.uid().unwrap());
        assert!(monitor.data["spec"]["endpoints"].is_array());
    }

    /// With the SeldonDeployment CRD served and watched: `Creating` writes nothing,
    /// `Available` opens the Ingress and records the URL, an unrelated status change
    /// rewrites nothing (resourceVersions kept).
    pub async fn seldon_available(&self) {
        let sdeps = api(
            self.admin,
            "machinelearning.seldon.io/v1",
            "SeldonDeployment",
            "seldondeployments",
            Some(self.ns),
        );
        create(
            &sdeps,
            json!({"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
                "metadata": {"name": "iris", "namespace": self.ns},
                "spec": {"name": "iris", "predictors": [{"name": "main", "replicas": 1,
                    "graph": {"name": "classifier", "type": "MODEL", "implementation": "SKLEARN_SERVER",
                              "modelUri": "gs://seldon-models/v1.19.0/sklearn/iris"}}]}}),
        )
        .await;
        let set_status = |state: &'static str, replicas: i64| {
            let sdeps = sdeps.clone();
            async move {
                sdeps
                    .patch_status(
                        "iris",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"state": state, "replicas": replicas}})),
                    )
                    .await
                    .expect("status patch")
            }
        };
        let iris = format!("{}/iris", self.ns);
        self.wait_events("seldon-endpoint", &iris, 1).await;
        set_status("Creating", 1).await;
        self.wait_events("seldon-endpoint", &iris, 2).await;
        let ingresses = api(
            self.admin,
            "networking.k8s.io/v1",
            "Ingress",
            "ingresses",
            Some(self.ns),
        );
        assert!(
            get(&ingresses, "iris").await.is_none(),
            "an Ingress before the model was Available"
        );
        set_status("Available", 1).await;
        let ingress = eventually("Ingress iris", CONVERGE, || {
            let ingresses = ingresses.clone();
            async move { get(&ingresses, "iris").await }
        })
        .await;
        let annotated = eventually("the public URL annotation", CONVERGE, || {
            let sdeps = sdeps.clone();
            async move {
                get(&sdeps, "iris")
                    .await
                    .filter(|o| o.annotations().contains_key("kubewasm.dev/public-url"))
            }
        })
        .await;
        // An unrelated status change: handled, and nothing written.
        let events_before = self.count_events("seldon-endpoint", &iris).await;
        let changed = set_status("Available", 2).await;
        self.wait_events("seldon-endpoint", &iris, events_before + 1)
            .await;
        let after = get(&ingresses, "iris").await.expect("Ingress still there");
        assert_eq!(
            after.resource_version(),
            ingress.resource_version(),
            "the Ingress was rewritten"
        );
        let sdep = get(&sdeps, "iris").await.unwrap();
        assert_eq!(
            sdep.resource_version(),
            changed.resource_version(),
            "the SeldonDeployment was rewritten"
        );
        assert!(annotated.annotations()["kubewasm.dev/public-url"].contains("iris"));
    }

    /// `event` log lines of `plugin` for objects whose name ends with `suffix`.
    pub async fn count_events(&self, plugin: &str, suffix: &str) -> usize {
        self.log
            .lines()
            .await
            .iter()
            .filter(|l| {
                field(l, "message") == "event"
                    && field(l, "plugin") == plugin
                    && field(l, "object").ends_with(suffix)
            })
            .count()
    }

    /// Wait until `plugin` handled at least `n` events of the object (the host logs
    /// `event` before calling the plugin; the object's state after the call is what the
    /// scenarios then judge).
    pub async fn wait_events(&self, plugin: &str, suffix: &str, n: usize) {
        eventually(
            &format!("{plugin}: event #{n} of {suffix}"),
            CONVERGE,
            || async { (self.count_events(plugin, suffix).await >= n).then_some(()) },
        )
        .await;
    }
}
