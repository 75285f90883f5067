//! Reproducible builds: `kubewasm build --force` (the real binary, the pinned toolchains
//! plugins/build.sh installed under target/tools) of a `kubewasm new` project, twice in its
//! folder, gives the same bytes; and so does a copy of the same sources in another folder
//! that is a git checkout (Go stamps a checkout's commit unless told not to), built with
//! another `CARGO_HOME` (rustc writes the registry's source paths into a panic's location).
//!
//! A Rust build twice in one folder is cargo's no-op the second time: the copy in the other
//! folder, with a fresh `target/`, is the one compiled again.
//!
//! Python and JavaScript components are a snapshot of an interpreter taken while the
//! pre-initializer (componentize-py 0.25.1, componentize-js 0.23.0's wizer) runs it: the
//! build gives that process constant entropy, clocks, file times and inode numbers
//! (plugins/preinit-shim.c) and fixed paths (toolchain.sh's js_wizer_wrapper), so both are
//! held to the same bytes as the compiled languages.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};
use support::*;

/// The toolchain directory plugins/build.sh fills; `what` must be in it for `lang`.
fn tools(lang: &str, what: &[&str]) -> PathBuf {
    let dir = root().join("target/tools");
    for w in what {
        assert!(
            dir.join(w).exists(),
            "{} is missing: run plugins/build.sh first (tests/run.sh does), so the {lang} \
             toolchain is installed",
            dir.join(w).display()
        );
    }
    dir
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kubewasm build --force PROJECT`: the component's bytes and the build's wall time.
fn build(project: &Path, name: &str, tools: &Path, env: &[(&str, &Path)]) -> (Vec<u8>, f64) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
    cmd.arg("build")
        .arg("--force")
        .arg(project)
        .env("KUBEWASM_TOOLS_DIR", tools)
        .env("KUBEWASM_LOG", "warn")
        .env("RUST_BACKTRACE", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(
        &mut cmd,
        &format!("kubewasm build --force {}", project.display()),
    );
    let wasm = project.join(format!("dist/{name}.wasm"));
    let bytes = std::fs::read(&wasm).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
    (bytes, started.elapsed().as_secs_f64())
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Fails naming both digests, both sizes and the first offset where the bytes differ.
fn assert_same(lang: &str, what: &str, first: &[u8], second: &[u8]) {
    if first == second {
        return;
    }
    let offset = first
        .iter()
        .zip(second)
        .position(|(a, b)| a != b)
        .unwrap_or(first.len().min(second.len()));
    panic!(
        "{lang}: {what} gave other bytes: sha256 {} ({} bytes) then {} ({} bytes), first \
         difference at offset {offset} (0x{offset:x})",
        sha256(first),
        first.len(),
        sha256(second),
        second.len()
    );
}

/// A `CARGO_HOME` at another path holding the same registry, config and caches (links to
/// the real one's entries): what another user's machine looks like to rustc.
fn other_cargo_home(tmp: &Path) -> PathBuf {
    let real = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let home = tmp.join("another-cargo-home");
    std::fs::create_dir_all(&home).expect("create the other CARGO_HOME");
    for entry in std::fs::read_dir(&real).expect("read CARGO_HOME") {
        let entry = entry.expect("CARGO_HOME entry");
        std::os::unix::fs::symlink(entry.path(), home.join(entry.file_name()))
            .expect("link a CARGO_HOME entry");
    }
    home
}

/// The same sources in another folder, a git checkout with one commit: no build output
/// copied (dist/, target/), installed npm packages kept (they are the toolchain).
fn copy_elsewhere(project: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().expect("parent")).expect("create the other folder");
    run(Command::new("cp").arg("-a").arg(project).arg(to), "cp -a");
    for out in ["dist", "target"] {
        let _ = std::fs::remove_dir_all(to.join(out));
    }
    let git = |args: &[&str]| {
        run(
            Command::new("git")
                .args([
                    "-c",
                    "user.name=repro",
                    "-c",
                    "user.email=repro@example.invalid",
                ])
                .args(["-c", "commit.gpgsign=false"])
                .args(args)
                .current_dir(to),
            &format!("git {args:?}"),
        )
    };
    git(&["init", "-q", "."]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "the same sources"]);
}

fn reproducible(lang: &str, needs: &[&str]) {
    let tools = tools(lang, needs);
    let name = format!("demo-{lang}");
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("one").join(&name);
    run(
        Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(["new", lang, &name])
            .arg(&project),
        &format!("kubewasm new {lang}"),
    );

    let (first, t1) = build(&project, &name, &tools, &[]);
    let (second, t2) = build(&project, &name, &tools, &[]);
    assert_same(lang, "a second `kubewasm build --force`", &first, &second);

    let elsewhere = tmp.path().join("two/elsewhere").join(&name);
    copy_elsewhere(&project, &elsewhere);
    let cargo_home = (lang == "rust").then(|| other_cargo_home(tmp.path()));
    let env: Vec<(&str, &Path)> = cargo_home
        .iter()
        .map(|home| ("CARGO_HOME", home.as_path()))
        .collect();
    let (third, t3) = build(&elsewhere, &name, &tools, &env);
    assert_same(
        lang,
        "the same sources in another folder (a git checkout, another CARGO_HOME)",
        &first,
        &third,
    );
    eprintln!(
        "{lang}: sha256 {} ({} bytes); builds {t1:.1} s, {t2:.1} s, elsewhere {t3:.1} s",
        sha256(&first),
        first.len()
    );
}

#[test]
fn c_builds_are_reproducible() {
    reproducible("c", &[]);
}

#[test]
fn go_builds_are_reproducible() {
    reproducible("go", &["go-venv"]);
}

#[test]
fn rust_builds_are_reproducible() {
    reproducible("rust", &[]);
}

#[test]
fn python_builds_are_reproducible() {
    reproducible("python", &["python-venv"]);
}

#[test]
fn js_builds_are_reproducible() {
    reproducible("js", &[]);
}
