//! Who may read the metrics listener with `--metrics-secure`: every request's bearer token
//! is reviewed by the API server (an `authentication.k8s.io/v1` TokenReview), and its user
//! is asked about (an `authorization.k8s.io/v1` SubjectAccessReview of the non-resource URL:
//! verb `get`, path `/metrics`), as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization` does: no or an unknown token is 401, a user
//! without the RBAC is 403, a review that cannot be asked is 500 and logged (never an open
//! door).
//!
//! Answers are kept briefly ([`Cache`], bounded): Prometheus scraping every 15 s asks the
//! API server once a minute per token, not twice per scrape. A denial or an unknown token
//! is kept for less, so a grant is noticed soon; an error is not kept at all. A revoked
//! binding or token keeps working for at most [`ALLOWED_TTL`].
//!
//! RBAC of the host: `create` on `tokenreviews.authentication.k8s.io` and
//! `subjectaccessreviews.authorization.k8s.io` (`kubewasm rbac --metrics-secure`).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

use kubewasm_core::sync::lock;

use crate::serve::access::bounded;

/// How long an allowed user (and an authenticated token) is kept.
pub(crate) const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a denied user (and an unknown token) is kept.
pub(crate) const DENIED_TTL: Duration = Duration::from_secs(10);
/// Answers kept at most, per cache: beyond it, the answer expiring first makes way.
const CAPACITY: usize = 1024;

/// The user a token authenticates as, as the TokenReview says: what the
/// SubjectAccessReview asks about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    /// `extra`, sorted by key (so equal users hash alike).
    pub extra: Vec<(String, Vec<String>)>,
}

/// What happens to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Allowed,
    /// No bearer token, or one the API server does not know: 401.
    Unauthenticated,
    /// The user may not: 403.
    Forbidden {
        user: String,
    },
    /// A review could not be asked: 500, and the reason logged.
    Failed {
        reason: String,
    },
}

/// The two questions asked of the API server; [`ApiReviewer`] asks them, the tests count
/// them.
pub(crate) trait Reviewer: Send + Sync {
    /// Whom `token` authenticates as; None: nobody.
    fn authenticate(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<Option<User>, String>> + Send;
    /// Whether `user` may `verb` the non-resource URL `path`.
    fn authorize(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> impl Future<Output = Result<bool, String>> + Send;
}

/// Answers kept until their time is up, at most [`CAPACITY`].
#[derive(Debug)]
pub(crate) struct Cache<K, V> {
    entries: HashMap<K, (V, Instant)>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> Cache<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Cache {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// The answer for `key`, if kept and not expired at `now`.
    pub(crate) fn get(&mut self, key: &K, now: Instant) -> Option<V> {
        match self.entries.get(key) {
            Some((v, until)) if *until > now => Some(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keep `value` for `key` until `now + ttl`: full, the expired answers go, then the
    /// one that expires first.
    pub(crate) fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until)| *until > now);
            if self.entries.len() >= self.capacity {
                let first = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone());
                if let Some(k) = first {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The filter in front of the metrics listener: reviews, with their answers kept.
pub(crate) struct Gate<R> {
    reviewer: R,
    /// By the token's SHA-256 (the token itself is not kept): its user, or None.
    tokens: Mutex<Cache<[u8; 32], Option<User>>>,
    /// By user, verb and path: allowed or not.
    access: Mutex<Cache<(User, String, String), bool>>,
}

impl<R: Reviewer> Gate<R> {
    pub(crate) fn new(reviewer: R) -> Self {
        Gate {
            reviewer,
            tokens: Mutex::new(Cache::new(CAPACITY)),
            access: Mutex::new(Cache::new(CAPACITY)),
        }
    }

    /// May the bearer of `token` `verb` `path`?
    pub(crate) async fn check(&self, token: Option<&str>, verb: &str, path: &str) -> Decision {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Decision::Unauthenticated;
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let known = lock(&self.tokens).get(&key, Instant::now());
        let user = match known {
            Some(user) => user,
            None => match self.reviewer.authenticate(token).await {
                Ok(user) => {
                    let ttl = if user.is_some() {
                        ALLOWED_TTL
                    } else {
                        DENIED_TTL
                    };
                    lock(&self.tokens).insert(key, user.clone(), ttl, Instant::now());
                    user
                }
                Err(e) => {
                    return Decision::Failed {
                        reason: format!("TokenReview: {e}"),
                    };
                }
            },
        };
        let Some(user) = user else {
            return Decision::Unauthenticated;
        };
        let key = (user, verb.to_string(), path.to_string());
        let known = lock(&self.access).get(&key, Instant::now());
        let allowed = match known {
            Some(allowed) => allowed,
            None => match self.reviewer.authorize(&key.0, verb, path).await {
                Ok(allowed) => {
                    let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
                    lock(&self.access).insert(key.clone(), allowed, ttl, Instant::now());
                    allowed
                }
                Err(e) => {
                    return Decision::Failed {
                        reason: format!("SubjectAccessReview: {e}"),
                    };
                }
            },
        };
        if allowed {
            Decision::Allowed
        } else {
            Decision::Forbidden { user: key.0.name }
        }
    }
}

/// The reviews asked of the API server, as the host's ServiceAccount, each within
/// [`crate::serve::access::REVIEW_TIMEOUT`].
pub(crate) struct ApiReviewer(pub kube::Client);

impl Reviewer for ApiReviewer {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, String> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.0.clone());
        let answer = bounded(api.create(&PostParams::default(), &review)).await?;
        let Some(status) = answer.status else {
            return Err("the API server's answer has no status".into());
        };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let info = status.user.unwrap_or_default();
        let Some(name) = info.username.filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let mut extra: Vec<(String, Vec<String>)> =
            info.extra.unwrap_or_default().into_iter().collect();
        extra.sort();
        Ok(Some(User {
            name,
            uid: info.uid.filter(|u| !u.is_empty()),
            groups: info.groups.unwrap_or_default(),
            extra,
        }))
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.iter().cloned().collect()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.0.clone());
        let answer = bounded(api.create(&PostParams::default(), &review)).await?;
        Ok(answer
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}

/// The verb of a request to a non-resource URL: its method in lower case, as
/// controller-runtime's filter and kube-apiserver name it (`GET /metrics`: `get`).
pub(crate) fn verb(method: &http::Method) -> String {
    method.as_str().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn an_answer_is_kept_until_its_time_is_up() {
        let mut c: Cache<&str, bool> = Cache::new(4);
        let t0 = Instant::now();
        c.insert("a", true, Duration::from_secs(60), t0);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(59)), Some(true));
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(60)), None);
        assert_eq!(c.len(), 0, "an expired answer is dropped when looked up");
        assert_eq!(c.get(&"b", t0), None);
    }

    #[test]
    fn a_full_cache_drops_expired_answers_then_the_first_to_expire() {
        let mut c: Cache<u32, u32> = Cache::new(3);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        c.insert(1, 1, s(10), t0);
        c.insert(2, 2, s(60), t0);
        c.insert(3, 3, s(30), t0);
        // Full, nothing expired: the one expiring first (1) goes.
        c.insert(4, 4, s(60), t0);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&1, t0), None);
        assert_eq!(c.get(&3, t0), Some(3));
        // Full again, 3 expired at t0+40: it goes, the others stay.
        c.insert(5, 5, s(60), t0 + s(40));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&3, t0 + s(40)), None);
        for k in [2, 4, 5] {
            assert_eq!(c.get(&k, t0 + s(40)), Some(k), "{k}");
        }
        // Replacing a kept key never evicts another.
        c.insert(2, 20, s(60), t0 + s(40));
        assert_eq!(c.get(&2, t0 + s(40)), Some(20));
        assert_eq!(c.len(), 3);
    }

    /// Answers from fixed tables, counting the questions.
    #[derive(Default)]
    struct Fake {
        tokens: HashMap<String, User>,
        allowed: Vec<(String, String)>,
        fail: bool,
        authentications: AtomicUsize,
        authorizations: AtomicUsize,
    }

    impl Reviewer for Fake {
        async fn authenticate(&self, token: &str) -> Result<Option<User>, String> {
            self.authentications.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return Err("connection refused".into());
            }
            Ok(self.tokens.get(token).cloned())
        }
        async fn authorize(&self, user: &User, _verb: &str, path: &str) -> Result<bool, String> {
            self.authorizations.fetch_add(1, Ordering::SeqCst);
            Ok(self
                .allowed
                .iter()
                .any(|(u, p)| *u == user.name && p == path))
        }
    }

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }
    }

    fn fake() -> Fake {
        Fake {
            tokens: [("prom", user("prometheus")), ("jane", user("jane"))]
                .into_iter()
                .map(|(t, u)| (t.to_string(), u))
                .collect(),
            allowed: vec![("prometheus".into(), "/metrics".into())],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn each_token_and_each_users_path_is_asked_once_while_kept() {
        let gate = Gate::new(fake());
        for _ in 0..3 {
            assert_eq!(
                gate.check(Some("prom"), "get", "/metrics").await,
                Decision::Allowed
            );
        }
        let counts = |g: &Gate<Fake>| {
            (
                g.reviewer.authentications.load(Ordering::SeqCst),
                g.reviewer.authorizations.load(Ordering::SeqCst),
            )
        };
        assert_eq!(
            counts(&gate),
            (1, 1),
            "three scrapes, one review of each kind"
        );
        // Another path of the same user: its own question, the token's answer kept.
        assert_eq!(
            gate.check(Some("prom"), "get", "/status").await,
            Decision::Forbidden {
                user: "prometheus".into()
            }
        );
        assert_eq!(counts(&gate), (1, 2));
        assert_eq!(
            gate.check(Some("prom"), "get", "/status").await,
            Decision::Forbidden {
                user: "prometheus".into()
            },
            "a denial is kept too"
        );
        assert_eq!(counts(&gate), (1, 2));
        // Unknown tokens and no token: 401; an unknown token is asked once while kept.
        assert_eq!(
            gate.check(None, "get", "/metrics").await,
            Decision::Unauthenticated
        );
        assert_eq!(
            gate.check(Some(""), "get", "/metrics").await,
            Decision::Unauthenticated
        );
        for _ in 0..2 {
            assert_eq!(
                gate.check(Some("forged"), "get", "/metrics").await,
                Decision::Unauthenticated
            );
        }
        assert_eq!(counts(&gate), (2, 2));
        assert_eq!(
            gate.check(Some("jane"), "get", "/metrics").await,
            Decision::Forbidden {
                user: "jane".into()
            }
        );
    }

    #[tokio::test]
    async fn a_review_that_cannot_be_asked_fails_closed_and_is_not_kept() {
        let gate = Gate::new(Fake {
            fail: true,
            ..fake()
        });
        for _ in 0..2 {
            match gate.check(Some("prom"), "get", "/metrics").await {
                Decision::Failed { reason } => {
                    assert!(
                        reason.contains("TokenReview: connection refused"),
                        "{reason}"
                    )
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            gate.reviewer.authentications.load(Ordering::SeqCst),
            2,
            "an error is asked again"
        );
    }
}
