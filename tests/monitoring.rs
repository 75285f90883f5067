//! The start-up kit of deploy/ — the Grafana dashboard and the alert rules of
//! `deploy/kubernetes/components/monitoring`, which the Helm chart renders from the same
//! files — asks only for metrics the host serves: every metric each PromQL expression
//! names (the dashboard's panels and its plugin variable, every rule) is in the `/metrics`
//! of the real `kubewasm run`, scraped while a Plugin object pulled from a registry
//! handles events (one failing) under leader election, and again with `--shards`. A
//! histogram's `_bucket`, `_sum` and `_count` are its family's; a counter's `_total`.
//! The alerts are unit-tested with promtool (`tests/monitoring/alerts.test.yaml`).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use support::registry::Registry;
use support::*;

const DASHBOARD: &str = "deploy/kubernetes/components/monitoring/kubewasm-dashboard.json";
const RULES: &str = "deploy/kubernetes/components/monitoring/prometheusrule.yaml";

/// Words of PromQL that are not metric names when they stand alone: aggregations (before
/// `by` or their parenthesis), binary and set operators, modifiers.
const KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
];

/// Modifiers followed by a parenthesised list of label names.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Index just past the `close` matching the opener at `i` (strings inside skipped).
fn skip_to(chars: &[char], mut i: usize, close: char) -> usize {
    i += 1;
    while i < chars.len() && chars[i] != close {
        i = match chars[i] {
            '"' | '\'' | '`' => skip_string(chars, i),
            _ => i + 1,
        };
    }
    i + 1
}

/// Index just past the string literal starting at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() && chars[i] != quote {
        i += if chars[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// The metric names a PromQL expression selects: identifiers outside label matchers
/// (`{…}`), ranges (`[…]`), strings and grouping lists, that are neither called (a
/// function) nor keywords. Grafana's variables (`$plugin`, `$__rate_interval`) are skipped.
fn promql_metrics(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' {
            i = skip_to(&chars, i, '}');
        } else if c == '[' {
            i = skip_to(&chars, i, ']');
        } else if c.is_ascii_digit() || c == '.' || c == '$' {
            // A number, a duration or a variable.
            i += 1;
            while i < chars.len() && (ident(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if ident(c) {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let called = chars.get(next) == Some(&'(');
            let lower = word.to_ascii_lowercase();
            if GROUPING.contains(&lower.as_str()) {
                if called {
                    i = skip_to(&chars, next, ')');
                }
            } else if !called && !KEYWORDS.contains(&lower.as_str()) {
                found.insert(word);
            }
        } else {
            i += 1;
        }
    }
    found
}

/// Every PromQL expression of the dashboard, with where it is: each panel's targets (rows'
/// panels included) and each query variable (`label_values(METRIC, LABEL)`: its metric).
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    fn panels(list: &Value, out: &mut Vec<(String, String)>) {
        for p in list.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?");
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    out.push((format!("panel {title:?}"), expr.to_string()));
                }
            }
            panels(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out);
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let query = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap_or_default();
        let expr = match query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        {
            // label_values(METRIC, LABEL) selects from METRIC; label_values(LABEL), none.
            Some(args) => args
                .rsplit_once(',')
                .map(|(metric, _)| metric.to_string())
                .unwrap_or_default(),
            None => query.to_string(),
        };
        out.push((format!("variable {}", v["name"]), expr));
    }
    out
}

/// Every rule's expression in the PrometheusRule, with its alert (or record) name.
fn rule_exprs(rule: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for group in rule["spec"]["groups"].as_array().into_iter().flatten() {
        for r in group["rules"].as_array().into_iter().flatten() {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
            let expr = r["expr"].as_str().unwrap_or_default();
            out.push((format!("rule {name}"), expr.to_string()));
        }
    }
    out
}

/// The metric families a `/metrics` text has samples of (`# TYPE NAME KIND`), name →
/// kind.
fn families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            Some((name.to_string(), kind.to_string()))
        })
        .collect()
}

/// Whether a series name is of a family served: a counter's `NAME_total`, a gauge's name,
/// a histogram's `NAME_bucket`, `NAME_sum` or `NAME_count`.
fn served(name: &str, families: &BTreeMap<String, String>) -> bool {
    let of = |family: &str, kind: &str| families.get(family).is_some_and(|k| k == kind);
    of(name, "gauge")
        || name
            .strip_suffix("_total")
            .is_some_and(|f| of(f, "counter"))
        || ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .any(|f| of(f, "histogram"))
}

/// `where: metric` for each metric an expression names that `families` does not serve.
fn unserved(exprs: &[(String, String)], families: &BTreeMap<String, String>) -> Vec<String> {
    let mut missing = Vec::new();
    for (place, expr) in exprs {
        let names = promql_metrics(expr);
        if names.is_empty() {
            missing.push(format!("{place}: names no metric: {expr:?}"));
        }
        for name in names {
            if !served(&name, families) {
                missing.push(format!("{place}: {name}"));
            }
        }
    }
    missing
}

/// The dashboard's and the rules' expressions, as deploy/ ships them.
fn kit() -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(DASHBOARD)).expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let rule: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root().join(RULES)).expect("the rules"))
            .expect("the rules are YAML");
    let mut exprs = dashboard_exprs(&dashboard);
    exprs.extend(rule_exprs(&rule));
    exprs
}

/// GET /metrics until `done` says it holds what the test waits for.
async fn scrape_until(host: &HostProcess, what: &str, done: impl Fn(&str) -> bool) -> String {
    let addr = ops_endpoint(host).await;
    eventually(what, CONVERGE, || {
        let (code, text) = http_get_status(&addr, "/metrics");
        let ok = code == 200 && done(&text);
        async move { ok.then_some(text) }
    })
    .await
}

fn cm(name: &str, action: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"kubewasm.dev/testkit": "testkit"}},
           "data": {"action": action}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_the_alerts_use_is_served() {
    let exprs = kit();
    assert!(
        exprs.len() >= 30,
        "the dashboard and the rules did not parse: {exprs:?}"
    );

    // A Plugin object pulled from a registry: pulls, events, a write, a failure.
    let registry = Registry::start();
    let module = push_module(&registry, &test_plugin("testkit"), "testkit:v1");
    let env = Env::new().await;
    env.apply_path(&root().join("deploy/kubernetes/base/crd-plugins.yaml"))
        .await;
    let registry_args = [
        "--insecure-registry",
        &registry.host(),
        "--reload-debounce",
        "100ms",
    ];
    let docker = empty_docker_config().display().to_string();
    let mut args = registry_args.to_vec();
    args.extend([
        "--leader-elect",
        "--lease-namespace",
        "default",
        "--lease-name",
        "kubewasm-monitoring",
    ]);
    let host = env.start_host_with_env(&args, &[("DOCKER_CONFIG", &docker)]);
    let plugins = env.api("kubewasm.dev/v1alpha1", "Plugin", "plugins", None);
    env.apply(
        &plugins,
        "monitoring-test",
        json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "Plugin",
               "metadata": {"name": "testkit"},
               "spec": {"module": module, "permissions": {
                   "watches": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                   "grants": [
                       {"apiGroups": [""], "kinds": ["ConfigMap"], "verbs": ["create"], "allowForce": true},
                       {"apiGroups": [""], "kinds": ["Namespace"], "namespaces": ["*"], "verbs": ["create"]}]}}}),
    )
    .await;
    let cms = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.create(&cms, cm("copied", "copy")).await;
    env.create(&cms, cm("failing", "error")).await;
    let led = scrape_until(&host, "a pull, a write and a failure counted", |t| {
        metric_sample(
            t,
            r#"kubewasm_pulls_total{plugin="testkit",result="pulled"}"#,
        ) == 1.0
            && t.contains(
                r#"kubewasm_intents_total{plugin="testkit",verb="create",result="applied"}"#,
            )
            && t.contains(r#"kubewasm_errors_total{plugin="testkit",kind="plugin"}"#)
            && metric_sample(t, r#"kubewasm_leader_changes_total{change="acquired"}"#) == 1.0
    })
    .await;
    assert_eq!(host.stop(), Some(0));

    // The same cluster with --shards: shard moves.
    let mut args = registry_args.to_vec();
    args.extend(["--shards", "4", "--lease-namespace", "default"]);
    let host = env.start_host_with_env(&args, &[("DOCKER_CONFIG", &docker)]);
    let sharded = scrape_until(&host, "shards held", |t| {
        metric_sample(t, r#"kubewasm_shard_moves_total{change="acquired"}"#) >= 1.0
    })
    .await;
    assert_eq!(host.stop(), Some(0));

    let mut served_families = families(&led);
    served_families.extend(families(&sharded));
    let missing = unserved(&exprs, &served_families);
    assert!(
        missing.is_empty(),
        "the start-up kit uses metrics the host does not serve:\n{}\nserved: {:?}",
        missing.join("\n"),
        served_families.keys().collect::<Vec<_>>()
    );

    // The check catches a metric that does not exist, a counter without `_total` and a
    // histogram's misspelt series, on what the host just served.
    let mut wrong = exprs.clone();
    wrong.extend(
        [
            "sum(rate(kubewasm_no_such_metric_total[5m]))",
            "rate(kubewasm_events[5m])",
            "histogram_quantile(0.9, rate(kubewasm_plugin_call_second_bucket[5m]))",
        ]
        .map(|e| ("injected".to_string(), e.to_string())),
    );
    assert_eq!(
        unserved(&wrong, &served_families),
        [
            "injected: kubewasm_no_such_metric_total",
            "injected: kubewasm_events",
            "injected: kubewasm_plugin_call_second_bucket",
        ]
    );
}

#[test]
fn promql_names_are_told_from_functions_labels_and_keywords() {
    let names = |e: &str| promql_metrics(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            r#"sum by (namespace, plugin) (rate(kubewasm_errors_total{kind!="x", plugin=~"$plugin"}[$__rate_interval]))
               / on (plugin) group_left clamp_min(sum by (plugin) (rate(kubewasm_events_total[10m])), 1e-9) > 0.1
               unless on (namespace) max without (pod) (kubewasm_leader) == 0
               or histogram_quantile(0.99, sum by (le) (rate(kubewasm_plugin_call_seconds_bucket[5m] offset 1h)))
               and vector(0) * 2.5"#
        ),
        [
            "kubewasm_errors_total",
            "kubewasm_events_total",
            "kubewasm_leader",
            "kubewasm_plugin_call_seconds_bucket",
        ]
    );
    assert_eq!(names("count(up) or vector(0)"), ["up"]);
    assert!(names(r#"label_replace(vector(1), "a", "b", "c", "d")"#).is_empty());
    let dashboard = json!({
        "panels": [{"title": "row", "panels": [{"title": "p", "targets": [{"expr": "a_total"}]}]}],
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            {"name": "plugin", "type": "query",
             "query": {"query": "label_values(kubewasm_plugin_info, plugin)"}}]}
    });
    assert_eq!(
        dashboard_exprs(&dashboard),
        [
            ("panel \"p\"".to_string(), "a_total".to_string()),
            (
                "variable \"plugin\"".to_string(),
                "kubewasm_plugin_info".to_string()
            )
        ]
    );
    let families = families(
        "# TYPE kubewasm_events counter\n# TYPE kubewasm_leader gauge\n\
         # TYPE kubewasm_plugin_call_seconds histogram\n",
    );
    assert!(served("kubewasm_events_total", &families));
    assert!(!served("kubewasm_events", &families));
    assert!(served("kubewasm_leader", &families));
    assert!(!served("kubewasm_leader_total", &families));
    assert!(served("kubewasm_plugin_call_seconds_count", &families));
    assert!(!served("kubewasm_plugin_call_seconds", &families));
}

/// The dashboard asks for its data source and its plugins: every panel and target reads
/// `${datasource}`, and every query with a series per plugin filters on `$plugin`.
#[test]
fn the_dashboard_takes_its_data_source_and_plugins_as_variables() {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(DASHBOARD)).unwrap()).unwrap();
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    let var = |name: &str| vars.iter().find(|v| v["name"] == name).cloned();
    let ds = var("datasource").expect("a datasource variable");
    assert_eq!(
        (&ds["type"], &ds["query"]),
        (&json!("datasource"), &json!("prometheus"))
    );
    let plugin = var("plugin").expect("a plugin variable");
    assert_eq!(plugin["multi"], true);
    assert_eq!(plugin["includeAll"], true);
    let mut checked = 0;
    for p in dashboard["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        for t in p["targets"].as_array().unwrap() {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
            let expr = t["expr"].as_str().unwrap();
            // A series per plugin (its legend names it) is one of the plugins chosen.
            let per_plugin = t["legendFormat"]
                .as_str()
                .is_some_and(|l| l.contains("{{plugin}}"));
            if per_plugin && !expr.contains("plugin=~\"$plugin\"") {
                panic!("{}: a per-plugin query ignores $plugin: {expr}", p["title"]);
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} targets");
}

/// promtool, from `$KUBEWASM_PROMTOOL` or `PATH` (tests/tools/install-promtool.sh installs
/// Debian's); None, said as SKIPPED, when there is none.
fn promtool() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("KUBEWASM_PROMTOOL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "promtool".into());
    let works = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        eprintln!(
            "SKIPPED: no promtool ($KUBEWASM_PROMTOOL, PATH): the alert rules were not unit-tested; \
             tests/tools/install-promtool.sh installs one"
        );
    }
    works.then_some(path)
}

/// The alerts fire on what they describe, with the plugin in their annotations, after
/// their `for:`, and not otherwise: promtool's unit tests (tests/monitoring/alerts.test.yaml)
/// on the PrometheusRule's spec, which is a Prometheus rule file as it stands.
#[test]
fn the_alerts_fire_on_what_they_describe() {
    let Some(promtool) = promtool() else { return };
    let rule: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root().join(RULES)).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kubewasm-rules.yaml"),
        serde_yaml_ng::to_string(&rule["spec"]).unwrap(),
    )
    .unwrap();
    let tests = dir.path().join("alerts.test.yaml");
    std::fs::copy(root().join("tests/monitoring/alerts.test.yaml"), &tests).unwrap();
    let check = std::process::Command::new(&promtool)
        .args(["check", "rules"])
        .arg(dir.path().join("kubewasm-rules.yaml"))
        .output()
        .expect("run promtool check rules");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let out = std::process::Command::new(&promtool)
        .args(["test", "rules"])
        .arg(&tests)
        .output()
        .expect("run promtool test rules");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
