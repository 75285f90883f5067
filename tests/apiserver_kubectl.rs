//! kubectl against the embedded API server, through the kubeconfig it writes:
//! server-side apply of a CRD and an instance, `get -o yaml` with managedFields,
//! `get -w` seeing a later change, and `delete`. Skipped (loudly) without kubectl.

#[path = "apiserver_support.rs"]
mod support;

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

fn kubectl_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .env("KUBECACHEDIR", self.home.join("cache"))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> String {
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

    async fn fails(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.expect("kubectl runs");
        assert!(!out.status.success(), "kubectl {args:?} should fail");
        String::from_utf8_lossy(&out.stderr).to_string()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write manifest");
    p.to_string_lossy().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_watch_delete() {
    let Some(bin) = kubectl_path() else {
        eprintln!("\n\n********** SKIPPED: kubectl not on PATH **********\n");
        println!("SKIPPED: kubectl not on PATH");
        return;
    };
    let (server, client) = server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let k = Kubectl {
        bin,
        kubeconfig,
        home: dir.path().to_path_buf(),
    };

    let crd = serde_json::to_string_pretty(&widget_crd()).expect("crd");
    let crd_file = write(dir.path(), "crd.json", &crd);
    let out = k
        .run(&[
            "apply",
            "--server-side",
            "--validate=false",
            "-f",
            &crd_file,
        ])
        .await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/widgets.example.com serverside-applied"
        ),
        "{out}"
    );
    let instance = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  labels:\n    app: demo\nspec:\n  a: hello\n";
    let inst_file = write(dir.path(), "w1.yaml", instance);
    let out = k
        .run(&[
            "apply",
            "--server-side",
            "--validate=false",
            "-f",
            &inst_file,
        ])
        .await;
    assert!(
        out.contains("widget.example.com/w1 serverside-applied"),
        "{out}"
    );

    let yaml = k
        .run(&["get", "widgets", "-o", "yaml", "--show-managed-fields"])
        .await;
    assert!(yaml.contains("managedFields:"), "{yaml}");
    assert!(yaml.contains("manager: kubectl"), "{yaml}");
    assert!(yaml.contains("operation: Apply"), "{yaml}");
    assert!(yaml.contains("f:a: {}"), "{yaml}");

    let table = k.run(&["get", "widgets"]).await;
    let header = table.lines().next().unwrap_or_default().to_string();
    assert!(
        header.starts_with("NAME") && header.contains("STATE") && header.contains("AGE"),
        "{table}"
    );
    assert!(table.lines().any(|l| l.starts_with("w1 ")), "{table}");
    let by_short = k
        .run(&["get", "wd", "w1", "-o", "jsonpath={.spec.a}"])
        .await;
    assert_eq!(by_short, "hello");
    let cm_file = write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n",
    );
    let cm_out = k.run(&["apply", "--validate=false", "-f", &cm_file]).await;
    assert!(cm_out.contains("configmap/plain created"), "{cm_out}");
    let cm_out = k.run(&["apply", "--validate=false", "-f", &cm_file]).await;
    assert!(
        cm_out.contains("configmap/plain unchanged"),
        "client-side apply converges: {cm_out}"
    );
    let cms = k.run(&["get", "configmaps"]).await;
    assert!(cms.lines().any(|l| l.starts_with("plain ")), "{cms}");

    // get -w shows a later change.
    let mut watch = k
        .command(&["get", "widgets", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl get -w");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("header in time")
        .expect("read")
        .unwrap_or_default();
    assert!(first.starts_with("NAME"), "{first}");
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    // Wait until the initial row is printed, then change the status.
    let row = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("row in time")
        .expect("read")
        .unwrap_or_default();
    assert!(row.starts_with("w1 "), "{row}");
    widgets
        .patch_status("w1", &PatchParams::apply("status-writer"), &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "status": {"state": "Ready"}})))
        .await
        .expect("status change");
    let changed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match lines.next_line().await.expect("read") {
                Some(l) if l.contains("Ready") => return l,
                Some(_) => continue,
                None => panic!("kubectl get -w ended"),
            }
        }
    })
    .await
    .expect("watch shows the change");
    assert!(changed.starts_with("w1 "), "{changed}");
    watch.kill().await.expect("stop watch");

    let out = k.run(&["delete", "widget", "w1"]).await;
    assert!(out.contains("widget.example.com \"w1\" deleted"), "{out}");
    let err = k.fails(&["get", "widget", "w1"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    let out = k.run(&["delete", "-f", &crd_file]).await;
    assert!(out.contains("deleted"), "{out}");
    server.shutdown().await;
}
