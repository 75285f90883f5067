//! `kubewasm copy-plugins FROM TO`: the plugin image's init container. The images have no
//! shell and no `cp` (the host image is `FROM scratch`, and a plugin image is the host
//! image plus a /plugins layer), so the static binary copies the plugin files itself.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use clap::Args;

/// Flags of `kubewasm copy-plugins`.
#[derive(Args, Debug)]
pub struct CopyPluginsArgs {
    /// The plugin directory to copy (NAME.wasm and NAME.yaml files), e.g. the plugin
    /// image's /plugins.
    from: PathBuf,
    /// Where to put them (created if missing), e.g. the emptyDir the host mounts at
    /// /plugins.
    to: PathBuf,
}

/// `kubewasm copy-plugins`: copy every regular file directly in FROM into TO, read-only
/// (0444), each through a temporary file and a rename so a reader never sees half a file.
/// Entries that are not regular files are skipped with a warning. Fails naming the file.
pub fn command(args: CopyPluginsArgs) -> Result<()> {
    std::fs::create_dir_all(&args.to).with_context(|| format!("creating {}", args.to.display()))?;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&args.from)
        .with_context(|| format!("reading plugin directory {}", args.from.display()))?
    {
        let entry = entry.with_context(|| format!("reading {}", args.from.display()))?;
        names.push(entry.file_name());
    }
    names.sort();
    let (mut files, mut bytes) = (0usize, 0u64);
    for name in names {
        let from = args.from.join(&name);
        // Follows symlinks: a projected or ConfigMap directory is made of them.
        let meta =
            std::fs::metadata(&from).with_context(|| format!("reading {}", from.display()))?;
        if !meta.is_file() || name.to_string_lossy().starts_with('.') {
            tracing::warn!(file = %from.display(), "not a plugin file; skipped");
            continue;
        }
        let to = args.to.join(&name);
        bytes += copy_file(&from, &to)?;
        files += 1;
        tracing::info!(file = %to.display(), bytes = meta.len(), "copied");
    }
    if files == 0 {
        bail!("no plugin files in {}", args.from.display());
    }
    tracing::info!(files, bytes, to = %args.to.display(), "plugins copied");
    Ok(())
}

/// Copy `from` to `to` (mode 0444) through `.NAME.tmp` beside `to`; returns the size.
fn copy_file(from: &Path, to: &Path) -> Result<u64> {
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = to.with_file_name(format!(".{name}.tmp"));
    let copied = (|| -> std::io::Result<u64> {
        let mut src = std::fs::File::open(from)?;
        let mut dst = std::fs::File::create(&tmp)?;
        let n = std::io::copy(&mut src, &mut dst)?;
        dst.flush()?;
        dst.sync_all()?;
        dst.set_permissions(std::fs::Permissions::from_mode(0o444))?;
        std::fs::rename(&tmp, to)?;
        Ok(n)
    })();
    if copied.is_err() {
        // Best effort: the copy's error is the one to report.
        let _ = std::fs::remove_file(&tmp);
    }
    copied.with_context(|| format!("copying {} to {}", from.display(), to.display()))
}
