//! The string formats CRDs keep and the strfmt checks of each.

/// String formats a CRD schema keeps (`supportedFormats` of apiextensions-apiserver,
/// names without dashes); any other format is stripped and never checked.
pub(super) const SUPPORTED_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The strfmt checks of the formats CRDs keep (name without dashes).
pub(super) fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s, None),
        "uuid3" => is_uuid(s, Some('3')),
        "uuid4" => is_uuid(s, Some('4')),
        "uuid5" => is_uuid(s, Some('5')),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<std::net::IpAddr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "hostname" => is_hostname(s),
        "email" => is_email(s),
        "uri" => is_uri(s),
        "duration" => is_duration(s),
        // password, isbn, creditcard, ssn, colors, bsonobjectid: accepted as any string.
        _ => true,
    }
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// RFC 3339 full-date, as Go's `time.Parse("2006-01-02")` accepts it.
fn is_date(s: &str) -> bool {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
        && s.len() == 10
        && s.as_bytes().get(4) == Some(&b'-')
}

/// strfmt `IsDateTime`: a full date, `t`, and `hh:mm:ss[.frac](z|±hh:mm)`.
pub(super) fn is_date_time(s: &str) -> bool {
    // Everything the format allows is ASCII; checking first keeps the byte slicing
    // below on character boundaries.
    if s.len() < 4 || !s.is_ascii() {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (hh, mm, ss) = (&time[0..2], &time[3..5], &time[6..8]);
    if !(digits(hh) && digits(mm) && digits(ss)) {
        return false;
    }
    let mut rest = &time[8..];
    if rest.len() > 1 && !rest.starts_with(['z', '+', '-']) {
        // `(.[0-9]+)?`: any one character followed by digits.
        let frac_end = rest[1..]
            .find(|c: char| !c.is_ascii_digit())
            .map(|i| i + 1)
            .unwrap_or(rest.len());
        if frac_end < 2 {
            return false;
        }
        rest = &rest[frac_end..];
    }
    let zone_ok = rest == "z"
        || (rest.len() == 6
            && rest.starts_with(['+', '-'])
            && digits(&rest[1..3])
            && &rest[3..4] == ":"
            && digits(&rest[4..6]));
    zone_ok && hh <= "23" && mm <= "59" && ss <= "59"
}

/// govalidator's base64 pattern: groups of four, optional `=` padding, not empty.
pub(super) fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let ok = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    pad <= 2 && b[..b.len() - pad].iter().all(|c| ok(*c))
}

fn is_uuid(s: &str, version: Option<char>) -> bool {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    let dashed = s.len() == 36;
    if dashed
        && !s
            .char_indices()
            .all(|(i, c)| (c == '-') == matches!(i, 8 | 13 | 18 | 23))
    {
        return false;
    }
    if !(dashed || s.len() == 32) || hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit())
    {
        return false;
    }
    match version {
        None => true,
        Some(v) => {
            let variant = hex.as_bytes()[16].to_ascii_lowercase();
            hex.as_bytes()[12] as char == v
                && (v == '3' || matches!(variant, b'8' | b'9' | b'a' | b'b'))
        }
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_mac(s: &str) -> bool {
    let groups: Vec<&str> = s.split([':', '-']).collect();
    matches!(groups.len(), 6 | 8 | 20)
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_hostname(s: &str) -> bool {
    s.len() <= 255
        && !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn is_email(s: &str) -> bool {
    s.split_once('@')
        .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'))
}

fn is_uri(s: &str) -> bool {
    s.starts_with('/')
        || s.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
}

/// Go `time.ParseDuration` style (`1h30m`, `10s`, `1.5ms`).
fn is_duration(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    let mut rest = s;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return false;
        }
        rest = &rest[num_end..];
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .find(|u| rest.starts_with(**u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}
