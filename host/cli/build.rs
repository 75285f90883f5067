//! Embeds what `kubewasm new` vendors into a project and what `kubewasm build` runs: the
//! WIT, each language's layer, the shared toolchain script and the pinned tool manifests.
//! They are read from the repository at build time (one source of truth: nothing is copied
//! into the crate), listed by walking the folders so a file added to a layer is carried
//! without editing this list.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// (folder relative to the repository, file suffixes kept, file suffixes dropped).
const TREES: &[(&str, &[&str], &[&str])] = &[
    ("wit", &[".wit"], &[]),
    ("plugins/rust/sdk/src", &[".rs"], &[]),
    ("plugins/python/kubewasm", &[".py"], &[]),
    ("plugins/js/kubewasm", &[".js", ".d.ts", ".json"], &[]),
    ("plugins/c/kubewasm", &[".c", ".h"], &[]),
    (
        "plugins/go/kubewasm",
        &[".go", ".go.in", "go.mod"],
        &["_test.go"],
    ),
];

/// Single files.
const FILES: &[&str] = &[
    "plugins/toolchain.sh",
    "plugins/rust/Cargo.toml",
    "plugins/rust/Cargo.lock",
    "plugins/rust/sdk/Cargo.toml",
    "plugins/python/pyproject.toml",
    "plugins/python/requirements.txt",
    "plugins/js/package.json",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name != "__pycache__" && name != "node_modules" {
                walk(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir.join("../..");
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (dir, keep, drop) in TREES {
        let base = root.join(dir);
        println!("cargo:rerun-if-changed={}", base.display());
        let mut found = Vec::new();
        walk(&base, &mut found);
        for path in found {
            let name = path.to_string_lossy().into_owned();
            if keep.iter().any(|s| name.ends_with(s)) && !drop.iter().any(|s| name.ends_with(s)) {
                let rel = path
                    .strip_prefix(&root)
                    .expect("walked under the root")
                    .to_string_lossy()
                    .replace('\\', "/");
                files.push((rel, path));
            }
        }
    }
    for file in FILES {
        let path = root.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        assert!(path.is_file(), "{} is missing", path.display());
        files.push(((*file).to_string(), path));
    }
    let mut code = String::from(
        "/// Repository files carried by the binary: (path relative to the repository, bytes).\n\
         pub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for (rel, path) in &files {
        let abs = path.canonicalize().expect("embedded file exists");
        writeln!(
            code,
            "    ({rel:?}, include_bytes!({:?})),",
            abs.display().to_string()
        )
        .expect("write to a String");
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("embedded.rs");
    std::fs::write(out, code).expect("write embedded.rs");
}
