//! `kubewasm push`: publish a plugin component to an OCI registry as a Wasm artifact and
//! print its pinned reference.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use kubewasm_oci::{Client, Reference};

use super::registry_args::RegistryArgs;

/// Flags of `kubewasm push`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
What it publishes: FILE as a Wasm OCI artifact, the layout of the CNCF TAG Runtime's Wasm
OCI artifact spec (what oras, wkg, Kubewarden and SpinKube read): an OCI image manifest
(application/vnd.oci.image.manifest.v1+json) whose config has media type
application/vnd.wasm.config.v0+json and whose one layer, of media type application/wasm, is
the component itself, byte for byte. The artifact is reproducible: pushing the same file
again gives the same digest. A blob the repository already has (asked with a HEAD) is not
sent again: a second push of the same file sends only the manifest, and the summary says
how many blobs were skipped.

The last line on stdout is the pinned reference, oci://HOST[:PORT]/REPO@sha256:HEX, which
names exactly these bytes forever (a tag can be moved; a digest cannot). Put it in a
Plugin's spec.module:

  ref=$(kubewasm push dist/hello.wasm oci://registry.example.com/plugins/hello:v1 | tail -n1)

  apiVersion: kubewasm.dev/v1alpha1
  kind: Plugin
  metadata: {name: hello}
  spec:
    module: oci://registry.example.com/plugins/hello@sha256:...   # the printed reference

The host pulls it by that digest, checks every byte against it, and serves it from its
store afterwards. A tag (REPO:TAG) in spec.module also works: it is resolved to a digest,
which the Plugin's status records.

Registries are reached over HTTPS, trusting the system's CAs and each --registry-ca. A
registry served over plain HTTP (a local test registry) must be named with
--insecure-registry HOST:PORT, as in the reference. Credentials come from the Docker config
file (`docker login` writes it; the same JSON is a kubernetes.io/dockerconfigjson Secret's,
which a Plugin names as its pull secret): auths.HOST[:PORT].auth or .username/.password.
Credential helpers (credsStore, credHelpers) are not used.")]
pub struct PushArgs {
    /// The plugin component, e.g. dist/NAME.wasm from `kubewasm build`.
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,
    /// Where to publish it: oci://HOST[:PORT]/REPO:TAG.
    #[arg(value_name = "oci://HOST[:PORT]/REPO:TAG")]
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// `kubewasm push`: one summary line on stderr, the pinned reference last on stdout.
pub async fn command(args: PushArgs) -> Result<()> {
    let to: Reference = args.reference.parse()?;
    let wasm =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    kubewasm_oci::check_component_header(&wasm)
        .map_err(|why| anyhow!("{}: {why}", args.file.display()))?;
    let creds = args.registry.auths()?.for_registry(to.registry());
    let client = Client::new(&args.registry.config())?;
    let started = Instant::now();
    let pushed = client.push_wasm(&wasm, &to, &creds).await?;
    let skipped = match pushed.blobs_skipped {
        0 => String::new(),
        n => format!(
            "; {n} of {} blobs already there, not sent",
            n + pushed.blobs_sent
        ),
    };
    eprintln!(
        "pushed {} ({} bytes) to {to} in {:.1?}{skipped}",
        args.file.display(),
        wasm.len(),
        started.elapsed()
    );
    println!("{}", pushed.pinned);
    Ok(())
}
