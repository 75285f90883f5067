//! OpenAPI schema validation of custom resources: each keyword a CRD schema uses is
//! checked against the `422 Invalid` Status kube-apiserver (v1.36) answers for the
//! same CRD and object, on create, update, merge and JSON patch, server-side apply
//! and the status subresource; unknown fields are pruned, not rejected; nothing is
//! stored when validation fails.
//!
//! The expected Status objects are written out in full. Their wording follows
//! apiextensions-apiserver's `kubeOpenAPIResultToFieldErrors` over kube-openapi's
//! validator messages and apimachinery's `field.Error.ErrorBody`.
#![recursion_limit = "256"]

mod support;

use kube::Client;
use serde_json::{Value, json};
use support::*;

const BASE: &str = "/apis/example.com/v1/namespaces/default/databases";

/// A CRD `databases.example.com` (kind Database) modelled on operator CRDs: required
/// fields, an enum, bounds, lengths, a pattern, formats, list types and a status
/// subresource with its own schema.
fn database_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "databases.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "databases", "singular": "database", "kind": "Database"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["credentials", "type"],
                            "properties": {
                                "type": {"type": "string", "enum": ["Standalone", "ReplicaSet", "ShardedCluster"]},
                                "credentials": {"type": "string"},
                                "members": {"type": "integer", "minimum": 1, "maximum": 50},
                                "name": {"type": "string", "minLength": 3, "maxLength": 8},
                                "version": {"type": "string", "pattern": "^\\d+\\.\\d+\\.\\d+$"},
                                "createdAt": {"type": "string", "format": "date-time"},
                                "key": {"type": "string", "format": "byte"},
                                "storageBytes": {"type": "integer", "format": "int32"},
                                "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
                                "port": {"x-kubernetes-int-or-string": true},
                                "tags": {"type": "array", "maxItems": 3, "x-kubernetes-list-type": "set",
                                    "items": {"type": "string"}},
                                "users": {"type": "array", "minItems": 1, "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["name"],
                                    "items": {"type": "object", "required": ["name"], "properties": {
                                        "name": {"type": "string"},
                                        "role": {"type": "string", "enum": ["read", "readWrite"]}
                                    }}},
                                "options": {"type": "object", "additionalProperties": {"type": "integer"}},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "comment": {"type": "string", "nullable": true}
                            }
                        },
                        "status": {"type": "object", "properties": {
                            "phase": {"type": "string", "enum": ["Pending", "Running"]},
                            "members": {"type": "integer"}
                        }}
                    }
                }}
            }]
        }
    })
}

fn db(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Database",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn valid_spec() -> Value {
    json!({"type": "ReplicaSet", "credentials": "admin-secret", "members": 3})
}

/// The `422 Invalid` Status kube-apiserver sends for Database `name` with these
/// `(reason, field, message)` causes.
fn invalid(name: &str, causes: &[(&str, &str, &str)]) -> Value {
    let lines: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    let summary = if lines.len() == 1 {
        lines[0].clone()
    } else {
        format!("[{}]", lines.join(", "))
    };
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure",
        "message": format!("Database.example.com \"{name}\" is invalid: {summary}"),
        "reason": "Invalid",
        "details": {
            "name": name, "group": "example.com", "kind": "Database",
            "causes": causes.iter().map(|(r, f, m)| json!({"reason": r, "message": m, "field": f})).collect::<Vec<_>>()
        },
        "code": 422
    })
}

async fn setup() -> (kubewasm_apiserver::ApiServer, Client) {
    let (server, client) = server().await;
    let (code, body) = send(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        &database_crd(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    (server, client)
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let bytes = if content_type == "application/apply-patch+yaml" {
        serde_json::to_vec(body).expect("json")
    } else {
        body.to_string().into_bytes()
    };
    raw(
        client,
        http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(bytes)
            .expect("request"),
    )
    .await
}

async fn create(client: &Client, obj: &Value) -> (u16, Value) {
    send(client, "POST", BASE, "application/json", obj).await
}

async fn get(client: &Client, name: &str) -> (u16, Value) {
    raw(
        client,
        http::Request::get(format!("{BASE}/{name}"))
            .body(vec![])
            .expect("request"),
    )
    .await
}

#[tokio::test]
async fn required_and_enum_are_reported_together() {
    let (_s, client) = setup().await;
    let (code, body) = create(&client, &db("db1", json!({"type": "x", "members": 3}))).await;
    assert_eq!(code, 422);
    // kube-openapi checks an object's properties before its required list.
    assert_eq!(
        body,
        invalid(
            "db1",
            &[
                (
                    "FieldValueNotSupported",
                    "spec.type",
                    "Unsupported value: \"x\": supported values: \"Standalone\", \"ReplicaSet\", \"ShardedCluster\""
                ),
                ("FieldValueRequired", "spec.credentials", "Required value"),
            ]
        )
    );
    assert_eq!(get(&client, "db1").await.0, 404, "nothing stored");
    let (code, body) = create(&client, &db("db1", valid_spec())).await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn type_mismatches() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["members"] = json!("three");
    spec["credentials"] = json!(7);
    spec["port"] = json!(true);
    let (code, body) = create(&client, &db("db2", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db2",
            &[
                (
                    "FieldValueTypeInvalid",
                    "spec.credentials",
                    "Invalid value: \"integer\": spec.credentials in body must be of type string: \"integer\""
                ),
                (
                    "FieldValueTypeInvalid",
                    "spec.members",
                    "Invalid value: \"string\": spec.members in body must be of type integer: \"string\""
                ),
                (
                    "FieldValueTypeInvalid",
                    "spec.port",
                    "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""
                ),
            ]
        )
    );
    // int-or-string takes both; a float with no fraction is an integer.
    let mut spec = valid_spec();
    spec["port"] = json!("http");
    spec["members"] = json!(5.0);
    assert_eq!(create(&client, &db("db2", spec)).await.0, 201);
}

#[tokio::test]
async fn formats() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["createdAt"] = json!("yesterday");
    spec["key"] = json!("not base64!");
    let (code, body) = create(&client, &db("db3", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db3",
            &[
                (
                    "FieldValueTypeInvalid",
                    "spec.createdAt",
                    "Invalid value: \"yesterday\": spec.createdAt in body must be of type date-time: \"yesterday\""
                ),
                (
                    "FieldValueTypeInvalid",
                    "spec.key",
                    "Invalid value: \"not base64!\": spec.key in body must be of type byte: \"not base64!\""
                ),
            ]
        )
    );
    // int32/int64 formats are not among the formats CRDs validate: only the type counts.
    let mut spec = valid_spec();
    spec["createdAt"] = json!("2026-01-02T03:04:05Z");
    spec["key"] = json!("aGVsbG8=");
    spec["storageBytes"] = json!(1_099_511_627_776_i64);
    let (code, body) = create(&client, &db("db3", spec)).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["storageBytes"], json!(1_099_511_627_776_i64));
}

#[tokio::test]
async fn pattern_and_lengths() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["version"] = json!("latest");
    spec["name"] = json!("ab");
    let (code, body) = create(&client, &db("db4", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db4",
            &[
                (
                    "FieldValueInvalid",
                    "spec.name",
                    "Invalid value: \"ab\": spec.name in body should be at least 3 chars long"
                ),
                (
                    "FieldValueInvalid",
                    "spec.version",
                    "Invalid value: \"latest\": spec.version in body should match '^\\d+\\.\\d+\\.\\d+$'"
                ),
            ]
        )
    );
    let mut spec = valid_spec();
    spec["name"] = json!("much-too-long");
    let (code, body) = create(&client, &db("db4", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db4",
            &[(
                "FieldValueTooLong",
                "spec.name",
                "Too long: may not be more than 8 bytes"
            )]
        )
    );
}

#[tokio::test]
async fn bounds_and_item_counts() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["members"] = json!(0);
    spec["ratio"] = json!(0);
    spec["tags"] = json!(["a", "b", "c", "d"]);
    spec["users"] = json!([]);
    let (code, body) = create(&client, &db("db5", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db5",
            &[
                (
                    "FieldValueInvalid",
                    "spec.members",
                    "Invalid value: 0: spec.members in body should be greater than or equal to 1"
                ),
                (
                    "FieldValueInvalid",
                    "spec.ratio",
                    "Invalid value: 0: spec.ratio in body should be greater than 0"
                ),
                (
                    "FieldValueTooMany",
                    "spec.tags",
                    "Too many: 4: must have at most 3 items"
                ),
                (
                    "FieldValueInvalid",
                    "spec.users",
                    "Invalid value: 0: spec.users in body should have at least 1 items"
                ),
            ]
        )
    );
    let mut spec = valid_spec();
    spec["members"] = json!(51);
    let (code, body) = create(&client, &db("db5", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db5",
            &[(
                "FieldValueInvalid",
                "spec.members",
                "Invalid value: 51: spec.members in body should be less than or equal to 50"
            )]
        )
    );
}

#[tokio::test]
async fn list_types_nested_items_and_maps() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["tags"] = json!(["a", "a"]);
    spec["users"] = json!([{"name": "app", "role": "admin"}, {"name": "app"}, {"role": "read"}]);
    spec["options"] = json!({"poolSize": "big"});
    let (code, body) = create(&client, &db("db6", spec)).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "db6",
            &[
                (
                    "FieldValueTypeInvalid",
                    "spec.options.poolSize",
                    "Invalid value: \"string\": spec.options.poolSize in body must be of type integer: \"string\""
                ),
                (
                    "FieldValueNotSupported",
                    "spec.users[0].role",
                    "Unsupported value: \"admin\": supported values: \"read\", \"readWrite\""
                ),
                ("FieldValueRequired", "spec.users[2].name", "Required value"),
                (
                    "FieldValueDuplicate",
                    "spec.tags[1]",
                    "Duplicate value: \"a\""
                ),
                (
                    "FieldValueDuplicate",
                    "spec.users[1]",
                    "Duplicate value: {\"name\":\"app\"}"
                ),
            ]
        )
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_nulls_dropped() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["bogus"] = json!("dropped");
    spec["extra"] = json!({"anything": {"goes": 1}});
    spec["name"] = Value::Null;
    spec["comment"] = Value::Null;
    let mut obj = db("db7", spec);
    obj["topLevel"] = json!(1);
    let (code, body) = create(&client, &obj).await;
    assert_eq!(code, 201, "{body}");
    let (_, stored) = get(&client, "db7").await;
    assert_eq!(
        stored["spec"],
        json!({"type": "ReplicaSet", "credentials": "admin-secret", "members": 3,
            "extra": {"anything": {"goes": 1}}, "comment": null})
    );
    assert!(stored.get("topLevel").is_none(), "{stored}");
}

#[tokio::test]
async fn updates_and_patches_are_validated_and_nothing_changes() {
    let (_s, client) = setup().await;
    let (code, created) = create(&client, &db("db8", valid_spec())).await;
    assert_eq!(code, 201);
    let rv = created["metadata"]["resourceVersion"].clone();
    let members_low = invalid(
        "db8",
        &[(
            "FieldValueInvalid",
            "spec.members",
            "Invalid value: 0: spec.members in body should be greater than or equal to 1",
        )],
    );

    let mut put = created.clone();
    put["spec"]["members"] = json!(0);
    let (code, body) = send(
        &client,
        "PUT",
        &format!("{BASE}/db8"),
        "application/json",
        &put,
    )
    .await;
    assert_eq!((code, &body), (422, &members_low));

    let (code, body) = send(
        &client,
        "PATCH",
        &format!("{BASE}/db8"),
        "application/merge-patch+json",
        &json!({"spec": {"members": 0}}),
    )
    .await;
    assert_eq!((code, &body), (422, &members_low));

    let (code, body) = send(
        &client,
        "PATCH",
        &format!("{BASE}/db8"),
        "application/json-patch+json",
        &json!([{"op": "remove", "path": "/spec/credentials"}]),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            422,
            &invalid(
                "db8",
                &[("FieldValueRequired", "spec.credentials", "Required value")]
            )
        )
    );

    // Strategic merge patch is not served for custom resources at all.
    let (code, _) = send(
        &client,
        "PATCH",
        &format!("{BASE}/db8"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"members": 0}}),
    )
    .await;
    assert_eq!(code, 415);

    let (_, stored) = get(&client, "db8").await;
    assert_eq!(stored["metadata"]["resourceVersion"], rv);
    assert_eq!(stored["spec"], valid_spec());
}

#[tokio::test]
async fn server_side_apply_is_validated_and_stores_nothing() {
    let (_s, client) = setup().await;
    let path = format!("{BASE}/db9?fieldManager=tester");
    let (code, body) = send(
        &client,
        "PATCH",
        &path,
        "application/apply-patch+yaml",
        &db("db9", json!({"type": "Cluster", "credentials": "c"})),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            422,
            &invalid(
                "db9",
                &[(
                    "FieldValueNotSupported",
                    "spec.type",
                    "Unsupported value: \"Cluster\": supported values: \"Standalone\", \"ReplicaSet\", \"ShardedCluster\""
                )]
            )
        )
    );
    assert_eq!(get(&client, "db9").await.0, 404, "apply created nothing");

    let (code, body) = send(
        &client,
        "PATCH",
        &path,
        "application/apply-patch+yaml",
        &db("db9", valid_spec()),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        &client,
        "PATCH",
        &path,
        "application/apply-patch+yaml",
        &db(
            "db9",
            json!({"type": "ReplicaSet", "credentials": "admin-secret", "members": 99}),
        ),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            422,
            &invalid(
                "db9",
                &[(
                    "FieldValueInvalid",
                    "spec.members",
                    "Invalid value: 99: spec.members in body should be less than or equal to 50"
                )]
            )
        )
    );
    let (_, stored) = get(&client, "db9").await;
    assert_eq!(stored["spec"]["members"], json!(3));
}

#[tokio::test]
async fn status_subresource_validates_status_only() {
    let (_s, client) = setup().await;
    assert_eq!(create(&client, &db("db10", valid_spec())).await.0, 201);
    let status_path = format!("{BASE}/db10/status");
    let (code, body) = send(
        &client,
        "PATCH",
        &status_path,
        "application/merge-patch+json",
        &json!({"status": {"phase": "Exploded", "members": "three"}}),
    )
    .await;
    // The status schema is the validation root: messages name `members`, fields `status.members`.
    assert_eq!(
        (code, &body),
        (
            422,
            &invalid(
                "db10",
                &[
                    (
                        "FieldValueTypeInvalid",
                        "status.members",
                        "Invalid value: \"string\": members in body must be of type integer: \"string\""
                    ),
                    (
                        "FieldValueNotSupported",
                        "status.phase",
                        "Unsupported value: \"Exploded\": supported values: \"Pending\", \"Running\""
                    ),
                ]
            )
        )
    );
    let (code, body) = send(
        &client,
        "PATCH",
        &format!("{status_path}?fieldManager=op&force=true"),
        "application/apply-patch+yaml",
        &json!({"apiVersion": "example.com/v1", "kind": "Database",
            "metadata": {"name": "db10"}, "status": {"phase": "Sleeping"}}),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            422,
            &invalid(
                "db10",
                &[(
                    "FieldValueNotSupported",
                    "status.phase",
                    "Unsupported value: \"Sleeping\": supported values: \"Pending\", \"Running\""
                )]
            )
        )
    );
    let (_, stored) = get(&client, "db10").await;
    assert!(stored.get("status").is_none(), "{stored}");
    let (code, body) = send(
        &client,
        "PATCH",
        &status_path,
        "application/merge-patch+json",
        &json!({"status": {"phase": "Running", "members": 3}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], json!({"phase": "Running", "members": 3}));
}

#[tokio::test]
async fn unchanged_invalid_values_ratchet_after_a_schema_change() {
    let (_s, client) = setup().await;
    let mut spec = valid_spec();
    spec["members"] = json!(40);
    assert_eq!(create(&client, &db("db11", spec)).await.0, 201);
    // Tighten the schema: members may now be at most 10; db11 is invalid as stored.
    let mut crd = database_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["members"]
        ["maximum"] = json!(10);
    let (code, body) = send(
        &client,
        "PATCH",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/databases.example.com",
        "application/merge-patch+json",
        &json!({"spec": crd["spec"]}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // Changing another field passes: the unchanged invalid value is ratcheted.
    let (code, body) = send(
        &client,
        "PATCH",
        &format!("{BASE}/db11"),
        "application/merge-patch+json",
        &json!({"spec": {"credentials": "rotated"}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // Changing the invalid value itself is rejected.
    let (code, body) = send(
        &client,
        "PATCH",
        &format!("{BASE}/db11"),
        "application/merge-patch+json",
        &json!({"spec": {"members": 41}}),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            422,
            &invalid(
                "db11",
                &[(
                    "FieldValueInvalid",
                    "spec.members",
                    "Invalid value: 41: spec.members in body should be less than or equal to 10"
                )]
            )
        )
    );
}
