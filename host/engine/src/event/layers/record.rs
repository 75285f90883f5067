//! `--record DIR`: every handled event written as a `kubewasm test` case, with the objects
//! the plugin read and what it returned (or the refusal, or its error).

use std::sync::Arc;

use kubewasm_core::admit::AdmitError;
use kubewasm_runtime::CallError;

use super::Handle;
use crate::Error;
use crate::cases::record::{Outcome, Recorder};
use crate::event::pipeline::{Report, Request, plugin_event};

/// Records events when a recorder is configured.
pub(crate) struct Record<S> {
    inner: S,
    recorder: Option<Arc<Recorder>>,
}

impl<S> Record<S> {
    pub(crate) fn new(inner: S, recorder: Option<Arc<Recorder>>) -> Self {
        Record { inner, recorder }
    }
}

impl<S: Handle> Handle for Record<S> {
    async fn handle(&self, mut req: Request<'_>) -> Report {
        let Some(recorder) = &self.recorder else {
            return self.inner.handle(req).await;
        };
        let event = plugin_event(req.delivery, &req.projections);
        let recording = recorder.begin(&req.version.plugin, &event);
        req.view = recording.reading(req.view);
        req.keep_intents = true;
        let report = self.inner.handle(req).await;
        if let Some(CallError::Plugin { message, retry }) = &report.call_error {
            recording.record(Outcome::PluginError {
                message,
                retry: *retry,
            });
        } else if let Some(raw) = &report.raw {
            // Refused on the object's field owners, which `kubewasm test` cannot see
            // (a case's objects carry no managedFields): a case would not replay.
            if let Err(Error::Refused { rejection, .. }) = &report.result
                && matches!(rejection.error, AdmitError::TakesFields(_))
            {
                return report;
            }
            let admitted = match &report.result {
                Err(Error::Refused { rejection, .. } | Error::InvalidIntent { rejection, .. }) => {
                    Err(rejection.as_ref())
                }
                _ => Ok(report.prepared()),
            };
            recording.record(Outcome::Returned { raw, admitted });
        }
        report
    }
}
