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

/// The longest a function of the engine may be, in lines from its `fn` to its closing
/// brace: past this a function does several things, and is split (issue 31).
const LONGEST_ENGINE_FUNCTION: usize = 80;

/// Every function of the engine (test modules aside) fits in [`LONGEST_ENGINE_FUNCTION`]
/// lines: the loops are small stages one can read and test alone.
#[test]
fn engine_functions_are_small() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src");
    let mut long = Vec::new();
    for file in rust_files(&src) {
        if is_test_module(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (name, line, lines) in function_lengths(&text) {
            if lines > LONGEST_ENGINE_FUNCTION {
                let shown = file.strip_prefix(&src).unwrap_or(&file).display();
                long.push(format!("{shown}:{line} fn {name}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "engine functions over {LONGEST_ENGINE_FUNCTION} lines (split them):\n{}",
        long.join("\n")
    );
}

/// The functions of `text` outside its `#[cfg(test)]` module: (name, first line, lines).
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let code = strip_comments_and_literals(text);
    let lines: Vec<&str> = code.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        // From the header to the brace that closes its body; a declaration without a body
        // (a trait's) ends at its `;`.
        let mut depth = 0i32;
        let mut opened = false;
        for (j, l) in lines[i..end].iter().enumerate() {
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                out.push((name.to_string(), i + 1, j + 1));
                break;
            }
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

/// The name of the function a line declares, if it does.
fn fn_name(line: &str) -> Option<&str> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let qualifiers = ["pub", "async", "const", "unsafe", "extern"];
    let before_ok = words[..at]
        .iter()
        .all(|w| qualifiers.contains(w) || w.starts_with("pub("));
    let name = words.get(at + 1)?;
    let name = name.split(['(', '<']).next()?;
    (before_ok && !name.is_empty()).then_some(name)
}

/// `text` with comments removed and string and char literals emptied (lines kept), so
/// braces inside them are not counted.
fn strip_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == '"' || (c == 'r' && (next == Some('"') || next == Some('#'))) {
            i = skip_string(&chars, i, &mut out);
        } else if c == '\'' {
            // A char literal ('x', '\n', '\''), else a lifetime.
            let close = if next == Some('\\') {
                (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
            } else {
                (chars.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match close {
                Some(k) => i = k + 1,
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Skips the string literal starting at `i` (plain or raw), keeping its line breaks in
/// `out`; returns the index after it.
fn skip_string(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let raw = chars[i] == 'r';
    let mut hashes = 0;
    if raw {
        i += 1;
        while chars.get(i) == Some(&'#') {
            hashes += 1;
            i += 1;
        }
        if chars.get(i) != Some(&'"') {
            // `r` was an identifier's letter, not a raw string.
            out.push('r');
            out.extend(std::iter::repeat_n('#', hashes));
            return i;
        }
    }
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if !raw => i += 2,
            '"' if (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) => {
                return i + 1 + hashes;
            }
            c => {
                if c == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
        }
    }
    i
}

/// Inside the engine, the lower folders name no higher one: the watch loop, writing and
/// replicas know nothing of events, plugins, cases or the host that assembles them (the
/// caches answer the queue from `event/`, the preflight is the pipeline's).
#[test]
fn engine_folders_point_down() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src");
    let lower = [
        ("watch", &["replicas", "serve"][..]),
        ("apply", &["watch", "serve"][..]),
        ("replicas", &["serve"][..]),
    ];
    let folders = [
        "watch", "apply", "replicas", "serve", "event", "plugins", "cases", "host",
    ];
    let mut wrong = Vec::new();
    for (folder, allowed) in lower {
        for file in rust_files(&src.join(folder)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for other in folders {
                if other == folder || allowed.contains(&other) {
                    continue;
                }
                let path = format!("crate::{other}");
                let names = text.lines().any(|l| {
                    l.match_indices(&path).any(|(i, _)| {
                        let rest = &l[i + path.len()..];
                        !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                });
                if names {
                    wrong.push(format!("{} names crate::{other}", file.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
