//! The write pipeline under the store's lock: create, update and delete with
//! kube-apiserver's rules for metadata (name, generateName, uid, timestamps), the status
//! subresource, generation, field ownership, finalizers, schema validation and no-op
//! writes.

use super::crd::crd_status;
use super::namespaces::check_namespace;
use super::{DeleteOptions, Ownership, Propagation, State, Target, gr_is};
use crate::apply::{self, ManagedEntry};
use crate::error::{ApiResult, StatusError};
use crate::meta::{self, finalizers, meta_str, set_meta};
use crate::registry::{GroupResource, ResourceInfo};
use serde_json::{Value, json};
use std::sync::Arc;

fn strip_for_compare(v: &Value) -> Value {
    let mut c = v.clone();
    meta::remove_meta(&mut c, "resourceVersion");
    c
}

fn non_meta(v: &Value, without_status: bool) -> Value {
    let mut c = v.clone();
    if let Some(o) = c.as_object_mut() {
        o.remove("metadata");
        o.remove("apiVersion");
        o.remove("kind");
        if without_status {
            o.remove("status");
        }
    }
    c
}
pub(super) fn check_type(t: &Target, body: &Value) -> ApiResult<()> {
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !av.is_empty() && av != t.api_version() {
        return Err(StatusError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            t.api_version()
        )));
    }
    if !kind.is_empty() && kind != t.info.kind {
        return Err(StatusError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            t.info.kind
        )));
    }
    Ok(())
}

pub(super) fn check_body_identity(t: &Target, name: &str, body: &Value) -> ApiResult<()> {
    if !body.is_object() {
        return Err(StatusError::bad_request(
            "the request body must be an object",
        ));
    }
    let body_name = meta_str(body, "name").unwrap_or("");
    if body_name != name {
        return Err(StatusError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(t, body)
}

impl State {
    pub(super) fn create(
        &mut self,
        t: &Target,
        mut body: Value,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Arc<Value>> {
        if !body.is_object() {
            return Err(StatusError::bad_request(
                "the request body must be an object",
            ));
        }
        check_type(t, &body)?;
        check_namespace(t, &body)?;
        let gr = t.info.gr();
        let mut name = meta_str(&body, "name").unwrap_or("").to_string();
        if name.is_empty() {
            let prefix = meta_str(&body, "generateName").unwrap_or("").to_string();
            if prefix.is_empty() {
                return Err(StatusError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    "",
                    vec![(
                        "FieldValueRequired".into(),
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
            for _ in 0..8 {
                name = format!("{prefix}{}", meta::random_suffix());
                if self.find(&gr, &t.namespace, &name).is_none() {
                    break;
                }
            }
        }
        if let Err(msg) = meta::validate_name(&name, meta::name_rule(&t.info.group, &t.info.plural))
        {
            return Err(StatusError::invalid(
                &t.info.group,
                &t.info.kind,
                &name,
                vec![(
                    "FieldValueInvalid".into(),
                    "metadata.name".into(),
                    format!("Invalid value: \"{name}\": {msg}"),
                )],
            ));
        }
        self.check_namespace_exists(t, &name)?;
        if self.find(&gr, &t.namespace, &name).is_some() {
            return Err(StatusError::already_exists(
                &t.info.group,
                &t.info.plural,
                &name,
            ));
        }
        let version = t
            .info
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        if t.info.status
            && !matches!(own, Ownership::Given(_) | Ownership::Seeded(_))
            && let Some(o) = body.as_object_mut()
        {
            o.remove("status");
        }
        stamp_identity(t, &mut body, &version, &name);
        {
            let m = meta::meta_mut(&mut body);
            for f in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
            ] {
                // A dry run echoes a resourceVersion it is sent, as kube-apiserver's
                // (its dry-run storage skips the check that refuses one).
                let echoed = dry_run && f == "resourceVersion";
                if !super::seed::keeps(&own, f) && !echoed {
                    m.remove(f);
                }
            }
        }
        // Ownership is computed against an empty object, before server-set fields.
        let seeded = matches!(own, Ownership::Seeded(_));
        let entries = match own {
            Ownership::Given(e) | Ownership::Seeded(e) => e,
            Ownership::Track(m) | Ownership::System(m) => {
                let from_body = apply::decode_managed(body.pointer("/metadata/managedFields"))
                    .unwrap_or_default();
                let empty = json!({});
                let schema = t
                    .info
                    .version(&t.version)
                    .map(|v| v.schema.clone())
                    .unwrap_or(crate::schema::Schema::Deduced);
                let mut plain = body.clone();
                meta::remove_meta(&mut plain, "managedFields");
                apply::track_update(
                    from_body,
                    &empty,
                    &plain,
                    &schema,
                    &m,
                    None,
                    &t.api_version(),
                    &meta::now(),
                )
            }
        };
        set_managed(&mut body, &entries);
        {
            let m = meta::meta_mut(&mut body);
            // A seeded object keeps the identity it is written with.
            let keep = |m: &serde_json::Map<String, Value>, f: &str| seeded && m.contains_key(f);
            if !keep(m, "uid") {
                m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            }
            if !keep(m, "creationTimestamp") {
                m.insert("creationTimestamp".into(), json!(meta::now()));
            }
            if !keep(m, "generation") {
                if t.info.generation {
                    m.insert("generation".into(), json!(1));
                } else {
                    m.remove("generation");
                }
            }
        }
        if gr_is(&gr, "", "namespaces") {
            let o = body
                .as_object_mut()
                .ok_or_else(|| StatusError::internal("namespace is not an object"))?;
            o.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            o.insert("status".into(), json!({"phase": "Active"}));
            let labels = meta::meta_mut(&mut body)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.validate_crd(&name, &body)?;
            let status = crd_status(&body, None);
            if let Some(o) = body.as_object_mut() {
                o.insert("status".into(), status);
            }
        }
        validate_schema(t, &name, &body, None)?;
        if dry_run {
            return Ok(Arc::new(body));
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.registry.register_crd(&body);
        }
        Ok(self.store(&gr, &t.namespace, &name, body, None))
    }

    pub(super) fn update(
        &mut self,
        t: &Target,
        name: &str,
        old: &Arc<Value>,
        mut new: Value,
        own: Ownership,
        dry_run: bool,
    ) -> ApiResult<Arc<Value>> {
        if !new.is_object() {
            return Err(StatusError::bad_request(
                "the request body must be an object",
            ));
        }
        check_type(t, &new)?;
        check_namespace(t, &new)?;
        if let Some(uid) = meta_str(&new, "uid").filter(|u| !u.is_empty())
            && Some(uid) != meta_str(old, "uid")
        {
            let message = format!("Invalid value: \"{uid}\": field is immutable");
            return Err(StatusError::invalid(
                &t.info.group,
                &t.info.kind,
                name,
                vec![("FieldValueInvalid".into(), "metadata.uid".into(), message)],
            ));
        }
        let gr = t.info.gr();
        let storage_version = t
            .info
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        if t.is_status() {
            let status = new.get("status").cloned();
            new = (**old).clone();
            if let Some(o) = new.as_object_mut() {
                match status {
                    Some(s) => o.insert("status".into(), s),
                    None => o.remove("status"),
                };
            }
        } else if t.info.status
            && let Some(o) = new.as_object_mut()
        {
            match old.get("status") {
                Some(s) => o.insert("status".into(), s.clone()),
                None => o.remove("status"),
            };
        }
        stamp_identity(t, &mut new, &storage_version, name);
        {
            let m = meta::meta_mut(&mut new);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old.pointer(&format!("/metadata/{f}")) {
                    Some(v) => m.insert(f.into(), v.clone()),
                    None => m.remove(f),
                };
            }
            m.insert(
                "resourceVersion".into(),
                old.pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.validate_crd(name, &new)?;
            let status = crd_status(&new, Some(old));
            if let Some(o) = new.as_object_mut() {
                o.insert("status".into(), status);
            }
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            let before = finalizers(old);
            if finalizers(&new).iter().any(|f| !before.contains(f)) {
                return Err(StatusError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    name,
                    vec![(
                        "FieldValueForbidden".into(),
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        // Field ownership.
        let schema = t
            .info
            .version(&t.version)
            .map(|v| v.schema.clone())
            .unwrap_or(crate::schema::Schema::Deduced);
        let entries = match own {
            Ownership::Given(e) | Ownership::Seeded(e) => e,
            Ownership::Track(m) | Ownership::System(m) => {
                let requested = if t.is_status() {
                    None
                } else {
                    apply::decode_managed(new.pointer("/metadata/managedFields"))
                        .filter(|e| !e.is_empty())
                };
                let base = requested.unwrap_or_else(|| {
                    apply::decode_managed(old.pointer("/metadata/managedFields"))
                        .unwrap_or_default()
                });
                let mut a = (**old).clone();
                let mut b = new.clone();
                meta::remove_meta(&mut a, "managedFields");
                meta::remove_meta(&mut b, "managedFields");
                apply::track_update(
                    base,
                    &a,
                    &b,
                    &schema,
                    &m,
                    t.subresource.as_deref(),
                    &t.api_version(),
                    &meta::now(),
                )
            }
        };
        set_managed(&mut new, &entries);
        if t.info.generation && non_meta(&new, t.info.status) != non_meta(old, t.info.status) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_meta(&mut new, "generation", json!(g + 1));
        }
        validate_schema(t, name, &new, Some(old))?;
        if strip_for_compare(&new) == strip_for_compare(old) {
            return Ok(old.clone());
        }
        if dry_run {
            return Ok(Arc::new(new));
        }
        if gr_is(&gr, "apiextensions.k8s.io", "customresourcedefinitions") {
            self.registry.register_crd(&new);
        }
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let spec_finalizers_empty = new
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if deleting
            && finalizers(&new).is_empty()
            && (!gr_is(&gr, "", "namespaces") || spec_finalizers_empty)
        {
            let stored = Arc::new(new);
            return Ok(self.remove(&gr, &t.namespace, name, &stored));
        }
        Ok(self.store(&gr, &t.namespace, name, new, Some(old.clone())))
    }

    /// Deletes or marks for deletion; the object's state and whether it is gone now. A
    /// dry run checks the same and answers the same, but stores, removes and records
    /// nothing (the answer keeps the stored resourceVersion, as kube-apiserver's).
    pub(super) fn delete(
        &mut self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<(Arc<Value>, bool)> {
        let info = self
            .registry
            .get(gr)
            .ok_or_else(|| StatusError::not_found(&gr.group, &gr.resource, name))?;
        let old = self
            .find(gr, ns, name)
            .ok_or_else(|| StatusError::not_found(&gr.group, &gr.resource, name))?;
        check_preconditions(&info, name, &old, opts)?;
        let mut fins = finalizers(&old);
        match opts.propagation {
            Some(Propagation::Orphan) if !fins.iter().any(|f| f == "orphan") => {
                fins.push("orphan".into())
            }
            Some(Propagation::Foreground) if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            _ => {}
        }
        let is_namespace = gr_is(gr, "", "namespaces");
        let already = old.pointer("/metadata/deletionTimestamp").is_some();
        if fins.is_empty() && !is_namespace {
            if opts.dry_run {
                return Ok((old, true));
            }
            return Ok((self.remove(gr, ns, name, &old), true));
        }
        if already && fins == finalizers(&old) {
            return Ok((old, false));
        }
        let mut new = (*old).clone();
        meta::set_finalizers(&mut new, &fins);
        if !already {
            set_meta(&mut new, "deletionTimestamp", json!(meta::now()));
            // A namespace's deletion has no grace period (its own REST strategy).
            if !is_namespace {
                set_meta(&mut new, "deletionGracePeriodSeconds", json!(0));
            }
            if info.generation {
                let g = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                set_meta(&mut new, "generation", json!(g + 1));
            }
        }
        if is_namespace && let Some(o) = new.as_object_mut() {
            o.insert("status".into(), json!({"phase": "Terminating"}));
        }
        if opts.dry_run {
            return Ok((Arc::new(new), false));
        }
        meta::remove_meta(&mut new, "resourceVersion");
        Ok((self.store(gr, ns, name, new, Some(old)), false))
    }
}

/// Delete preconditions, checked first as `rest.BeforeDelete` does: its 409 names the
/// kind (`Operation cannot be fulfilled on ConfigMap "c"`), not the resource.
fn check_preconditions(
    info: &ResourceInfo,
    name: &str,
    old: &Value,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    let uid = meta_str(old, "uid").unwrap_or("");
    let rv = meta_str(old, "resourceVersion").unwrap_or("");
    let why = if let Some(want) = opts.uid.as_deref().filter(|w| *w != uid) {
        format!(
            "the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    } else if let Some(want) = opts.resource_version.as_deref().filter(|w| *w != rv) {
        format!(
            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    } else {
        return Ok(());
    };
    Err(StatusError::conflict(&info.group, &info.kind, name, &why))
}

/// OpenAPI validation of a custom resource against its CRD version's schema, after
/// pruning, as the apiserver's create/update strategies do; on update unchanged
/// values are ratcheted and the status subresource validates `.status` only.
fn validate_schema(t: &Target, name: &str, new: &Value, old: Option<&Value>) -> ApiResult<()> {
    let Some(validator) = t.info.version(&t.version).and_then(|v| v.validator.clone()) else {
        return Ok(());
    };
    let errs = match old {
        Some(old) if t.is_status() => validator.validate_status(new, old),
        old => validator.validate(new, old),
    };
    if errs.is_empty() {
        return Ok(());
    }
    Err(crate::validation::invalid(
        &t.info.group,
        &t.info.kind,
        name,
        &errs,
    ))
}

fn set_managed(obj: &mut Value, entries: &[ManagedEntry]) {
    if entries.is_empty() {
        meta::remove_meta(obj, "managedFields");
    } else {
        set_meta(obj, "managedFields", apply::encode_managed(entries));
    }
}

/// What create and update both impose on a stored object: the storage apiVersion and the
/// kind, pruning and defaulting by the structural schema, and the name and namespace of
/// the request.
fn stamp_identity(t: &Target, body: &mut Value, version: &str, name: &str) {
    if let Some(o) = body.as_object_mut() {
        o.insert("apiVersion".into(), json!(t.info.api_version(version)));
        o.insert("kind".into(), json!(t.info.kind));
    }
    if let Some(v) = t.info.version(&t.version) {
        v.prune_and_default(body);
    }
    let m = meta::meta_mut(body);
    // ObjectMeta's collections are `omitempty` in Go: kube-apiserver stores and answers
    // no empty (or null) labels, annotations, finalizers or ownerReferences, for custom
    // resources too (so `kubectl diff`'s `annotations: {}` shows no change).
    m.retain(|k, v| {
        let collection = matches!(
            k.as_str(),
            "labels" | "annotations" | "finalizers" | "ownerReferences"
        );
        !(collection && is_empty_collection(v))
    });
    m.insert("name".into(), json!(name));
    if t.info.namespaced {
        m.insert("namespace".into(), json!(t.namespace));
    } else {
        m.remove("namespace");
    }
}

fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}
