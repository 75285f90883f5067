//! Plugins as OCI artifacts, against a real registry (Debian's docker-registry, the CNCF
//! distribution registry 2.8, on loopback): `kubewasm push` (the real binary), the
//! library's resolve and pull into the content-addressed store, what the pull refuses,
//! and interoperability with a standard client (the `oras` Python package).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use kubewasm_oci::{Auths, Client, Credentials, Error, Reference, RegistryConfig, Store};
use sha2::{Digest as _, Sha256};
use support::registry::{REGISTRY_PASSWORD, REGISTRY_USER, Registry};

/// No cap that matters for the example plugins.
const NO_CAP: u64 = 64 << 20;

/// A small real component: the Rust example plugin.
fn component() -> PathBuf {
    support::example_plugin("contentsite-provisioner")
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// `kubewasm ARGS` with an empty Docker config folder (no credentials of this machine's
/// user leak in): exit code, stdout, stderr.
fn kubewasm(args: &[&str]) -> (Option<i32>, String, String) {
    kubewasm_env(args, &[])
}

fn kubewasm_env(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let empty = tempfile::tempdir().expect("empty docker config dir");
    let out: Output = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(args)
        .env("DOCKER_CONFIG", empty.path())
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .expect("run kubewasm");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubewasm push FILE REF EXTRA…`, which must succeed; returns the pinned reference (the
/// last line of stdout) after checking the output's shape.
fn push_ok(file: &Path, reference: &str, extra: &[&str]) -> Reference {
    let mut args = vec!["push", file.to_str().expect("utf-8 path"), reference];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = kubewasm(&args);
    assert_eq!(code, Some(0), "push failed:\n{stderr}");
    pinned_from(reference, &stdout, &stderr)
}

/// The pinned reference push printed: the last stdout line, the same repository at a
/// sha256 digest; stderr one summary line.
fn pinned_from(reference: &str, stdout: &str, stderr: &str) -> Reference {
    let last = stdout
        .lines()
        .last()
        .expect("push printed nothing on stdout");
    let tagged: Reference = reference.parse().expect("reference");
    let prefix = format!(
        "oci://{}/{}@sha256:",
        tagged.registry(),
        tagged.repository()
    );
    let hex = last
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("last stdout line {last:?} is not {prefix}…"));
    assert!(
        hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
        "{last:?}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one summary line on stderr: {stderr}");
    assert!(
        lines[0].starts_with("pushed ") && lines[0].contains(reference),
        "{stderr}"
    );
    last.parse().expect("the printed reference parses")
}

fn client_for(registry: &Registry) -> Client {
    Client::new(&RegistryConfig {
        insecure: vec![registry.host()],
        ..RegistryConfig::default()
    })
    .expect("client")
}

/// Every file under `dir`, sorted, relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).expect("under base");
                out.push(rel.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").expect("sha256 digest")
}

#[tokio::test]
async fn push_then_pull_by_digest_then_serve_from_the_store_with_the_registry_down() {
    let mut registry = Registry::start();
    let file = component();
    let bytes = std::fs::read(&file).expect("read component");
    let tag = registry.reference("plugins/contentsite:v1");
    let pinned = push_ok(&file, &tag, &["--insecure-registry", &registry.host()]);
    let digest = pinned.digest().expect("pinned").to_string();

    // Reproducible: the same file pushed again is the same artifact.
    let again = push_ok(&file, &tag, &["--insecure-registry", &registry.host()]);
    assert_eq!(again, pinned);

    // The tag resolves to the printed digest.
    let client = client_for(&registry);
    let tagged: Reference = tag.parse().expect("tag");
    let resolved = client
        .resolve(&tagged, &Credentials::Anonymous)
        .await
        .expect("resolve the tag");
    assert_eq!(resolved, digest);
    assert_eq!(tagged.pinned(&resolved), pinned);

    // Pulled by digest: the file's bytes, in the store's layout, nothing else there.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("store")).expect("store");
    let pulled = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect("pull");
    assert!(!pulled.from_store);
    assert_eq!(
        pulled.bytes, bytes,
        "the verified bytes are what pull returns"
    );
    assert_eq!(std::fs::read(&pulled.path).expect("pulled file"), bytes);
    assert_eq!(pulled.layer_digest, sha256(&bytes));
    assert_eq!(pulled.manifest_digest, digest);
    assert_eq!(pulled.size, bytes.len() as u64);
    // Keyed by repository: DIR/repos/<sha256 of REGISTRY/REPOSITORY>/….
    let repo = sha256(format!("{}/plugins/contentsite", registry.host()).as_bytes());
    let repo = format!("repos/{}", hex_of(&repo));
    let blob = format!("{repo}/blobs/sha256/{}", hex_of(&pulled.layer_digest));
    let manifest = format!("{repo}/manifests/sha256/{}", hex_of(&digest));
    assert_eq!(pulled.path, store.dir().join(&blob));
    assert_eq!(
        files_under(store.dir()),
        vec![blob.clone(), manifest.clone()]
    );
    let stored = std::fs::read(store.dir().join(&manifest)).expect("stored manifest");
    assert_eq!(
        sha256(&stored),
        digest,
        "the stored manifest is the registry's bytes"
    );
    let m: serde_json::Value = serde_json::from_slice(&stored).expect("manifest JSON");
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(m["layers"][0]["mediaType"], "application/wasm");
    // The config records the component's world, as the artifact spec asks.
    let config_digest = m["config"]["digest"].as_str().expect("config digest");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(registry.blob_data(config_digest)).expect("config"))
            .expect("config JSON");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], pulled.layer_digest.as_str());
    let exports = config["component"]["exports"].as_array().expect("exports");
    assert!(
        exports.iter().any(|e| e
            .as_str()
            .is_some_and(|e| e.starts_with("kubewasm:plugin/handler"))),
        "{config}"
    );

    // The registry down: the pinned plugin still loads, from the store, without a call.
    registry.stop();
    let from_store = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect("served from the store with the registry down");
    assert!(from_store.from_store);
    assert_eq!(from_store.bytes, bytes);
    assert_eq!(from_store.path, pulled.path);
    assert_eq!(from_store.layer_digest, pulled.layer_digest);

    // Anything not in the store needs the registry: RegistryUnavailable, naming it.
    let missing = pinned.pinned(&format!("sha256:{}", "1".repeat(64)));
    let err = client
        .pull_wasm(&missing, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect_err("the registry is down");
    assert_eq!(err.reason(), "RegistryUnavailable", "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&missing.to_string()) && msg.contains(&registry.host()),
        "{msg}"
    );
    let err = client
        .resolve(&tagged, &Credentials::Anonymous)
        .await
        .expect_err("the registry is down");
    assert_eq!(err.reason(), "RegistryUnavailable", "{err}");
    assert_eq!(files_under(store.dir()), vec![blob, manifest]);

    // Back up with the same storage: the tag still names the same digest.
    registry.restart();
    let resolved = client
        .resolve(&tagged, &Credentials::Anonymous)
        .await
        .expect("resolve after the restart");
    assert_eq!(resolved, digest);
}

#[tokio::test]
async fn unknown_digests_and_tags_are_not_found() {
    let registry = Registry::start();
    let pinned = push_ok(
        &component(),
        &registry.reference("plugins/known:v1"),
        &["--insecure-registry", &registry.host()],
    );
    let client = client_for(&registry);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let zeros = format!("sha256:{}", "0".repeat(64));
    for missing in [
        pinned.pinned(&zeros),
        registry
            .reference(&format!("plugins/nobody-pushed-here@{zeros}"))
            .parse()
            .expect("reference"),
    ] {
        let err = client
            .pull_wasm(&missing, &Credentials::Anonymous, &store, NO_CAP)
            .await
            .expect_err("unknown digest");
        assert_eq!(err.reason(), "ManifestNotFound", "{err}");
        assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
        assert!(err.to_string().contains(&missing.to_string()), "{err}");
    }
    let unknown_tag: Reference = registry
        .reference("plugins/known:v2")
        .parse()
        .expect("reference");
    let err = client
        .resolve(&unknown_tag, &Credentials::Anonymous)
        .await
        .expect_err("unknown tag");
    assert_eq!(err.reason(), "ManifestNotFound", "{err}");
    // A tag is not pulled: the caller resolves it first.
    let err = client
        .pull_wasm(&unknown_tag, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect_err("a tag");
    assert_eq!(err.reason(), "InvalidReference", "{err}");
    assert!(files_under(store.dir()).is_empty());
}

#[tokio::test]
async fn a_layer_over_the_cap_is_refused_before_any_layer_byte_is_fetched() {
    let registry = Registry::start();
    let file = component();
    let size = std::fs::metadata(&file).expect("stat").len();
    let pinned = push_ok(
        &file,
        &registry.reference("plugins/big:v1"),
        &["--insecure-registry", &registry.host()],
    );
    let client = client_for(&registry);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let layer = sha256(&std::fs::read(&file).expect("read"));
    // GETs only: push asked with HEADs whether the registry had the blobs.
    let blob_request = format!("GET /v2/plugins/big/blobs/{layer}");

    let err = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, size - 1)
        .await
        .expect_err("over the cap");
    assert_eq!(err.reason(), "ModuleTooLarge", "{err}");
    assert!(
        matches!(err, Error::TooLarge { size: s, max, .. } if s == size && max == size - 1),
        "{err:?}"
    );
    let log = registry.log();
    assert!(
        log.contains(&format!("/manifests/{}", pinned.digest().expect("digest"))),
        "the registry logs requests (the manifest was fetched):\n{log}"
    );
    assert!(
        !log.contains(&blob_request),
        "the layer was requested although over the cap:\n{log}"
    );
    assert!(
        files_under(store.dir()).is_empty(),
        "nothing left in the store: {:?}",
        files_under(store.dir())
    );

    // At the cap it is pulled (and the log shows it: the check above can fail).
    let pulled = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, size)
        .await
        .expect("at the cap");
    assert_eq!(pulled.size, size);
    assert!(registry.log().contains(&blob_request));
}

#[tokio::test]
async fn a_blob_whose_bytes_do_not_match_its_digest_is_refused() {
    let registry = Registry::start();
    let file = component();
    let bytes = std::fs::read(&file).expect("read");
    let pinned = push_ok(
        &file,
        &registry.reference("plugins/tampered:v1"),
        &["--insecure-registry", &registry.host()],
    );
    let layer = sha256(&bytes);
    let data = registry.blob_data(&layer);
    assert_eq!(std::fs::read(&data).expect("the registry's blob"), bytes);
    // Same length, one byte changed: only the digest can tell.
    let mut tampered = bytes.clone();
    let mid = tampered.len() / 2;
    tampered[mid] ^= 0xff;
    std::fs::write(&data, &tampered).expect("tamper");

    let client = client_for(&registry);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let err = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect_err("tampered blob");
    assert_eq!(err.reason(), "DigestMismatch", "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&layer) && msg.contains(&sha256(&tampered)),
        "names the expected and actual digests: {msg}"
    );
    assert!(
        files_under(store.dir()).is_empty(),
        "nothing half-written or unverified in the store: {:?}",
        files_under(store.dir())
    );

    // Repaired, the same pull succeeds: the mismatch was the only reason.
    std::fs::write(&data, &bytes).expect("repair");
    let pulled = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect("repaired");
    assert_eq!(std::fs::read(&pulled.path).expect("pulled"), bytes);
}

#[test]
fn plain_http_is_refused_without_insecure_registry() {
    let registry = Registry::start();
    let file = component();
    let reference = registry.reference("plugins/p:v1");
    let (code, stdout, stderr) = kubewasm(&["push", file.to_str().expect("utf-8"), &reference]);
    assert_ne!(
        code,
        Some(0),
        "pushed over plain HTTP without --insecure-registry"
    );
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&reference)
            && stderr.contains(&format!("--insecure-registry {}", registry.host())),
        "names the reference and the flag to use:\n{stderr}"
    );
    assert!(
        !registry.log().contains("PUT "),
        "nothing was pushed:\n{}",
        registry.log()
    );
}

#[tokio::test]
async fn an_https_registry_signed_by_a_private_ca() {
    let registry = Registry::start_tls();
    let file = component();
    let reference = registry.reference("plugins/tls:v1");
    let path = file.to_str().expect("utf-8");
    let (code, _, stderr) = kubewasm(&["push", path, &reference]);
    assert_ne!(code, Some(0), "pushed to a registry of an untrusted CA");
    assert!(stderr.contains("--registry-ca"), "{stderr}");

    let ca = registry.ca_file().to_str().expect("utf-8").to_string();
    let pinned = push_ok(&file, &reference, &["--registry-ca", &ca]);
    // A loopback registry: reached only when named (`--allowed-registry HOST:PORT`).
    let client = Client::new(&RegistryConfig {
        ca_files: vec![registry.ca_file().to_path_buf()],
        allowed: vec![registry.host()],
        ..RegistryConfig::default()
    })
    .expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let pulled = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect("pull over HTTPS");
    assert_eq!(
        std::fs::read(&pulled.path).expect("pulled"),
        std::fs::read(&file).expect("file")
    );

    // A CA file without a certificate is refused up front, naming it.
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let err = Client::new(&RegistryConfig {
        ca_files: vec![empty.clone()],
        ..RegistryConfig::default()
    })
    .expect_err("no certificate");
    assert!(err.to_string().contains("empty.pem"), "{err}");
}

#[tokio::test]
async fn credentials_come_from_the_docker_config() {
    let registry = Registry::start_with_basic_auth();
    let file = component();
    let path = file.to_str().expect("utf-8");
    let reference = registry.reference("plugins/private:v1");
    let insecure = ["--insecure-registry", &registry.host()];

    // No credentials: refused, saying so.
    let mut args = vec!["push", path, &reference];
    args.extend_from_slice(&insecure);
    let (code, _, stderr) = kubewasm(&args);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("refused access"), "{stderr}");

    // A Docker config as `docker login` writes it (https:// key, base64 user:password).
    let dir = tempfile::tempdir().expect("tempdir");
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}"));
    let config =
        serde_json::json!({"auths": {format!("https://{}", registry.host()): {"auth": auth}}});
    let config_file = dir.path().join("config.json");
    std::fs::write(&config_file, config.to_string()).expect("docker config");
    let config_path = config_file.to_str().expect("utf-8");
    let mut args = vec!["push", path, &reference, "--docker-config", config_path];
    args.extend_from_slice(&insecure);
    let (code, stdout, stderr) = kubewasm(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains(REGISTRY_PASSWORD) && !stderr.contains(REGISTRY_PASSWORD));
    let pinned = pinned_from(&reference, &stdout, &stderr);

    // The same through $DOCKER_CONFIG (the default location).
    let mut args = vec!["push", path, &reference];
    args.extend_from_slice(&insecure);
    let uploads = |log: &str| {
        log.lines()
            .filter(|l| {
                l.contains("POST /v2/plugins/private/blobs/uploads/") && l.contains("\" 202 ")
            })
            .count()
    };
    assert_eq!(uploads(&registry.log()), 2, "{}", registry.log());
    let (code, stdout, stderr) = kubewasm_env(&args, &[("DOCKER_CONFIG", dir.path())]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(pinned_from(&reference, &stdout, &stderr), pinned);
    // Pushed again: the registry has both blobs (asked with HEADs, authenticated as the
    // push is), so only the manifest is sent.
    assert!(
        stderr.contains("2 of 2 blobs already there, not sent"),
        "{stderr}"
    );
    assert_eq!(
        uploads(&registry.log()),
        2,
        "no blob uploaded again:\n{}",
        registry.log()
    );

    // The library, with a dockerconfigjson Secret's bytes.
    let client = client_for(&registry);
    let store = Store::open(&dir.path().join("store")).expect("store");
    let creds = Auths::from_docker_config_json(config.to_string().as_bytes())
        .expect("auths")
        .for_registry(&registry.host());
    assert!(matches!(creds, Credentials::Basic { .. }));
    let err = client
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect_err("anonymous");
    assert_eq!(err.reason(), "Unauthorized", "{err}");
    let wrong = Credentials::Basic {
        username: REGISTRY_USER.into(),
        password: "not-the-password".into(),
    };
    let err = client
        .pull_wasm(&pinned, &wrong, &store, NO_CAP)
        .await
        .expect_err("wrong password");
    assert_eq!(err.reason(), "Unauthorized", "{err}");
    assert!(!err.to_string().contains("not-the-password"), "{err}");
    let pulled = client
        .pull_wasm(&pinned, &creds, &store, NO_CAP)
        .await
        .expect("pull with credentials");
    assert_eq!(
        std::fs::read(&pulled.path).expect("pulled"),
        std::fs::read(&file).expect("file")
    );
}

#[test]
fn push_refuses_a_bad_reference_or_what_is_not_a_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").expect("write");
    let module = module.to_str().expect("utf-8");
    // Refused before any network call: nothing listens on port 9.
    let (code, stdout, stderr) = kubewasm(&["push", module, "oci://127.0.0.1:9/p:v1"]);
    assert_ne!(code, Some(0));
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("module.wasm") && stderr.contains("core WebAssembly module"),
        "{stderr}"
    );

    let file = component();
    let path = file.to_str().expect("utf-8");
    for (bad, why) in [
        ("127.0.0.1:9/p:v1", "missing the oci:// scheme"),
        ("oci://127.0.0.1:9/p", "no tag or digest"),
    ] {
        let (code, _, stderr) = kubewasm(&["push", path, bad]);
        assert_ne!(code, Some(0));
        assert!(
            stderr.contains(why) && stderr.contains("oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]"),
            "{bad}: {stderr}"
        );
    }
    let digest = format!("oci://127.0.0.1:9/p@sha256:{}", "0".repeat(64));
    let (code, _, stderr) = kubewasm(&["push", path, &digest]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("push needs a tag"), "{stderr}");
    let (code, _, stderr) = kubewasm(&[
        "push",
        path,
        "oci://127.0.0.1:9/p:v1",
        "--insecure-registry",
        "http://127.0.0.1:9",
    ]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("HOST:PORT"), "{stderr}");
}

#[test]
fn push_help_says_what_it_publishes_and_how_to_use_it() {
    let (code, help, _) = kubewasm(&["push", "--help"]);
    assert_eq!(code, Some(0));
    for word in [
        "application/vnd.wasm.config.v0+json",
        "application/wasm",
        "oci://HOST[:PORT]/REPO@sha256:",
        "spec.module",
        "kind: Plugin",
        "--insecure-registry",
        "--registry-ca",
        "--docker-config",
        "dockerconfigjson",
    ] {
        assert!(help.contains(word), "{word} is not in the help:\n{help}");
    }
}

/// The `oras` Python package (tests/tools/install-registry.sh installs it).
fn oras(cwd: &Path, script: &str) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .output()
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'oras'"),
        "the oras Python package is missing: run tests/tools/install-registry.sh (tests/run.sh does)"
    );
    assert!(out.status.success(), "oras failed:\n{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn oras_pulls_what_kubewasm_pushes() {
    let registry = Registry::start();
    let file = component();
    let pinned = push_ok(
        &file,
        &registry.reference("plugins/contentsite:v1"),
        &["--insecure-registry", &registry.host()],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let target = pinned.to_string().trim_start_matches("oci://").to_string();
    let out = oras(
        dir.path(),
        &format!(
            "import oras.client\n\
             c = oras.client.OrasClient(hostname={host:?}, insecure=True)\n\
             for f in c.pull(target={target:?}, outdir='out'): print(f)\n",
            host = registry.host()
        ),
    );
    let files: Vec<&str> = out.lines().filter(|l| l.ends_with(".wasm")).collect();
    assert_eq!(files.len(), 1, "one file pulled: {out}");
    let pulled = dir.path().join("out/contentsite.wasm");
    assert_eq!(
        std::fs::read(&pulled).expect("the file oras pulled"),
        std::fs::read(&file).expect("file")
    );
}

#[tokio::test]
async fn kubewasm_pulls_what_oras_pushes() {
    let registry = Registry::start();
    let file = component();
    let bytes = std::fs::read(&file).expect("read");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&file, dir.path().join("plugin.wasm")).expect("copy");
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"architecture":"wasm","os":"wasip2","layerDigests":[]}"#,
    )
    .expect("config");
    std::fs::write(dir.path().join("notes.txt"), "not a plugin").expect("notes");
    let host = registry.host();
    oras(
        dir.path(),
        &format!(
            "import oras.client\n\
             c = oras.client.OrasClient(hostname={host:?}, insecure=True)\n\
             c.push(target='{host}/oras/wasm:v0', files=['plugin.wasm:application/wasm'],\n\
                    manifest_config='config.json:application/vnd.wasm.config.v0+json')\n\
             c.push(target='{host}/oras/legacy:v1',\n\
                    files=['plugin.wasm:application/vnd.wasm.content.layer.v1+wasm'])\n\
             c.push(target='{host}/oras/text:v1', files=['notes.txt:text/plain'])\n"
        ),
    );

    let client = client_for(&registry);
    let store = Store::open(&dir.path().join("store")).expect("store");
    for repo in ["oras/wasm:v0", "oras/legacy:v1"] {
        let tagged: Reference = registry.reference(repo).parse().expect("reference");
        let digest = client
            .resolve(&tagged, &Credentials::Anonymous)
            .await
            .expect("resolve");
        let pulled = client
            .pull_wasm(
                &tagged.pinned(&digest),
                &Credentials::Anonymous,
                &store,
                NO_CAP,
            )
            .await
            .unwrap_or_else(|e| panic!("{repo}: {e}"));
        assert_eq!(
            std::fs::read(&pulled.path).expect("pulled"),
            bytes,
            "{repo}"
        );
        assert_eq!(pulled.manifest_digest, digest);
    }

    let tagged: Reference = registry
        .reference("oras/text:v1")
        .parse()
        .expect("reference");
    let digest = client
        .resolve(&tagged, &Credentials::Anonymous)
        .await
        .expect("resolve");
    let err = client
        .pull_wasm(
            &tagged.pinned(&digest),
            &Credentials::Anonymous,
            &store,
            NO_CAP,
        )
        .await
        .expect_err("a text artifact");
    assert_eq!(err.reason(), "NotAWasmArtifact", "{err}");
    assert!(
        err.to_string().contains("text/plain"),
        "names what it found: {err}"
    );
}

#[tokio::test]
async fn a_store_that_cannot_be_written_is_a_store_error_naming_the_reference() {
    let registry = Registry::start();
    let pinned = push_ok(
        &component(),
        &registry.reference("plugins/store:v1"),
        &["--insecure-registry", &registry.host()],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    // Where downloads are written first: gone.
    std::fs::remove_dir_all(dir.path().join("tmp")).expect("remove tmp");
    let err = client_for(&registry)
        .pull_wasm(&pinned, &Credentials::Anonymous, &store, NO_CAP)
        .await
        .expect_err("no temporary folder");
    assert_eq!(err.reason(), "StoreError", "{err}");
    assert!(err.to_string().contains(&pinned.to_string()), "{err}");
    assert!(files_under(dir.path()).is_empty());
}
