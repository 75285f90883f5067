//! A plugin's queue handler: takes the version serving when an event starts, gives it the
//! view of the cluster it may read, and runs the layered pipeline
//! ([`crate::event::layers::Stack`]); reports what the queue says failed.

use std::sync::Arc;

use kubewasm_core::event::EventType;
use kubewasm_core::grant::Mode;

use crate::Error;
use crate::apply::events::{EventRecorder, failure_message};
use crate::event::layers::{Handle, Stack};
use crate::event::pipeline::Request;
use crate::event::{Delivery, Handler};
use crate::plugins::environment::Current;
use crate::replicas::ownership::Ownership;
use crate::watch::cache::{Caches, PluginView};

/// What every plugin's handler shares.
pub(crate) struct Shared {
    pub(crate) current: Current,
    pub(crate) stack: Stack,
    pub(crate) caches: Arc<Caches>,
    /// Warning Events on objects whose events fail.
    pub(crate) warnings: Option<Arc<EventRecorder>>,
    pub(crate) ownership: Ownership,
}

/// Handles one plugin's deliveries.
pub(crate) struct PluginHandler {
    pub(crate) name: String,
    pub(crate) shared: Arc<Shared>,
}

impl PluginHandler {
    /// The event handled by the version serving now.
    async fn handle_once(&self, d: &Delivery) -> Result<(), Error> {
        let shared = &self.shared;
        let env = shared.current.get();
        // The version serving when the event starts handles it, start to finish; a plugin
        // removed since the event was queued has nothing to do with it.
        let Some(active) = env.plugins.get(&self.name) else {
            return Ok(());
        };
        let plugin = active.plugin();
        // What the plugin may read: the kinds it watches plus those it declared, as served,
        // each where its approval lets it read it; at most its memory cap a call.
        let view = Arc::new(PluginView::per_kind(
            shared.caches.clone(),
            env.reads(&self.name),
            plugin.limits.memory,
        ));
        let req = Request {
            version: &active.version,
            delivery: d,
            view,
            keep_intents: false,
            dry_run: active.version.mode == Mode::DryRun,
            shadow: env.shadows.get(&self.name).cloned(),
        };
        shared.stack.handle(req).await.result
    }
}

impl Handler for PluginHandler {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        loop {
            let result = self.handle_once(d).await;
            let Err(Error::Retired { version, .. }) = &result else {
                return result;
            };
            // Unloaded during the event: not a failure of the plugin (no quarantine, no
            // Warning Event). The version serving now, if any, handles the event again;
            // each pass takes the environment as it is then, so this ends with the reloads.
            let object = d.object.describe();
            let now = self.shared.current.get();
            let Some(active) = now.plugins.get(&self.name) else {
                tracing::info!(plugin = %self.name, version = %version, object = %object,
                    "call cancelled: the plugin was unloaded during the event; no write of it sent after that");
                return Ok(());
            };
            tracing::info!(plugin = %self.name, version = %version, object = %object,
                now_serving = %active.plugin().manifest.version,
                "call cancelled: the version was unloaded during the event; handled again by the version serving now");
        }
    }

    /// Log a failed event and record a Warning Event on its object, once per object and
    /// cause for permanent failures (a repeat is logged at debug level only).
    async fn report(&self, d: &Delivery, e: &Error, first: bool) {
        let name = &self.name;
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
        if let Some(warnings) = &self.shared.warnings
            && d.event_type != EventType::Deleted
        {
            let reason = match e {
                Error::InvalidIntent { .. } | Error::Refused { .. } => "IntentRefused",
                Error::Call { .. } => "PluginFailed",
                _ => "ApplyFailed",
            };
            // An Event is a write too: none after the write deadline.
            let _ = self
                .shared
                .ownership
                .guard(
                    &d.object.key(),
                    warnings.warning(&d.object.object, reason, &failure_message(name, e)),
                )
                .await;
        }
    }
}
