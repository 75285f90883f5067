//! kubeconfig YAML for the running server.

use base64::Engine;
use serde_json::json;

/// Context name in generated kubeconfigs.
pub(crate) const CONTEXT: &str = "kubewasm-dev";

/// Renders a kubeconfig with one cluster, user and context (`kubewasm-dev`, namespace default).
pub fn render(
    url: &str,
    ca_pem: Option<&str>,
    token: Option<&str>,
) -> Result<String, serde_yaml_ng::Error> {
    let mut cluster = json!({"server": url});
    if let (Some(ca), Some(c)) = (ca_pem, cluster.as_object_mut()) {
        c.insert(
            "certificate-authority-data".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(ca)),
        );
    }
    let mut user = json!({});
    if let (Some(t), Some(u)) = (token, user.as_object_mut()) {
        u.insert("token".into(), json!(t));
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"}}],
        "current-context": CONTEXT,
        "preferences": {},
    });
    serde_yaml_ng::to_string(&doc)
}
