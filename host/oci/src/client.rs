//! Push, resolve and pull over the OCI distribution protocol.
//!
//! Pulls and resolves (what a `Plugin` author points at a registry) use this crate's own
//! bounded calls ([`crate::http`]) under the operator's [`Policy`]; `push`, an operator's
//! command against a registry they name, uses `oci-client`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use oci_client::RegistryOperation;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use reqwest::Method;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

use crate::artifact::{self, ACCEPTED_MANIFESTS, MAX_MANIFEST_BYTES, sha256_digest};
use crate::http::{self, BodyError, Http, Session, Target, chain, is_tls_failure};
use crate::policy::Policy;
use crate::{Credentials, Error, Reference, Store};

/// How registries are reached.
#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    /// Registries (`HOST:PORT`, exactly as in references) reached over plain HTTP, as
    /// Docker and containerd spell `--insecure-registry`. Every other one is HTTPS. Each
    /// one is also named explicitly (its address may be private).
    pub insecure: Vec<String>,
    /// Extra PEM CA certificates to trust (besides the system's) for HTTPS registries.
    pub ca_files: Vec<PathBuf>,
    /// The registries pulls may reach (`--allowed-registry`): `HOST[:PORT]` exactly, or
    /// `*.DOMAIN[:PORT]`. Empty: any registry at a public address. An exact entry also
    /// names the registry, so that its address may be private (loopback, cluster).
    pub allowed: Vec<String>,
    /// Refuse tags: a reference must name its manifest digest (`--require-digest`).
    pub require_digest: bool,
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
    /// The component's bytes: exactly the bytes that were hashed and verified against
    /// `layer_digest` (never read again from disk after the check).
    pub bytes: Vec<u8>,
    /// Where the store keeps it (`DIR/repos/<repository key>/blobs/sha256/<hex>`).
    pub path: PathBuf,
    /// Served from the store without a registry call.
    pub from_store: bool,
}

/// What [`Client::push_wasm`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The pinned reference, `oci://HOST[:PORT]/REPO@sha256:…`.
    pub pinned: Reference,
    /// Blobs uploaded (the component, the config).
    pub blobs_sent: usize,
    /// Blobs the repository already had, not sent again.
    pub blobs_skipped: usize,
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
    http: Http,
    require_digest: bool,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two reads of one response: a registry that stalls mid-download fails the pull.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const USER_AGENT: &str = concat!("kubewasm/", env!("CARGO_PKG_VERSION"));

impl Client {
    /// A client for `config`: its CA files and allowed-registry patterns are read and
    /// checked now.
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
        let policy = Policy::new(&config.allowed, &config.insecure)
            .map_err(|reason| Error::Config { reason })?;
        let pems: Vec<Vec<u8>> = certificates.iter().map(|c| c.data.clone()).collect();
        let http = Http::new(Arc::new(policy), &pems).map_err(|e| Error::Config {
            reason: format!("building the HTTP client: {e}"),
        })?;
        let client = Client {
            insecure: config.insecure.clone(),
            certificates,
            http,
            require_digest: config.require_digest,
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
    ///
    /// A blob the repository already has (asked with a HEAD, as docker and oras do) is
    /// not sent again: pushing the same file again, or a new tag of it, sends the
    /// manifest only. A HEAD that fails (a registry without it, a token without pull)
    /// proves nothing, and the blob is sent.
    pub async fn push_wasm(
        &self,
        wasm: &[u8],
        to: &Reference,
        creds: &Credentials,
    ) -> Result<Pushed, Error> {
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
        // The HEADs are reads: oci-client keeps a token per operation.
        let can_ask = oci
            .auth(&image, &creds.to_oci(), RegistryOperation::Pull)
            .await
            .is_ok();
        let mut pushed = Pushed {
            pinned: to.pinned(&artifact.manifest_digest),
            blobs_sent: 0,
            blobs_skipped: 0,
        };
        let blobs = [
            (wasm.to_vec(), &artifact.layer_digest),
            (artifact.config, &artifact.config_digest),
        ];
        for (bytes, digest) in blobs {
            if can_ask && oci.blob_exists(&image, digest).await.unwrap_or(false) {
                tracing::debug!(reference = %to, %digest, "blob already in the repository: not sent");
                pushed.blobs_skipped += 1;
                continue;
            }
            oci.push_blob(&image, bytes, digest).await.map_err(fail)?;
            pushed.blobs_sent += 1;
        }
        oci.push_manifest_raw(
            &image,
            artifact.manifest,
            reqwest::header::HeaderValue::from_static(artifact::OCI_MANIFEST),
        )
        .await
        .map_err(fail)?;
        tracing::debug!(reference = %to, pinned = %pushed.pinned, size = wasm.len(),
                        sent = pushed.blobs_sent, skipped = pushed.blobs_skipped, "pushed a Wasm artifact");
        Ok(pushed)
    }

    /// The manifest digest (`sha256:…`) that `reference` (a tag, or a digest to check
    /// for) names in the registry now: the registry's `Docker-Content-Digest` for a HEAD,
    /// else the digest of the manifest's bytes (read at most 4 MiB).
    ///
    /// With `require_digest`, a reference without a digest is refused (`DigestRequired`).
    pub async fn resolve(
        &self,
        reference: &Reference,
        creds: &Credentials,
    ) -> Result<String, Error> {
        if self.require_digest && reference.digest().is_none() {
            return Err(Error::DigestRequired {
                reference: reference.to_string(),
            });
        }
        let id = reference
            .digest()
            .or(reference.tag())
            .unwrap_or("latest")
            .to_string();
        let mut session = Session::new(&self.http, reference, creds)?;
        let head = session
            .request(Method::HEAD, Target::Manifest, &id, ACCEPTED_MANIFESTS)
            .await?;
        let said = head
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        drop(head);
        let digest = match said {
            Some(d) => d,
            None => {
                let bytes = self.manifest(&mut session, &id).await?;
                sha256_digest(&bytes)
            }
        };
        crate::reference::check_digest(&digest).map_err(|why| Error::Registry {
            registry: reference.registry().into(),
            reference: reference.to_string(),
            reason: format!(
                "the registry answered an unusable {}",
                http::excerpt(why.as_bytes())
            ),
        })
    }

    /// Manifest `id` of the session's repository, read at most [`MAX_MANIFEST_BYTES`]:
    /// cut as soon as it passes them.
    async fn manifest(&self, session: &mut Session<'_>, id: &str) -> Result<Vec<u8>, Error> {
        let mut resp = session
            .request(Method::GET, Target::Manifest, id, ACCEPTED_MANIFESTS)
            .await?;
        http::read_bounded(&mut resp, MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge => Error::NotWasm {
                    reference: session_reference(session),
                    why: format!("a manifest over {MAX_MANIFEST_BYTES} bytes"),
                },
                BodyError::Transport(e) => session.transport(&e),
            })
    }

    /// Pull pinned `reference`'s component into `store` and return its verified bytes.
    ///
    /// The store is keyed by repository: a digest pulled from one repository (with its
    /// credentials) is never served for another. A manifest already stored for this
    /// repository whose blob is there is served from disk with no network call, the blob
    /// read once and hashed as it is read. Otherwise the manifest is fetched by digest
    /// (at most 4 MiB) and checked against it; it must have exactly one wasm layer, whose
    /// declared size must not exceed `max_bytes` (checked before any layer byte is
    /// fetched); the layer is streamed, cut at its declared size, hashed as it arrives
    /// and checked against its digest and for a component header, then renamed into
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
            return Err(if self.require_digest {
                Error::DigestRequired {
                    reference: reference.to_string(),
                }
            } else {
                Error::InvalidReference {
                    reference: reference.to_string(),
                    reason: "pulling needs a digest (REPO@sha256:HEX): resolve the tag first"
                        .into(),
                }
            });
        };
        // The policy holds for the store too: a registry no longer allowed is not served.
        let mut session = Session::new(&self.http, reference, creds)?;
        if let Some(pulled) = from_store(reference, digest, store, max_bytes).await? {
            tracing::debug!(reference = %reference, path = %pulled.path.display(), "served from the OCI store");
            return Ok(pulled);
        }

        let manifest = self.manifest(&mut session, digest).await?;
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
        let path = store.blob_path(reference, &layer.digest);
        // Another manifest of this repository may have brought the same layer.
        let bytes = match read_stored_blob(store, &path, &layer.digest, size).await? {
            Some(bytes) => bytes,
            None => {
                self.download(&mut session, reference, &layer.digest, size, store, &path)
                    .await?
            }
        };
        store.put_manifest(reference, digest, &manifest)?;
        tracing::debug!(reference = %reference, size, path = %path.display(), "pulled a Wasm artifact");
        Ok(Pulled {
            manifest_digest: digest.into(),
            layer_digest: layer.digest,
            size,
            bytes,
            path,
            from_store: false,
        })
    }

    /// Stream layer `digest` of `size` bytes into a temporary file and memory, cut as
    /// soon as it passes `size`, verify it, rename the file to `dest` and return the
    /// verified bytes.
    async fn download(
        &self,
        session: &mut Session<'_>,
        reference: &Reference,
        digest: &str,
        size: u64,
        store: &Store,
        dest: &Path,
    ) -> Result<Vec<u8>, Error> {
        let mismatch = |what: String, expected: String, actual: String| Error::DigestMismatch {
            reference: reference.to_string(),
            what,
            expected,
            actual,
        };
        let too_many = || {
            mismatch(
                format!("the size of layer {digest}"),
                format!("{size} bytes (the manifest)"),
                "more bytes".into(),
            )
        };
        // A bare digest: no foreign URLs from a descriptor are ever followed.
        let mut resp = session
            .request(Method::GET, Target::Blob, digest, &[])
            .await?;
        if let Some(len) = resp.content_length()
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
        // `size` is at most the caller's cap, checked before this call.
        let mut bytes: Vec<u8> = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => return Err(session.transport(&e)),
            };
            if bytes.len() as u64 + chunk.len() as u64 > size {
                return Err(too_many());
            }
            hasher.update(&chunk);
            bytes.extend_from_slice(&chunk);
            file.write_all(&chunk)
                .await
                .map_err(Error::io("writing", temp.path()))?;
        }
        file.flush()
            .await
            .map_err(Error::io("writing", temp.path()))?;
        drop(file);
        if bytes.len() as u64 != size {
            return Err(mismatch(
                format!("the size of layer {digest}"),
                format!("{size} bytes (the manifest)"),
                format!("{} bytes", bytes.len()),
            ));
        }
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != digest {
            return Err(mismatch(format!("layer {digest}"), digest.into(), actual));
        }
        artifact::check_component_header(&bytes).map_err(|why| Error::NotWasm {
            reference: reference.to_string(),
            why: why.into(),
        })?;
        store.persist(temp, dest)?;
        Ok(bytes)
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

/// The session's reference, for errors made outside it.
fn session_reference(session: &Session<'_>) -> String {
    session.reference().to_string()
}

/// A layer's declared size (validated non-negative by `wasm_layer`).
fn declared_size(layer: &artifact::Descriptor) -> u64 {
    u64::try_from(layer.size).unwrap_or(0)
}

/// The manifest `digest` stored for `reference`'s repository with its verified blob, if
/// the store has both.
async fn from_store(
    reference: &Reference,
    digest: &str,
    store: &Store,
    max_bytes: u64,
) -> Result<Option<Pulled>, Error> {
    let Some(manifest) = store.get_manifest(reference, digest)? else {
        return Ok(None);
    };
    let manifest_path = store.manifest_path(reference, digest);
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
    let path = store.blob_path(reference, &layer.digest);
    let Some(bytes) = read_stored_blob(store, &path, &layer.digest, size).await? else {
        return Ok(None);
    };
    Ok(Some(Pulled {
        manifest_digest: digest.into(),
        layer_digest: layer.digest,
        size,
        bytes,
        path,
        from_store: true,
    }))
}

/// Blob `path`'s bytes if it exists with `size` bytes hashing to `digest`: read once (at
/// most `size + 1` bytes) and hashed as read, so the bytes returned are the bytes
/// checked. A damaged one is removed (and None returned) so that it is fetched again.
async fn read_stored_blob(
    store: &Store,
    path: &Path,
    digest: &str,
    size: u64,
) -> Result<Option<Vec<u8>>, Error> {
    let owned = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Vec<u8>>> {
        use std::io::Read as _;
        let file = match std::fs::File::open(&owned) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // One byte past the size tells a longer file from a good one.
        file.take(size.saturating_add(1)).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    })
    .await
    .map_err(|e| Error::io("reading", path)(std::io::Error::other(e)))?
    .map_err(Error::io("reading", path))?;
    match read {
        None => Ok(None),
        Some(bytes) if bytes.len() as u64 == size && sha256_digest(&bytes) == digest => {
            Ok(Some(bytes))
        }
        Some(_) => {
            tracing::warn!(path = %path.display(), "a damaged blob in the OCI store: pulling it again");
            store.discard(path);
            Ok(None)
        }
    }
}
