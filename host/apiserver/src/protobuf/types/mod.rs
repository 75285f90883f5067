//! The field lists of the k8s-pb messages reachable from the built-in kinds this
//! server serves, with each field's JSON name and `keep` where Go's JSON encoder
//! writes a zero value (pointer fields, and fields without `omitempty`).
//!
//! Written with a script from the k8s-pb 0.9 structs (identifiers and proto tags)
//! joined by proto tag to the `json:` and Go types of k8s.io/api and
//! k8s.io/apimachinery v0.36; regenerate the same way when bumping k8s-pb. A field
//! k8s-pb has and the Go types lack gets its lowerCamelCase name. Time, MicroTime,
//! Quantity, IntOrString and FieldsV1 are converted by hand in the
//! parent module. A JSON name `""` marks an inline (embedded) struct, whose fields
//! appear in the parent's JSON object.
//!
//! One file per API group (`core/v1` in three: `core_pod`, `core_volume`, `core_other`), each in k8s-pb
//! path order.

mod apps;
mod autoscaling;
mod batch;
mod coordination;
mod core_other;
mod core_pod;
mod core_volume;
mod meta;
mod networking;
mod policy;
mod rbac;
mod scheduling;
