//! The registry flags of the commands that reach OCI registries (`push`; `run` and `dev`
//! flatten the same struct).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use kubewasm_oci::{Auths, RegistryConfig};

/// How OCI registries are reached: plain-HTTP exceptions, extra CAs, credentials.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct RegistryArgs {
    /// Reach this registry over plain HTTP instead of HTTPS (HOST:PORT, exactly as in the
    /// references; repeatable), as Docker and containerd spell it. Every other registry is
    /// HTTPS only.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT", value_parser = host_port)]
    pub insecure_registry: Vec<String>,
    /// Trust this PEM CA certificate for HTTPS registries, besides the system's
    /// (repeatable): a registry whose certificate a private CA signed.
    #[arg(long = "registry-ca", value_name = "FILE")]
    pub registry_ca: Vec<PathBuf>,
    /// The Docker config file holding registry credentials (`docker login` writes it;
    /// the same JSON as a kubernetes.io/dockerconfigjson Secret). Default:
    /// $DOCKER_CONFIG/config.json, else ~/.docker/config.json; none means anonymous.
    #[arg(long, value_name = "FILE")]
    pub docker_config: Option<PathBuf>,
}

impl RegistryArgs {
    /// The registry configuration these flags ask for.
    pub(crate) fn config(&self) -> RegistryConfig {
        RegistryConfig {
            insecure: self.insecure_registry.clone(),
            ca_files: self.registry_ca.clone(),
            // `run` and `dev` add their --allowed-registry and --require-digest.
            ..RegistryConfig::default()
        }
    }

    /// The credentials: `--docker-config` (which must exist), else the default Docker
    /// config (missing: none).
    pub(crate) fn auths(&self) -> Result<Auths> {
        match &self.docker_config {
            Some(path) => Auths::from_docker_config_file(path)
                .with_context(|| format!("--docker-config {}", path.display())),
            None => Auths::from_default_docker_config().context("the default Docker config"),
        }
    }
}

/// `HOST[:PORT]` without a scheme or path (what a reference's registry part is).
fn host_port(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains("://") || s.contains('/') || s.contains('@') {
        return Err(format!(
            "{s:?}: give the registry as HOST:PORT, as it appears in oci:// references (no scheme, no path)"
        ));
    }
    Ok(s.to_string())
}

/// An `--allowed-registry` pattern: `HOST[:PORT]` or `*.DOMAIN[:PORT]`.
pub(crate) fn allowed_pattern(s: &str) -> Result<String, String> {
    let host = s.strip_prefix("*.").unwrap_or(s);
    let chars_ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-.[]:".contains(c));
    if host.is_empty() || host.starts_with('.') || !chars_ok {
        return Err(format!(
            "{s:?}: give HOST[:PORT] exactly, or *.DOMAIN[:PORT] for any host under DOMAIN"
        ));
    }
    host_port(host)?;
    Ok(s.to_string())
}
