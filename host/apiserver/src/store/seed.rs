//! Objects stored as a cluster already holds them ([`crate::ApiServer::seed`]): the
//! starting state of a test (`kubewasm test`'s `cluster:` objects and event object).
//! Each is validated as a create is (names, namespace, CRD schema after pruning, CRD
//! structure), but keeps the identity it is written with (`uid`, `creationTimestamp`,
//! `generation`, `deletionTimestamp`) and its `status`, so a test's objects and the owner
//! references naming them stay meaningful. Field owners: the object's
//! `metadata.managedFields` as written; without them, every field but `status` is
//! owned by `manager` as a server-side apply leaves it (`status` by no one).

use super::{Ownership, State, Store, Target, present};
use crate::apply::{self, ApplyRequest, ManagedEntry};
use crate::error::{ApiResult, StatusError};
use crate::meta::{self, meta_str};
use serde_json::{Value, json};

/// Metadata a seeded object keeps as written (a create would set or drop it).
const KEPT: [&str; 4] = [
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
];

impl Store {
    /// Store `objects` in order, under one lock (the garbage collector sees all or none
    /// of them), each as [`State::seed_one`] stores it; the objects as stored.
    pub(crate) fn seed(&self, objects: Vec<Value>, manager: &str) -> ApiResult<Vec<Value>> {
        let mut st = self.lock();
        let mut out = Vec::with_capacity(objects.len());
        let mut result = Ok(());
        for o in objects {
            match st.seed_one(o, manager) {
                Ok(v) => out.push(v),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        drop(st);
        self.gc.notify_one();
        result.map(|()| out)
    }
}

impl State {
    /// One object: its namespace created when missing, then created with its identity
    /// and owners kept.
    fn seed_one(&mut self, object: Value, manager: &str) -> ApiResult<Value> {
        let t = self.seed_target(&object)?;
        if t.info.namespaced && !self.namespace_exists(&t.namespace) {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": t.namespace}});
            let nt = self.seed_target(&ns)?;
            self.create(&nt, ns, Ownership::Track(manager.to_string()), false)?;
        }
        if let Some(uid) = meta_str(&object, "uid")
            && self.uids.contains_key(uid)
        {
            return Err(StatusError::new(
                409,
                "AlreadyExists",
                format!("an object with uid {uid} already exists"),
            ));
        }
        let entries = owners(&t, &object, manager)?;
        let stored = self.create(&t, object, Ownership::Seeded(entries), false)?;
        Ok(present(&t, &stored))
    }

    fn namespace_exists(&self, name: &str) -> bool {
        let gr = crate::registry::GroupResource {
            group: String::new(),
            resource: "namespaces".into(),
        };
        self.find(&gr, "", name).is_some()
    }

    /// The served resource of an object's apiVersion and kind, in its namespace (`default`
    /// when a namespaced object names none).
    fn seed_target(&self, object: &Value) -> ApiResult<Target> {
        let api_version = object["apiVersion"].as_str().unwrap_or("");
        let kind = object["kind"].as_str().unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let info = self
            .registry
            .all()
            .find(|i| i.group == group && i.kind == kind && i.version(version).is_some())
            .cloned()
            .ok_or_else(|| {
                StatusError::new(
                    404,
                    "NotFound",
                    format!("no matches for kind \"{kind}\" in version \"{api_version}\""),
                )
            })?;
        let namespace = match info.namespaced {
            true => meta_str(object, "namespace")
                .unwrap_or("default")
                .to_string(),
            false => String::new(),
        };
        Ok(Target {
            info,
            version: version.to_string(),
            namespace,
            subresource: None,
        })
    }
}

/// The field owners of a seeded object: its `managedFields` as written, else `manager`'s
/// apply of everything but `status` and the server-set metadata.
fn owners(t: &Target, object: &Value, manager: &str) -> ApiResult<Vec<ManagedEntry>> {
    if let Some(given) = object.pointer("/metadata/managedFields") {
        return apply::decode_managed(Some(given))
            .ok_or_else(|| StatusError::bad_request("metadata.managedFields is not valid"));
    }
    let mut config = object.clone();
    if let Some(o) = config.as_object_mut() {
        o.remove("status");
    }
    for f in KEPT.iter().chain(&["resourceVersion", "managedFields"]) {
        meta::remove_meta(&mut config, f);
    }
    let schema = t
        .info
        .version(&t.version)
        .map(|v| v.schema.clone())
        .unwrap_or(crate::schema::Schema::Deduced);
    let live = json!({"apiVersion": t.api_version(), "kind": t.info.kind,
                      "metadata": {"name": meta_str(object, "name").unwrap_or("")}});
    let api_version = t.api_version();
    let now = meta::now();
    let req = ApplyRequest {
        manager,
        subresource: None,
        api_version: &api_version,
        force: true,
        now: &now,
    };
    apply::apply(Vec::new(), &live, &config, &schema, &req)
        .map(|(_, entries)| entries)
        .map_err(|_| StatusError::internal("seeding found a conflict on an empty object"))
}

/// Whether a seeded create keeps `field` of the object's metadata as written.
pub(super) fn keeps(own: &Ownership, field: &str) -> bool {
    matches!(own, Ownership::Seeded(_)) && KEPT.contains(&field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(store: &Store, objects: Vec<Value>) -> ApiResult<Vec<Value>> {
        store.seed(objects, "kubectl")
    }

    fn managers(o: &Value) -> Vec<(String, String)> {
        o["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| (e["manager"].to_string(), e["fieldsV1"].to_string()))
            .collect()
    }

    /// A seeded object keeps its identity and status, its namespace is made, and its
    /// fields but `status` are `kubectl`'s as an apply leaves them.
    #[test]
    fn a_seeded_object_keeps_what_it_is_written_with() {
        let store = Store::new(100);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "shop", "uid": "u-a", "generation": 4,
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "data": {"k": "v"}});
        let out = seed(&store, vec![cm]).unwrap();
        let m = &out[0]["metadata"];
        assert_eq!(m["uid"], "u-a");
        assert_eq!(m["creationTimestamp"], "2026-01-02T03:04:05Z");
        assert!(m["resourceVersion"].is_string(), "{m}");
        let owners = managers(&out[0]);
        assert_eq!(owners.len(), 1, "{owners:?}");
        assert_eq!(owners[0].0, "\"kubectl\"");
        assert!(owners[0].1.contains("f:k"), "{owners:?}");
        let ns = store.target("", "v1", "namespaces", "").unwrap();
        assert!(store.get(&ns, "shop").is_ok());
        // A uid already stored is refused, like a second object of one name.
        let again = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b", "namespace": "shop", "uid": "u-a"}});
        assert_eq!(seed(&store, vec![again]).unwrap_err().code, 409);
    }

    /// Written `managedFields` are taken as written; a kind nothing serves is a 404; a
    /// CRD seeded first serves its kind to the objects after it, validated by its schema.
    #[test]
    fn owners_as_written_and_crds_first() {
        let store = Store::new(100);
        let managed = json!([{"manager": "someone", "operation": "Apply", "apiVersion": "v1",
                              "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "managedFields": managed}, "data": {"k": "v"}});
        let out = seed(&store, vec![cm]).unwrap();
        assert_eq!(managers(&out[0])[0].0, "\"someone\"");
        let site = json!({"apiVersion": "example.com/v1", "kind": "Site",
                          "metadata": {"name": "s"}, "spec": {"n": "x"}});
        assert_eq!(seed(&store, vec![site.clone()]).unwrap_err().code, 404);
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "sites.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Site", "plural": "sites", "singular": "site", "listKind": "SiteList"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                         "subresources": {"status": {}},
                         "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                             "spec": {"type": "object", "properties": {"n": {"type": "integer"}}},
                             "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
        let err = seed(&store, vec![crd, site]).unwrap_err();
        assert_eq!(err.code, 422, "{}", err.message);
        assert!(err.message.contains("spec.n"), "{}", err.message);
        let good = json!({"apiVersion": "example.com/v1", "kind": "Site",
                          "metadata": {"name": "s"}, "spec": {"n": 1}, "status": {"phase": "Up"}});
        let out = seed(&store, vec![good]).unwrap();
        // The status is kept (a create would drop it) and owned by no one.
        assert_eq!(out[0]["status"]["phase"], "Up");
        assert!(!managers(&out[0])[0].1.contains("status"), "{out:?}");
    }
}
