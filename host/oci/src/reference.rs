//! `oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]`.

use std::fmt;
use std::str::FromStr;

use crate::Error;

const SCHEME: &str = "oci://";

/// A plugin's address in a registry: `oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]`.
///
/// The registry is always explicit (no Docker Hub default) and the scheme is required, so
/// a reference in a Plugin's `spec.module` reads the same everywhere. A tag and a digest
/// may both be given (`REPO:TAG@sha256:…`); the digest then decides what is pulled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl Reference {
    /// `HOST[:PORT]`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path, e.g. `plugins/contentsite`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if one was given.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The manifest digest, `sha256:` and 64 lowercase hex digits, if one was given.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The same repository at manifest `digest` (`sha256:…`), the tag dropped.
    pub fn pinned(&self, digest: &str) -> Reference {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest.to_string()),
        }
    }

    /// The client library's reference (same registry, repository, tag and digest).
    pub(crate) fn to_oci(&self) -> oci_client::Reference {
        let (registry, repository) = (self.registry.clone(), self.repository.clone());
        match (&self.tag, &self.digest) {
            (Some(tag), Some(digest)) => oci_client::Reference::with_tag_and_digest(
                registry,
                repository,
                tag.clone(),
                digest.clone(),
            ),
            (None, Some(digest)) => {
                oci_client::Reference::with_digest(registry, repository, digest.clone())
            }
            (Some(tag), None) => oci_client::Reference::with_tag(registry, repository, tag.clone()),
            // Parsing never yields this; `latest` is what a bare name means to registries.
            (None, None) => oci_client::Reference::with_tag(registry, repository, "latest".into()),
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for Reference {
    type Err = Error;

    fn from_str(s: &str) -> Result<Reference, Error> {
        parse(s).map_err(|reason| Error::InvalidReference {
            reference: mask_userinfo(s),
            reason,
        })
    }
}

/// `s` with anything that looks like `user:password@` before the first `/` masked, so
/// that a mistaken reference never puts a password in an error or a log.
fn mask_userinfo(s: &str) -> String {
    let (scheme, rest) = match s.strip_prefix(SCHEME) {
        Some(rest) => (SCHEME, rest),
        None => ("", s),
    };
    let host_end = rest.find('/').unwrap_or(rest.len());
    match rest[..host_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => s.to_string(),
    }
}

fn parse(s: &str) -> Result<Reference, String> {
    let rest = s.strip_prefix(SCHEME).ok_or_else(|| {
        if s.contains("://") {
            "the scheme must be oci://".to_string()
        } else {
            "missing the oci:// scheme".to_string()
        }
    })?;
    let (host, path) = rest
        .split_once('/')
        .ok_or("no repository after the registry")?;
    if host.contains('@') {
        return Err(
            "credentials do not belong in a reference: use a Docker config file or a pull secret"
                .into(),
        );
    }
    check_host(host)?;
    // A digest first (it contains a ':'), then a tag after the last path component.
    let (name, digest) = match path.split_once('@') {
        Some((name, digest)) => (name, Some(check_digest(digest)?)),
        None => (path, None),
    };
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match name[last_slash..].find(':') {
        Some(colon) => {
            let tag = &name[last_slash + colon + 1..];
            check_tag(tag)?;
            (&name[..last_slash + colon], Some(tag.to_string()))
        }
        None => (name, None),
    };
    check_repository(repository)?;
    if tag.is_none() && digest.is_none() {
        return Err("no tag or digest: name a version, REPO:TAG or REPO@sha256:HEX".into());
    }
    Ok(Reference {
        registry: host.to_string(),
        repository: repository.to_string(),
        tag,
        digest,
    })
}

/// `HOST[:PORT]`: a DNS name or IPv4 address, or a bracketed IPv6 address.
fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("no registry host".into());
    }
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or("unclosed '[' in the registry host")?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Err(format!("registry host [{addr}] is not an IPv6 address"));
        }
        match after {
            "" => (None, None),
            p => (
                None,
                Some(
                    p.strip_prefix(':')
                        .ok_or("unexpected text after the IPv6 address")?,
                ),
            ),
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (Some(name), Some(port)),
            None => (Some(host), None),
        }
    };
    if let Some(name) = name {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        if !name.split('.').all(label_ok) {
            return Err(format!("registry host {name:?} is not a host name"));
        }
    }
    if let Some(port) = port
        && !matches!(port.parse::<u16>(), Ok(p) if p > 0 && !port.starts_with('0'))
    {
        return Err(format!("registry port {port:?} is not a port number"));
    }
    Ok(())
}

/// The distribution spec's repository name: `/`-separated components of lowercase
/// letters and digits, joined inside a component by `.`, `_`, `__` or dashes.
fn check_repository(repo: &str) -> Result<(), String> {
    if repo.is_empty() {
        return Err("empty repository".into());
    }
    if repo.len() > 255 {
        return Err("repository longer than 255 characters".into());
    }
    for component in repo.split('/') {
        if !component_ok(component) {
            return Err(format!(
                "repository component {component:?} is not lowercase letters and digits joined by '.', '_', '__' or '-'"
            ));
        }
    }
    Ok(())
}

fn component_ok(c: &str) -> bool {
    let alnum = |ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit();
    let bytes: Vec<char> = c.chars().collect();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    // Separators between alphanumeric runs: '.', '_', '__', or one or more '-'.
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep: String = bytes[start..i].iter().collect();
        let ok = sep == "." || sep == "_" || sep == "__" || sep.chars().all(|ch| ch == '-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn check_tag(tag: &str) -> Result<(), String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag.starts_with(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tag {tag:?} is not letters, digits, '_', '.' or '-' (at most 128, not starting with '.' or '-')"
        ))
    }
}

/// `sha256:` and 64 lowercase hex digits; returns it.
pub(crate) fn check_digest(digest: &str) -> Result<String, String> {
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("digest {digest:?} is not sha256:HEX (only sha256 is supported)"))?;
    if hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
        Ok(digest.to_string())
    } else {
        Err(format!(
            "digest {digest:?} is not sha256: and 64 lowercase hex digits"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn ok(s: &str) -> Reference {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn bad(s: &str) -> String {
        match s.parse::<Reference>() {
            Ok(r) => panic!("{s} parsed as {r:?}"),
            Err(e) => {
                assert_eq!(e.reason(), "InvalidReference");
                e.to_string()
            }
        }
    }

    #[test]
    fn good_forms() {
        let r = ok("oci://127.0.0.1:5000/plugins/contentsite:v1");
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "plugins/contentsite");
        assert_eq!(r.tag(), Some("v1"));
        assert_eq!(r.digest(), None);
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/plugins/contentsite:v1");

        let d = format!("oci://registry.example.com/a/b/c@sha256:{HEX}");
        let r = ok(&d);
        assert_eq!(r.registry(), "registry.example.com");
        assert_eq!(r.repository(), "a/b/c");
        assert_eq!(r.tag(), None);
        assert_eq!(r.digest(), Some(format!("sha256:{HEX}").as_str()));
        assert_eq!(r.to_string(), d);

        let both = format!("oci://localhost:5000/x:1.2.3@sha256:{HEX}");
        let r = ok(&both);
        assert_eq!(r.tag(), Some("1.2.3"));
        assert_eq!(r.to_string(), both);

        let r = ok("oci://[::1]:5000/my_repo/with-dash--es/and.dot:Latest_2");
        assert_eq!(r.registry(), "[::1]:5000");
        assert_eq!(r.repository(), "my_repo/with-dash--es/and.dot");
        assert_eq!(r.tag(), Some("Latest_2"));

        let r = ok("oci://ghcr.io/org/p__q:t");
        assert_eq!(r.repository(), "org/p__q");
    }

    #[test]
    fn pinned_drops_the_tag() {
        let r = ok("oci://localhost:5000/p:v1");
        let p = r.pinned(&format!("sha256:{HEX}"));
        assert_eq!(p.tag(), None);
        assert_eq!(
            p.to_string(),
            format!("oci://localhost:5000/p@sha256:{HEX}")
        );
        assert_eq!(ok(&p.to_string()), p);
    }

    #[test]
    fn to_oci_keeps_every_part() {
        let r = ok(&format!("oci://localhost:5000/a/b:t@sha256:{HEX}"));
        let o = r.to_oci();
        assert_eq!(o.registry(), "localhost:5000");
        assert_eq!(o.repository(), "a/b");
        assert_eq!(o.tag(), Some("t"));
        assert_eq!(o.digest(), Some(format!("sha256:{HEX}").as_str()));
    }

    #[test]
    fn bad_forms_say_why_and_the_expected_form() {
        let cases: &[(&str, &str)] = &[
            ("localhost:5000/p:v1", "missing the oci:// scheme"),
            ("https://localhost:5000/p:v1", "the scheme must be oci://"),
            ("oci://localhost:5000", "no repository"),
            ("oci:///p:v1", "no registry host"),
            ("oci://localhost:5000/p", "no tag or digest"),
            ("oci://localhost:5000/P:v1", "is not lowercase"),
            ("oci://localhost:5000/p//q:v1", "\"\""),
            ("oci://localhost:5000/-p:v1", "\"-p\""),
            ("oci://localhost:5000/p.-q:v1", "\"p.-q\""),
            ("oci://localhost:5000/p___q:v1", "\"p___q\""),
            ("oci://localhost:5000/p:", "tag \"\""),
            ("oci://localhost:5000/p:.v1", "tag \".v1\""),
            ("oci://localhost:5000/p:v/1", "is not lowercase"),
            ("oci://localhost:99999/p:v1", "port \"99999\""),
            ("oci://localhost:0/p:v1", "port \"0\""),
            ("oci://localhost:/p:v1", "port \"\""),
            ("oci://bad_host/p:v1", "not a host name"),
            ("oci://[::1/p:v1", "unclosed"),
            ("oci://[zz]:5000/p:v1", "not an IPv6"),
            ("oci://localhost:5000/p@sha256:abc", "64 lowercase hex"),
            ("oci://localhost:5000/p@sha512:abc", "only sha256"),
        ];
        for (input, why) in cases {
            let msg = bad(input);
            assert!(msg.contains(why), "{input}: {msg:?} should say {why:?}");
            assert!(
                msg.contains("expected oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]"),
                "{msg}"
            );
        }
        let upper = format!("oci://localhost:5000/p@sha256:{}", HEX.to_uppercase());
        assert!(bad(&upper).contains("64 lowercase hex"));
        let long = format!("oci://localhost:5000/{}:v1", "a".repeat(256));
        assert!(bad(&long).contains("255"));
    }

    #[test]
    fn credentials_in_a_reference_are_refused_and_masked() {
        let msg = bad("oci://alice:hunter2@localhost:5000/p:v1");
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(!msg.contains("alice"), "{msg}");
        assert!(msg.contains("***@localhost:5000"), "{msg}");
        assert!(msg.contains("credentials do not belong"), "{msg}");
    }
}
