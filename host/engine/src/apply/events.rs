//! Kubernetes Events on the object that triggered a failure, rate limited.
//!
//! A failed plugin call or a refused intent is worth a `Warning` Event on the triggering
//! object, where `kubectl describe` shows it to the object's owner. A plugin that fails
//! on every resync must not flood the API server though: a repeat of the same
//! (object uid, reason) within `min_interval` is suppressed and counted, and the next
//! recorded Event says how many were suppressed (`(N similar suppressed)`).
//!
//! Events are core/v1 `Event` objects (served by every cluster and by the embedded API
//! server), one new object per recorded warning, named like client-go names them.
//! Recording never fails the caller: errors are logged at debug level.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, PostParams};

/// The `source.component` and `reportingComponent` of every Event the host records.
pub const COMPONENT: &str = "kubewasm";

/// Longest message recorded, in bytes (longer ones are cut at a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// The message of the Warning Event for a failed event, in the host's words only: a
/// fixed text per cause, naming the plugin and, for a refused intent, which one and the
/// class of rule. Nothing the plugin influenced is quoted: not its error message, trap
/// text or symbol names, not the names or values its intents carry (an excerpt of a
/// Secret's value as an object name is still the value), not the API server's message
/// about a body the plugin wrote. Whoever may read Events in the object's namespace is
/// not whoever may read what the plugin read. The full error stays in the host's log.
pub fn failure_message(plugin: &str, e: &crate::Error) -> String {
    use crate::Error;
    use kubewasm_runtime::CallError;
    let log = "the host's log has the details";
    match e {
        Error::Call { kind, .. } => match kind {
            CallError::Plugin { retry, .. } => format!(
                "plugin {plugin} returned an error ({}); its message is in the host's log",
                if *retry {
                    "it asked for a retry"
                } else {
                    "not retried"
                },
            ),
            CallError::Trap(_) => format!("plugin {plugin} trapped; {log}"),
            // The host's own figures (a deadline, a cap, a count).
            other => format!("plugin {plugin}: {other}"),
        },
        Error::InvalidIntent { rejection, .. } | Error::Refused { rejection, .. } => format!(
            "plugin {plugin}: intent #{} {}; {log}",
            rejection.index,
            rejection_class(&rejection.error)
        ),
        Error::Partial {
            applied,
            total,
            source,
            ..
        } => format!(
            "plugin {plugin}: {applied} of {total} intents applied, then intent #{applied} failed ({}); {log}",
            write_failure(source)
        ),
        other => format!("plugin {plugin}: {}; {log}", write_failure(other)),
    }
}

/// A refused intent's rule, as a fixed text.
fn rejection_class(e: &kubewasm_core::admit::AdmitError) -> &'static str {
    use kubewasm_core::admit::{AdmitError, BodyError};
    match e {
        AdmitError::Invalid(_) => "is malformed",
        AdmitError::Resolve(_) => "names a kind the cluster does not serve (yet)",
        AdmitError::Bind(_) => "cannot be bound to a namespace or owner",
        AdmitError::Refused(_) => "was refused: no grant of the plugin allows it",
        AdmitError::Body(
            BodyError::OwnerNeedsDelete { .. } | BodyError::AdoptionNeedsDelete { .. },
        ) => "was refused: an owner reference it writes needs delete on the object",
        AdmitError::Body(_) => {
            "was refused: an owner reference or finalizer it writes is not allowed"
        }
        AdmitError::TakesFields(_) => {
            "was refused: it would take fields another field manager owns, without force"
        }
    }
}

/// A failed write or read, as a fixed text: what was done and the API server's status
/// code and reason (its message, which may quote the plugin's body, stays in the log).
fn write_failure(e: &crate::Error) -> String {
    use crate::Error;
    match e {
        Error::Api {
            verb,
            status,
            reason,
            ..
        } => {
            // The Status reason is one of the API server's CamelCase words; anything else
            // is not quoted.
            let reason = if !reason.is_empty()
                && reason.len() <= 64
                && reason.chars().all(|c| c.is_ascii_alphanumeric())
            {
                reason.as_str()
            } else {
                "Failure"
            };
            format!("{verb} failed: {status} {reason}")
        }
        Error::Kube { .. } => "the API server could not be reached".into(),
        Error::Partial { source, .. } => write_failure(source),
        Error::Resolve(_) => "a kind could not be resolved".into(),
        other => format!("failed ({})", other.kind()),
    }
}

/// Entries the rate limiter keeps; past it, the oldest are forgotten first.
const MAX_KEYS: usize = 4096;

/// Entries forgotten at once when the limiter is full and no entry is quiet: an eighth,
/// so eviction's linear pass is paid once per `MAX_KEYS / 8` new keys.
const EVICT_BATCH: usize = MAX_KEYS / 8;

/// Records `Warning` Events on the objects that triggered failures.
pub struct EventRecorder {
    client: kube::Client,
    instance: String,
    limiter: Mutex<RateLimiter>,
}

impl EventRecorder {
    /// A recorder that reports as `instance` (e.g. the pod name) and records the same
    /// (object, reason) at most once per `min_interval`.
    pub fn new(client: kube::Client, instance: String, min_interval: Duration) -> Self {
        EventRecorder {
            client,
            instance,
            limiter: Mutex::new(RateLimiter::new(min_interval)),
        }
    }

    /// Records a `Warning` Event with `reason` (CamelCase, e.g. `PluginFailed`) and
    /// `message` on `object`, unless the same object and reason were recorded within the
    /// interval. Never fails: a failure to record is logged at debug level.
    pub async fn warning(&self, object: &DynamicObject, reason: &str, message: &str) {
        let uid = object.metadata.uid.clone().unwrap_or_default();
        let key = if uid.is_empty() {
            // Without a uid (an object that never reached the server), namespace/name.
            format!(
                "{}/{}",
                object.metadata.namespace.as_deref().unwrap_or(""),
                object.metadata.name.as_deref().unwrap_or("")
            )
        } else {
            uid
        };
        let decision = kubewasm_core::sync::lock(&self.limiter).check(&key, reason, Instant::now());
        let Some(suppressed) = decision else {
            tracing::trace!(key, reason, "event suppressed by the rate limiter");
            return;
        };
        let event = build_event(object, reason, message, suppressed, &self.instance);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(
                error = %e,
                reason,
                object = object.metadata.name.as_deref().unwrap_or(""),
                namespace,
                "could not record event"
            );
        }
    }
}

/// Decides which (key, reason) pairs are recorded: at most one per interval, counting
/// the ones suppressed in between.
#[derive(Debug)]
pub struct RateLimiter {
    min_interval: Duration,
    seen: HashMap<(String, String), Seen>,
}

#[derive(Debug)]
struct Seen {
    /// Last recorded.
    last: Instant,
    /// Last checked, recorded or not: its age when the limiter is full.
    touched: Instant,
    suppressed: u32,
}

impl RateLimiter {
    /// A limiter allowing one record per (key, reason) per `min_interval`.
    pub fn new(min_interval: Duration) -> Self {
        RateLimiter {
            min_interval,
            seen: HashMap::new(),
        }
    }

    /// `Some(n)` when the pair may be recorded at `now`, `n` being the number of repeats
    /// suppressed since the last record; `None` when this one is suppressed.
    pub fn check(&mut self, key: &str, reason: &str, now: Instant) -> Option<u32> {
        let k = (key.to_string(), reason.to_string());
        if self.seen.len() >= MAX_KEYS && !self.seen.contains_key(&k) {
            self.evict(now);
        }
        if let Some(s) = self.seen.get_mut(&k) {
            s.touched = s.touched.max(now);
        }
        match self.seen.get_mut(&k) {
            Some(s) if now.duration_since(s.last) < self.min_interval => {
                s.suppressed = s.suppressed.saturating_add(1);
                None
            }
            Some(s) => {
                let n = s.suppressed;
                s.last = now;
                s.suppressed = 0;
                Some(n)
            }
            None => {
                self.seen.insert(
                    k,
                    Seen {
                        last: now,
                        touched: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

impl RateLimiter {
    /// Make room: forget the entries whose interval is over and that suppressed nothing
    /// (forgetting them changes no decision); if none is, the [`EVICT_BATCH`] checked
    /// longest ago. A
    /// flood of new keys (a plugin failing on thousands of objects) thus pushes out the
    /// quietest keys, never the ones it keeps hitting: those stay rate limited.
    fn evict(&mut self, now: Instant) {
        let interval = self.min_interval;
        self.seen
            .retain(|_, s| s.suppressed > 0 || now.duration_since(s.last) < interval);
        if self.seen.len() < MAX_KEYS {
            return;
        }
        let mut ages: Vec<Instant> = self.seen.values().map(|s| s.touched).collect();
        let (_, &mut cutoff, _) = ages.select_nth_unstable(EVICT_BATCH - 1);
        let mut budget = EVICT_BATCH;
        self.seen.retain(|_, s| {
            if budget > 0 && s.touched <= cutoff {
                budget -= 1;
                false
            } else {
                true
            }
        });
    }
}

/// The message with the suppression note, cut to [`MAX_MESSAGE_BYTES`].
fn event_message(message: &str, suppressed: u32) -> String {
    let suffix = if suppressed > 0 {
        format!(" ({suppressed} similar suppressed)")
    } else {
        String::new()
    };
    use kubewasm_core::excerpt::{NOTE_BYTES, excerpt};
    let room = MAX_MESSAGE_BYTES - suffix.len();
    let mut out = excerpt(message, room);
    if out.len() > room {
        // Cut: room for the note that says so.
        out = excerpt(message, room - NOTE_BYTES);
    }
    let mut out = out.into_owned();
    out.push_str(&suffix);
    out
}

fn build_event(
    object: &DynamicObject,
    reason: &str,
    message: &str,
    suppressed: u32,
    instance: &str,
) -> Event {
    let now = Timestamp::now();
    let name = object.metadata.name.clone().unwrap_or_default();
    // Events about cluster-scoped objects live in `default`, as client-go puts them.
    let namespace = object
        .metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    // client-go's naming: `<object>.<unix nanos in hex>`, kept under the 253-byte limit.
    let nanos = now.as_nanosecond();
    let mut cut = name.len().min(253 - 1 - 32);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = name[..cut].trim_end_matches(['.', '-']);
    let event_name = if prefix.is_empty() {
        format!("kubewasm.{nanos:x}")
    } else {
        format!("{prefix}.{nanos:x}")
    };
    let types = object.types.as_ref();
    Event {
        metadata: ObjectMeta {
            name: Some(event_name),
            namespace: Some(namespace),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: types.map(|t| t.api_version.clone()),
            kind: types.map(|t| t.kind.clone()),
            name: Some(name),
            namespace: object.metadata.namespace.clone(),
            uid: object.metadata.uid.clone(),
            resource_version: object.metadata.resource_version.clone(),
            ..Default::default()
        },
        reason: Some(reason.to_string()),
        message: Some(event_message(message, suppressed)),
        type_: Some("Warning".to_string()),
        source: Some(EventSource {
            component: Some(COMPONENT.to_string()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.to_string()),
        reporting_instance: Some(instance.to_string()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1 + suppressed.min(i32::MAX as u32 - 1) as i32),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_allows_one_per_interval_and_counts_the_rest() {
        let mut l = RateLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(l.check("uid-a", "PluginFailed", t0), Some(0));
        assert_eq!(
            l.check("uid-a", "PluginFailed", t0 + Duration::from_secs(1)),
            None
        );
        assert_eq!(
            l.check("uid-a", "PluginFailed", t0 + Duration::from_secs(9)),
            None
        );
        // Other reason, other object: independent.
        assert_eq!(l.check("uid-a", "IntentRefused", t0), Some(0));
        assert_eq!(l.check("uid-b", "PluginFailed", t0), Some(0));
        // After the interval: recorded, with the two suppressed ones counted.
        assert_eq!(
            l.check("uid-a", "PluginFailed", t0 + Duration::from_secs(10)),
            Some(2)
        );
        assert_eq!(
            l.check("uid-a", "PluginFailed", t0 + Duration::from_secs(11)),
            None
        );
        assert_eq!(
            l.check("uid-a", "PluginFailed", t0 + Duration::from_secs(25)),
            Some(1)
        );
        assert_eq!(
            l.check("uid-a", "PluginFailed", t0 + Duration::from_secs(40)),
            Some(0)
        );
    }

    #[test]
    fn limiter_forgets_quiet_keys_when_full() {
        let mut l = RateLimiter::new(Duration::from_millis(1));
        let t0 = Instant::now();
        for i in 0..(MAX_KEYS * 2) {
            assert_eq!(l.check(&format!("k{i}"), "R", t0), Some(0));
        }
        assert!(l.seen.len() <= MAX_KEYS);
    }

    /// Full of keys all within their interval: new keys push out the oldest, not every
    /// key. A key hit all along stays limited (it used to be forgotten with the rest at
    /// 4,096 keys, and its next failure recorded at once).
    #[test]
    fn a_full_limiter_evicts_the_oldest_keys_first() {
        let mut l = RateLimiter::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(l.check("hot", "R", at(0)), Some(0));
        for i in 0..MAX_KEYS - 1 {
            assert_eq!(l.check(&format!("old{i}"), "R", at(1 + i as u64)), Some(0));
        }
        assert_eq!(l.seen.len(), MAX_KEYS);
        // The hot key fails again: suppressed (and so not quiet).
        assert_eq!(l.check("hot", "R", at(5_000)), None);
        // A flood of new keys, well within the interval, while the hot key keeps failing.
        for i in 0..MAX_KEYS as u64 {
            assert_eq!(l.check(&format!("new{i}"), "R", at(6_000 + i)), Some(0));
            if i % 256 == 0 {
                assert_eq!(l.check("hot", "R", at(6_000 + i)), None);
            }
            assert!(l.seen.len() <= MAX_KEYS);
        }
        // Still limited, still counting (1 + 16 + 1 suppressed).
        assert_eq!(l.check("hot", "R", at(11_000)), None);
        assert_eq!(l.check("hot", "R", at(60_001)), Some(18));
        // The oldest quiet keys went; the newest stayed.
        assert!(!l.seen.contains_key(&("old0".to_string(), "R".to_string())));
        let newest = format!("new{}", MAX_KEYS - 1);
        assert_eq!(l.check(&newest, "R", at(11_000)), None);
    }

    #[test]
    fn messages_are_cut_at_1024_bytes_keeping_the_count() {
        assert_eq!(event_message("boom", 0), "boom");
        assert_eq!(event_message("boom", 3), "boom (3 similar suppressed)");
        let long = "é".repeat(1000); // 2000 bytes
        let m = event_message(&long, 0);
        assert!(m.len() <= MAX_MESSAGE_BYTES, "{}", m.len());
        assert!(m.ends_with("bytes truncated)"), "{m}");
        let m = event_message(&long, 7);
        assert!(m.len() <= MAX_MESSAGE_BYTES);
        assert!(
            m.ends_with("bytes truncated) (7 similar suppressed)"),
            "{m}"
        );
        assert_eq!(event_message("a\nb", 0), "a\\nb");
        let exact = "x".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(event_message(&exact, 0), exact);
    }

    #[test]
    fn event_refers_to_the_object() {
        let mut obj = DynamicObject::new(
            "site",
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("example.com", "v1", "ContentSite"),
                "contentsites",
            ),
        )
        .within("web");
        obj.metadata.uid = Some("u-1".into());
        let e = build_event(&obj, "PluginFailed", "boom", 2, "pod-0");
        assert_eq!(e.metadata.namespace.as_deref(), Some("web"));
        assert!(e.metadata.name.as_deref().unwrap().starts_with("site."));
        assert_eq!(e.involved_object.kind.as_deref(), Some("ContentSite"));
        assert_eq!(
            e.involved_object.api_version.as_deref(),
            Some("example.com/v1")
        );
        assert_eq!(e.involved_object.uid.as_deref(), Some("u-1"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.count, Some(3));
        assert_eq!(e.message.as_deref(), Some("boom (2 similar suppressed)"));
        assert_eq!(
            e.source.and_then(|s| s.component).as_deref(),
            Some(COMPONENT)
        );
    }

    #[test]
    fn the_plugins_own_message_is_never_copied() {
        let secret = "s3cr3t-value";
        let e = crate::Error::Call {
            plugin: "web".into(),
            kind: kubewasm_runtime::CallError::Plugin {
                message: format!("password is {secret}"),
                retry: false,
            },
        };
        let m = failure_message("web", &e);
        assert_eq!(
            m,
            "plugin web returned an error (not retried); its message is in the host's log"
        );
        assert!(!m.contains(secret));
        let trap = crate::Error::Call {
            plugin: "web".into(),
            kind: kubewasm_runtime::CallError::Trap("wasm backtrace: evil_symbol_text".into()),
        };
        assert_eq!(
            failure_message("web", &trap),
            "plugin web trapped; the host's log has the details"
        );
        let deadline = crate::Error::Call {
            plugin: "web".into(),
            kind: kubewasm_runtime::CallError::Deadline(Duration::from_millis(500)),
        };
        assert_eq!(
            failure_message("web", &deadline),
            "plugin web: call exceeded its deadline of 500ms"
        );
    }

    #[test]
    fn refusals_and_failed_writes_are_fixed_texts() {
        use kubewasm_core::admit::{AdmitError, Rejection};
        use kubewasm_core::intent::IntentError;
        let secret = "s3cr3t-value";
        // An intent refused for a name the plugin made of a Secret's value.
        let refused = crate::Error::rejected(
            "web",
            Rejection {
                index: 2,
                error: AdmitError::Invalid(IntentError::NotAnObject("object")),
            },
        );
        assert_eq!(
            failure_message("web", &refused),
            "plugin web: intent #2 is malformed; the host's log has the details"
        );
        // The API server's message quotes the body the plugin wrote.
        let api = crate::Error::Api {
            verb: "apply",
            target: format!("ConfigMap default/{secret}"),
            status: 422,
            reason: "Invalid".into(),
            message: format!("data.x: Invalid value: {secret}"),
            retry_after: None,
            field_conflict: false,
            uid_rejected: false,
        };
        let m = failure_message("web", &api);
        assert_eq!(
            m,
            "plugin web: apply failed: 422 Invalid; the host's log has the details"
        );
        let partial = crate::Error::Partial {
            plugin: "web".into(),
            trigger: "ConfigMap default/t".into(),
            applied: 1,
            total: 3,
            failed: format!("create ConfigMap default/{secret}"),
            source: Box::new(api),
        };
        let m = failure_message("web", &partial);
        assert_eq!(
            m,
            "plugin web: 1 of 3 intents applied, then intent #1 failed (apply failed: 422 Invalid); the host's log has the details"
        );
        assert!(!m.contains(secret));
    }
}
