//! Whether the host can write as a plugin at all, asked once when the plugin loads.
//!
//! With [`WriteIdentity::PluginServiceAccounts`] every write of plugin `P` impersonates
//! the ServiceAccount `kubewasm-P` in the plugins' namespace. When the host may not
//! (RBAC from `kubewasm rbac` not applied, or applied for another namespace than
//! `--plugin-namespace`), each write fails with a 403 about impersonation, one per event.
//! [`check_impersonation`] asks the API server instead, with a SelfSubjectAccessReview of
//! `impersonate serviceaccounts kubewasm-P` in that namespace, so the plugin is marked not
//! ready with one line saying which account, which namespace and how to fix it.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use kubewasm_core::manifest::Manifest;

use super::WriteIdentity;

/// Check that the host may impersonate the ServiceAccount `plugin` writes as (nothing to
/// check with [`WriteIdentity::Host`]). `Err` is the one line to show for the plugin (its
/// `Ready` condition, `/readyz?verbose`, the log). A review that cannot be asked (an API
/// server without the authorization API, a transport error) proves nothing: it is logged
/// and the plugin is not held back; its writes will tell.
pub async fn check_impersonation(
    client: &kube::Client,
    identity: &WriteIdentity,
    plugin: &Manifest,
) -> Result<(), String> {
    let WriteIdentity::PluginServiceAccounts { namespace } = identity else {
        return Ok(());
    };
    let account = plugin.field_manager();
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.clone()),
                verb: Some("impersonate".into()),
                group: Some(String::new()),
                resource: Some("serviceaccounts".into()),
                name: Some(account.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = match reviews.create(&PostParams::default(), &review).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(plugin = %plugin.name, account = %account, namespace = %namespace, error = %e,
                "cannot ask whether the host may impersonate the plugin's ServiceAccount; its writes will tell");
            return Ok(());
        }
    };
    if answer.status.as_ref().is_some_and(|s| s.allowed) {
        return Ok(());
    }
    Err(format!(
        "the host may not impersonate ServiceAccount {account} in namespace {namespace}, so every write of plugin {} would be refused; apply the RBAC `kubewasm rbac --service-account-namespace {namespace}` prints (it lets the host impersonate {account}), or point --plugin-namespace at the namespace the plugins' ServiceAccounts are in, or run with --no-impersonation",
        plugin.name
    ))
}
