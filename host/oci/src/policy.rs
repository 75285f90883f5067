//! Which registries the host may reach, and at which addresses.
//!
//! A `Plugin` author writes `spec.module`, so the registry is attacker-chosen: without a
//! rule the host fetches from loopback, the node's metadata service or a cluster Service
//! on the author's behalf. The rules:
//!
//! - `--allowed-registry PATTERN` (repeatable): `HOST[:PORT]` exactly, or `*.SUFFIX[:PORT]`
//!   for any host under `SUFFIX`. The port is part of the match: `ghcr.io` matches
//!   references without a port only. With no pattern, any registry passes this rule.
//! - Whatever the patterns, an address that is not public (loopback, link-local,
//!   unspecified, private, shared, ULA, multicast; names such as `localhost`, `*.svc`,
//!   `*.cluster.local` or a single label) is refused unless that registry is *named*:
//!   listed exactly (not by a `*.` pattern) in `--allowed-registry` or
//!   `--insecure-registry`. Resolved addresses are checked when connecting (see
//!   [`GuardedResolver`]), so a name that resolves to a private address later (DNS
//!   rebinding) is refused too.
//! - Redirects never go from HTTPS to HTTP, and never to another host, except for blob
//!   downloads, which registries commonly send to a CDN: those may go to another HTTPS
//!   host that passes the same rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;

/// An operator's registry rules (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    allowed: Vec<Pattern>,
    insecure: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    /// `*.SUFFIX`: any host ending in `.SUFFIX`.
    wildcard: bool,
    /// The host (or suffix), lowercase.
    host: String,
    /// The port as written, if one was.
    port: Option<String>,
}

impl Pattern {
    fn parse(s: &str) -> Result<Pattern, String> {
        let lower = s.trim().to_ascii_lowercase();
        let (wildcard, rest) = match lower.strip_prefix("*.") {
            Some(rest) => (true, rest.to_string()),
            None => (false, lower.clone()),
        };
        let (host, port) = split_host_port(&rest);
        let bad = || {
            format!(
                "{s:?}: an allowed registry is HOST[:PORT] or *.DOMAIN[:PORT] (no scheme, no path)"
            )
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-.[]:".contains(c))
        {
            return Err(bad());
        }
        if let Some(p) = &port
            && !matches!(p.parse::<u16>(), Ok(n) if n > 0)
        {
            return Err(bad());
        }
        Ok(Pattern {
            wildcard,
            host: host.to_string(),
            port: port.map(str::to_string),
        })
    }

    fn matches(&self, host: &str, port: Option<&str>) -> bool {
        let host_ok = if self.wildcard {
            host.strip_suffix(&self.host)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
        } else {
            host == self.host
        };
        host_ok && self.port.as_deref() == port
    }
}

/// Whether `registry` (`HOST[:PORT]` as a reference names it) matches `pattern`, an
/// `--allowed-registry` pattern (`HOST[:PORT]` exactly, or `*.DOMAIN[:PORT]`); a pattern
/// that does not parse matches nothing.
pub fn registry_matches(pattern: &str, registry: &str) -> bool {
    let Ok(p) = Pattern::parse(pattern) else {
        return false;
    };
    let registry = registry.to_ascii_lowercase();
    let (host, port) = split_host_port(&registry);
    p.matches(host, port)
}

/// `HOST[:PORT]` → (host, port), an IPv6 literal keeping its brackets.
fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if s.starts_with('[') {
        return match s.find(']') {
            Some(end) => (
                &s[..=end],
                s[end + 1..].strip_prefix(':').filter(|p| !p.is_empty()),
            ),
            None => (s, None),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    }
}

/// Why a host is not one the host may reach.
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Policy {
    /// Rules from `--allowed-registry` patterns and `--insecure-registry` entries.
    pub(crate) fn new(allowed: &[String], insecure: &[String]) -> Result<Policy, String> {
        Ok(Policy {
            allowed: allowed
                .iter()
                .map(|p| Pattern::parse(p))
                .collect::<Result<_, _>>()?,
            insecure: insecure.iter().map(|i| i.to_ascii_lowercase()).collect(),
        })
    }

    /// Whether `registry` (`HOST[:PORT]` as in a reference) is reached over plain HTTP.
    pub(crate) fn is_insecure(&self, registry: &str) -> bool {
        self.insecure.contains(&registry.to_ascii_lowercase())
    }

    /// Whether `registry` is named exactly by the operator (so its address may be private).
    fn named(&self, registry: &str) -> bool {
        let registry = registry.to_ascii_lowercase();
        let (host, port) = split_host_port(&registry);
        self.is_insecure(&registry)
            || self
                .allowed
                .iter()
                .any(|p| !p.wildcard && p.matches(host, port))
    }

    /// Whether host name `host` (no port) is named exactly in some entry: the resolver
    /// sees names without ports.
    fn host_named(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.insecure.iter().any(|i| split_host_port(i).0 == host)
            || self.allowed.iter().any(|p| !p.wildcard && p.host == host)
    }

    /// Whether the registry `registry` (as written in the reference), reached at `url`,
    /// may be contacted. Literal addresses are checked here (no resolver sees them); names
    /// are checked again on the addresses they resolve to.
    pub(crate) fn check(&self, registry: &str, url: &Url) -> Result<(), String> {
        if self.named(registry) {
            return Ok(());
        }
        let lower = registry.to_ascii_lowercase();
        let (host, port) = split_host_port(&lower);
        // The resolver lets a named host's private addresses through whatever the port
        // (it sees no port): another port of that host is refused here.
        if self.host_named(host) {
            return Err(format!(
                "registry {registry}: its host is named (--allowed-registry or \
                 --insecure-registry) only with another port"
            ));
        }
        if !self.allowed.is_empty() && !self.allowed.iter().any(|p| p.matches(host, port)) {
            return Err(format!(
                "registry {registry} is not allowed: the host allows only {} (--allowed-registry)",
                self.allowed_list()
            ));
        }
        check_address(url).map_err(|why| {
            format!(
                "registry {registry}: {why}; a registry there must be named explicitly \
                 (--allowed-registry {registry}, or --insecure-registry for plain HTTP)"
            )
        })
    }

    /// Whether a redirect from `from` to `to` may be followed. `cross_host`: the request
    /// may go to another host (blob downloads), which must then be HTTPS and pass the
    /// same rules as a registry named by its `HOST[:PORT]`.
    pub(crate) fn check_redirect(
        &self,
        from: &Url,
        to: &Url,
        cross_host: bool,
    ) -> Result<(), String> {
        if from.scheme() == "https" && to.scheme() != "https" {
            return Err(format!(
                "redirect from HTTPS to {} refused ({})",
                to.scheme().to_ascii_uppercase(),
                host_port(to)
            ));
        }
        if to.scheme() != "https" && to.scheme() != "http" {
            return Err(format!("redirect to a {} URL refused", to.scheme()));
        }
        let same_host =
            from.host() == to.host() && from.port_or_known_default() == to.port_or_known_default();
        if same_host {
            return Ok(());
        }
        if !cross_host {
            return Err(format!(
                "redirect to another host ({}) refused",
                host_port(to)
            ));
        }
        if to.scheme() != "https" {
            return Err(format!(
                "redirect to another host over plain HTTP ({}) refused",
                host_port(to)
            ));
        }
        self.check(&host_port(to), to)
    }

    fn allowed_list(&self) -> String {
        self.allowed
            .iter()
            .map(|p| {
                format!(
                    "{}{}{}",
                    if p.wildcard { "*." } else { "" },
                    p.host,
                    p.port.as_ref().map(|p| format!(":{p}")).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `HOST[:PORT]` of `url`, the port only when not the scheme's default.
pub(crate) fn host_port(url: &Url) -> String {
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => format!("[{a}]"),
        Some(h) => h.to_string(),
        None => String::new(),
    };
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

/// Why `url`'s host is not a public one, by its literal address or its name.
fn check_address(url: &Url) -> Result<(), String> {
    match url.host() {
        Some(url::Host::Ipv4(a)) => public(IpAddr::V4(a)),
        Some(url::Host::Ipv6(a)) => public(IpAddr::V6(a)),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let internal = !name.contains('.')
                || ["localhost", "svc", "cluster.local", "local", "internal"]
                    .iter()
                    .any(|s| name == *s || name.ends_with(&format!(".{s}")));
            if internal {
                Err(format!("{name} is a local or cluster-internal name"))
            } else {
                Ok(())
            }
        }
        None => Err("no host".into()),
    }
}

/// Ok for a public unicast address; otherwise what kind of address it is.
pub(crate) fn public(ip: IpAddr) -> Result<(), String> {
    let kind = match ip {
        IpAddr::V4(a) => v4_kind(a),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => v4_kind(v4),
            None => v6_kind(a),
        },
    };
    match kind {
        None => Ok(()),
        Some(kind) => Err(format!("{ip} is a {kind} address")),
    }
}

fn v4_kind(a: Ipv4Addr) -> Option<&'static str> {
    let [o0, o1, ..] = a.octets();
    if a.is_loopback() {
        Some("loopback")
    } else if a.is_link_local() {
        Some("link-local")
    } else if a.is_unspecified() || o0 == 0 {
        Some("unspecified")
    } else if a.is_private() {
        Some("private")
    } else if o0 == 100 && (o1 & 0xc0) == 64 {
        // 100.64/10, carrier-grade NAT: some clusters' pod and service ranges.
        Some("shared (100.64/10)")
    } else if a.is_multicast() || a.is_broadcast() || o0 >= 240 {
        Some("multicast or reserved")
    } else {
        None
    }
}

fn v6_kind(a: Ipv6Addr) -> Option<&'static str> {
    let s0 = a.segments()[0];
    if a.is_loopback() {
        Some("loopback")
    } else if a.is_unspecified() {
        Some("unspecified")
    } else if (s0 & 0xffc0) == 0xfe80 || (s0 & 0xffc0) == 0xfec0 {
        Some("link-local")
    } else if (s0 & 0xfe00) == 0xfc00 {
        Some("unique local (private)")
    } else if a.is_multicast() {
        Some("multicast")
    } else if a.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: the IPv4 address inside decides.
        let [.., a6, a7] = a.segments();
        v4_kind(Ipv4Addr::new(
            (a6 >> 8) as u8,
            a6 as u8,
            (a7 >> 8) as u8,
            a7 as u8,
        ))
    } else {
        None
    }
}

/// A DNS resolver that drops addresses a registry may not have unless the name was named
/// explicitly by the operator: the check happens on the addresses actually connected to.
pub(crate) struct GuardedResolver {
    pub(crate) policy: Arc<Policy>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if policy.host_named(&host) {
                return Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs);
            }
            let mut refused = None;
            let kept: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| match public(a.ip()) {
                    Ok(()) => true,
                    Err(why) => {
                        refused.get_or_insert(why);
                        false
                    }
                })
                .collect();
            if kept.is_empty() {
                let why = refused.unwrap_or_else(|| "no address".into());
                return Err(Box::new(Refused(format!(
                    "{host} resolves to {why}; a registry there must be named explicitly (--allowed-registry)"
                )))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("url")
    }

    #[test]
    fn patterns() {
        let p = Policy::new(
            &[
                "ghcr.io".into(),
                "*.example.com".into(),
                "reg.io:5000".into(),
            ],
            &[],
        )
        .expect("policy");
        assert!(p.check("ghcr.io", &url("https://ghcr.io/v2/")).is_ok());
        assert!(p.check("GHCR.io", &url("https://ghcr.io/v2/")).is_ok());
        assert!(
            p.check("a.example.com", &url("https://a.example.com/"))
                .is_ok()
        );
        assert!(
            p.check("a.b.example.com:444", &url("https://a.b.example.com:444/"))
                .is_err(),
            "the port is part of the match"
        );
        assert!(
            p.check("example.com", &url("https://example.com/"))
                .is_err()
        );
        assert!(
            p.check("evilexample.com", &url("https://evilexample.com/"))
                .is_err()
        );
        assert!(p.check("reg.io:5000", &url("https://reg.io:5000/")).is_ok());
        assert!(p.check("reg.io", &url("https://reg.io/")).is_err());
        let err = p
            .check("docker.io", &url("https://docker.io/"))
            .unwrap_err();
        assert!(err.contains("ghcr.io, *.example.com, reg.io:5000"), "{err}");
        for bad in ["", "https://x", "x/y", "*", "*.", "a.*.b", "x:0", "x:port"] {
            assert!(Policy::new(&[bad.into()], &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn private_addresses_only_when_named() {
        let open = Policy::new(&[], &[]).expect("policy");
        for (registry, u) in [
            ("127.0.0.1:5000", "http://127.0.0.1:5000/"),
            ("2130706433:5000", "https://2130706433:5000/"),
            ("169.254.169.254", "https://169.254.169.254/"),
            ("10.96.0.1", "https://10.96.0.1/"),
            ("192.168.1.2", "https://192.168.1.2/"),
            ("100.64.0.1", "https://100.64.0.1/"),
            ("0.0.0.0", "https://0.0.0.0/"),
            ("[::1]:5000", "https://[::1]:5000/"),
            ("[fe80::1]", "https://[fe80::1]/"),
            ("[fd00::1]", "https://[fd00::1]/"),
            ("[::ffff:127.0.0.1]", "https://[::ffff:127.0.0.1]/"),
            ("[64:ff9b::a00:1]", "https://[64:ff9b::a00:1]/"),
            ("localhost:5000", "https://localhost:5000/"),
            ("registry:5000", "https://registry:5000/"),
            ("reg.kube-system.svc", "https://reg.kube-system.svc/"),
            (
                "reg.ns.svc.cluster.local",
                "https://reg.ns.svc.cluster.local/",
            ),
        ] {
            assert!(open.check(registry, &url(u)).is_err(), "{registry}");
        }
        assert!(open.check("ghcr.io", &url("https://ghcr.io/")).is_ok());
        assert!(open.check("8.8.8.8", &url("https://8.8.8.8/")).is_ok());

        let named =
            Policy::new(&["127.0.0.1:5000".into()], &["localhost:5001".into()]).expect("policy");
        assert!(
            named
                .check("127.0.0.1:5000", &url("http://127.0.0.1:5000/"))
                .is_ok()
        );
        assert!(
            named
                .check("localhost:5001", &url("http://localhost:5001/"))
                .is_ok()
        );
        assert!(
            named
                .check("127.0.0.1:5002", &url("http://127.0.0.1:5002/"))
                .is_err()
        );
        let internal = Policy::new(&[], &["reg.corp.example:5000".into()]).expect("policy");
        let err = internal
            .check(
                "reg.corp.example:6000",
                &url("https://reg.corp.example:6000/"),
            )
            .unwrap_err();
        assert!(err.contains("only with another port"), "{err}");
        // Named exactly as written: another spelling of the same address is not named.
        assert!(
            named
                .check("2130706433:5000", &url("http://2130706433:5000/"))
                .is_err()
        );
        // A pattern does not name private addresses.
        let wild = Policy::new(&["*.corp.example".into()], &[]).expect("policy");
        assert!(
            wild.check("a.corp.example", &url("https://a.corp.example/"))
                .is_ok()
        );
        assert!(!wild.host_named("localhost"));
        assert!(named.host_named("localhost") && named.host_named("127.0.0.1"));
    }

    #[test]
    fn redirects() {
        let p = Policy::new(&[], &[]).expect("policy");
        let from = url("https://reg.example.com/v2/x/blobs/sha256:1");
        // Same host, same scheme.
        assert!(
            p.check_redirect(&from, &url("https://reg.example.com/other"), false)
                .is_ok()
        );
        // HTTPS to HTTP, even on the same host.
        let err = p
            .check_redirect(&from, &url("http://reg.example.com/v2/"), true)
            .unwrap_err();
        assert!(err.contains("HTTPS to HTTP"), "{err}");
        // Another host: only for blobs, only HTTPS, only an allowed public host.
        assert!(
            p.check_redirect(&from, &url("https://cdn.example.net/b"), false)
                .is_err()
        );
        assert!(
            p.check_redirect(&from, &url("https://cdn.example.net/b"), true)
                .is_ok()
        );
        assert!(
            p.check_redirect(&from, &url("https://127.0.0.1/b"), true)
                .is_err()
        );
        assert!(
            p.check_redirect(&from, &url("https://169.254.169.254/b"), true)
                .is_err()
        );
        let insecure = url("http://127.0.0.1:5000/v2/");
        assert!(
            p.check_redirect(&insecure, &url("http://127.0.0.2:5000/"), true)
                .is_err()
        );
        let allow = Policy::new(&["reg.example.com".into()], &[]).expect("policy");
        assert!(
            allow
                .check_redirect(&from, &url("https://cdn.example.net/b"), true)
                .is_err()
        );
        assert!(
            p.check_redirect(&from, &url("file:///etc/passwd"), true)
                .is_err()
        );
    }
}
