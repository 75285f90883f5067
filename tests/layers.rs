//! The crates' dependencies point one way: kubewasm-core depends on no other kubewasm
//! crate; kubewasm-runtime only on core; the engine (`kubewasm`) on core, runtime, the OCI
//! client and the embedded API server (`kubewasm test` runs each case on one); the
//! CLI on the engine (and the embedded API server, for `kubewasm dev`); the embedded API
//! server only on core; the OCI client (kubewasm-oci) on no kubewasm crate. Checked on `cargo metadata`, so a new dependency that breaks the
//! layering fails the test suite.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Normal (non-dev) dependencies on workspace crates, by crate.
fn workspace_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str().map(str::to_string))
                .filter(|n| members.contains(n))
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect()
}

#[test]
fn dependencies_point_one_way() {
    let deps = workspace_dependencies();
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("kubewasm-core", &[][..]),
        ("kubewasm-runtime", &["kubewasm-core"][..]),
        // The engine pulls Plugin objects' modules, and runs `kubewasm test`'s cases on
        // the embedded API server.
        (
            "kubewasm",
            &[
                "kubewasm-core",
                "kubewasm-runtime",
                "kubewasm-oci",
                "kubewasm-apiserver",
            ][..],
        ),
        (
            "kubewasm-cli",
            &["kubewasm", "kubewasm-apiserver", "kubewasm-oci"][..],
        ),
        ("kubewasm-apiserver", &["kubewasm-core"][..]),
        ("kubewasm-oci", &[][..]),
    ]);
    assert_eq!(
        deps.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        allowed.keys().copied().collect::<BTreeSet<_>>(),
        "the workspace's crates changed: say here what each may depend on"
    );
    for (krate, uses) in &deps {
        let may: BTreeSet<&str> = allowed[krate.as_str()].iter().copied().collect();
        for dep in uses {
            assert!(
                may.contains(dep.as_str()),
                "{krate} depends on {dep}, against the layering (allowed: {may:?})"
            );
        }
    }
}

/// The layers hold for what each crate's sources name, too: no `use` of a crate it does
/// not depend on can slip in through a re-export (e.g. the CLI reaching past the engine's
/// facade to `kubewasm_runtime` directly is fine only through `kubewasm::runtime`).
#[test]
fn sources_name_only_their_layers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let forbidden: &[(&str, &[&str])] = &[
        (
            "core/src",
            &[
                "kubewasm_runtime",
                "kubewasm::",
                "kubewasm_apiserver",
                "wasmtime",
                "kube::",
            ],
        ),
        (
            "runtime/src",
            &["kubewasm::", "kubewasm_apiserver", "kube::"],
        ),
        (
            "oci/src",
            &[
                "kubewasm::",
                "kubewasm_core",
                "kubewasm_runtime",
                "kubewasm_apiserver",
                "wasmtime",
                "kube::",
            ],
        ),
        ("cli/src", &["kubewasm_core", "kubewasm_runtime"]),
    ];
    // A unit-test module (a `tests.rs` its parent declares under `#[cfg(test)]`) is not
    // part of the built crate: it may use the crate's dev-dependencies.
    let dev_only: &[(&str, &[&str])] = &[];
    for (dir, names) in forbidden {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).expect("readable source");
            let allowed: &[&str] = if is_test_module(&file) {
                dev_only
                    .iter()
                    .find(|(d, _)| d == dir)
                    .map_or(&[][..], |(_, n)| n)
            } else {
                &[]
            };
            // Code only: comments may name other layers (to say they are not used).
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for name in names.iter().filter(|n| !allowed.contains(*n)) {
                    assert!(
                        !mentions(line, name),
                        "{}:{}: names {name}, which its layer may not use",
                        file.display(),
                        n + 1
                    );
                }
            }
        }
    }
}

/// Whether `file` is `X/tests.rs` and `X.rs` (or `X/mod.rs`) declares it as
/// `#[cfg(test)] mod tests;`, so it is compiled for tests only.
fn is_test_module(file: &std::path::Path) -> bool {
    if file.file_name().is_none_or(|n| n != "tests.rs") {
        return false;
    }
    let Some(dir) = file.parent() else {
        return false;
    };
    let parents = [dir.with_extension("rs"), dir.join("mod.rs")];
    parents.iter().any(|p| {
        std::fs::read_to_string(p).is_ok_and(|text| {
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            lines
                .windows(2)
                .any(|w| w[0] == "#[cfg(test)]" && w[1] == "mod tests;")
        })
    })
}

/// Whether `line` names the path `name` from its root: not as the tail of a longer path
/// (`self::exports::kubewasm::plugin` is not the `kubewasm` crate).
fn mentions(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(i, _)| {
        !line[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("source dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}
