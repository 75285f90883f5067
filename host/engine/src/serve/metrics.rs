//! Prometheus metrics of the host, served at `/metrics` by `ops`.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `plugin`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PluginLabel {
    /// Plugin name.
    pub plugin: String,
}

/// `plugin`, `event`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EventLabels {
    /// Plugin name.
    pub plugin: String,
    /// added | modified | deleted | resync.
    pub event: String,
}

/// `plugin`, `verb`, `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct IntentLabels {
    /// Plugin name.
    pub plugin: String,
    /// create | patch | patch-status | delete.
    pub verb: String,
    /// applied | conflict | error | refused | invalid | previewed.
    pub result: String,
}

/// `plugin`, `kind`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ErrorLabels {
    /// Plugin name.
    pub plugin: String,
    /// deadline | memory | trap | limit | plugin | budget-wait | invalid-intent | refused |
    /// api | quarantined.
    pub kind: String,
}

/// `plugin`, `version`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct InfoLabels {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
}

/// `resource`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResourceLabel {
    /// `plural.version.group`.
    pub resource: String,
}

/// Every metric the host exports.
pub(crate) struct Metrics {
    registry: Mutex<Registry>,
    /// Events handed to plugins.
    pub events: Family<EventLabels, Counter>,
    /// Duration of plugin calls.
    pub call_seconds: Family<PluginLabel, Histogram>,
    /// Intents by verb and result.
    pub intents: Family<IntentLabels, Counter>,
    /// 409 conflicts on apply.
    pub conflicts: Family<PluginLabel, Counter>,
    /// Failed events by cause.
    pub errors: Family<ErrorLabels, Counter>,
    /// 1 while a plugin is quarantined.
    pub quarantined: Family<PluginLabel, Gauge>,
    /// Loaded plugins (value 1) by version.
    pub plugin_info: Family<InfoLabels, Gauge>,
    /// Events waiting per plugin.
    pub queue_depth: Family<PluginLabel, Gauge>,
    /// Objects parked by a permanent failure per plugin (not retried until they change).
    pub blocked: Family<PluginLabel, Gauge>,
    /// Relists (initial list excluded) and watch errors per resource.
    pub watch_restarts: Family<ResourceLabel, Counter>,
    /// 1 for each watched or read resource the API server does not serve (yet).
    pub unserved: Family<ResourceLabel, Gauge>,
    /// Plugins added, replaced or removed: versions that started or stopped serving
    /// (`plugins::environment::Swaps`), the same on every replica for the same loads.
    pub reloads: Family<ChangeLabel, Counter>,
    /// Plugin files whose newest version is rejected.
    pub rejected_files: Gauge,
    /// 1 while this replica is the leader (or runs without leader election).
    pub leader: Gauge,
    /// Objects in this replica's caches, per resource.
    pub cached_objects: Family<ResourceLabel, Gauge>,
    /// Shards held, shard moves and members (`--shards`).
    pub shards: crate::replicas::shards::ShardMetrics,
    /// Plugin calls that waited for the call memory budget.
    pub budget_waits: Family<PluginLabel, Counter>,
    /// Of those, the calls that waited `--call-budget-wait` and were not run.
    pub budget_wait_timeouts: Family<PluginLabel, Counter>,
    /// Of those, the calls that waited for their tenant namespace's part of the budget
    /// (`--tenant-budget-share`): the namespace's own plugins held it.
    pub budget_tenant_waits: Family<PluginLabel, Counter>,
    /// How long calls waited for the call memory budget (calls that did not wait are not
    /// observed).
    pub budget_wait_seconds: Family<PluginLabel, Histogram>,
    /// Dry-run writes (`spec.mode: DryRun`) that would change something, by verb.
    pub preview_changes: Family<PreviewLabels, Counter>,
    /// Divergences of a shadow candidate from the serving version, one per object per
    /// event compared.
    pub shadow_divergences: Family<PluginLabel, Counter>,
    /// Events a shadow candidate was not run on: its concurrency bound was reached.
    pub shadow_skipped: Family<PluginLabel, Counter>,
    /// Plugin objects' module pulls, by outcome.
    pub pulls: Family<PullLabels, Counter>,
    /// How long pulls that asked the registry took (failed ones included).
    pub pull_seconds: Family<PluginLabel, Histogram>,
    /// Leader terms begun and ended (`--leader-elect`).
    pub leader_changes: crate::replicas::leader::LeaderMetrics,
}

/// `plugin`, `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PullLabels {
    /// Plugin name (its Plugin object's).
    pub plugin: String,
    /// pulled (from the registry) | stored (found in the module store) | failed.
    pub result: String,
}

/// `change`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ChangeLabel {
    /// What changed: `added`, `replaced`, `removed` (reloads).
    pub change: String,
}

/// What [`Metrics::reloads`] counts, each exported from the start (at 0).
const RELOAD_CHANGES: [&str; 3] = ["added", "replaced", "removed"];

/// `plugin`, `verb`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PreviewLabels {
    /// Plugin name.
    pub plugin: String,
    /// create | patch | patch-status | delete.
    pub verb: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics, registered.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("kubewasm");
        let m = Metrics {
            registry: Mutex::new(Registry::default()),
            events: Family::default(),
            call_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_05, 2.5, 14))
            }),
            intents: Family::default(),
            conflicts: Family::default(),
            errors: Family::default(),
            quarantined: Family::default(),
            plugin_info: Family::default(),
            queue_depth: Family::default(),
            blocked: Family::default(),
            watch_restarts: Family::default(),
            unserved: Family::default(),
            reloads: Family::default(),
            rejected_files: Gauge::default(),
            leader: Gauge::default(),
            cached_objects: Family::default(),
            shards: Default::default(),
            budget_waits: Family::default(),
            budget_wait_timeouts: Family::default(),
            budget_tenant_waits: Family::default(),
            budget_wait_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 4.0, 10))
            }),
            preview_changes: Family::default(),
            shadow_divergences: Family::default(),
            shadow_skipped: Family::default(),
            pulls: Family::default(),
            pull_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.05, 2.0, 12))
            }),
            leader_changes: Default::default(),
        };
        for change in RELOAD_CHANGES {
            m.reloaded(change, 0);
        }
        m.register_events(&mut registry);
        m.register_plugins(&mut registry);
        m.register_replicas(&mut registry);
        m.register_budget(&mut registry);
        m.register_preview(&mut registry);
        {
            let mut r = kubewasm_core::sync::lock(&m.registry);
            *r = registry;
        }
        m
    }

    /// What happens to events: handed out, called, written, failed, queued.
    fn register_events(&self, r: &mut Registry) {
        r.register("events", "Events handed to plugins", self.events.clone());
        r.register(
            "plugin_call_seconds",
            "Duration of plugin calls",
            self.call_seconds.clone(),
        );
        r.register(
            "intents",
            "Intents by verb and result",
            self.intents.clone(),
        );
        r.register(
            "conflicts",
            "Server-side apply conflicts (409)",
            self.conflicts.clone(),
        );
        r.register("errors", "Failed events by cause", self.errors.clone());
        r.register(
            "plugin_quarantined",
            "1 while the plugin is quarantined",
            self.quarantined.clone(),
        );
        r.register(
            "plugin_info",
            "Loaded plugins by version",
            self.plugin_info.clone(),
        );
        r.register(
            "queue_depth",
            "Events waiting per plugin",
            self.queue_depth.clone(),
        );
        r.register(
        "blocked_objects",
        "Objects whose last event failed permanently (400, 403, 404, 422, refused or invalid intents, permanent plugin errors); not retried until the object, the plugin or its settings change",
        self.blocked.clone(),
    );
    }

    /// The plugins and the watches: reloads, rejected files, restarts, unserved resources.
    fn register_plugins(&self, r: &mut Registry) {
        r.register(
            "watch_restarts",
            "Relists and watch errors per resource",
            self.watch_restarts.clone(),
        );
        r.register(
        "resource_unserved",
        "Resources plugins watch or read that the API server does not serve (yet); they do not block readiness",
        self.unserved.clone(),
    );
        r.register(
            "reloads",
            "Plugins added, replaced or removed by reloads: versions that started or stopped serving (shadow candidates and staged versions excluded)",
            self.reloads.clone(),
        );
        r.register(
            "rejected_plugin_files",
            "Plugin files whose newest version is rejected",
            self.rejected_files.clone(),
        );
        r.register(
            "pulls",
            "Module pulls of Plugin objects: pulled from the registry, found in the module store (stored), or failed (resolving, credentials, download, verification, --pull-timeout)",
            self.pulls.clone(),
        );
        r.register(
            "pull_seconds",
            "How long module pulls that asked the registry took, failed ones included",
            self.pull_seconds.clone(),
        );
    }

    /// Leadership, shards and what this replica caches.
    fn register_replicas(&self, r: &mut Registry) {
        r.register(
            "leader",
            "1 while this replica applies intents",
            self.leader.clone(),
        );
        r.register(
        "cached_objects",
        "Objects in this replica's caches, per resource (with --shards: only its shards' objects of resources no plugin reads whole)",
        self.cached_objects.clone(),
    );
        r.register(
            "shards_held",
            "Shards this replica holds (--shards)",
            self.shards.held.clone(),
        );
        r.register(
            "shard_moves",
            "Shards this replica acquired, released or lost (--shards)",
            self.shards.moves.clone(),
        );
        r.register(
            "leader_changes",
            "Leader terms this replica began (acquired) and ended: lost (another holder, or no renewal within the renew deadline; the process exits) or released (on shutdown) (--leader-elect)",
            self.leader_changes.changes.clone(),
        );
        r.register(
            "shard_members",
            "Replicas sharing the shards, this one included, as last seen (--shards)",
            self.shards.members.clone(),
        );
    }

    /// The call memory budget (`--call-memory-budget`).
    fn register_budget(&self, r: &mut Registry) {
        r.register(
            "call_budget_waits",
            "Plugin calls that waited for the call memory budget (--call-memory-budget)",
            self.budget_waits.clone(),
        );
        r.register(
        "call_budget_wait_timeouts",
        "Plugin calls that waited --call-budget-wait for the call memory budget and were not run (the event is retried with backoff)",
        self.budget_wait_timeouts.clone(),
    );
        r.register(
            "call_budget_tenant_waits",
            "Plugin calls that waited for their tenant namespace's part of the call memory budget (--tenant-budget-share)",
            self.budget_tenant_waits.clone(),
        );
        r.register(
            "call_budget_wait_seconds",
            "How long plugin calls that waited for the call memory budget waited",
            self.budget_wait_seconds.clone(),
        );
    }

    /// Dry runs and shadow candidates.
    fn register_preview(&self, r: &mut Registry) {
        r.register(
            "preview_changes",
            "Dry-run writes (spec.mode: DryRun) that would change the cluster, by verb",
            self.preview_changes.clone(),
        );
        r.register(
            "shadow_divergences",
            "Divergences of a shadow candidate from the serving version: one per object per event compared",
            self.shadow_divergences.clone(),
        );
        r.register(
            "shadow_skipped",
            "Events a shadow candidate was not run on: its bound of calls at once was reached",
            self.shadow_skipped.clone(),
        );
    }

    /// The Prometheus text exposition.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        {
            let r = kubewasm_core::sync::lock(&self.registry);
            let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        }
        out
    }

    /// Count a failed event.
    pub(crate) fn error(&self, plugin: &str, kind: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                plugin: plugin.to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }

    /// Set a plugin's quarantine gauge.
    pub(crate) fn set_quarantined(&self, plugin: &str, quarantined: bool) {
        self.quarantined
            .get_or_create(&PluginLabel {
                plugin: plugin.to_string(),
            })
            .set(i64::from(quarantined));
    }

    /// Count `n` plugins `change`d by a reload (`added`, `replaced`, `removed`).
    pub(crate) fn reloaded(&self, change: &str, n: u64) {
        self.reloads
            .get_or_create(&ChangeLabel {
                change: change.to_string(),
            })
            .inc_by(n);
    }

    /// Export the counters of `plugin` that alerts take an `increase()` of at 0 from its
    /// load: a series that first appears at 1 has no increase, so its first budget wait
    /// or conflict would go unseen.
    pub(crate) fn declare_plugin(&self, plugin: &str) {
        let label = PluginLabel {
            plugin: plugin.to_string(),
        };
        let _ = self.conflicts.get_or_create(&label);
        let _ = self.budget_waits.get_or_create(&label);
        let _ = self.budget_wait_timeouts.get_or_create(&label);
        let _ = self.budget_tenant_waits.get_or_create(&label);
        let _ = self.budget_wait_seconds.get_or_create(&label);
    }

    /// Export `plugin`'s pull counters at 0 before its first pull ends (see
    /// [`Metrics::declare_plugin`]).
    pub(crate) fn declare_pulls(&self, plugin: &str) {
        for result in ["pulled", "stored", "failed"] {
            let _ = self.pulls.get_or_create(&PullLabels {
                plugin: plugin.to_string(),
                result: result.to_string(),
            });
        }
    }

    /// Count a module pull of `plugin`'s Plugin object, and how long one that asked the
    /// registry took.
    pub(crate) fn pulled(&self, plugin: &str, result: &str, took: std::time::Duration) {
        let labels = PullLabels {
            plugin: plugin.to_string(),
            result: result.to_string(),
        };
        self.pulls.get_or_create(&labels).inc();
        if result != "stored" {
            self.pull_seconds
                .get_or_create(&PluginLabel {
                    plugin: plugin.to_string(),
                })
                .observe(took.as_secs_f64());
        }
    }

    /// Count an intent outcome.
    pub(crate) fn intent(&self, plugin: &str, verb: &str, result: &str) {
        self.intents
            .get_or_create(&IntentLabels {
                plugin: plugin.to_string(),
                verb: verb.to_string(),
                result: result.to_string(),
            })
            .inc();
    }
}

impl kubewasm_runtime::budget::WaitObserver for Metrics {
    fn waited(&self, plugin: &str, wait: &kubewasm_runtime::budget::Waited) {
        let label = PluginLabel {
            plugin: plugin.to_string(),
        };
        self.budget_waits.get_or_create(&label).inc();
        self.budget_wait_seconds
            .get_or_create(&label)
            .observe(wait.took.as_secs_f64());
        if wait.timed_out {
            self.budget_wait_timeouts.get_or_create(&label).inc();
        }
        if wait.tenant {
            self.budget_tenant_waits.get_or_create(&label).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_registered_families() {
        let m = Metrics::new();
        m.error("p", "trap");
        m.intent("p", "create", "applied");
        m.call_seconds
            .get_or_create(&PluginLabel { plugin: "p".into() })
            .observe(0.001);
        let text = m.encode();
        assert!(
            text.contains(r#"kubewasm_errors_total{plugin="p",kind="trap"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kubewasm_intents_total{plugin="p",verb="create",result="applied"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("kubewasm_plugin_call_seconds_bucket"),
            "{text}"
        );
        use kubewasm_runtime::budget::{WaitObserver, Waited};
        let wait = |timed_out, tenant| Waited {
            took: std::time::Duration::from_millis(1500),
            wanted_mib: 256,
            available_mib: 44,
            timed_out,
            tenant,
        };
        m.waited("p", &wait(false, false));
        m.waited("p", &wait(true, true));
        let text = m.encode();
        assert!(
            text.contains(r#"kubewasm_call_budget_waits_total{plugin="p"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kubewasm_call_budget_wait_timeouts_total{plugin="p"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kubewasm_call_budget_tenant_waits_total{plugin="p"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kubewasm_call_budget_wait_seconds_count{plugin="p"} 2"#),
            "{text}"
        );
    }
}
