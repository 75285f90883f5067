//! Embeds what `kubewasm new` vendors into a project and what `kubewasm build` runs: the
//! WIT, each language's layer, the shared toolchain script and the pinned tool manifests.
//! They are read from the repository at build time (one source of truth: nothing is copied
//! into the crate), listed by walking the folders so a file added to a layer is carried
//! without editing this list.
//!
//! It also generates the Go and C bindings of the WIT with the generator crates of
//! wit-bindgen (pinned in Cargo.toml), once, here: the binary carries them under
//! `bindings/go`, `bindings/c` and `bindings/go-pkg` (the Go runtime package the bindings
//! import, from the wit-bindgen-go crate), so no plugin author builds wit-bindgen.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use wit_bindgen_core::{Files, WorldGenerator};
use wit_parser::Resolve;

/// The world every plugin implements, and the Go module path of its bindings.
const WORLD: &str = "plugin";
const GO_MODULE: &str = "kubewasm.dev/bindings";
/// The version of the wit-bindgen generators Cargo.toml pins (`=`); checked against the
/// header of what they write.
const WIT_BINDGEN: &str = "0.63.0";

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

/// The code layout (code-layout/generate.py says why and how it is recorded): the
/// functions a running host runs, placed first and together by the linker, so fewer of the
/// binary's code pages are resident. Only in optimised builds (LLD matches the script's
/// patterns against every function: ~1 min for a release build, ~2 for a debug one, whose
/// memory nobody runs on), and where the linker takes both files: x86_64 Linux with glibc,
/// whose default linker is LLD (since Rust 1.90). `KUBEWASM_CODE_LAYOUT=off` leaves the
/// linker's order (for another linker).
fn link_hot_code_first(manifest_dir: &Path) {
    println!("cargo:rerun-if-env-changed=KUBEWASM_CODE_LAYOUT");
    let layout = manifest_dir.join("code-layout");
    let (script, order) = (layout.join("hot-code.ld"), layout.join("hot-code.order"));
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-changed={}", order.display());
    // Checked in every build, so a malformed regeneration fails in CI (which builds
    // unoptimised) with the line, not in a release build with a linker's parse error.
    check_layout(&script, &order);
    let optimised = std::env::var("OPT_LEVEL").is_ok_and(|level| level != "0");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    let supported = target("CARGO_CFG_TARGET_OS") == "linux"
        && target("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && target("CARGO_CFG_TARGET_ENV") == "gnu";
    if optimised && supported && std::env::var("KUBEWASM_CODE_LAYOUT").as_deref() != Ok("off") {
        println!(
            "cargo:rustc-link-arg-bin=kubewasm=-Wl,-T,{}",
            script.display()
        );
        // The order names functions of the recorded builds: others lack them, silently.
        println!(
            "cargo:rustc-link-arg-bin=kubewasm=-Wl,--symbol-ordering-file={},--no-warn-symbol-ordering",
            order.display()
        );
    }
}

/// The layout files as generate.py writes them: the script's input section patterns are
/// `*(.text.NAME)`, NAME a mangled name whose only glob character is a final `*`; the
/// order is one symbol name per line.
fn check_layout(script: &Path, order: &Path) {
    let read = |path: &Path| {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let plain = |name: &str| {
        !name.is_empty()
            && !name.chars().any(|c| {
                c.is_whitespace()
                    || matches!(c, '(' | ')' | '{' | '}' | ';' | '*' | '?' | '[' | ']')
            })
    };
    let script_text = read(script);
    let body = script_text
        .split_once(".text.kubewasm.hot : {\n")
        .and_then(|(_, rest)| rest.split_once("\n  }\n}\nINSERT BEFORE .text;\n"))
        .map(|(body, _)| body)
        .unwrap_or_else(|| panic!("{}: not the layout generate.py writes", script.display()));
    for (i, line) in body.lines().enumerate() {
        let name = line
            .strip_prefix("    *(.text.")
            .and_then(|rest| rest.strip_suffix(')'))
            .map(|name| name.strip_suffix('*').unwrap_or(name));
        assert!(
            name.is_some_and(plain),
            "{}: pattern {} is not `*(.text.NAME)`: {line}",
            script.display(),
            i + 1
        );
    }
    for (i, line) in read(order).lines().enumerate() {
        assert!(
            plain(line),
            "{}:{}: not a symbol name: {line}",
            order.display(),
            i + 1
        );
    }
}

/// Single files.
const FILES: &[&str] = &[
    "plugins/toolchain.sh",
    "plugins/preinit-shim.c",
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
    link_hot_code_first(&manifest_dir);
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
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    bindings(&root, &out_dir.join("bindings"), &mut files);

    let mut code = String::from(
        "/// Repository files carried by the binary: (path relative to the repository, bytes);\n\
         /// the generated bindings under `bindings/`.\n\
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
    std::fs::write(out_dir.join("embedded.rs"), code).expect("write embedded.rs");
}

/// Generates the Go and C bindings of `ROOT/wit` into OUT, adds them and the Go runtime
/// package (from the wit-bindgen-go crate) to `files` (as `bindings/go/…`, `bindings/c/…`,
/// `bindings/go-pkg/…`).
fn bindings(root: &Path, out: &Path, files: &mut Vec<(String, PathBuf)>) {
    let _ = std::fs::remove_dir_all(out);
    // Unformatted on purpose: wit-bindgen-go pipes its output through `gofmt` when one is
    // on PATH, and the carried bytes must not depend on the build machine.
    let go = wit_bindgen_go::Opts {
        format: wit_bindgen_go::Format::False,
        pkg_name: Some(GO_MODULE.to_string()),
        ..Default::default()
    };
    let mut generated = generate(root, go.build());
    let header = format!("// Generated by `wit-bindgen` {WIT_BINDGEN}.");
    assert!(
        generated
            .iter()
            .any(|(name, bytes)| name.ends_with(".go") && bytes.starts_with(header.as_bytes())),
        "the Go generator is not wit-bindgen {WIT_BINDGEN} (update WIT_BINDGEN with the pin)"
    );
    // The bindings as a module of their own, and the Go layer's export glue: the generated
    // exports package calls Describe and Handle, which the glue forwards to the plugin.
    let (pkg_module, pkg_version) = {
        let v = wit_bindgen_go::remote_pkg_version();
        let (m, v) = v.split_once(' ').expect("\"MODULE VERSION\"");
        (m.to_string(), v.to_string())
    };
    let go_mod = format!(
        "// Generated: the wit-bindgen {WIT_BINDGEN} Go bindings of the kubewasm WIT.\n\
         module {GO_MODULE}\n\ngo 1.27\n\nrequire {pkg_module} {pkg_version}\n"
    );
    generated.push(("go.mod".into(), go_mod.into_bytes()));
    let glue = root.join("plugins/go/kubewasm/internal/glue/handler.go.in");
    generated.push((
        "exports/export_kubewasm_plugin_handler/glue.go".into(),
        std::fs::read(&glue).expect("the Go layer's glue"),
    ));
    write_all(&out.join("go"), "bindings/go", generated, files);

    let c = generate(root, wit_bindgen_c::Opts::default().build());
    write_all(&out.join("c"), "bindings/c", c, files);

    // go.bytecodealliance.org/pkg: its Go sources ship inside the wit-bindgen-go crate at
    // the version its generator targets (there is no module proxy on an author's machine).
    let pkg = generator_dir().join("src/pkg");
    let go_mod = std::fs::read_to_string(pkg.join("go.mod")).unwrap_or_default();
    assert!(
        go_mod
            .lines()
            .any(|l| l.trim() == format!("module {pkg_module}")),
        "{} is not {pkg_module}",
        pkg.display()
    );
    let mut found = Vec::new();
    walk(&pkg, &mut found);
    for path in found {
        let rel = path
            .strip_prefix(&pkg)
            .expect("walked under it")
            .to_string_lossy()
            .replace('\\', "/");
        let keep = rel == "go.mod"
            || rel == "LICENSE"
            || (rel.starts_with("wit/") && (rel.ends_with(".go") || rel.ends_with(".s")));
        if keep {
            files.push((format!("bindings/go-pkg/{rel}"), path));
        }
    }
}

/// Runs one generator on the world `plugin` of `ROOT/wit`: (file name, bytes), sorted.
fn generate(root: &Path, mut generator: Box<dyn WorldGenerator>) -> Vec<(String, Vec<u8>)> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_path(root.join("wit"))
        .expect("wit/ parses (the host's own tests check it)");
    let world = resolve
        .select_world(&[pkg], Some(WORLD))
        .expect("wit/ has the world `plugin`");
    let mut out = Files::default();
    generator
        .generate(&mut resolve, world, &mut out)
        .expect("wit-bindgen generates bindings for wit/");
    let mut generated: Vec<(String, Vec<u8>)> = out
        .iter()
        .map(|(name, bytes)| (name.to_string(), bytes.to_vec()))
        .collect();
    generated.sort();
    generated
}

/// Writes generated files under DIR and lists them in `files` as `PREFIX/name`.
fn write_all(
    dir: &Path,
    prefix: &str,
    generated: Vec<(String, Vec<u8>)>,
    files: &mut Vec<(String, PathBuf)>,
) {
    for (name, bytes) in generated {
        let path = dir.join(&name);
        std::fs::create_dir_all(path.parent().expect("a file has a parent"))
            .expect("create the bindings folder");
        std::fs::write(&path, bytes).expect("write a generated file");
        files.push((format!("{prefix}/{name}"), path));
    }
}

/// The source folder of the wit-bindgen-go crate: where cargo unpacked it from a registry
/// (the usual case, and no subprocess), else what `cargo metadata` says (vendored or git
/// sources; it honours the same configuration, offline included, as this build).
fn generator_dir() -> PathBuf {
    let name = format!("wit-bindgen-go-{WIT_BINDGEN}");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(Ok(registries)) = cargo_home.map(|h| std::fs::read_dir(h.join("registry/src"))) {
        let mut found: Vec<PathBuf> = registries
            .filter_map(Result::ok)
            .map(|e| e.path().join(&name))
            .filter(|dir| dir.join("src/pkg/go.mod").is_file())
            .collect();
        found.sort();
        if let Some(dir) = found.into_iter().next() {
            return dir;
        }
    }

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("Cargo.toml");
    // Only this build's platforms: the crates of others need not be downloaded.
    let mut cmd = Command::new(cargo);
    cmd.args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(&manifest);
    for platform in ["HOST", "TARGET"] {
        if let Ok(triple) = std::env::var(platform) {
            cmd.args(["--filter-platform", &triple]);
        }
    }
    let out = cmd.output().expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata (to find the wit-bindgen-go crate): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let p = packages
        .iter()
        .find(|p| p["name"] == "wit-bindgen-go" && p["version"] == WIT_BINDGEN)
        .unwrap_or_else(|| panic!("{name} is not in the dependency graph"));
    p["manifest_path"]
        .as_str()
        .and_then(|m| Path::new(m).parent())
        .expect("a manifest path")
        .to_path_buf()
}
