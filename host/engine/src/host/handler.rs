//! The handler of one plugin's deliveries: call the plugin, admit its intents through the
//! shared pipeline (`kubewasm_core::admit`), apply them, and account for the outcome
//! (metrics, logs, Warning Events, quarantine).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use kubewasm_core::admit;
use kubewasm_core::event::EventType;
use kubewasm_runtime::{CompiledPlugin, PluginEvent};
use tracing::Instrument;

use crate::Error;
use crate::apply::events::EventRecorder;
use crate::apply::{Applier, Outcome};
use crate::dispatch::{Delivery, Handler};
use crate::host::environment::Slot;
use crate::ops::leader::Leadership;
use crate::ops::metrics::{EventLabels, Metrics, PluginLabel};
use crate::watch::WatchManager;
use crate::watch::cache::{Caches, PluginView};
use crate::watch::discovery::Discovery;

/// What every plugin's handler shares.
#[derive(Clone)]
pub(crate) struct HandlerDeps {
    pub(crate) applier: Arc<Applier>,
    pub(crate) discovery: Arc<Discovery>,
    pub(crate) watches: Arc<WatchManager>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) leadership: Leadership,
    pub(crate) recorder: Option<Arc<EventRecorder>>,
    /// `--record DIR`: every handled event written as a test case.
    pub(crate) record: Option<Arc<crate::cases::record::Recorder>>,
}

/// Handles a plugin's deliveries with the version in its slot.
pub(crate) struct PluginHandler {
    pub(crate) slot: Slot,
    pub(crate) deps: HandlerDeps,
}

impl PluginHandler {
    /// What the plugin may read: the kinds it watches plus those it declared, once
    /// resolved; namespaced kinds in its watches' namespaces; at most its memory cap a call.
    fn view(&self, plugin: &CompiledPlugin) -> Arc<PluginView> {
        let allowed: HashSet<_> = plugin
            .manifest
            .read_resources()
            .filter_map(|r| self.deps.watches.resolved(r))
            .map(|r| r.type_ref())
            .collect();
        Arc::new(PluginView::new(
            self.deps.caches.clone(),
            allowed,
            kubewasm_runtime::ReadScope::of(&plugin.manifest),
            plugin.limits.memory,
        ))
    }

    async fn run(&self, plugin: &CompiledPlugin, d: &Delivery) -> Result<usize, Error> {
        let deps = &self.deps;
        let name = plugin.name().to_string();
        let object = d.object.describe();
        let event = PluginEvent {
            event_type: d.event_type,
            watch_id: d.watch_id.to_string(),
            object: d.object.json(),
            old_object: d.old.as_ref().map(|o| o.json()),
        };
        let started = Instant::now();
        // A call in flight when leadership ends is dropped: its intents would be written
        // by a replica that may no longer write.
        let not_leader = || Error::NotLeader {
            plugin: name.clone(),
        };
        let recording = deps.record.as_ref().map(|r| r.begin(plugin, &event));
        let view = match &recording {
            Some(r) => r.reading(self.view(plugin)),
            None => self.view(plugin),
        };
        let result = deps
            .leadership
            .guard(plugin.handle(&event, &object, view))
            .await
            .map_err(|_| not_leader())?;
        deps.metrics
            .call_seconds
            .get_or_create(&PluginLabel {
                plugin: name.clone(),
            })
            .observe(started.elapsed().as_secs_f64());
        if let Some(r) = &recording
            && let Err(kubewasm_runtime::CallError::Plugin { message, retry }) = &result
        {
            r.record(crate::cases::record::Outcome::PluginError {
                message,
                retry: *retry,
            });
        }
        let raw = result.map_err(|kind| Error::Call {
            plugin: name.clone(),
            kind,
        })?;
        tracing::debug!(plugin = %name, object = %object, intents = raw.len(), took = ?started.elapsed(), "plugin returned");

        // Admit everything before writing anything: a call is applied whole or not at all.
        let recorded_raw = recording.as_ref().map(|_| raw.clone());
        let admitted = admit::admit(
            &plugin.manifest,
            raw,
            plugin.limits.max_intent_bytes,
            &d.object.trigger(),
            deps.discovery.as_ref(),
            deps.caches.as_ref(),
        )
        .await;
        if let (Some(r), Some(raw)) = (&recording, &recorded_raw) {
            let admitted = &admitted;
            r.record(crate::cases::record::Outcome::Returned { raw, admitted });
        }
        let prepared = admitted.map_err(|r| Error::rejected(&name, r))?;

        let manager = plugin.manifest.field_manager();
        let trigger = d.object.trigger();
        for p in &prepared {
            if !deps.leadership.is_leader() {
                return Err(Error::NotLeader {
                    plugin: name.clone(),
                });
            }
            // The request is abandoned at the write deadline; none starts after it.
            let result = deps
                .leadership
                .guard(deps.applier.execute(&manager, p))
                .await
                .map_err(|_| not_leader())?;
            // A write to the trigger as the plugin saw it finds no such object: the trigger
            // was deleted (or replaced) during the call; admission checked that a status
            // write has a subresource to go to. The next event of that key follows through
            // the queue; nothing is wrong with the plugin or the object.
            let trigger_gone =
                matches!(&result, Err(e) if e.target_missing()) && p.requires_trigger(&trigger);
            let outcome = match &result {
                _ if trigger_gone => "gone",
                Ok(_) => "applied",
                Err(e) if e.status() == Some(409) => "conflict",
                Err(_) => "error",
            };
            deps.metrics.intent(&name, p.intent.verb.as_str(), outcome);
            if outcome == "conflict" {
                deps.metrics
                    .conflicts
                    .get_or_create(&PluginLabel {
                        plugin: name.clone(),
                    })
                    .inc();
            }
            match result {
                Ok(Outcome::Written { resource_version }) => tracing::info!(
                    plugin = %name, manager = %manager, trigger = %object,
                    resource_version = %resource_version, "applied {}", p.describe()
                ),
                Ok(Outcome::Deleted) => {
                    tracing::info!(plugin = %name, manager = %manager, trigger = %object, "applied {}", p.describe())
                }
                Ok(Outcome::AlreadyGone) => {
                    tracing::info!(plugin = %name, trigger = %object, "{}: already gone", p.describe())
                }
                Err(_) if trigger_gone => tracing::info!(
                    plugin = %name, trigger = %object,
                    "{}: skipped, the object was deleted during the call", p.describe()
                ),
                Err(e) => {
                    if e.status() == Some(409) && !p.intent.force {
                        tracing::warn!(plugin = %name, manager = %manager, trigger = %object,
                            "{}: conflict with another field manager; not forced (the intent did not ask for force)",
                            p.describe());
                    }
                    return Err(e);
                }
            }
        }
        Ok(prepared.len())
    }

    /// Count a failed event; quarantine the plugin on sandbox failures. (Logging and the
    /// Warning Event are [`Handler::report`]'s, once the queue knows whether it repeats.)
    fn failed(&self, version: &crate::host::environment::Version, e: &Error) {
        let deps = &self.deps;
        let name = version.plugin.name();
        deps.metrics.error(name, e.kind());
        match e {
            Error::Call { kind, .. } if kind.is_sandbox_failure() => {
                if version.health.failure(&kind.to_string()) {
                    deps.metrics.set_quarantined(name, true);
                    tracing::error!(plugin = name, reason = %kind, "plugin quarantined: it receives no events until its file changes or the cooldown passes");
                }
            }
            // The plugin answered: it works, whatever it answered.
            _ => {
                version.health.success();
                deps.metrics.set_quarantined(name, false);
            }
        }
    }
}

impl Handler for PluginHandler {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        // The version current when the event starts handles it, start to finish.
        let version = match self.slot.read() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let plugin = &version.plugin;
        let name = plugin.name();
        let object = d.object.describe();
        if !self.deps.leadership.is_leader() {
            // Followers keep caches warm but leave writing to the leader, which resyncs
            // everything when it takes over.
            tracing::debug!(plugin = name, object = %object, "not the leader; event left to the leader");
            return Ok(());
        }
        if let Err(q) = version.health.check() {
            // The event waits in the queue (retried with backoff) until the quarantine ends.
            tracing::debug!(plugin = name, object = %object, "plugin quarantined; event deferred");
            return Err(Error::Quarantined {
                plugin: name.to_string(),
                reason: q.reason,
                remaining: q.remaining,
            });
        }
        self.deps
            .metrics
            .events
            .get_or_create(&EventLabels {
                plugin: name.to_string(),
                event: d.event_type.as_str().to_string(),
            })
            .inc();
        tracing::info!(plugin = name, version = %plugin.manifest.version, event = d.event_type.as_str(), watch = %d.watch_id, object = %object, "event");
        // Everything logged while handling this event (plugin logs, applies) carries the
        // plugin and the object through this span.
        let span = tracing::info_span!("event", plugin = name, object = %object, event = d.event_type.as_str());
        match self.run(plugin, d).instrument(span).await {
            Ok(_) => {
                version.health.success();
                self.deps.metrics.set_quarantined(name, false);
                Ok(())
            }
            // Not a failure of the plugin or the object, and nothing more may be written
            // (not even a Warning Event): the new leader handles the event.
            Err(e @ Error::NotLeader { .. }) => {
                tracing::warn!(plugin = name, object = %object, "leadership ended while handling the event; abandoned, left to the new leader");
                Err(e)
            }
            Err(e) => {
                self.failed(&version, &e);
                Err(e)
            }
        }
    }

    /// Log a failed event and record a Warning Event on its object, once per object and
    /// cause for permanent failures (a repeat is logged at debug level only).
    async fn report(&self, d: &Delivery, e: &Error, first: bool) {
        let name = match self.slot.read() {
            Ok(v) => v.plugin.name().to_string(),
            Err(poisoned) => poisoned.into_inner().plugin.name().to_string(),
        };
        let object = d.object.describe();
        if matches!(e, Error::Quarantined { .. } | Error::NotLeader { .. }) {
            tracing::debug!(plugin = %name, object = %object, error = %e, "event deferred");
            return;
        }
        if !first {
            tracing::debug!(plugin = %name, object = %object, error = %e,
                "still failing the same way; not retried until the object, the plugin or its settings change");
            return;
        }
        let retry = e.retry();
        tracing::error!(plugin = %name, object = %object, event = d.event_type.as_str(), retry = e.is_retryable(), retried = %retry, error = %e, "event failed");
        if let Some(recorder) = &self.deps.recorder
            && d.event_type != EventType::Deleted
        {
            let reason = match e {
                Error::InvalidIntent { .. } | Error::Refused { .. } => "IntentRefused",
                Error::Call { .. } => "PluginFailed",
                _ => "ApplyFailed",
            };
            // An Event is a write too: none after the write deadline.
            let _ = self
                .deps
                .leadership
                .guard(recorder.warning(
                    &d.object.object,
                    reason,
                    &crate::apply::events::failure_message(e),
                ))
                .await;
        }
    }
}
