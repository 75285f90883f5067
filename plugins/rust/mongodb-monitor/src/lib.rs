//! # mongodb-monitor
//!
//! Watch what you don't own: for every `MongoDB` (`mongodb.com/v1`) in any namespace,
//! whoever created it, ask for a Prometheus Operator `ServiceMonitor`
//! (`monitoring.coreos.com/v1`) named `<db>-monitor` in the same namespace, selecting the
//! database's Services (`app: <db>`) and scraping their `metrics` port.
//!
//! The ServiceMonitor is owned by the MongoDB (`owned_by_trigger`), so it disappears with
//! it; a `deleted` event needs no intents.
//!
//! It reads nothing of a MongoDB but its identity and `metadata.deletionTimestamp`, and
//! declares so ([`FIELDS`]): the host then delivers (and caches) only those, however
//! large the MongoDB objects are.
//!
//! The logic is [`handle_event`] / [`service_monitor_for`], callable natively.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::collections::BTreeMap;

use kubewasm_sdk::{
    Context, Event, Grant, HandleError, Intent, Manifest, ObjectExt, Plugin, Result, Watch, log,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The plugin's name in its manifest.
pub const NAME: &str = "mongodb-monitor";
/// The watch id for MongoDBs.
pub const WATCH_ID: &str = "mongodbs";
/// The fields of a MongoDB the plugin uses beyond its identity (apiVersion, kind, name,
/// namespace, uid), which the host always keeps: its projection.
pub const FIELDS: [&str; 1] = ["metadata.deletionTimestamp"];

/// Settings (`mongodb-monitor.yaml`); every field is optional.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Only watch (and write in) this namespace. None: all namespaces.
    pub namespace: Option<String>,
    /// Scrape interval, a Prometheus duration such as `30s` or `1m30s`.
    pub interval: String,
    /// The name of the Service port that serves metrics.
    pub port: String,
    /// Extra labels on the ServiceMonitor, e.g. `release: prometheus` so the Prometheus
    /// Operator's `serviceMonitorSelector` picks it up.
    pub labels: BTreeMap<String, String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            interval: "30s".to_owned(),
            port: "metrics".to_owned(),
            labels: BTreeMap::new(),
        }
    }
}

impl Settings {
    /// Checks the interval's syntax and the port name.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !is_prometheus_duration(&self.interval) {
            return Err(format!(
                "interval {:?} is not a Prometheus duration (e.g. 30s, 1m30s)",
                self.interval
            ));
        }
        if self.port.is_empty() {
            return Err("port must not be empty".to_owned());
        }
        Ok(())
    }
}

/// Whether `s` is a Prometheus duration: one or more `<digits><unit>` with units
/// y, w, d, h, m, s, ms in that order (`0` alone is allowed too).
pub fn is_prometheus_duration(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "ms", "m", "s"];
    // Order rank of each unit as Prometheus requires (ms comes last).
    let rank = |u: &str| match u {
        "y" => 0,
        "w" => 1,
        "d" => 2,
        "h" => 3,
        "m" => 4,
        "s" => 5,
        _ => 6,
    };
    let mut rest = s;
    let mut last = -1i32;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = UNITS.iter().find(|u| rest.starts_with(*u)) else {
            return false;
        };
        let r = rank(unit);
        if r <= last {
            return false;
        }
        last = r;
        rest = &rest[unit.len()..];
    }
    true
}

/// The plugin type exported to the host.
pub struct MongoDbMonitor;

impl Plugin for MongoDbMonitor {
    type Settings = Settings;

    fn describe(settings: &Settings) -> std::result::Result<Manifest, String> {
        settings.validate()?;
        Ok(manifest(settings))
    }

    fn handle(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
        handle_event(event, settings)
    }
}

kubewasm_sdk::export_plugin!(MongoDbMonitor);

/// The manifest: watch MongoDBs; create ServiceMonitors.
pub fn manifest(settings: &Settings) -> Manifest {
    let mut watch = Watch::kind(WATCH_ID, "mongodb.com/v1", "MongoDB").fields(FIELDS);
    let mut grant = Grant::on("monitoring.coreos.com", "ServiceMonitor").create();
    if let Some(ns) = &settings.namespace {
        watch = watch.namespace(ns.clone());
        grant = grant.namespace(ns.clone());
    }
    Manifest::new(NAME, env!("CARGO_PKG_VERSION"))
        .watch(watch)
        .grant(grant)
}

/// Handles one event: a ServiceMonitor for every live MongoDB; nothing on deletion.
pub fn handle_event(event: &Event, settings: &Settings) -> Result<Vec<Intent>> {
    if event.is_deleted() {
        return Ok(Vec::new());
    }
    let db = event.object()?;
    if db.is_being_deleted() {
        return Ok(Vec::new());
    }
    let monitor = service_monitor_for(&db, settings)?;
    log::info!(
        "monitoring MongoDB {}/{} with ServiceMonitor {}",
        db.namespace().unwrap_or(""),
        db.name().unwrap_or(""),
        monitor["metadata"]["name"]
    );
    Ok(vec![Intent::create(monitor).owned_by_trigger().into()])
}

/// The ServiceMonitor for one MongoDB.
pub fn service_monitor_for(db: &Value, settings: &Settings) -> Result<Value> {
    if db.api_version() != Some("mongodb.com/v1") || db.kind() != Some("MongoDB") {
        return Err(HandleError::permanent(format!(
            "expected a mongodb.com/v1 MongoDB, got {} {}",
            db.api_version().unwrap_or("?"),
            db.kind().unwrap_or("?")
        )));
    }
    let name = db.require_name()?;
    let namespace = db
        .namespace()
        .permanent("MongoDB has no metadata.namespace")?;
    let mut labels: BTreeMap<&str, &str> = settings
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    labels.insert("app.kubernetes.io/managed-by", "kubewasm");
    labels.insert("app", name);
    Ok(json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": format!("{name}-monitor"),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "endpoints": [{"port": settings.port, "interval": settings.interval}],
        },
    }))
}

#[cfg(test)]
mod tests;
