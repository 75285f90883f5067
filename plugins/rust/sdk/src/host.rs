//! Read-only access to the host's caches (an informer lister, not a live API call).
//!
//! A plugin may read the kinds it watches and the kinds its manifest lists in `reads`.
//! Objects come projected: when the plugin declared fields for a kind (on its watches or
//! reads of it, [`Watch::fields`](crate::Watch::fields)), only those and the identity.
//! Errors from the host (a read that is not allowed, a kind not cached yet) come back as
//! retryable [`HandleError`]s, so `?` makes the host retry the event later.
//!
//! Natively (in `cargo test`) these read the objects given to
//! [`testing::set_objects`](crate::testing::set_objects).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{HandleError, Result};

/// One object from the cache; `Ok(None)` when there is no such object.
/// `namespace` is `None` for cluster-scoped kinds.
pub fn get(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Value>> {
    let raw = imp::get(api_version, kind, namespace, name)
        .map_err(|e| HandleError::retry(format!("host.get {kind} {name}: {e}")))?;
    raw.map(|s| parse(&s, kind)).transpose()
}

/// One object decoded into `T`.
pub fn get_as<T: DeserializeOwned>(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<T>> {
    get(api_version, kind, namespace, name)?
        .map(|v| decode(v, kind))
        .transpose()
}

/// The objects of a kind, in one namespace (`Some`) or all (`None`), optionally filtered
/// by a label selector such as `app=web`.
pub fn list(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<Value>> {
    imp::list(api_version, kind, namespace, label_selector)
        .map_err(|e| HandleError::retry(format!("host.list {kind}: {e}")))?
        .iter()
        .map(|s| parse(s, kind))
        .collect()
}

/// The objects of a kind decoded into `T`.
pub fn list_as<T: DeserializeOwned>(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<T>> {
    list(api_version, kind, namespace, label_selector)?
        .into_iter()
        .map(|v| decode(v, kind))
        .collect()
}

/// One object as a k8s-openapi type, e.g. `host::get_typed::<Service>(Some("web"), "blog")`.
#[cfg(feature = "k8s-openapi")]
pub fn get_typed<K>(namespace: Option<&str>, name: &str) -> Result<Option<K>>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    get(K::API_VERSION, K::KIND, namespace, name)?
        .map(crate::object::from_value_typed)
        .transpose()
}

/// The objects of a k8s-openapi type.
#[cfg(feature = "k8s-openapi")]
pub fn list_typed<K>(namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<K>>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    list(K::API_VERSION, K::KIND, namespace, label_selector)?
        .into_iter()
        .map(crate::object::from_value_typed)
        .collect()
}

fn parse(text: &str, kind: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| HandleError::retry(format!("host returned invalid JSON for {kind}: {e}")))
}

fn decode<T: DeserializeOwned>(value: Value, kind: &str) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| HandleError::permanent(format!("{kind} does not decode: {e}")))
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::bindings::kubewasm::plugin::host;

    pub(super) fn get(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, String> {
        host::get(api_version, kind, namespace, name)
    }

    pub(super) fn list(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, String> {
        host::list(api_version, kind, namespace, label_selector)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) fn get(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, String> {
        crate::testing::mock_get(api_version, kind, namespace, name)
    }

    pub(super) fn list(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, String> {
        crate::testing::mock_list(api_version, kind, namespace, label_selector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_native_mock() {
        crate::testing::set_objects(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "namespace": "x", "labels": {"app": "a"}}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b", "namespace": "y"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
        ]);
        assert!(get("v1", "Service", Some("x"), "a").unwrap().is_some());
        assert!(get("v1", "Service", Some("y"), "a").unwrap().is_none());
        assert!(get("v1", "Namespace", None, "x").unwrap().is_some());
        assert_eq!(list("v1", "Service", None, None).unwrap().len(), 2);
        assert_eq!(list("v1", "Service", Some("y"), None).unwrap().len(), 1);
        assert_eq!(list("v1", "Service", None, Some("app=a")).unwrap().len(), 1);
        assert_eq!(
            list("v1", "Service", None, Some("app!=a")).unwrap().len(),
            1
        );
        assert_eq!(list("v1", "Service", None, Some("!app")).unwrap().len(), 1);
        assert!(
            list("v1", "Service", None, Some("app in (a)"))
                .unwrap_err()
                .retry
        );
        #[cfg(feature = "k8s-openapi")]
        {
            use k8s_openapi::api::core::v1::Service;
            let svcs: Vec<Service> = list_typed(None, Some("app")).unwrap();
            assert_eq!(svcs[0].metadata.name.as_deref(), Some("a"));
            assert!(get_typed::<Service>(Some("x"), "zzz").unwrap().is_none());
        }
        crate::testing::set_objects(vec![]);
    }
}
