//! In-cluster configuration: how a pod reaches its API server.
//!
//! Like kube's `Config::incluster_env`, but with the service-account directory as a
//! parameter (kube hard-codes [`DEFAULT_DIR`]), so tests and unusual mounts can point it
//! elsewhere. The inputs are those client-go reads:
//!
//! - `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` (IPv6 hosts are bracketed);
//! - `token` in the directory: the bearer token, re-read by the client as it rotates;
//! - `ca.crt`: the PEM bundle the server certificate must chain to;
//! - `namespace` (optional): the default namespace, `default` when absent.

use std::path::{Path, PathBuf};

use crate::Error;

/// Where Kubernetes mounts a pod's service-account credentials.
pub const DEFAULT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

const HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
const PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";

/// Why the in-cluster configuration is unusable (files that cannot be read are
/// [`Error::Io`]).
#[derive(Debug, thiserror::Error)]
pub enum InClusterError {
    /// An environment variable the pod should have is not set.
    #[error("environment variable {0} is not set (not running in a pod?)")]
    EnvUnset(&'static str),
    /// An environment variable is set but empty.
    #[error("environment variable {0} is empty")]
    EnvEmpty(&'static str),
    /// `KUBERNETES_SERVICE_PORT` is not a port number.
    #[error("KUBERNETES_SERVICE_PORT={value:?} is not a port number")]
    Port {
        /// What the variable holds.
        value: String,
        /// Why it does not parse.
        #[source]
        source: std::num::ParseIntError,
    },
    /// The server URL built from the host and port does not parse.
    #[error("server URL {url:?} is invalid: {source}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The token file holds only whitespace.
    #[error("token file {} is empty", .0.display())]
    EmptyToken(PathBuf),
    /// The CA bundle is not valid PEM.
    #[error("{}: {source}", .path.display())]
    CaPem {
        /// The CA file.
        path: PathBuf,
        /// The PEM parser's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The CA bundle holds no certificate.
    #[error("{} holds no PEM CERTIFICATE block", .0.display())]
    NoCertificate(PathBuf),
}

/// Builds a kube client configuration from the in-cluster environment variables and the
/// service-account files in `dir`.
///
/// Errors name the missing environment variable or file. The token is given to the
/// client as a file, so a rotated (projected, bound) token is picked up without restart.
pub fn config_from_dir(dir: &Path) -> Result<kube::Config, Error> {
    config_with_env(dir, |name| std::env::var(name).ok())
}

/// [`config_from_dir`] with the environment as a lookup function.
fn config_with_env(
    dir: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<kube::Config, Error> {
    let host = env(&lookup, HOST_ENV)?;
    let port = env(&lookup, PORT_ENV)?;
    let url = server_url(&host, &port)?;
    let cluster_url = url
        .parse()
        .map_err(|source| InClusterError::Url { url, source })?;

    let token_path = dir.join("token");
    let token = read(&token_path)?;
    if token.trim().is_empty() {
        return Err(InClusterError::EmptyToken(token_path).into());
    }

    let ca_path = dir.join("ca.crt");
    let ca = read(&ca_path)?;
    let root_cert = match pem_certificates(&ca) {
        Ok(certs) => certs,
        Err(source) => {
            return Err(InClusterError::CaPem {
                path: ca_path,
                source,
            }
            .into());
        }
    };
    if root_cert.is_empty() {
        return Err(InClusterError::NoCertificate(ca_path).into());
    }

    let ns_path = dir.join("namespace");
    let namespace = match std::fs::read_to_string(&ns_path) {
        Ok(ns) if !ns.trim().is_empty() => ns.trim().to_string(),
        Ok(_) => "default".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "default".to_string(),
        Err(source) => {
            return Err(Error::Io {
                context: format!("in-cluster configuration: read {}", ns_path.display()),
                source,
            });
        }
    };

    let mut config = kube::Config::new(cluster_url);
    config.default_namespace = namespace;
    config.root_cert = Some(root_cert);
    config.root_cert_file = Some(ca_path);
    config.auth_info.token_file = Some(token_path.to_string_lossy().into_owned());
    Ok(config)
}

fn env(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<String, InClusterError> {
    match lookup(name) {
        Some(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        Some(_) => Err(InClusterError::EnvEmpty(name)),
        None => Err(InClusterError::EnvUnset(name)),
    }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        context: format!("in-cluster configuration: read {}", path.display()),
        source,
    })
}

/// `https://HOST:PORT`, bracketing IPv6 literals and leaving out `:443`.
fn server_url(host: &str, port: &str) -> Result<String, InClusterError> {
    let port: u16 = port.parse().map_err(|source| InClusterError::Port {
        value: port.to_string(),
        source,
    })?;
    let host = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
        Ok(ip) => ip.to_string(),
        Err(_) => host.to_string(),
    };
    Ok(if port == 443 {
        format!("https://{host}")
    } else {
        format!("https://{host}:{port}")
    })
}

/// The DER contents of every `CERTIFICATE` block in a PEM text; other blocks are skipped.
/// Parsed by rustls-pki-types (already in the tree through rustls; the maintained
/// successor of rustls-pemfile).
fn pem_certificates(text: &str) -> Result<Vec<Vec<u8>>, rustls_pki_types::pem::Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(text.as_bytes())
        .map(|c| c.map(|c| c.to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_keeps_only_certificates() {
        let pem = "junk\n-----BEGIN CERTIFICATE-----\nZm9v\n-----END CERTIFICATE-----\n\
                   -----BEGIN PRIVATE KEY-----\nYmFy\n-----END PRIVATE KEY-----\n\
                   -----BEGIN CERTIFICATE-----\nYmF6\nYmF6\n-----END CERTIFICATE-----\n";
        assert_eq!(
            pem_certificates(pem).unwrap(),
            vec![b"foo".to_vec(), b"bazbaz".to_vec()]
        );
        assert!(pem_certificates("-----BEGIN CERTIFICATE-----\nZm9v\n").is_err());
    }

    #[test]
    fn urls_bracket_ipv6_and_drop_443() {
        assert_eq!(
            server_url("10.0.0.1", "443").unwrap(),
            "https://10.0.0.1".to_string()
        );
        assert_eq!(
            server_url("fd00::1", "6443").unwrap(),
            "https://[fd00::1]:6443".to_string()
        );
        assert_eq!(
            server_url("kubernetes.default.svc", "8443").unwrap(),
            "https://kubernetes.default.svc:8443".to_string()
        );
        assert!(server_url("h", "http").is_err());
    }

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nZm9v\n-----END CERTIFICATE-----\n";

    fn env_of(host: Option<&str>, port: Option<&str>) -> impl Fn(&str) -> Option<String> {
        let host = host.map(String::from);
        let port = port.map(String::from);
        move |name| match name {
            HOST_ENV => host.clone(),
            PORT_ENV => port.clone(),
            _ => None,
        }
    }

    fn err(dir: &Path, host: Option<&str>, port: Option<&str>) -> String {
        config_with_env(dir, env_of(host, port))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(err(d, None, Some("443")).contains(HOST_ENV));
        assert!(err(d, Some("10.0.0.1"), None).contains(PORT_ENV));
        assert!(err(d, Some("10.0.0.1"), Some("")).contains(PORT_ENV));
        assert!(err(d, Some("10.0.0.1"), Some("x")).contains(PORT_ENV));
        let e = err(d, Some("10.0.0.1"), Some("443"));
        assert!(e.contains(&d.join("token").display().to_string()), "{e}");
        std::fs::write(d.join("token"), "  \n").unwrap();
        assert!(err(d, Some("10.0.0.1"), Some("443")).contains("is empty"));
        std::fs::write(d.join("token"), "abc\n").unwrap();
        let e = err(d, Some("10.0.0.1"), Some("443"));
        assert!(e.contains(&d.join("ca.crt").display().to_string()), "{e}");
        std::fs::write(d.join("ca.crt"), "not pem").unwrap();
        let e = err(d, Some("10.0.0.1"), Some("443"));
        assert!(e.contains("no PEM CERTIFICATE"), "{e}");
    }

    #[test]
    fn builds_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("token"), "abc\n").unwrap();
        std::fs::write(d.join("ca.crt"), CERT).unwrap();
        let c = config_with_env(d, env_of(Some("fd00::1"), Some("6443"))).unwrap();
        assert_eq!(c.cluster_url.to_string(), "https://[fd00::1]:6443/");
        assert_eq!(c.default_namespace, "default");
        assert_eq!(c.root_cert, Some(vec![b"foo".to_vec()]));
        assert_eq!(
            c.auth_info.token_file.as_deref(),
            Some(d.join("token").to_str().unwrap())
        );
        std::fs::write(d.join("namespace"), "kubewasm-system\n").unwrap();
        let c = config_with_env(d, env_of(Some("10.96.0.1"), Some("443"))).unwrap();
        assert_eq!(c.default_namespace, "kubewasm-system");
        assert_eq!(c.cluster_url.to_string(), "https://10.96.0.1/");
    }
}
