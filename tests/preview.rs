//! Preview, end to end: the real `kubewasm run` with the seed provisioner in `spec.mode:
//! DryRun` (an `--approvals` entry, or a Plugin object pulled from a real registry) against
//! the embedded API server. Nothing is written (no object, no watch event, resourceVersion
//! and managedFields unchanged); `/preview/PLUGIN` and `kubewasm preview report` show each
//! would-be create and change with its field paths, and what the API server would refuse;
//! `status.preview` and the `Previewing` condition follow; switching to `Enforce` applies;
//! a shadow candidate's divergences are printed as `≠ diverges`.

mod support;

use std::process::Command;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use support::registry::Registry;
use support::*;

const PROVISIONER: &str = "contentsite-provisioner";

/// `approval` (a Plugin object's YAML) with `spec.mode: mode`.
fn with_mode(approval: &str, mode: &str) -> String {
    let mut object: Value = serde_yaml_ng::from_str(approval).expect("an approval");
    object["spec"]["mode"] = json!(mode);
    serde_yaml_ng::to_string(&object).expect("approval YAML")
}

/// The seed provisioner in the plugin directory with `settings`, approved for exactly what
/// it asks for, in `mode` (its `--approvals` entry; written before the plugin, so a running
/// host never sees one without the other).
fn install(env: &Env, settings: Option<&str>, mode: &str) {
    let wasm = example_plugin(PROVISIONER);
    let approval = approval_of(&wasm, PROVISIONER, settings).expect("the provisioner loads");
    write_approval(&env.approvals, PROVISIONER, &with_mode(&approval, mode));
    if let Some(text) = settings {
        std::fs::write(env.plugins.join(format!("{PROVISIONER}.yaml")), text).expect("settings");
    }
    std::fs::copy(&wasm, env.plugins.join(format!("{PROVISIONER}.wasm"))).expect("copy plugin");
}

/// Every watch event on a resource from the moment it is made, as `TYPE name`.
struct Recorder {
    events: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Watch `api` from its current resourceVersion.
    async fn start(api: &Api<DynamicObject>) -> Recorder {
        let list = api.list(&ListParams::default()).await.expect("list");
        let rv = list.metadata.resource_version.unwrap_or_default();
        let mut stream = api
            .watch(&WatchParams::default().timeout(290), &rv)
            .await
            .expect("watch")
            .boxed();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                let line = match event {
                    Ok(WatchEvent::Added(o)) => format!("ADDED {}", name_of(&o)),
                    Ok(WatchEvent::Modified(o)) => format!("MODIFIED {}", name_of(&o)),
                    Ok(WatchEvent::Deleted(o)) => format!("DELETED {}", name_of(&o)),
                    Ok(WatchEvent::Bookmark(_)) => continue,
                    Ok(WatchEvent::Error(e)) => format!("ERROR {}", e.message),
                    Err(e) => format!("ERROR {e}"),
                };
                sink.lock().expect("events lock").push(line);
            }
        });
        Recorder { events, task }
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().expect("events lock").clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn name_of(o: &DynamicObject) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

/// `/preview/PLUGIN` of the host at `addr` once `done` holds of it; on timeout, says what
/// it was and the host's log.
async fn report_when(
    host: &HostProcess,
    addr: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let (code, body) = http_get_status(addr, &format!("/preview/{PROVISIONER}"));
        let report: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if code == 200 && done(&report) {
            return report;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the report to show {what}: {code} {body}\nhost log:\n{}",
            host.dump()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The report's latest finding on `object` (`Kind namespace/name`) from the dry run.
fn entry<'a>(report: &'a Value, object: &str) -> &'a Value {
    report["objects"]
        .as_array()
        .and_then(|o| {
            o.iter()
                .find(|e| e["object"] == object && e["source"] == "dryRun")
        })
        .unwrap_or(&Value::Null)
}

/// The changed fields of a finding, as (path, from, to).
fn fields(e: &Value) -> Vec<(String, Value, Value)> {
    e["change"]["fields"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap_or("").to_string(),
                        f["from"].clone(),
                        f["to"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `kubewasm preview report ARGS...`: exit code, stdout, stderr.
fn preview_report(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["preview", "report"])
        .args(args)
        .output()
        .expect("run kubewasm preview report");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the API server keeps of an object that a write would touch.
fn kept(o: &DynamicObject) -> (Option<String>, Value) {
    (
        o.metadata.resource_version.clone(),
        serde_json::to_value(&o.metadata.managed_fields).expect("managedFields"),
    )
}

/// The seed scenario in dry run: a site provisioned for real earlier (then changed) and a
/// new one. The dry-run host writes nothing, and its report, `kubewasm preview report`, its
/// log and its metrics show each would-be create and the would-be change with its paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_plugin_writes_nothing_and_reports_what_it_would_do() {
    let env = Env::new().await;
    let sites = env.sites();
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let services = env.api("v1", "Service", "services", Some("default"));

    // Enforcing first: blog provisioned for real, with 3 members.
    install(&env, None, "Enforce");
    let host = env.start_host(&[]);
    env.create(&sites, content_site("blog", 3)).await;
    eventually("blog provisioned", CONVERGE, || async {
        let db = get(&dbs, "blog-db").await?;
        let site = get(&sites, "blog").await?;
        (db.data["spec"]["members"] == json!(3)
            && site.data["status"]["serviceRef"] == json!("blog"))
        .then_some(())
    })
    .await;
    get(&services, "blog").await.expect("Service blog");
    assert_eq!(host.stop(), Some(0));

    // Meanwhile, blog asks for 5 members and news appears.
    env.apply(&sites, "test-user", content_site("blog", 5))
        .await;
    env.create(&sites, content_site("news", 2)).await;
    let before = [
        kept(&get(&dbs, "blog-db").await.expect("blog-db")),
        kept(&get(&services, "blog").await.expect("Service blog")),
        kept(&get(&sites, "blog").await.expect("site blog")),
        kept(&get(&sites, "news").await.expect("site news")),
    ];
    let watched = [
        Recorder::start(&dbs).await,
        Recorder::start(&services).await,
        Recorder::start(&sites).await,
    ];

    // The same plugin in dry run.
    install(&env, None, "DryRun");
    let host = env.start_host(&[]);
    let addr = ops_endpoint(&host).await;
    let report = report_when(&host, &addr, "both sites' writes", |r| {
        r["summary"]["events"] == json!(2)
            && !entry(r, "MongoDB default/news-db").is_null()
            && !entry(r, "Service default/news").is_null()
            && !entry(r, "MongoDB default/blog-db").is_null()
            && !entry(r, "ContentSite default/news").is_null()
    })
    .await;

    // Each would-be create, with its fields.
    let news_db = entry(&report, "MongoDB default/news-db");
    assert_eq!(news_db["change"]["action"], "create", "{report}");
    assert_eq!(news_db["verb"], "create", "{report}");
    assert_eq!(news_db["trigger"], "ContentSite default/news", "{report}");
    assert!(
        fields(news_db).contains(&("spec.members".into(), Value::Null, json!("2"))),
        "{report}"
    );
    let news_svc = entry(&report, "Service default/news");
    assert_eq!(news_svc["change"]["action"], "create", "{report}");
    assert!(
        fields(news_svc)
            .iter()
            .any(|(path, _, to)| path == "spec.ports"
                && to.as_str().is_some_and(|v| v.contains("\"port\":80"))),
        "{report}"
    );
    // The would-be change of what the plugin wrote for real: exactly the field it moves.
    let blog_db = entry(&report, "MongoDB default/blog-db");
    assert_eq!(blog_db["change"]["action"], "update", "{report}");
    assert_eq!(
        fields(blog_db),
        [("spec.members".to_string(), json!("3"), json!("5"))],
        "{report}"
    );
    assert_eq!(
        entry(&report, "Service default/blog")["change"]["action"],
        "unchanged",
        "{report}"
    );
    let news_status = entry(&report, "ContentSite default/news");
    assert_eq!(news_status["verb"], "patch-status", "{report}");
    assert!(
        fields(news_status)
            .iter()
            .any(|(path, _, to)| path == "status.databaseRef" && *to == json!("\"news-db\"")),
        "{report}"
    );
    let summary = &report["summary"];
    assert_eq!(summary["mode"], "DryRun", "{report}");
    assert_eq!(summary["refusals"], 0, "{report}");

    // Nothing was written: no object, no watch event, nothing the API server keeps moved.
    assert!(get(&dbs, "news-db").await.is_none());
    assert!(get(&services, "news").await.is_none());
    let after = [
        kept(&get(&dbs, "blog-db").await.expect("blog-db")),
        kept(&get(&services, "blog").await.expect("Service blog")),
        kept(&get(&sites, "blog").await.expect("site blog")),
        kept(&get(&sites, "news").await.expect("site news")),
    ];
    assert_eq!(before, after, "a dry run changed an object");
    assert_eq!(
        get(&dbs, "blog-db").await.expect("blog-db").data["spec"]["members"],
        json!(3)
    );
    assert!(
        get(&sites, "news").await.expect("news").data["status"].is_null(),
        "a dry run wrote news's status"
    );
    for w in &watched {
        assert_eq!(w.events(), Vec::<String>::new(), "{}", host.dump());
    }

    // `kubewasm preview report` prints the same as a diff.
    let url = format!("http://{addr}");
    let (code, text, err) = preview_report(&[PROVISIONER, "--url", &url]);
    assert_eq!(code, Some(0), "{err}");
    for line in [
        "+ create MongoDB default/news-db\n",
        "    spec.members: 2\n",
        "+ create Service default/news\n",
        "~ update MongoDB default/blog-db\n    spec.members: 3 → 5\n",
        "~ update ContentSite default/news\n",
        "= unchanged Service default/blog\n",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    assert!(
        text.lines().last().is_some_and(|l| l
            .starts_with("contentsite-provisioner (DryRun): 2 event(s) in dry run, ")
            && l.ends_with(", 0 refused")),
        "{text}"
    );
    let (code, json_text, err) = preview_report(&[PROVISIONER, "--url", &url, "--output", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let served: Value = serde_json::from_str(&json_text).expect("--output json is JSON");
    assert_eq!(served["objects"], report["objects"]);
    // A plugin that does not preview: exit 1, saying so.
    let (code, _, err) = preview_report(&["nope", "--url", &url]);
    assert_eq!(code, Some(1));
    assert!(err.contains("404") && err.contains("\"nope\""), "{err}");
    // Nothing listening: exit 1, saying how to reach a host.
    let (code, _, err) = preview_report(&[PROVISIONER, "--url", "http://127.0.0.1:1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot reach the host"), "{err}");

    // `/preview` lists the plugin with its summary.
    let (code, list) = http_get_status(&addr, "/preview");
    assert_eq!(code, 200);
    let list: Value = serde_json::from_str(&list).expect("/preview is JSON");
    assert_eq!(list["plugins"][0]["name"], PROVISIONER, "{list}");
    assert_eq!(list["plugins"][0]["summary"], report["summary"], "{list}");

    // The log says each would-be write, and the metrics count those that change something.
    let logged = |message: &str| {
        !host
            .matching(|l| field(l, "message") == message && field(l, "plugin") == PROVISIONER)
            .is_empty()
    };
    assert!(
        logged("dry run: + create MongoDB default/news-db"),
        "{}",
        host.dump()
    );
    assert!(
        logged("dry run: + create Service default/news"),
        "{}",
        host.dump()
    );
    assert!(
        logged("dry run: ~ create MongoDB default/blog-db"),
        "{}",
        host.dump()
    );
    assert!(
        logged("dry run: = create Service default/blog"),
        "{}",
        host.dump()
    );
    let metrics = http_get_status(&addr, "/metrics").1;
    // Would change: news-db, Service news, blog-db (Service blog would not).
    let series =
        format!("kubewasm_preview_changes_total{{plugin=\"{PROVISIONER}\",verb=\"create\"}}");
    assert_eq!(metric_sample(&metrics, &series), 3.0, "{metrics}");

    // The watches were live all along: a real write shows.
    env.create(
        &dbs,
        json!({"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
               "metadata": {"name": "probe", "namespace": "default"},
               "spec": {"type": "ReplicaSet", "members": 1, "version": "7.0.12",
                        "credentials": "c", "opsManager": {"configMapRef": {"name": "p"}}}}),
    )
    .await;
    eventually("the probe's watch event", CONVERGE, || async {
        watched[0]
            .events()
            .contains(&"ADDED probe".to_string())
            .then_some(())
    })
    .await;
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

/// A write the API server would refuse (a value the MongoDB CRD's schema forbids) is a
/// finding with its code and reason, the event ends OK, and it is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_api_server_would_refuse_is_reported_and_not_retried() {
    let env = Env::new().await;
    install(&env, Some("database:\n  type: Bogus\n"), "DryRun");
    let host = env.start_host(&[]);
    let addr = ops_endpoint(&host).await;
    let sites = env.sites();
    env.create(&sites, content_site("shop", 1)).await;
    let report = report_when(&host, &addr, "shop's refusal", |r| {
        !entry(r, "MongoDB default/shop-db").is_null()
    })
    .await;
    let refused = &entry(&report, "MongoDB default/shop-db")["change"];
    assert_eq!(refused["action"], "refused", "{report}");
    assert_eq!(refused["code"], 422, "{report}");
    let reason = refused["reason"].as_str().unwrap_or("");
    assert!(reason.contains("Bogus"), "{report}");
    // The event went on past the refusal: its other writes were previewed.
    assert_eq!(
        entry(&report, "Service default/shop")["change"]["action"],
        "create",
        "{report}"
    );
    assert_eq!(report["summary"]["refusals"], 1, "{report}");

    // A later event is handled after it: had shop's event failed, its retry (100 ms base
    // in tests) would have come first.
    env.create(&sites, content_site("later", 1)).await;
    report_when(&host, &addr, "later's writes", |r| {
        !entry(r, "Service default/later").is_null()
    })
    .await;
    let shop_events = host.matching(|l| {
        field(l, "message") == "event"
            && field(l, "plugin") == PROVISIONER
            && field(l, "object") == "ContentSite default/shop"
    });
    assert_eq!(shop_events.len(), 1, "{}", host.dump());
    host.assert_no_failed_events();
    let warned = host.matching(|l| {
        field(l, "message")
            == "dry run: ! create MongoDB default/shop-db: the API server would refuse it"
    });
    assert_eq!(warned.len(), 1, "{}", host.dump());
    assert_eq!(field(&warned[0], "level"), "WARN", "{}", warned[0]);

    let url = format!("http://{addr}");
    let (code, text, err) = preview_report(&[PROVISIONER, "--url", &url]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        text.contains("! refused MongoDB default/shop-db (422): ") && text.contains("Bogus"),
        "{text}"
    );
    // Every site's database would be refused: shop's and later's.
    assert!(text.contains(", 2 refused\n"), "{text}");
    assert!(
        get(
            &env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default")),
            "shop-db"
        )
        .await
        .is_none()
    );
    assert_eq!(host.stop(), Some(0));
}

/// The Plugin's status: the `Previewing` condition and `status.preview`, for its
/// generation; None until they are there.
fn previewing(o: &DynamicObject) -> Option<(Value, Value)> {
    let st = o.data.get("status")?;
    let generation = o.metadata.generation?;
    let c = st["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Previewing" && c["observedGeneration"] == json!(generation))?;
    Some((c.clone(), st["preview"].clone()))
}

/// Wait until the host has reconciled after the Plugin's latest status write: each write
/// is a watch event the host reconciles on (and writes again only what changed), so once
/// it has, nothing but the periodic rewrite writes the status until the Plugin changes.
async fn settled(host: &HostProcess, plugins: &Api<DynamicObject>) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let rv = get(plugins, PROVISIONER)
            .await
            .and_then(|o| o.metadata.resource_version)
            .unwrap_or_default();
        let logs = host.logs();
        let seen = logs.iter().rposition(|l| {
            field(l, "message") == "Plugin object changed" && field(l, "resource_version") == rv
        });
        let reconciled = seen.is_some_and(|i| {
            logs[i..]
                .iter()
                .any(|l| field(l, "message") == "reconciling the plugin sources")
        });
        let still = get(plugins, PROVISIONER)
            .await
            .and_then(|o| o.metadata.resource_version)
            .unwrap_or_default();
        if reconciled && still == rv {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the host did not reconcile after the Plugin's write {rv}:\n{}",
            host.dump()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A Plugin object in DryRun, pulled from a registry: `status.preview` counts what it
/// would do as events come (not only at reconciles), the `Previewing` condition says so;
/// switched to Enforce, the same module applies its writes and the condition goes False;
/// a shadow candidate beside it then shows where it diverges in `kubewasm preview report`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_object_in_dry_run_reports_in_its_status_until_it_enforces() {
    let registry = Registry::start();
    let env = Env::new().await;
    env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
        .await;
    let plugins = env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    let dbs = env.api("mongodb.com/v1", "MongoDB", "mongodb", Some("default"));
    let sites = env.sites();
    let wasm = example_plugin(PROVISIONER);
    let pinned = push_module(&registry, &wasm, "contentsite-provisioner:v1");
    // The Plugin object `kubewasm approve` prints for it, in dry run.
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["approve", &wasm.to_string_lossy(), "--module", &pinned])
        .output()
        .expect("run kubewasm approve");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut object: Value =
        serde_yaml_ng::Deserializer::from_str(&String::from_utf8_lossy(&out.stdout))
            .filter_map(|d| serde::Deserialize::deserialize(d).ok())
            .find(|d: &Value| d["kind"] == "Plugin")
            .expect("a Plugin in approve's output");
    object["spec"]["mode"] = json!("DryRun");

    let modules = env.dir.path().join("modules").display().to_string();
    let args = [
        "--insecure-registry",
        &registry.host(),
        "--reload-debounce",
        "100ms",
        "--module-store",
        &modules,
    ];
    let docker_config = empty_docker_config().display().to_string();
    let host = env.start_host_with_env(&args, &[("DOCKER_CONFIG", &docker_config)]);
    let object: DynamicObject = serde_json::from_value(object).expect("a Plugin object");
    plugins
        .patch(
            PROVISIONER,
            &PatchParams::apply("preview-test").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect("apply the Plugin");
    let status = |what: &'static str, done: fn(&Value, &Value) -> bool| {
        let (plugins, host) = (&plugins, &host);
        async move {
            let deadline = tokio::time::Instant::now() + CONVERGE;
            loop {
                let o = get(plugins, PROVISIONER).await;
                if let Some((c, p)) = o.as_ref().and_then(previewing)
                    && done(&c, &p)
                {
                    return (c, p);
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "timed out waiting for {what}; the Plugin: {}\nhost log:\n{}",
                    o.map(|o| o.data.to_string()).unwrap_or_default(),
                    host.dump()
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    let (c, p) = status("Previewing True, no event yet", |c, _| {
        c["status"] == "True"
    })
    .await;
    assert_eq!(c["reason"], "DryRun", "{c}");
    assert_eq!(p["mode"], "DryRun", "{p}");

    // An event once the host is done reconciling: its counts reach the status without
    // another reconcile (only the periodic rewrite can bring them).
    settled(&host, &plugins).await;
    env.create(&sites, content_site("blog", 2)).await;
    let (c, p) = status("status.preview counting blog's writes", |_, p| {
        p["events"] == json!(1)
    })
    .await;
    // Would change: the MongoDB, the Service, the site's status.
    assert_eq!(
        (p["changes"].clone(), p["refusals"].clone()),
        (json!(3), json!(0)),
        "{p}"
    );
    assert_eq!(
        c["message"], "dry run: 1 events, 3 objects would change, 0 writes refused",
        "{c}"
    );
    let recent: Vec<&str> = p["recent"]
        .as_array()
        .map(|r| r.iter().filter_map(|i| i["object"].as_str()).collect())
        .unwrap_or_default();
    assert!(recent.contains(&"MongoDB default/blog-db"), "{p}");
    assert!(
        get(&dbs, "blog-db").await.is_none(),
        "a dry run created blog-db"
    );

    // Enforce: the same module, now applying; nothing previews any more.
    plugins
        .patch(
            PROVISIONER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": "Enforce"}})),
        )
        .await
        .expect("patch spec.mode");
    let (c, p) = status("Previewing False", |c, _| c["status"] == "False").await;
    assert_eq!(c["reason"], "Enforcing", "{c}");
    // No count stays (the API server may leave the emptied map behind).
    assert!(
        p.is_null() || p.as_object().is_some_and(|o| o.is_empty()),
        "status.preview stays after enforcing: {p}"
    );
    let db = eventually("blog-db applied once enforcing", CONVERGE, || async {
        get(&dbs, "blog-db").await
    })
    .await;
    assert_eq!(db.data["spec"]["members"], json!(2));
    assert!(
        managers(&db).contains(&format!("kubewasm-{PROVISIONER}")),
        "{:?}",
        db.metadata.managed_fields
    );

    // A shadow candidate beside it: the same module with another Service port. On a new
    // site it diverges on the Service and agrees on the MongoDB; the report and `kubewasm
    // preview report` say so, and the serving version's writes land as before.
    plugins
        .patch(
            PROVISIONER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"candidate": {
                "module": pinned, "settings": {"service": {"port": 81}}}}})),
        )
        .await
        .expect("set spec.candidate");
    host.wait_log("candidate loaded", |l| {
        field(l, "message").starts_with("candidate loaded")
    })
    .await;
    env.create(&sites, content_site("news", 1)).await;
    let addr = ops_endpoint(&host).await;
    let of = |r: &Value, object: &str| -> Value {
        r["objects"]
            .as_array()
            .and_then(|o| {
                o.iter()
                    .find(|e| e["object"] == object && e["source"] == "candidate")
            })
            .cloned()
            .unwrap_or(Value::Null)
    };
    let report = report_when(&host, &addr, "the candidate on news", |r| {
        !of(r, "Service default/news").is_null() && !of(r, "MongoDB default/news-db").is_null()
    })
    .await;
    let service = of(&report, "Service default/news");
    assert_eq!(service["divergence"]["result"], "diverges", "{report}");
    assert!(
        service["divergence"]["why"]
            .as_str()
            .is_some_and(|why| why.contains("spec.ports")),
        "{report}"
    );
    assert_eq!(
        of(&report, "MongoDB default/news-db")["divergence"]["result"],
        "agrees",
        "{report}"
    );
    let services = env.api("v1", "Service", "services", Some("default"));
    let served = eventually("Service news applied", CONVERGE, || async {
        get(&services, "news").await
    })
    .await;
    assert_eq!(served.data["spec"]["ports"][0]["port"], json!(80));
    let (code, text, err) = preview_report(&[PROVISIONER, "--url", &format!("http://{addr}")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(text.contains("≠ diverges Service default/news: "), "{text}");
    assert!(
        !text.contains("MongoDB default/news-db"),
        "an agreement is counted, not listed: {text}"
    );
    let last = text.lines().last().unwrap_or("");
    assert!(
        last.starts_with("contentsite-provisioner (Enforce): candidate 0.1.0 (")
            && last.contains("diverges on "),
        "{text}"
    );
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}
