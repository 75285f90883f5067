//! Namespaces: content may be created only in a namespace that exists and is not
//! terminating, a namespaced object's namespace must match its URL, and a terminating
//! namespace is finished once it is empty.

use serde_json::Value;

use super::{CONTROLLER_MANAGER, Ownership, State, Store, Target, storage_target};
use crate::error::{ApiResult, StatusError};
use crate::meta::{finalizers, meta_str};
use crate::registry::GroupResource;

pub(super) fn check_namespace(t: &Target, body: &Value) -> ApiResult<()> {
    if t.info.namespaced
        && let Some(ns) = meta_str(body, "namespace").filter(|n| !n.is_empty())
        && ns != t.namespace
    {
        return Err(StatusError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

impl State {
    pub(super) fn check_namespace_exists(&self, t: &Target, name: &str) -> ApiResult<()> {
        if !t.info.namespaced {
            return Ok(());
        }
        let gr = GroupResource {
            group: String::new(),
            resource: "namespaces".into(),
        };
        match self.find(&gr, "", &t.namespace) {
            None => Err(StatusError::not_found("", "namespaces", &t.namespace)),
            Some(ns) if ns.pointer("/metadata/deletionTimestamp").is_some() => {
                Err(StatusError::forbidden(format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                    crate::error::qualified(&t.info.group, &t.info.plural),
                    t.namespace
                )))
            }
            Some(_) => Ok(()),
        }
    }
}

impl Store {
    /// Finishes a terminating namespace once it is empty.
    pub(crate) fn finalize_namespace(&self, name: &str, uid: &str) -> ApiResult<()> {
        let gr = GroupResource {
            group: String::new(),
            resource: "namespaces".into(),
        };
        let mut st = self.lock();
        let Some(old) = st.find(&gr, "", name) else {
            return Ok(());
        };
        if meta_str(&old, "uid") != Some(uid) {
            return Ok(());
        }
        if st.objects.values().any(|m| m.keys().any(|k| k.0 == name)) {
            return Ok(());
        }
        if finalizers(&old).is_empty() {
            st.remove(&gr, "", name, &old);
        } else if let Some(info) = st.registry.get(&gr) {
            let mut new = (*old).clone();
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("finalizers");
            }
            let t = storage_target(&info, "");
            st.update(
                &t,
                name,
                &old,
                new,
                Ownership::System(CONTROLLER_MANAGER.into()),
                false,
            )?;
        }
        Ok(())
    }
}
