//! kubectl bound to an embedded server through the kubeconfig it writes: the `kubectl`
//! on PATH (CI pins its version), skipped loudly when there is none.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The `kubectl` on PATH.
pub fn kubectl_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// A kubectl with its own kubeconfig and HOME (so its discovery cache is fresh).
pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub home: PathBuf,
}

impl Kubectl {
    /// The command, not started.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .env("KUBECACHEDIR", self.home.join("cache"))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    /// Runs it; its stdout, failing the test when it fails.
    pub async fn run(&self, args: &[&str]) -> String {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .expect("kubectl finishes")
            .expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}"
        );
        stdout
    }

    /// Runs it expecting failure; its stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.expect("kubectl runs");
        assert!(!out.status.success(), "kubectl {args:?} should fail");
        String::from_utf8_lossy(&out.stderr).to_string()
    }
}

/// A kubectl bound to `server` through a kubeconfig in `dir`; `None` without kubectl.
pub fn kubectl_for(server: &kubewasm_apiserver::ApiServer, dir: &Path) -> Option<Kubectl> {
    let Some(bin) = kubectl_path() else {
        eprintln!("\n\n********** SKIPPED: kubectl not on PATH **********\n");
        println!("SKIPPED: kubectl not on PATH");
        return None;
    };
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    Some(Kubectl {
        bin,
        kubeconfig,
        home: dir.to_path_buf(),
    })
}

/// Writes a manifest into `dir`; its path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write manifest");
    p.to_string_lossy().to_string()
}
