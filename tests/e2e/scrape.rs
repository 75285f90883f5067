//! A secure scrape on the real cluster (issue 33): `kubewasm run --metrics-secure` as the
//! suite's ServiceAccount, holding the RBAC `kubewasm rbac --metrics-secure` prints.
//! kube-apiserver answers the host's TokenReviews and SubjectAccessReviews: no token 401,
//! a ServiceAccount without the reader role 403, one bound to it the metrics.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{CONVERGE, apply};
use crate::support::{self, eventually, field};
use crate::{Suite, start_host_from};

/// A bound token of ServiceAccount `name` of the host's namespace, made first.
async fn token_of(s: &Suite, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(s.admin.clone(), &s.host_ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("ServiceAccount");
    let _ = sas.create(&PostParams::default(), &account).await;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    sas.create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .and_then(|st| st.token)
        .expect("a token in the TokenRequest status")
}

/// The host's RBAC again, as `kubewasm rbac --metrics-secure` prints it for the suite's
/// plugins: the reviews on the host's ClusterRole, and the reader role. Returns the
/// reader role's name.
async fn secure_rbac(s: &Suite) -> String {
    let rbac_name = format!("kubewasm-e2e-{}", s.id);
    let (plugins, approvals) = (
        s.plugins.to_string_lossy().into_owned(),
        s.approvals.to_string_lossy().into_owned(),
    );
    let docs = crate::install_docs(
        s,
        &[
            "rbac",
            "--metrics-secure",
            "--plugins",
            &plugins,
            "--approvals",
            &approvals,
        ],
    );
    let reader = format!("{}:{rbac_name}-metrics-reader", s.host_ns);
    assert!(
        docs.iter()
            .any(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == json!(reader)),
        "no {reader} in kubewasm rbac --metrics-secure"
    );
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{reader}-scraper")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": s.host_ns}],
    });
    for (kind, plural, name) in [
        ("ClusterRole", "clusterroles", reader.clone()),
        (
            "ClusterRoleBinding",
            "clusterrolebindings",
            format!("{reader}-scraper"),
        ),
    ] {
        s.created.lock().unwrap().push((
            "rbac.authorization.k8s.io/v1".into(),
            kind.into(),
            plural.into(),
            name,
        ));
    }
    apply(&s.admin, docs.into_iter().chain([binding]).collect()).await;
    reader
}

pub async fn secure_scrape(s: &'static Suite) {
    secure_rbac(s).await;
    let scraper = token_of(s, "scraper").await;
    let bystander = token_of(s, "bystander").await;
    // A host that loads nothing and writes nothing (beside the suite's), its metrics over
    // HTTPS with a certificate signed by a CA this test trusts.
    let dir = s._dir.path().join("scrape");
    for sub in ["plugins", "approvals", "certs"] {
        std::fs::create_dir_all(dir.join(sub)).expect("dir");
    }
    let tls = support::registry::generate_tls(&dir.join("certs"));
    let (plugins, approvals, certs) = (
        dir.join("plugins"),
        dir.join("approvals"),
        dir.join("certs"),
    );
    let host = start_host_from(
        s,
        Some((&plugins, &approvals)),
        &[
            "--no-plugin-objects",
            "--metrics-addr",
            "127.0.0.1:0",
            "--metrics-secure",
            "--metrics-cert-path",
            certs.to_str().expect("UTF-8 path"),
            "--metrics-cert-name",
            "server.pem",
            "--metrics-cert-key",
            "server.key",
        ],
    )
    .await;
    let line = host
        .wait_log("the metrics listener", |l| {
            field(l, "message").starts_with("serving /healthz, /readyz, /status, /metrics")
        })
        .await;
    let addr = field(&line, "addr").to_string();
    let get = |path: &'static str, token: Option<String>| {
        let (addr, ca) = (addr.clone(), tls.ca_file.clone());
        async move { support::https_get(&addr, Some(&ca), path, token.as_deref()).await }
    };
    assert_eq!(get("/metrics", None).await.0, 401, "no token");
    assert_eq!(
        get("/metrics", Some("not-a-token".into())).await.0,
        401,
        "a token kube-apiserver does not know"
    );
    // The authorizer sees new bindings through its informer: a moment later.
    let body = eventually("the scraper reads /metrics", CONVERGE, || {
        let get = get("/metrics", Some(scraper.clone()));
        async move {
            let (code, body) = get.await;
            (code == 200).then_some(body)
        }
    })
    .await;
    assert!(body.contains("kubewasm_"), "{body}");
    let (code, body) = get("/status", Some(scraper.clone())).await;
    assert_eq!(code, 200, "{body}");
    println!(
        "  /metrics and /status read with the scraper's token ({} bytes)",
        body.len()
    );
    let (code, body) = get("/metrics", Some(bystander)).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(&format!("system:serviceaccount:{}:bystander", s.host_ns)),
        "{body}"
    );
    println!("  bystander: {}", body.trim());
    assert_eq!(
        host.stop(),
        Some(0),
        "the scraping host did not stop cleanly"
    );
}
