//! Push, resolve and pull over the OCI distribution protocol.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt as _;
use oci_client::RegistryOperation;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

use crate::artifact::{self, ACCEPTED_MANIFESTS, MAX_MANIFEST_BYTES, sha256_digest};
use crate::{Credentials, Error, Reference, Store};

/// How registries are reached.
#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    /// Registries (`HOST:PORT`, exactly as in references) reached over plain HTTP, as
    /// Docker and containerd spell `--insecure-registry`. Every other one is HTTPS.
    pub insecure: Vec<String>,
    /// Extra PEM CA certificates to trust (besides the system's) for HTTPS registries.
    pub ca_files: Vec<PathBuf>,
}

/// A component pulled into a [`Store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The manifest's digest (`sha256:…`), what the reference is pinned to.
    pub manifest_digest: String,
    /// The wasm layer's digest.
    pub layer_digest: String,
    /// The wasm layer's size in bytes.
    pub size: u64,
    /// The verified component in the store (`DIR/blobs/sha256/<hex>`).
    pub path: PathBuf,
    /// Served from the store without a registry call.
    pub from_store: bool,
}

/// A registry client: push, resolve and pull Wasm artifacts.
///
/// Cheap to keep for the life of a process. Each operation authenticates with the
/// credentials it is given (nothing carries over from one call to the next, so rotated
/// pull secrets and different secrets for one registry just work).
#[derive(Debug, Clone)]
pub struct Client {
    insecure: Vec<String>,
    certificates: Vec<Certificate>,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two reads of one response: a registry that stalls mid-download fails the pull.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const USER_AGENT: &str = concat!("kubewasm/", env!("CARGO_PKG_VERSION"));

impl Client {
    /// A client for `config`: its CA files are read and checked now.
    ///
    /// TLS is rustls with the ring provider, installed as the process default unless one
    /// is already (the HTTP client uses the process default).
    pub fn new(config: &RegistryConfig) -> Result<Client, Error> {
        // Err means another provider is installed already: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut certificates = Vec::new();
        for path in &config.ca_files {
            let data = std::fs::read(path).map_err(|e| Error::Config {
                reason: format!("reading CA file {}: {e}", path.display()),
            })?;
            let count = CertificateDer::pem_slice_iter(&data)
                .map(|c| {
                    c.map_err(|e| Error::Config {
                        reason: format!("CA file {}: {e}", path.display()),
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?
                .len();
            if count == 0 {
                return Err(Error::Config {
                    reason: format!("CA file {} has no PEM certificate", path.display()),
                });
            }
            certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        let client = Client {
            insecure: config.insecure.clone(),
            certificates,
        };
        // Surface a configuration the HTTP client refuses now, not at the first pull.
        client.oci()?;
        Ok(client)
    }

    /// A protocol client for one operation.
    fn oci(&self) -> Result<oci_client::Client, Error> {
        let config = ClientConfig {
            protocol: if self.insecure.is_empty() {
                ClientProtocol::Https
            } else {
                ClientProtocol::HttpsExcept(self.insecure.clone())
            },
            extra_root_certificates: self.certificates.clone(),
            // An index is refused with its name (see `artifact::wasm_layer`), never
            // resolved to some platform's manifest.
            platform_resolver: None,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: USER_AGENT,
            ..ClientConfig::default()
        };
        oci_client::Client::try_from(config).map_err(|e| Error::Config {
            reason: format!("building the HTTP client: {}", chain(&e)),
        })
    }

    /// Push component `wasm` as a Wasm OCI artifact to `to` (which must name a tag) and
    /// return the pinned reference, `oci://HOST[:PORT]/REPO@sha256:…` (the manifest's
    /// digest). The artifact is reproducible: the same bytes give the same digest.
    pub async fn push_wasm(
        &self,
        wasm: &[u8],
        to: &Reference,
        creds: &Credentials,
    ) -> Result<Reference, Error> {
        if to.tag().is_none() || to.digest().is_some() {
            return Err(Error::InvalidReference {
                reference: to.to_string(),
                reason:
                    "push needs a tag and no digest (REPO:TAG); the digest is what push answers"
                        .into(),
            });
        }
        // The layer's file name for `oras pull`: the repository's last component.
        let name = to.repository().rsplit('/').next().unwrap_or("plugin");
        let artifact =
            artifact::build(wasm, &format!("{name}.wasm")).map_err(|why| Error::NotWasm {
                reference: to.to_string(),
                why,
            })?;
        let fail = |e| self.error(to, e);
        let oci = self.oci()?;
        let image = to.to_oci();
        // Also stores the credentials for the calls below.
        oci.auth(&image, &creds.to_oci(), RegistryOperation::Push)
            .await
            .map_err(fail)?;
        oci.push_blob(&image, wasm.to_vec(), &artifact.layer_digest)
            .await
            .map_err(fail)?;
        oci.push_blob(&image, artifact.config, &artifact.config_digest)
            .await
            .map_err(fail)?;
        oci.push_manifest_raw(
            &image,
            artifact.manifest,
            reqwest::header::HeaderValue::from_static(artifact::OCI_MANIFEST),
        )
        .await
        .map_err(fail)?;
        let pinned = to.pinned(&artifact.manifest_digest);
        tracing::debug!(reference = %to, pinned = %pinned, size = wasm.len(), "pushed a Wasm artifact");
        Ok(pinned)
    }

    /// The manifest digest (`sha256:…`) that `reference` (a tag, or a digest to check
    /// for) names in the registry now.
    pub async fn resolve(
        &self,
        reference: &Reference,
        creds: &Credentials,
    ) -> Result<String, Error> {
        let oci = self.oci()?;
        let digest = oci
            .fetch_manifest_digest(&reference.to_oci(), &creds.to_oci())
            .await
            .map_err(|e| self.error(reference, e))?;
        crate::reference::check_digest(&digest).map_err(|why| Error::Registry {
            registry: reference.registry().into(),
            reference: reference.to_string(),
            reason: format!("the registry answered an unusable {why}"),
        })
    }

    /// Pull pinned `reference`'s component into `store` and return where it is.
    ///
    /// A manifest already in the store whose blob is there (and still hashes to its
    /// digest) is served from disk with no network call. Otherwise the manifest is fetched
    /// by digest and checked against it; it must have exactly one wasm layer, whose
    /// declared size must not exceed `max_bytes` (checked before any layer byte is
    /// fetched); the layer is streamed to a temporary file in the store while hashed,
    /// checked against its digest and size and for a component header, then renamed into
    /// place, and the manifest after it. Nothing half-written is ever visible.
    pub async fn pull_wasm(
        &self,
        reference: &Reference,
        creds: &Credentials,
        store: &Store,
        max_bytes: u64,
    ) -> Result<Pulled, Error> {
        self.pull_inner(reference, creds, store, max_bytes)
            .await
            .map_err(|e| match e {
                // The store's errors say which file; this says for which reference.
                Error::Io { what, path, source } => Error::Io {
                    what: format!("{reference}: {what}"),
                    path,
                    source,
                },
                other => other,
            })
    }

    async fn pull_inner(
        &self,
        reference: &Reference,
        creds: &Credentials,
        store: &Store,
        max_bytes: u64,
    ) -> Result<Pulled, Error> {
        let Some(digest) = reference.digest() else {
            return Err(Error::InvalidReference {
                reference: reference.to_string(),
                reason: "pulling needs a digest (REPO@sha256:HEX): resolve the tag first".into(),
            });
        };
        if let Some(pulled) = from_store(reference, digest, store, max_bytes).await? {
            tracing::debug!(reference = %reference, path = %pulled.path.display(), "served from the OCI store");
            return Ok(pulled);
        }

        let fail = |e| self.error(reference, e);
        let oci = self.oci()?;
        let image = reference.to_oci();
        let (manifest, _) = oci
            .pull_manifest_raw(&image, &creds.to_oci(), ACCEPTED_MANIFESTS)
            .await
            .map_err(fail)?;
        if manifest.len() > MAX_MANIFEST_BYTES {
            return Err(Error::NotWasm {
                reference: reference.to_string(),
                why: format!(
                    "a manifest of {} bytes (at most {MAX_MANIFEST_BYTES})",
                    manifest.len()
                ),
            });
        }
        let actual = sha256_digest(&manifest);
        if actual != digest {
            return Err(Error::DigestMismatch {
                reference: reference.to_string(),
                what: "the manifest".into(),
                expected: digest.into(),
                actual,
            });
        }
        let layer = artifact::wasm_layer(&manifest).map_err(|why| Error::NotWasm {
            reference: reference.to_string(),
            why,
        })?;
        let size = declared_size(&layer);
        if size > max_bytes {
            return Err(Error::TooLarge {
                reference: reference.to_string(),
                size,
                max: max_bytes,
            });
        }
        let path = store.blob_path(&layer.digest);
        // Another manifest may have brought the same layer.
        if !verify_stored_blob(store, &path, &layer.digest, size).await? {
            self.download(&oci, reference, &layer.digest, size, store, &path)
                .await?;
        }
        store.put_manifest(digest, &manifest)?;
        tracing::debug!(reference = %reference, size, path = %path.display(), "pulled a Wasm artifact");
        Ok(Pulled {
            manifest_digest: digest.into(),
            layer_digest: layer.digest,
            size,
            path,
            from_store: false,
        })
    }

    /// Stream layer `digest` of `size` bytes into a temporary file, verify it, and rename
    /// it to `dest`.
    async fn download(
        &self,
        oci: &oci_client::Client,
        reference: &Reference,
        digest: &str,
        size: u64,
        store: &Store,
        dest: &Path,
    ) -> Result<(), Error> {
        let mismatch = |what: String, expected: String, actual: String| Error::DigestMismatch {
            reference: reference.to_string(),
            what,
            expected,
            actual,
        };
        let layer_what = || format!("layer {digest}");
        // A bare digest: no foreign URLs from a descriptor are ever followed.
        let mut stream = oci
            .pull_blob_stream(&reference.to_oci(), digest)
            .await
            .map_err(|e| self.error(reference, e))?;
        if let Some(len) = stream.content_length
            && len != size
        {
            return Err(mismatch(
                format!("the size of layer {digest}"),
                format!("{size} bytes (the manifest)"),
                format!("{len} bytes (Content-Length)"),
            ));
        }
        let temp = store.temp_file()?;
        let std_file = temp
            .as_file()
            .try_clone()
            .map_err(Error::io("opening", temp.path()))?;
        let mut file = tokio::fs::File::from_std(std_file);
        let mut hasher = Sha256::new();
        let mut received: u64 = 0;
        let mut head = Vec::with_capacity(8);
        while let Some(chunk) = stream.next().await {
            let bytes = match chunk {
                Ok(bytes) => bytes,
                Err(e) => {
                    // The library checks digests at the end of the stream; ours decides
                    // whenever every byte has arrived.
                    if received == size {
                        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
                        if actual != digest {
                            return Err(mismatch(layer_what(), digest.into(), actual));
                        }
                    }
                    if let Some(DigestError::VerificationError { expected, actual }) =
                        e.get_ref().and_then(|i| i.downcast_ref::<DigestError>())
                    {
                        return Err(mismatch(layer_what(), expected.clone(), actual.clone()));
                    }
                    return Err(Error::Unreachable {
                        registry: reference.registry().into(),
                        reference: reference.to_string(),
                        reason: format!("downloading layer {digest}: {}", chain(&e)),
                    });
                }
            };
            received += bytes.len() as u64;
            if received > size {
                return Err(mismatch(
                    format!("the size of layer {digest}"),
                    format!("{size} bytes (the manifest)"),
                    "more bytes".into(),
                ));
            }
            if head.len() < 8 {
                let take = (8 - head.len()).min(bytes.len());
                head.extend_from_slice(&bytes[..take]);
            }
            hasher.update(&bytes);
            file.write_all(&bytes)
                .await
                .map_err(Error::io("writing", temp.path()))?;
        }
        file.flush()
            .await
            .map_err(Error::io("writing", temp.path()))?;
        drop(file);
        if received != size {
            return Err(mismatch(
                format!("the size of layer {digest}"),
                format!("{size} bytes (the manifest)"),
                format!("{received} bytes"),
            ));
        }
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != digest {
            return Err(mismatch(layer_what(), digest.into(), actual));
        }
        artifact::check_component_header(&head).map_err(|why| Error::NotWasm {
            reference: reference.to_string(),
            why: why.into(),
        })?;
        store.persist(temp, dest)
    }

    /// Our error for a protocol error about `reference`.
    fn error(&self, reference: &Reference, e: OciDistributionError) -> Error {
        let registry = reference.registry().to_string();
        let r = reference.to_string();
        let unreachable = |reason: String| Error::Unreachable {
            registry: registry.clone(),
            reference: r.clone(),
            reason,
        };
        let unauthorized = |reason: String| Error::Unauthorized {
            registry: registry.clone(),
            reference: r.clone(),
            reason,
        };
        match e {
            OciDistributionError::RequestError(e) => {
                let mut reason = chain(&e);
                if is_tls_failure(&e) && !self.insecure.iter().any(|i| i == &registry) {
                    reason.push_str(&format!(
                        " (TLS failed: a registry served over plain HTTP must be listed as insecure, \
                         --insecure-registry {registry}; one whose certificate a private CA signed \
                         needs that CA, --registry-ca FILE)"
                    ));
                }
                if e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() {
                    unreachable(reason)
                } else {
                    Error::Registry {
                        registry: registry.clone(),
                        reference: r.clone(),
                        reason,
                    }
                }
            }
            OciDistributionError::UnauthorizedError { .. } => {
                unauthorized("authentication required (HTTP 401): check the credentials".into())
            }
            OciDistributionError::AuthenticationFailure(why) => {
                unauthorized(format!("authentication failed: {why}"))
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let said = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}: {}", e.code, e.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    Error::NotFound { reference: r }
                } else if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    unauthorized(said)
                } else if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Toomanyrequests))
                {
                    unreachable(said)
                } else {
                    Error::Registry {
                        registry,
                        reference: r,
                        reason: said,
                    }
                }
            }
            OciDistributionError::ServerError { code, message, .. } => match code {
                404 => Error::NotFound { reference: r },
                401 | 403 => unauthorized(format!("HTTP {code}")),
                429 | 500..=599 => unreachable(format!("HTTP {code}: {}", message.trim())),
                _ => Error::Registry {
                    registry,
                    reference: r,
                    reason: format!("HTTP {code}: {}", message.trim()),
                },
            },
            OciDistributionError::DigestError(DigestError::VerificationError {
                expected,
                actual,
            }) => Error::DigestMismatch {
                reference: r,
                what: "the content".into(),
                expected,
                actual,
            },
            other => Error::Registry {
                registry,
                reference: r,
                reason: chain(&other),
            },
        }
    }
}

/// A layer's declared size (validated non-negative by `wasm_layer`).
fn declared_size(layer: &artifact::Descriptor) -> u64 {
    u64::try_from(layer.size).unwrap_or(0)
}

/// The stored manifest `digest` with its verified blob, if the store has both.
async fn from_store(
    reference: &Reference,
    digest: &str,
    store: &Store,
    max_bytes: u64,
) -> Result<Option<Pulled>, Error> {
    let Some(manifest) = store.get_manifest(digest)? else {
        return Ok(None);
    };
    let manifest_path = store.manifest_path(digest);
    if sha256_digest(&manifest) != digest {
        tracing::warn!(path = %manifest_path.display(), "a damaged manifest in the OCI store: pulling it again");
        store.discard(&manifest_path);
        return Ok(None);
    }
    let Ok(layer) = artifact::wasm_layer(&manifest) else {
        // Only accepted manifests are stored; one that is not is damage of another kind.
        store.discard(&manifest_path);
        return Ok(None);
    };
    let size = declared_size(&layer);
    if size > max_bytes {
        return Err(Error::TooLarge {
            reference: reference.to_string(),
            size,
            max: max_bytes,
        });
    }
    let path = store.blob_path(&layer.digest);
    if !verify_stored_blob(store, &path, &layer.digest, size).await? {
        return Ok(None);
    }
    Ok(Some(Pulled {
        manifest_digest: digest.into(),
        layer_digest: layer.digest,
        size,
        path,
        from_store: true,
    }))
}

/// Whether blob `path` exists with `size` bytes hashing to `digest`; a damaged one is
/// removed (and false returned) so that it is fetched again.
async fn verify_stored_blob(
    store: &Store,
    path: &Path,
    digest: &str,
    size: u64,
) -> Result<bool, Error> {
    let owned = path.to_path_buf();
    let hashed = tokio::task::spawn_blocking(move || -> std::io::Result<Option<(u64, String)>> {
        let mut file = match std::fs::File::open(&owned) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut hasher = Sha256::new();
        let n = std::io::copy(&mut file, &mut hasher)?;
        Ok(Some((
            n,
            format!("sha256:{}", hex::encode(hasher.finalize())),
        )))
    })
    .await
    .map_err(|e| Error::io("hashing", path)(std::io::Error::other(e)))?
    .map_err(Error::io("hashing", path))?;
    match hashed {
        None => Ok(false),
        Some((n, actual)) if n == size && actual == digest => Ok(true),
        Some(_) => {
            tracing::warn!(path = %path.display(), "a damaged blob in the OCI store: pulling it again");
            store.discard(path);
            Ok(false)
        }
    }
}

/// An error and its causes, `: `-joined (the client library's top-level messages alone
/// rarely say what happened).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
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

/// Whether a TLS handshake failed somewhere in `e`'s causes.
fn is_tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        // An io::Error hides what it wraps from `source()`, and the TLS stack nests them.
        let mut inner: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(i) = inner {
            if i.downcast_ref::<rustls::Error>().is_some() {
                return true;
            }
            inner = i
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .map(|e| e as &(dyn std::error::Error + 'static));
        }
        cur = err.source();
    }
    false
}
