//! Fuzzing intent decoding (`kubewasm_core::intent::decode`) with the JSON text a hostile
//! plugin can return: arbitrary text, byte-level mutations of valid objects and patches,
//! deep nesting, huge and odd numbers, duplicate keys, every variant with arbitrary
//! reference strings. Decoding must never panic, must answer the same for the same input,
//! must honour the size limit, and an accepted intent must name its object.
//!
//! CI runs `FUZZ_CASES` cases per target (default 2,000: a few seconds). A longer run:
//! `FUZZ_CASES=2000000 cargo test -p kubewasm-core --release --test fuzz_intent`.
//! (`tests/intent_props.rs` holds the structured properties of decoding and grants.)

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use kubewasm_core::intent::{ObjectRef, Propagation, RawIntent, Strategy as PatchStrategy, decode};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Valid documents to mutate.
const SEEDS: &[&str] = &[
    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"},"data":{"k":"v"}}"#,
    r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"u","controller":true}]},"spec":{"replicas":3}}"#,
    r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[]}"#,
    r#"{"status":{"ready":true,"conditions":[{"type":"Ready","status":"True"}]}}"#,
    r#"{"metadata":{"finalizers":["x/y"],"annotations":{"a":"b"}}}"#,
    r#"[]"#,
    r#"null"#,
];

/// Text a plugin might return as JSON.
fn json_text() -> BoxedStrategy<String> {
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
                        // Splice in a JSON-significant token.
                        let tok: &[u8] = match b % 8 {
                            0 => b"{",
                            1 => b"}",
                            2 => b"\"",
                            3 => b"\\u0000",
                            4 => b"1e999999",
                            5 => b"-0.0",
                            6 => b",\"metadata\":{}",
                            _ => b"\xf0\x9f\x92\xa9",
                        };
                        bytes.splice(i..i, tok.iter().copied());
                    }
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        });
    let nested = (1usize..20_000, prop::bool::ANY).prop_map(|(depth, object)| {
        if object {
            "{\"a\":".repeat(depth) + "1" + &"}".repeat(depth)
        } else {
            "[".repeat(depth) + &"]".repeat(depth)
        }
    });
    let duplicate = ".{0,20}".prop_map(|n| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"a"}},"metadata":{{"name":{}}}}}"#,
            serde_json::Value::String(n)
        )
    });
    prop_oneof![
        3 => mutated,
        1 => any::<String>(),
        1 => "[\\{\\}\\[\\]\":,a-z0-9 .eE+-]{0,64}",
        1 => nested,
        1 => duplicate,
    ]
    .boxed()
}

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9.-]{1,20}",
        "[a-zA-Z0-9/?#&=%._ -]{0,40}",
        any::<String>(),
    ]
    .boxed()
}

fn object_ref() -> impl Strategy<Value = ObjectRef> {
    (text(), text(), prop::option::of(text()), text()).prop_map(
        |(api_version, kind, namespace, name)| ObjectRef {
            api_version,
            kind,
            namespace,
            name,
        },
    )
}

fn raw_intent() -> BoxedStrategy<RawIntent> {
    prop_oneof![
        (json_text(), any::<bool>(), any::<bool>()).prop_map(|(object, force, owned)| {
            RawIntent::Create {
                object,
                force,
                owned_by_trigger: owned,
            }
        }),
        (
            object_ref(),
            json_text(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(target, body, apply, status, force)| RawIntent::Patch {
                target,
                body,
                strategy: if apply {
                    PatchStrategy::Apply
                } else {
                    PatchStrategy::Merge
                },
                status,
                force,
            }),
        (
            object_ref(),
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(0u8..3)
        )
            .prop_map(|(target, uid, rv, p)| RawIntent::Delete {
                target,
                uid,
                resource_version: rv,
                propagation: p.map(|p| match p {
                    0 => Propagation::Background,
                    1 => Propagation::Foreground,
                    _ => Propagation::Orphan,
                }),
            }),
    ]
    .boxed()
}

fn json_len(raw: &RawIntent) -> usize {
    match raw {
        RawIntent::Create { object, .. } => object.len(),
        RawIntent::Patch { body, .. } => body.len(),
        RawIntent::Delete { .. } => 0,
    }
}

#[test]
fn decoding_arbitrary_intents_never_panics_and_accepted_ones_name_their_object() {
    let mut runner = runner();
    let accepted = std::cell::Cell::new(0u64);
    let started = std::time::Instant::now();
    runner
        .run(&(raw_intent(), 0usize..4096), |(raw, max)| {
            let again = decode(raw.clone(), max);
            let decoded = decode(raw.clone(), max);
            prop_assert_eq!(format!("{again:?}"), format!("{decoded:?}"));
            if let Ok(intent) = decoded {
                accepted.set(accepted.get() + 1);
                prop_assert!(
                    json_len(&raw) <= max,
                    "accepted {} bytes over {max}",
                    json_len(&raw)
                );
                prop_assert!(!intent.target.name.is_empty(), "{intent:?}");
                prop_assert!(!intent.target.kind.is_empty(), "{intent:?}");
                prop_assert!(!intent.target.api_version.is_empty(), "{intent:?}");
                let _ = intent.describe();
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

#[test]
fn mutated_valid_objects_decode_or_fail_cleanly_at_any_size_limit() {
    let mut runner = runner();
    runner
        .run(&(json_text(), any::<bool>()), |(object, force)| {
            let raw = RawIntent::Create {
                object,
                force,
                owned_by_trigger: false,
            };
            // With no room at all, nothing passes.
            prop_assert!(decode(raw.clone(), 0).is_err() || json_len(&raw) == 0);
            let _ = decode(raw, 1 << 20);
            Ok(())
        })
        .unwrap();
}
