//! The Go and C bindings this binary carries, and making a component of a core wasm module
//! in-process: what `kubewasm build` does for Go and C, and what the repository's own
//! `plugins/{go,c}/build.sh` call through the hidden subcommands `kubewasm bindings` and
//! `kubewasm componentize`. Nothing here needs wit-bindgen-cli or wasm-tools installed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

use super::new::embedded;

/// The world every plugin implements.
pub const WORLD: &str = "plugin";

/// A set of carried bindings.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Bindings {
    /// The Go bindings of `wit/plugin.wit`: the module `kubewasm.dev/bindings`, with the Go
    /// layer's export glue.
    Go,
    /// `go.bytecodealliance.org/pkg`, the runtime package the Go bindings import.
    GoPkg,
    /// The C bindings of `wit/plugin.wit`: `plugin.h`, `plugin.c`,
    /// `plugin_component_type.o`.
    C,
}

impl Bindings {
    /// The folder of the embedded files.
    fn embedded_dir(self) -> &'static str {
        match self {
            Bindings::Go => "bindings/go",
            Bindings::GoPkg => "bindings/go-pkg",
            Bindings::C => "bindings/c",
        }
    }

    /// The carried files: (path relative to the set, bytes).
    pub fn files(self) -> impl Iterator<Item = (&'static str, &'static [u8])> {
        embedded::under(self.embedded_dir())
    }

    /// Writes the set into DIR, replacing what DIR held (it is generated, never edited).
    pub fn write(self, dir: &Path) -> Result<()> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        for (rel, bytes) in self.files() {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

/// Flags of the hidden `kubewasm bindings`.
#[derive(Args, Debug)]
pub struct BindingsArgs {
    /// Which set.
    #[arg(value_enum)]
    which: Bindings,
    /// The folder to write (replaced).
    dir: PathBuf,
}

/// `kubewasm bindings go|go-pkg|c DIR`: writes the bindings this binary carries (generated
/// from its `wit/plugin.wit` by wit-bindgen 0.63 when it was built).
pub fn bindings_command(args: BindingsArgs) -> Result<()> {
    args.which.write(&args.dir)
}

/// Flags of the hidden `kubewasm componentize`.
#[derive(Args, Debug)]
pub struct ComponentizeArgs {
    /// The core module (wasm32-wasip1, a reactor).
    core: PathBuf,
    /// Embed the world `plugin` of this WIT folder first (`wasm-tools component embed`);
    /// without it, the module must already carry its `component-type` section (the C
    /// bindings link one in).
    #[arg(long, value_name = "DIR")]
    wit: Option<PathBuf>,
    /// The component to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
}

/// `kubewasm componentize CORE [--wit DIR] -o OUT`.
pub fn componentize_command(args: ComponentizeArgs) -> Result<()> {
    let core =
        std::fs::read(&args.core).with_context(|| format!("reading {}", args.core.display()))?;
    let component = componentize(core, args.wit.as_deref())
        .with_context(|| format!("making a component of {}", args.core.display()))?;
    write_atomically(&args.output, &component)
}

/// A component from a core module: the WIT world `plugin` of `wit` embedded when given, then
/// wrapped with the WASI preview1 reactor adapter of the host's wasmtime (what `wasm-tools
/// component embed` and `component new --adapt` do).
pub fn componentize(mut core: Vec<u8>, wit: Option<&Path>) -> Result<Vec<u8>> {
    if let Some(wit) = wit {
        let mut resolve = Resolve::default();
        let (pkg, _) = resolve
            .push_path(wit)
            .with_context(|| format!("parsing the WIT in {}", wit.display()))?;
        let world = resolve.select_world(&[pkg], Some(WORLD))?;
        wit_component::embed_component_metadata(
            &mut core,
            &resolve,
            world,
            StringEncoding::UTF8,
            false,
        )?;
    }
    // Validated, with debug names, the adapter given before the module: what `wasm-tools
    // component new` 1.262 does, so the component is byte-for-byte the one it wrote (the
    // order decides the order of the component's imports).
    ComponentEncoder::default()
        .validate(true)
        .debug_names(true)
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .module(&core)?
        .encode()
}

/// Writes FILE through a temporary file beside it, so a reader never sees half of it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let Some(name) = path.file_name() else {
        bail!("{} is not a file name", path.display());
    };
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}
