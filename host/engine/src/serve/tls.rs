//! The metrics listener over HTTPS (`kubewasm run --metrics-secure`): with the pod's
//! serving certificate when one is given (`--metrics-cert-path DIR` holding
//! `--metrics-cert-name` and `--metrics-cert-key`, as kubebuilder's scaffold names them;
//! cert-manager's or a service CA's Secret mounted there), read again when its files change
//! so a rotated certificate is served without a restart; else a self-signed one, made at
//! start, which the scraper cannot verify (Prometheus: `insecureSkipVerify`).
//!
//! TLS is rustls (with ring, the provider the kube client and the embedded API server
//! already use) through tokio-rustls, serving the same axum router with hyper-util's
//! HTTP/1 and HTTP/2 connection builder: no TLS stack of its own, no OpenSSL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_util::sync::CancellationToken;

use crate::Error;

/// Where the metrics listener's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// Made at start, for `localhost`, the loopback addresses, the host name and the
    /// listening address.
    SelfSigned,
    /// A PEM certificate chain and its PEM private key (PKCS#8, PKCS#1 or SEC1), read
    /// again when they change.
    Files {
        /// The certificate chain, the server's first.
        cert: PathBuf,
        /// Its private key.
        key: PathBuf,
    },
}

/// How often the certificate files are looked at for a rotation.
const CERT_POLL: Duration = Duration::from_secs(10);
/// Longest a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn tls_error(context: impl Into<String>, reason: impl ToString) -> Error {
    Error::Tls {
        context: context.into(),
        reason: reason.to_string(),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificate served now, swapped when its files change.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(kubewasm_core::sync::read(&self.0).clone())
    }
}

/// The TLS configuration of the listener on `addr`, from `source`. Files are followed
/// until `cancel`.
pub(crate) fn server_config(
    source: &CertSource,
    addr: SocketAddr,
    cancel: &CancellationToken,
) -> Result<Arc<rustls::ServerConfig>, Error> {
    let key = match source {
        CertSource::SelfSigned => self_signed(addr)?,
        CertSource::Files { cert, key } => read_pair(cert, key)?,
    };
    let current = Arc::new(Current(RwLock::new(Arc::new(key))));
    if let CertSource::Files { cert, key } = source {
        tokio::spawn(follow(
            cert.clone(),
            key.clone(),
            current.clone(),
            cancel.clone(),
        ));
    }
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("the metrics listener's TLS versions", e))?
        .with_no_client_auth()
        .with_cert_resolver(current);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A self-signed certificate for whatever name the scraper uses on this pod.
fn self_signed(addr: SocketAddr) -> Result<CertifiedKey, Error> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        names.push(addr.ip().to_string());
    }
    if let Ok(h) = std::fs::read_to_string("/etc/hostname")
        && !h.trim().is_empty()
    {
        names.push(h.trim().to_string());
    }
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| tls_error("making the metrics listener's self-signed certificate", e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    CertifiedKey::from_der(vec![made.cert.der().clone()], key, &provider())
        .map_err(|e| tls_error("the metrics listener's self-signed certificate", e))
}

/// The certificate chain and key of the files, checked to belong together.
fn read_pair(cert: &PathBuf, key: &PathBuf) -> Result<CertifiedKey, Error> {
    let context = || format!("the metrics certificate {}", cert.display());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| tls_error(context(), e))?;
    if chain.is_empty() {
        return Err(tls_error(context(), "no PEM certificate in it"));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| tls_error(format!("the metrics key {}", key.display()), e))?;
    CertifiedKey::from_der(chain, private, &provider())
        .map_err(|e| tls_error(context(), format!("with key {}: {e}", key.display())))
}

fn modified(path: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Read the files again whenever either changes (a Secret volume's update swaps both);
/// a pair that does not load is logged and the certificate served stays.
async fn follow(cert: PathBuf, key: PathBuf, current: Arc<Current>, cancel: CancellationToken) {
    let mut seen = (modified(&cert), modified(&key));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(CERT_POLL) => {}
        }
        let now = (modified(&cert), modified(&key));
        if now == seen {
            continue;
        }
        match read_pair(&cert, &key) {
            Ok(pair) => {
                *kubewasm_core::sync::write(&current.0) = Arc::new(pair);
                seen = now;
                tracing::info!(cert = %cert.display(), "metrics listener: serving the renewed certificate");
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener: the certificate files changed but do not load; serving the previous certificate")
            }
        }
    }
}

/// Bind `addr` and serve `app` over TLS on it in the background until `cancel`.
pub(crate) async fn listen(
    addr: SocketAddr,
    app: Router,
    config: Arc<rustls::ServerConfig>,
    cancel: CancellationToken,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding the metrics endpoint on {addr}"),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::Io {
        context: "metrics endpoint address".into(),
        source,
    })?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                _ = cancel.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics endpoint: accept failed");
                        continue;
                    }
                },
            };
            tokio::spawn(connection(
                tcp,
                peer,
                acceptor.clone(),
                app.clone(),
                cancel.clone(),
            ));
        }
    });
    Ok(bound)
}

/// One connection: the handshake (bounded), then HTTP/1 or HTTP/2 until it ends or
/// `cancel`.
async fn connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    app: Router,
    cancel: CancellationToken,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "metrics endpoint: TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "metrics endpoint: TLS handshake timed out");
            return;
        }
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let served = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
    tokio::select! {
        r = served => if let Err(e) = r {
            tracing::debug!(%peer, error = %e, "metrics endpoint: connection ended with an error");
        },
        _ = cancel.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new certificate and key written to `cert` and `key`, dated `age` after now (a
    /// Secret volume's swap changes both); its DER.
    fn write_pair(cert: &PathBuf, key: &PathBuf, age: Duration) -> CertificateDer<'static> {
        let made = rcgen::generate_simple_self_signed(vec!["kubewasm".to_string()]).expect("cert");
        std::fs::write(cert, made.cert.pem()).expect("cert");
        std::fs::write(key, made.signing_key.serialize_pem()).expect("key");
        for p in [cert, key] {
            let f = std::fs::File::options().write(true).open(p).expect("open");
            f.set_modified(SystemTime::now() + age).expect("mtime");
        }
        made.cert.der().clone()
    }

    fn served(current: &Current) -> CertificateDer<'static> {
        kubewasm_core::sync::read(&current.0).cert[0].clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewed_certificate_is_served_once_its_files_change_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let first = write_pair(&cert, &key, Duration::ZERO);
        let current = Arc::new(Current(RwLock::new(Arc::new(
            read_pair(&cert, &key).expect("the first pair"),
        ))));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(follow(
            cert.clone(),
            key.clone(),
            current.clone(),
            cancel.clone(),
        ));
        tokio::time::sleep(CERT_POLL + Duration::from_millis(1)).await;
        assert_eq!(
            served(&current),
            first,
            "unchanged files: the same certificate"
        );
        let renewed = write_pair(&cert, &key, Duration::from_secs(60));
        tokio::time::sleep(CERT_POLL).await;
        assert_eq!(
            served(&current),
            renewed,
            "the renewed certificate is served"
        );
        // A half-written swap (a certificate without its key): the renewed one stays.
        std::fs::write(&cert, "not PEM").expect("cert");
        let f = std::fs::File::options()
            .write(true)
            .open(&cert)
            .expect("open");
        f.set_modified(SystemTime::now() + Duration::from_secs(120))
            .expect("mtime");
        tokio::time::sleep(CERT_POLL).await;
        assert_eq!(served(&current), renewed);
        cancel.cancel();
        task.await.expect("the follower ends");
    }

    #[test]
    fn a_self_signed_certificate_is_made_when_none_is_given() {
        let made = self_signed("10.0.0.7:9090".parse().expect("addr")).expect("self-signed");
        assert_eq!(made.cert.len(), 1);
        let der: &[u8] = made.cert[0].as_ref();
        // Its names include the listening address (as an IP SAN: 10.0.0.7's bytes).
        assert!(
            der.windows(4).any(|w| w == [10, 0, 0, 7]),
            "no SAN for the address"
        );
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused_naming_both_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = rcgen::generate_simple_self_signed(vec!["a".to_string()]).expect("a");
        let b = rcgen::generate_simple_self_signed(vec!["b".to_string()]).expect("b");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, a.cert.pem()).expect("cert");
        std::fs::write(&key, a.signing_key.serialize_pem()).expect("key");
        assert!(read_pair(&cert, &key).is_ok());
        std::fs::write(&key, b.signing_key.serialize_pem()).expect("key");
        let e = read_pair(&cert, &key).expect_err("keys differ").to_string();
        assert!(e.contains("tls.crt") && e.contains("tls.key"), "{e}");
        std::fs::write(&cert, "not PEM").expect("cert");
        let e = read_pair(&cert, &key)
            .expect_err("no certificate")
            .to_string();
        assert!(e.contains("no PEM certificate"), "{e}");
    }
}
