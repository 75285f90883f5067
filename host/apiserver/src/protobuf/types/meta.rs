//! `meta/v1` (apimachinery): object and list metadata, label selectors, owner
//! references, managed fields, conditions, delete options and preconditions, Status.

msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::Condition {
    r#type: "type" keep,
    status: "status" keep,
    observed_generation: "observedGeneration",
    last_transition_time: "lastTransitionTime",
    reason: "reason" keep,
    message: "message" keep,
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions {
    grace_period_seconds: "gracePeriodSeconds" keep,
    preconditions: "preconditions",
    orphan_dependents: "orphanDependents" keep,
    propagation_policy: "propagationPolicy" keep,
    dry_run: "dryRun",
    ignore_store_read_error_with_cluster_breaking_potential: "ignoreStoreReadErrorWithClusterBreakingPotential" keep,
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelector {
    match_labels: "matchLabels",
    match_expressions: "matchExpressions",
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
    key: "key" keep,
    operator: "operator" keep,
    values: "values",
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta {
    self_link: "selfLink",
    resource_version: "resourceVersion",
    r#continue: "continue",
    remaining_item_count: "remainingItemCount" keep,
});
msg!(
    k8s_pb::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
        manager: "manager",
        operation: "operation",
        api_version: "apiVersion",
        time: "time",
        fields_type: "fieldsType",
        fields_v1: "fieldsV1",
        subresource: "subresource",
    }
);
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    name: "name",
    generate_name: "generateName",
    namespace: "namespace",
    self_link: "selfLink",
    uid: "uid",
    resource_version: "resourceVersion",
    generation: "generation",
    creation_timestamp: "creationTimestamp",
    deletion_timestamp: "deletionTimestamp",
    deletion_grace_period_seconds: "deletionGracePeriodSeconds" keep,
    labels: "labels",
    annotations: "annotations",
    owner_references: "ownerReferences",
    finalizers: "finalizers",
    managed_fields: "managedFields",
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::OwnerReference {
    api_version: "apiVersion" keep,
    kind: "kind" keep,
    name: "name" keep,
    uid: "uid" keep,
    controller: "controller" keep,
    block_owner_deletion: "blockOwnerDeletion" keep,
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::Preconditions {
    uid: "uid" keep,
    resource_version: "resourceVersion" keep,
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::Status {
    metadata: "metadata",
    status: "status",
    message: "message",
    reason: "reason",
    details: "details",
    code: "code",
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::StatusCause {
    reason: "reason",
    message: "message",
    field: "field",
});
msg!(k8s_pb::apimachinery::pkg::apis::meta::v1::StatusDetails {
    name: "name",
    group: "group",
    kind: "kind",
    uid: "uid",
    causes: "causes",
    retry_after_seconds: "retryAfterSeconds",
});
