//! Discovery documents: `/version`, `/api`, `/apis`, group and group-version
//! resource lists, and aggregated discovery (`apidiscovery.k8s.io/v2`).

use crate::registry::{Registry, ResourceInfo};
use serde_json::{Value, json};
use std::sync::Arc;

/// Content type of an aggregated discovery answer.
pub(crate) const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// True when the Accept header asks for aggregated discovery v2.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        first.contains("as=APIGroupDiscoveryList")
            && first.contains("g=apidiscovery.k8s.io")
            && first.contains("v=v2")
    })
}

/// `/version`: the release whose built-in resources are served (`builtins`).
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "gitVersion": "v1.36.2-kubewasm",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.26.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub(crate) fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| group_json(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`; `None` when the group is not served.
pub(crate) fn group(reg: &Registry, name: &str) -> Option<Value> {
    let groups = reg.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == name && !g.is_empty())?;
    let mut g = group_json(name, versions);
    if let Some(o) = g.as_object_mut() {
        o.insert("kind".into(), json!("APIGroup"));
        o.insert("apiVersion".into(), json!("v1"));
    }
    Some(g)
}

/// `/api/v1` or `/apis/{group}/{version}`; `None` when not served.
pub(crate) fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = reg.in_version(group, version);
    if infos.is_empty() && !(group.is_empty() && version == "v1") {
        return None;
    }
    let mut resources = Vec::new();
    for r in &infos {
        let mut main = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        });
        if let Some(o) = main.as_object_mut() {
            if !r.short_names.is_empty() {
                o.insert("shortNames".into(), json!(r.short_names));
            }
            if !r.categories.is_empty() {
                o.insert("categories".into(), json!(r.categories));
            }
        }
        resources.push(main);
        if r.scale {
            resources.push(json!({
                "name": format!("{}/scale", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn resource_discovery(r: &Arc<ResourceInfo>) -> Value {
    let mut d = json!({
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs(),
    });
    if let Some(o) = d.as_object_mut() {
        if !r.short_names.is_empty() {
            o.insert("shortNames".into(), json!(r.short_names));
        }
        if !r.categories.is_empty() {
            o.insert("categories".into(), json!(r.categories));
        }
        let mut subs = Vec::new();
        if r.scale {
            subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
        }
        if r.status {
            subs.push(json!({"subresource": "status", "responseKind": {"group": "", "version": "", "kind": r.kind}, "verbs": ["get", "patch", "update"]}));
        }
        if !subs.is_empty() {
            o.insert("subresources".into(), json!(subs));
        }
    }
    d
}

/// Aggregated discovery for `/api` (core) or `/apis` (all other groups).
pub(crate) fn aggregated(reg: &Registry, core: bool) -> Value {
    let items: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .in_version(g, v)
                        .iter()
                        .map(resource_discovery)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
