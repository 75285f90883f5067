//! Test hooks for cutting one client off without closing its connections: requests from
//! a *stalled* client are held, unanswered, until the client is released (they then
//! proceed) or until the client gives up on them (its connection closes and the request
//! is dropped, counted as abandoned). Optionally, every request's client, method, path
//! and arrival, and the instant it went past the hold (was executed), are recorded, so a
//! test can assert that a client wrote nothing after a given moment.
//!
//! A client is named by the bearer token it sends (`""` for none). A server started
//! without a required token accepts every token, so tests tell replicas apart by giving
//! each its own token in its kubeconfig.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use http::{HeaderMap, Method, header};
use tokio::sync::watch;

/// One request as seen by the hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The client (its bearer token, `""` for none).
    pub client: String,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// When the request reached the server.
    pub arrived: Instant,
    /// When it went past the hold to be executed; `None` while held or when abandoned.
    pub executed: Option<Instant>,
    /// The client gave up on it while it was held (it was never executed).
    pub abandoned: bool,
}

impl RequestRecord {
    /// Whether the request may change state (anything but GET, HEAD and OPTIONS).
    pub fn is_write(&self) -> bool {
        !matches!(self.method.as_str(), "GET" | "HEAD" | "OPTIONS")
    }
}

/// The hold shared by every request of one server.
#[derive(Debug)]
pub(crate) struct Stalls {
    stalled: watch::Sender<BTreeSet<String>>,
    recording: Mutex<Option<Vec<RequestRecord>>>,
}

impl Default for Stalls {
    fn default() -> Self {
        Stalls {
            stalled: watch::channel(BTreeSet::new()).0,
            recording: Mutex::new(None),
        }
    }
}

/// The client a request comes from: its bearer token.
pub(crate) fn client_of(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("")
}

impl Stalls {
    fn records(&self) -> MutexGuard<'_, Option<Vec<RequestRecord>>> {
        kubewasm_core::sync::lock(&self.recording)
    }

    /// Holds every new request of `client` (and those arriving later) until
    /// [`Stalls::release`].
    pub(crate) fn stall(&self, client: &str) {
        self.stalled.send_modify(|s| {
            s.insert(client.to_string());
        });
    }

    /// Lets `client`'s held requests proceed, and its new ones through.
    pub(crate) fn release(&self, client: &str) {
        self.stalled.send_modify(|s| {
            s.remove(client);
        });
    }

    /// Starts (or, with `false`, stops and clears) recording requests.
    pub(crate) fn record(&self, on: bool) {
        *self.records() = on.then(Vec::new);
    }

    /// The requests recorded so far, in order of arrival.
    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        self.records().clone().unwrap_or_default()
    }

    /// Requests of `client` being held right now (among those recorded: recording must
    /// be on).
    pub(crate) fn held(&self, client: &str) -> usize {
        self.records()
            .iter()
            .flatten()
            .filter(|r| r.client == client && r.executed.is_none() && !r.abandoned)
            .count()
    }

    /// Waits while the request's client is stalled. Dropping the returned future (the
    /// client went away) marks the request abandoned.
    pub(crate) async fn enter(self: &Arc<Self>, headers: &HeaderMap, method: &Method, path: &str) {
        let client = client_of(headers).to_string();
        let index = self.records().as_mut().map(|log| {
            log.push(RequestRecord {
                client: client.clone(),
                method: method.to_string(),
                path: path.to_string(),
                arrived: Instant::now(),
                executed: None,
                abandoned: false,
            });
            log.len() - 1
        });
        let mut pass = Pass {
            stalls: self.clone(),
            index,
            done: false,
        };
        let mut rx = self.stalled.subscribe();
        // The sender lives in `self`, so waiting only ends with a release.
        let _ = rx.wait_for(|s| !s.contains(&client)).await;
        pass.done = true;
        if let Some(i) = index
            && let Some(r) = self.records().as_mut().and_then(|log| log.get_mut(i))
        {
            r.executed = Some(Instant::now());
        }
    }
}

/// Marks a held request abandoned when its future is dropped before it went through.
struct Pass {
    stalls: Arc<Stalls>,
    index: Option<usize>,
    done: bool,
}

impl Drop for Pass {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(i) = self.index
            && let Some(r) = self
                .stalls
                .records()
                .as_mut()
                .and_then(|log| log.get_mut(i))
        {
            r.abandoned = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().expect("header"),
        );
        h
    }

    #[tokio::test]
    async fn a_stalled_clients_requests_wait_for_release_and_others_pass() {
        let s = Arc::new(Stalls::default());
        s.record(true);
        s.stall("a");
        let held = tokio::spawn({
            let s = s.clone();
            async move { s.enter(&headers("a"), &Method::PUT, "/x").await }
        });
        s.enter(&headers("b"), &Method::GET, "/y").await;
        while s.held("a") == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!held.is_finished());
        s.release("a");
        held.await.expect("released");
        let log = s.requests();
        assert_eq!(log.len(), 2);
        assert!(log.iter().all(|r| r.executed.is_some() && !r.abandoned));
        let of = |c: &str| log.iter().find(|r| r.client == c).expect("recorded");
        assert!(of("a").is_write() && !of("b").is_write());
        assert!(of("b").executed < of("a").executed, "b was not held");
        assert_eq!(s.held("a"), 0);
    }

    #[tokio::test]
    async fn a_held_request_dropped_by_its_client_is_abandoned_never_executed() {
        let s = Arc::new(Stalls::default());
        s.record(true);
        s.stall("a");
        let held = tokio::spawn({
            let s = s.clone();
            async move { s.enter(&headers("a"), &Method::PATCH, "/x").await }
        });
        while s.held("a") == 0 {
            tokio::task::yield_now().await;
        }
        held.abort();
        let _ = held.await;
        s.release("a");
        let log = s.requests();
        assert_eq!(log.len(), 1);
        assert!(log[0].abandoned && log[0].executed.is_none());
        assert_eq!(s.held("a"), 0);
    }

    #[test]
    fn clients_are_named_by_their_bearer_token() {
        assert_eq!(client_of(&headers("tok")), "tok");
        assert_eq!(client_of(&HeaderMap::new()), "");
    }
}
