//! The one way a plugin-supplied string reaches a log line, an Event, a status, an
//! error or a metric: [`excerpt`].
//!
//! A plugin controls its strings' length (megabytes: a canonical-ABI string may alias a
//! buffer the plugin paid for once) and content (newlines that forge log lines, ANSI
//! escapes that rewrite a terminal, bidirectional overrides that reorder what a reader
//! sees). An excerpt is bounded and inert: at most `max` bytes of the text, every control
//! character escaped, and, when cut, a note saying how much was left out, so a reader
//! never mistakes an excerpt for the whole.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Bytes an excerpt adds past `max` at most: the note `… (N bytes truncated)`.
pub const NOTE_BYTES: usize = "… ( bytes truncated)".len() + 20;

/// Whether `c` is escaped in an excerpt: C0 and C1 controls and DEL (newlines, ESC), and
/// the Unicode format characters that change how surrounding text displays (bidi
/// embeddings, overrides and isolates, zero-width marks, the BOM).
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `s` as a plugin's text may appear in the host's output: at most `max` bytes of it
/// (escapes included, cut at a character boundary), control and display-changing
/// characters escaped Rust-style (`\n`, `\u{1b}`), and when anything was cut, the note
/// `… (N bytes truncated)` naming how many bytes of `s` were left out. The result is at
/// most `max + NOTE_BYTES` bytes and borrows `s` when it needs no change. The part left
/// out is never read, so an excerpt of a huge string costs `max`, not its length.
pub fn excerpt(s: &str, max: usize) -> Cow<'_, str> {
    let clean = s.len() <= max && !s.chars().any(escaped);
    if clean {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(max.min(s.len()) + NOTE_BYTES);
    let mut taken = 0;
    let mut buf = [0u8; 4];
    for c in s.chars() {
        let piece: Cow<'_, str> = if escaped(c) {
            Cow::Owned(c.escape_default().to_string())
        } else {
            Cow::Borrowed(c.encode_utf8(&mut buf))
        };
        if out.len() + piece.len() > max {
            break;
        }
        out.push_str(&piece);
        taken += c.len_utf8();
    }
    if taken < s.len() {
        let _ = write!(out, "… ({} bytes truncated)", s.len() - taken);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_clean_text_is_borrowed_unchanged() {
        assert!(matches!(excerpt("no db", 10), Cow::Borrowed("no db")));
        assert!(matches!(excerpt("", 0), Cow::Borrowed("")));
        assert_eq!(excerpt("ünïcode ok", 64), "ünïcode ok");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(excerpt("a\nb", 64), r"a\nb");
        assert_eq!(excerpt("\u{1b}[31mred", 64), r"\u{1b}[31mred");
        assert_eq!(excerpt("tab\there\r", 64), r"tab\there\r");
        assert_eq!(excerpt("x\u{202e}gnp.exe", 64), r"x\u{202e}gnp.exe");
        assert_eq!(excerpt("del\u{7f}", 64), r"del\u{7f}");
        assert!(!excerpt("forged\n2026-01-01 INFO ok", 64).contains('\n'));
    }

    #[test]
    fn long_text_is_cut_and_says_how_much() {
        assert_eq!(excerpt("abcdef", 3), "abc… (3 bytes truncated)");
        // Cut at a character boundary: "é" is two bytes.
        assert_eq!(excerpt("ééé", 3), "é… (4 bytes truncated)");
        // Escapes count against the bound; one that does not fit is left out whole.
        assert_eq!(excerpt("ab\ncd", 3), "ab… (3 bytes truncated)");
        let huge = "x".repeat(8 << 20);
        let e = excerpt(&huge, 4096);
        assert!(e.len() <= 4096 + NOTE_BYTES, "{}", e.len());
        assert!(e.ends_with(&format!("({} bytes truncated)", (8 << 20) - 4096)));
        let worst = format!("{}", usize::MAX);
        assert!(format!("… ({worst} bytes truncated)").len() <= NOTE_BYTES);
    }

    #[test]
    fn an_excerpt_never_exceeds_its_bound() {
        let texts = ["\n".repeat(100), "é\u{1b}".repeat(100), "a".repeat(100)];
        for t in &texts {
            for max in [0, 1, 2, 5, 17, 99, 1000] {
                let e = excerpt(t, max);
                assert!(e.len() <= max + NOTE_BYTES, "{max}: {e:?}");
                assert!(!e.chars().any(escaped), "{e:?}");
            }
        }
    }
}
