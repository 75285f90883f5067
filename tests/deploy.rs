//! The deployment artifacts in `deploy/`: the build script the image runs, the Dockerfile,
//! the kustomize base, components and example overlay (rendered with `kubectl kustomize`,
//! checked, and applied to the embedded API server) and the Helm chart (rendered with a
//! real `helm`, checked against the kustomize base, applied too).
//!
//! kubectl and helm are external tools: a test that needs one that is missing says
//! SKIPPED on stderr and passes. helm: `deploy/tools/install-helm.sh` puts one in
//! `target/tools/helm/helm`, which is looked for after `$KUBEWASM_HELM` and `PATH`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, GroupVersionKind};
use kubewasm_apiserver::ApiServer;
use serde::Deserialize;
use serde_json::{Value, json};

use support::root;

const NAMESPACE: &str = "kubewasm-system";
const EXAMPLE_PLUGINS: [&str; 3] = [
    "contentsite-provisioner",
    "mongodb-monitor",
    "seldon-endpoint",
];
/// The most a ConfigMap may hold (data plus binaryData), as kube-apiserver validates.
const CONFIGMAP_LIMIT: usize = 1024 * 1024;

// ---------------------------------------------------------------------------------------
// tools

fn tool_works(path: &Path, args: &[&str]) -> bool {
    Command::new(path)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kubectl() -> Option<PathBuf> {
    let p = PathBuf::from("kubectl");
    if tool_works(&p, &["version", "--client"]) {
        Some(p)
    } else {
        eprintln!("SKIPPED: kubectl is not installed: the kustomize manifests were not rendered");
        None
    }
}

fn helm() -> Option<PathBuf> {
    let candidates = std::env::var_os("KUBEWASM_HELM")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("helm"), root().join("target/tools/helm/helm")]);
    for p in candidates {
        if tool_works(&p, &["version", "--short"]) {
            return Some(p);
        }
    }
    eprintln!(
        "SKIPPED: no helm binary ($KUBEWASM_HELM, PATH, target/tools/helm/helm): the chart was \
         not rendered; deploy/tools/install-helm.sh installs one"
    );
    None
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn parse_docs(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|de| Value::deserialize(de).expect("rendered YAML parses"))
        .filter(|v| !v.is_null())
        .collect()
}

fn kustomize(kubectl: &Path, dir: &Path) -> Vec<Value> {
    parse_docs(&run(Command::new(kubectl).arg("kustomize").arg(dir)))
}

/// `deploy/kubernetes` copied into a temporary folder, with the built example plugins in
/// `overlays/example/plugins/` (where the overlay's configMapGenerator reads them; kustomize
/// loads files only from inside a kustomization) and extra overlays: `overlays/all` adds the
/// servicemonitor and plugin-image components to the base, `overlays/sharded-base` the
/// sharding component, `overlays/cache-key` the cache-key component, `overlays/monitoring`
/// the servicemonitor and monitoring components, `overlays/tenants` the tenants component
/// and a `--tenant-registry`.
fn staged_kubernetes() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_dir(
        &root().join("deploy/kubernetes"),
        &tmp.path().join("kubernetes"),
    );
    let plugins = tmp.path().join("kubernetes/overlays/example/plugins");
    for name in EXAMPLE_PLUGINS {
        let wasm = support::example_plugin(name);
        std::fs::copy(&wasm, plugins.join(format!("{name}.wasm"))).expect("copy plugin");
        std::fs::copy(
            wasm.with_extension("yaml"),
            plugins.join(format!("{name}.yaml")),
        )
        .expect("copy plugin settings");
    }
    // The operator's approvals of the three, as deploy/README.md copies them.
    std::fs::copy(
        root().join("plugins/approvals.yaml"),
        plugins.join("approvals.yaml"),
    )
    .expect("copy approvals");
    let all = tmp.path().join("kubernetes/overlays/all");
    std::fs::create_dir_all(&all).unwrap();
    std::fs::write(
        all.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../base]\n\
         components: [../../components/servicemonitor, ../../components/plugin-image]\n",
    )
    .unwrap();
    // The sharding component on the base, as deploy/README.md adds it to an overlay.
    let sharded = tmp.path().join("kubernetes/overlays/sharded-base");
    std::fs::create_dir_all(&sharded).unwrap();
    std::fs::write(
        sharded.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../base]\ncomponents: [../../components/sharding]\n",
    )
    .unwrap();
    // The start-up kit beside the ServiceMonitor, as deploy/README.md adds them.
    let monitoring = tmp.path().join("kubernetes/overlays/monitoring");
    std::fs::create_dir_all(&monitoring).unwrap();
    std::fs::write(
        monitoring.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../base]\n\
         components: [../../components/servicemonitor, ../../components/monitoring]\n",
    )
    .unwrap();
    // Teams' plugins on the base, as deploy/README.md adds them (the registry in the
    // overlay).
    let tenants = tmp.path().join("kubernetes/overlays/tenants");
    std::fs::create_dir_all(&tenants).unwrap();
    std::fs::write(
        tenants.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../base]\ncomponents: [../../components/tenants]\n\
         patches:\n\
         - target: {group: apps, version: v1, kind: Deployment, name: kubewasm}\n\
         \x20 patch: |-\n\
         \x20   - op: add\n\
         \x20     path: /spec/template/spec/containers/0/args/-\n\
         \x20     value: --tenant-registry=registry.example.com\n",
    )
    .unwrap();
    let key = tmp.path().join("kubernetes/overlays/cache-key");
    std::fs::create_dir_all(&key).unwrap();
    std::fs::write(
        key.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../base]\ncomponents: [../../components/cache-key]\n",
    )
    .unwrap();
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------
// rendered objects

fn kind_of(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or("")
}

fn kinds(docs: &[Value]) -> BTreeSet<String> {
    docs.iter().map(|d| kind_of(d).to_string()).collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind_of(d) == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among the rendered objects"))
}

fn only<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| kind_of(d) == kind).collect();
    assert_eq!(found.len(), 1, "expected exactly one {kind}");
    found[0]
}

fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .chain(deployment["spec"]["template"]["spec"]["initContainers"].as_array())
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn args(c: &Value) -> Vec<&str> {
    c["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

fn volume<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

/// Every namespaced object is in the host's namespace (a kustomize overlay or component
/// that forgets `namespace:` leaves its own objects in `default`).
fn assert_namespaced_in_host_namespace(docs: &[Value]) {
    for d in docs {
        let k = kind_of(d);
        if k == "Namespace" || k.starts_with("Cluster") || k == "CustomResourceDefinition" {
            assert!(
                d["metadata"].get("namespace").is_none(),
                "{k} is cluster-scoped"
            );
        } else {
            assert_eq!(
                d["metadata"]["namespace"], NAMESPACE,
                "{k} {} namespace",
                d["metadata"]["name"]
            );
        }
    }
}

/// The restricted posture every container of the host's pod must have.
fn assert_container_hardened(c: &Value) {
    let sc = &c["securityContext"];
    let what = c["name"].as_str().unwrap();
    assert_eq!(sc["runAsNonRoot"], true, "{what}: runAsNonRoot");
    assert_eq!(
        sc["readOnlyRootFilesystem"], true,
        "{what}: readOnlyRootFilesystem"
    );
    assert_eq!(
        sc["allowPrivilegeEscalation"], false,
        "{what}: allowPrivilegeEscalation"
    );
    assert_eq!(
        sc["capabilities"]["drop"],
        json!(["ALL"]),
        "{what}: capabilities"
    );
    assert!(
        sc["capabilities"].get("add").is_none(),
        "{what}: adds capabilities"
    );
    assert_eq!(
        sc["seccompProfile"]["type"], "RuntimeDefault",
        "{what}: seccomp"
    );
    assert!(
        c["resources"]["requests"].is_object()
            && c["resources"]["limits"]["memory"].is_string()
            && c["resources"]["limits"]["cpu"].is_string(),
        "{what}: resources (a CPU and a memory limit)"
    );
}

/// A quantity in MiB (`1536Mi`, `2Gi`) or CPU millicores (`2`, `500m`).
fn mebibytes(q: &str) -> u64 {
    if let Some(n) = q.strip_suffix("Gi") {
        n.parse::<u64>().unwrap() * 1024
    } else if let Some(n) = q.strip_suffix("Mi") {
        n.parse().unwrap()
    } else {
        panic!("memory quantity {q:?} is not in Mi or Gi")
    }
}

fn millicores(q: &str) -> u64 {
    match q.strip_suffix('m') {
        Some(n) => n.parse().unwrap(),
        None => q.parse::<u64>().unwrap() * 1000,
    }
}

/// What the host itself is given in the memory arithmetic of deploy/README.md: caches,
/// compiled code and one compile in its worker.
const HOST_MIB: u64 = 512;

/// The host container's memory limit covers what its flags let `plugins` plugins hold at
/// once (deploy/README.md, "Memory and CPU"): the call budget (`--call-memory-budget`,
/// else half the limit) holds, per plugin, live instances (`--max-instances`, else
/// `--concurrency` (4) capped at two per CPU of the CPU limit) of at most `--memory-mib`
/// (256) each, so calls never wait; and [`HOST_MIB`] plus the budget is less than the
/// limit.
fn assert_memory_covers_the_flags(d: &Value, plugins: u64) {
    let c = container(d, "kubewasm");
    let a = args(c);
    let flag = |name: &str, default: u64| -> u64 {
        a.iter()
            .find_map(|x| x.strip_prefix(&format!("--{name}=")))
            .map_or(default, |v| v.parse().unwrap())
    };
    let memory = flag("memory-mib", 256);
    let concurrency = flag("concurrency", 4);
    let max_instances = flag("max-instances", 0);
    let cpus = millicores(c["resources"]["limits"]["cpu"].as_str().unwrap()).div_ceil(1000);
    let instances = if max_instances > 0 {
        max_instances.min(concurrency)
    } else {
        concurrency.min(2 * cpus.max(1))
    };
    let calls = plugins * instances * memory;
    let limit = mebibytes(c["resources"]["limits"]["memory"].as_str().unwrap());
    let budget = a
        .iter()
        .find_map(|x| x.strip_prefix("--call-memory-budget="))
        .filter(|v| *v != "auto")
        .map_or(limit / 2, |v| v.parse().unwrap());
    assert!(
        budget >= calls,
        "call budget {budget} MiB < {plugins} plugins × {instances} instances × {memory} MiB = {calls} MiB (limit {limit} MiB)"
    );
    assert!(
        HOST_MIB + budget < limit,
        "{HOST_MIB} MiB for the host + a budget of {budget} MiB is not below the limit {limit} MiB"
    );
    eprintln!(
        "memory: budget {budget} MiB >= {plugins} × {instances} × {memory} = {calls} MiB; {HOST_MIB} + {budget} < limit {limit} MiB"
    );
}

/// The host's token reaches the host container alone: not automounted, a projected volume
/// of exactly what the in-cluster configuration reads (a bound token, the CA, the
/// namespace), mounted read-only into the host container and no other.
fn assert_token_only_in_the_host(d: &Value) {
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    let sources = volume(d, "kube-api-access")["projected"]["sources"]
        .as_array()
        .expect("kube-api-access is a projected volume");
    assert_eq!(sources.len(), 3, "{sources:?}");
    assert_eq!(sources[0]["serviceAccountToken"]["path"], "token");
    assert!(
        sources[0]["serviceAccountToken"]["expirationSeconds"]
            .as_u64()
            .unwrap()
            <= 3607
    );
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    assert_eq!(
        sources[1]["configMap"]["items"],
        json!([{"key": "ca.crt", "path": "ca.crt"}])
    );
    assert_eq!(
        sources[2]["downwardAPI"]["items"],
        json!([{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}])
    );
    let all = pod["containers"]
        .as_array()
        .into_iter()
        .chain(pod["initContainers"].as_array())
        .flatten();
    for c in all {
        let mounts: Vec<&Value> = c["volumeMounts"].as_array().into_iter().flatten().collect();
        let token = mounts.iter().find(|m| m["name"] == "kube-api-access");
        if c["name"] == "kubewasm" {
            let m = token.expect("the host mounts its token");
            assert_eq!(
                m["mountPath"],
                "/var/run/secrets/kubernetes.io/serviceaccount"
            );
            assert_eq!(m["readOnly"], true);
        } else {
            assert!(token.is_none(), "{} mounts the token", c["name"]);
            assert!(
                !mounts.iter().any(|m| m["mountPath"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("/var/run/secrets")),
                "{} mounts something at the token's path",
                c["name"]
            );
        }
    }
}

/// The NetworkPolicies selecting the host's pods: ingress only to an exposed /metrics,
/// from named peers (never from everyone); egress to DNS, the API server and the
/// registries, on their ports, and nothing else.
fn assert_network_policy(docs: &[Value], d: &Value, metrics_exposed: bool) {
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    let policies: Vec<&Value> = docs
        .iter()
        .filter(|p| kind_of(p) == "NetworkPolicy")
        .filter(|p| {
            p["spec"]["podSelector"]["matchLabels"]
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| &labels[k] == v)
        })
        .collect();
    assert!(!policies.is_empty(), "no NetworkPolicy selects the host");
    let types: BTreeSet<&str> = policies
        .iter()
        .flat_map(|p| p["spec"]["policyTypes"].as_array().unwrap())
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types, ["Egress", "Ingress"].into());
    let ingress: Vec<&Value> = policies
        .iter()
        .flat_map(|p| p["spec"]["ingress"].as_array().into_iter().flatten())
        .collect();
    let metrics_in = ingress.iter().any(|r| {
        r["ports"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["port"] == 9090))
    });
    assert_eq!(
        metrics_in, metrics_exposed,
        "ingress to /metrics: {ingress:?}"
    );
    for r in &ingress {
        assert!(
            r["from"].as_array().is_some_and(|f| !f.is_empty()) && r["ports"].is_array(),
            "an ingress rule open to everyone or every port: {r}"
        );
    }
    let egress: Vec<&Value> = policies
        .iter()
        .flat_map(|p| p["spec"]["egress"].as_array().into_iter().flatten())
        .collect();
    let ports = |r: &Value| -> BTreeSet<(String, u64)> {
        r["ports"]
            .as_array()
            .expect("egress rules name their ports")
            .iter()
            .map(|p| {
                (
                    p["protocol"].as_str().unwrap().to_string(),
                    p["port"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let tcp = |ns: &[u64]| -> BTreeSet<(String, u64)> {
        ns.iter().map(|n| ("TCP".to_string(), *n)).collect()
    };
    let dns = egress
        .iter()
        .find(|r| ports(r).contains(&("UDP".to_string(), 53)))
        .expect("egress to DNS");
    assert_eq!(
        ports(dns),
        [("TCP".to_string(), 53), ("UDP".to_string(), 53)].into()
    );
    assert_eq!(
        dns["to"][0]["podSelector"]["matchLabels"]["k8s-app"], "kube-dns",
        "DNS only to the cluster's resolver"
    );
    assert!(
        egress.iter().any(|r| ports(r) == tcp(&[443, 6443])),
        "egress to the API server"
    );
    assert!(
        egress.iter().any(|r| ports(r) == tcp(&[443, 5000])),
        "egress to registries"
    );
    assert_eq!(
        egress.len(),
        3,
        "egress beyond DNS, API server, registries: {egress:?}"
    );
}

/// What every rendering of the host's Deployment shares.
fn assert_host_deployment(d: &Value) {
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() >= 10);
    assert!(pod["serviceAccountName"].is_string());
    let selector = &d["spec"]["selector"]["matchLabels"];
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(
            &d["spec"]["template"]["metadata"]["labels"][k], v,
            "pod label {k}"
        );
    }

    let c = container(d, "kubewasm");
    assert_container_hardened(c);
    let a = args(c);
    assert_eq!(a[0], "run");
    for want in [
        "--plugins=/plugins",
        "--approvals=/approvals",
        "--cache-dir=/var/cache/kubewasm",
        "--log-format=json",
        "--probe-addr=0.0.0.0:8081",
        // /metrics and /status over HTTPS behind the API server's reviews, by default.
        "--metrics-secure",
    ] {
        assert!(a.contains(&want), "args lack {want}: {a:?}");
    }
    // /metrics and /status on loopback (the default) unless exposed on purpose.
    let metrics: Vec<&&str> = a
        .iter()
        .filter(|x| x.starts_with("--metrics-addr"))
        .collect();
    let probes = json!({"name": "probes", "containerPort": 8081, "protocol": "TCP"});
    if metrics.is_empty() {
        assert_eq!(c["ports"], json!([probes]));
    } else {
        assert_eq!(metrics, [&"--metrics-addr=0.0.0.0:9090"]);
        assert_eq!(
            c["ports"],
            json!([{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}, probes])
        );
    }
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "probes"})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "probes"})
    );
    assert_eq!(
        c["startupProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "probes"})
    );
    assert_token_only_in_the_host(d);
    let env: BTreeMap<&str, &Value> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e))
        .collect();
    assert_eq!(
        env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(
        env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let mounts: BTreeMap<&str, &Value> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m))
        .collect();
    assert_eq!(mounts["plugins"]["mountPath"], "/plugins");
    assert_eq!(mounts["plugins"]["readOnly"], true);
    assert!(
        mounts["plugins"].get("subPath").is_none(),
        "a subPath mount never sees ConfigMap updates"
    );
    assert_eq!(mounts["cache"]["mountPath"], "/var/cache/kubewasm");
    assert!(
        volume(d, "cache")["emptyDir"].is_object(),
        "cache is an emptyDir"
    );
    // The operator's approvals: their own ConfigMap, never the plugins' volume.
    assert_eq!(mounts["approvals"]["mountPath"], "/approvals");
    assert_eq!(mounts["approvals"]["readOnly"], true);
    assert!(mounts["approvals"].get("subPath").is_none());
    assert_eq!(
        volume(d, "approvals")["projected"]["sources"],
        json!([{"configMap": {"name": "kubewasm-approvals", "optional": true}}])
    );
}

/// ConfigMap names projected into /plugins.
fn projected_configmaps(d: &Value) -> Vec<&str> {
    volume(d, "plugins")["projected"]["sources"]
        .as_array()
        .expect("plugins is a projected volume")
        .iter()
        .map(|s| s["configMap"]["name"].as_str().expect("a ConfigMap source"))
        .collect()
}

/// (group, resource) → verbs over every rule of the roles of `kind`.
fn rbac_rules(docs: &[Value], kind: &str) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for role in docs.iter().filter(|d| kind_of(d) == kind) {
        for rule in role["rules"].as_array().unwrap() {
            let strs = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            let verbs = strs("verbs");
            let (groups, resources) = if rule.get("nonResourceURLs").is_some() {
                (vec!["<url>".to_string()], strs("nonResourceURLs"))
            } else {
                (strs("apiGroups"), strs("resources"))
            };
            for g in &groups {
                for r in &resources {
                    out.entry((g.clone(), r.clone()))
                        .or_default()
                        .extend(verbs.iter().cloned());
                }
            }
        }
    }
    out
}

fn verbs(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The ClusterRole a scraper of `--metrics-secure` is bound to: get on /metrics and
/// /status, nothing else; not bound to the host.
fn assert_metrics_reader(docs: &[Value]) {
    let reader = find(
        docs,
        "ClusterRole",
        "kubewasm-system:kubewasm-metrics-reader",
    );
    assert_eq!(
        reader["rules"],
        json!([{"nonResourceURLs": ["/metrics", "/status"], "verbs": ["get"]}])
    );
    for b in docs
        .iter()
        .filter(|d| d["roleRef"]["name"] == "kubewasm-system:kubewasm-metrics-reader")
    {
        assert!(
            !b["subjects"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == "kubewasm"),
            "the host reads its own metrics on loopback, without the role: {b}"
        );
    }
}

/// A ServiceMonitor endpoint scraping `--metrics-secure`: https, Prometheus's own token,
/// the self-signed certificate accepted.
fn assert_secure_scrape(sm: &Value) {
    let e = &sm["spec"]["endpoints"][0];
    assert_eq!(e["port"], "metrics");
    assert_eq!(e["scheme"], "https", "{e}");
    assert_eq!(
        e["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "Prometheus's own ServiceAccount token: {e}"
    );
    assert_eq!(e["tlsConfig"], json!({"insecureSkipVerify": true}), "{e}");
}

/// The default RBAC covers exactly what the example plugins and the host need.
fn assert_example_rbac(docs: &[Value]) {
    let cluster = rbac_rules(docs, "ClusterRole");
    let read = ["get", "list", "watch"];
    let expect: Vec<(&str, &str, Vec<&str>)> = vec![
        ("sites.kubewasm.dev", "contentsites", read.to_vec()),
        ("sites.kubewasm.dev", "contentsites/status", vec!["patch"]),
        (
            "sites.kubewasm.dev",
            "contentsites/finalizers",
            vec!["update"],
        ),
        (
            "mongodb.com",
            "mongodb",
            vec!["get", "list", "watch", "create", "patch"],
        ),
        ("mongodb.com", "mongodb/finalizers", vec!["update"]),
        ("", "services", vec!["create", "patch"]),
        (
            "monitoring.coreos.com",
            "servicemonitors",
            vec!["create", "patch"],
        ),
        (
            "machinelearning.seldon.io",
            "seldondeployments",
            vec!["get", "list", "watch", "patch"],
        ),
        (
            "machinelearning.seldon.io",
            "seldondeployments/finalizers",
            vec!["update"],
        ),
        ("networking.k8s.io", "ingresses", vec!["create", "patch"]),
        ("", "events", vec!["create", "patch"]),
        ("events.k8s.io", "events", vec!["create", "patch"]),
        // Plugin objects: loaded by the host, their status written by it.
        ("kubewasm.dev", "plugins", vec!["get", "list", "watch"]),
        ("kubewasm.dev", "plugins/status", vec!["patch"]),
        // The host checks its own permissions at start.
        (
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            vec!["create"],
        ),
        // ... and whether each plugin's account may read what it is approved to read
        // (and, --metrics-secure, whether a scraper may get /metrics).
        (
            "authorization.k8s.io",
            "subjectaccessreviews",
            vec!["create"],
        ),
        // --metrics-secure: whom a scraper's token authenticates as.
        ("authentication.k8s.io", "tokenreviews", vec!["create"]),
    ];
    for (g, r, v) in &expect {
        assert_eq!(
            cluster.get(&(g.to_string(), r.to_string())),
            Some(&verbs(v)),
            "ClusterRole rule for {r}.{g}"
        );
    }
    let non_url = cluster.keys().filter(|(g, _)| g != "<url>").count();
    assert_eq!(
        non_url,
        expect.len(),
        "ClusterRole grants more: {cluster:?}"
    );
    assert_metrics_reader(docs);
    for verbs in cluster.values() {
        assert!(!verbs.contains("*"), "no wildcard verbs");
        assert!(
            !verbs.contains("delete"),
            "the example plugins delete nothing"
        );
    }
    let role = rbac_rules(docs, "Role");
    assert_eq!(
        role,
        BTreeMap::from([
            (
                ("coordination.k8s.io".to_string(), "leases".to_string()),
                verbs(&["get", "create", "update"])
            ),
            (
                ("".to_string(), "serviceaccounts".to_string()),
                verbs(&["impersonate"])
            ),
        ]),
        "the namespaced Role holds the Lease and the impersonation of the plugins, and no \
         Secret (no pull secret is allowed by default)"
    );
    // Each example plugin writes as its own ServiceAccount, bound to its own ClusterRole,
    // and the host may impersonate exactly those.
    let impersonate = docs
        .iter()
        .filter(|d| kind_of(d) == "Role")
        .flat_map(|d| d["rules"].as_array().unwrap().iter())
        .find(|r| r["verbs"] == serde_json::json!(["impersonate"]))
        .expect("impersonate rule");
    let mut names: Vec<String> = impersonate["resourceNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    names.sort();
    let want: Vec<String> = EXAMPLE_PLUGINS
        .iter()
        .map(|p| format!("kubewasm-{p}"))
        .collect();
    assert_eq!(names, want);
    for account in want.iter().map(String::as_str).chain(["kubewasm"]) {
        let sa = docs
            .iter()
            .find(|d| kind_of(d) == "ServiceAccount" && d["metadata"]["name"] == account)
            .unwrap_or_else(|| panic!("ServiceAccount {account}"));
        // Cluster-scoped: named after the install, NAMESPACE:ACCOUNT.
        let cluster_name = format!("{NAMESPACE}:{account}");
        let binding = docs
            .iter()
            .find(|d| kind_of(d) == "ClusterRoleBinding" && d["metadata"]["name"] == cluster_name)
            .unwrap_or_else(|| panic!("ClusterRoleBinding {cluster_name}"));
        assert_eq!(binding["subjects"][0]["name"], sa["metadata"]["name"]);
        assert_eq!(
            binding["subjects"][0]["namespace"],
            sa["metadata"]["namespace"]
        );
        assert_eq!(binding["roleRef"]["name"], cluster_name);
        assert_eq!(
            binding["metadata"]["labels"]["kubewasm.dev/install"],
            NAMESPACE
        );
    }
}

fn b64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= if c == b'=' { 0 } else { val(c) } << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    out
}

fn configmap_size(cm: &Value) -> usize {
    let data: usize = cm["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().unwrap().len())
        .sum();
    let binary: usize = cm["binaryData"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + b64_decode(v.as_str().unwrap()).len())
        .sum();
    data + binary
}

// ---------------------------------------------------------------------------------------
// applying to the embedded API server

/// Apply `docs` (after the example CRDs, for the ServiceMonitor) the way `kubewasm dev
/// --apply` does. Kinds the embedded server does not serve are reported and left out;
/// returns them.
async fn apply_rendered(client: &Client, docs: &[Value], what: &str) -> BTreeSet<String> {
    let mut not_served = BTreeSet::new();
    let mut served = Vec::new();
    for d in docs {
        let (group, version) = match d["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), d["apiVersion"].as_str().unwrap().to_string()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, kind_of(d));
        if kube::discovery::pinned_kind(client, &gvk).await.is_ok() {
            served.push(d.clone());
        } else {
            not_served.insert(kind_of(d).to_string());
        }
    }
    if !not_served.is_empty() {
        eprintln!(
            "NOTE ({what}): the embedded API server does not serve {not_served:?}; \
             those objects were not applied"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    let yaml: Vec<String> = served
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap())
        .collect();
    std::fs::write(&file, yaml.join("---\n")).unwrap();
    let parsed =
        kubewasm::apply::manifests::read_manifests(&[file]).expect("read rendered manifests");
    assert_eq!(parsed.len(), served.len());
    let applied =
        kubewasm::apply::manifests::apply_manifests(client, &parsed, Duration::from_secs(20))
            .await
            .unwrap_or_else(|e| panic!("{what}: the embedded API server refused: {e}"));
    assert_eq!(applied, served.len());
    // Every object is there, as rendered.
    for d in &served {
        let (group, version) = match d["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), d["apiVersion"].as_str().unwrap().to_string()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, kind_of(d));
        let (res, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                d["metadata"]["namespace"].as_str().unwrap_or("default"),
                &res,
            ),
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &res),
        };
        let name = d["metadata"]["name"].as_str().unwrap();
        let got = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{what}: {} {name} not stored: {e}", kind_of(d)));
        let got = serde_json::to_value(&got).unwrap();
        for field in ["spec", "rules", "data", "binaryData", "subjects", "roleRef"] {
            if let Some(want) = d.get(field) {
                assert_eq!(&got[field], want, "{what}: {} {name}: {field}", kind_of(d));
            }
        }
    }
    not_served
}

async fn api_server() -> (ApiServer, Client) {
    let server = ApiServer::start(Default::default())
        .await
        .expect("start API server");
    let client = Client::try_from(server.client_config()).expect("client");
    let crds = kubewasm::apply::manifests::read_manifests(&[root().join("examples/crds")]).unwrap();
    kubewasm::apply::manifests::apply_manifests(&client, &crds, Duration::from_secs(20))
        .await
        .expect("example CRDs");
    (server, client)
}

// ---------------------------------------------------------------------------------------
// tests

#[test]
fn build_script_parses_and_prints_its_commands() {
    let script = root().join("deploy/build.sh");
    run(Command::new("bash").arg("-n").arg(&script));
    run(Command::new("bash")
        .arg("-n")
        .arg(root().join("deploy/tools/install-helm.sh")));

    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("out");
    let printed = run(Command::new("bash")
        .arg(&script)
        .arg("--dry-run")
        .arg(&out)
        .env("CARGO_TARGET_DIR", "/tmp/some-target"));
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 3, "{printed}");
    // Static (glibc, crt-static) for the target alone, so build scripts stay dynamic.
    assert!(
        lines[0].starts_with("+ env -u CARGO_ENCODED_RUSTFLAGS RUSTFLAGS=-C\\ target-feature=+crt-static")
            && lines[0].contains(
                " cargo build --profile release --locked -p kubewasm-cli --target x86_64-unknown-linux-gnu "
            )
            && lines[0].contains("--target-dir /tmp/some-target"),
        "{printed}"
    );
    assert_eq!(lines[1], format!("+ mkdir -p {}", out.display()));
    assert_eq!(
        lines[2],
        format!(
            "+ install -m 0755 /tmp/some-target/x86_64-unknown-linux-gnu/release/kubewasm {}/kubewasm",
            out.display()
        )
    );
    assert!(!out.exists(), "a dry run creates nothing");
    // --print is the same; no output dir is a usage error.
    assert_eq!(
        run(Command::new("bash")
            .arg(&script)
            .arg("--print")
            .arg(&out)
            .env("CARGO_TARGET_DIR", "/tmp/some-target")),
        printed
    );
    let status = Command::new("bash").arg(&script).output().unwrap().status;
    assert_eq!(status.code(), Some(2));
}

#[test]
fn dockerfile_builds_with_the_script_and_runs_as_nonroot() {
    let text = std::fs::read_to_string(root().join("deploy/Dockerfile")).unwrap();
    let instructions: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = instructions
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(froms[0].contains("rust:1.95-bookworm") && froms[0].ends_with(" AS build"));
    // The same files as deploy/build-image.sh writes (tests/image.rs compares them).
    assert_eq!(*froms[1], "FROM scratch");
    assert!(
        instructions
            .iter()
            .any(|l| l.starts_with("RUN bash deploy/build.sh /out"))
    );
    let runtime = &instructions[instructions.iter().position(|l| l == froms[1]).unwrap()..];
    assert!(runtime.contains(&"USER 65532:65532"));
    assert!(runtime.contains(&r#"ENTRYPOINT ["/usr/local/bin/kubewasm"]"#));
    assert!(runtime.contains(
        &r#"CMD ["run", "--plugins", "/plugins", "--cache-dir", "/var/cache/kubewasm", "--log-format", "json"]"#
    ));
    assert!(
        runtime
            .iter()
            .any(|l| l.starts_with("COPY --from=build --chown=65532:65532")
                && l.ends_with(" /var/cache/kubewasm")),
        "the cache dir exists and belongs to the runtime user"
    );
    let ignore = std::fs::read_to_string(root().join("deploy/Dockerfile.dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "**/target"));
}

#[test]
fn kustomize_base_renders_a_hardened_host() {
    let Some(kubectl) = kubectl() else { return };
    let docs = kustomize(&kubectl, &root().join("deploy/kubernetes/base"));
    assert_eq!(
        kinds(&docs),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "CustomResourceDefinition",
            "Deployment",
            "Namespace",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
        .map(String::from)
        .into(),
    );
    assert_namespaced_in_host_namespace(&docs);
    assert_eq!(
        find(&docs, "Namespace", NAMESPACE)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        container(d, "kubewasm")["image"],
        "localhost/kubewasm:0.1.0"
    );
    assert!(!args(container(d, "kubewasm")).contains(&"--leader-elect"));
    assert_eq!(projected_configmaps(d), ["kubewasm-plugins"]);
    let plugins_cm = find(&docs, "ConfigMap", "kubewasm-plugins");
    assert!(plugins_cm.get("binaryData").is_none());

    // Sized for one plugin at the defaults; nothing reachable but the probes.
    assert_memory_covers_the_flags(d, 1);
    assert_network_policy(&docs, d, false);
    let pdb = only(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["selector"], d["spec"]["selector"]);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    // The pod runs as the host's ServiceAccount; the plugins' own (kubewasm-<plugin>) are
    // only impersonated.
    assert_eq!(
        d["spec"]["template"]["spec"]["serviceAccountName"],
        find(&docs, "ServiceAccount", "kubewasm")["metadata"]["name"]
    );

    assert_example_rbac(&docs);
}

#[test]
fn kustomize_example_overlay_and_components_render() {
    let Some(kubectl) = kubectl() else { return };
    let staged = staged_kubernetes();
    let k = staged.path().join("kubernetes");

    let docs = kustomize(&kubectl, &k.join("overlays/example"));
    assert_namespaced_in_host_namespace(&docs);
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    assert_eq!(d["spec"]["replicas"], 2);
    let a = args(container(d, "kubewasm"));
    assert!(
        a.contains(&"--leader-elect") && a.contains(&"--lease-name=kubewasm"),
        "{a:?}"
    );
    let projected = projected_configmaps(d);
    assert_memory_covers_the_flags(d, EXAMPLE_PLUGINS.len() as u64);
    assert_network_policy(&docs, d, false);
    for name in EXAMPLE_PLUGINS {
        let cm_name = format!("kubewasm-plugin-{name}");
        assert!(
            projected.contains(&cm_name.as_str()),
            "{cm_name} is not mounted"
        );
        let cm = find(&docs, "ConfigMap", &cm_name);
        let wasm = std::fs::read(support::example_plugin(name)).unwrap();
        let stored = b64_decode(
            cm["binaryData"][format!("{name}.wasm")]
                .as_str()
                .expect("binaryData"),
        );
        assert!(stored == wasm, "{name}.wasm differs from the built plugin");
        assert!(
            cm["data"][format!("{name}.yaml")].is_string(),
            "{name}.yaml settings"
        );
        let size = configmap_size(cm);
        assert!(
            size <= CONFIGMAP_LIMIT,
            "{cm_name} holds {size} bytes, over 1 MiB"
        );
    }
    assert_example_rbac(&docs);
    // The approvals, in a ConfigMap of their own, are plugins/approvals.yaml.
    let approvals = find(&docs, "ConfigMap", "kubewasm-approvals");
    assert_eq!(
        approvals["data"]["approvals.yaml"].as_str(),
        Some(
            std::fs::read_to_string(root().join("plugins/approvals.yaml"))
                .unwrap()
                .as_str()
        )
    );

    // Both components on the base: ServiceMonitor, plugins from an image.
    let docs = kustomize(&kubectl, &k.join("overlays/all"));
    assert_namespaced_in_host_namespace(&docs);
    let sm = only(&docs, "ServiceMonitor");
    assert_eq!(sm["metadata"]["namespace"], NAMESPACE);
    assert_secure_scrape(sm);
    // Prometheus's ServiceAccount (kube-prometheus's, in the namespace the policy lets
    // in) is bound to the reader role.
    let binding = find(
        &docs,
        "ClusterRoleBinding",
        "kubewasm-system:kubewasm-metrics-reader",
    );
    assert_eq!(
        binding["roleRef"]["name"],
        "kubewasm-system:kubewasm-metrics-reader"
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}])
    );
    assert_metrics_reader(&docs);
    let svc = only(&docs, "Service");
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &svc["metadata"]["labels"][k], v,
            "the ServiceMonitor selects the Service"
        );
    }
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    // The component exposes /metrics: bound to the pod, a Service on it, and only the
    // monitoring namespace let in.
    assert!(args(container(d, "kubewasm")).contains(&"--metrics-addr=0.0.0.0:9090"));
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&d["spec"]["template"]["metadata"]["labels"][k], v);
    }
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
    assert_network_policy(&docs, d, true);
    let init = container(d, "plugins");
    assert_container_hardened(init);
    assert_eq!(init["volumeMounts"][0]["name"], "plugins");
    let plugins = volume(d, "plugins");
    assert!(
        plugins["emptyDir"].is_object() && plugins.get("projected").is_none(),
        "{plugins}"
    );
    assert!(
        !docs.iter().any(|d| kind_of(d) == "ConfigMap"),
        "no plugin ConfigMap left"
    );
}

/// The verbs of the host's Role on Leases.
fn lease_verbs(docs: &[Value]) -> BTreeSet<String> {
    rbac_rules(docs, "Role")
        .remove(&("coordination.k8s.io".to_string(), "leases".to_string()))
        .expect("a Lease rule in the host's Role")
}

/// A sharded Deployment: `replicas` replicas of `kubewasm run --shards=32` (its Leases named
/// after `--lease-name`), no leader election, a PodDisruptionBudget of one at a time, and the
/// Lease verbs sharding needs; the rest of the RBAC as the example's.
fn assert_sharded(docs: &[Value], replicas: u64, lease_name: Option<&str>) {
    let d = only(docs, "Deployment");
    assert_host_deployment(d);
    assert_eq!(d["spec"]["replicas"], replicas);
    let a = args(container(d, "kubewasm"));
    assert!(a.contains(&"--shards=32"), "{a:?}");
    assert!(
        !a.iter().any(|x| x.starts_with("--leader-elect")),
        "--shards and --leader-elect exclude each other: {a:?}"
    );
    assert_eq!(
        a.iter().filter(|x| x.starts_with("--shards")).count(),
        1,
        "{a:?}"
    );
    match lease_name {
        Some(name) => assert!(
            a.contains(&format!("--lease-name={name}").as_str()),
            "{a:?}"
        ),
        None => assert!(!a.iter().any(|x| x.starts_with("--lease-name")), "{a:?}"),
    }
    assert_eq!(
        lease_verbs(docs),
        verbs(&["get", "list", "create", "update", "delete"]),
        "shards: list the shard and member Leases, delete the member Lease on shutdown"
    );
    let pdb = only(docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &d["spec"]["template"]["metadata"]["labels"][k], v,
            "the PodDisruptionBudget selects the host's pods"
        );
    }
    assert_network_policy(docs, d, false);
}

#[test]
fn kustomize_sharded_overlay_and_component_render() {
    let Some(kubectl) = kubectl() else { return };
    let staged = staged_kubernetes();
    let k = staged.path().join("kubernetes");

    // The example plugins on three sharded replicas: the example minus its leader election.
    let example = kustomize(&kubectl, &k.join("overlays/example"));
    let docs = kustomize(&kubectl, &k.join("overlays/sharded"));
    assert_namespaced_in_host_namespace(&docs);
    assert_sharded(&docs, 3, Some("kubewasm"));
    let d = only(&docs, "Deployment");
    assert_memory_covers_the_flags(d, EXAMPLE_PLUGINS.len() as u64);
    // Spread across nodes: one node lost takes a third of the shards, not all.
    let spread = &d["spec"]["template"]["spec"]["topologySpreadConstraints"];
    assert_eq!(spread.as_array().map(Vec::len), Some(1), "{spread}");
    assert_eq!(spread[0]["topologyKey"], "kubernetes.io/hostname");
    // Everything but the Deployment's replicas and flags and the Lease verbs is the example's.
    let mut sharded_args: Vec<&str> = args(container(d, "kubewasm"));
    sharded_args.retain(|a| *a != "--shards=32");
    let mut example_args = args(container(only(&example, "Deployment"), "kubewasm"));
    example_args.retain(|a| *a != "--leader-elect");
    assert_eq!(sharded_args, example_args);
    assert_eq!(
        projected_configmaps(d),
        projected_configmaps(only(&example, "Deployment"))
    );
    assert_eq!(kinds(&docs), kinds(&example));
    assert_eq!(
        rbac_rules(&docs, "ClusterRole"),
        rbac_rules(&example, "ClusterRole")
    );
    let mut role = rbac_rules(&docs, "Role");
    let mut example_role = rbac_rules(&example, "Role");
    let lease = ("coordination.k8s.io".to_string(), "leases".to_string());
    role.remove(&lease);
    example_role.remove(&lease);
    assert_eq!(role, example_role);

    // The component on the base: the base's flags plus --shards.
    let docs = kustomize(&kubectl, &k.join("overlays/sharded-base"));
    assert_namespaced_in_host_namespace(&docs);
    assert_sharded(&docs, 3, None);
    assert_memory_covers_the_flags(only(&docs, "Deployment"), 1);
}

#[tokio::test]
async fn rendered_manifests_are_accepted_by_the_api_server() {
    let Some(kubectl) = kubectl() else { return };
    let staged = staged_kubernetes();
    let k = staged.path().join("kubernetes");
    let mut not_served = BTreeSet::new();
    let mut last = None;
    // Each rendering is an install of its own, on a fresh server; the example stays.
    for dir in [
        "base",
        "overlays/all",
        "overlays/sharded",
        "overlays/example",
    ] {
        let (server, client) = api_server().await;
        let docs = kustomize(&kubectl, &k.join(dir));
        not_served.extend(apply_rendered(&client, &docs, dir).await);
        last = Some((server, client));
    }
    let (_server, client) = last.unwrap();
    // Only kinds the embedded server does not emulate may be left out.
    assert!(
        not_served.iter().all(|k| k == "PodDisruptionBudget"),
        "not applied: {not_served:?}"
    );
    // The example's plugin ConfigMaps round-trip byte for byte. (Read untyped: kustomize
    // wraps base64 at 70 columns; kube-apiserver's decoder skips the line breaks and
    // answers unwrapped base64, the embedded server stores the text as sent, which
    // k8s-openapi's strict decoder refuses.)
    let cms: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    for name in EXAMPLE_PLUGINS {
        let cm = cms.get(&format!("kubewasm-plugin-{name}")).await.unwrap();
        let stored = b64_decode(
            cm.data["binaryData"][format!("{name}.wasm")]
                .as_str()
                .unwrap(),
        );
        assert!(stored == std::fs::read(support::example_plugin(name)).unwrap());
    }
}

/// Render the chart with `helm template` and `--set` values, its CRDs included (as `helm
/// install` installs them).
fn helm_template(helm: &Path, set: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(helm);
    cmd.args(["template", "kubewasm", "--include-crds"])
        .arg(root().join("deploy/helm/kubewasm"))
        .args(["--namespace", NAMESPACE]);
    for s in set {
        cmd.arg("--set").arg(s);
    }
    parse_docs(&run(&mut cmd))
}

/// The images a rendered Deployment's containers and init containers run.
fn images(docs: &[Value]) -> Vec<String> {
    let d = only(docs, "Deployment");
    let spec = &d["spec"]["template"]["spec"];
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().cloned().unwrap_or_default())
        .map(|c| c["image"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Whether an image reference names its registry (`localhost/x`, `registry.example/x`,
/// `host:5000/x`): a bare `kubewasm:0.1.0` is `docker.io/library/kubewasm:0.1.0` to a
/// container runtime, a public name this project does not own.
fn names_its_registry(image: &str) -> bool {
    image
        .split_once('/')
        .is_some_and(|(host, _)| host == "localhost" || host.contains('.') || host.contains(':'))
}

/// Found on a real node: the example overlay's image `kubewasm:0.1.0` resolved to
/// docker.io, where no such image exists (and anyone could publish one). Every image the
/// kustomize base, the example overlay, the components and the chart's defaults run
/// names a registry: the locally built `localhost/kubewasm` until an overlay or
/// `image.repository` says which registry to pull from.
#[test]
fn every_default_image_names_its_registry() {
    assert!(names_its_registry("localhost/kubewasm:0.1.0"));
    assert!(names_its_registry("registry.example/kubewasm:0.1.0"));
    assert!(names_its_registry("10.0.0.5:5000/kubewasm:0.1.0"));
    assert!(!names_its_registry("kubewasm:0.1.0"));
    assert!(!names_its_registry("team/kubewasm:0.1.0"));
    let mut rendered = Vec::new();
    if let Some(kubectl) = kubectl() {
        let staged = staged_kubernetes();
        let k = staged.path().join("kubernetes");
        for overlay in [
            "base",
            "overlays/example",
            "overlays/all",
            "overlays/cache-key",
        ] {
            rendered.push((
                overlay.to_string(),
                images(&kustomize(&kubectl, &k.join(overlay))),
            ));
        }
    }
    if let Some(helm) = helm() {
        rendered.push(("chart".into(), images(&helm_template(&helm, &[]))));
        rendered.push((
            "chart with leader election".into(),
            images(&helm_template(
                &helm,
                &["replicas=2", "leaderElection.enabled=true"],
            )),
        ));
    }
    if rendered.is_empty() {
        println!("SKIPPED: neither kubectl nor helm");
        return;
    }
    for (what, images) in &rendered {
        assert!(!images.is_empty(), "{what}: no image");
        for image in images {
            assert!(
                names_its_registry(image),
                "{what} runs {image}, which a runtime resolves to docker.io"
            );
        }
    }
    let all: BTreeSet<&String> = rendered.iter().flat_map(|(_, i)| i).collect();
    assert!(
        all.contains(&"localhost/kubewasm:0.1.0".to_string()),
        "{all:?}"
    );
}

/// An overlay's `images:` entry as deploy/README.md writes it (`name: localhost/kubewasm`)
/// replaces the base's image: kustomize matches the name the base rendered, registry
/// included, so an entry naming a bare `kubewasm` would silently change nothing.
#[test]
fn an_overlay_sets_its_registry_as_the_readme_says() {
    let readme = std::fs::read_to_string(root().join("deploy/README.md")).expect("README");
    assert!(
        readme.contains("  - name: localhost/kubewasm "),
        "deploy/README.md's overlay names the base's image"
    );
    let Some(kubectl) = kubectl() else { return };
    let staged = staged_kubernetes();
    let mine = staged.path().join("kubernetes/overlays/mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(
        mine.join("kustomization.yaml"),
        "resources: [../../base]\nimages:\n  - name: localhost/kubewasm\n    \
         newName: registry.example/kubewasm\n    newTag: \"9\"\n",
    )
    .unwrap();
    assert_eq!(
        images(&kustomize(&kubectl, &mine)),
        ["registry.example/kubewasm:9"]
    );
}

#[test]
fn helm_chart_renders_what_the_kustomize_base_does() {
    let Some(helm) = helm() else { return };
    run(Command::new(&helm)
        .arg("lint")
        .arg(root().join("deploy/helm/kubewasm")));
    let chart = helm_template(&helm, &["namespace.create=true"]);
    let d = only(&chart, "Deployment");
    assert_host_deployment(d);
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        container(d, "kubewasm")["image"],
        "localhost/kubewasm:0.1.0"
    );
    assert_eq!(projected_configmaps(d), ["kubewasm-plugins"]);
    assert_example_rbac(&chart);

    let Some(kubectl) = kubectl() else { return };
    let base = kustomize(&kubectl, &root().join("deploy/kubernetes/base"));
    assert_eq!(
        kinds(&chart),
        kinds(&base),
        "the chart yields the base's kinds"
    );
    // Same names, same pod and container specs (labels aside: the chart adds Helm's).
    let names = |docs: &[Value]| -> BTreeSet<(String, String)> {
        docs.iter()
            .map(|d| {
                (
                    kind_of(d).to_string(),
                    d["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(names(&chart), names(&base));
    let base_d = only(&base, "Deployment");
    let pod = |d: &Value| {
        let mut p = d["spec"]["template"]["spec"].clone();
        p.as_object_mut().unwrap().remove("containers");
        p
    };
    assert_eq!(pod(d), pod(base_d));
    assert_eq!(container(d, "kubewasm"), container(base_d, "kubewasm"));
    assert_eq!(d["spec"]["strategy"], base_d["spec"]["strategy"]);
    assert_eq!(
        rbac_rules(&chart, "ClusterRole"),
        rbac_rules(&base, "ClusterRole")
    );
    assert_eq!(rbac_rules(&chart, "Role"), rbac_rules(&base, "Role"));
    assert_eq!(
        only(&chart, "PodDisruptionBudget")["spec"]["maxUnavailable"],
        only(&base, "PodDisruptionBudget")["spec"]["maxUnavailable"]
    );
    // The same policy (the selector aside: the chart's has the release's instance label).
    let policy = |docs: &[Value]| {
        let mut spec = only(docs, "NetworkPolicy")["spec"].clone();
        spec.as_object_mut().unwrap().remove("podSelector");
        spec
    };
    assert_eq!(policy(&chart), policy(&base));
    assert_memory_covers_the_flags(d, 1);
    assert_network_policy(&chart, d, false);
}

#[tokio::test]
async fn helm_chart_values_for_plugins_ha_and_metrics() {
    let Some(helm) = helm() else { return };
    // Inline plugin with --set-file (base64, line-wrapped as `base64` prints it).
    let tmp = tempfile::tempdir().unwrap();
    let wasm_path = support::example_plugin("mongodb-monitor");
    let wasm = std::fs::read(&wasm_path).unwrap();
    let b64 = tmp.path().join("mongodb-monitor.wasm.b64");
    let encoded = run(Command::new("base64").arg(&wasm_path));
    assert!(encoded.contains('\n'));
    std::fs::write(&b64, encoded).unwrap();
    let out = run(Command::new(&helm)
        .args(["template", "kubewasm"])
        .arg(root().join("deploy/helm/kubewasm"))
        .args(["--namespace", NAMESPACE])
        .arg("--set-file")
        .arg(format!(
            "plugins.binaryData.mongodb-monitor\\.wasm={}",
            b64.display()
        ))
        .arg("--set-file")
        .arg(format!(
            "plugins.data.mongodb-monitor\\.yaml={}",
            wasm_path.with_extension("yaml").display()
        ))
        .arg("--set-file")
        .arg(format!(
            "approvals.data.approvals\\.yaml={}",
            root().join("plugins/approvals.yaml").display()
        ))
        .args([
            "--set",
            "replicas=2",
            "--set",
            "leaderElection.enabled=true",
        ])
        .args(["--set", "namespace.create=true"])
        .args(["--set", "metrics.serviceMonitor.enabled=true"])
        .args(["--set", "metrics.serviceMonitor.labels.release=prometheus"])
        .args([
            "--set",
            "plugins.configMaps={kubewasm-plugin-a,kubewasm-plugin-b}",
        ]));
    let docs = parse_docs(&out);
    let cm = find(&docs, "ConfigMap", "kubewasm-plugins");
    assert!(b64_decode(cm["binaryData"]["mongodb-monitor.wasm"].as_str().unwrap()) == wasm);
    assert_eq!(
        cm["data"]["mongodb-monitor.yaml"].as_str().unwrap(),
        std::fs::read_to_string(wasm_path.with_extension("yaml")).unwrap()
    );
    // The operator's approvals: a ConfigMap of their own, mounted at /approvals.
    let approvals = find(&docs, "ConfigMap", "kubewasm-approvals");
    assert_eq!(
        approvals["data"]["approvals.yaml"].as_str().unwrap(),
        std::fs::read_to_string(root().join("plugins/approvals.yaml")).unwrap()
    );
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    assert_eq!(d["spec"]["replicas"], 2);
    let a = args(container(d, "kubewasm"));
    assert!(
        a.contains(&"--leader-elect") && a.contains(&"--lease-name=kubewasm"),
        "{a:?}"
    );
    assert_eq!(
        projected_configmaps(d),
        ["kubewasm-plugins", "kubewasm-plugin-a", "kubewasm-plugin-b"]
    );
    let sm = only(&docs, "ServiceMonitor");
    assert_eq!(sm["metadata"]["labels"]["release"], "prometheus");
    assert_secure_scrape(sm);
    // A ServiceMonitor needs /metrics exposed: bound to the pod, a Service, the policy
    // letting the monitoring namespace in.
    assert!(a.contains(&"--metrics-addr=0.0.0.0:9090"), "{a:?}");
    assert_eq!(
        only(&docs, "Service")["spec"]["ports"][0]["targetPort"],
        "metrics"
    );
    assert_network_policy(&docs, d, true);

    // The chart's objects are accepted too.
    let (_server, client) = api_server().await;
    let not_served = apply_rendered(&client, &docs, "helm").await;
    assert!(
        not_served.iter().all(|k| k == "PodDisruptionBudget"),
        "{not_served:?}"
    );

    // More than one replica without leader election is refused at render time.
    let refused = Command::new(&helm)
        .args(["template", "kubewasm"])
        .arg(root().join("deploy/helm/kubewasm"))
        .args(["--set", "replicas=2"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("leaderElection.enabled"));

    // Plugins from an image: the same init container as the kustomize component.
    let docs = helm_template(
        &helm,
        &[
            "plugins.image.repository=localhost/kubewasm-plugins",
            "plugins.image.tag=0.1.0",
        ],
    );
    assert!(!docs.iter().any(|d| kind_of(d) == "ConfigMap"));
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    let plugins = volume(d, "plugins");
    assert!(plugins["emptyDir"].is_object() && plugins.get("projected").is_none());
    let init = container(d, "plugins");
    assert_container_hardened(init);
    if let Some(kubectl) = kubectl() {
        let staged = staged_kubernetes();
        let all = kustomize(&kubectl, &staged.path().join("kubernetes/overlays/all"));
        assert_eq!(init, container(only(&all, "Deployment"), "plugins"));
    }
}

/// `metrics.secure` (on by default): `--metrics-secure`, the host's review rules, the
/// reader role, bound to `metrics.readers`; `metrics.certSecret` mounted as
/// `--metrics-cert-path`; off: plain HTTP, and none of it.
#[test]
fn helm_chart_metrics_secure_values() {
    let Some(helm) = helm() else { return };
    let docs = helm_template(
        &helm,
        &[
            "metrics.serviceMonitor.enabled=true",
            "metrics.certSecret=kubewasm-metrics-tls",
            "metrics.readers[0].kind=ServiceAccount",
            "metrics.readers[0].name=prometheus",
            "metrics.readers[0].namespace=monitoring",
        ],
    );
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    let c = container(d, "kubewasm");
    assert!(
        args(c).contains(&"--metrics-cert-path=/etc/kubewasm/metrics-certs"),
        "{:?}",
        args(c)
    );
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "metrics-certs")
        .expect("the certificate mounted");
    assert_eq!(mount["mountPath"], "/etc/kubewasm/metrics-certs");
    assert_eq!(mount["readOnly"], true);
    assert_eq!(
        volume(d, "metrics-certs")["secret"]["secretName"],
        "kubewasm-metrics-tls"
    );
    assert_secure_scrape(only(&docs, "ServiceMonitor"));
    assert_metrics_reader(&docs);
    let binding = find(
        &docs,
        "ClusterRoleBinding",
        "kubewasm-system:kubewasm-metrics-reader",
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}])
    );
    assert_network_policy(&docs, d, true);

    let plain = helm_template(
        &helm,
        &[
            "metrics.secure=false",
            "metrics.serviceMonitor.enabled=true",
        ],
    );
    let a = args(container(only(&plain, "Deployment"), "kubewasm"));
    assert!(
        !a.iter()
            .any(|x| x.starts_with("--metrics-secure") || x.starts_with("--metrics-cert")),
        "{a:?}"
    );
    let endpoint = &only(&plain, "ServiceMonitor")["spec"]["endpoints"][0];
    assert!(
        endpoint.get("scheme").is_none() && endpoint.get("bearerTokenFile").is_none(),
        "plain HTTP, no token sent: {endpoint}"
    );
    assert!(
        !plain
            .iter()
            .any(|o| o["metadata"]["name"] == "kubewasm-system:kubewasm-metrics-reader"),
        "no reader role"
    );
    assert!(
        !rbac_rules(&plain, "ClusterRole").contains_key(&(
            "authentication.k8s.io".to_string(),
            "tokenreviews".to_string()
        )),
        "no TokenReviews without metrics.secure"
    );
}

/// `shards: S` runs `--shards S` instead of leader election, lets replicas be more than one,
/// gives the host's Role the Lease verbs sharding needs (as the kustomize component does),
/// and is refused out of 1..=1024; `shards: 0` (the default) changes nothing.
#[tokio::test]
async fn helm_chart_shards_value() {
    let Some(helm) = helm() else { return };
    let docs = helm_template(&helm, &["shards=32", "replicas=3", "namespace.create=true"]);
    assert_sharded(&docs, 3, Some("kubewasm"));
    // leaderElection.enabled is overridden: sharding replaces it.
    let with_election = helm_template(
        &helm,
        &[
            "shards=32",
            "replicas=3",
            "leaderElection.enabled=true",
            "leaderElection.leaseName=kw",
        ],
    );
    assert_sharded(&with_election, 3, Some("kw"));
    // The default: leader-election verbs only.
    let plain = helm_template(&helm, &[]);
    assert_eq!(lease_verbs(&plain), verbs(&["get", "create", "update"]));
    assert!(
        !args(container(only(&plain, "Deployment"), "kubewasm"))
            .iter()
            .any(|a| a.starts_with("--shards"))
    );
    // The same RBAC as the kustomize component on the base.
    if let Some(kubectl) = kubectl() {
        let staged = staged_kubernetes();
        let sharded = kustomize(
            &kubectl,
            &staged.path().join("kubernetes/overlays/sharded-base"),
        );
        assert_eq!(rbac_rules(&docs, "Role"), rbac_rules(&sharded, "Role"));
        assert_eq!(
            rbac_rules(&docs, "ClusterRole"),
            rbac_rules(&sharded, "ClusterRole")
        );
    }
    for bad in ["shards=1025", "shards=-1"] {
        let refused = Command::new(&helm)
            .args(["template", "kubewasm"])
            .arg(root().join("deploy/helm/kubewasm"))
            .args(["--set", bad])
            .output()
            .unwrap();
        assert!(!refused.status.success(), "{bad} rendered");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("1..1024"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
    }
    // Accepted by the API server.
    let (_server, client) = api_server().await;
    let not_served = apply_rendered(&client, &docs, "helm shards").await;
    assert!(
        not_served.iter().all(|k| k == "PodDisruptionBudget"),
        "{not_served:?}"
    );
}

/// The base's RBAC is what `kubewasm rbac --kubeconfig` derives for the example plugins on
/// a server with the example CRDs (same rules; objects, names, bindings), so regenerating
/// it is a drop-in replacement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_rbac_matches_kubewasm_rbac() {
    let kubewasm = env!("CARGO_BIN_EXE_kubewasm");
    let env = support::Env::new().await;
    let plugins = tempfile::tempdir().unwrap();
    for name in EXAMPLE_PLUGINS {
        // The example plugins with their settings files; their approvals are
        // plugins/approvals.yaml.
        let wasm = support::example_plugin(name);
        std::fs::copy(&wasm, plugins.path().join(format!("{name}.wasm"))).unwrap();
        std::fs::copy(
            wasm.with_extension("yaml"),
            plugins.path().join(format!("{name}.yaml")),
        )
        .unwrap();
    }
    // Resolved on the cluster, the command deploy/README.md gives.
    let generated = parse_docs(&run(Command::new(kubewasm)
        .args(["--log", "warn", "rbac", "--metrics-secure", "--plugins"])
        .arg(plugins.path())
        .arg("--approvals")
        .arg(root().join("plugins/approvals.yaml"))
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["--service-account-namespace", NAMESPACE])));
    assert!(
        generated
            .iter()
            .all(|d| d["metadata"]["annotations"]["kubewasm.dev/guessed"].is_null()),
        "nothing is guessed when the cluster serves every kind"
    );
    let base: Vec<Value> = parse_docs(
        &std::fs::read_to_string(root().join("deploy/kubernetes/base/rbac.yaml")).unwrap(),
    );
    let identity = |docs: &[Value]| -> BTreeSet<String> {
        docs.iter()
            .map(|d| {
                format!(
                    "{} {} {} subjects={} roleRef={}",
                    kind_of(d),
                    d["metadata"]["namespace"],
                    d["metadata"]["name"],
                    d["subjects"],
                    d["roleRef"]
                )
            })
            .collect()
    };
    assert_eq!(identity(&generated), identity(&base));
    assert_eq!(
        rbac_rules(&generated, "ClusterRole"),
        rbac_rules(&base, "ClusterRole")
    );
    assert_eq!(rbac_rules(&generated, "Role"), rbac_rules(&base, "Role"));

    // `--sharded` is what the sharding component makes of the base's RBAC: the same
    // objects, the Lease rule with list and delete.
    let Some(kubectl) = kubectl() else { return };
    let sharded_generated = parse_docs(&run(Command::new(kubewasm)
        .args([
            "--log",
            "warn",
            "rbac",
            "--sharded",
            "--metrics-secure",
            "--plugins",
        ])
        .arg(plugins.path())
        .arg("--approvals")
        .arg(root().join("plugins/approvals.yaml"))
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["--service-account-namespace", NAMESPACE])));
    let staged = staged_kubernetes();
    let rendered = kustomize(
        &kubectl,
        &staged.path().join("kubernetes/overlays/sharded-base"),
    );
    let rbac_kinds = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    let rendered: Vec<Value> = rendered
        .into_iter()
        .filter(|d| rbac_kinds.contains(&kind_of(d)))
        .collect();
    assert_eq!(identity(&sharded_generated), identity(&rendered));
    assert_eq!(
        rbac_rules(&sharded_generated, "ClusterRole"),
        rbac_rules(&rendered, "ClusterRole")
    );
    assert_eq!(
        rbac_rules(&sharded_generated, "Role"),
        rbac_rules(&rendered, "Role")
    );
    assert_eq!(
        lease_verbs(&sharded_generated),
        verbs(&["get", "list", "create", "update", "delete"])
    );
}

/// Every flag the manifests pass to `kubewasm run` exists in the binary (`--shards` of the
/// sharded renderings and `--tenant-*` of the tenants ones included). The leader election flags (`--leader-elect`,
/// `--lease-name`) are only reported until the host has them.
#[test]
fn deployment_args_are_flags_of_kubewasm_run() {
    let Some(kubectl) = kubectl() else { return };
    let help = run(Command::new(env!("CARGO_BIN_EXE_kubewasm")).args(["run", "--help"]));
    let known: BTreeSet<&str> = help
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--"))
        .collect();
    let staged = staged_kubernetes();
    let mut rendered = kustomize(&kubectl, &staged.path().join("kubernetes/overlays/example"));
    rendered.extend(kustomize(&kubectl, &root().join("deploy/kubernetes/base")));
    rendered.extend(kustomize(
        &kubectl,
        &staged.path().join("kubernetes/overlays/sharded"),
    ));
    // Teams' plugins: the --tenant-* flags.
    rendered.extend(kustomize(
        &kubectl,
        &staged.path().join("kubernetes/overlays/tenants"),
    ));
    if let Some(helm) = helm() {
        rendered.extend(helm_template(&helm, &["leaderElection.enabled=true"]));
        rendered.extend(helm_template(&helm, &["shards=32", "replicas=3"]));
        rendered.extend(helm_template(
            &helm,
            &["tenants.enabled=true", "tenants.registries={ghcr.io}"],
        ));
    }
    let mut missing = BTreeSet::new();
    for d in rendered.iter().filter(|d| kind_of(d) == "Deployment") {
        let a = args(container(d, "kubewasm"));
        assert_eq!(a[0], "run");
        for flag in a[1..].iter().map(|a| a.split('=').next().unwrap()) {
            if !known.contains(flag) {
                missing.insert(flag);
            }
        }
    }
    let pending: BTreeSet<&str> = ["--leader-elect", "--lease-name"].into();
    assert!(
        missing.is_subset(&pending),
        "the manifests pass flags `kubewasm run` lacks: {missing:?}"
    );
    if !missing.is_empty() {
        eprintln!(
            "NOTE: `kubewasm run` has no {missing:?} yet (leader election or sharding pending)"
        );
    }
}

/// The code-cache key: what the host reads (`KUBEWASM_CACHE_KEY_FILE`), where the Secret
/// is mounted and how, for the kustomize component and the chart alike; the defaults name
/// no key file, so a cluster without the Secret still starts (with a per-process key).
fn cache_key_parts(d: &Value) -> (Option<String>, Option<Value>, Option<Value>) {
    let c = container(d, "kubewasm");
    let env = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "KUBEWASM_CACHE_KEY_FILE");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "cache-key");
    let vol = d["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "cache-key");
    (
        env.map(|e| e["value"].as_str().expect("a literal path").to_string()),
        mount.cloned(),
        vol.cloned(),
    )
}

#[test]
fn cache_key_secret_is_mounted_by_the_component_and_the_chart_alike() {
    let Some(kubectl) = kubectl() else { return };
    let staged = staged_kubernetes();
    let k = staged.path().join("kubernetes");
    let base = kustomize(&kubectl, &k.join("base"));
    assert_eq!(
        cache_key_parts(only(&base, "Deployment")),
        (None, None, None)
    );
    let docs = kustomize(&kubectl, &k.join("overlays/cache-key"));
    let d = only(&docs, "Deployment");
    assert_host_deployment(d);
    let (file, mount, vol) = cache_key_parts(d);
    let (file, mount, vol) = (file.unwrap(), mount.unwrap(), vol.unwrap());
    let dir = mount["mountPath"].as_str().unwrap();
    assert_eq!(mount["readOnly"], true);
    assert!(
        Path::new(&file).parent() == Some(Path::new(dir)),
        "{file} is in the mount {dir}"
    );
    assert!(
        !file.starts_with("/var/cache/kubewasm"),
        "the key must not live where the cache's writers can write"
    );
    assert_eq!(vol["secret"]["secretName"], "kubewasm-cache-key");
    let item = &vol["secret"]["items"][0];
    assert_eq!(dir.to_string() + "/" + item["path"].as_str().unwrap(), file);
    // 0440: readable by the pod's fsGroup (the host runs as 65532, not root), by no one else.
    assert_eq!(vol["secret"]["defaultMode"], 0o440);
    assert_eq!(
        d["spec"]["template"]["spec"]["securityContext"]["fsGroup"],
        65532
    );

    let Some(helm) = helm() else { return };
    let chart = helm_template(&helm, &[]);
    assert_eq!(
        cache_key_parts(only(&chart, "Deployment")),
        (None, None, None)
    );
    let chart = helm_template(&helm, &["cache.keySecret=kubewasm-cache-key"]);
    let cd = only(&chart, "Deployment");
    assert_host_deployment(cd);
    assert_eq!(cache_key_parts(cd), (Some(file), Some(mount), Some(vol)));
}

/// `allowedPullSecrets`: the host is told which pull secrets Plugins may name, and its Role
/// gets `get` on exactly those; by default neither (no Secret at all).
#[test]
fn helm_chart_allowed_pull_secrets() {
    let Some(helm) = helm() else { return };
    let secret_rules = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .filter(|d| kind_of(d) == "Role" || kind_of(d) == "ClusterRole")
            .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default())
            .filter(|r| r["resources"] == serde_json::json!(["secrets"]))
            .collect()
    };
    let plain = helm_template(&helm, &[]);
    assert!(
        secret_rules(&plain).is_empty(),
        "{:?}",
        secret_rules(&plain)
    );
    let d = only(&plain, "Deployment");
    assert!(
        !args(container(d, "kubewasm"))
            .iter()
            .any(|a| a.starts_with("--allowed-pull-secret")),
        "{d}"
    );
    let allowed = helm_template(&helm, &["allowedPullSecrets={regcred,mirror}"]);
    assert_eq!(
        secret_rules(&allowed),
        [
            serde_json::json!({"apiGroups": [""], "resources": ["secrets"],
                            "resourceNames": ["regcred", "mirror"], "verbs": ["get"]})
        ]
    );
    let args = args(container(only(&allowed, "Deployment"), "kubewasm"))
        .into_iter()
        .filter(|a| a.starts_with("--allowed-pull-secret"))
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert_eq!(
        args,
        [
            "--allowed-pull-secret=regcred",
            "--allowed-pull-secret=mirror"
        ]
    );
}

/// The key the README's `kubectl create secret` command makes is one the host accepts.
#[test]
fn the_documented_cache_key_command_makes_a_valid_key() {
    let readme = std::fs::read_to_string(root().join("deploy/README.md")).unwrap();
    let cmd = "head -c 32 /dev/urandom | base64";
    assert!(
        readme.contains(&format!("--from-file=key=<({cmd})")),
        "README documents {cmd}"
    );
    let key = run(Command::new("bash").args(["-c", cmd]));
    assert!(
        key.trim().len() >= kubewasm::runtime::codecache::MIN_KEY_BYTES,
        "{key}"
    );
}

// ---------------------------------------------------------------------------------------
// the start-up kit: a Grafana dashboard and alert rules (components/monitoring, the chart)

const KIT: &str = "deploy/kubernetes/components/monitoring";

/// The dashboard as shipped.
fn kit_dashboard() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(root().join(KIT).join("kubewasm-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON")
}

/// The PrometheusRule as shipped.
fn kit_rule() -> Value {
    serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join(KIT).join("prometheusrule.yaml")).unwrap(),
    )
    .expect("the rules are YAML")
}

/// A rendered dashboard ConfigMap holds the dashboard, for Grafana's sidecar.
fn assert_dashboard_configmap(cm: &Value) {
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1", "{cm}");
    let text = cm["data"]["kubewasm-dashboard.json"]
        .as_str()
        .expect("data.kubewasm-dashboard.json");
    let rendered: Value = serde_json::from_str(text).expect("the rendered dashboard is JSON");
    assert_eq!(rendered, kit_dashboard());
}

/// Every alert has a `for:`, a severity, and a summary and description naming what it is
/// about; each has a runbook paragraph in deploy/README.md.
#[test]
fn every_alert_has_a_duration_annotations_and_a_runbook() {
    let rule = kit_rule();
    let readme = std::fs::read_to_string(root().join("deploy/README.md")).unwrap();
    let runbooks = readme
        .split("\n## ")
        .find(|s| s.starts_with("Monitoring"))
        .expect("a Monitoring section in deploy/README.md");
    let mut alerts = 0;
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            let name = r["alert"].as_str().expect("alerts only");
            alerts += 1;
            assert!(r["for"].is_string(), "{name}: no for:");
            assert!(
                ["critical", "warning", "info"]
                    .contains(&r["labels"]["severity"].as_str().unwrap_or("")),
                "{name}: severity"
            );
            let summary = r["annotations"]["summary"].as_str().unwrap_or("");
            let description = r["annotations"]["description"].as_str().unwrap_or("");
            let by = r["expr"].as_str().unwrap_or("");
            for label in ["plugin", "resource"] {
                if by.contains(&format!("by (namespace, {label}")) {
                    let named = format!("{{{{ $labels.{label} }}}}");
                    assert!(
                        summary.contains(&named) && description.contains(&named),
                        "{name}: its summary and description name the {label}"
                    );
                }
            }
            assert!(
                !summary.is_empty() && description.len() > 40,
                "{name}: annotations"
            );
            assert!(
                runbooks.contains(&format!("**{name}**")),
                "{name}: no runbook paragraph in deploy/README.md's Monitoring section"
            );
        }
    }
    assert!(alerts >= 10, "{alerts} alerts");
}

#[test]
fn kustomize_monitoring_component_renders() {
    let Some(kubectl) = kubectl() else { return };
    let staged = staged_kubernetes();
    let docs = kustomize(
        &kubectl,
        &staged.path().join("kubernetes/overlays/monitoring"),
    );
    assert_namespaced_in_host_namespace(&docs);
    let rule = only(&docs, "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    assert_eq!(rule["spec"], kit_rule()["spec"]);
    assert_dashboard_configmap(find(&docs, "ConfigMap", "kubewasm-dashboard"));
    // With the ServiceMonitor that feeds them.
    only(&docs, "ServiceMonitor");
}

/// The chart renders the component's two files (one copy: files/ links to them) when asked.
#[test]
fn helm_chart_monitoring_values() {
    let chart_files = root().join("deploy/helm/kubewasm/files");
    for f in ["kubewasm-dashboard.json", "prometheusrule.yaml"] {
        let link = chart_files.join(f);
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{f}: the chart's copy is a link to the component's"
        );
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(root().join(KIT).join(f)).unwrap()
        );
    }
    let Some(helm) = helm() else { return };
    let plain = helm_template(&helm, &[]);
    assert!(!kinds(&plain).contains("PrometheusRule"));
    assert!(
        !plain
            .iter()
            .any(|d| d["metadata"]["labels"]["grafana_dashboard"].is_string()),
        "no dashboard unless asked"
    );
    let docs = helm_template(
        &helm,
        &[
            "prometheusRule.enabled=true",
            "prometheusRule.labels.release=prometheus",
            "grafanaDashboard.enabled=true",
            "grafanaDashboard.namespace=monitoring",
            "grafanaDashboard.annotations.grafana_folder=kubewasm",
        ],
    );
    let rule = only(&docs, "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    assert_eq!(rule["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(rule["spec"], kit_rule()["spec"]);
    let cm = find(&docs, "ConfigMap", "kubewasm-dashboard");
    assert_eq!(cm["metadata"]["namespace"], "monitoring");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "kubewasm");
    assert_dashboard_configmap(cm);
}

/// The objects `kubewasm rbac --tenants` adds (the host's cluster part for teams' plugins,
/// and `kubewasm-tenant`), printed alone.
fn rbac_tenants() -> Vec<Value> {
    parse_docs(&run(Command::new(env!("CARGO_BIN_EXE_kubewasm")).args([
        "--log",
        "warn",
        "rbac",
        "--tenants",
    ])))
}

/// The `--tenant-*` flags a rendered host runs with.
fn tenant_flags(d: &Value) -> Vec<String> {
    args(container(d, "kubewasm"))
        .into_iter()
        .filter(|a| a.starts_with("--tenant-"))
        .map(str::to_string)
        .collect()
}

/// Teams' plugins: the kustomize component holds exactly what `kubewasm rbac --tenants`
/// prints and the ceilings at `run`'s defaults; the chart's `tenants` values render the
/// same roles (names and rules) and the flags from the values, and nothing of it when off.
#[test]
fn tenants_component_and_chart_values_render_rbac_tenants_and_the_flags() {
    let printed = rbac_tenants();
    assert_eq!(printed.len(), 3, "{printed:?}");
    let defaults = [
        "--tenant-max-plugins=5",
        "--tenant-max-memory-mib=64",
        "--tenant-max-call-deadline=2s",
        "--tenant-max-instances=2",
        "--tenant-budget-share=25",
    ];
    if let Some(kubectl) = kubectl() {
        let staged = staged_kubernetes();
        let docs = kustomize(&kubectl, &staged.path().join("kubernetes/overlays/tenants"));
        assert_namespaced_in_host_namespace(&docs);
        for o in &printed {
            let name = o["metadata"]["name"].as_str().unwrap();
            assert_eq!(find(&docs, kind_of(o), name), o, "{name}");
        }
        let mut expected: Vec<String> = defaults.iter().map(|s| s.to_string()).collect();
        expected.push("--tenant-registry=registry.example.com".into());
        assert_eq!(tenant_flags(only(&docs, "Deployment")), expected);
    }
    let Some(helm) = helm() else { return };
    let off = helm_template(&helm, &[]);
    assert!(tenant_flags(only(&off, "Deployment")).is_empty());
    assert!(
        !off.iter().any(|d| d["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-tenants") || n.ends_with("-tenant"))),
        "tenants off renders no tenant role"
    );
    let on = helm_template(
        &helm,
        &[
            "tenants.enabled=true",
            "tenants.registries={registry.example.com,team-a=ghcr.io}",
            "tenants.maxPlugins=3",
            "tenants.maxMemoryMiB=32",
            "tenants.maxCallDeadline=1s",
            "tenants.maxInstances=1",
            "tenants.budgetShare=10",
        ],
    );
    assert_eq!(
        tenant_flags(only(&on, "Deployment")),
        [
            "--tenant-registry=registry.example.com",
            "--tenant-registry=team-a=ghcr.io",
            "--tenant-max-plugins=3",
            "--tenant-max-memory-mib=32",
            "--tenant-max-call-deadline=1s",
            "--tenant-max-instances=1",
            "--tenant-budget-share=10",
        ]
    );
    for o in &printed {
        let name = o["metadata"]["name"].as_str().unwrap();
        let rendered = find(&on, kind_of(o), name);
        for key in ["rules", "roleRef", "subjects"] {
            assert_eq!(rendered[key], o[key], "{name}: {key}");
        }
    }
    // On without registries: an error saying what to set, not a host that pulls nothing.
    let refused = Command::new(&helm)
        .args(["template", "kubewasm"])
        .arg(root().join("deploy/helm/kubewasm"))
        .args(["--set", "tenants.enabled=true"])
        .output()
        .expect("helm runs");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("tenants.registries"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
