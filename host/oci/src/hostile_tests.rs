//! Pulls against hostile registries: HTTP servers written here, on loopback (127.0.0.1
//! and 127.0.0.2 are different hosts). Each server counts the connections it accepted,
//! the requests it read and the body bytes it managed to send, so a test asserts what a
//! pull read (bounded) and where it went (nowhere it may not).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::artifact::{OCI_MANIFEST, WASM_LAYER_MEDIA_TYPE, sha256_digest};
use crate::{Client, Credentials, Reference, RegistryConfig, Store};

/// What a server answers to one request.
#[derive(Clone)]
enum Reply {
    /// A complete response.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Headers, then body bytes forever (no length: read until the peer hangs up).
    Endless {
        status: u16,
        headers: Vec<(String, String)>,
    },
}

fn full(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    Reply::Full {
        status,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.to_vec(),
    }
}

fn endless(status: u16, headers: &[(&str, &str)]) -> Reply {
    Reply::Endless {
        status,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

type Handler = Arc<dyn Fn(&str, &str) -> Reply + Send + Sync>;

struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// A plain-HTTP server on `ip` answering `METHOD PATH` (query included) with `handler`.
    async fn start(
        ip: &str,
        handler: impl Fn(&str, &str) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Server::start_with(ip, None, handler).await
    }

    /// The same over TLS, with a certificate for 127.0.0.1 that `tls`'s CA signed.
    async fn start_tls(
        ip: &str,
        tls: &TestTls,
        handler: impl Fn(&str, &str) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Server::start_with(ip, Some(tls.acceptor.clone()), handler).await
    }

    async fn start_with(
        ip: &str,
        tls: Option<tokio_rustls::TlsAcceptor>,
        handler: impl Fn(&str, &str) -> Reply + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let handler: Handler = Arc::new(handler);
        let connections = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (c, s, r) = (connections.clone(), sent.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (handler, sent, requests) = (handler.clone(), s.clone(), r.clone());
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve(sock, handler, sent, requests).await,
                        Some(acceptor) => {
                            if let Ok(sock) = acceptor.accept(sock).await {
                                serve(sock, handler, sent, requests).await;
                            }
                        }
                    }
                });
            }
        });
        Server {
            addr,
            connections,
            sent,
            requests,
        }
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
}

/// One request on `sock`, answered by `handler`; the connection is then closed.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut sock: S,
    handler: Handler,
    sent: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<String>>>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        // A TLS ClientHello to a plain-HTTP server: hang up.
        if head.first() == Some(&0x16) {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut first = text.lines().next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    requests
        .lock()
        .expect("lock")
        .push(format!("{method} {path}"));
    let (status, headers, body) = match handler(&method, &path) {
        Reply::Full {
            status,
            headers,
            body,
        } => (status, headers, Some(body)),
        Reply::Endless { status, headers } => (status, headers, None),
    };
    let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
    for (k, v) in &headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = &body {
        out.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    out.push_str("\r\n");
    if sock.write_all(out.as_bytes()).await.is_err() {
        return;
    }
    match body {
        Some(b) => {
            if method != "HEAD" && sock.write_all(&b).await.is_ok() {
                sent.fetch_add(b.len() as u64, Ordering::SeqCst);
            }
        }
        None => {
            let chunk = vec![b'a'; 64 << 10];
            while sock.write_all(&chunk).await.is_ok() {
                sent.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
    }
    let _ = sock.shutdown().await;
}

/// A CA (its PEM file, for `RegistryConfig::ca_files`) and a TLS acceptor serving a
/// certificate for 127.0.0.1 it signed.
struct TestTls {
    _dir: tempfile::TempDir,
    ca_file: std::path::PathBuf,
    acceptor: tokio_rustls::TlsAcceptor,
}

fn test_tls() -> TestTls {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("server key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("server params")
        .signed_by(&key, &issuer)
        .expect("server certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).expect("ca.pem");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .expect("server config");
    TestTls {
        _dir: dir,
        ca_file,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    }
}

/// What a pull may have made a server send, at most: the 4 MiB manifest cap plus what the
/// loopback socket buffers take before the server's writes block. An unbounded read
/// never ends against an endless body.
const BOUND: u64 = 64 << 20;

/// Fails (rather than hangs) a pull that does not stop reading.
async fn guarded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), f)
        .await
        .expect("the pull stopped reading")
}

fn client(config: RegistryConfig) -> Client {
    Client::new(&config).expect("client")
}

fn insecure(hosts: &[&Server]) -> RegistryConfig {
    RegistryConfig {
        insecure: hosts.iter().map(|s| s.host()).collect(),
        ..RegistryConfig::default()
    }
}

fn reference(server: &Server, repo: &str, digest: &str) -> Reference {
    format!("oci://{}/{repo}@{digest}", server.host())
        .parse()
        .expect("reference")
}

const ANY_DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// A Wasm artifact: its manifest and its layer (a component header, then `tail`).
fn artifact(tail: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut layer = b"\0asm\x0d\x00\x01\x00".to_vec();
    layer.extend_from_slice(tail);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                   "digest": sha256_digest(b"{}"), "size": 2},
        "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE,
                    "digest": sha256_digest(&layer), "size": layer.len()}],
    }))
    .expect("json");
    (manifest, layer)
}

/// A registry serving one artifact in `repo`; anything else is a 404.
async fn registry(ip: &str, repo: &'static str, tail: &[u8]) -> (Server, String, Vec<u8>) {
    let (manifest, layer) = artifact(tail);
    let digest = sha256_digest(&manifest);
    let (m, l, d) = (manifest.clone(), layer.clone(), digest.clone());
    let server = Server::start(ip, move |_, path| {
        if path == format!("/v2/{repo}/manifests/{d}") {
            full(200, &[("Content-Type", OCI_MANIFEST)], &m)
        } else if path == format!("/v2/{repo}/blobs/{}", sha256_digest(&l)) {
            full(200, &[], &l)
        } else {
            full(
                404,
                &[],
                br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no"}]}"#,
            )
        }
    })
    .await;
    (server, digest, layer)
}

#[tokio::test]
async fn an_endless_manifest_is_cut_at_the_cap() {
    let server = Server::start("127.0.0.1", |_, _| {
        endless(200, &[("Content-Type", OCI_MANIFEST)])
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = guarded(client(insecure(&[&server])).pull_wasm(
        &reference(&server, "p", ANY_DIGEST),
        &Credentials::Anonymous,
        &store,
        1 << 20,
    ))
    .await
    .expect_err("an endless manifest");
    assert_eq!(err.reason(), "NotAWasmArtifact", "{err}");
    assert!(
        err.to_string().contains("a manifest over 4194304 bytes"),
        "{err}"
    );
    let sent = server.sent();
    assert!((4 << 20..BOUND).contains(&sent), "sent {sent} bytes");
}

#[tokio::test]
async fn an_endless_error_body_is_read_64_kib_and_excerpted() {
    let server = Server::start("127.0.0.1", |_, _| endless(404, &[])).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let c = client(insecure(&[&server]));
    let err = guarded(c.pull_wasm(
        &reference(&server, "p", ANY_DIGEST),
        &Credentials::Anonymous,
        &store,
        1 << 20,
    ))
    .await
    .expect_err("404");
    assert_eq!(err.reason(), "ManifestNotFound", "{err}");
    assert!(server.sent() < BOUND, "sent {} bytes", server.sent());

    // A 500 with an endless body: the status and a short excerpt, nothing more.
    let server = Server::start("127.0.0.1", |_, _| endless(500, &[])).await;
    let c = client(insecure(&[&server]));
    let err = guarded(c.pull_wasm(
        &reference(&server, "p", ANY_DIGEST),
        &Credentials::Anonymous,
        &store,
        1 << 20,
    ))
    .await
    .expect_err("500");
    assert_eq!(err.reason(), "RegistryUnavailable", "{err}");
    let text = err.to_string();
    assert!(text.contains("HTTP 500"), "{text}");
    assert!(text.len() < 400, "{} characters: {text}", text.len());
    assert!(server.sent() < BOUND, "sent {} bytes", server.sent());
}

#[tokio::test]
async fn error_text_from_a_registry_is_short_and_printable() {
    let message = format!("evil\n\x1b[2J{}", "x".repeat(10_000));
    let body = serde_json::to_vec(&serde_json::json!({
        "errors": [{"code": "DENIED", "message": message}]
    }))
    .expect("json");
    let server = Server::start("127.0.0.1", move |_, _| full(400, &[], &body)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = client(insecure(&[&server]))
        .pull_wasm(
            &reference(&server, "p", ANY_DIGEST),
            &Credentials::Anonymous,
            &store,
            1 << 20,
        )
        .await
        .expect_err("denied");
    assert_eq!(err.reason(), "Unauthorized", "{err}");
    let text = err.to_string();
    assert!(text.contains("DENIED: evil"), "{text}");
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(text.len() < 400, "{} characters", text.len());
}

#[tokio::test]
async fn an_endless_token_body_is_cut_at_64_kib() {
    // The realm is on the registry itself (plain HTTP: the registry is insecure).
    let listener_ip = "127.0.0.1";
    let slot: Arc<Mutex<String>> = Arc::default();
    let realm = slot.clone();
    let server = Server::start(listener_ip, move |_, path| {
        if path.starts_with("/token") {
            endless(200, &[("Content-Type", "application/json")])
        } else {
            let challenge = format!(
                "Bearer realm=\"http://{}/token\",service=\"reg\"",
                realm.lock().expect("lock")
            );
            full(401, &[("WWW-Authenticate", &challenge)], b"")
        }
    })
    .await;
    *slot.lock().expect("lock") = server.host();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = guarded(client(insecure(&[&server])).pull_wasm(
        &reference(&server, "team/p", ANY_DIGEST),
        &Credentials::Anonymous,
        &store,
        1 << 20,
    ))
    .await
    .expect_err("an endless token");
    assert_eq!(err.reason(), "PullFailed", "{err}");
    assert!(
        err.to_string()
            .contains("a token response over 65536 bytes"),
        "{err}"
    );
    assert!(server.sent() < BOUND, "sent {} bytes", server.sent());
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /token?service=reg&scope=repository%3Ateam%2Fp%3Apull")),
        "{requests:?}"
    );
}

#[tokio::test]
async fn a_token_realm_on_a_host_not_allowed_is_not_fetched() {
    let realm_server = Server::start("127.0.0.2", |_, _| full(200, &[], br#"{"token":"t"}"#)).await;
    let challenge = format!("Bearer realm=\"http://{}/token\"", realm_server.host());
    let server = Server::start("127.0.0.1", move |_, _| {
        full(401, &[("WWW-Authenticate", &challenge)], b"")
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = client(insecure(&[&server]))
        .pull_wasm(
            &reference(&server, "p", ANY_DIGEST),
            &Credentials::Anonymous,
            &store,
            1 << 20,
        )
        .await
        .expect_err("realm elsewhere");
    assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
    assert!(err.to_string().contains("token realm"), "{err}");
    assert_eq!(realm_server.connections(), 0);
}

#[tokio::test]
async fn a_plain_http_realm_only_for_an_insecure_registry() {
    let realm_server = Server::start("127.0.0.1", |_, _| full(200, &[], br#"{"token":"t"}"#)).await;
    // The registry is HTTPS (not --insecure-registry), named so that loopback is allowed;
    // its 401 names a plain-HTTP realm.
    let registry = format!("127.0.0.1:{}", realm_server.addr.port());
    let http = crate::http::Http::new(
        Arc::new(crate::policy::Policy::new(std::slice::from_ref(&registry), &[]).expect("policy")),
        &[],
    )
    .expect("http");
    let reference: Reference = format!("oci://{registry}/p@{ANY_DIGEST}")
        .parse()
        .expect("reference");
    let session =
        crate::http::Session::new(&http, &reference, &Credentials::Anonymous).expect("session");
    let err = session
        .token(&format!("http://{registry}/token"), None)
        .await
        .expect_err("plain HTTP realm");
    assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
    assert!(err.to_string().contains("plain HTTP"), "{err}");
    assert_eq!(realm_server.connections(), 0, "the realm was not fetched");

    // The same realm for a registry named by --insecure-registry is fetched.
    let http = crate::http::Http::new(
        Arc::new(crate::policy::Policy::new(&[], std::slice::from_ref(&registry)).expect("policy")),
        &[],
    )
    .expect("http");
    let session =
        crate::http::Session::new(&http, &reference, &Credentials::Anonymous).expect("session");
    let token = session
        .token(&format!("http://{registry}/token"), None)
        .await
        .expect("token");
    assert_eq!(token.to_str().expect("text"), "Bearer t");
    assert_eq!(realm_server.connections(), 1);
}

#[tokio::test]
async fn a_redirect_to_another_host_is_refused() {
    let other = Server::start("127.0.0.2", |_, _| endless(200, &[])).await;
    let target = format!("http://{}/elsewhere", other.host());
    let server = Server::start("127.0.0.1", move |_, _| {
        full(307, &[("Location", &target)], b"")
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    // Both hosts named, so only the redirect rule refuses: a manifest never leaves its host.
    let c = client(insecure(&[&server, &other]));
    let err = c
        .pull_wasm(
            &reference(&server, "p", ANY_DIGEST),
            &Credentials::Anonymous,
            &store,
            1 << 20,
        )
        .await
        .expect_err("cross-host redirect");
    assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
    assert!(
        err.to_string().contains("redirect to another host"),
        "{err}"
    );
    assert_eq!(other.connections(), 0);

    // A blob may go to a CDN, but never over plain HTTP.
    let (manifest, layer) = artifact(b"blob");
    let digest = sha256_digest(&manifest);
    let target = format!("http://{}/cdn", other.host());
    let server = Server::start("127.0.0.1", move |_, path| {
        if path.contains("/manifests/") {
            full(200, &[("Content-Type", OCI_MANIFEST)], &manifest)
        } else {
            full(307, &[("Location", &target)], b"")
        }
    })
    .await;
    let c = client(insecure(&[&server, &other]));
    let err = c
        .pull_wasm(
            &reference(&server, "p", &digest),
            &Credentials::Anonymous,
            &store,
            1 << 20,
        )
        .await
        .expect_err("blob redirect over HTTP");
    assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
    assert!(err.to_string().contains("plain HTTP"), "{err}");
    assert_eq!(other.connections(), 0);
    let _ = layer;
}

#[tokio::test]
async fn a_loopback_registry_only_when_named() {
    let (server, digest, layer) = registry("127.0.0.1", "p", b"named").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let r = reference(&server, "p", &digest);

    // Not named: refused before any connection, whatever the allowlist.
    for config in [
        RegistryConfig::default(),
        RegistryConfig {
            allowed: vec!["*.example.com".into()],
            ..RegistryConfig::default()
        },
        RegistryConfig {
            allowed: vec![format!("127.0.0.1:{}", server.addr.port() + 1)],
            ..RegistryConfig::default()
        },
    ] {
        let err = client(config)
            .pull_wasm(&r, &Credentials::Anonymous, &store, 1 << 20)
            .await
            .expect_err("loopback not named");
        assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
        assert!(err.to_string().contains(&server.host()), "{err}");
    }
    assert_eq!(server.connections(), 0);

    // Named by --allowed-registry: reached (over HTTPS, which this server does not speak).
    let err = client(RegistryConfig {
        allowed: vec![server.host()],
        ..RegistryConfig::default()
    })
    .pull_wasm(&r, &Credentials::Anonymous, &store, 1 << 20)
    .await
    .expect_err("not TLS");
    assert_eq!(err.reason(), "RegistryUnavailable", "{err}");
    assert!(server.connections() >= 1);

    // Named by --insecure-registry: pulled.
    let pulled = client(insecure(&[&server]))
        .pull_wasm(&r, &Credentials::Anonymous, &store, 1 << 20)
        .await
        .expect("pull");
    assert_eq!(pulled.bytes, layer);
}

#[tokio::test]
async fn the_resolver_refuses_private_addresses_of_names_not_named() {
    use reqwest::dns::Resolve as _;
    let open = crate::policy::GuardedResolver {
        policy: Arc::new(crate::policy::Policy::new(&[], &[]).expect("policy")),
    };
    let err = match open.resolve("localhost".parse().expect("name")).await {
        Ok(_) => panic!("localhost resolved"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("loopback"), "{err}");
    let named = crate::policy::GuardedResolver {
        policy: Arc::new(
            crate::policy::Policy::new(&["localhost:5000".into()], &[]).expect("policy"),
        ),
    };
    let addrs: Vec<_> = named
        .resolve("localhost".parse().expect("name"))
        .await
        .expect("named")
        .collect();
    assert!(addrs.iter().all(|a| a.ip().is_loopback()) && !addrs.is_empty());
}

#[tokio::test]
async fn require_digest_refuses_tags_before_any_request() {
    let (server, _, _) = registry("127.0.0.1", "p", b"x").await;
    let tagged: Reference = format!("oci://{}/p:v1", server.host())
        .parse()
        .expect("reference");
    let c = client(RegistryConfig {
        require_digest: true,
        ..insecure(&[&server])
    });
    let err = c
        .resolve(&tagged, &Credentials::Anonymous)
        .await
        .expect_err("a tag");
    assert_eq!(err.reason(), "DigestRequired", "{err}");
    assert!(err.to_string().contains("--require-digest"), "{err}");
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn the_store_is_keyed_by_repository() {
    let (server, digest, layer) = registry("127.0.0.1", "team-a/p", b"team a's").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let c = client(insecure(&[&server]));
    let a = reference(&server, "team-a/p", &digest);
    let pulled = c
        .pull_wasm(&a, &Credentials::Anonymous, &store, 1 << 20)
        .await
        .expect("pull a");
    assert!(!pulled.from_store);
    assert_eq!(pulled.bytes, layer);
    let again = c
        .pull_wasm(&a, &Credentials::Anonymous, &store, 1 << 20)
        .await
        .expect("again");
    assert!(again.from_store);
    assert_eq!(again.bytes, layer);

    // The same digest in another repository: asked of the registry, which has none.
    let b = reference(&server, "team-b/p", &digest);
    let before = server.requests().len();
    let err = c
        .pull_wasm(&b, &Credentials::Anonymous, &store, 1 << 20)
        .await
        .expect_err("not served from a's store");
    assert_eq!(err.reason(), "ManifestNotFound", "{err}");
    assert_eq!(
        server.requests()[before..],
        [format!("GET /v2/team-b/p/manifests/{digest}")]
    );

    // A stored blob changed on disk (same size): detected as it is read, pulled again.
    let mut tampered = layer.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    std::fs::write(&pulled.path, &tampered).expect("tamper");
    let repaired = c
        .pull_wasm(&a, &Credentials::Anonymous, &store, 1 << 20)
        .await
        .expect("pulled again");
    assert!(!repaired.from_store);
    assert_eq!(repaired.bytes, layer);
    assert_eq!(std::fs::read(&pulled.path).expect("stored"), layer);
}

#[tokio::test]
async fn a_blob_longer_than_declared_is_cut() {
    let (manifest, layer) = artifact(b"declared");
    let digest = sha256_digest(&manifest);
    let server = Server::start("127.0.0.1", move |_, path| {
        if path.contains("/manifests/") {
            full(200, &[("Content-Type", OCI_MANIFEST)], &manifest)
        } else {
            endless(200, &[])
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = guarded(client(insecure(&[&server])).pull_wasm(
        &reference(&server, "p", &digest),
        &Credentials::Anonymous,
        &store,
        1 << 20,
    ))
    .await
    .expect_err("endless blob");
    assert_eq!(err.reason(), "DigestMismatch", "{err}");
    assert!(server.sent() < BOUND, "sent {} bytes", server.sent());
    assert!(layer.len() < 64);
}

#[tokio::test]
async fn no_redirect_from_https_to_http_even_for_blobs() {
    let tls = test_tls();
    let plain = Server::start("127.0.0.1", |_, _| full(200, &[], b"{}")).await;
    let (manifest, _) = artifact(b"tls");
    let digest = sha256_digest(&manifest);
    let target = format!("http://{}/x", plain.host());
    let registry = Server::start_tls("127.0.0.1", &tls, move |_, path| {
        if path.contains("/manifests/") && path.contains("sha256:1111") {
            full(307, &[("Location", &target)], b"")
        } else if path.contains("/manifests/") {
            full(200, &[("Content-Type", OCI_MANIFEST)], &manifest)
        } else {
            full(307, &[("Location", &target)], b"")
        }
    })
    .await;
    // Both named, the plain one as insecure: only the HTTPS → HTTP rule refuses.
    let c = client(RegistryConfig {
        ca_files: vec![tls.ca_file.clone()],
        allowed: vec![registry.host()],
        insecure: vec![plain.host()],
        ..RegistryConfig::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    for r in [
        reference(&registry, "p", ANY_DIGEST),
        reference(&registry, "p", &digest),
    ] {
        let err = c
            .pull_wasm(&r, &Credentials::Anonymous, &store, 1 << 20)
            .await
            .expect_err("redirect to plain HTTP");
        assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
        assert!(err.to_string().contains("from HTTPS to HTTP"), "{err}");
    }
    assert_eq!(plain.connections(), 0);
    assert!(
        registry
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /v2/p/blobs/")),
        "the blob request was made: {:?}",
        registry.requests()
    );
}

#[tokio::test]
async fn an_https_registry_naming_a_plain_http_realm_is_refused() {
    let tls = test_tls();
    let realm = Server::start("127.0.0.1", |_, _| full(200, &[], br#"{"token":"t"}"#)).await;
    let challenge = format!("Bearer realm=\"http://{}/token\"", realm.host());
    let registry = Server::start_tls("127.0.0.1", &tls, move |_, _| {
        full(401, &[("WWW-Authenticate", &challenge)], b"")
    })
    .await;
    let c = client(RegistryConfig {
        ca_files: vec![tls.ca_file.clone()],
        allowed: vec![registry.host(), realm.host()],
        ..RegistryConfig::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = c
        .pull_wasm(
            &reference(&registry, "p", ANY_DIGEST),
            &Credentials::Basic {
                username: "u".into(),
                password: "secret".into(),
            },
            &store,
            1 << 20,
        )
        .await
        .expect_err("plain-HTTP realm");
    assert_eq!(err.reason(), "RegistryNotAllowed", "{err}");
    assert!(err.to_string().contains("plain HTTP"), "{err}");
    assert_eq!(
        realm.connections(),
        0,
        "the credentials never went out in clear"
    );
}
