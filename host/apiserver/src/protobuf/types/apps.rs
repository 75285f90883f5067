//! `apps/v1`: Deployments, ReplicaSets, StatefulSets, DaemonSets.

msg!(k8s_pb::api::apps::v1::DaemonSet {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::apps::v1::DaemonSetCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::apps::v1::DaemonSetSpec {
    selector: "selector",
    template: "template",
    update_strategy: "updateStrategy",
    min_ready_seconds: "minReadySeconds",
    revision_history_limit: "revisionHistoryLimit" keep,
});
msg!(k8s_pb::api::apps::v1::DaemonSetStatus {
    current_number_scheduled: "currentNumberScheduled" keep,
    number_misscheduled: "numberMisscheduled" keep,
    desired_number_scheduled: "desiredNumberScheduled" keep,
    number_ready: "numberReady" keep,
    observed_generation: "observedGeneration",
    updated_number_scheduled: "updatedNumberScheduled",
    number_available: "numberAvailable",
    number_unavailable: "numberUnavailable",
    collision_count: "collisionCount" keep,
    conditions: "conditions",
});
msg!(k8s_pb::api::apps::v1::DaemonSetUpdateStrategy {
    r#type: "type",
    rolling_update: "rollingUpdate",
});
msg!(k8s_pb::api::apps::v1::Deployment {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::apps::v1::DeploymentCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_update_time: "lastUpdateTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::apps::v1::DeploymentSpec {
    replicas: "replicas" keep,
    selector: "selector",
    template: "template",
    strategy: "strategy",
    min_ready_seconds: "minReadySeconds",
    revision_history_limit: "revisionHistoryLimit" keep,
    paused: "paused",
    progress_deadline_seconds: "progressDeadlineSeconds" keep,
});
msg!(k8s_pb::api::apps::v1::DeploymentStatus {
    observed_generation: "observedGeneration",
    replicas: "replicas",
    updated_replicas: "updatedReplicas",
    ready_replicas: "readyReplicas",
    available_replicas: "availableReplicas",
    unavailable_replicas: "unavailableReplicas",
    terminating_replicas: "terminatingReplicas" keep,
    conditions: "conditions",
    collision_count: "collisionCount" keep,
});
msg!(k8s_pb::api::apps::v1::DeploymentStrategy {
    r#type: "type",
    rolling_update: "rollingUpdate",
});
msg!(k8s_pb::api::apps::v1::ReplicaSet {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::apps::v1::ReplicaSetCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::apps::v1::ReplicaSetSpec {
    replicas: "replicas" keep,
    min_ready_seconds: "minReadySeconds",
    selector: "selector",
    template: "template",
});
msg!(k8s_pb::api::apps::v1::ReplicaSetStatus {
    replicas: "replicas" keep,
    fully_labeled_replicas: "fullyLabeledReplicas",
    ready_replicas: "readyReplicas",
    available_replicas: "availableReplicas",
    terminating_replicas: "terminatingReplicas" keep,
    observed_generation: "observedGeneration",
    conditions: "conditions",
});
msg!(k8s_pb::api::apps::v1::RollingUpdateDaemonSet {
    max_unavailable: "maxUnavailable",
    max_surge: "maxSurge",
});
msg!(k8s_pb::api::apps::v1::RollingUpdateDeployment {
    max_unavailable: "maxUnavailable",
    max_surge: "maxSurge",
});
msg!(k8s_pb::api::apps::v1::RollingUpdateStatefulSetStrategy {
    partition: "partition" keep,
    max_unavailable: "maxUnavailable",
});
msg!(k8s_pb::api::apps::v1::StatefulSet {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::apps::v1::StatefulSetCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::apps::v1::StatefulSetOrdinals {
    start: "start" keep,
});
msg!(
    k8s_pb::api::apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: "whenDeleted",
        when_scaled: "whenScaled",
    }
);
msg!(k8s_pb::api::apps::v1::StatefulSetSpec {
    replicas: "replicas" keep,
    selector: "selector",
    template: "template",
    volume_claim_templates: "volumeClaimTemplates",
    service_name: "serviceName" keep,
    pod_management_policy: "podManagementPolicy",
    update_strategy: "updateStrategy",
    revision_history_limit: "revisionHistoryLimit" keep,
    min_ready_seconds: "minReadySeconds",
    persistent_volume_claim_retention_policy: "persistentVolumeClaimRetentionPolicy",
    ordinals: "ordinals",
});
msg!(k8s_pb::api::apps::v1::StatefulSetStatus {
    observed_generation: "observedGeneration",
    replicas: "replicas" keep,
    ready_replicas: "readyReplicas",
    current_replicas: "currentReplicas",
    updated_replicas: "updatedReplicas",
    current_revision: "currentRevision",
    update_revision: "updateRevision",
    collision_count: "collisionCount" keep,
    conditions: "conditions",
    available_replicas: "availableReplicas" keep,
});
msg!(k8s_pb::api::apps::v1::StatefulSetUpdateStrategy {
    r#type: "type",
    rolling_update: "rollingUpdate",
});
