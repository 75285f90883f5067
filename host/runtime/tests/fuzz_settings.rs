//! Fuzzing the settings parser: a plugin's `NAME.yaml` / `NAME.json` as the operator (or
//! whoever can write the plugin ConfigMap) may write it, read through
//! `PluginFile::read` — YAML or JSON to JSON, then the host's own `kubewasm:` key (limit
//! overrides; an `approved` key, which approvals no longer use, is refused) taken out. Arbitrary text, mutated valid settings, anchors
//! and aliases, deep nesting, odd numbers and durations: reading must never panic, must
//! answer the same twice, and accepted settings must no longer hold the `kubewasm` key.
//!
//! CI runs `FUZZ_CASES` cases per target (default 300: a few seconds, each case writes
//! files). A longer run:
//! `FUZZ_CASES=200000 cargo test -p kubewasm-runtime --release --test fuzz_settings`.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use kubewasm_runtime::Limits;
use kubewasm_runtime::PluginFile;

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

const SEEDS: &[&str] = &[
    "name: web\nselector: app=web\n",
    "kubewasm:\n  callDeadline: 5s\n  memoryMiB: 512\n  maxIntents: 1000\n  maxIntentKiB: 2048\n  maxLogLines: 500\n",
    "kubewasm:\n  approved:\n    grants:\n      - apiGroups: [\"\"]\n        kinds: [ConfigMap]\n        verbs: [create, patch]\n    reads: [v1/Secret]\nother: 1\n",
    "a: &x [1, 2, 3]\nb: *x\nc: {d: *x}\n",
    "kubewasm: {memoryMiB: 18446744073709551615, callDeadline: \"1y 2mon\"}\n",
    "list:\n  - 1\n  - two\n  - {three: 3}\nnull: ~\n",
    "{\"json\": true, \"kubewasm\": {\"maxIntents\": 3}}",
];

/// Settings text: mutated seeds, YAML-significant soup, alias towers, deep nesting.
fn settings_text() -> BoxedStrategy<String> {
    let mutated = (
        prop::sample::select(SEEDS),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 0..8),
    )
        .prop_map(|(seed, edits)| {
            let mut bytes = seed.as_bytes().to_vec();
            for (at, op, b) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 => bytes.insert(i, b),
                    1 if i < bytes.len() => {
                        bytes.remove(i);
                    }
                    2 if i < bytes.len() => bytes[i] = b,
                    _ => {
                        let tok: &[u8] = match b % 10 {
                            0 => b"&a ",
                            1 => b"*a",
                            2 => b"<<: ",
                            3 => b"!!binary ",
                            4 => b"\n  ",
                            5 => b"- ",
                            6 => b"kubewasm:",
                            7 => b"? ",
                            8 => b"!tag ",
                            _ => b"\t",
                        };
                        bytes.splice(i..i, tok.iter().copied());
                    }
                }
            }
            bytes
        })
        .prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    // Each level doubles the expansion: a billion-laughs tower.
    let aliases = (1usize..40).prop_map(|levels| {
        let mut s = String::from("l0: &l0 [x, x]\n");
        for i in 1..levels {
            s.push_str(&format!("l{i}: &l{i} [*l{p}, *l{p}]\n", p = i - 1));
        }
        s
    });
    let nested = (1usize..5_000, any::<bool>()).prop_map(|(depth, flow)| {
        if flow {
            "[".repeat(depth) + &"]".repeat(depth)
        } else {
            (0..depth.min(300))
                .map(|d| format!("{}k:\n", "  ".repeat(d)))
                .collect()
        }
    });
    prop_oneof![
        4 => mutated,
        1 => any::<String>(),
        1 => "[a-z:&*\\[\\]{}\n -]{0,80}",
        1 => aliases,
        1 => nested,
    ]
    .boxed()
}

#[test]
fn reading_arbitrary_settings_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("p.wasm");
    std::fs::write(&wasm, b"\0asm\r\0\x01\0").unwrap();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let started = std::time::Instant::now();
    let accepted = std::cell::Cell::new(0u64);
    runner
        .run(&(settings_text(), any::<bool>()), |(text, json)| {
            let (this, other) = if json {
                ("json", "yaml")
            } else {
                ("yaml", "json")
            };
            let _ = std::fs::remove_file(dir.path().join(format!("p.{other}")));
            std::fs::write(dir.path().join(format!("p.{this}")), &text).unwrap();
            let first = PluginFile::read(&wasm);
            let second = PluginFile::read(&wasm);
            match (&first, &second) {
                (Ok(a), Ok(b)) => {
                    accepted.set(accepted.get() + 1);
                    prop_assert_eq!(a.fingerprint(), b.fingerprint());
                    if let Some(s) = &a.settings {
                        // What the plugin gets must parse, and no longer hold the host's key.
                        let v = serde_json::from_str::<serde_json::Value>(s);
                        prop_assert!(v.is_ok(), "settings the plugin cannot parse: {v:?}");
                        prop_assert!(
                            v.ok().and_then(|v| v.get("kubewasm").cloned()).is_none(),
                            "{s}"
                        );
                    }
                    let _ = a.overrides.apply(&Limits::default());
                }
                (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                _ => prop_assert!(false, "read twice, answered differently: {text:?}"),
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "{} cases ({} accepted) in {:?}",
        cases(),
        accepted.get(),
        started.elapsed()
    );
}

/// Found by the long run: YAML nested 128 levels deep parses, but its JSON form is one
/// level past serde_json's limit, and the host used to read it as null, so the `kubewasm`
/// key (the operator's limits) was ignored and handed to the plugin.
#[test]
fn settings_nested_past_the_json_depth_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("p.wasm");
    std::fs::write(&wasm, b"\0asm\r\0\x01\0").unwrap();
    let deep: String = (0..128)
        .map(|d| format!("{}k:\n", "  ".repeat(d)))
        .collect();
    let text = format!("kubewasm:\n  maxIntents: 1\n{deep}");
    std::fs::write(dir.path().join("p.yaml"), text).unwrap();
    match PluginFile::read(&wasm) {
        Err(e) => assert!(e.to_string().contains("not representable as JSON"), "{e}"),
        Ok(f) => {
            assert_eq!(
                f.overrides.max_intents,
                Some(1),
                "the host's key was ignored"
            );
            assert!(!f.settings.unwrap_or_default().contains("kubewasm"));
        }
    }
}
