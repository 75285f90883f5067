//! Kubernetes name rules (`k8s.io/apimachinery/pkg/util/validation`).

/// RFC 1123 label: lowercase alphanumerics and `-`, starting and ending alphanumeric, at
/// most 63 characters. Namespaces, plugin names and most object names' segments.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters. Most object names.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        for ok in ["a", "web-1", "0x"] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in [
            "",
            "Upper",
            "has space",
            "-lead",
            "trail-",
            &"x".repeat(64),
            "a.b",
        ] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert!(is_dns1123_subdomain("example.com"));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(".a"));
        assert!(!is_dns1123_subdomain(&"a.".repeat(127)));
    }
}
