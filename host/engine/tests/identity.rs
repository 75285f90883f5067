//! The host asks, once per plugin, whether it may impersonate the plugin's ServiceAccount
//! (a SelfSubjectAccessReview), against the embedded API server with RBAC enforced: the
//! account RBAC allows passes, another account or the right one in another namespace is
//! one line saying which account, which namespace and how to fix it.

use kube::Api;
use kube::api::DynamicObject;
use kube::api::PostParams;
use kubewasm::apply::WriteIdentity;
use kubewasm::apply::identity::check_impersonation;
use kubewasm_apiserver::{ApiServer, Config};
use kubewasm_core::manifest::Manifest;
use serde_json::json;

const HOST: &str = "system:serviceaccount:kw:kubewasm";

fn manifest(name: &str) -> Manifest {
    Manifest {
        name: name.into(),
        version: "1".into(),
        watches: vec![],
        grants: vec![],
        reads: vec![],
    }
}

fn client_as(server: &ApiServer, token: &str) -> kube::Client {
    let mut c = server.client_config();
    c.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(c).expect("client")
}

async fn create(
    admin: &kube::Client,
    api_version: &str,
    kind: &str,
    plural: &str,
    obj: serde_json::Value,
) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    );
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(admin.clone(), ns, &ar),
        None => Api::all_with(admin.clone(), &ar),
    };
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    api.create(&PostParams::default(), &o)
        .await
        .expect("create");
}

#[tokio::test]
async fn the_host_is_told_which_accounts_it_cannot_impersonate() {
    let server = ApiServer::start(Config::default().with_rbac("admin", &[("host", HOST)]))
        .await
        .expect("server");
    let admin = kube::Client::try_from(server.client_config()).expect("client");
    create(
        &admin,
        "v1",
        "Namespace",
        "namespaces",
        json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kw"}}),
    )
    .await;
    // What `kubewasm rbac --service-account-namespace kw` gives the host for plugin a.
    create(
        &admin,
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "kubewasm", "namespace": "kw"},
        "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"],
                   "resourceNames": ["kubewasm-a"], "verbs": ["impersonate"]}]}),
    )
    .await;
    create(
        &admin,
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "kubewasm", "namespace": "kw"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubewasm"},
        "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kw"}]}),
    )
    .await;
    let host = client_as(&server, "host");
    let in_kw = WriteIdentity::PluginServiceAccounts {
        namespace: "kw".into(),
    };
    assert_eq!(
        check_impersonation(&host, &in_kw, &manifest("a")).await,
        Ok(())
    );
    // Another plugin's account, and the right account in the wrong namespace.
    let err = check_impersonation(&host, &in_kw, &manifest("b"))
        .await
        .unwrap_err();
    assert!(
        err.starts_with(
            "the host may not impersonate ServiceAccount kubewasm-b in namespace kw, so every write of plugin b would be refused"
        ),
        "{err}"
    );
    assert!(!err.contains('\n'), "one line: {err}");
    let elsewhere = WriteIdentity::PluginServiceAccounts {
        namespace: "default".into(),
    };
    let err = check_impersonation(&host, &elsewhere, &manifest("a"))
        .await
        .unwrap_err();
    assert!(err.contains("kubewasm-a in namespace default"), "{err}");
    assert!(err.contains("--plugin-namespace"), "{err}");
    // Writing as the host impersonates nobody.
    assert_eq!(
        check_impersonation(&host, &WriteIdentity::Host, &manifest("b")).await,
        Ok(())
    );
    // The admin may impersonate anyone.
    assert_eq!(
        check_impersonation(&admin, &in_kw, &manifest("b")).await,
        Ok(())
    );
}
