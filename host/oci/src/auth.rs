//! Registry credentials: Docker config files and dockerconfigjson Secrets.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use crate::Error;

/// Credentials for one registry.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP basic authentication (also what registries exchange for a bearer token).
    Basic {
        /// User name.
        username: String,
        /// Password or access token.
        password: String,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
        }
    }
}

impl Credentials {
    pub(crate) fn to_oci(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            Credentials::Anonymous => oci_client::secrets::RegistryAuth::Anonymous,
            Credentials::Basic { username, password } => {
                oci_client::secrets::RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

/// Credentials per registry, from a Docker config file (`~/.docker/config.json`,
/// `$DOCKER_CONFIG/config.json`) or a `kubernetes.io/dockerconfigjson` Secret's
/// `.dockerconfigjson`: `auths.<registry>.auth` (base64 of `user:password`) or
/// `auths.<registry>.username` and `.password`. Credential helpers (`credsStore`,
/// `credHelpers`) and identity tokens are not used.
#[derive(Clone, Default)]
pub struct Auths {
    /// Registry (`HOST[:PORT]`, normalised) → credentials.
    by_registry: BTreeMap<String, Credentials>,
}

impl fmt::Debug for Auths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The registries only: never a secret.
        f.debug_struct("Auths")
            .field("registries", &self.by_registry.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

impl Auths {
    /// Parse a Docker config file's or a dockerconfigjson Secret's bytes.
    pub fn from_docker_config_json(bytes: &[u8]) -> Result<Auths, Error> {
        Self::parse(bytes, "a Docker config (dockerconfigjson)")
    }

    /// Read `path`, a Docker config file.
    pub fn from_docker_config_file(path: &Path) -> Result<Auths, Error> {
        let bytes = std::fs::read(path).map_err(|e| Error::Credentials {
            origin: path.display().to_string(),
            reason: format!("cannot read it: {e}"),
        })?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// The Docker config of this user: `$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`; no such file means no credentials.
    pub fn from_default_docker_config() -> Result<Auths, Error> {
        match Self::default_docker_config_path() {
            Some(path) if path.is_file() => Self::from_docker_config_file(&path),
            _ => Ok(Auths::default()),
        }
    }

    /// Where [`Auths::from_default_docker_config`] reads: `$DOCKER_CONFIG/config.json`,
    /// else `$HOME/.docker/config.json` (None without either variable).
    pub fn default_docker_config_path() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir).join("config.json"));
        }
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".docker/config.json"))
    }

    fn parse(bytes: &[u8], origin: &str) -> Result<Auths, Error> {
        let bad = |reason: String| Error::Credentials {
            origin: origin.to_string(),
            reason,
        };
        // serde_json's messages quote no input beyond a position: safe to show.
        let config: DockerConfig = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("not a Docker config JSON: {e}")))?;
        let mut by_registry = BTreeMap::new();
        for (key, entry) in config.auths {
            let registry = normalise_key(&key);
            let creds = match (&entry.auth, &entry.username, &entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|_| bad(format!("auths.{key:?}.auth is not base64")))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| bad(format!("auths.{key:?}.auth is not UTF-8")))?;
                    let (username, password) = text.split_once(':').ok_or_else(|| {
                        bad(format!(
                            "auths.{key:?}.auth is not base64 of username:password"
                        ))
                    })?;
                    Credentials::Basic {
                        username: username.to_string(),
                        password: password.to_string(),
                    }
                }
                (_, Some(username), Some(password)) => Credentials::Basic {
                    username: username.clone(),
                    password: password.clone(),
                },
                _ => {
                    if entry.identity_token.is_some() {
                        tracing::warn!(
                            registry = %registry,
                            "registry credentials: identity tokens are not supported; the registry is reached anonymously"
                        );
                    }
                    continue;
                }
            };
            by_registry.insert(registry, creds);
        }
        Ok(Auths { by_registry })
    }

    /// The credentials for `registry` (`HOST[:PORT]`), anonymous when none are configured.
    /// Keys match exactly on `HOST[:PORT]`, also as Docker writes them
    /// (`https://HOST[:PORT]`, `https://index.docker.io/v1/`).
    pub fn for_registry(&self, registry: &str) -> Credentials {
        self.by_registry
            .get(&normalise_key(registry))
            .cloned()
            .unwrap_or_default()
    }

    /// The registries with credentials (for messages and logs).
    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.by_registry.keys().map(String::as_str)
    }
}

/// A Docker config key or a registry as `HOST[:PORT]`: scheme and path dropped, host
/// lowercased, Docker Hub's names made one.
fn normalise_key(key: &str) -> String {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = rest.split('/').next().unwrap_or(rest).to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" | "index.docker.io" => "index.docker.io".into(),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn auth_field_and_username_password() {
        let json = format!(
            r#"{{"auths": {{
                "127.0.0.1:5000": {{"auth": "{}"}},
                "https://registry.example.com": {{"username": "bob", "password": "pw:with:colons"}},
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "token.example.com": {{"identitytoken": "abc"}}
            }}, "credsStore": "desktop"}}"#,
            b64("alice:s3cret:x"),
            b64("hub:hubpw")
        );
        let auths = Auths::from_docker_config_json(json.as_bytes()).expect("parse");
        assert_eq!(
            auths.for_registry("127.0.0.1:5000"),
            Credentials::Basic {
                username: "alice".into(),
                password: "s3cret:x".into()
            }
        );
        assert_eq!(
            auths.for_registry("registry.example.com"),
            Credentials::Basic {
                username: "bob".into(),
                password: "pw:with:colons".into()
            }
        );
        assert_eq!(
            auths.for_registry("docker.io"),
            Credentials::Basic {
                username: "hub".into(),
                password: "hubpw".into()
            }
        );
        // Exact HOST[:PORT]: another port, or the host without its port, is not the same.
        assert_eq!(auths.for_registry("127.0.0.1:5001"), Credentials::Anonymous);
        assert_eq!(auths.for_registry("127.0.0.1"), Credentials::Anonymous);
        assert_eq!(
            auths.for_registry("token.example.com"),
            Credentials::Anonymous
        );
        assert_eq!(
            auths.registries().collect::<Vec<_>>(),
            ["127.0.0.1:5000", "index.docker.io", "registry.example.com"]
        );
    }

    #[test]
    fn no_secret_in_debug_or_errors() {
        let json = format!(
            r#"{{"auths": {{"r:1": {{"auth": "{}"}}}}}}"#,
            b64("u:topsecret")
        );
        let auths = Auths::from_docker_config_json(json.as_bytes()).expect("parse");
        let shown = format!("{auths:?} {:?}", auths.for_registry("r:1"));
        assert!(!shown.contains("topsecret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");

        // An auth without a colon: the error names the key, not the decoded secret.
        let json = format!(
            r#"{{"auths": {{"r:1": {{"auth": "{}"}}}}}}"#,
            b64("topsecret")
        );
        let err = Auths::from_docker_config_json(json.as_bytes()).expect_err("no colon");
        let msg = err.to_string();
        assert!(
            !msg.contains("topsecret") && msg.contains("\"r:1\""),
            "{msg}"
        );
        assert_eq!(err.reason(), "InvalidCredentials");

        let err = Auths::from_docker_config_json(br#"{"auths": {"r": {"auth": "!!"}}}"#)
            .expect_err("not base64");
        assert!(err.to_string().contains("not base64"), "{err}");
        let err = Auths::from_docker_config_json(b"[1]").expect_err("not an object");
        assert!(
            err.to_string().contains("not a Docker config JSON"),
            "{err}"
        );
    }

    #[test]
    fn empty_and_missing() {
        let auths = Auths::from_docker_config_json(b"{}").expect("empty object");
        assert_eq!(auths.for_registry("x"), Credentials::Anonymous);
        let dir = tempfile::tempdir().expect("tempdir");
        let err =
            Auths::from_docker_config_file(&dir.path().join("nope.json")).expect_err("missing");
        assert_eq!(err.reason(), "InvalidCredentials");
        assert!(err.to_string().contains("nope.json"), "{err}");
    }
}
