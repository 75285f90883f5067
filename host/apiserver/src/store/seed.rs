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
const KEPT: [&str; 4] = ["uid", "creationTimestamp", "generation", "deletionTimestamp"];

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
            true => meta_str(object, "namespace").unwrap_or("default").to_string(),
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
