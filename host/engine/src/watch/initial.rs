//! How a watch gets the objects that exist when it starts (its first sync, and every
//! relist after it): a streaming list where the API server serves one, pages otherwise,
//! so a large kind's list is never held whole as one response.
//!
//! A streaming list (KEP-3157: a watch with `sendInitialEvents=true`,
//! `resourceVersionMatch=NotOlderThan`, `allowWatchBookmarks=true`) sends the current
//! objects one by one, then a bookmark annotated `k8s.io/initial-events-end`.
//! kube-apiserver serves it by default from 1.34 on (the `WatchList` feature gate). One
//! without it refuses the request with 422 (the gate off, 1.27–1.33: "sendInitialEvents
//! is forbidden for watch unless the WatchList feature gate is enabled"; 1.19–1.26:
//! "resourceVersionMatch is forbidden for watch"). A server ignoring both parameters
//! would answer a plain watch whose initial events never end: a client waiting for the
//! bookmark would wait forever (kube's watcher does, and starts again at each timeout).
//!
//! So the host asks each API server once, at its first watch, with a streaming list that
//! matches nothing (`metadata.name=kubewasm/probe`, a name no object can have): served
//! when the annotated bookmark comes first; not served when the request is refused (400,
//! 422), or an ERROR event (a storage without progress notifications), another bookmark
//! or the stream's end (`timeoutSeconds`) comes first. An answer that says nothing about
//! the server (403, 404, 429, 5xx, a transport error) decides nothing: that watch pages
//! and the next one asks again. A streaming list refused later (the server replaced by
//! one without it) makes the host page from then on (client-go falls back the same way,
//! per attempt).

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use kube::runtime::watcher;
use tokio::sync::Mutex;

/// How watches get the objects that exist when they start (`--initial-sync`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitialSync {
    /// Streaming lists where the API server serves them (asked once), pages otherwise.
    #[default]
    Auto,
    /// Streaming lists, without asking (a server without them refuses every watch).
    Streaming,
    /// Paged lists.
    Paged,
}

/// How one watch lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Streaming,
    Paged,
}

impl Method {
    /// How it reads in a log line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::Streaming => "streaming",
            Method::Paged => "paged",
        }
    }
}

/// The field selector of the probe: `/` is in no object's name.
const PROBE_SELECTOR: &str = "metadata.name=kubewasm/probe";
/// How long a server that ignores the probe's parameters holds it open.
const PROBE_TIMEOUT_SECS: u32 = 5;

/// What the probe found out about the server.
#[derive(Debug)]
enum Verdict {
    Served,
    NotServed(String),
    /// Nothing about the server (no permission, a transient failure).
    Unknown(String),
}

/// How the watches of one API server list: configured, and with `auto`, decided by the
/// first probe that says.
#[derive(Debug)]
pub(crate) struct Lister {
    configured: InitialSync,
    /// Objects per page (0: one list).
    page_size: u32,
    decided: Mutex<Option<Method>>,
}

impl Lister {
    pub(crate) fn new(configured: InitialSync, page_size: u32) -> Self {
        let decided = match configured {
            InitialSync::Auto => None,
            InitialSync::Streaming => Some(Method::Streaming),
            InitialSync::Paged => Some(Method::Paged),
        };
        Lister {
            configured,
            page_size,
            decided: Mutex::new(decided),
        }
    }

    /// The method for a watch starting now, asking the server through `api` (one of the
    /// watch's own scopes, with its label `selector`: what the host may watch) when
    /// nothing has decided it yet.
    pub(crate) async fn method(
        &self,
        api: &Api<DynamicObject>,
        selector: Option<&str>,
        target: &str,
    ) -> Method {
        // Held across the probe: the watches starting together wait for one answer.
        let mut decided = self.decided.lock().await;
        if let Some(m) = *decided {
            return m;
        }
        match probe(api, selector, target).await {
            Verdict::Served => {
                tracing::info!(
                    probed = target,
                    "the API server serves streaming lists: watches list by streaming"
                );
                *decided = Some(Method::Streaming);
                Method::Streaming
            }
            Verdict::NotServed(why) => {
                tracing::warn!(probed = target, reason = %why, page_size = self.page_size,
                    "the API server does not serve streaming lists: watches list in pages");
                *decided = Some(Method::Paged);
                Method::Paged
            }
            Verdict::Unknown(why) => {
                tracing::debug!(probed = target, reason = %why,
                    "could not ask the API server about streaming lists: this watch lists in pages");
                Method::Paged
            }
        }
    }

    /// A streaming list was refused (400, 422): every watch pages from now on, unless
    /// configured to stream regardless. True when the refused watch is to page.
    pub(crate) async fn refused(&self, target: &str, why: &str) -> bool {
        if self.configured == InitialSync::Streaming {
            return false;
        }
        let mut decided = self.decided.lock().await;
        if *decided != Some(Method::Paged) {
            tracing::warn!(
                resource = target,
                reason = why,
                page_size = self.page_size,
                "a streaming list was refused: watches list in pages from now on"
            );
            *decided = Some(Method::Paged);
        }
        true
    }

    /// `base` listing by `method`.
    pub(crate) fn config(&self, base: watcher::Config, method: Method) -> watcher::Config {
        match method {
            Method::Streaming => base.streaming_lists(),
            Method::Paged => watcher::Config {
                page_size: (self.page_size > 0).then_some(self.page_size),
                ..base
            },
        }
    }
}

/// Asks the server for a streaming list that matches nothing.
async fn probe(api: &Api<DynamicObject>, selector: Option<&str>, target: &str) -> Verdict {
    // Spelled as the engine spells API errors (`403 Forbidden: …`).
    let spell = |e: kube::Error| crate::Error::from_kube("watch", target, e).to_string();
    let mut params = WatchParams::streaming_lists()
        .fields(PROBE_SELECTOR)
        .timeout(PROBE_TIMEOUT_SECS);
    if let Some(s) = selector {
        params = params.labels(s);
    }
    let stream = match api.watch(&params, "0").await {
        Ok(s) => s,
        Err(kube::Error::Api(s)) if s.code == 400 || s.code == 422 => {
            return Verdict::NotServed(spell(kube::Error::Api(s)));
        }
        Err(e) => return Verdict::Unknown(spell(e)),
    };
    // The server ends the stream at its timeout; this bounds a server that does not.
    let guard = Duration::from_secs(u64::from(PROBE_TIMEOUT_SECS) + 5);
    let mut stream = stream.boxed();
    let first = tokio::time::timeout(guard, stream.next()).await;
    match first {
        Err(_) | Ok(None) => Verdict::NotServed(format!(
            "no bookmark ending the initial events within {PROBE_TIMEOUT_SECS}s"
        )),
        Ok(Some(Ok(WatchEvent::Bookmark(b))))
            if b.metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .is_some_and(|v| v == "true") =>
        {
            Verdict::Served
        }
        Ok(Some(Ok(WatchEvent::Bookmark(_)))) => {
            Verdict::NotServed("a bookmark not ending the initial events came first".into())
        }
        Ok(Some(Ok(WatchEvent::Error(s)))) => Verdict::NotServed(spell(kube::Error::Api(s))),
        Ok(Some(Ok(_))) => Verdict::NotServed("the selector was not applied".into()),
        Ok(Some(Err(e))) => Verdict::Unknown(spell(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refusal_makes_every_watch_page_unless_streaming_is_forced() {
        let auto = Lister::new(InitialSync::Auto, 500);
        *auto.decided.lock().await = Some(Method::Streaming);
        assert!(auto.refused("configmaps.v1", "422").await);
        assert_eq!(*auto.decided.lock().await, Some(Method::Paged));
        // A second watch refused meanwhile pages too.
        assert!(auto.refused("secrets.v1", "422").await);

        let forced = Lister::new(InitialSync::Streaming, 500);
        assert!(!forced.refused("configmaps.v1", "422").await);
        assert_eq!(*forced.decided.lock().await, Some(Method::Streaming));
    }

    #[test]
    fn pages_of_zero_are_one_list() {
        let base = watcher::Config::default();
        let one = Lister::new(InitialSync::Paged, 0).config(base.clone(), Method::Paged);
        assert_eq!(one.page_size, None);
        let paged = Lister::new(InitialSync::Paged, 7).config(base.clone(), Method::Paged);
        assert_eq!(paged.page_size, Some(7));
        let streaming = Lister::new(InitialSync::Auto, 7).config(base, Method::Streaming);
        assert_eq!(
            streaming.initial_list_strategy,
            watcher::InitialListStrategy::StreamingList
        );
    }
}
