//! The three seed scenarios of DESIGN.md, end to end: the real `kubewasm` binary with the
//! example plugins against the embedded API server, asserting cluster state over HTTP.

mod support;

use kube::ResourceExt;
use serde_json::{Value, json};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_on_demand_creates_owned_children_converges_and_cleans_up() {
    let env = Env::new().await;
    env.add_plugin(
        &example_plugin("contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    let host = env.start_host(&[]);

    let sites = env.sites();
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let services = env.api("v1", "Service", "services", Some("default"));

    let created = env.create(&sites, content_site("blog", 3)).await;
    let site_uid = created.metadata.uid.clone().expect("uid");

    let db = eventually("MongoDB blog-db", CONVERGE, || async {
        get(&dbs, "blog-db").await
    })
    .await;
    let svc = eventually("Service blog", CONVERGE, || async {
        get(&services, "blog").await
    })
    .await;
    assert_eq!(db.data["spec"]["members"], json!(3), "{}", host.dump());

    for (what, obj) in [("MongoDB", &db), ("Service", &svc)] {
        assert!(
            managers(obj).contains(&"kubewasm-contentsite-provisioner".to_string()),
            "{what} managedFields: {:?}",
            obj.metadata.managed_fields
        );
        let owners = obj.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1, "{what} owners: {owners:?}");
        assert_eq!(owners[0].uid, site_uid);
        assert_eq!(owners[0].kind, "ContentSite");
        assert_eq!(owners[0].controller, Some(true));
    }
    // The plugin also reports on the site's status subresource.
    let status = eventually("ContentSite status.databaseRef", CONVERGE, || async {
        get(&sites, "blog")
            .await
            .filter(|s| s.data["status"]["databaseRef"] == json!("blog-db"))
    })
    .await;
    assert_eq!(status.data["status"]["serviceRef"], json!("blog"));

    // A spec change converges the child.
    env.apply(&sites, "test-user", content_site("blog", 5))
        .await;
    eventually("MongoDB members 5", CONVERGE, || async {
        get(&dbs, "blog-db")
            .await
            .filter(|d| d.data["spec"]["members"] == json!(5))
    })
    .await;

    // Deleting the site removes its children through ownerReferences.
    sites
        .delete("blog", &Default::default())
        .await
        .expect("delete site");
    eventually("children garbage-collected", CONVERGE, || async {
        (get(&dbs, "blog-db").await.is_none() && get(&services, "blog").await.is_none())
            .then_some(())
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_what_you_dont_own_adds_monitoring_to_foreign_databases() {
    let env = Env::new().await;
    env.add_plugin(&example_plugin("mongodb-monitor"), "mongodb-monitor", None);
    let host = env.start_host(&[]);

    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    // Created by the test (some other team's tooling), not by a plugin.
    env.create(
        &dbs,
        json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
               "metadata": {"name": "orders", "namespace": "default"},
               "spec": {"type": "ReplicaSet", "members": 3, "version": "7.0.12", "credentials": "om-key", "opsManager": {"configMapRef": {"name": "om-project"}}}}),
    )
    .await;
    let sm = eventually("ServiceMonitor orders-monitor", CONVERGE, || async {
        get(&monitors, "orders-monitor").await
    })
    .await;
    assert!(
        managers(&sm).contains(&"kubewasm-mongodb-monitor".to_string()),
        "{:?}\n{}",
        sm.metadata.managed_fields,
        host.dump()
    );
    assert_eq!(
        sm.data["spec"]["selector"]["matchLabels"]["app"],
        json!("orders")
    );
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn know_when_ready_opens_an_endpoint_once_when_available() {
    let env = Env::new().await;
    env.add_plugin(&example_plugin("seldon-endpoint"), "seldon-endpoint", None);
    let host = env.start_host(&[]);

    let sds = env.api(
        "machinelearning.seldon.io/v1",
        "SeldonDeployment",
        "seldondeployments",
        Some("default"),
    );
    let ingresses = env.api(
        "networking.k8s.io/v1",
        "Ingress",
        "ingresses",
        Some("default"),
    );
    host.wait_log("seldondeployments cache synced", |l| {
        field(l, "message") == "cache synced"
            && field(l, "resource").starts_with("seldondeployments")
    })
    .await;
    env.create(
        &sds,
        json!({"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
               "metadata": {"name": "iris", "namespace": "default"},
               "spec": {"predictors": [{"name": "default", "replicas": 1, "graph": {"name": "classifier", "type": "MODEL"}}]}}),
    )
    .await;
    let set_state = |state: &'static str| {
        let sds = sds.clone();
        async move {
            let patch = json!({"status": {"state": state}});
            sds.patch_status(
                "iris",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .expect("patch status")
        }
    };
    host.wait_log("added event for iris", |l| {
        field(l, "message") == "event"
            && field(l, "plugin") == "seldon-endpoint"
            && field(l, "event") == "added"
    })
    .await;
    set_state("Creating").await;
    // The host handles the Creating transition without writing anything.
    host.wait_log("modified event for iris", |l| {
        field(l, "message") == "event"
            && field(l, "plugin") == "seldon-endpoint"
            && field(l, "event") == "modified"
    })
    .await;
    assert!(
        get(&ingresses, "iris").await.is_none(),
        "Ingress before Available"
    );

    set_state("Available").await;
    let ingress = eventually("Ingress iris", CONVERGE, || async {
        get(&ingresses, "iris").await
    })
    .await;
    let sd = eventually("public-url annotation", CONVERGE, || async {
        get(&sds, "iris")
            .await
            .filter(|o| o.annotations().contains_key("kubewasm.dev/public-url"))
    })
    .await;
    let url = sd.annotations()["kubewasm.dev/public-url"].clone();
    let host_rule = ingress.data["spec"]["rules"][0]["host"]
        .as_str()
        .expect("rule host");
    assert!(
        url.contains(host_rule),
        "url {url} vs ingress host {host_rule}"
    );

    // Later unrelated updates cause no further writes. Counted once the annotation's
    // write is logged: the test can read the annotation before the host logs its write.
    let ingress_rv = ingress.metadata.resource_version.clone();
    let annotated_rv = sd.metadata.resource_version.clone().unwrap_or_default();
    host.wait_log("the annotation's write logged", |l| {
        field(l, "plugin") == "seldon-endpoint"
            && field(l, "message").starts_with("applied")
            && field(l, "resource_version") == annotated_rv
    })
    .await;
    let applied_before = host
        .matching(|l| {
            field(l, "plugin") == "seldon-endpoint" && field(l, "message").starts_with("applied")
        })
        .len();
    let returned = |h: &HostProcess| {
        h.matching(|l| {
            field(l, "message") == "plugin returned" && field(l, "plugin") == "seldon-endpoint"
        })
    };
    let returned_before = returned(&host).len();
    let labelled = {
        let patch = json!({"metadata": {"labels": {"team": "ml"}}});
        sds.patch(
            "iris",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("label")
    };
    // The plugin's answer to the unrelated update: no intents, so nothing can be written.
    let answer = eventually(
        "the plugin's answer to the unrelated update",
        CONVERGE,
        || async { returned(&host).get(returned_before).cloned() },
    )
    .await;
    assert_eq!(answer["intents"], json!(0), "{answer}");
    let applied_after = host
        .matching(|l| {
            field(l, "plugin") == "seldon-endpoint" && field(l, "message").starts_with("applied")
        })
        .len();
    assert_eq!(applied_before, applied_after, "{}", host.dump());
    assert_eq!(
        get(&ingresses, "iris")
            .await
            .unwrap()
            .metadata
            .resource_version,
        ingress_rv
    );
    assert_eq!(
        get(&sds, "iris").await.unwrap().metadata.resource_version,
        labelled.metadata.resource_version,
        "the SeldonDeployment was written again after an unrelated update"
    );
    assert_eq!(host.stop(), Some(0));
}

/// The ContentSite scenario chained across languages: the Python provisioner creates the
/// MongoDB, the JavaScript monitor reacts to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_and_monitor_chained_across_python_and_javascript() {
    let env = Env::new().await;
    env.add_plugin(
        &lang_plugin("python", "contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    env.add_plugin(
        &lang_plugin("js", "mongodb-monitor"),
        "mongodb-monitor",
        None,
    );
    let host = env.start_host(&[]);
    // Compiling an 18 MB Python component takes a while without the code cache.
    for plugin in ["contentsite-provisioner", "mongodb-monitor"] {
        host.wait_log_for(plugin, std::time::Duration::from_secs(180), |l| {
            field(l, "message") == "plugin loaded" && field(l, "plugin") == plugin
        })
        .await;
    }

    let sites = env.sites();
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    let site = env.create(&sites, content_site("shop", 3)).await;

    let db = eventually("MongoDB shop-db from Python", CONVERGE, || async {
        get(&dbs, "shop-db").await
    })
    .await;
    assert!(managers(&db).contains(&"kubewasm-contentsite-provisioner".to_string()));
    assert_eq!(
        db.metadata.owner_references.as_ref().unwrap()[0].uid,
        site.metadata.uid.clone().unwrap()
    );
    let sm = eventually("ServiceMonitor from JavaScript", CONVERGE, || async {
        get(&monitors, "shop-db-monitor").await
    })
    .await;
    assert!(
        managers(&sm).contains(&"kubewasm-mongodb-monitor".to_string()),
        "{}",
        host.dump()
    );
    assert_eq!(
        sm.metadata.owner_references.as_ref().unwrap()[0].uid,
        db.metadata.uid.clone().unwrap()
    );

    // Deleting the site cascades through both generations of children.
    sites
        .delete("shop", &Default::default())
        .await
        .expect("delete");
    eventually("cascade", CONVERGE, || async {
        (get(&dbs, "shop-db").await.is_none() && get(&monitors, "shop-db-monitor").await.is_none())
            .then_some(())
    })
    .await;
    assert_eq!(host.stop(), Some(0));
}

/// A Go provisioner feeds the Rust monitor: the Go plugin's MongoDB (owned by the site)
/// gets the Rust plugin's ServiceMonitor (owned by the MongoDB), and deleting the site
/// cascades through both. The Go plugin runs on reused instances, as `run` does by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_provisioner_feeds_the_rust_monitor() {
    let env = Env::new().await;
    env.add_plugin(
        &lang_plugin("go", "contentsite-provisioner"),
        "contentsite-provisioner",
        None,
    );
    env.add_plugin(&example_plugin("mongodb-monitor"), "mongodb-monitor", None);
    let host = env.start_host(&[]);
    for plugin in ["contentsite-provisioner", "mongodb-monitor"] {
        host.wait_log_for(plugin, std::time::Duration::from_secs(120), |l| {
            field(l, "message") == "plugin loaded" && field(l, "plugin") == plugin
        })
        .await;
    }
    let sites = env.sites();
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let monitors = env.api(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        Some("default"),
    );
    // Several sites, so the Go plugin's instances are reused across calls.
    let mut uids = Vec::new();
    for i in 0..5 {
        let site = env
            .create(&sites, content_site(&format!("go-{i}"), 1))
            .await;
        uids.push(site.metadata.uid.clone().unwrap());
    }
    for (i, uid) in uids.iter().enumerate() {
        let db = eventually(&format!("MongoDB go-{i}-db from Go"), CONVERGE, || async {
            get(&dbs, &format!("go-{i}-db")).await
        })
        .await;
        assert!(managers(&db).contains(&"kubewasm-contentsite-provisioner".to_string()));
        assert_eq!(&db.metadata.owner_references.as_ref().unwrap()[0].uid, uid);
        assert_eq!(db.data["spec"]["credentials"], json!("mongodb-credentials"));
        let sm = eventually(
            &format!("ServiceMonitor for go-{i}-db"),
            CONVERGE,
            || async { get(&monitors, &format!("go-{i}-db-monitor")).await },
        )
        .await;
        assert_eq!(
            sm.metadata.owner_references.as_ref().unwrap()[0].uid,
            db.metadata.uid.clone().unwrap()
        );
    }
    sites
        .delete("go-0", &Default::default())
        .await
        .expect("delete");
    eventually("cascade", CONVERGE, || async {
        (get(&dbs, "go-0-db").await.is_none() && get(&monitors, "go-0-db-monitor").await.is_none())
            .then_some(())
    })
    .await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// The MongoDB every language's contentsite-provisioner asks for is one the CRD accepts:
/// our example CRD mirrors the MongoDB Enterprise operator's required fields, and the
/// embedded API server validates against it as kube-apiserver does. The provisioner's old
/// output (no credentials, no project) is rejected the way a real cluster rejected it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_languages_mongodb_is_accepted_by_the_mirrored_crd() {
    use kubewasm::core::event::EventType;
    use kubewasm::core::intent::RawIntent;
    use kubewasm::runtime::{LoadOptions, NoCluster, PluginEngine, PluginEvent, load_plugin};

    let env = Env::new().await;
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let engine = PluginEngine::new().unwrap();
    let site = json!({"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
        "metadata": {"name": "blog", "namespace": "default", "uid": "u-1", "generation": 1},
        "spec": {"title": "Blog", "database": {"members": 1}}});
    let builds = [
        ("rust", example_plugin("contentsite-provisioner")),
        ("js", lang_plugin("js", "contentsite-provisioner")),
        ("python", lang_plugin("python", "contentsite-provisioner")),
        ("c", lang_plugin("c", "contentsite-provisioner")),
        ("go", lang_plugin("go", "contentsite-provisioner")),
    ];
    for (lang, wasm) in builds {
        let plugin = load_plugin(&engine, &wasm, &LoadOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        let event = PluginEvent {
            event_type: EventType::Added,
            watch_id: "sites".into(),
            object: site.to_string().into(),
            old_object: None,
        };
        let intents = plugin
            .handle(
                &event,
                "ContentSite default/blog",
                std::sync::Arc::new(NoCluster),
            )
            .await
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        let mut db: Value = intents
            .iter()
            .find_map(|i| match i {
                RawIntent::Create { object, .. } if object.contains("\"MongoDB\"") => {
                    serde_json::from_str(object).ok()
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{lang}: no MongoDB intent"));
        let name = format!("blog-db-{lang}");
        db["metadata"]["name"] = json!(name);
        let applied = dbs
            .patch(
                &name,
                &kube::api::PatchParams::apply("kubewasm-contentsite-provisioner"),
                &kube::api::Patch::Apply(&db),
            )
            .await
            .unwrap_or_else(|e| panic!("{lang}: the CRD refused {db}: {e}"));
        assert_eq!(
            applied.data["spec"]["credentials"],
            json!("mongodb-credentials"),
            "{lang}"
        );
    }

    // What the provisioner used to write: a real cluster said 422, and so must the stand-in.
    let old = json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {"name": "blog-db", "namespace": "default"},
        "spec": {"type": "ReplicaSet", "members": 1, "version": "7.0.12"}});
    match dbs
        .patch(
            "blog-db",
            &kube::api::PatchParams::apply("old-provisioner"),
            &kube::api::Patch::Apply(&old),
        )
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
            assert!(
                s.message.contains("spec.credentials: Required value"),
                "{}",
                s.message
            );
        }
        other => panic!("the old output was not rejected: {other:?}"),
    }
    assert!(get(&dbs, "blog-db").await.is_none());
}
