//! Kubernetes name rules (`k8s.io/apimachinery/pkg/util/validation`), the one
//! implementation used by manifests, intents, the CLI and the embedded API server.
//!
//! Two layers: [`validate_name`] is what kube-apiserver accepts for a resource (its
//! messages, word for word); `check_request_name` adds what kubewasm needs before a
//! name becomes part of a request path: kube-core does not escape names, so a name with
//! `?`, `#`, `%` or `/` would change the URL (`web?dryRun=All&`).

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

/// RFC 1035 label: an RFC 1123 label that starts with a letter (Service names).
pub(crate) fn is_dns1035_label(s: &str) -> bool {
    is_dns_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters. Most object names.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// How names of a resource are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 label (namespaces).
    Label,
    /// RFC 1035 label (services).
    Dns1035Label,
    /// RFC 1123 subdomain (most kinds).
    Subdomain,
    /// Any valid path segment (RBAC kinds).
    PathSegment,
}

/// The name rule kube-apiserver applies to a resource, by group and plural.
pub fn name_rule(group: &str, plural: &str) -> NameRule {
    match (group, plural) {
        ("", "namespaces") => NameRule::Label,
        ("", "services") => NameRule::Dns1035Label,
        ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Whether kube-apiserver accepts `name` under `rule`; its message when not.
pub fn validate_name(name: &str, rule: NameRule) -> Result<(), String> {
    match rule {
        NameRule::Label | NameRule::Dns1035Label => {
            let (ok, msg) = match rule {
                NameRule::Label => (is_dns_label(name), DNS1123_LABEL_MSG),
                _ => (is_dns1035_label(name), DNS1035_LABEL_MSG),
            };
            if ok {
                Ok(())
            } else if name.len() > 63 {
                Err("must be no more than 63 characters".into())
            } else {
                Err(msg.into())
            }
        }
        NameRule::Subdomain => {
            if name.len() > 253 {
                Err("must be no more than 253 characters".into())
            } else if name.split('.').all(is_dns_label) {
                Ok(())
            } else {
                Err(DNS1123_SUBDOMAIN_MSG.into())
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                Err(format!("may not be '{name}'"))
            } else if name.contains('/') || name.contains('%') {
                Err("may not contain '/' or '%'".into())
            } else {
                Ok(())
            }
        }
    }
}

/// Whether `name` can be put in a request path unescaped: printable ASCII without `/`,
/// `?`, `#`, `%` or spaces, not `.` or `..`, at most 253 bytes. Every name valid under
/// [`NameRule::Label`] or [`NameRule::Subdomain`] is.
pub fn is_path_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b'?' | b'#' | b'%' | b'\\'))
}

/// The check a name passes before kubewasm sends a request for it: kube-apiserver's
/// rule for the resource, and safe to put in a path unescaped.
pub(crate) fn check_request_name(name: &str, rule: NameRule) -> Result<(), String> {
    validate_name(name, rule)?;
    if is_path_safe(name) {
        Ok(())
    } else {
        Err("may not contain '?', '#', '%', '/', '\\', spaces or control characters".into())
    }
}

/// Whether a `kind` is a plausible Kubernetes kind: an ASCII letter, then letters and
/// digits, at most 63 characters (kinds are Go type names).
pub fn is_kind(kind: &str) -> bool {
    let b = kind.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphabetic()
        && b.iter().all(u8::is_ascii_alphanumeric)
}

/// A plugin-supplied string as it may appear in an error message: the one
/// [`crate::excerpt::excerpt`] (bounded, inert, marked when cut), owned.
pub fn excerpt(s: &str, max: usize) -> String {
    crate::excerpt::excerpt(s, max).into_owned()
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
        assert!(is_dns1035_label("web-1"));
        assert!(!is_dns1035_label("1web"));
    }

    #[test]
    fn rules_per_resource() {
        assert_eq!(name_rule("", "namespaces"), NameRule::Label);
        assert_eq!(name_rule("", "services"), NameRule::Dns1035Label);
        assert_eq!(name_rule("", "configmaps"), NameRule::Subdomain);
        assert_eq!(name_rule("apps", "services"), NameRule::Subdomain);
        assert_eq!(
            name_rule("rbac.authorization.k8s.io", "roles"),
            NameRule::PathSegment
        );
        assert!(validate_name("a-b.c", NameRule::Subdomain).is_ok());
        assert!(validate_name("Bad_Name", NameRule::Subdomain).is_err());
        assert!(validate_name("a.b", NameRule::Label).is_err());
        assert!(validate_name("1svc", NameRule::Dns1035Label).is_err());
        assert!(validate_name("1svc", NameRule::Label).is_ok());
        assert!(validate_name("system:admin", NameRule::PathSegment).is_ok());
        assert_eq!(
            validate_name(&"x".repeat(64), NameRule::Label).unwrap_err(),
            "must be no more than 63 characters"
        );
        assert_eq!(
            validate_name("..", NameRule::PathSegment).unwrap_err(),
            "may not be '..'"
        );
        assert!(validate_name("a%2f", NameRule::PathSegment).is_err());
    }

    #[test]
    fn request_names_cannot_smuggle_query_parameters() {
        for bad in [
            "web?x=",
            "?fieldManager=other&",
            "?dryRun=All&",
            "a#b",
            "a/b",
            "a%3Fb",
            "..",
            ".",
            "a b",
            "a\nb",
            "",
        ] {
            for rule in [
                NameRule::Label,
                NameRule::Dns1035Label,
                NameRule::Subdomain,
                NameRule::PathSegment,
            ] {
                assert!(
                    check_request_name(bad, rule).is_err(),
                    "{bad:?} under {rule:?}"
                );
            }
            assert!(!is_path_safe(bad), "{bad:?}");
        }
        assert!(check_request_name("system:controller:x", NameRule::PathSegment).is_ok());
        assert!(check_request_name("web-1.example", NameRule::Subdomain).is_ok());
    }

    #[test]
    fn kinds_and_excerpts() {
        assert!(is_kind("ConfigMap"));
        assert!(is_kind("V1Thing"));
        for bad in ["", "1Thing", "Config Map", "A/B", &"K".repeat(64)] {
            assert!(!is_kind(bad), "{bad:?}");
        }
        assert_eq!(excerpt("short", 10), "short");
        assert_eq!(excerpt("abcdef", 3), "abc… (3 bytes truncated)");
        assert_eq!(excerpt("ééé", 3), "é… (4 bytes truncated)");
        assert_eq!(excerpt("a\nb", 10), "a\\nb");
    }
}
