//! `/openapi/v2` and `/openapi/v3`: the OpenAPI documents kubectl reads.
//!
//! kubectl 1.32 uses them for three things: `kubectl explain` renders a kind's schema
//! from the OpenAPI v3 group-version document (found through the `/openapi/v3` paths
//! index); `apply`/`create` with `--validate=strict` (the default) first ask the v3
//! document whether the PATCH operation of the object's kind takes the
//! `fieldValidation` query parameter, and because ours do not advertise it (the
//! server does no field validation), validate client-side against the v2 document,
//! which client-go downloads as gnostic protobuf; client-side apply looks up strategic
//! merge patch metadata in both.
//!
//! Custom resources get their CRD version's schema, completed as kube-apiserver's
//! CRD OpenAPI builder does (`apiVersion`, `kind`, `metadata` and the
//! `x-kubernetes-group-version-kind` extension); in v2 the constructs client-side
//! validation cannot express are relaxed (`nullable`, int-or-string and
//! preserve-unknown-fields drop their type or properties). Built-in kinds are served
//! schemaless: the v3 documents list their paths and operations (so kubectl finds
//! the PATCH operation of every kind) but no schema, and v2 has no definition for
//! them, so kubectl skips their client-side validation and falls back to its
//! compiled-in types for patches.

use crate::builtins::Verbs;
use crate::registry::{Registry, ResourceInfo};
use prost::Message;
use serde_json::{Map, Value, json};
use std::hash::{Hash, Hasher};

/// Content type of the gnostic protobuf OpenAPI v2 document.
pub(crate) const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// `example.com` → `com.example`, the prefix kube-apiserver gives definitions of a group.
fn reversed_group(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

/// The definition name of a custom resource kind (`com.example.v1.Widget`).
pub(crate) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    format!("{}.{version}.{kind}", reversed_group(group))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// A minimal ObjectMeta schema: every field ObjectMeta has, so that client-side
/// validation accepts any valid metadata, with short descriptions for `explain`.
fn object_meta_schema() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let map = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": d});
    let list = |d: &str| json!({"type": "array", "items": {"type": "object"}, "description": d});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": s("Name must be unique within a namespace."),
            "generateName": s("Prefix the server uses to generate a unique name if name is not provided."),
            "namespace": s("The namespace the object lives in; empty for cluster-scoped objects."),
            "selfLink": s("Deprecated and not set by the server."),
            "uid": s("Unique identifier set by the server."),
            "resourceVersion": s("Opaque version of the object, for optimistic concurrency and watches."),
            "generation": {"type": "integer", "format": "int64", "description": "Sequence number of the desired state, set by the server."},
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "When the object was created, set by the server."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "When the object will be deleted, set by the server."},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Seconds allowed for graceful termination."},
            "labels": map("Map of string keys and values for selecting objects."),
            "annotations": map("Unstructured key-value data stored with the object."),
            "ownerReferences": list("Objects this object depends on; used by garbage collection."),
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Must be empty before the object is deleted from storage."},
            "managedFields": list("Field ownership of server-side apply and update operations.")
        }
    })
}

/// A CRD version's schema as a complete OpenAPI v3 component.
fn crd_component(info: &ResourceInfo, version: &str, root: Option<&Value>) -> Value {
    let mut s = root
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(o) = s.as_object_mut() {
        let props = o
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
            p.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
            p.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}),
            );
        }
        o.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk(&info.group, version, &info.kind)]),
        );
    }
    s
}

fn path_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": format!("{name} of the object")})
}

fn query_param(name: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": ty}})
}

/// The operations of one resource (and its status subresource) in a v3 document.
fn resource_paths(info: &ResourceInfo, version: &str, paths: &mut Map<String, Value>) {
    let prefix = if info.group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{}/{version}", info.group)
    };
    let collection = if info.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", info.plural)
    } else {
        format!("{prefix}/{}", info.plural)
    };
    let ext = gvk(&info.group, version, &info.kind);
    let response = if info.builtin {
        json!({"200": {"description": "OK"}})
    } else {
        let r = format!(
            "#/components/schemas/{}",
            definition_name(&info.group, version, &info.kind)
        );
        json!({"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": r}}}}})
    };
    let mut object_params = vec![path_param("name")];
    let mut collection_params = vec![];
    if info.namespaced {
        object_params.push(path_param("namespace"));
        collection_params.push(path_param("namespace"));
    }
    // No fieldValidation parameter: the server does not validate fields, so kubectl
    // validates client-side instead. Strategic merge patch is left out for built-ins
    // so that client-side apply computes it from kubectl's compiled-in types.
    let patch_types: &[&str] = &[
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    let patch_body = json!({"content": patch_types.iter().map(|t| (t.to_string(), json!({"schema": {"type": "object"}}))).collect::<Map<String, Value>>()});
    let op = |action: &str, id: &str, params: &[Value]| {
        json!({
            "operationId": id,
            "parameters": params,
            "responses": response,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": ext,
        })
    };
    let kind = &info.kind;
    let scope = if info.namespaced { "Namespaced" } else { "" };
    let mut patch_params = object_params.clone();
    patch_params.extend([
        query_param("dryRun", "string"),
        query_param("fieldManager", "string"),
        query_param("force", "boolean"),
    ]);
    let mut patch = op("patch", &format!("patch{scope}{kind}"), &patch_params);
    patch["requestBody"] = patch_body.clone();
    let mut put = op("put", &format!("replace{scope}{kind}"), &object_params);
    put["requestBody"] = json!({"content": {"application/json": {"schema": {"type": "object"}}}});
    let read = op("get", &format!("read{scope}{kind}"), &object_params);
    let list = op("list", &format!("list{scope}{kind}"), &collection_params);
    let mut post = op("post", &format!("create{scope}{kind}"), &collection_params);
    post["requestBody"] = json!({"content": {"application/json": {"schema": {"type": "object"}}}});
    // Only the verbs the resource has: virtual kinds are created, componentstatuses read.
    match info.access {
        Verbs::Create => {
            paths.insert(collection, json!({"post": post}));
            return;
        }
        Verbs::Read => {
            paths.insert(format!("{collection}/{{name}}"), json!({"get": read}));
            paths.insert(collection, json!({"get": list}));
            return;
        }
        Verbs::Crud => {}
    }
    paths.insert(
        format!("{collection}/{{name}}"),
        json!({
            "get": read,
            "put": put,
            "patch": patch,
            "delete": op("delete", &format!("delete{scope}{kind}"), &object_params),
        }),
    );
    paths.insert(collection.clone(), json!({"get": list, "post": post}));
    if info.status {
        let mut status_patch = op("patch", &format!("patch{scope}{kind}Status"), &patch_params);
        status_patch["requestBody"] = patch_body;
        paths.insert(
            format!("{collection}/{{name}}/status"),
            json!({"get": op("get", &format!("read{scope}{kind}Status"), &object_params), "patch": status_patch}),
        );
    }
}

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The OpenAPI v3 document of one group-version; `None` when it is not served.
pub(crate) fn v3_group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = reg.in_version(group, version);
    if infos.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for info in &infos {
        resource_paths(info, version, &mut paths);
        if !info.builtin {
            let root = info.version(version).and_then(|v| v.openapi.clone());
            schemas.insert(
                definition_name(group, version, &info.kind),
                crd_component(info, version, root.as_deref()),
            );
        }
    }
    if !schemas.is_empty() {
        schemas.insert(OBJECT_META.into(), object_meta_schema());
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::version()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn content_hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: the group-version documents, each with a content hash in its URL
/// so that kubectl's cache refetches it when a CRD changes.
pub(crate) fn v3_index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, versions) in reg.groups() {
        for version in versions {
            if let Some(doc) = v3_group_version(reg, &group, &version) {
                let key = gv_key(&group, &version);
                let url = format!("/openapi/v3/{key}?hash={}", content_hash(&doc));
                paths.insert(key, json!({"serverRelativeURL": url}));
            }
        }
    }
    json!({"paths": paths})
}

/// Relaxes a v3 schema for client-side validation against OpenAPI v2 (what
/// apiextensions-apiserver's v2 conversion does for the same constructs).
fn to_v2(s: &Value) -> Value {
    let Some(o) = s.as_object() else {
        return json!({});
    };
    let mut out = Map::new();
    let preserve = o.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let nullable = o.get("nullable") == Some(&Value::Bool(true));
    let int_or_string = o.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    for (k, v) in o {
        match k.as_str() {
            "properties" if preserve => {}
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), to_v2(v))).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" => {
                out.insert(k.clone(), to_v2(v));
            }
            "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), to_v2(v));
            }
            "type" if preserve || nullable || int_or_string => {}
            "required" | "description" | "format" | "$ref" | "type" => {
                out.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    if out.get("type") == Some(&json!("array")) && !out.contains_key("items") {
        out.insert("items".into(), json!({}));
    }
    Value::Object(out)
}

/// The OpenAPI v2 (swagger) document as JSON: definitions of the custom resource kinds.
pub(crate) fn v2(reg: &Registry) -> Value {
    let mut defs = Map::new();
    for info in reg.all().filter(|r| !r.builtin) {
        for v in &info.versions {
            let mut s = to_v2(&crd_component(info, &v.name, v.openapi.as_deref()));
            if let Some(p) = s.pointer_mut("/properties/metadata") {
                *p = json!({"$ref": format!("#/definitions/{OBJECT_META}"), "description": "Standard object's metadata."});
            }
            if let Some(o) = s.as_object_mut() {
                o.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([gvk(&info.group, &v.name, &info.kind)]),
                );
            }
            defs.insert(definition_name(&info.group, &v.name, &info.kind), s);
        }
    }
    defs.insert(OBJECT_META.into(), to_v2(&object_meta_schema()));
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::version()["gitVersion"]},
        "paths": {},
        "definitions": defs,
    })
}

/// The v2 document in gnostic's protobuf form (`openapi.v2.Document`), which
/// client-go's `OpenAPISchema()` requires.
pub(crate) fn v2_protobuf(reg: &Registry) -> Vec<u8> {
    let doc = v2(reg);
    let definitions = doc
        .get("definitions")
        .and_then(Value::as_object)
        .map(|d| {
            d.iter()
                .map(|(name, s)| pb::NamedSchema {
                    name: name.clone(),
                    value: Some(Box::new(pb_schema(s))),
                })
                .collect()
        })
        .unwrap_or_default();
    pb::Document {
        swagger: "2.0".into(),
        info: Some(pb::Info {
            title: "Kubernetes".into(),
            version: doc["info"]["version"].as_str().unwrap_or("").into(),
        }),
        definitions: Some(pb::Definitions {
            additional_properties: definitions,
        }),
    }
    .encode_to_vec()
}

fn pb_schema(s: &Value) -> pb::Schema {
    let str_of = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let named = |props: &Map<String, Value>| -> Vec<pb::NamedSchema> {
        props
            .iter()
            .map(|(k, v)| pb::NamedSchema {
                name: k.clone(),
                value: Some(Box::new(pb_schema(v))),
            })
            .collect()
    };
    let vendor_extension = s
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.starts_with("x-"))
                .map(|(k, v)| pb::NamedAny {
                    name: k.clone(),
                    value: Some(pb::Any {
                        yaml: serde_yaml_ng::to_string(v).unwrap_or_default(),
                    }),
                })
                .collect()
        })
        .unwrap_or_default();
    pb::Schema {
        xref: str_of("$ref"),
        format: str_of("format"),
        description: str_of("description"),
        required: s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        additional_properties: s.get("additionalProperties").map(|ap| {
            Box::new(pb::AdditionalPropertiesItem {
                schema: ap.is_object().then(|| Box::new(pb_schema(ap))),
                boolean: ap.as_bool(),
            })
        }),
        r#type: s.get("type").and_then(Value::as_str).map(|t| pb::TypeItem {
            value: vec![t.to_string()],
        }),
        items: s.get("items").map(|i| pb::ItemsItem {
            schema: vec![pb_schema(i)],
        }),
        properties: s
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| pb::Properties {
                additional_properties: named(p),
            }),
        vendor_extension,
    }
}

/// The subset of gnostic's `openapi.v2` messages the document uses (field numbers
/// of gnostic's OpenAPIv2.proto).
mod pb {
    /// `openapi.v2.Document`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Document {
        #[prost(string, tag = "1")]
        pub(crate) swagger: String,
        #[prost(message, optional, tag = "2")]
        pub(crate) info: Option<Info>,
        #[prost(message, optional, tag = "9")]
        pub(crate) definitions: Option<Definitions>,
    }

    /// `openapi.v2.Info`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Info {
        #[prost(string, tag = "1")]
        pub(crate) title: String,
        #[prost(string, tag = "2")]
        pub(crate) version: String,
    }

    /// `openapi.v2.Definitions`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Definitions {
        #[prost(message, repeated, tag = "1")]
        pub(crate) additional_properties: Vec<NamedSchema>,
    }

    /// `openapi.v2.NamedSchema`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct NamedSchema {
        #[prost(string, tag = "1")]
        pub(crate) name: String,
        #[prost(message, optional, boxed, tag = "2")]
        pub(crate) value: Option<Box<Schema>>,
    }

    /// `openapi.v2.Schema` (the fields used).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Schema {
        #[prost(string, tag = "1")]
        pub(crate) xref: String,
        #[prost(string, tag = "2")]
        pub(crate) format: String,
        #[prost(string, tag = "4")]
        pub(crate) description: String,
        #[prost(string, repeated, tag = "19")]
        pub(crate) required: Vec<String>,
        #[prost(message, optional, boxed, tag = "21")]
        pub(crate) additional_properties: Option<Box<AdditionalPropertiesItem>>,
        #[prost(message, optional, tag = "22")]
        pub(crate) r#type: Option<TypeItem>,
        #[prost(message, optional, tag = "23")]
        pub(crate) items: Option<ItemsItem>,
        #[prost(message, optional, tag = "25")]
        pub(crate) properties: Option<Properties>,
        #[prost(message, repeated, tag = "31")]
        pub(crate) vendor_extension: Vec<NamedAny>,
    }

    /// `openapi.v2.AdditionalPropertiesItem` (a oneof on the wire: one field is set).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct AdditionalPropertiesItem {
        #[prost(message, optional, boxed, tag = "1")]
        pub(crate) schema: Option<Box<Schema>>,
        #[prost(bool, optional, tag = "2")]
        pub(crate) boolean: Option<bool>,
    }

    /// `openapi.v2.TypeItem`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TypeItem {
        #[prost(string, repeated, tag = "1")]
        pub(crate) value: Vec<String>,
    }

    /// `openapi.v2.ItemsItem`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ItemsItem {
        #[prost(message, repeated, tag = "1")]
        pub(crate) schema: Vec<Schema>,
    }

    /// `openapi.v2.Properties`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Properties {
        #[prost(message, repeated, tag = "1")]
        pub(crate) additional_properties: Vec<NamedSchema>,
    }

    /// `openapi.v2.NamedAny`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct NamedAny {
        #[prost(string, tag = "1")]
        pub(crate) name: String,
        #[prost(message, optional, tag = "2")]
        pub(crate) value: Option<Any>,
    }

    /// `openapi.v2.Any` (only the YAML form).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Any {
        #[prost(string, tag = "2")]
        pub(crate) yaml: String,
    }
}

/// The documents of a registry snapshot, for the HTTP layer.
pub(crate) fn v3_document(reg: &Registry, path: &[&str]) -> Option<Value> {
    match path {
        ["api", v] => v3_group_version(reg, "", v),
        ["apis", g, v] => v3_group_version(reg, g, v),
        _ => None,
    }
}
