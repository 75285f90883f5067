//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) for built-in kinds.
//!
//! kubectl's typed commands (`create configmap`, `create deployment`, `run`,
//! `expose`, ...) send their object as protobuf: the four bytes `k8s\0` and a
//! `runtime.Unknown` holding the apiVersion and kind and the object's own message.
//! The message is decoded into its typed form from the `k8s-pb` crate (prost types
//! generated from the Kubernetes `.proto` files) and converted to the JSON the store
//! keeps, field by field with the JSON names and omission rules of the Go types;
//! answers go the other way when a client accepts nothing but protobuf.
//!
//! The Go encoder writes every non-pointer field, so a decoded message carries `""`,
//! `0` and `false` for everything unset. Like Go's JSON encoder, the conversion drops
//! such zero values of `omitempty` fields and keeps them for pointer fields (whose
//! presence means "set", e.g. `replicas: 0`) and for fields without `omitempty`.
//! Fields newer than the `k8s-pb` release are skipped by the decoder.

use base64::Engine;
use prost::Message;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The media type of Kubernetes protobuf.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The `k8s\0` prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be decoded or an object encoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtoError {
    /// The body does not start with the `k8s\0` envelope.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NoEnvelope,
    /// The wire data does not decode.
    #[error("{0}")]
    Decode(#[from] prost::DecodeError),
    /// A JSON value has the wrong type for its protobuf field.
    #[error("field {field}: expected {expected}")]
    Type {
        /// JSON name of the field.
        field: String,
        /// What the field holds.
        expected: &'static str,
    },
    /// No protobuf message is known for this kind.
    #[error("no protobuf message is known for {api_version}, Kind={kind}")]
    UnknownKind {
        /// apiVersion of the object.
        api_version: String,
        /// Kind of the object.
        kind: String,
    },
}

/// Conversion between a k8s-pb message and the object's JSON form.
pub(crate) trait PbJson: Sized {
    /// The JSON form (without apiVersion and kind, which live in the envelope).
    fn to_json(&self) -> Value;
    /// The message from its JSON form.
    fn from_json(v: &Value) -> Result<Self, ProtoError>;
}

/// How one field of a message maps to a JSON member.
pub(crate) trait Field: Sized {
    /// Adds the member `name` (unless Go's JSON encoder would omit it).
    fn put(&self, m: &mut Map<String, Value>, name: &str, keep_zero: bool);
    /// The field from member `name` of the JSON object.
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError>;
}

fn type_err(field: &str, expected: &'static str) -> ProtoError {
    ProtoError::Type {
        field: field.to_string(),
        expected,
    }
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

impl Field for Option<String> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, keep_zero: bool) {
        if let Some(s) = self.as_ref().filter(|s| keep_zero || !s.is_empty()) {
            m.insert(name.into(), Value::String(s.clone()));
        }
    }
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError> {
        present(v)
            .map(|v| {
                v.as_str()
                    .map(String::from)
                    .ok_or_else(|| type_err(name, "a string"))
            })
            .transpose()
    }
}

impl Field for Option<bool> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, keep_zero: bool) {
        if let Some(b) = self.filter(|b| keep_zero || *b) {
            m.insert(name.into(), Value::Bool(b));
        }
    }
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError> {
        present(v)
            .map(|v| v.as_bool().ok_or_else(|| type_err(name, "a boolean")))
            .transpose()
    }
}

fn int_of(v: &Value, name: &str) -> Result<i64, ProtoError> {
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .ok_or_else(|| type_err(name, "an integer"))
}

impl Field for Option<i64> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, keep_zero: bool) {
        if let Some(i) = self.filter(|i| keep_zero || *i != 0) {
            m.insert(name.into(), Value::from(i));
        }
    }
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError> {
        present(v).map(|v| int_of(v, name)).transpose()
    }
}

impl Field for Option<i32> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, keep_zero: bool) {
        self.map(i64::from).put(m, name, keep_zero);
    }
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError> {
        present(v)
            .map(|v| {
                i32::try_from(int_of(v, name)?).map_err(|_| type_err(name, "a 32-bit integer"))
            })
            .transpose()
    }
}

impl<M: PbJson> Field for Option<M> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, _keep_zero: bool) {
        // Go's encoder writes a present message (a non-pointer struct, or a set
        // pointer) even when empty, and so does its JSON encoder: `resources: {}`.
        match (self, name) {
            // An inline (embedded) struct: its members are the parent's.
            (Some(msg), "") => {
                if let Value::Object(inner) = msg.to_json() {
                    m.extend(inner);
                }
            }
            (Some(msg), _) => {
                m.insert(name.into(), msg.to_json());
            }
            (None, _) => {}
        }
    }
    fn take(v: Option<&Value>, _name: &str) -> Result<Self, ProtoError> {
        present(v).map(M::from_json).transpose()
    }
}

/// Scalars and messages that can be list items and map values.
pub(crate) trait Item: Sized {
    fn item_json(&self) -> Value;
    fn item_from(v: &Value, name: &str) -> Result<Self, ProtoError>;
}

impl Item for String {
    fn item_json(&self) -> Value {
        Value::String(self.clone())
    }
    fn item_from(v: &Value, name: &str) -> Result<Self, ProtoError> {
        v.as_str()
            .map(String::from)
            .ok_or_else(|| type_err(name, "strings"))
    }
}

impl Item for i64 {
    fn item_json(&self) -> Value {
        Value::from(*self)
    }
    fn item_from(v: &Value, name: &str) -> Result<Self, ProtoError> {
        int_of(v, name)
    }
}

impl Item for i32 {
    fn item_json(&self) -> Value {
        Value::from(*self)
    }
    fn item_from(v: &Value, name: &str) -> Result<Self, ProtoError> {
        i32::try_from(int_of(v, name)?).map_err(|_| type_err(name, "32-bit integers"))
    }
}

/// `bytes` are base64 in JSON.
impl Item for Vec<u8> {
    fn item_json(&self) -> Value {
        Value::String(base64::engine::general_purpose::STANDARD.encode(self))
    }
    fn item_from(v: &Value, name: &str) -> Result<Self, ProtoError> {
        v.as_str()
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .ok_or_else(|| type_err(name, "base64 data"))
    }
}

impl<M: PbJson> Item for M {
    fn item_json(&self) -> Value {
        self.to_json()
    }
    fn item_from(v: &Value, _name: &str) -> Result<Self, ProtoError> {
        M::from_json(v)
    }
}

impl<T: Item> Field for Vec<T> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, _keep_zero: bool) {
        // An empty repeated field is not on the wire: Go decodes it as nil, which its
        // JSON encoder omits (omitempty) or writes as null.
        if !self.is_empty() {
            m.insert(
                name.into(),
                Value::Array(self.iter().map(Item::item_json).collect()),
            );
        }
    }
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError> {
        match present(v) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a.iter().map(|x| T::item_from(x, name)).collect(),
            Some(_) => Err(type_err(name, "an array")),
        }
    }
}

impl<T: Item> Field for BTreeMap<String, T> {
    fn put(&self, m: &mut Map<String, Value>, name: &str, _keep_zero: bool) {
        if !self.is_empty() {
            m.insert(
                name.into(),
                Value::Object(
                    self.iter()
                        .map(|(k, v)| (k.clone(), v.item_json()))
                        .collect(),
                ),
            );
        }
    }
    fn take(v: Option<&Value>, name: &str) -> Result<Self, ProtoError> {
        match present(v) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(o)) => o
                .iter()
                .map(|(k, x)| Ok((k.clone(), T::item_from(x, name)?)))
                .collect(),
            Some(_) => Err(type_err(name, "an object")),
        }
    }
}

fn object_or_null<'a>(v: &'a Value, what: &'static str) -> Result<&'a Value, ProtoError> {
    if v.is_object() || v.is_null() {
        Ok(v)
    } else {
        Err(type_err(what, "an object"))
    }
}

/// `msg!(path::Type { field: "jsonName" [keep], ... })`: the conversion of one
/// message. The struct pattern and literal name every field, so a field the list
/// misses is a compile error, not silently lost data.
macro_rules! msg {
    ($($seg:ident)::+ { $($field:ident : $json:literal $($keep:ident)?),* $(,)? }) => {
        impl $crate::protobuf::PbJson for $($seg)::+ {
            fn to_json(&self) -> serde_json::Value {
                let $($seg)::+ { $($field),* } = self;
                #[allow(unused_mut)]
                let mut m = serde_json::Map::new();
                $( $crate::protobuf::put_field($field, &mut m, $json, msg!(@keep $($keep)?)); )*
                serde_json::Value::Object(m)
            }
            fn from_json(v: &serde_json::Value) -> Result<Self, $crate::protobuf::ProtoError> {
                #[allow(unused_variables)]
                let v = $crate::protobuf::object(v, stringify!($($seg)::+))?;
                Ok($($seg)::+ { $($field: $crate::protobuf::take_field(
                    // An inline struct reads the parent object itself.
                    if $json.is_empty() { Some(v) } else { v.get($json) },
                    $json,
                )?),* })
            }
        }
    };
    (@keep keep) => { true };
    (@keep) => { false };
}

/// Used by `msg!`: adds one field to the JSON object.
pub(crate) fn put_field<F: Field>(f: &F, m: &mut Map<String, Value>, name: &str, keep_zero: bool) {
    f.put(m, name, keep_zero);
}

/// Used by `msg!`: one field from the JSON object.
pub(crate) fn take_field<F: Field>(v: Option<&Value>, name: &str) -> Result<F, ProtoError> {
    F::take(v, name)
}

/// Used by `msg!`: the JSON value of a message must be an object (or null).
pub(crate) fn object<'a>(v: &'a Value, what: &'static str) -> Result<&'a Value, ProtoError> {
    object_or_null(v, what)
}

// The generated field lists; after the macro, which they use.
mod types;

use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;

fn timestamp(seconds: Option<i64>, nanos: Option<i32>, micro: bool) -> Value {
    if seconds.is_none() && nanos.is_none() {
        // An empty Time message is Go's zero time, which JSON-encodes as null.
        return Value::Null;
    }
    let t = chrono::DateTime::from_timestamp(
        seconds.unwrap_or(0),
        u32::try_from(nanos.unwrap_or(0)).unwrap_or(0),
    )
    .unwrap_or_default();
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Value::String(t.format(format).to_string())
}

fn parse_timestamp(v: &Value, what: &str) -> Result<(Option<i64>, Option<i32>), ProtoError> {
    match v {
        Value::Null => Ok((None, None)),
        Value::String(s) => {
            let t = chrono::DateTime::parse_from_rfc3339(s)
                .map_err(|_| type_err(what, "an RFC 3339 time"))?;
            Ok((
                Some(t.timestamp()),
                Some(i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0)),
            ))
        }
        _ => Err(type_err(what, "an RFC 3339 time")),
    }
}

impl PbJson for Time {
    fn to_json(&self) -> Value {
        timestamp(self.seconds, self.nanos, false)
    }
    fn from_json(v: &Value) -> Result<Self, ProtoError> {
        let (seconds, nanos) = parse_timestamp(v, "time")?;
        Ok(Time { seconds, nanos })
    }
}

impl PbJson for MicroTime {
    fn to_json(&self) -> Value {
        timestamp(self.seconds, self.nanos, true)
    }
    fn from_json(v: &Value) -> Result<Self, ProtoError> {
        let (seconds, nanos) = parse_timestamp(v, "microtime")?;
        Ok(MicroTime { seconds, nanos })
    }
}

/// `resource.Quantity` is its canonical string in JSON (numbers are accepted too).
impl PbJson for Quantity {
    fn to_json(&self) -> Value {
        Value::String(self.string.clone().unwrap_or_default())
    }
    fn from_json(v: &Value) -> Result<Self, ProtoError> {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return Err(type_err("quantity", "a string or number")),
        };
        Ok(Quantity { string: Some(s) })
    }
}

/// `intstr.IntOrString` is a plain number or string in JSON.
impl PbJson for IntOrString {
    fn to_json(&self) -> Value {
        if self.r#type == Some(1) {
            Value::String(self.str_val.clone().unwrap_or_default())
        } else {
            Value::from(self.int_val.unwrap_or(0))
        }
    }
    fn from_json(v: &Value) -> Result<Self, ProtoError> {
        match v {
            Value::String(s) => Ok(IntOrString {
                r#type: Some(1),
                int_val: Some(0),
                str_val: Some(s.clone()),
            }),
            other => Ok(IntOrString {
                r#type: Some(0),
                int_val: Some(
                    i32::try_from(int_of(other, "intOrString")?)
                        .map_err(|_| type_err("intOrString", "a 32-bit integer"))?,
                ),
                str_val: Some(String::new()),
            }),
        }
    }
}

/// `FieldsV1` carries its JSON in `raw`.
impl PbJson for FieldsV1 {
    fn to_json(&self) -> Value {
        serde_json::from_slice(self.raw.as_deref().unwrap_or(b"{}")).unwrap_or(Value::Null)
    }
    fn from_json(v: &Value) -> Result<Self, ProtoError> {
        Ok(FieldsV1 {
            raw: Some(serde_json::to_vec(v).unwrap_or_default()),
        })
    }
}

/// The conversions of one kind's message.
struct KindCodec {
    decode: fn(&[u8]) -> Result<Value, ProtoError>,
    encode: fn(&Value) -> Result<Vec<u8>, ProtoError>,
}

fn decode_as<M: PbJson + Message + Default>(raw: &[u8]) -> Result<Value, ProtoError> {
    Ok(M::decode(raw)?.to_json())
}

fn encode_as<M: PbJson + Message>(v: &Value) -> Result<Vec<u8>, ProtoError> {
    Ok(M::from_json(v)?.encode_to_vec())
}

macro_rules! kinds {
    ($($api_version:literal, $kind:literal => $($seg:ident)::+;)*) => {
        fn codec(api_version: &str, kind: &str) -> Option<KindCodec> {
            match (api_version, kind) {
                $(($api_version, $kind) => Some(KindCodec {
                    decode: decode_as::<$($seg)::+>,
                    encode: encode_as::<$($seg)::+>,
                }),)*
                _ => None,
            }
        }
    };
}

kinds! {
    "v1", "Namespace" => k8s_pb::api::core::v1::Namespace;
    "v1", "ConfigMap" => k8s_pb::api::core::v1::ConfigMap;
    "v1", "Secret" => k8s_pb::api::core::v1::Secret;
    "v1", "Service" => k8s_pb::api::core::v1::Service;
    "v1", "ServiceAccount" => k8s_pb::api::core::v1::ServiceAccount;
    "v1", "Event" => k8s_pb::api::core::v1::Event;
    "v1", "Pod" => k8s_pb::api::core::v1::Pod;
    "v1", "Endpoints" => k8s_pb::api::core::v1::Endpoints;
    "v1", "PersistentVolumeClaim" => k8s_pb::api::core::v1::PersistentVolumeClaim;
    "v1", "ResourceQuota" => k8s_pb::api::core::v1::ResourceQuota;
    "v1", "LimitRange" => k8s_pb::api::core::v1::LimitRange;
    "scheduling.k8s.io/v1", "PriorityClass" => k8s_pb::api::scheduling::v1::PriorityClass;
    "apps/v1", "Deployment" => k8s_pb::api::apps::v1::Deployment;
    "apps/v1", "ReplicaSet" => k8s_pb::api::apps::v1::ReplicaSet;
    "apps/v1", "StatefulSet" => k8s_pb::api::apps::v1::StatefulSet;
    "apps/v1", "DaemonSet" => k8s_pb::api::apps::v1::DaemonSet;
    "autoscaling/v1", "HorizontalPodAutoscaler" => k8s_pb::api::autoscaling::v1::HorizontalPodAutoscaler;
    "autoscaling/v2", "HorizontalPodAutoscaler" => k8s_pb::api::autoscaling::v2::HorizontalPodAutoscaler;
    "batch/v1", "Job" => k8s_pb::api::batch::v1::Job;
    "batch/v1", "CronJob" => k8s_pb::api::batch::v1::CronJob;
    "networking.k8s.io/v1", "Ingress" => k8s_pb::api::networking::v1::Ingress;
    "policy/v1", "PodDisruptionBudget" => k8s_pb::api::policy::v1::PodDisruptionBudget;
    "coordination.k8s.io/v1", "Lease" => k8s_pb::api::coordination::v1::Lease;
    "rbac.authorization.k8s.io/v1", "Role" => k8s_pb::api::rbac::v1::Role;
    "rbac.authorization.k8s.io/v1", "RoleBinding" => k8s_pb::api::rbac::v1::RoleBinding;
    "rbac.authorization.k8s.io/v1", "ClusterRole" => k8s_pb::api::rbac::v1::ClusterRole;
    "rbac.authorization.k8s.io/v1", "ClusterRoleBinding" => k8s_pb::api::rbac::v1::ClusterRoleBinding;
    "v1", "Status" => k8s_pb::apimachinery::pkg::apis::meta::v1::Status;
    "meta.k8s.io/v1", "DeleteOptions" => k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions;
    "v1", "DeleteOptions" => k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions;
}

/// True when protobuf bodies of this apiVersion and kind can be decoded.
pub(crate) fn supports(api_version: &str, kind: &str) -> bool {
    codec(api_version, kind).is_some()
}

/// Decodes an enveloped protobuf body into the object's JSON (apiVersion and kind
/// from the envelope).
pub(crate) fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtoError::NoEnvelope)?;
    let unknown = Unknown::decode(rest)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let api_version = tm.api_version.unwrap_or_default();
    let kind = tm.kind.unwrap_or_default();
    let codec = codec(&api_version, &kind).ok_or_else(|| ProtoError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let mut v = (codec.decode)(unknown.raw.as_deref().unwrap_or_default())?;
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(api_version));
        o.insert("kind".into(), Value::String(kind));
    }
    Ok(v)
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// Encodes an object, or a list of objects (`<Kind>List`), as enveloped protobuf.
pub(crate) fn encode(v: &Value) -> Result<Vec<u8>, ProtoError> {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let unknown_kind = || ProtoError::UnknownKind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    };
    if let Some(codec) = codec(api_version, kind) {
        return Ok(envelope(api_version, kind, (codec.encode)(v)?));
    }
    let item_kind = kind.strip_suffix("List").ok_or_else(unknown_kind)?;
    let codec = codec(api_version, item_kind).ok_or_else(unknown_kind)?;
    // Every <Kind>List message is `metadata = 1` (ListMeta) and `repeated items = 2`.
    let list_meta = k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta::from_json(
        v.get("metadata").unwrap_or(&Value::Null),
    )?;
    let mut raw = Vec::new();
    prost::encoding::message::encode(1, &list_meta, &mut raw);
    for item in v
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let bytes = (codec.encode)(item)?;
        prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut raw);
        prost::encoding::encode_varint(bytes.len() as u64, &mut raw);
        raw.extend(bytes);
    }
    Ok(envelope(api_version, kind, raw))
}

/// True when the Accept header admits protobuf and nothing else (then answers must be
/// protobuf; a client that also takes JSON gets JSON).
pub(crate) fn accept_only_protobuf(accept: &str) -> bool {
    let mut any = false;
    for clause in accept.split(',') {
        let media = clause.split(';').next().unwrap_or("").trim();
        if media.is_empty() {
            continue;
        }
        if media != MEDIA_TYPE {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configmap_round_trip_drops_go_zero_values() {
        // What kubectl 1.32 sends for `kubectl create configmap c --from-literal=k=v`.
        let body = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1b\n\x11\n\x01c\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\n\x01k\x12\x01v\x1a\x00\"\x00";
        let v = decode(body).expect("decodes");
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "creationTimestamp": null}, "data": {"k": "v"}})
        );
        // A null time is left out on the way back; Go reads both as the zero time.
        let again = decode(&encode(&v).expect("encodes")).expect("decodes again");
        let mut expected = v.clone();
        expected["metadata"] = json!({"name": "c"});
        assert_eq!(again, expected);
    }

    #[test]
    fn pointer_zeros_and_special_types_survive() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {"replicas": 0, "paused": false, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "c", "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": "500m"}},
                    "livenessProbe": {"httpGet": {"port": "http"}}}]}}}});
        let back = decode(&encode(&d).expect("encodes")).expect("decodes");
        assert_eq!(back["spec"]["replicas"], json!(0));
        assert!(back["spec"].get("paused").is_none(), "{back}");
        assert_eq!(
            back["metadata"]["creationTimestamp"],
            json!("2026-01-02T03:04:05Z")
        );
        let c = &back["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["resources"]["limits"]["cpu"], json!("500m"));
        assert_eq!(c["livenessProbe"]["httpGet"]["port"], json!("http"));
        assert_eq!(c["ports"][0]["containerPort"], json!(80));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "Yg=="}, "type": "Opaque"});
        assert_eq!(
            decode(&encode(&secret).expect("encodes")).expect("decodes"),
            secret
        );
    }

    #[test]
    fn quota_limits_priority_and_hpa_round_trip() {
        for obj in [
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                "spec": {"hard": {"pods": "10", "requests.cpu": "4"},
                    "scopeSelector": {"matchExpressions": [
                        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
                "status": {"used": {"pods": "3"}}}),
            json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"},
                    "max": {"memory": "1Gi"}}]}}),
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "p"}, "value": 0, "preemptionPolicy": "Never"}),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "h"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 3,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80}}}],
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}}}}),
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "h"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 80}}),
        ] {
            let back = decode(&encode(&obj).expect("encodes")).expect("decodes");
            assert_eq!(back, obj);
        }
    }

    #[test]
    fn accept_negotiation() {
        assert!(accept_only_protobuf("application/vnd.kubernetes.protobuf"));
        assert!(!accept_only_protobuf(
            "application/vnd.kubernetes.protobuf,application/json"
        ));
        assert!(!accept_only_protobuf(""));
        assert!(!accept_only_protobuf("*/*"));
    }
}
