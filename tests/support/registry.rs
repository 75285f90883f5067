//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! registry 2.8, installed by tests/tools/install-registry.sh) on a free loopback port,
//! with its own storage folder, stopped when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary of Debian's `docker-registry` package.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// The user and password of [`Registry::start_with_basic_auth`].
pub const REGISTRY_USER: &str = "kubewasm";
/// See [`REGISTRY_USER`].
pub const REGISTRY_PASSWORD: &str = "registry-secret";
/// bcrypt (cost 4, the cheapest: the registry checks it on every request) of
/// [`REGISTRY_PASSWORD`]; fixed, so that no htpasswd tool is needed.
const HTPASSWD: &str = "kubewasm:$2b$04$0W3uCoBBtqNZcN8rHaRKme1ah2YqUG3SohzOcCgz.1kUFBy3sJkim\n";

/// How long a registry may take to answer `/v2/` after it is started.
const READY: Duration = Duration::from_secs(20);

/// A running (or stopped) registry.
pub struct Registry {
    dir: tempfile::TempDir,
    /// The address it listens on (loopback unless [`Registry::start_on`]).
    ip: String,
    port: u16,
    tls: Option<Tls>,
    basic_auth: bool,
    child: Option<Child>,
}

/// The certificate material of a [`Registry::start_tls`] registry.
pub struct Tls {
    /// The CA that signed the registry's certificate (PEM file), for `--registry-ca`.
    pub ca_file: PathBuf,
}

impl Registry {
    /// A plain-HTTP registry without authentication.
    pub fn start() -> Registry {
        Self::launch(false, false)
    }

    /// A plain-HTTP registry without authentication on `ip:port` (e.g. a bridge address
    /// that a node's pods reach), instead of a free loopback port.
    pub fn start_on(ip: &str, port: u16) -> Registry {
        Self::launch_on(ip, port, false, false)
    }

    /// A plain-HTTP registry requiring HTTP basic authentication as
    /// [`REGISTRY_USER`]/[`REGISTRY_PASSWORD`].
    pub fn start_with_basic_auth() -> Registry {
        Self::launch(false, true)
    }

    /// An HTTPS registry whose certificate (for 127.0.0.1) a freshly generated CA signed
    /// ([`Registry::ca_file`]).
    pub fn start_tls() -> Registry {
        Self::launch(true, false)
    }

    fn launch(tls: bool, basic_auth: bool) -> Registry {
        Self::launch_on("127.0.0.1", free_port(), tls, basic_auth)
    }

    fn launch_on(ip: &str, port: u16, tls: bool, basic_auth: bool) -> Registry {
        assert!(
            Path::new(REGISTRY_BIN).is_file(),
            "{REGISTRY_BIN} is missing: run tests/tools/install-registry.sh (tests/run.sh does)"
        );
        let dir = tempfile::tempdir().expect("registry dir");
        let tls = tls.then(|| generate_tls(dir.path()));
        let mut registry = Registry {
            dir,
            ip: ip.to_string(),
            port,
            tls,
            basic_auth,
            child: None,
        };
        registry.write_config();
        registry.restart();
        registry
    }

    fn write_config(&self) {
        let d = self.dir.path();
        std::fs::create_dir_all(d.join("storage")).expect("storage dir");
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n  \
             maintenance:\n    uploadpurging:\n      enabled: false\n\
             http:\n  addr: {ip}:{port}\n  secret: kubewasm-tests\n",
            storage = d.join("storage").display(),
            ip = self.ip,
            port = self.port,
        );
        if self.tls.is_some() {
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("server.pem").display(),
                d.join("server.key").display()
            ));
        }
        if self.basic_auth {
            std::fs::write(d.join("htpasswd"), HTPASSWD).expect("htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: kubewasm-tests\n    path: {}\n",
                d.join("htpasswd").display()
            ));
        }
        std::fs::write(d.join("config.yml"), config).expect("registry config");
    }

    /// `IP:PORT` (loopback unless started on another address), the registry part of
    /// references.
    pub fn host(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// `oci://IP:PORT/{path}` (`path` is `REPO:TAG` or `REPO@sha256:…`).
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.host())
    }

    /// The CA file of a [`Registry::start_tls`] registry.
    pub fn ca_file(&self) -> &Path {
        &self.tls.as_ref().expect("a TLS registry").ca_file
    }

    /// Where the registry keeps blob `digest` (`sha256:HEX`): the distribution registry's
    /// filesystem layout, docker/registry/v2/blobs/sha256/<first 2>/<hex>/data.
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Everything the registry logged (its access log names every request).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Stop the registry (its storage stays) and wait until its port refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + READY;
        while TcpStream::connect((self.ip.as_str(), self.port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "registry port {} still open",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// (Re)start the registry on the same port and storage, and wait until it answers.
    pub fn restart(&mut self) {
        self.stop();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("registry.log"))
            .expect("registry log");
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {REGISTRY_BIN}: {e}"));
        self.child = Some(child);
        self.wait_ready();
    }

    /// Until `/v2/` answers (200, or 401 with authentication), or panic with its log.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("the registry exited ({status}):\n{}", self.log());
            }
            if self.answers() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the registry did not answer on {} within {READY:?}:\n{}",
                self.host(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect((self.ip.as_str(), self.port)) else {
            return false;
        };
        if self.tls.is_some() {
            // Listening is enough: the registry loads its certificate before it listens.
            return true;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream
            .write_all(b"GET /v2/ HTTP/1.0\r\nHost: registry\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut head = [0u8; 12];
        if stream.read_exact(&mut head).is_err() {
            return false;
        }
        let status = String::from_utf8_lossy(&head[9..12]).to_string();
        status == "200" || status == "401"
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// A CA and a serving certificate for 127.0.0.1 signed by it, in `dir`: `ca.pem`,
/// `server.pem`, `server.key` (also the metrics listener's, in tests/ops.rs).
pub fn generate_tls(dir: &Path) -> Tls {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kubewasm-test-registry-ca");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).expect("ca.pem");
    std::fs::write(dir.join("server.pem"), cert.pem()).expect("server.pem");
    std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("server.key");
    Tls { ca_file }
}
