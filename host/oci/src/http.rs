//! The registry calls a pull makes (manifest, blob, token), over reqwest, each body read
//! with a bound, redirects and addresses checked by the operator's [`Policy`].
//!
//! `oci-client` (kept for `push`, an operator's own command) reads manifest, error and
//! token bodies whole, follows reqwest's default redirects anywhere and fetches a token
//! realm as given; its HTTP client cannot be replaced. Pulls, which a `Plugin` author
//! points anywhere, therefore go through these few calls instead.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode, Url};

use crate::policy::{GuardedResolver, Policy, Refused, host_port};
use crate::{Credentials, Error, Reference};

/// Largest error or token body read; what is past it is never read.
pub(crate) const MAX_SMALL_BODY: usize = 64 << 10;
/// Longest excerpt of a registry's text put into an error (and so into a status).
const EXCERPT_CHARS: usize = 160;
/// Redirects followed at most, per request.
const MAX_REDIRECTS: usize = 5;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two reads of one response: a registry that stalls mid-download fails the pull.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const USER_AGENT: &str = concat!("kubewasm/", env!("CARGO_PKG_VERSION"));

/// The HTTP clients of pulls: one that never leaves the registry's host, one for blobs,
/// which may be redirected to another allowed HTTPS host (a CDN).
#[derive(Debug, Clone)]
pub(crate) struct Http {
    policy: Arc<Policy>,
    same_host: reqwest::Client,
    blobs: reqwest::Client,
}

/// A redirect refused by the policy (found again in the error's causes).
#[derive(Debug)]
struct RedirectRefused(String);

impl std::fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedirectRefused {}

impl Http {
    pub(crate) fn new(policy: Arc<Policy>, pem_files: &[Vec<u8>]) -> Result<Http, String> {
        let build = |cross_host: bool| -> Result<reqwest::Client, String> {
            let mut certs = Vec::new();
            for pem in pem_files {
                certs
                    .extend(reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())?);
            }
            let redirect_policy = policy.clone();
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .read_timeout(READ_TIMEOUT)
                .user_agent(USER_AGENT)
                .tls_certs_merge(certs)
                // Through a proxy, the addresses connected to are the proxy's: the checks
                // below would be on the wrong ones.
                .no_proxy()
                .dns_resolver(Arc::new(GuardedResolver {
                    policy: policy.clone(),
                }))
                .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() > MAX_REDIRECTS {
                        return attempt.error(RedirectRefused(format!(
                            "more than {MAX_REDIRECTS} redirects"
                        )));
                    }
                    let Some(from) = attempt.previous().last() else {
                        return attempt.follow();
                    };
                    match redirect_policy.check_redirect(from, attempt.url(), cross_host) {
                        Ok(()) => attempt.follow(),
                        Err(why) => attempt.error(RedirectRefused(why)),
                    }
                }))
                .build()
                .map_err(|e| chain(&e))
        };
        Ok(Http {
            same_host: build(false)?,
            blobs: build(true)?,
            policy,
        })
    }
}

/// One operation on one repository: its base URL and the authorization found for it.
pub(crate) struct Session<'a> {
    http: &'a Http,
    reference: &'a Reference,
    creds: &'a Credentials,
    base: Url,
    authorization: Option<HeaderValue>,
}

/// What a request is for: decides the redirect rule and how a 404 reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Manifest,
    Blob,
}

impl<'a> Session<'a> {
    /// A session for `reference`'s repository; the registry is checked against the
    /// policy first (no connection is made to one that is not allowed).
    pub(crate) fn new(
        http: &'a Http,
        reference: &'a Reference,
        creds: &'a Credentials,
    ) -> Result<Session<'a>, Error> {
        let registry = reference.registry();
        let scheme = if http.policy.is_insecure(registry) {
            "http"
        } else {
            "https"
        };
        // Docker Hub's name for its API endpoint, as the Docker CLI maps it.
        let endpoint = match registry {
            "docker.io" => "index.docker.io",
            other => other,
        };
        let base = Url::parse(&format!("{scheme}://{endpoint}/v2/")).map_err(|e| {
            Error::InvalidReference {
                reference: reference.to_string(),
                reason: format!("the registry does not make a URL: {e}"),
            }
        })?;
        http.policy
            .check(registry, &base)
            .map_err(|reason| not_allowed(reference, reason))?;
        Ok(Session {
            http,
            reference,
            creds,
            base,
            authorization: None,
        })
    }

    /// The reference this session is for.
    pub(crate) fn reference(&self) -> &Reference {
        self.reference
    }

    /// `METHOD /v2/REPO/KIND/ID`, authenticating once when the registry asks; a
    /// response that is not 2xx is an error (its body read at most 64 KiB, excerpted).
    pub(crate) async fn request(
        &mut self,
        method: Method,
        target: Target,
        id: &str,
        accept: &[&str],
    ) -> Result<Response, Error> {
        let kind = match target {
            Target::Manifest => "manifests",
            Target::Blob => "blobs",
        };
        let url = self
            .base
            .join(&format!("{}/{kind}/{id}", self.reference.repository()))
            .map_err(|e| self.registry_error(format!("building the URL: {e}")))?;
        let mut authenticated = self.authorization.is_some();
        loop {
            let client = match target {
                Target::Blob => &self.http.blobs,
                Target::Manifest => &self.http.same_host,
            };
            let mut req = client.request(method.clone(), url.clone());
            if !accept.is_empty() {
                req = req.header(ACCEPT, accept.join(", "));
            }
            if let Some(a) = &self.authorization {
                req = req.header(AUTHORIZATION, a.clone());
            }
            let resp = req.send().await.map_err(|e| self.transport(&e))?;
            if resp.status() == StatusCode::UNAUTHORIZED && !authenticated {
                let challenge = resp
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                // The body is not wanted: dropping it closes the connection.
                drop(resp);
                self.authorization = Some(self.authenticate(challenge.as_deref()).await?);
                authenticated = true;
                continue;
            }
            if resp.status().is_success() {
                return Ok(resp);
            }
            return Err(self.status_error(resp, target).await);
        }
    }

    /// The Authorization header for a 401's challenge: Basic with the credentials, or a
    /// Bearer token from the challenge's realm.
    async fn authenticate(&self, challenge: Option<&str>) -> Result<HeaderValue, Error> {
        let unauthorized = |reason: String| Error::Unauthorized {
            registry: self.reference.registry().into(),
            reference: self.reference.to_string(),
            reason,
        };
        let challenge = challenge.unwrap_or("");
        let parsed = http_auth::parse_challenges(challenge).map_err(|_| {
            unauthorized(format!(
                "authentication required (HTTP 401) with an unreadable challenge {:?}",
                excerpt(challenge.as_bytes())
            ))
        })?;
        let param = |c: &http_auth::ChallengeRef<'_>, name: &str| {
            c.params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_unescaped())
        };
        if let Some(bearer) = parsed
            .iter()
            .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        {
            let realm = param(bearer, "realm")
                .ok_or_else(|| unauthorized("a Bearer challenge without a realm".into()))?;
            return self.token(&realm, param(bearer, "service")).await;
        }
        if parsed
            .iter()
            .any(|c| c.scheme.eq_ignore_ascii_case("basic"))
        {
            return match basic(self.creds) {
                Some(v) => Ok(v),
                None => Err(unauthorized(
                    "authentication required (HTTP 401): no credentials for this registry".into(),
                )),
            };
        }
        Err(unauthorized(
            "authentication required (HTTP 401): check the credentials".into(),
        ))
    }

    /// A pull token from `realm`, which must be HTTPS (plain HTTP only for a registry
    /// named by `--insecure-registry`) and on the registry's host or one the policy
    /// allows; its body is read at most 64 KiB.
    pub(crate) async fn token(
        &self,
        realm: &str,
        service: Option<String>,
    ) -> Result<HeaderValue, Error> {
        let registry = self.reference.registry();
        let mut url = Url::parse(realm).map_err(|_| {
            self.registry_error(format!(
                "an unusable token realm {:?}",
                excerpt(realm.as_bytes())
            ))
        })?;
        match url.scheme() {
            "https" => {}
            "http" if self.http.policy.is_insecure(registry) => {}
            "http" => {
                return Err(not_allowed(
                    self.reference,
                    format!(
                        "token realm {} is plain HTTP: refused for a registry not named by --insecure-registry",
                        host_port(&url)
                    ),
                ));
            }
            other => {
                return Err(not_allowed(
                    self.reference,
                    format!("token realm of scheme {other:?} refused"),
                ));
            }
        }
        let same_host = url.host() == self.base.host()
            && url.port_or_known_default() == self.base.port_or_known_default();
        if !same_host {
            self.http
                .policy
                .check(&host_port(&url), &url)
                .map_err(|why| not_allowed(self.reference, format!("token realm: {why}")))?;
        }
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = &service {
                q.append_pair("service", s);
            }
            q.append_pair(
                "scope",
                &format!("repository:{}:pull", self.reference.repository()),
            );
        }
        let mut req = self.http.same_host.get(url);
        if let Some(b) = basic(self.creds) {
            req = req.header(AUTHORIZATION, b);
        }
        let mut resp = req.send().await.map_err(|e| self.transport(&e))?;
        let status = resp.status();
        let body = read_bounded(&mut resp, MAX_SMALL_BODY).await;
        if !status.is_success() {
            let said = body.map(|b| excerpt(&b)).unwrap_or_default();
            let reason = format!(
                "the token service answered HTTP {}{}",
                status.as_u16(),
                said_suffix(&said)
            );
            return Err(match status.as_u16() {
                401 | 403 => Error::Unauthorized {
                    registry: registry.into(),
                    reference: self.reference.to_string(),
                    reason,
                },
                429 | 500..=599 => self.unreachable(reason),
                _ => self.registry_error(reason),
            });
        }
        let body = body.map_err(|e| match e {
            BodyError::TooLarge => {
                self.registry_error(format!("a token response over {MAX_SMALL_BODY} bytes"))
            }
            BodyError::Transport(e) => self.transport(&e),
        })?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body)
            .map_err(|_| self.registry_error("a token response that is not JSON".into()))?;
        let token = token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| self.registry_error("a token response without a token".into()))?;
        HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| self.registry_error("a token that is not a header value".into()))
    }

    /// The error for a response that is not 2xx, from its status and at most 64 KiB of
    /// its body (an OCI error envelope's codes, or an excerpt).
    async fn status_error(&self, mut resp: Response, target: Target) -> Error {
        let status = resp.status().as_u16();
        let body = read_bounded(&mut resp, MAX_SMALL_BODY)
            .await
            .unwrap_or_default();
        let envelope = serde_json::from_slice::<Envelope>(&body).ok();
        let codes: Vec<String> = envelope
            .as_ref()
            .map(|e| {
                e.errors
                    .iter()
                    .filter_map(|e| e.code.clone())
                    .map(|c| excerpt(c.as_bytes()))
                    .take(4)
                    .collect()
            })
            .unwrap_or_default();
        let said = match &envelope {
            Some(e) => e
                .errors
                .iter()
                .take(4)
                .map(|e| {
                    format!(
                        "{}: {}",
                        excerpt(e.code.as_deref().unwrap_or("").as_bytes()),
                        excerpt(e.message.as_deref().unwrap_or("").as_bytes())
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
            None => excerpt(&body),
        };
        let said = excerpt(said.as_bytes());
        let has = |names: &[&str]| codes.iter().any(|c| names.contains(&c.as_str()));
        let reason = format!("HTTP {status}{}", said_suffix(&said));
        if status == 404
            || has(&[
                "MANIFEST_UNKNOWN",
                "BLOB_UNKNOWN",
                "NAME_UNKNOWN",
                "NOT_FOUND",
            ])
        {
            return match target {
                Target::Manifest => Error::NotFound {
                    reference: self.reference.to_string(),
                },
                Target::Blob => {
                    self.registry_error(format!("a layer the manifest names: {reason}"))
                }
            };
        }
        if matches!(status, 401 | 403) || has(&["UNAUTHORIZED", "DENIED"]) {
            return Error::Unauthorized {
                registry: self.reference.registry().into(),
                reference: self.reference.to_string(),
                reason,
            };
        }
        if matches!(status, 429 | 500..=599) || has(&["TOOMANYREQUESTS"]) {
            return self.unreachable(reason);
        }
        self.registry_error(reason)
    }

    /// The error for a request that got no response.
    pub(crate) fn transport(&self, e: &reqwest::Error) -> Error {
        if let Some(why) = find::<RedirectRefused>(e) {
            return not_allowed(self.reference, why.0.clone());
        }
        if let Some(why) = find::<Refused>(e) {
            return not_allowed(self.reference, why.0.clone());
        }
        let registry = self.reference.registry();
        let mut reason = chain(e);
        if is_tls_failure(e) && !self.http.policy.is_insecure(registry) {
            reason.push_str(&format!(
                " (TLS failed: a registry served over plain HTTP must be listed as insecure, \
                 --insecure-registry {registry}; one whose certificate a private CA signed \
                 needs that CA, --registry-ca FILE)"
            ));
        }
        self.unreachable(reason)
    }

    fn unreachable(&self, reason: String) -> Error {
        Error::Unreachable {
            registry: self.reference.registry().into(),
            reference: self.reference.to_string(),
            reason,
        }
    }

    pub(crate) fn registry_error(&self, reason: String) -> Error {
        Error::Registry {
            registry: self.reference.registry().into(),
            reference: self.reference.to_string(),
            reason,
        }
    }
}

fn said_suffix(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    }
}

pub(crate) fn not_allowed(reference: &Reference, reason: String) -> Error {
    Error::NotAllowed {
        registry: reference.registry().into(),
        reference: reference.to_string(),
        reason,
    }
}

/// `Authorization: Basic …` for credentials, if there are any.
fn basic(creds: &Credentials) -> Option<HeaderValue> {
    match creds {
        Credentials::Anonymous => None,
        Credentials::Basic { username, password } => {
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            let mut v = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
            v.set_sensitive(true);
            Some(v)
        }
    }
}

#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(default)]
    errors: Vec<EnvelopeError>,
}

#[derive(serde::Deserialize)]
struct EnvelopeError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Why a body was not read to its end.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Over the bound (by its Content-Length, or once the bytes read passed it).
    TooLarge,
    /// The connection failed.
    Transport(reqwest::Error),
}

/// A response body of at most `max` bytes: refused by its Content-Length up front, else
/// read chunk by chunk and cut as soon as it passes `max` (never buffered past it).
pub(crate) async fn read_bounded(resp: &mut Response, max: usize) -> Result<Vec<u8>, BodyError> {
    let declared = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut out = Vec::with_capacity(declared.map_or(0, |n| n as usize).min(max));
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transport)? {
        if out.len() + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A short, printable excerpt of a registry's text for an error message: control
/// characters become spaces, runs of spaces one, at most 160 characters.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4 * EXCERPT_CHARS)]);
    let mut out = String::new();
    let mut count = 0;
    for c in text.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        if count == EXCERPT_CHARS {
            out.push('…');
            break;
        }
        out.push(c);
        count += 1;
    }
    out.trim_end().to_string()
}

/// The first cause of type `T` in `e`'s chain (io::Errors looked into).
fn find<'e, T: std::error::Error + 'static>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e T> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        let mut inner: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(i) = inner {
            if let Some(t) = i.downcast_ref::<T>() {
                return Some(t);
            }
            inner = i
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .map(|e| e as &(dyn std::error::Error + 'static));
        }
        cur = err.source();
    }
    None
}

/// Whether a TLS handshake failed somewhere in `e`'s causes.
pub(crate) fn is_tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    find::<rustls::Error>(e).is_some()
}

/// An error and its causes, `: `-joined (top-level messages alone rarely say what
/// happened).
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_printable() {
        assert_eq!(
            excerpt(b"  not\tfound\r\n\x1b[31mred  "),
            "not found [31mred"
        );
        let long = excerpt(&vec![b'a'; 100_000]);
        assert_eq!(long.chars().count(), EXCERPT_CHARS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(excerpt(&[0xff, b'x']), "\u{fffd}x");
    }
}
