//! Fuzzing `excerpt`, the one function plugin text passes before the host writes it
//! anywhere: for any text and bound, the excerpt is at most the bound plus its note,
//! holds no control or display-changing character, is a prefix of the text's escaped
//! form, and says exactly how many bytes were left out.
//!
//! CI runs `FUZZ_CASES` cases (default 500: a few seconds in a debug build). A longer run:
//! `FUZZ_CASES=2000000 cargo test -p kubewasm-core --release --test fuzz_excerpt`.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use kubewasm_core::excerpt::{NOTE_BYTES, excerpt};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// Text with many control and bidi characters, multi-byte characters and long runs.
fn text() -> BoxedStrategy<String> {
    let piece = prop_oneof![
        any::<char>().prop_map(|c| c.to_string()),
        prop::sample::select(vec![
            "\n",
            "\r\n",
            "\u{1b}[31m",
            "\u{1b}]0;t\u{7}",
            "\u{202e}",
            "\u{2066}",
            "\u{feff}",
            "é",
            "漢",
            "🦀",
            "\\n",
            "x",
            "\u{0}",
            "\u{85}",
            "\u{7f}",
        ])
        .prop_map(str::to_string),
        "[a-z]{0,64}",
    ];
    prop::collection::vec(piece, 0..200)
        .prop_map(|v| v.concat())
        .boxed()
}

/// What `excerpt` escapes, as it says: controls and the display-changing format marks.
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[test]
fn excerpts_are_bounded_inert_and_honest() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let started = std::time::Instant::now();
    runner
        .run(&(text(), 0usize..300), |(t, max)| {
            let e = excerpt(&t, max);
            prop_assert!(e.len() <= max + NOTE_BYTES, "{} > {max}", e.len());
            prop_assert!(!e.chars().any(escaped), "{e:?}");
            let full: String = t
                .chars()
                .map(|c| {
                    if escaped(c) {
                        c.escape_default().to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            match e.split_once("… (") {
                Some((kept, note)) if note.ends_with(" bytes truncated)") && full.len() > max => {
                    prop_assert!(full.starts_with(kept), "{kept:?} of {full:?}");
                    prop_assert!(kept.len() <= max);
                    let cut: usize = note
                        .trim_end_matches(" bytes truncated)")
                        .parse()
                        .map_err(|_| TestCaseError::fail(format!("note {note:?}")))?;
                    // The bytes of the text the kept part does not show.
                    let (mut shown, mut taken) = (0, 0);
                    for c in t.chars() {
                        if shown == kept.len() {
                            break;
                        }
                        shown += if escaped(c) {
                            c.escape_default().count()
                        } else {
                            c.len_utf8()
                        };
                        taken += c.len_utf8();
                    }
                    prop_assert_eq!(shown, kept.len());
                    prop_assert_eq!(cut, t.len() - taken);
                    prop_assert!(cut > 0 && cut <= t.len(), "{cut} of {}", t.len());
                }
                _ => {
                    prop_assert_eq!(e.as_ref(), full.as_str());
                    prop_assert!(full.len() <= max);
                }
            }
            Ok(())
        })
        .unwrap();
    eprintln!("{} cases in {:?}", cases(), started.elapsed());
}
