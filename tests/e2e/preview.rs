//! A Plugin in `spec.mode: DryRun` on the real cluster (issue 32): the seed provisioner,
//! delivered as the Plugin object `kubewasm approve` prints with its RBAC, with
//! `create` taken from its own role on Services. kube-apiserver judges each dry-run write
//! as the plugin's ServiceAccount and stores nothing: no object, no managedFields of its
//! manager; the host reports each would-be write (log, `status.preview`, the `Previewing`
//! condition), and the Service the real RBAC would refuse as refused with the server's
//! reason (403).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{CONVERGE, api, apply, create, site};
use crate::support::{self, HostProcess, eventually, field, get, managers};
use crate::{Suite, condition, kubewasm, print_plugins, push, start_host_from, with_host};

/// The plugin: its manifest names it, so the Plugin object has this name too.
const PLUGIN: &str = "contentsite-provisioner";
/// The site the dry run sees (its children would be `preview-db` and `preview`).
const SITE: &str = "preview";
/// The site the shadow candidate sees.
const SHADOWED: &str = "shadowed";
/// The MongoDB version the candidate's settings ask for (the serving version's: 7.0.12).
const NEW_VERSION: &str = "8.0.4";

pub async fn dry_run(s: &'static Suite) {
    // The single host makes way: it serves the provisioner from the directory, in
    // Enforce, and would write what this one only previews.
    if let Some(host) = s.host.lock().await.take() {
        assert_eq!(host.stop(), Some(0), "the single host did not stop cleanly");
    }
    let (docs, pinned) = approved_in_dry_run(s).await;
    // For the shadow scenario, whatever becomes of this one (it applies them again).
    let _ = APPROVED.set((docs.clone(), pinned.clone()));
    let rbac_name = format!("kubewasm-e2e-{}", s.id);
    // Cluster-scoped: named after the install (its namespace).
    let own_role = format!("{}:{rbac_name}-{PLUGIN}", s.host_ns);
    let user = format!("system:serviceaccount:{}:kubewasm-{PLUGIN}", s.host_ns);

    // The generated RBAC, with `create` on Services taken from the plugin's own role: an
    // apply that would create an object needs `create` as well as `patch`.
    let narrowed: Vec<Value> = docs
        .iter()
        .cloned()
        .map(|mut d| {
            if d["kind"] == "ClusterRole" && d["metadata"]["name"] == json!(own_role) {
                without_create_on_services(&mut d);
            }
            d
        })
        .collect();
    assert!(
        narrowed != docs,
        "no role {own_role} with create on services in approve's output"
    );
    apply(&s.admin, narrowed).await;
    // The authorizer sees a role change through its informer: a moment later.
    eventually(
        &format!("{user} may not create Services"),
        CONVERGE,
        || async { (!may(s, &user, "create").await).then_some(()) },
    )
    .await;
    assert!(
        may(s, &user, "patch").await,
        "{user} may not patch Services"
    );

    // A host that follows Plugin objects only, its status listener (`/preview`) on a free
    // loopback port.
    let host = start_host_from(s, None, &["--metrics-addr", "127.0.0.1:0"]).await;
    *s.host.lock().await = Some(host);
    let plugins = api(&s.admin, "kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    let digest = pinned.split_once('@').map(|(_, d)| d).unwrap_or_default();
    let st = crate::serving(&plugins, PLUGIN, digest).await;
    let previewing = condition(&st, "Previewing");
    assert_eq!(previewing["status"], json!("True"), "{st}");
    assert_eq!(previewing["reason"], json!("DryRun"), "{st}");
    print_plugins(s, "contentsite-provisioner in DryRun");

    let sites = api(
        &s.admin,
        "sites.kubewasm.dev/v1alpha1",
        "ContentSite",
        "contentsites",
        Some(&s.ns),
    );
    create(&sites, site(SITE, &s.ns)).await;
    let lines = dry_run_lines(s).await;
    nothing_written(s, &sites).await;
    let status = reported(s, &plugins).await;
    print_plugins(s, "after the dry run of site preview");
    println!(
        "  status.preview: {}",
        serde_json::to_string(&status).unwrap_or_default()
    );
    for l in &lines {
        println!("  host log: {}", compact(l));
    }
    // The whole report, as `kubewasm preview report` prints it from the host's /preview.
    let report = preview_report(s).await;
    let ns = &s.ns;
    for want in [
        format!("+ create MongoDB {ns}/{SITE}-db"),
        format!("! refused Service {ns}/{SITE} (403)"),
        "cannot create resource \"services\"".to_string(),
        format!("~ update ContentSite {ns}/{SITE}"),
    ] {
        assert!(
            report.contains(&want),
            "no {want:?} in the report:\n{report}"
        );
    }

    // The role as generated again.
    apply(&s.admin, docs).await;
}

/// What [`dry_run`] applies (the Plugin and its RBAC as `approve` printed them, with
/// `spec.mode: DryRun`) and the pinned reference; the shadow scenario goes on from there.
static APPROVED: std::sync::OnceLock<(Vec<Value>, String)> = std::sync::OnceLock::new();

/// The provisioner in Enforce with a shadow candidate: the same module with settings that
/// change one field (`database.version`, which the site does not set). On an event of a
/// site the serving version had provisioned, the candidate diverges exactly on the
/// MongoDB, at `spec.version`, and agrees on the Service and the site's status; nothing
/// it did is written. Promotion (its settings into `spec.settings`, `spec.candidate`
/// removed) is the swap: the MongoDB gets the new version.
pub async fn shadow(s: &'static Suite) {
    let (docs, pinned) = APPROVED
        .get()
        .cloned()
        .expect("the dry-run scenario ran first (KUBEWASM_E2E_ONLY=preview)");
    let mut enforce = docs;
    enforce[0]["spec"]["mode"] = json!("Enforce");
    apply(&s.admin, enforce.clone()).await;
    let plugins = api(&s.admin, "kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    let enforcing = previewing(&plugins, "Enforcing").await;
    assert_eq!(condition(&enforcing, "Ready")["status"], json!("True"));
    let sites = api(
        &s.admin,
        "sites.kubewasm.dev/v1alpha1",
        "ContentSite",
        "contentsites",
        Some(&s.ns),
    );
    let db = provisioned_for_real(s, &sites).await;

    // The candidate: the same module, settings that change `database.version` only.
    let mut settings = enforce[0]["spec"]["settings"].clone();
    settings["database"]["version"] = json!(NEW_VERSION);
    let mut with_candidate = enforce.clone();
    with_candidate[0]["spec"]["candidate"] = json!({"module": pinned, "settings": settings});
    apply(&s.admin, with_candidate).await;
    // Loaded, not only loading: status.preview names its digest.
    eventually("the candidate running", CONVERGE, || async {
        let st = get(&plugins, PLUGIN).await?.data.get("status")?.clone();
        (condition(&st, "Previewing")["reason"] == "Shadow"
            && !st["preview"]["candidate"]["digest"].is_null())
        .then_some(())
    })
    .await;
    print_plugins(s, "Enforce, with a candidate");

    // An event of the site: its labels change (no new generation, so the serving version
    // writes the same as before and the candidate's status agrees).
    sites
        .patch(
            SHADOWED,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("touch the site");
    diverged_on_the_mongodb_alone(s, &plugins, &db).await;

    // Promotion: the candidate's settings become the spec; the candidate goes.
    let mut promoted = enforce;
    promoted[0]["spec"]["settings"] = settings;
    apply(&s.admin, promoted).await;
    let dbs = api(
        &s.admin,
        "mongodb.com/v1",
        "MongoDB",
        "mongodb",
        Some(&s.ns),
    );
    eventually(
        "the promoted version's MongoDB version",
        CONVERGE,
        || async {
            get(&dbs, &format!("{SHADOWED}-db"))
                .await
                .filter(|o| o.data["spec"]["version"] == json!(NEW_VERSION))
        },
    )
    .await;
    let st = previewing(&plugins, "Enforcing").await;
    assert!(st["preview"].is_null(), "{st}");
    print_plugins(s, "promoted");

    // Deleted: unloaded (cleanup deletes it too, should this scenario fail before).
    plugins
        .delete(PLUGIN, &DeleteParams::default())
        .await
        .expect("delete the Plugin");
    let guard = s.host.lock().await;
    guard
        .as_ref()
        .expect("host running")
        .wait_log_for("the Plugin removed", CONVERGE, |l| {
            field(l, "message") == "plugin removed" && field(l, "plugin") == PLUGIN
        })
        .await;
}

/// The Plugin's status once its `Previewing` condition has `reason`.
async fn previewing(plugins: &Api<DynamicObject>, reason: &str) -> Value {
    eventually(&format!("Previewing reason {reason}"), CONVERGE, || async {
        let st = get(plugins, PLUGIN).await?.data.get("status")?.clone();
        (condition(&st, "Previewing")["reason"] == reason).then_some(st)
    })
    .await
}

/// Site [`SHADOWED`], provisioned by the serving version for real (its MongoDB at the
/// settings' version, its status written); its MongoDB.
async fn provisioned_for_real(s: &Suite, sites: &Api<DynamicObject>) -> DynamicObject {
    let shadowed = create(sites, site(SHADOWED, &s.ns)).await;
    let (db, _) = crate::seed(s).provisioned(&shadowed).await;
    assert_eq!(db.data["spec"]["version"], json!("7.0.12"));
    eventually("the site's status", CONVERGE, || async {
        get(sites, SHADOWED)
            .await
            .filter(|o| !o.data["status"]["databaseRef"].is_null())
    })
    .await;
    db
}

/// The candidate, compared on the site's event, diverges on exactly one object, the
/// MongoDB, at `spec.version` (its status and the host's log), and agrees on the other two;
/// the MongoDB `db` is as the serving version left it.
async fn diverged_on_the_mongodb_alone(
    s: &Suite,
    plugins: &Api<DynamicObject>,
    db: &DynamicObject,
) {
    let st = compared(s, plugins).await;
    let c = &st["preview"]["candidate"];
    println!(
        "  status.preview: {}",
        serde_json::to_string(&st["preview"]).unwrap_or_default()
    );
    println!("  Previewing: {}", condition(&st, "Previewing")["message"]);
    assert_eq!(c["divergences"], json!(1), "{st}");
    assert_eq!(c["agreements"], json!(2), "{st}");
    let db_name = format!("MongoDB {}/{SHADOWED}-db", s.ns);
    let diverged: Vec<Value> = st["preview"]["recent"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i["action"] == "Diverges")
        .collect();
    assert_eq!(diverged.len(), 1, "{st}");
    assert_eq!(diverged[0]["object"], json!(db_name), "{st}");
    assert_eq!(diverged[0]["paths"], json!(["spec.version"]), "{st}");
    // Nothing the candidate did was written.
    let dbs = api(
        &s.admin,
        "mongodb.com/v1",
        "MongoDB",
        "mongodb",
        Some(&s.ns),
    );
    let after = get(&dbs, &format!("{SHADOWED}-db"))
        .await
        .expect("the MongoDB");
    assert_eq!(after.data["spec"]["version"], json!("7.0.12"));
    assert_eq!(
        after.metadata.resource_version, db.metadata.resource_version,
        "the MongoDB was written while shadowed"
    );
    let lines = with_host(s, |h| {
        h.matching(|l| field(l, "message") == "shadow: the candidate diverges")
    })
    .await;
    for l in &lines {
        println!("  host log: {}", compact(l));
    }
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(field(&lines[0], "object"), db_name);
    let report = preview_report(s).await;
    for want in [
        format!("≠ diverges {db_name}: the candidate would change spec.version"),
        format!("spec.version: \"7.0.12\" → \"{NEW_VERSION}\""),
    ] {
        assert!(
            report.contains(&want),
            "no {want:?} in the report:\n{report}"
        );
    }
    assert_eq!(report.matches("≠ diverges").count(), 1, "{report}");
}

/// `kubewasm preview report contentsite-provisioner --url` the running host's status
/// listener (the address it logged), printed into the suite's output.
async fn preview_report(s: &Suite) -> String {
    let addr = with_host(s, |h| {
        h.matching(|l| field(l, "message").starts_with("serving /healthz"))
            .first()
            .map(|l| field(l, "addr").to_string())
    })
    .await
    .expect("the host logged its status listener's address");
    let out = kubewasm()
        .args(["preview", "report", PLUGIN, "--url"])
        .arg(format!("http://{addr}"))
        .output()
        .expect("kubewasm preview report");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubewasm preview report: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("  kubewasm preview report {PLUGIN}:");
    for l in text.lines() {
        println!("    {l}");
    }
    text
}

/// The Plugin's status once the candidate was compared on one event (the shadow runs
/// apart from the serving path: it is waited for, not assumed); the host's log if never.
async fn compared(s: &Suite, plugins: &Api<DynamicObject>) -> Value {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let st = get(plugins, PLUGIN)
            .await
            .and_then(|o| o.data.get("status").cloned())
            .unwrap_or_default();
        if st["preview"]["candidate"]["events"].as_u64() >= Some(1) {
            return st;
        }
        if tokio::time::Instant::now() > deadline {
            let log = with_host(s, |h| h.dump()).await;
            panic!("the candidate was compared on no event: {st}\nhost log:\n{log}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The provisioner pushed to the loopback registry, and what `kubewasm approve` prints for
/// it (the Plugin, its ServiceAccount, its roles) with `spec.mode: DryRun`, as an operator
/// edits it before `kubectl apply`; and the pinned reference.
async fn approved_in_dry_run(s: &Suite) -> (Vec<Value>, String) {
    let wasm = support::example_plugin(PLUGIN);
    let pinned = push(s, &wasm, &format!("e2e/{PLUGIN}:v1"));
    println!("  pushed {pinned}");
    let path = wasm.to_string_lossy().into_owned();
    let mut docs = crate::install_docs(s, &["approve", &path, "--module", &pinned]);
    assert_eq!(docs[0]["kind"], "Plugin", "{docs:?}");
    docs[0]["spec"]["mode"] = json!("DryRun");
    crate::created_cluster_objects(s, &docs);
    (docs, pinned)
}

/// Take `create` from every rule of `role` on core Services.
fn without_create_on_services(role: &mut Value) {
    let Some(rules) = role["rules"].as_array_mut() else {
        return;
    };
    for r in rules.iter_mut() {
        let services = r["apiGroups"] == json!([""])
            && r["resources"]
                .as_array()
                .is_some_and(|x| x.contains(&json!("services")));
        if let (true, Some(verbs)) = (services, r["verbs"].as_array_mut()) {
            verbs.retain(|v| v != "create");
        }
    }
    rules.retain(|r| r["verbs"].as_array().is_some_and(|v| !v.is_empty()));
}

/// Whether the real authorizer lets `user` `verb` Services in the scenarios' namespace
/// (a SubjectAccessReview as cluster-admin).
async fn may(s: &Suite, user: &str, verb: &str) -> bool {
    let reviews: Api<SubjectAccessReview> = Api::all(s.admin.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(s.ns.clone()),
                verb: Some(verb.to_string()),
                resource: Some("services".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    reviews
        .create(&PostParams::default(), &review)
        .await
        .expect("SubjectAccessReview")
        .status
        .is_some_and(|st| st.allowed)
}

/// The host's log of the site's event: the would-be create of the MongoDB (info, `+`),
/// the Service refused by the real RBAC (warn, `!`, code 403, the server's reason naming
/// the plugin's ServiceAccount), the status update (`~`); and no write applied, no event
/// failed.
async fn dry_run_lines(s: &Suite) -> Vec<Value> {
    let ns = &s.ns;
    let trigger = format!("ContentSite {ns}/{SITE}");
    let about = |l: &Value, what: &str| {
        field(l, "message").starts_with("dry run:")
            && field(l, "trigger") == trigger
            && field(l, "message").contains(what)
    };
    let guard = s.host.lock().await;
    let host: &HostProcess = guard.as_ref().expect("host running");
    let db = host
        .wait_log_for("the MongoDB's would-be create", CONVERGE, |l| {
            about(l, &format!("MongoDB {ns}/{SITE}-db"))
        })
        .await;
    let svc = host
        .wait_log_for("the Service's refusal", CONVERGE, |l| {
            about(l, &format!("Service {ns}/{SITE}"))
        })
        .await;
    let status = host
        .wait_log_for("the site's status update", CONVERGE, |l| {
            about(l, &format!("ContentSite {ns}/{SITE}"))
        })
        .await;
    assert!(field(&db, "message").starts_with("dry run: + "), "{db}");
    assert_eq!(field(&db, "level"), "INFO", "{db}");
    assert!(
        field(&status, "message").starts_with("dry run: ~ "),
        "{status}"
    );
    assert!(field(&svc, "message").starts_with("dry run: ! "), "{svc}");
    assert!(
        field(&svc, "message").ends_with("the API server would refuse it"),
        "{svc}"
    );
    assert_eq!(field(&svc, "level"), "WARN", "{svc}");
    assert_eq!(svc["code"], json!(403), "{svc}");
    let want = format!(
        "services \"{SITE}\" is forbidden: User \"system:serviceaccount:{}:kubewasm-{PLUGIN}\" \
         cannot create resource \"services\" in API group \"\" in the namespace \"{ns}\"",
        s.host_ns
    );
    assert!(field(&svc, "reason").contains(&want), "{svc}");
    let applied = host.matching(|l| {
        field(l, "message").starts_with("applied ") && field(l, "trigger") == trigger
    });
    assert!(applied.is_empty(), "applied in DryRun: {applied:?}");
    let failed =
        host.matching(|l| field(l, "message") == "event failed" && field(l, "object") == trigger);
    assert!(failed.is_empty(), "{failed:?}");
    vec![db, svc, status]
}

/// Nothing written: neither child exists, and the site carries no status and no field of
/// the plugin's manager.
async fn nothing_written(s: &Suite, sites: &Api<DynamicObject>) {
    let dbs = api(
        &s.admin,
        "mongodb.com/v1",
        "MongoDB",
        "mongodb",
        Some(&s.ns),
    );
    let svcs = api(&s.admin, "v1", "Service", "services", Some(&s.ns));
    assert!(
        get(&dbs, &format!("{SITE}-db")).await.is_none(),
        "MongoDB {SITE}-db written in DryRun"
    );
    assert!(
        get(&svcs, SITE).await.is_none(),
        "Service {SITE} written in DryRun"
    );
    let site = get(sites, SITE).await.expect("the site");
    assert!(
        site.data["status"]["databaseRef"].is_null(),
        "status written in DryRun: {}",
        site.data["status"]
    );
    let manager = format!("kubewasm-{PLUGIN}");
    assert!(
        !managers(&site).contains(&manager),
        "{manager} owns fields of the site: {:?}",
        managers(&site)
    );
}

/// `status.preview` once it reports the site: mode DryRun, the MongoDB's create and the
/// Service's refusal among the recent findings, the `Previewing` message with the counts.
async fn reported(s: &Suite, plugins: &Api<DynamicObject>) -> Value {
    let ns = &s.ns;
    let db = format!("MongoDB {ns}/{SITE}-db");
    let svc = format!("Service {ns}/{SITE}");
    let st = eventually("status.preview reports the site", CONVERGE, || async {
        let o = get(plugins, PLUGIN).await?;
        let st = o.data.get("status")?.clone();
        let recent = st["preview"]["recent"].as_array()?.clone();
        let has = |object: &str, action: &str| {
            recent
                .iter()
                .any(|i| i["object"] == object && i["action"] == action)
        };
        (has(&db, "Create") && has(&svc, "Refused")).then_some(st)
    })
    .await;
    let preview = &st["preview"];
    assert_eq!(preview["mode"], json!("DryRun"), "{preview}");
    assert!(preview["events"].as_u64() >= Some(1), "{preview}");
    assert!(preview["changes"].as_u64() >= Some(2), "{preview}");
    assert!(preview["refusals"].as_u64() >= Some(1), "{preview}");
    let recent = preview["recent"].as_array().cloned().unwrap_or_default();
    let refused = recent
        .iter()
        .find(|i| i["object"] == json!(svc) && i["action"] == "Refused")
        .cloned()
        .unwrap_or_default();
    assert_eq!(refused["source"], json!("dryRun"), "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cannot create resource \"services\"")),
        "{refused}"
    );
    let message = condition(&st, "Previewing")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!("  Previewing: {message}");
    assert!(message.starts_with("dry run: "), "{message}");
    preview.clone()
}

/// A log line without its span lists, for the report.
fn compact(l: &Value) -> String {
    let mut l = l.clone();
    if let Some(o) = l.as_object_mut() {
        o.remove("spans");
        o.remove("span");
    }
    l.to_string()
}
