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
use crate::watch::WatchManager;
use crate::watch::cache::{Caches, PluginView};
use std::time::Duration;

/// What every plugin's handler shares.
pub(crate) struct Shared {
    pub(crate) current: Current,
    pub(crate) stack: Stack,
    pub(crate) caches: Arc<Caches>,
    /// Warning Events on objects whose events fail.
    pub(crate) warnings: Option<Arc<EventRecorder>>,
    pub(crate) ownership: Ownership,
    /// Whether the resources a version watches and reads have settled.
    pub(crate) watches: Arc<WatchManager>,
}

/// How long an event waits for its plugin's caches to settle before it is handled anyway
/// (a resource whose discovery or list keeps failing must not hold the plugin forever:
/// its reads then say why they fail).
const SETTLE_WAIT: Duration = Duration::from_secs(30);

/// Handles one plugin's deliveries.
pub(crate) struct PluginHandler {
    pub(crate) name: String,
    pub(crate) shared: Arc<Shared>,
}

impl PluginHandler {
    /// Wait until everything the version serving now watches and reads has settled
    /// (cached and synced, or found not served), once per version: its first events do
    /// not read caches still filling.
    async fn settle(&self) {
        let Some(version) = self
            .shared
            .current
            .get()
            .plugins
            .get(&self.name)
            .map(|a| a.version.clone())
        else {
            return;
        };
        if version.is_settled() {
            return;
        }
        let needs = crate::plugins::staging::needs(&version.plugin.manifest);
        let wait = self.shared.watches.until_settled(&needs);
        if tokio::time::timeout(SETTLE_WAIT, version.while_serving(wait))
            .await
            .is_err()
        {
            tracing::warn!(plugin = %self.name, waited_s = SETTLE_WAIT.as_secs(),
                "the caches of what the plugin watches and reads have not synced; handling its events anyway");
        }
        version.mark_settled();
    }

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
        let view = Arc::new(
            PluginView::per_kind(
                shared.caches.clone(),
                env.reads(&self.name),
                plugin.limits.memory,
            )
            .with_unserved(env.unserved(&self.name))
            .with_projections(env.projections_of(&self.name)),
        );
        let req = Request {
            version: &active.version,
            delivery: d,
            view: view.clone(),
            projections: env.projections_of(&self.name),
            keep_intents: false,
            dry_run: active.version.mode == Mode::DryRun,
            shadow: env.shadows.get(&self.name).cloned(),
        };
        let result = shared.stack.handle(req).await.result;
        // A call that failed after a read of a kind not served or not synced yet may work
        // once it is: retried, whatever the plugin said.
        match (result, view.transient_refusal()) {
            (Err(Error::Call { plugin, kind }), Some(read)) => Err(Error::ReadUnavailable {
                plugin,
                kind,
                read: Box::new(read),
            }),
            (result, _) => result,
        }
    }
}

impl Handler for PluginHandler {
    async fn handle(&self, d: &Delivery) -> Result<(), Error> {
        loop {
            self.settle().await;
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
            // The cache keeps the object's text; an Event names it whole.
            && let Ok(object) = d.object.object()
        {
            let reason = match e {
                Error::InvalidIntent { .. } | Error::Refused { .. } => "IntentRefused",
                Error::Call { .. } => "PluginFailed",
                Error::ReadUnavailable { .. } => "ResourceUnavailable",
                _ => "ApplyFailed",
            };
            // An Event is a write too: none after the write deadline.
            let _ = self
                .shared
                .ownership
                .guard(
                    &d.object.key(),
                    warnings.warning(&object, reason, &failure_message(name, e)),
                )
                .await;
        }
    }
}
