//! Backing off a failing watch by the class of its error, as failed writes are.
//!
//! kube's `StreamBackoff` resets on every item the watcher yields, and the watcher yields
//! `Init` before each (re)list: a list that fails every time (403, the resource gone) was
//! retried every 0.8–1.6 s forever. Here the delay grows until the watch makes progress
//! (a list completes, an object event arrives), and its range depends on what failed,
//! judged as the engine judges a failed write ([`crate::Error::retry`]): an answer that
//! will not change by itself (403, 404, 401, 400, …) waits from seconds up to minutes, a
//! transient one (transport, 5xx, 429) from under a second up to half a minute, a `410
//! Gone` (the watch fell behind; the watcher relists) not at all. A permission granted
//! meanwhile ([`crate::serve::access::Access::granted`]) ends the wait at once.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

/// What a watch error says about trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The same request will get the same answer until someone changes the cluster
    /// (RBAC, a CRD): try again rarely.
    Permanent,
    /// Worth trying again soon.
    Transient,
    /// The watch fell behind (410): the watcher relists at once.
    Desync,
}

impl Class {
    /// How it reads in a log line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Class::Permanent => "permanent",
            Class::Transient => "transient",
            Class::Desync => "desync",
        }
    }
}

/// The error, as the engine spells and classifies API errors (`403 Forbidden: …`).
pub(crate) fn describe(e: &watcher::Error, target: &str) -> (Class, String) {
    let status = match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => match k {
            kube::Error::Api(s) => Some(s.clone()),
            other => {
                return (Class::Transient, other.to_string());
            }
        },
        watcher::Error::WatchError(s) => Some(s.clone()),
        watcher::Error::NoResourceVersion => None,
    };
    let verb = match e {
        watcher::Error::InitialListFailed(_) => "list",
        _ => "watch",
    };
    let Some(status) = status else {
        return (Class::Permanent, e.to_string());
    };
    if status.code == 410 {
        return (Class::Desync, format!("{verb} {target}: 410 Gone"));
    }
    let err = crate::Error::from_kube(verb, target, kube::Error::Api(status));
    let class = match err.retry() {
        crate::error::Retry::Never => Class::Permanent,
        crate::error::Retry::Backoff | crate::error::Retry::After(_) => Class::Transient,
    };
    (class, err.to_string())
}

/// Delays of one class: the first, doubling up to the longest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) first: Duration,
    pub(crate) longest: Duration,
}

/// The delays per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) permanent: Range,
    pub(crate) transient: Range,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            // A 403 or 404 waits for an operator: from 5 s to 5 min (a permission granted
            // meanwhile is noticed by the periodic recheck and ends the wait).
            permanent: Range {
                first: Duration::from_secs(5),
                longest: Duration::from_secs(300),
            },
            // kube's DefaultBackoff's range.
            transient: Range {
                first: Duration::from_millis(800),
                longest: Duration::from_secs(30),
            },
        }
    }
}

/// Consecutive failures of one watcher, since its last progress.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    count: u32,
}

impl Failures {
    /// The delay before the next attempt after a failure of `class` (jittered by up to
    /// +20%, so replicas do not retry in step).
    pub(crate) fn next(&mut self, class: Class, policy: &Policy, jitter: f64) -> Duration {
        let range = match class {
            Class::Desync => return Duration::ZERO,
            Class::Permanent => policy.permanent,
            Class::Transient => policy.transient,
        };
        let doublings = self.count.min(16);
        self.count = self.count.saturating_add(1);
        let base = range
            .first
            .saturating_mul(1u32 << doublings)
            .min(range.longest);
        base.mul_f64(1.0 + 0.2 * jitter.clamp(0.0, 1.0))
    }

    /// The watch made progress: the next failure starts from the first delay.
    pub(crate) fn reset(&mut self) {
        self.count = 0;
    }
}

/// An item of a watch with backoff: the watcher's event, or its error with what it was
/// judged to be and how long the watch now waits.
pub(crate) type Item<K> = Result<Event<K>, Failed>;

/// A failed attempt of the watcher.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) class: Class,
    /// The error as the engine spells it.
    pub(crate) message: String,
    /// The wait before the next attempt.
    pub(crate) delay: Duration,
    /// The server refused the watch request itself as invalid (400, 422): with a
    /// streaming list, a server that does not serve them.
    pub(crate) refused: bool,
}

/// Whether `e` is the server refusing to start the watch as asked (400, 422).
fn refused(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 400 || s.code == 422)
}

/// A watcher (`make()`) with backoff by error class: after an error the watcher is not
/// polled (so sends no request) for the delay its class and the failures since the last
/// progress give, or until `granted` changes. After a permanent error (403, 404) the
/// watcher is made anew, so the next attempt lists again: what changed while it was
/// refused is diffed in, and its recovery is seen (a re-watch that works sends nothing,
/// and the host must know when a watch it withheld objects for works again). `target`
/// names the resource in messages.
pub(crate) fn with_backoff<K, S, M>(
    mut make: M,
    target: String,
    policy: Policy,
    granted: watch::Receiver<u64>,
) -> impl Stream<Item = Item<K>> + Send
where
    K: Send + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + Unpin + 'static,
    M: FnMut() -> S + Send + 'static,
{
    struct State<S, M> {
        watcher: S,
        make: M,
        failures: Failures,
        wait: Option<Duration>,
        granted: watch::Receiver<u64>,
        /// False once the granted sender is gone (never again waited on).
        granted_open: bool,
    }
    let state = State {
        watcher: make(),
        make,
        failures: Failures::default(),
        wait: None,
        granted,
        granted_open: true,
    };
    futures::stream::unfold(state, move |mut st| {
        let target = target.clone();
        async move {
            if let Some(delay) = st.wait.take() {
                st.granted.borrow_and_update();
                let open = st.granted_open;
                let closed = tokio::select! {
                    _ = tokio::time::sleep(delay) => false,
                    changed = st.granted.changed(), if open => changed.is_err(),
                };
                if closed {
                    // No more grants to wait for: sleep the whole delay.
                    st.granted_open = false;
                    tokio::time::sleep(delay).await;
                }
            }
            let item = match st.watcher.next().await? {
                Ok(event) => {
                    if matches!(event, Event::InitDone | Event::Apply(_) | Event::Delete(_)) {
                        st.failures.reset();
                    }
                    Ok(event)
                }
                Err(e) => {
                    let (class, message) = describe(&e, &target);
                    let delay = st.failures.next(class, &policy, rand::random::<f64>());
                    st.wait = Some(delay);
                    if class == Class::Permanent {
                        st.watcher = (st.make)();
                    }
                    Err(Failed {
                        class,
                        message,
                        delay,
                        refused: refused(&e),
                    })
                }
            };
            Some((item, st))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> watcher::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "configmaps is forbidden: User \"x\" cannot list resource \"configmaps\"",
            "reason": "Forbidden", "code": code,
        }))
        .expect("a Status");
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn errors_are_classed_as_writes_are() {
        assert_eq!(describe(&api(403), "v1/configmaps").0, Class::Permanent);
        assert_eq!(describe(&api(404), "v1/configmaps").0, Class::Permanent);
        assert_eq!(describe(&api(500), "v1/configmaps").0, Class::Transient);
        assert_eq!(describe(&api(429), "v1/configmaps").0, Class::Transient);
        assert_eq!(describe(&api(410), "v1/configmaps").0, Class::Desync);
        let (_, message) = describe(&api(403), "v1/configmaps");
        assert!(
            message.starts_with("list v1/configmaps: 403 Forbidden: configmaps is forbidden"),
            "{message}"
        );
    }

    #[test]
    fn delays_grow_by_class_until_progress() {
        let policy = Policy::default();
        let mut f = Failures::default();
        let permanent: Vec<u64> = (0..9)
            .map(|_| f.next(Class::Permanent, &policy, 0.0).as_secs())
            .collect();
        assert_eq!(permanent, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        f.reset();
        assert_eq!(
            f.next(Class::Transient, &policy, 0.0),
            Duration::from_millis(800)
        );
        assert_eq!(
            f.next(Class::Transient, &policy, 1.0),
            Duration::from_millis(1920)
        );
        assert_eq!(f.next(Class::Desync, &policy, 1.0), Duration::ZERO);
    }
}
