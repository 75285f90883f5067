//! Plugins as OCI artifacts.
//!
//! A plugin is published as a Wasm OCI artifact (the CNCF TAG Runtime layout: an OCI image
//! manifest whose config has media type [`WASM_CONFIG_MEDIA_TYPE`] and whose one layer is
//! the component, [`WASM_LAYER_MEDIA_TYPE`]) and named by a [`Reference`],
//! `oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]`.
//!
//! - [`Client::push_wasm`] publishes a component and returns the pinned reference;
//! - [`Client::resolve`] says which manifest digest a tag names now;
//! - [`Client::pull_wasm`] brings a pinned component into a content-addressed [`Store`],
//!   verified against its digests and a size cap, and serves it from there afterwards
//!   without the registry.
//!
//! Registries are reached over HTTPS unless listed in [`RegistryConfig::insecure`], and
//! only those the operator's rules allow ([`RegistryConfig::allowed`]: never a loopback,
//! link-local or cluster-internal address unless named explicitly), every body read with
//! a bound and redirects kept on the registry's host (blobs excepted, HTTPS only);
//! credentials come from a Docker config file or a `kubernetes.io/dockerconfigjson`
//! Secret ([`Auths`]). The protocol is the ORAS project's `oci-client`; every digest is
//! checked here again rather than trusted to it.

mod artifact;
mod auth;
mod client;
#[cfg(test)]
mod hostile_tests;
mod http;
mod policy;
mod reference;
mod store;

use std::path::PathBuf;

pub use artifact::{
    WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPES, check_component_header,
};
pub use auth::{Auths, Credentials};
pub use client::{Client, Pulled, Pushed, RegistryConfig};
pub use policy::registry_matches;
pub use reference::Reference;
pub use store::Store;

/// What went wrong with a reference, a registry or the store. Messages name the reference
/// and the reason, never credentials.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not a reference of the form `oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]`, or a tag
    /// where a digest is needed.
    #[error(
        "invalid OCI reference {reference:?}: {reason} (expected oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX])"
    )]
    InvalidReference {
        /// The text given (any credentials in it masked).
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The registry has no such manifest (unknown tag, digest or repository).
    #[error("{reference}: not found in the registry")]
    NotFound {
        /// The reference looked up.
        reference: String,
    },
    /// The registry refused the request: credentials missing, wrong, or not allowed.
    #[error("{reference}: registry {registry} refused access: {reason}")]
    Unauthorized {
        /// `HOST[:PORT]`.
        registry: String,
        /// The reference asked for.
        reference: String,
        /// What the registry said.
        reason: String,
    },
    /// The registry could not be reached (connection refused, DNS, TLS, timeout, 5xx).
    #[error("{reference}: registry {registry} unreachable: {reason}")]
    Unreachable {
        /// `HOST[:PORT]`.
        registry: String,
        /// The reference asked for.
        reference: String,
        /// Why.
        reason: String,
    },
    /// Content whose bytes do not match the digest that names it.
    #[error("{reference}: {what} does not match its digest: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The reference pulled.
        reference: String,
        /// Which content (`manifest`, `layer sha256:…`, …).
        what: String,
        /// What the manifest or reference says.
        expected: String,
        /// What the bytes are.
        actual: String,
    },
    /// The wasm layer is larger than the caller allows (known from the manifest, before
    /// any layer byte is fetched).
    #[error("{reference}: the wasm layer is {size} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// The reference pulled.
        reference: String,
        /// The layer's declared size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The artifact is not a single Wasm component (an image index, a container image,
    /// several layers, a core module, …).
    #[error("{reference}: not a Wasm component artifact: {why}")]
    NotWasm {
        /// The reference (or file) looked at.
        reference: String,
        /// What was found instead.
        why: String,
    },
    /// The content-addressed store could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: String,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Docker config file or dockerconfigjson Secret that cannot be used.
    #[error("registry credentials from {origin}: {reason}")]
    Credentials {
        /// Which file or Secret.
        origin: String,
        /// What is wrong (never the secret itself).
        reason: String,
    },
    /// A [`RegistryConfig`] that cannot be used (an unreadable or empty CA file, …).
    #[error("registry configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// The registry, a redirect or a token realm is not one the operator's rules allow
    /// (`--allowed-registry`, private addresses, plain HTTP).
    #[error("{reference}: {reason}")]
    NotAllowed {
        /// `HOST[:PORT]`.
        registry: String,
        /// The reference asked for.
        reference: String,
        /// Which rule refused what.
        reason: String,
    },
    /// A tag where the operator requires a digest (`--require-digest`).
    #[error(
        "{reference}: names a tag, and this host requires a digest (--require-digest): pin it as REPO@sha256:HEX (`kubewasm push` prints it)"
    )]
    DigestRequired {
        /// The reference given.
        reference: String,
    },
    /// Any other failure the registry reported.
    #[error("{reference}: registry {registry}: {reason}")]
    Registry {
        /// `HOST[:PORT]`.
        registry: String,
        /// The reference asked for.
        reference: String,
        /// What happened.
        reason: String,
    },
}

impl Error {
    /// A Kubernetes-style condition reason (CamelCase) for a Plugin's status.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::InvalidReference { .. } => "InvalidReference",
            Error::NotFound { .. } => "ManifestNotFound",
            Error::Unauthorized { .. } => "Unauthorized",
            Error::Unreachable { .. } => "RegistryUnavailable",
            Error::DigestMismatch { .. } => "DigestMismatch",
            Error::TooLarge { .. } => "ModuleTooLarge",
            Error::NotWasm { .. } => "NotAWasmArtifact",
            Error::Io { .. } => "StoreError",
            Error::Credentials { .. } => "InvalidCredentials",
            Error::Config { .. } => "InvalidRegistryConfig",
            Error::Registry { .. } => "PullFailed",
            Error::NotAllowed { .. } => "RegistryNotAllowed",
            Error::DigestRequired { .. } => "DigestRequired",
        }
    }

    pub(crate) fn io(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let (what, path) = (what.into(), path.into());
        move |source| Error::Io { what, path, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_camel_case_and_distinct() {
        let errors = [
            Error::InvalidReference {
                reference: "x".into(),
                reason: "y".into(),
            },
            Error::NotFound {
                reference: "x".into(),
            },
            Error::Unauthorized {
                registry: "r".into(),
                reference: "x".into(),
                reason: "y".into(),
            },
            Error::Unreachable {
                registry: "r".into(),
                reference: "x".into(),
                reason: "y".into(),
            },
            Error::DigestMismatch {
                reference: "x".into(),
                what: "w".into(),
                expected: "a".into(),
                actual: "b".into(),
            },
            Error::TooLarge {
                reference: "x".into(),
                size: 2,
                max: 1,
            },
            Error::NotWasm {
                reference: "x".into(),
                why: "y".into(),
            },
            Error::Io {
                what: "w".into(),
                path: "p".into(),
                source: std::io::Error::other("e"),
            },
            Error::Credentials {
                origin: "o".into(),
                reason: "r".into(),
            },
            Error::Config { reason: "r".into() },
            Error::NotAllowed {
                registry: "r".into(),
                reference: "x".into(),
                reason: "y".into(),
            },
            Error::DigestRequired {
                reference: "x".into(),
            },
            Error::Registry {
                registry: "r".into(),
                reference: "x".into(),
                reason: "y".into(),
            },
        ];
        let reasons: std::collections::BTreeSet<_> = errors.iter().map(Error::reason).collect();
        assert_eq!(reasons.len(), errors.len(), "{reasons:?}");
        for r in reasons {
            assert!(
                r.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && r.chars().all(|c| c.is_ascii_alphanumeric()),
                "{r}"
            );
        }
    }
}
