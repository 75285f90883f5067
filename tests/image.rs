//! The container image built without a daemon: `deploy/build-image.sh` runs (it builds the
//! static binary with `deploy/build.sh`), and its docker-archive is unpacked and checked:
//! manifest and config (user, entrypoint, cmd, env), the binary static (no program
//! interpreter, no DT_NEEDED) and running from the layer, sizes printed, the archive
//! byte-identical when built twice, deploy/Dockerfile's final stage holding the same files,
//! owners, modes, user, env, entrypoint and cmd, and a plugin image from the same script
//! whose `kubewasm copy-plugins` fills a plugin directory.
//!
//! The binary is built with the `image-check` profile (static like release, without its
//! fat LTO: CI's time budget). `KUBEWASM_IMAGE_PROFILE=release` checks the release image.
//! Cargo's fingerprint makes every build after the first a no-op.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use support::root;

const USER: &str = "65532:65532";
const BINARY: &str = "usr/local/bin/kubewasm";

fn profile() -> String {
    std::env::var("KUBEWASM_IMAGE_PROFILE").unwrap_or_else(|_| "image-check".into())
}

/// `deploy/build-image.sh ARGS OUT.tar` with the test's profile; its stdout (the summary).
fn build_image(args: &[&str], out: &Path) -> String {
    let started = Instant::now();
    let output = Command::new("bash")
        .arg(root().join("deploy/build-image.sh"))
        .args(["--profile", &profile()])
        .args(args)
        .arg(out)
        .output()
        .expect("run deploy/build-image.sh");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "deploy/build-image.sh {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "deploy/build-image.sh {args:?} ({} profile): {:.1}s\n{stdout}",
        profile(),
        started.elapsed().as_secs_f64()
    );
    stdout
}

struct Built {
    _dir: tempfile::TempDir,
    first: PathBuf,
    second: PathBuf,
}

/// The host image, built twice into two files (the second build of the binary is a no-op).
fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first.tar");
        let second = dir.path().join("second.tar");
        let summary = build_image(&[], &first);
        assert!(
            summary.contains("binary ") && summary.contains("archive "),
            "{summary}"
        );
        build_image(&[], &second);
        Built {
            _dir: dir,
            first,
            second,
        }
    })
}

/// The host image as read from the first archive (read once: the test profile hashes
/// slowly).
fn host_image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| read_image(&built().first, &format!("localhost/kubewasm:{}", version())))
}

// ---------------------------------------------------------------------------------------
// reading the archive

/// One entry of a ustar archive.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    dir: bool,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: u64,
    data: Vec<u8>,
}

fn octal(field: &[u8]) -> u64 {
    let text = std::str::from_utf8(field).unwrap();
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        0
    } else {
        u64::from_str_radix(text, 8).unwrap()
    }
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8(field[..end].to_vec()).unwrap()
}

/// The entries of a ustar archive by path (no trailing slash), in archive order too.
fn untar(bytes: &[u8]) -> (Vec<String>, BTreeMap<String, Entry>) {
    let (mut order, mut entries) = (Vec::new(), BTreeMap::new());
    let mut at = 0;
    while at + 512 <= bytes.len() && bytes[at..at + 512].iter().any(|&b| b != 0) {
        let h = &bytes[at..at + 512];
        assert_eq!(&h[257..262], b"ustar", "a ustar header at {at}");
        let prefix = cstr(&h[345..500]);
        let name = cstr(&h[0..100]);
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let size = octal(&h[124..136]) as usize;
        let kind = h[156];
        assert!(
            kind == b'0' || kind == b'5',
            "{path}: only files and directories"
        );
        let data = bytes[at + 512..at + 512 + size].to_vec();
        let path = path.trim_end_matches('/').to_string();
        order.push(path.clone());
        entries.insert(
            path,
            Entry {
                dir: kind == b'5',
                mode: octal(&h[100..108]) as u32,
                uid: octal(&h[108..116]) as u32,
                gid: octal(&h[116..124]) as u32,
                mtime: octal(&h[136..148]),
                data,
            },
        );
        at += 512 + size.div_ceil(512) * 512;
    }
    (order, entries)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A docker-archive's config and its layers, checked against their digests.
struct Image {
    config: Value,
    layers: Vec<BTreeMap<String, Entry>>,
}

fn read_image(path: &Path, tag: &str) -> Image {
    let bytes = std::fs::read(path).unwrap();
    eprintln!("{}: {} bytes", path.display(), bytes.len());
    let (order, files) = untar(&bytes);
    let mut sorted = order.clone();
    sorted.sort_by(|a, b| a.split('/').cmp(b.split('/')));
    assert_eq!(order, sorted, "entries sorted");
    let manifest: Value = serde_json::from_slice(&files["manifest.json"].data).unwrap();
    let manifest = manifest.as_array().unwrap();
    assert_eq!(manifest.len(), 1);
    assert_eq!(manifest[0]["RepoTags"], json!([tag]));
    let config_name = manifest[0]["Config"].as_str().unwrap();
    let config_bytes = &files[config_name].data;
    // The image ID is the config's digest, as Docker and containerd compute it.
    assert_eq!(
        format!("sha256:{}", config_name.trim_end_matches(".json")),
        sha256(config_bytes)
    );
    let config: Value = serde_json::from_slice(config_bytes).unwrap();
    let mut layers = Vec::new();
    for (i, name) in manifest[0]["Layers"].as_array().unwrap().iter().enumerate() {
        let layer = &files[name.as_str().unwrap()].data;
        assert_eq!(
            config["rootfs"]["diff_ids"][i].as_str().unwrap(),
            sha256(layer),
            "layer {i}'s digest is its diff_id"
        );
        let (order, entries) = untar(layer);
        let mut sorted = order.clone();
        sorted.sort_by(|a, b| a.split('/').cmp(b.split('/')));
        assert_eq!(order, sorted, "layer entries sorted");
        for (p, e) in &entries {
            assert_eq!(e.mtime, epoch(), "{p}: fixed mtime");
        }
        layers.push(entries);
    }
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(
        config["rootfs"]["diff_ids"].as_array().unwrap().len(),
        layers.len()
    );
    Image { config, layers }
}

/// Every mtime in the image: SOURCE_DATE_EPOCH, else 0.
fn epoch() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn version() -> String {
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let section = cargo.split("[workspace.package]").nth(1).unwrap();
    let line = section
        .lines()
        .find(|l| l.starts_with("version = "))
        .unwrap();
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .to_string()
}

// ---------------------------------------------------------------------------------------
// the binary

/// Whether an ELF file is statically linked: no PT_INTERP and no DT_NEEDED.
fn elf_static(elf: &[u8]) -> Result<(), String> {
    if elf.get(..4) != Some(b"\x7fELF") || elf[4] != 2 || elf[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        match u32_at(ph) {
            3 => return Err("it has a program interpreter (PT_INTERP)".into()),
            2 => {
                let (offset, size) = (u64_at(ph + 8) as usize, u64_at(ph + 32) as usize);
                for d in (offset..offset + size).step_by(16) {
                    match u64_at(d) {
                        0 => break,
                        1 => return Err("it needs shared libraries (DT_NEEDED)".into()),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Write an extracted file where it can run.
fn extract(entry: &Entry, path: &Path) {
    std::fs::write(path, &entry.data).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(entry.mode)).unwrap();
}

// ---------------------------------------------------------------------------------------
// deploy/Dockerfile

/// The final stage of a Dockerfile: instructions with their arguments, comments dropped.
fn final_stage(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let instructions: Vec<(String, String)> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (op, rest) = l.split_once(' ').unwrap_or((l, ""));
            (op.to_string(), rest.trim().to_string())
        })
        .collect();
    let last_from = instructions
        .iter()
        .rposition(|(op, _)| op == "FROM")
        .unwrap();
    instructions[last_from..].to_vec()
}

/// `COPY [--flag=v ...] SRC... DEST`: flags, sources, destination.
fn copy_args(args: &str) -> (BTreeMap<String, String>, Vec<String>, String) {
    let mut flags = BTreeMap::new();
    let mut paths = Vec::new();
    for word in args.split_whitespace() {
        match word.strip_prefix("--").and_then(|f| f.split_once('=')) {
            Some((k, v)) => {
                flags.insert(k.to_string(), v.to_string());
            }
            None => paths.push(word.to_string()),
        }
    }
    let dest = paths.pop().unwrap();
    (flags, paths, dest)
}

/// What the Dockerfile's final stage puts in the image: path (no leading slash) → (is a
/// directory, mode, uid, gid). Modes are those of the sources: repository files 0644, the
/// binary 0755 (`install -m 0755` in deploy/build.sh), the CA bundle 0644 (Debian's), the
/// empty directories 0755.
fn dockerfile_files(stage: &[(String, String)]) -> BTreeMap<String, (bool, u32, u32, u32)> {
    let build_sh = std::fs::read_to_string(root().join("deploy/build.sh")).unwrap();
    assert!(build_sh.contains(r#"install -m 0755 "$binary" "$out_dir/kubewasm""#));
    let mut files = BTreeMap::new();
    for (op, args) in stage.iter().filter(|(op, _)| op == "COPY") {
        let (flags, srcs, dest) = copy_args(args);
        assert_eq!(srcs.len(), 1, "{op} {args}");
        let (uid, gid) = match flags.get("chown") {
            Some(o) => {
                let (u, g) = o.split_once(':').unwrap();
                (u.parse().unwrap(), g.parse().unwrap())
            }
            None => (0, 0),
        };
        let dest = dest
            .trim_start_matches('/')
            .trim_end_matches('/')
            .to_string();
        let src = &srcs[0];
        match (flags.get("from").map(String::as_str), src.as_str()) {
            // A folder of the build context: its files, as checked out (not executable).
            (None, src) => {
                let base = root().join(src);
                let mut stack = vec![base.clone()];
                while let Some(dir) = stack.pop() {
                    for e in std::fs::read_dir(&dir).unwrap() {
                        let p = e.unwrap().path();
                        if p.is_dir() {
                            stack.push(p);
                            continue;
                        }
                        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                        assert_eq!(mode & 0o111, 0, "{}: not executable", p.display());
                        let rel = p.strip_prefix(&base).unwrap().to_str().unwrap();
                        let path = [dest.as_str(), rel]
                            .iter()
                            .filter(|s| !s.is_empty())
                            .copied()
                            .collect::<Vec<_>>()
                            .join("/");
                        files.insert(path, (false, 0o644, uid, gid));
                    }
                }
            }
            (Some("build"), "/empty") => {
                files.insert(dest, (true, 0o755, uid, gid));
            }
            (Some("build"), "/out/kubewasm") => {
                files.insert(dest, (false, 0o755, uid, gid));
            }
            (Some("build"), "/etc/ssl/certs/ca-certificates.crt") => {
                files.insert(dest, (false, 0o644, uid, gid));
            }
            other => panic!("COPY of an unknown source: {other:?}"),
        }
    }
    files
}

fn instruction<'a>(stage: &'a [(String, String)], op: &str) -> Vec<&'a str> {
    stage
        .iter()
        .filter(|(o, _)| o == op)
        .map(|(_, a)| a.as_str())
        .collect()
}

/// The config a Dockerfile stage sets: User, Env, Entrypoint, Cmd, ExposedPorts.
fn assert_config_matches(stage: &[(String, String)], config: &Value) {
    assert_eq!(
        instruction(stage, "USER"),
        [config["User"].as_str().unwrap()]
    );
    let env: Vec<&str> = instruction(stage, "ENV");
    assert_eq!(json!(env), config["Env"]);
    for op in ["ENTRYPOINT", "CMD"] {
        let want: Vec<Value> = instruction(stage, op)
            .iter()
            .map(|a| serde_json::from_str(a).unwrap())
            .collect();
        let key = if op == "CMD" { "Cmd" } else { "Entrypoint" };
        assert_eq!(want, [config[key].clone()], "{op}");
    }
    let ports: BTreeMap<String, Value> = instruction(stage, "EXPOSE")
        .iter()
        .map(|p| (format!("{p}/tcp"), json!({})))
        .collect();
    assert_eq!(json!(ports), config["ExposedPorts"]);
}

// ---------------------------------------------------------------------------------------
// tests

#[test]
fn host_image_config_runs_kubewasm_as_nonroot() {
    let image = host_image();
    let c = &image.config["config"];
    assert_eq!(c["User"], USER);
    assert_eq!(c["Entrypoint"], json!(["/usr/local/bin/kubewasm"]));
    assert_eq!(
        c["Cmd"],
        json!([
            "run",
            "--plugins",
            "/plugins",
            "--cache-dir",
            "/var/cache/kubewasm",
            "--log-format",
            "json"
        ])
    );
    let env = c["Env"].as_array().unwrap();
    assert!(
        env.contains(&json!("KUBEWASM_CACHE_DIR=/var/cache/kubewasm")),
        "{env:?}"
    );
    assert_eq!(image.layers.len(), 1);
    let layer = &image.layers[0];
    for dir in ["var/cache/kubewasm", "plugins"] {
        let e = &layer[dir];
        assert!(
            e.dir && (e.uid, e.gid, e.mode) == (65532, 65532, 0o755),
            "{dir}: {e:?}"
        );
    }
    let passwd = String::from_utf8(layer["etc/passwd"].data.clone()).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    assert!(!layer["etc/ssl/certs/ca-certificates.crt"].data.is_empty());
    // Nothing but root-owned folders and files, apart from the two folders above.
    for (path, e) in layer {
        if !["var/cache/kubewasm", "plugins"].contains(&path.as_str()) {
            assert_eq!((e.uid, e.gid), (0, 0), "{path}");
        }
    }
}

#[test]
fn host_image_binary_is_static_and_runs() {
    let image = host_image();
    let binary = &image.layers[0][BINARY];
    assert_eq!(binary.mode, 0o755);
    if let Err(why) = elf_static(&binary.data) {
        panic!("/{BINARY} is not static: {why}");
    }
    // The check itself tells a dynamic executable apart.
    let dynamic = std::fs::read(env!("CARGO_BIN_EXE_kubewasm")).unwrap();
    assert!(elf_static(&dynamic).is_err(), "the test build is dynamic");
    eprintln!(
        "binary /{BINARY}: {} bytes ({:.1} MiB), {} profile",
        binary.data.len(),
        binary.data.len() as f64 / 1048576.0,
        profile()
    );
    // The size: the layer is the binary and a few small files (no shell, no package
    // database, no toolchain), and the binary stays within its profile's budget (release,
    // fat LTO: 41.6 MiB at the last measure; image-check, no LTO: about 118 MiB).
    let total: usize = image.layers[0].values().map(|e| e.data.len()).sum();
    let rest = total - binary.data.len();
    eprintln!("layer: {total} bytes, {rest} of them besides the binary");
    assert!(
        rest < 1 << 20,
        "{rest} bytes in the layer besides the binary"
    );
    let budget_mib = if profile() == "release" { 64 } else { 192 };
    assert!(
        binary.data.len() < budget_mib << 20,
        "the {} binary is {} bytes, over {budget_mib} MiB",
        profile(),
        binary.data.len()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubewasm");
    extract(binary, &path);
    // An empty environment, as the compile worker gets it.
    let out = Command::new(&path)
        .arg("--version")
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains(&version()), "{printed}");
}

#[test]
fn host_image_is_reproducible() {
    let b = built();
    let (first, second) = (
        std::fs::read(&b.first).unwrap(),
        std::fs::read(&b.second).unwrap(),
    );
    assert!(first == second, "two builds differ");
    // Other bytes in, another archive out: the comparison can fail.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.tar");
    let image = host_image();
    let binary = dir.path().join("kubewasm");
    extract(&image.layers[0][BINARY], &binary);
    build_image(
        &[
            "--tag",
            "localhost/kubewasm:other",
            "--binary",
            binary.to_str().unwrap(),
        ],
        &other,
    );
    assert!(std::fs::read(&other).unwrap() != first);
}

#[test]
fn dockerfile_builds_the_same_image() {
    let image = host_image();
    let dockerfile = root().join("deploy/Dockerfile");
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    assert!(
        text.lines()
            .any(|l| l == "RUN bash deploy/build.sh /out && mkdir -p /empty")
    );
    let stage = final_stage(&dockerfile);
    assert_eq!(stage[0], ("FROM".to_string(), "scratch".to_string()));
    assert_config_matches(&stage, &image.config["config"]);

    let want = dockerfile_files(&stage);
    let layer = &image.layers[0];
    for (path, (dir, mode, uid, gid)) in &want {
        let e = layer
            .get(path)
            .unwrap_or_else(|| panic!("the Dockerfile copies /{path}; the archive lacks it"));
        assert_eq!(
            (e.dir, e.mode, e.uid, e.gid),
            (*dir, *mode, *uid, *gid),
            "/{path}"
        );
    }
    // The rest are the parent folders COPY creates: root's, 0755.
    for (path, e) in layer {
        if !want.contains_key(path) {
            assert!(
                e.dir
                    && (e.mode, e.uid, e.gid) == (0o755, 0, 0)
                    && want.keys().any(|w| w.starts_with(&format!("{path}/"))),
                "/{path} is in the archive, not in the Dockerfile: {e:?}"
            );
        }
    }
}

#[test]
fn plugin_image_copies_its_plugins() {
    let host = host_image();
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("kubewasm");
    extract(&host.layers[0][BINARY], &binary);
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let wasm = support::example_plugin("mongodb-monitor");
    std::fs::copy(&wasm, plugins.join("mongodb-monitor.wasm")).unwrap();
    std::fs::copy(
        wasm.with_extension("yaml"),
        plugins.join("mongodb-monitor.yaml"),
    )
    .unwrap();
    std::fs::write(plugins.join("notes.txt"), "not a plugin file").unwrap();
    let tar = dir.path().join("plugins.tar");
    build_image(
        &[
            "--plugins",
            plugins.to_str().unwrap(),
            "--binary",
            binary.to_str().unwrap(),
        ],
        &tar,
    );
    let image = read_image(&tar, &format!("localhost/kubewasm-plugins:{}", version()));
    // The host image's layer, then the plugins; the host's config but the copy command.
    assert_eq!(
        image.config["rootfs"]["diff_ids"][0],
        host.config["rootfs"]["diff_ids"][0]
    );
    assert_eq!(image.layers.len(), 2);
    let c = &image.config["config"];
    assert_eq!(c["User"], USER);
    assert_eq!(c["Cmd"], json!(["copy-plugins", "/plugins", "/target"]));
    let layer = &image.layers[1];
    assert_eq!(
        layer.keys().collect::<Vec<_>>(),
        [
            "plugins",
            "plugins/mongodb-monitor.wasm",
            "plugins/mongodb-monitor.yaml"
        ]
    );
    let stage = final_stage(&root().join("deploy/plugin-image/Dockerfile"));
    assert_eq!(stage[0].1, "${HOST_IMAGE}");
    assert_eq!(
        instruction(&stage, "COPY"),
        ["--chmod=0444 *.wasm *.yaml /plugins/"]
    );
    assert_eq!(
        instruction(&stage, "CMD"),
        [c["Cmd"].to_string().replace(',', ", ")]
    );
    for name in ["mongodb-monitor.wasm", "mongodb-monitor.yaml"] {
        let e = &layer[&format!("plugins/{name}")];
        assert_eq!((e.mode, e.uid, e.gid), (0o444, 0, 0), "{name}");
    }

    // What the init container runs, into an empty folder.
    let from = dir.path().join("from");
    std::fs::create_dir(&from).unwrap();
    for (path, e) in layer.iter().filter(|(_, e)| !e.dir) {
        extract(e, &from.join(Path::new(path).file_name().unwrap()));
    }
    let target = dir.path().join("target");
    let out = Command::new(&binary)
        .args(["copy-plugins"])
        .arg(&from)
        .arg(&target)
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for name in ["mongodb-monitor.wasm", "mongodb-monitor.yaml"] {
        let copied = target.join(name);
        assert_eq!(
            std::fs::read(&copied).unwrap(),
            std::fs::read(from.join(name)).unwrap()
        );
        let mode = std::fs::metadata(&copied).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o444, "{name}");
    }
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        2,
        "no temporary files left"
    );
    // An empty source is an error naming it.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = Command::new(&binary)
        .arg("copy-plugins")
        .arg(&empty)
        .arg(&target)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no plugin files in"));
}

/// The example overlay runs the image build-image.sh tags by default (a name with a
/// registry part, which never resolves to docker.io).
#[test]
fn example_overlay_runs_the_built_image() {
    let text = std::fs::read_to_string(
        root().join("deploy/kubernetes/overlays/example/kustomization.yaml"),
    )
    .unwrap();
    let doc: Value = serde_yaml_ng::from_str(&text).unwrap();
    let image = doc["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "localhost/kubewasm")
        .expect("the overlay replaces the base's image, localhost/kubewasm");
    assert_eq!(
        format!(
            "{}:{}",
            image["newName"].as_str().unwrap(),
            image["newTag"].as_str().unwrap()
        ),
        format!("localhost/kubewasm:{}", version())
    );
    let script = std::fs::read_to_string(root().join("deploy/build-image.sh")).unwrap();
    assert!(script.contains(r#"tag="localhost/kubewasm:$version""#));
    let base =
        std::fs::read_to_string(root().join("deploy/kubernetes/base/deployment.yaml")).unwrap();
    assert!(base.contains("imagePullPolicy: IfNotPresent"));
}
