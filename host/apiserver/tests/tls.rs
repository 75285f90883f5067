//! TLS with a generated CA and bearer-token authentication.

mod support;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use kubewasm_apiserver::{ApiServer, Config};

#[tokio::test]
async fn tls_and_token_auth() {
    let server = ApiServer::start(Config {
        tls: true,
        token: Some("s3cret".into()),
        ..Config::default()
    })
    .await
    .expect("start");
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    assert!(
        server
            .ca_pem()
            .is_some_and(|p| p.contains("BEGIN CERTIFICATE"))
    );
    assert_eq!(server.token().as_deref(), Some("s3cret"));

    let client = Client::try_from(server.client_config()).expect("client");
    let nss: Api<Namespace> = Api::all(client);
    assert!(
        !nss.list(&ListParams::default())
            .await
            .expect("authorised list over TLS")
            .items
            .is_empty()
    );

    // Same CA, no token: 401 Unauthorized Status.
    let mut anonymous = server.client_config();
    anonymous.auth_info.token = None;
    let nss: Api<Namespace> = Api::all(Client::try_from(anonymous.clone()).expect("client"));
    let e = support::api_err(nss.list(&ListParams::default()).await);
    assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
    let e = support::api_err(
        Client::try_from(anonymous)
            .expect("client")
            .apiserver_version()
            .await,
    );
    assert_eq!(e.code, 401);

    // Wrong CA: the TLS handshake fails.
    let mut untrusted = server.client_config();
    untrusted.root_cert = None;
    let nss: Api<Namespace> = Api::all(Client::try_from(untrusted).expect("client"));
    assert!(nss.list(&ListParams::default()).await.is_err());

    // The kubeconfig carries the CA and token.
    let text = server.kubeconfig();
    assert!(text.contains("certificate-authority-data:"), "{text}");
    assert!(text.contains("token: s3cret"), "{text}");
    assert!(text.contains("current-context: kubewasm-dev"), "{text}");
    let kc = Kubeconfig::from_yaml(&text).expect("parse kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    assert_eq!(cfg.default_namespace, "default");
    let nss: Api<Namespace> = Api::all(Client::try_from(cfg).expect("client"));
    nss.get("kube-system").await.expect("kubeconfig works");
    server.shutdown().await;
}

#[tokio::test]
async fn plain_http_kubeconfig_and_shutdown() {
    let server = ApiServer::start(Config::default()).await.expect("start");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config");
    server.write_kubeconfig(&path).expect("write");
    let kc = Kubeconfig::read_from(&path).expect("read kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = Client::try_from(cfg).expect("client");
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.get("default").await.expect("get");
    server.shutdown().await;
    assert!(nss.get("default").await.is_err(), "server stopped");
}
