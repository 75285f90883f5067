//! Server-side apply: the configuration checked and pruned, the live object and its
//! field owners taken, merged by `crate::apply`, and written through create or update.

use super::write::{check_body_identity, check_type};
use super::{Ownership, Store, Target, present};
use crate::apply::{self, ApplyRequest};
use crate::error::{ApiResult, StatusError};
use crate::meta::{self, meta_str, set_meta};
use serde_json::{Value, json};

impl Store {
    /// Server-side apply; the object and whether it was created.
    pub(crate) fn apply(
        &self,
        t: &Target,
        name: &str,
        mut config: Value,
        manager: &str,
        force: bool,
        dry_run: bool,
    ) -> ApiResult<(Value, bool)> {
        if !config.is_object() {
            return Err(StatusError::bad_request(
                "apply configuration must be an object",
            ));
        }
        if config
            .pointer("/metadata/managedFields")
            .is_some_and(|m| !m.is_null())
        {
            return Err(StatusError::bad_request(
                "metadata.managedFields must be nil",
            ));
        }
        if meta_str(&config, "name").is_none() {
            set_meta(&mut config, "name", json!(name));
        }
        check_body_identity(t, name, &config)?;
        check_type(t, &config)?;
        if let Some(v) = t.info.version(&t.version) {
            v.prune(&mut config);
        }
        if t.info.status {
            if t.is_status() {
                let keep = json!({
                    "apiVersion": config.get("apiVersion").cloned().unwrap_or(Value::Null),
                    "kind": config.get("kind").cloned().unwrap_or(Value::Null),
                    "metadata": {"name": name},
                    "status": config.get("status").cloned().unwrap_or(Value::Null),
                });
                config = keep;
                if config.get("status").is_some_and(Value::is_null)
                    && let Some(o) = config.as_object_mut()
                {
                    o.remove("status");
                }
            } else if let Some(o) = config.as_object_mut() {
                o.remove("status");
            }
        }
        if t.info.namespaced {
            set_meta(&mut config, "namespace", json!(t.namespace));
        }
        let mut st = self.lock();
        let old = st.find(&t.info.gr(), &t.namespace, name);
        if let (Some(rv), Some(old)) = (meta_str(&config, "resourceVersion"), &old)
            && rv != meta_str(old, "resourceVersion").unwrap_or("")
        {
            return Err(StatusError::stale(&t.info.group, &t.info.plural, name));
        }
        meta::remove_meta(&mut config, "resourceVersion");
        let (live, entries) = match &old {
            Some(o) => {
                let mut l = present(t, o);
                let entries =
                    apply::decode_managed(l.pointer("/metadata/managedFields")).unwrap_or_default();
                meta::remove_meta(&mut l, "managedFields");
                (l, entries)
            }
            None => {
                if t.is_status() {
                    return Err(t.not_found(name));
                }
                // A uid in the configuration names an object that must exist: apply never
                // creates it (so a deleted object is not brought back).
                if let Some(uid) = meta_str(&config, "uid").filter(|u| !u.is_empty()) {
                    return Err(StatusError::conflict(
                        &t.info.group,
                        &t.info.plural,
                        name,
                        &format!(
                            "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
                        ),
                    ));
                }
                let mut l = json!({"apiVersion": t.api_version(), "kind": t.info.kind, "metadata": {"name": name}});
                if t.info.namespaced {
                    set_meta(&mut l, "namespace", json!(t.namespace));
                }
                (l, vec![])
            }
        };
        let schema = t
            .info
            .version(&t.version)
            .map(|v| v.schema.clone())
            .unwrap_or(crate::schema::Schema::Deduced);
        let now = meta::now();
        let api_version = t.api_version();
        let req = ApplyRequest {
            manager,
            subresource: t.subresource.as_deref(),
            api_version: &api_version,
            force,
            now: &now,
        };
        let (new, entries) =
            apply::apply(entries, &live, &config, &schema, &req).map_err(|conflicts| {
                let mut e = StatusError::new(409, "Conflict", apply::conflict_message(&conflicts));
                e.details = Some(json!({
                    "causes": conflicts.iter().map(|c| json!({
                        "reason": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.manager),
                        "field": c.path,
                    })).collect::<Vec<_>>()
                }));
                e
            })?;
        let result = match &old {
            Some(o) => (
                st.update(t, name, o, new, Ownership::Given(entries), dry_run)?,
                false,
            ),
            None => (st.create(t, new, Ownership::Given(entries), dry_run)?, true),
        };
        drop(st);
        if !dry_run {
            self.gc.notify_one();
        }
        Ok((present(t, &result.0), result.1))
    }
}
