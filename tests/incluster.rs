//! In-cluster configuration from a service-account directory, against the embedded API
//! server over TLS with a bearer token. One test function: it sets process environment
//! variables.

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ListParams};
use kubewasm::serve::incluster::config_from_dir;
use kubewasm_apiserver::{ApiServer, Config};

#[tokio::test]
async fn in_cluster_config_reaches_the_api_server_over_tls() {
    let server = ApiServer::start(Config {
        tls: true,
        token: Some("s3cret".into()),
        ..Default::default()
    })
    .await
    .expect("start API server");
    let url = server.url();
    let (host, port) = url
        .trim_start_matches("https://")
        .rsplit_once(':')
        .expect("host:port");
    // SAFETY: this test binary has a single test; nothing else reads the environment
    // concurrently.
    unsafe {
        std::env::set_var("KUBERNETES_SERVICE_HOST", host);
        std::env::set_var("KUBERNETES_SERVICE_PORT", port);
    }

    let good = tempfile::tempdir().expect("tempdir");
    let ca = server.ca_pem().expect("CA");
    std::fs::write(good.path().join("ca.crt"), &ca).expect("ca.crt");
    std::fs::write(good.path().join("token"), "s3cret").expect("token");
    std::fs::write(good.path().join("namespace"), "kube-system\n").expect("namespace");

    let config = config_from_dir(good.path()).expect("in-cluster config");
    assert_eq!(config.default_namespace, "kube-system");
    assert_eq!(config.cluster_url.scheme_str(), Some("https"));
    let client = Client::try_from(config).expect("client");
    let names: Vec<String> = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .expect("list namespaces with the service-account token")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.iter().any(|n| n == "default"), "{names:?}");

    // A wrong token is refused with 401.
    let bad = tempfile::tempdir().expect("tempdir");
    std::fs::write(bad.path().join("ca.crt"), &ca).expect("ca.crt");
    std::fs::write(bad.path().join("token"), "wrong").expect("token");
    let client = Client::try_from(config_from_dir(bad.path()).expect("config")).expect("client");
    match Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401, "{s:?}"),
        other => panic!("expected 401, got {other:?}"),
    }

    // Missing pieces are named.
    let empty = tempfile::tempdir().expect("tempdir");
    let err = config_from_dir(empty.path())
        .expect_err("no token")
        .to_string();
    assert!(err.contains("token"), "{err}");
    // SAFETY: as above.
    unsafe { std::env::remove_var("KUBERNETES_SERVICE_PORT") };
    let err = config_from_dir(good.path())
        .expect_err("no port")
        .to_string();
    assert!(err.contains("KUBERNETES_SERVICE_PORT"), "{err}");
}
