//! NamespacedPlugins (issue 35), end to end: modules pushed to a real registry (Debian's
//! docker-registry on loopback), NamespacedPlugin objects applied to the embedded API
//! server in teams' namespaces, the real `kubewasm run --tenant-registry` loading each
//! as plugin `NS/P`, confined to its namespace: two teams' plugins on one kind act only
//! in their own namespace; a plugin reaching for a cluster-scoped kind, another
//! namespace, or above the platform's ceilings is refused with the reason on its status;
//! with RBAC enforced, a plugin's writes are its ServiceAccount's, in its namespace; and
//! a hostile tenant plugin (slow, out of memory, trapping) holds only its namespace's part
//! of the call budget: another tenant's events never wait for it.
//! Leader election and sharding (tests/sharding.rs) treat them like the others.

mod support;

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::registry::Registry;
use support::*;

/// What testkit asks for, as a team approves it: its ConfigMap watch and ConfigMap
/// creates, no namespaces (bound to the object's own).
fn permissions() -> Value {
    json!({
        "watches": [{"apiVersion": "v1", "kind": "ConfigMap"}],
        "grants": [{"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["create"]}],
    })
}

fn nsplugin(name: &str, module: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["module"] = json!(module);
    json!({
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "NamespacedPlugin",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// A ConfigMap in `ns` that testkit plugin `who` reacts to (`copy`: it creates
/// `<name>-out` beside it).
fn trigger(ns: &str, name: &str, who: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": {"kubewasm.dev/testkit": who}},
           "data": {"value": "1"}})
}

struct World {
    env: Env,
    registry: Registry,
}

impl World {
    /// A registry, `env` with both plugin CRDs and the teams' namespaces.
    async fn new(env: Env, namespaces: &[&str]) -> World {
        let registry = Registry::start();
        for crd in ["crd-plugins.yaml", "crd-namespacedplugins.yaml"] {
            env.apply_path(&root().join("deploy/kubernetes/base").join(crd))
                .await;
        }
        let api = env.api("v1", "Namespace", "namespaces", None);
        for ns in namespaces {
            env.create(
                &api,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .await;
        }
        World { env, registry }
    }

    fn start_host(&self, extra: &[&str]) -> HostProcess {
        let store = self.env.dir.path().join("modules").display().to_string();
        let registry = self.registry.host();
        let mut args = vec![
            "--insecure-registry",
            &registry,
            "--reload-debounce",
            "100ms",
            "--module-store",
            &store,
        ];
        args.extend_from_slice(extra);
        let config = empty_docker_config().display().to_string();
        self.env
            .start_host_with_env(&args, &[("DOCKER_CONFIG", &config)])
    }

    fn nsplugins(&self, ns: &str) -> Api<DynamicObject> {
        self.env.api(
            "kubewasm.dev/v1alpha1",
            "NamespacedPlugin",
            "namespacedplugins",
            Some(ns),
        )
    }

    fn cms(&self, ns: &str) -> Api<DynamicObject> {
        self.env.api("v1", "ConfigMap", "configmaps", Some(ns))
    }

    async fn apply(&self, ns: &str, obj: Value) {
        let name = obj["metadata"]["name"].as_str().expect("name").to_string();
        let obj: DynamicObject = serde_json::from_value(obj).expect("a NamespacedPlugin");
        self.nsplugins(ns)
            .patch(
                &name,
                &PatchParams::apply("tenants-test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("apply the NamespacedPlugin");
    }

    /// Wait until `ns/name`'s status has `Ready` at `status` with `reason` for its current
    /// generation; returns that condition.
    async fn ready(
        &self,
        host: &HostProcess,
        ns: &str,
        name: &str,
        status: &str,
        reason: &str,
    ) -> Value {
        let api = self.nsplugins(ns);
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let o = get(&api, name).await;
            let found = o.as_ref().and_then(|o| {
                let generation = o.metadata.generation?;
                let conditions = o.data["status"]["conditions"].as_array()?;
                conditions
                    .iter()
                    .find(|c| {
                        c["type"] == "Ready"
                            && c["status"] == status
                            && c["reason"] == reason
                            && c["observedGeneration"] == json!(generation)
                    })
                    .cloned()
            });
            if let Some(c) = found {
                return c;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for NamespacedPlugin {ns}/{name}: Ready={status} ({reason}); the object: {}\nhost log:\n{}",
                o.map(|o| serde_json::to_string_pretty(&o.data).unwrap_or_default())
                    .unwrap_or_default(),
                host.dump()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_plugins_on_one_kind_each_act_only_in_their_own_namespace() {
    let w = World::new(Env::with_crds(false).await, &["team-a", "team-b"]).await;
    let module = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let registry = w.registry.host();
    let host = w.start_host(&["--tenant-registry", &registry]);
    // The same plugin name in both namespaces: two plugins, `team-a/testkit` and
    // `team-b/testkit`.
    for ns in ["team-a", "team-b"] {
        w.apply(
            ns,
            nsplugin("testkit", &module, json!({"permissions": permissions()})),
        )
        .await;
    }
    for ns in ["team-a", "team-b"] {
        let ready = w.ready(&host, ns, "testkit", "True", "Serving").await;
        assert!(
            ready["message"].as_str().unwrap().contains(&module),
            "{ready}"
        );
        host.wait_log("loaded as NS/P", |l| {
            field(l, "message") == "plugin loaded"
                && field(l, "plugin") == format!("{ns}/testkit")
                && field(l, "source") == format!("namespacedplugins.kubewasm.dev/{ns}/testkit")
        })
        .await;
    }

    // A ConfigMap of the same kind and label outside both: no tenant's plugin sees it.
    w.env
        .create(&w.cms("default"), trigger("default", "a", "testkit"))
        .await;
    for ns in ["team-a", "team-b"] {
        w.env.create(&w.cms(ns), trigger(ns, "a", "testkit")).await;
    }
    for ns in ["team-a", "team-b"] {
        let out = eventually(&format!("{ns}/a-out"), CONVERGE, || async {
            get(&w.cms(ns), "a-out").await
        })
        .await;
        assert_eq!(managers(&out), ["kubewasm-testkit"], "{}", host.dump());
        // Each plugin handled its own namespace's trigger only.
        let handled: Vec<String> = host
            .matching(|l| {
                field(l, "message") == "event" && field(l, "plugin") == format!("{ns}/testkit")
            })
            .iter()
            .map(|l| field(l, "object").to_string())
            .collect();
        assert!(
            !handled.is_empty() && handled.iter().all(|o| o.contains(&format!("{ns}/a"))),
            "{ns}/testkit handled {handled:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        get(&w.cms("default"), "a-out").await.is_none(),
        "a tenant's plugin acted in namespace default"
    );
    host.assert_no_failed_events();
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_plugin_outside_its_namespace_or_the_ceilings_is_refused_with_the_reason() {
    let w = World::new(Env::with_crds(false).await, &["team-a", "team-b", "team-c"]).await;
    let module = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let registry = w.registry.host();
    let team_a = format!("team-a={registry}");
    let team_b = format!("team-b={registry}");
    let host = w.start_host(&[
        "--tenant-registry",
        &team_a,
        "--tenant-registry",
        &team_b,
        "--tenant-max-plugins",
        "6",
    ]);
    let cluster_kind =
        json!({"permissions": {"watches": [{"apiVersion": "v1", "kind": "Namespace"}]}});
    w.apply("team-a", nsplugin("cluster-kind", &module, cluster_kind))
        .await;
    let other_ns = json!({"permissions": {"watches": [
        {"apiVersion": "v1", "kind": "ConfigMap", "namespaces": ["team-b"]}]}});
    w.apply("team-a", nsplugin("other-ns", &module, other_ns))
        .await;
    // A custom kind the host cannot know offline: discovery says Plugin is cluster-scoped.
    let custom = json!({"permissions": {"watches": [{"apiVersion": "kubewasm.dev/v1alpha1", "kind": "Plugin"}]}});
    w.apply("team-a", nsplugin("plugin-kind", &module, custom))
        .await;
    let big = json!({"permissions": permissions(), "limits": {"memoryMiB": 128}});
    w.apply("team-a", nsplugin("big", &module, big)).await;
    // spec.permissions stay in the namespace; the module itself asks for a grant on
    // Namespaces (cluster-scoped), found when it is described.
    let asks = json!({"permissions": permissions(), "settings": {"namespaceGrant": ["team-a"]}});
    w.apply("team-a", nsplugin("testkit", &module, asks)).await;
    // The module calls itself `other`: a NamespacedPlugin is named after its plugin.
    let misnamed = json!({"permissions": permissions(), "settings": {"name": "other"}});
    w.apply("team-a", nsplugin("misnamed", &module, misnamed))
        .await;
    // team-c may pull from no registry.
    w.apply(
        "team-c",
        nsplugin("testkit", &module, json!({"permissions": permissions()})),
    )
    .await;
    // team-b: seven, one over --tenant-max-plugins; the newest is refused, though first by
    // name (creationTimestamp counts in seconds: p0 comes a second after the others).
    for i in [1, 2, 3, 4, 5, 6, 0] {
        if i == 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let mut spec = json!({"permissions": permissions(), "settings": {"name": format!("p{i}")}});
        if i == 1 {
            // A candidate, which a NamespacedPlugin does not run: said on its status.
            spec["candidate"] = json!({"module": module});
        }
        w.apply("team-b", nsplugin(&format!("p{i}"), &module, spec))
            .await;
    }

    let refused = [
        (
            "team-a",
            "cluster-kind",
            "ClusterScopedKind",
            "watch v1/Namespace: it is cluster-scoped, and a NamespacedPlugin in team-a acts only on namespaced kinds in team-a".to_string(),
        ),
        (
            "team-a",
            "other-ns",
            "OutsideNamespace",
            "watch v1/ConfigMap in namespace \"team-b\": a NamespacedPlugin in team-a acts only in team-a".to_string(),
        ),
        (
            "team-a",
            "plugin-kind",
            "ClusterScopedKind",
            "watch kubewasm.dev/v1alpha1/Plugin: it is cluster-scoped, and a NamespacedPlugin in team-a acts only on namespaced kinds in team-a".to_string(),
        ),
        (
            "team-a",
            "big",
            "InvalidLimits",
            "spec.limits: memoryMiB: 128 is over the platform's ceiling of 64 for NamespacedPlugins (--tenant-max-memory-mib)".to_string(),
        ),
        (
            "team-a",
            "testkit",
            "ClusterScopedKind",
            "grant on Namespace: it is cluster-scoped, and a NamespacedPlugin in team-a acts only on namespaced kinds in team-a".to_string(),
        ),
        (
            "team-a",
            "misnamed",
            "LoadFailed",
            "plugin namespacedplugins.kubewasm.dev/team-a/misnamed.wasm: manifest rejected: the manifest's name \"other\" must equal the file name \"misnamed\" (without .wasm)".to_string(),
        ),
        (
            "team-c",
            "testkit",
            "RegistryNotAllowed",
            format!("registry {registry} is not one namespace team-c may pull from (--tenant-registry): none is"),
        ),
        (
            "team-b",
            "p0",
            "TooManyPlugins",
            "namespace team-b has 7 NamespacedPlugins and may run 6 (--tenant-max-plugins): the oldest run, this one does not".to_string(),
        ),
    ];
    for (ns, name, reason, message) in refused {
        let ready = w.ready(&host, ns, name, "False", reason).await;
        assert_eq!(ready["message"], json!(message), "{ns}/{name}: {ready}");
        // What confinement refuses is not approved, for the same reason; written with
        // Ready, in one status.
        if ["ClusterScopedKind", "OutsideNamespace"].contains(&reason) {
            let o = get(&w.nsplugins(ns), name)
                .await
                .expect("the NamespacedPlugin");
            let approved = o.data["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Approved"))
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                (
                    &approved["status"],
                    &approved["reason"],
                    &approved["message"]
                ),
                (&json!("False"), &json!(reason), &json!(message)),
                "{ns}/{name}: {approved}"
            );
        }
    }
    // The other six of team-b run.
    for i in 1..=6 {
        w.ready(&host, "team-b", &format!("p{i}"), "True", "Serving")
            .await;
    }
    let previewing = eventually("team-b/p1's candidate refused", CONVERGE, || async {
        let o = get(&w.nsplugins("team-b"), "p1").await?;
        let cs = o.data["status"]["conditions"].as_array()?.clone();
        cs.into_iter()
            .find(|c| c["type"] == "Previewing" && c["reason"] == "CandidateNotSupported")
    })
    .await;
    assert_eq!(
        (&previewing["status"], &previewing["message"]),
        (
            &json!("False"),
            &json!(
                "the candidate does not run: only cluster Plugins shadow a candidate, not NamespacedPlugins"
            )
        ),
        "{previewing}"
    );
    // Nothing refused ever served: a trigger in team-a finds no plugin.
    w.env
        .create(&w.cms("team-a"), trigger("team-a", "t", "testkit"))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(get(&w.cms("team-a"), "t-out").await.is_none());
    assert_eq!(host.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_plugins_writes_are_refused_where_its_service_account_lacks_the_verb() {
    let w = World::new(Env::with_rbac(false, &[]).await, &["team-a"]).await;
    let module = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    // The team's Role for its plugin's ServiceAccount: it reads ConfigMaps and may create
    // them, but server-side apply is a PATCH.
    let role = |verbs: &[&str]| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "kubewasm-testkit", "namespace": "team-a"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
    };
    let roles = w.env.api(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        Some("team-a"),
    );
    w.env
        .create(&roles, role(&["get", "list", "watch", "create"]))
        .await;
    w.env
        .create(
            &w.env.api(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                "rolebindings",
                Some("team-a"),
            ),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "kubewasm-testkit", "namespace": "team-a"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubewasm-testkit"},
                   "subjects": [{"kind": "ServiceAccount", "name": "kubewasm-testkit", "namespace": "team-a"}]}),
        )
        .await;
    let registry = w.registry.host();
    // The host itself is cluster-admin here: what refuses is the plugin's own account.
    let host = w.start_host(&["--tenant-registry", &registry]);
    w.apply(
        "team-a",
        nsplugin("testkit", &module, json!({"permissions": permissions()})),
    )
    .await;
    w.ready(&host, "team-a", "testkit", "True", "Serving").await;

    w.env
        .create(&w.cms("team-a"), trigger("team-a", "c", "testkit"))
        .await;
    let failed = host
        .wait_log("the write refused", |l| {
            field(l, "message") == "event failed" && field(l, "plugin") == "team-a/testkit"
        })
        .await;
    let error = field(&failed, "error");
    assert!(
        error.contains(
            "configmaps \"c-out\" is forbidden: User \"system:serviceaccount:team-a:kubewasm-testkit\" \
             cannot patch resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
        ),
        "{failed}"
    );
    assert!(get(&w.cms("team-a"), "c-out").await.is_none());

    // The team grants patch: the next write goes through, as the plugin's own manager.
    roles
        .patch(
            "kubewasm-testkit",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "verbs": ["get", "list", "watch", "create", "patch"]}]}),
            ),
        )
        .await
        .expect("grant patch");
    w.env
        .create(&w.cms("team-a"), trigger("team-a", "d", "testkit"))
        .await;
    let out = eventually("d-out", CONVERGE, || async {
        get(&w.cms("team-a"), "d-out").await
    })
    .await;
    assert_eq!(managers(&out), ["kubewasm-testkit"], "{}", host.dump());
    assert_eq!(host.stop(), Some(0));
}

/// A hostile tenant: `hostile` as NamespacedPlugin `hog` in `ns`, watching its own
/// namespace's ConfigMaps labelled `kubewasm.dev/hostile=hog`, at the platform's memory
/// ceiling.
fn hog(module: &str) -> Value {
    nsplugin(
        "hog",
        module,
        json!({"permissions": permissions(), "limits": {"memoryMiB": 128},
               "settings": {"name": "hog", "namespace": "team-a"}}),
    )
}

/// The series `name{plugin="PLUGIN"}` of the host's /metrics, which must be exposed.
fn series(metrics: &str, name: &str, plugin: &str) -> f64 {
    let series = format!(r#"{name}{{plugin="{plugin}"}}"#);
    assert!(
        metrics.contains(&series),
        "{series} not exposed:\n{metrics}"
    );
    metric_sample(metrics, &series)
}

/// team-a's hostile plugin spins to its deadline, grows to its memory cap and traps, in
/// a burst, twice as many calls at once as its namespace's part of the budget holds;
/// team-b's trigger comes in the middle. With `--tenant-budget-share 50` of a 256 MiB
/// budget, team-a's calls (128 MiB each) hold at most 128 MiB of the whole at once, so
/// team-b's (64 MiB) never wait for the budget, whatever the timing: team-a/hog waits for
/// its namespace's part, team-b/good for nothing, and only team-a/hog is quarantined.
/// (With `--tenant-budget-share 100`, two hog calls hold the whole budget and team-b/good
/// waits: the check on its waits fails.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_tenant_plugin_does_not_delay_another_tenants_events() {
    let w = World::new(Env::with_crds(false).await, &["team-a", "team-b"]).await;
    let hostile = push_module(&w.registry, &test_plugin("hostile"), "hostile:v1");
    let testkit = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let registry = w.registry.host();
    let host = w.start_host(&[
        "--tenant-registry",
        &registry,
        "--call-memory-budget",
        "256",
        "--tenant-budget-share",
        "50",
        "--tenant-max-memory-mib",
        "128",
        "--tenant-max-call-deadline",
        "1s",
        "--tenant-max-instances",
        "2",
        "--quarantine-after",
        "5",
    ]);
    let addr = ops_endpoint(&host).await;
    w.apply("team-a", hog(&hostile)).await;
    let good = json!({"permissions": permissions(), "limits": {"memoryMiB": 64},
                      "settings": {"name": "good"}});
    w.apply("team-b", nsplugin("good", &testkit, good)).await;
    w.ready(&host, "team-a", "hog", "True", "Serving").await;
    w.ready(&host, "team-b", "good", "True", "Serving").await;

    let attack = |name: &str, attack: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "team-a",
                            "labels": {"kubewasm.dev/hostile": "hog"}},
               "data": {"attack": attack}})
    };
    // Two slow calls first: both of hog's instances are busy when team-b's trigger lands.
    let attacks = [
        "loop", "loop", "memory", "trap", "loop", "memory", "trap", "loop",
    ];
    for (i, a) in attacks.iter().enumerate() {
        if i == 4 {
            w.env
                .create(&w.cms("team-b"), trigger("team-b", "b", "good"))
                .await;
        }
        w.env
            .create(&w.cms("team-a"), attack(&format!("a{i}"), a))
            .await;
    }

    let out = eventually("team-b/b-out", CONVERGE, || async {
        get(&w.cms("team-b"), "b-out").await
    })
    .await;
    assert_eq!(managers(&out), ["kubewasm-good"], "{}", host.dump());
    let quarantined = host
        .wait_log("team-a/hog quarantined", |l| {
            field(l, "message").starts_with("plugin quarantined")
                && field(l, "plugin") == "team-a/hog"
        })
        .await;
    // team-b/good's call ended (its output is there): whatever it waited is counted.
    let (_, metrics) = http_get_status(&addr, "/metrics");
    for name in [
        "kubewasm_call_budget_waits_total",
        "kubewasm_call_budget_wait_timeouts_total",
        "kubewasm_call_budget_tenant_waits_total",
    ] {
        assert_eq!(
            series(&metrics, name, "team-b/good"),
            0.0,
            "team-b/good waited for the budget ({name}); {quarantined}\n{}",
            host.dump()
        );
    }
    // hog's two instances at once want twice its namespace's part.
    let metrics = eventually(
        "team-a/hog waited for its namespace's part",
        CONVERGE,
        || {
            let addr = addr.clone();
            async move {
                let (_, text) = http_get_status(&addr, "/metrics");
                let waits = metric_sample(
                    &text,
                    r#"kubewasm_call_budget_tenant_waits_total{plugin="team-a/hog"}"#,
                );
                (waits > 0.0).then_some(text)
            }
        },
    )
    .await;
    assert_eq!(
        series(&metrics, "kubewasm_plugin_quarantined", "team-a/hog"),
        1.0
    );
    assert_eq!(
        series(&metrics, "kubewasm_plugin_quarantined", "team-b/good"),
        0.0
    );
    assert!(
        host.matching(|l| field(l, "message").starts_with("plugin quarantined")
            && field(l, "plugin") != "team-a/hog")
            .is_empty(),
        "{}",
        host.dump()
    );
    assert_eq!(host.stop(), Some(0));
}

/// The NamespacedPlugin CRD: one source for kustomize and Helm, namespaced, and the
/// Plugin's own schema but for the words (the same `PluginSpec` and status).
#[test]
fn the_namespaced_crd_has_one_source_and_the_plugins_schema() {
    assert_crd_has_one_source(
        "crd-namespacedplugins.yaml",
        "namespacedplugins.kubewasm.dev.yaml",
    );
    let read = |name: &str| -> Value {
        let path = root().join("deploy/kubernetes/base").join(name);
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let crd = read("crd-namespacedplugins.yaml");
    assert_eq!(crd["metadata"]["name"], "namespacedplugins.kubewasm.dev");
    assert_eq!(crd["metadata"]["labels"]["kubewasm.dev/uninstall"], "keep");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let names = &crd["spec"]["names"];
    assert_eq!(
        (&names["kind"], &names["plural"], &names["singular"]),
        (
            &json!("NamespacedPlugin"),
            &json!("namespacedplugins"),
            &json!("namespacedplugin")
        )
    );
    assert_eq!(names["shortNames"], json!(["nsplugin"]));
    fn words_out(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("description");
                m.values_mut().for_each(words_out);
            }
            Value::Array(a) => a.iter_mut().for_each(words_out),
            _ => {}
        }
    }
    let mut ours = crd["spec"]["versions"].clone();
    let mut plugins = read("crd-plugins.yaml")["spec"]["versions"].clone();
    words_out(&mut ours);
    words_out(&mut plugins);
    assert_eq!(ours, plugins);
}

/// Leader election treats a NamespacedPlugin like any plugin: both replicas load it, only
/// the leader hands it its namespace's events and writes, and when the leader stops the
/// other takes over and handles what comes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_plugin_runs_on_the_leader_only_and_moves_with_the_lease() {
    let w = World::new(Env::with_crds(false).await, &["team-a"]).await;
    let module = push_module(&w.registry, &test_plugin("testkit"), "testkit:v1");
    let registry = w.registry.host();
    let replica = |id: &str| {
        let flags = [
            &["--tenant-registry", &registry, "--identity", id][..],
            &LEADER_ELECT,
        ]
        .concat();
        w.start_host(&flags)
    };
    let (a, b) = (replica("replica-a"), replica("replica-b"));
    w.apply(
        "team-a",
        nsplugin("testkit", &module, json!({"permissions": permissions()})),
    )
    .await;
    let leads = |h: &HostProcess| {
        !h.matching(|l| field(l, "message").contains("became leader"))
            .is_empty()
    };
    eventually("a leader", CONVERGE, || async {
        (leads(&a) || leads(&b)).then_some(())
    })
    .await;
    let (leader, follower) = if leads(&a) { (a, b) } else { (b, a) };
    for h in [&leader, &follower] {
        h.wait_log("team-a/testkit loaded", |l| {
            field(l, "message") == "plugin loaded" && field(l, "plugin") == "team-a/testkit"
        })
        .await;
    }
    w.ready(&leader, "team-a", "testkit", "True", "Serving")
        .await;
    let handled = |h: &HostProcess, name: &str| {
        let object = format!("ConfigMap team-a/{name}");
        h.matching(|l| {
            field(l, "plugin") == "team-a/testkit"
                && ((field(l, "message") == "event" && field(l, "object") == object)
                    || (field(l, "message").starts_with("applied ")
                        && field(l, "trigger") == object))
        })
        .len()
    };

    w.env
        .create(&w.cms("team-a"), trigger("team-a", "x", "testkit"))
        .await;
    let out = eventually("team-a/x-out", CONVERGE, || async {
        get(&w.cms("team-a"), "x-out").await
    })
    .await;
    assert_eq!(managers(&out), ["kubewasm-testkit"]);
    // The leader's event and apply logged; then give the follower every chance to act
    // too, and check it did not.
    eventually("the leader's apply logged", CONVERGE, || async {
        (handled(&leader, "x") >= 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(handled(&follower, "x"), 0, "{}", follower.dump());

    // The leader stops: the follower leads and runs the team's plugin.
    assert_eq!(leader.stop(), Some(0));
    follower
        .wait_log("the follower leads", |l| {
            field(l, "message").contains("became leader")
        })
        .await;
    w.env
        .create(&w.cms("team-a"), trigger("team-a", "y", "testkit"))
        .await;
    eventually("team-a/y-out by the new leader", CONVERGE, || async {
        get(&w.cms("team-a"), "y-out").await
    })
    .await;
    eventually("the new leader's apply logged", CONVERGE, || async {
        (handled(&follower, "y") >= 2).then_some(())
    })
    .await;
    follower.assert_no_failed_events();
    assert_eq!(follower.stop(), Some(0));
}
