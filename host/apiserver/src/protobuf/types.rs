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
msg!(k8s_pb::api::batch::v1::CronJob {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::batch::v1::CronJobSpec {
    schedule: "schedule" keep,
    time_zone: "timeZone" keep,
    starting_deadline_seconds: "startingDeadlineSeconds" keep,
    concurrency_policy: "concurrencyPolicy",
    suspend: "suspend" keep,
    job_template: "jobTemplate",
    successful_jobs_history_limit: "successfulJobsHistoryLimit" keep,
    failed_jobs_history_limit: "failedJobsHistoryLimit" keep,
});
msg!(k8s_pb::api::batch::v1::CronJobStatus {
    active: "active",
    last_schedule_time: "lastScheduleTime",
    last_successful_time: "lastSuccessfulTime",
});
msg!(k8s_pb::api::batch::v1::Job {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::batch::v1::JobCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_probe_time: "lastProbeTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::batch::v1::JobSpec {
    parallelism: "parallelism" keep,
    completions: "completions" keep,
    active_deadline_seconds: "activeDeadlineSeconds" keep,
    pod_failure_policy: "podFailurePolicy",
    success_policy: "successPolicy",
    backoff_limit: "backoffLimit" keep,
    backoff_limit_per_index: "backoffLimitPerIndex" keep,
    max_failed_indexes: "maxFailedIndexes" keep,
    selector: "selector",
    manual_selector: "manualSelector" keep,
    template: "template",
    ttl_seconds_after_finished: "ttlSecondsAfterFinished" keep,
    completion_mode: "completionMode" keep,
    suspend: "suspend" keep,
    pod_replacement_policy: "podReplacementPolicy" keep,
    managed_by: "managedBy" keep,
});
msg!(k8s_pb::api::batch::v1::JobStatus {
    conditions: "conditions",
    start_time: "startTime",
    completion_time: "completionTime",
    active: "active",
    succeeded: "succeeded",
    failed: "failed",
    terminating: "terminating" keep,
    completed_indexes: "completedIndexes",
    failed_indexes: "failedIndexes" keep,
    uncounted_terminated_pods: "uncountedTerminatedPods",
    ready: "ready" keep,
});
msg!(k8s_pb::api::batch::v1::JobTemplateSpec {
    metadata: "metadata",
    spec: "spec",
});
msg!(k8s_pb::api::batch::v1::PodFailurePolicy { rules: "rules" });
msg!(k8s_pb::api::batch::v1::PodFailurePolicyOnExitCodesRequirement {
    container_name: "containerName" keep,
    operator: "operator" keep,
    values: "values",
});
msg!(k8s_pb::api::batch::v1::PodFailurePolicyOnPodConditionsPattern {
    r#type: "type" keep,
    status: "status" keep,
});
msg!(k8s_pb::api::batch::v1::PodFailurePolicyRule {
    action: "action" keep,
    on_exit_codes: "onExitCodes",
    on_pod_conditions: "onPodConditions",
});
msg!(k8s_pb::api::batch::v1::SuccessPolicy { rules: "rules" });
msg!(k8s_pb::api::batch::v1::SuccessPolicyRule {
    succeeded_indexes: "succeededIndexes" keep,
    succeeded_count: "succeededCount" keep,
});
msg!(k8s_pb::api::batch::v1::UncountedTerminatedPods {
    succeeded: "succeeded",
    failed: "failed",
});
msg!(k8s_pb::api::coordination::v1::Lease {
    metadata: "metadata",
    spec: "spec",
});
msg!(k8s_pb::api::coordination::v1::LeaseSpec {
    holder_identity: "holderIdentity" keep,
    lease_duration_seconds: "leaseDurationSeconds" keep,
    acquire_time: "acquireTime",
    renew_time: "renewTime",
    lease_transitions: "leaseTransitions" keep,
    strategy: "strategy" keep,
    preferred_holder: "preferredHolder" keep,
});
msg!(k8s_pb::api::core::v1::Affinity {
    node_affinity: "nodeAffinity",
    pod_affinity: "podAffinity",
    pod_anti_affinity: "podAntiAffinity",
});
msg!(k8s_pb::api::core::v1::AppArmorProfile {
    r#type: "type" keep,
    localhost_profile: "localhostProfile" keep,
});
msg!(k8s_pb::api::core::v1::AwsElasticBlockStoreVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::AzureDiskVolumeSource {
    disk_name: "diskName" keep,
    disk_uri: "diskURI" keep,
    caching_mode: "cachingMode" keep,
    fs_type: "fsType" keep,
    read_only: "readOnly" keep,
    kind: "kind" keep,
});
msg!(k8s_pb::api::core::v1::AzureFileVolumeSource {
    secret_name: "secretName" keep,
    share_name: "shareName" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::CSIVolumeSource {
    driver: "driver" keep,
    read_only: "readOnly" keep,
    fs_type: "fsType" keep,
    volume_attributes: "volumeAttributes",
    node_publish_secret_ref: "nodePublishSecretRef",
});
msg!(k8s_pb::api::core::v1::Capabilities {
    add: "add",
    drop: "drop",
});
msg!(k8s_pb::api::core::v1::CephFsVolumeSource {
    monitors: "monitors",
    path: "path",
    user: "user",
    secret_file: "secretFile",
    secret_ref: "secretRef",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::CinderVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef",
});
msg!(k8s_pb::api::core::v1::ClientIpConfig {
    timeout_seconds: "timeoutSeconds" keep,
});
msg!(k8s_pb::api::core::v1::ClusterTrustBundleProjection {
    name: "name" keep,
    signer_name: "signerName" keep,
    label_selector: "labelSelector",
    optional: "optional" keep,
    path: "path" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMap {
    metadata: "metadata",
    immutable: "immutable" keep,
    data: "data",
    binary_data: "binaryData",
});
msg!(k8s_pb::api::core::v1::ConfigMapEnvSource {
    local_object_reference: "",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMapKeySelector {
    local_object_reference: "",
    key: "key" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMapProjection {
    local_object_reference: "",
    items: "items",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMapVolumeSource {
    local_object_reference: "",
    items: "items",
    default_mode: "defaultMode" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::Container {
    name: "name" keep,
    image: "image",
    command: "command",
    args: "args",
    working_dir: "workingDir",
    ports: "ports",
    env_from: "envFrom",
    env: "env",
    resources: "resources",
    resize_policy: "resizePolicy",
    restart_policy: "restartPolicy" keep,
    restart_policy_rules: "restartPolicyRules",
    volume_mounts: "volumeMounts",
    volume_devices: "volumeDevices",
    liveness_probe: "livenessProbe",
    readiness_probe: "readinessProbe",
    startup_probe: "startupProbe",
    lifecycle: "lifecycle",
    termination_message_path: "terminationMessagePath",
    termination_message_policy: "terminationMessagePolicy",
    image_pull_policy: "imagePullPolicy",
    security_context: "securityContext",
    stdin: "stdin",
    stdin_once: "stdinOnce",
    tty: "tty",
});
msg!(k8s_pb::api::core::v1::ContainerExtendedResourceRequest {
    container_name: "containerName" keep,
    resource_name: "resourceName" keep,
    request_name: "requestName" keep,
});
msg!(k8s_pb::api::core::v1::ContainerPort {
    name: "name",
    host_port: "hostPort",
    container_port: "containerPort" keep,
    protocol: "protocol",
    host_ip: "hostIP",
});
msg!(k8s_pb::api::core::v1::ContainerResizePolicy {
    resource_name: "resourceName" keep,
    restart_policy: "restartPolicy" keep,
});
msg!(k8s_pb::api::core::v1::ContainerRestartRule {
    action: "action",
    exit_codes: "exitCodes",
});
msg!(k8s_pb::api::core::v1::ContainerRestartRuleOnExitCodes {
    operator: "operator",
    values: "values",
});
msg!(k8s_pb::api::core::v1::ContainerState {
    waiting: "waiting",
    running: "running",
    terminated: "terminated",
});
msg!(k8s_pb::api::core::v1::ContainerStateRunning {
    started_at: "startedAt",
});
msg!(k8s_pb::api::core::v1::ContainerStateTerminated {
    exit_code: "exitCode" keep,
    signal: "signal",
    reason: "reason",
    message: "message",
    started_at: "startedAt",
    finished_at: "finishedAt",
    container_id: "containerID",
});
msg!(k8s_pb::api::core::v1::ContainerStateWaiting {
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::core::v1::ContainerStatus {
    name: "name" keep,
    state: "state",
    last_state: "lastState",
    ready: "ready" keep,
    restart_count: "restartCount" keep,
    image: "image" keep,
    image_id: "imageID" keep,
    container_id: "containerID",
    started: "started" keep,
    allocated_resources: "allocatedResources",
    resources: "resources",
    volume_mounts: "volumeMounts",
    user: "user",
    allocated_resources_status: "allocatedResourcesStatus",
    stop_signal: "stopSignal" keep,
});
msg!(k8s_pb::api::core::v1::ContainerUser { linux: "linux" });
msg!(k8s_pb::api::core::v1::DownwardAPIProjection { items: "items" });
msg!(k8s_pb::api::core::v1::DownwardAPIVolumeFile {
    path: "path" keep,
    field_ref: "fieldRef",
    resource_field_ref: "resourceFieldRef",
    mode: "mode" keep,
});
msg!(k8s_pb::api::core::v1::DownwardAPIVolumeSource {
    items: "items",
    default_mode: "defaultMode" keep,
});
msg!(k8s_pb::api::core::v1::EmptyDirVolumeSource {
    medium: "medium",
    size_limit: "sizeLimit",
});
msg!(k8s_pb::api::core::v1::EndpointAddress {
    ip: "ip" keep,
    hostname: "hostname",
    node_name: "nodeName" keep,
    target_ref: "targetRef",
});
msg!(k8s_pb::api::core::v1::EndpointPort {
    name: "name",
    port: "port" keep,
    protocol: "protocol",
    app_protocol: "appProtocol" keep,
});
msg!(k8s_pb::api::core::v1::EndpointSubset {
    addresses: "addresses",
    not_ready_addresses: "notReadyAddresses",
    ports: "ports",
});
msg!(k8s_pb::api::core::v1::Endpoints {
    metadata: "metadata",
    subsets: "subsets",
});
msg!(k8s_pb::api::core::v1::EnvFromSource {
    prefix: "prefix",
    config_map_ref: "configMapRef",
    secret_ref: "secretRef",
});
msg!(k8s_pb::api::core::v1::EnvVar {
    name: "name" keep,
    value: "value",
    value_from: "valueFrom",
});
msg!(k8s_pb::api::core::v1::EnvVarSource {
    field_ref: "fieldRef",
    resource_field_ref: "resourceFieldRef",
    config_map_key_ref: "configMapKeyRef",
    secret_key_ref: "secretKeyRef",
    file_key_ref: "fileKeyRef",
});
msg!(k8s_pb::api::core::v1::EphemeralContainer {
    ephemeral_container_common: "",
    target_container_name: "targetContainerName",
});
msg!(k8s_pb::api::core::v1::EphemeralContainerCommon {
    name: "name" keep,
    image: "image",
    command: "command",
    args: "args",
    working_dir: "workingDir",
    ports: "ports",
    env_from: "envFrom",
    env: "env",
    resources: "resources",
    resize_policy: "resizePolicy",
    restart_policy: "restartPolicy" keep,
    restart_policy_rules: "restartPolicyRules",
    volume_mounts: "volumeMounts",
    volume_devices: "volumeDevices",
    liveness_probe: "livenessProbe",
    readiness_probe: "readinessProbe",
    startup_probe: "startupProbe",
    lifecycle: "lifecycle",
    termination_message_path: "terminationMessagePath",
    termination_message_policy: "terminationMessagePolicy",
    image_pull_policy: "imagePullPolicy",
    security_context: "securityContext",
    stdin: "stdin",
    stdin_once: "stdinOnce",
    tty: "tty",
});
msg!(k8s_pb::api::core::v1::EphemeralVolumeSource {
    volume_claim_template: "volumeClaimTemplate",
});
msg!(k8s_pb::api::core::v1::Event {
    metadata: "metadata",
    involved_object: "involvedObject",
    reason: "reason",
    message: "message",
    source: "source",
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    r#type: "type",
    event_time: "eventTime",
    series: "series",
    action: "action",
    related: "related",
    reporting_component: "reportingComponent" keep,
    reporting_instance: "reportingInstance" keep,
});
msg!(k8s_pb::api::core::v1::EventSeries {
    count: "count",
    last_observed_time: "lastObservedTime",
});
msg!(k8s_pb::api::core::v1::EventSource {
    component: "component",
    host: "host",
});
msg!(k8s_pb::api::core::v1::ExecAction { command: "command" });
msg!(k8s_pb::api::core::v1::FcVolumeSource {
    target_ww_ns: "targetWWNs",
    lun: "lun" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    wwids: "wwids",
});
msg!(k8s_pb::api::core::v1::FileKeySelector {
    volume_name: "volumeName" keep,
    path: "path" keep,
    key: "key" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::FlexVolumeSource {
    driver: "driver" keep,
    fs_type: "fsType",
    secret_ref: "secretRef",
    read_only: "readOnly",
    options: "options",
});
msg!(k8s_pb::api::core::v1::FlockerVolumeSource {
    dataset_name: "datasetName",
    dataset_uuid: "datasetUUID",
});
msg!(k8s_pb::api::core::v1::GcePersistentDiskVolumeSource {
    pd_name: "pdName" keep,
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::GitRepoVolumeSource {
    repository: "repository" keep,
    revision: "revision",
    directory: "directory",
});
msg!(k8s_pb::api::core::v1::GlusterfsVolumeSource {
    endpoints: "endpoints" keep,
    path: "path" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::GrpcAction {
    port: "port" keep,
    service: "service" keep,
});
msg!(k8s_pb::api::core::v1::HostAlias {
    ip: "ip" keep,
    hostnames: "hostnames",
});
msg!(k8s_pb::api::core::v1::HostIp {
    ip: "ip" keep,
});
msg!(k8s_pb::api::core::v1::HostPathVolumeSource {
    path: "path" keep,
    r#type: "type" keep,
});
msg!(k8s_pb::api::core::v1::HttpGetAction {
    path: "path",
    port: "port",
    host: "host",
    scheme: "scheme",
    http_headers: "httpHeaders",
});
msg!(k8s_pb::api::core::v1::HttpHeader {
    name: "name" keep,
    value: "value" keep,
});
msg!(k8s_pb::api::core::v1::ImageVolumeSource {
    reference: "reference",
    pull_policy: "pullPolicy",
});
msg!(k8s_pb::api::core::v1::IscsiVolumeSource {
    target_portal: "targetPortal" keep,
    iqn: "iqn" keep,
    lun: "lun" keep,
    iscsi_interface: "iscsiInterface",
    fs_type: "fsType",
    read_only: "readOnly",
    portals: "portals",
    chap_auth_discovery: "chapAuthDiscovery",
    chap_auth_session: "chapAuthSession",
    secret_ref: "secretRef",
    initiator_name: "initiatorName" keep,
});
msg!(k8s_pb::api::core::v1::KeyToPath {
    key: "key" keep,
    path: "path" keep,
    mode: "mode" keep,
});
msg!(k8s_pb::api::core::v1::Lifecycle {
    post_start: "postStart",
    pre_stop: "preStop",
    stop_signal: "stopSignal" keep,
});
msg!(k8s_pb::api::core::v1::LifecycleHandler {
    exec: "exec",
    http_get: "httpGet",
    tcp_socket: "tcpSocket",
    sleep: "sleep",
});
msg!(k8s_pb::api::core::v1::LinuxContainerUser {
    uid: "uid" keep,
    gid: "gid" keep,
    supplemental_groups: "supplementalGroups",
});
msg!(k8s_pb::api::core::v1::LoadBalancerIngress {
    ip: "ip",
    hostname: "hostname",
    ip_mode: "ipMode" keep,
    ports: "ports",
});
msg!(k8s_pb::api::core::v1::LoadBalancerStatus { ingress: "ingress" });
msg!(k8s_pb::api::core::v1::LocalObjectReference { name: "name" });
msg!(k8s_pb::api::core::v1::ModifyVolumeStatus {
    target_volume_attributes_class_name: "targetVolumeAttributesClassName",
    status: "status" keep,
});
msg!(k8s_pb::api::core::v1::Namespace {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::core::v1::NamespaceCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::core::v1::NamespaceSpec {
    finalizers: "finalizers",
});
msg!(k8s_pb::api::core::v1::NamespaceStatus {
    phase: "phase",
    conditions: "conditions",
});
msg!(k8s_pb::api::core::v1::NfsVolumeSource {
    server: "server" keep,
    path: "path" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::NodeAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});
msg!(k8s_pb::api::core::v1::NodeSelector {
    node_selector_terms: "nodeSelectorTerms",
});
msg!(k8s_pb::api::core::v1::NodeSelectorRequirement {
    key: "key" keep,
    operator: "operator" keep,
    values: "values",
});
msg!(k8s_pb::api::core::v1::NodeSelectorTerm {
    match_expressions: "matchExpressions",
    match_fields: "matchFields",
});
msg!(k8s_pb::api::core::v1::ObjectFieldSelector {
    api_version: "apiVersion",
    field_path: "fieldPath" keep,
});
msg!(k8s_pb::api::core::v1::ObjectReference {
    kind: "kind",
    namespace: "namespace",
    name: "name",
    uid: "uid",
    api_version: "apiVersion",
    resource_version: "resourceVersion",
    field_path: "fieldPath",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaim {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_probe_time: "lastProbeTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimSpec {
    access_modes: "accessModes",
    selector: "selector",
    resources: "resources",
    volume_name: "volumeName",
    storage_class_name: "storageClassName" keep,
    volume_mode: "volumeMode" keep,
    data_source: "dataSource",
    data_source_ref: "dataSourceRef",
    volume_attributes_class_name: "volumeAttributesClassName" keep,
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimStatus {
    phase: "phase",
    access_modes: "accessModes",
    capacity: "capacity",
    conditions: "conditions",
    allocated_resources: "allocatedResources",
    allocated_resource_statuses: "allocatedResourceStatuses",
    current_volume_attributes_class_name: "currentVolumeAttributesClassName" keep,
    modify_volume_status: "modifyVolumeStatus",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimTemplate {
    metadata: "metadata",
    spec: "spec",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimVolumeSource {
    claim_name: "claimName" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::PhotonPersistentDiskVolumeSource {
    pd_id: "pdID" keep,
    fs_type: "fsType",
});
msg!(k8s_pb::api::core::v1::Pod {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::core::v1::PodAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});
msg!(k8s_pb::api::core::v1::PodAffinityTerm {
    label_selector: "labelSelector",
    namespaces: "namespaces",
    topology_key: "topologyKey" keep,
    namespace_selector: "namespaceSelector",
    match_label_keys: "matchLabelKeys",
    mismatch_label_keys: "mismatchLabelKeys",
});
msg!(k8s_pb::api::core::v1::PodAntiAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});
msg!(k8s_pb::api::core::v1::PodCertificateProjection {
    signer_name: "signerName",
    key_type: "keyType",
    max_expiration_seconds: "maxExpirationSeconds" keep,
    credential_bundle_path: "credentialBundlePath",
    key_path: "keyPath",
    certificate_chain_path: "certificateChainPath",
    user_annotations: "userAnnotations",
});
msg!(k8s_pb::api::core::v1::PodCondition {
    r#type: "type" keep,
    observed_generation: "observedGeneration",
    status: "status" keep,
    last_probe_time: "lastProbeTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::core::v1::PodDnsConfig {
    nameservers: "nameservers",
    searches: "searches",
    options: "options",
});
msg!(k8s_pb::api::core::v1::PodDnsConfigOption {
    name: "name",
    value: "value" keep,
});
msg!(k8s_pb::api::core::v1::PodExtendedResourceClaimStatus {
    request_mappings: "requestMappings",
    resource_claim_name: "resourceClaimName" keep,
});
msg!(k8s_pb::api::core::v1::PodIp {
    ip: "ip" keep,
});
msg!(k8s_pb::api::core::v1::PodOs {
    name: "name" keep,
});
msg!(k8s_pb::api::core::v1::PodReadinessGate {
    condition_type: "conditionType" keep,
});
msg!(k8s_pb::api::core::v1::PodResourceClaim {
    name: "name" keep,
    resource_claim_name: "resourceClaimName" keep,
    resource_claim_template_name: "resourceClaimTemplateName" keep,
});
msg!(k8s_pb::api::core::v1::PodResourceClaimStatus {
    name: "name" keep,
    resource_claim_name: "resourceClaimName" keep,
});
msg!(k8s_pb::api::core::v1::PodSchedulingGate {
    name: "name" keep,
});
msg!(k8s_pb::api::core::v1::PodSecurityContext {
    se_linux_options: "seLinuxOptions",
    windows_options: "windowsOptions",
    run_as_user: "runAsUser" keep,
    run_as_group: "runAsGroup" keep,
    run_as_non_root: "runAsNonRoot" keep,
    supplemental_groups: "supplementalGroups",
    supplemental_groups_policy: "supplementalGroupsPolicy" keep,
    fs_group: "fsGroup" keep,
    sysctls: "sysctls",
    fs_group_change_policy: "fsGroupChangePolicy" keep,
    seccomp_profile: "seccompProfile",
    app_armor_profile: "appArmorProfile",
    se_linux_change_policy: "seLinuxChangePolicy" keep,
});
msg!(k8s_pb::api::core::v1::PodSpec {
    volumes: "volumes",
    init_containers: "initContainers",
    containers: "containers",
    ephemeral_containers: "ephemeralContainers",
    restart_policy: "restartPolicy",
    termination_grace_period_seconds: "terminationGracePeriodSeconds" keep,
    active_deadline_seconds: "activeDeadlineSeconds" keep,
    dns_policy: "dnsPolicy",
    node_selector: "nodeSelector",
    service_account_name: "serviceAccountName",
    service_account: "serviceAccount",
    automount_service_account_token: "automountServiceAccountToken" keep,
    node_name: "nodeName",
    host_network: "hostNetwork",
    host_pid: "hostPID",
    host_ipc: "hostIPC",
    share_process_namespace: "shareProcessNamespace" keep,
    security_context: "securityContext",
    image_pull_secrets: "imagePullSecrets",
    hostname: "hostname",
    subdomain: "subdomain",
    affinity: "affinity",
    scheduler_name: "schedulerName",
    tolerations: "tolerations",
    host_aliases: "hostAliases",
    priority_class_name: "priorityClassName",
    priority: "priority" keep,
    dns_config: "dnsConfig",
    readiness_gates: "readinessGates",
    runtime_class_name: "runtimeClassName" keep,
    enable_service_links: "enableServiceLinks" keep,
    preemption_policy: "preemptionPolicy" keep,
    overhead: "overhead",
    topology_spread_constraints: "topologySpreadConstraints",
    set_hostname_as_fqdn: "setHostnameAsFQDN" keep,
    os: "os",
    host_users: "hostUsers" keep,
    scheduling_gates: "schedulingGates",
    resource_claims: "resourceClaims",
    resources: "resources",
    hostname_override: "hostnameOverride" keep,
    workload_ref: "workloadRef",
});
msg!(k8s_pb::api::core::v1::PodStatus {
    observed_generation: "observedGeneration",
    phase: "phase",
    conditions: "conditions",
    message: "message",
    reason: "reason",
    nominated_node_name: "nominatedNodeName",
    host_ip: "hostIP",
    host_ips: "hostIPs",
    pod_ip: "podIP",
    pod_ips: "podIPs",
    start_time: "startTime",
    init_container_statuses: "initContainerStatuses",
    container_statuses: "containerStatuses",
    qos_class: "qosClass",
    ephemeral_container_statuses: "ephemeralContainerStatuses",
    resize: "resize",
    resource_claim_statuses: "resourceClaimStatuses",
    extended_resource_claim_status: "extendedResourceClaimStatus",
    allocated_resources: "allocatedResources",
    resources: "resources",
});
msg!(k8s_pb::api::core::v1::PodTemplateSpec {
    metadata: "metadata",
    spec: "spec",
});
msg!(k8s_pb::api::core::v1::PortStatus {
    port: "port" keep,
    protocol: "protocol" keep,
    error: "error" keep,
});
msg!(k8s_pb::api::core::v1::PortworxVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::PreferredSchedulingTerm {
    weight: "weight" keep,
    preference: "preference",
});
msg!(k8s_pb::api::core::v1::Probe {
    handler: "",
    initial_delay_seconds: "initialDelaySeconds",
    timeout_seconds: "timeoutSeconds",
    period_seconds: "periodSeconds",
    success_threshold: "successThreshold",
    failure_threshold: "failureThreshold",
    termination_grace_period_seconds: "terminationGracePeriodSeconds" keep,
});
msg!(k8s_pb::api::core::v1::ProbeHandler {
    exec: "exec",
    http_get: "httpGet",
    tcp_socket: "tcpSocket",
    grpc: "grpc",
});
msg!(k8s_pb::api::core::v1::ProjectedVolumeSource {
    sources: "sources",
    default_mode: "defaultMode" keep,
});
msg!(k8s_pb::api::core::v1::QuobyteVolumeSource {
    registry: "registry" keep,
    volume: "volume" keep,
    read_only: "readOnly",
    user: "user",
    group: "group",
    tenant: "tenant",
});
msg!(k8s_pb::api::core::v1::RbdVolumeSource {
    monitors: "monitors",
    image: "image" keep,
    fs_type: "fsType",
    pool: "pool",
    user: "user",
    keyring: "keyring",
    secret_ref: "secretRef",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::ResourceClaim {
    name: "name" keep,
    request: "request",
});
msg!(k8s_pb::api::core::v1::ResourceFieldSelector {
    container_name: "containerName",
    resource: "resource" keep,
    divisor: "divisor",
});
msg!(k8s_pb::api::core::v1::ResourceHealth {
    resource_id: "resourceID" keep,
    health: "health",
});
msg!(k8s_pb::api::core::v1::ResourceRequirements {
    limits: "limits",
    requests: "requests",
    claims: "claims",
});
msg!(k8s_pb::api::core::v1::ResourceStatus {
    name: "name" keep,
    resources: "resources",
});
msg!(k8s_pb::api::core::v1::ScaleIoVolumeSource {
    gateway: "gateway" keep,
    system: "system" keep,
    secret_ref: "secretRef",
    ssl_enabled: "sslEnabled",
    protection_domain: "protectionDomain",
    storage_pool: "storagePool",
    storage_mode: "storageMode",
    volume_name: "volumeName",
    fs_type: "fsType",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::SeLinuxOptions {
    user: "user",
    role: "role",
    r#type: "type",
    level: "level",
});
msg!(k8s_pb::api::core::v1::SeccompProfile {
    r#type: "type" keep,
    localhost_profile: "localhostProfile" keep,
});
msg!(k8s_pb::api::core::v1::Secret {
    metadata: "metadata",
    immutable: "immutable" keep,
    data: "data",
    string_data: "stringData",
    r#type: "type",
});
msg!(k8s_pb::api::core::v1::SecretEnvSource {
    local_object_reference: "",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::SecretKeySelector {
    local_object_reference: "",
    key: "key" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::SecretProjection {
    local_object_reference: "",
    items: "items",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::SecretVolumeSource {
    secret_name: "secretName",
    items: "items",
    default_mode: "defaultMode" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::SecurityContext {
    capabilities: "capabilities",
    privileged: "privileged" keep,
    se_linux_options: "seLinuxOptions",
    windows_options: "windowsOptions",
    run_as_user: "runAsUser" keep,
    run_as_group: "runAsGroup" keep,
    run_as_non_root: "runAsNonRoot" keep,
    read_only_root_filesystem: "readOnlyRootFilesystem" keep,
    allow_privilege_escalation: "allowPrivilegeEscalation" keep,
    proc_mount: "procMount" keep,
    seccomp_profile: "seccompProfile",
    app_armor_profile: "appArmorProfile",
});
msg!(k8s_pb::api::core::v1::Service {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::core::v1::ServiceAccount {
    metadata: "metadata",
    secrets: "secrets",
    image_pull_secrets: "imagePullSecrets",
    automount_service_account_token: "automountServiceAccountToken" keep,
});
msg!(k8s_pb::api::core::v1::ServiceAccountTokenProjection {
    audience: "audience",
    expiration_seconds: "expirationSeconds" keep,
    path: "path" keep,
});
msg!(k8s_pb::api::core::v1::ServicePort {
    name: "name",
    protocol: "protocol",
    app_protocol: "appProtocol" keep,
    port: "port" keep,
    target_port: "targetPort",
    node_port: "nodePort",
});
msg!(k8s_pb::api::core::v1::ServiceSpec {
    ports: "ports",
    selector: "selector",
    cluster_ip: "clusterIP",
    cluster_ips: "clusterIPs",
    r#type: "type",
    external_ips: "externalIPs",
    session_affinity: "sessionAffinity",
    load_balancer_ip: "loadBalancerIP",
    load_balancer_source_ranges: "loadBalancerSourceRanges",
    external_name: "externalName",
    external_traffic_policy: "externalTrafficPolicy",
    health_check_node_port: "healthCheckNodePort",
    publish_not_ready_addresses: "publishNotReadyAddresses",
    session_affinity_config: "sessionAffinityConfig",
    ip_families: "ipFamilies",
    ip_family_policy: "ipFamilyPolicy" keep,
    allocate_load_balancer_node_ports: "allocateLoadBalancerNodePorts" keep,
    load_balancer_class: "loadBalancerClass" keep,
    internal_traffic_policy: "internalTrafficPolicy" keep,
    traffic_distribution: "trafficDistribution" keep,
});
msg!(k8s_pb::api::core::v1::ServiceStatus {
    load_balancer: "loadBalancer",
    conditions: "conditions",
});
msg!(k8s_pb::api::core::v1::SessionAffinityConfig {
    client_ip: "clientIP",
});
msg!(k8s_pb::api::core::v1::SleepAction {
    seconds: "seconds" keep,
});
msg!(k8s_pb::api::core::v1::StorageOsVolumeSource {
    volume_name: "volumeName",
    volume_namespace: "volumeNamespace",
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef",
});
msg!(k8s_pb::api::core::v1::Sysctl {
    name: "name" keep,
    value: "value" keep,
});
msg!(k8s_pb::api::core::v1::TcpSocketAction {
    port: "port",
    host: "host",
});
msg!(k8s_pb::api::core::v1::Toleration {
    key: "key",
    operator: "operator",
    value: "value",
    effect: "effect",
    toleration_seconds: "tolerationSeconds" keep,
});
msg!(k8s_pb::api::core::v1::TopologySpreadConstraint {
    max_skew: "maxSkew" keep,
    topology_key: "topologyKey" keep,
    when_unsatisfiable: "whenUnsatisfiable" keep,
    label_selector: "labelSelector",
    min_domains: "minDomains" keep,
    node_affinity_policy: "nodeAffinityPolicy" keep,
    node_taints_policy: "nodeTaintsPolicy" keep,
    match_label_keys: "matchLabelKeys",
});
msg!(k8s_pb::api::core::v1::TypedLocalObjectReference {
    api_group: "apiGroup" keep,
    kind: "kind" keep,
    name: "name" keep,
});
msg!(k8s_pb::api::core::v1::TypedObjectReference {
    api_group: "apiGroup" keep,
    kind: "kind" keep,
    name: "name" keep,
    namespace: "namespace" keep,
});
msg!(k8s_pb::api::core::v1::Volume {
    name: "name" keep,
    volume_source: "",
});
msg!(k8s_pb::api::core::v1::VolumeDevice {
    name: "name" keep,
    device_path: "devicePath" keep,
});
msg!(k8s_pb::api::core::v1::VolumeMount {
    name: "name" keep,
    read_only: "readOnly",
    recursive_read_only: "recursiveReadOnly" keep,
    mount_path: "mountPath" keep,
    sub_path: "subPath",
    mount_propagation: "mountPropagation" keep,
    sub_path_expr: "subPathExpr",
});
msg!(k8s_pb::api::core::v1::VolumeMountStatus {
    name: "name" keep,
    mount_path: "mountPath" keep,
    read_only: "readOnly",
    recursive_read_only: "recursiveReadOnly" keep,
});
msg!(k8s_pb::api::core::v1::VolumeProjection {
    secret: "secret",
    downward_api: "downwardAPI",
    config_map: "configMap",
    service_account_token: "serviceAccountToken",
    cluster_trust_bundle: "clusterTrustBundle",
    pod_certificate: "podCertificate",
});
msg!(k8s_pb::api::core::v1::VolumeResourceRequirements {
    limits: "limits",
    requests: "requests",
});
msg!(k8s_pb::api::core::v1::VolumeSource {
    host_path: "hostPath",
    empty_dir: "emptyDir",
    gce_persistent_disk: "gcePersistentDisk",
    aws_elastic_block_store: "awsElasticBlockStore",
    git_repo: "gitRepo",
    secret: "secret",
    nfs: "nfs",
    iscsi: "iscsi",
    glusterfs: "glusterfs",
    persistent_volume_claim: "persistentVolumeClaim",
    rbd: "rbd",
    flex_volume: "flexVolume",
    cinder: "cinder",
    cephfs: "cephfs",
    flocker: "flocker",
    downward_api: "downwardAPI",
    fc: "fc",
    azure_file: "azureFile",
    config_map: "configMap",
    vsphere_volume: "vsphereVolume",
    quobyte: "quobyte",
    azure_disk: "azureDisk",
    photon_persistent_disk: "photonPersistentDisk",
    projected: "projected",
    portworx_volume: "portworxVolume",
    scale_io: "scaleIO",
    storageos: "storageos",
    csi: "csi",
    ephemeral: "ephemeral",
    image: "image",
});
msg!(k8s_pb::api::core::v1::VsphereVirtualDiskVolumeSource {
    volume_path: "volumePath" keep,
    fs_type: "fsType",
    storage_policy_name: "storagePolicyName",
    storage_policy_id: "storagePolicyID",
});
msg!(k8s_pb::api::core::v1::WeightedPodAffinityTerm {
    weight: "weight" keep,
    pod_affinity_term: "podAffinityTerm",
});
msg!(k8s_pb::api::core::v1::WindowsSecurityContextOptions {
    gmsa_credential_spec_name: "gmsaCredentialSpecName" keep,
    gmsa_credential_spec: "gmsaCredentialSpec" keep,
    run_as_user_name: "runAsUserName" keep,
    host_process: "hostProcess" keep,
});
msg!(k8s_pb::api::core::v1::WorkloadReference {
    name: "name",
    pod_group: "podGroup",
    pod_group_replica_key: "podGroupReplicaKey",
});
msg!(k8s_pb::api::networking::v1::HttpIngressPath {
    path: "path",
    path_type: "pathType" keep,
    backend: "backend",
});
msg!(k8s_pb::api::networking::v1::HttpIngressRuleValue { paths: "paths" });
msg!(k8s_pb::api::networking::v1::Ingress {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::networking::v1::IngressBackend {
    service: "service",
    resource: "resource",
});
msg!(k8s_pb::api::networking::v1::IngressLoadBalancerIngress {
    ip: "ip",
    hostname: "hostname",
    ports: "ports",
});
msg!(k8s_pb::api::networking::v1::IngressLoadBalancerStatus { ingress: "ingress" });
msg!(k8s_pb::api::networking::v1::IngressPortStatus {
    port: "port" keep,
    protocol: "protocol" keep,
    error: "error" keep,
});
msg!(k8s_pb::api::networking::v1::IngressRule {
    host: "host",
    ingress_rule_value: "",
});
msg!(k8s_pb::api::networking::v1::IngressRuleValue { http: "http" });
msg!(k8s_pb::api::networking::v1::IngressServiceBackend {
    name: "name" keep,
    port: "port",
});
msg!(k8s_pb::api::networking::v1::IngressSpec {
    ingress_class_name: "ingressClassName" keep,
    default_backend: "defaultBackend",
    tls: "tls",
    rules: "rules",
});
msg!(k8s_pb::api::networking::v1::IngressStatus {
    load_balancer: "loadBalancer",
});
msg!(k8s_pb::api::networking::v1::IngressTls {
    hosts: "hosts",
    secret_name: "secretName",
});
msg!(k8s_pb::api::networking::v1::ServiceBackendPort {
    name: "name",
    number: "number",
});
msg!(k8s_pb::api::policy::v1::PodDisruptionBudget {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::policy::v1::PodDisruptionBudgetSpec {
    min_available: "minAvailable",
    selector: "selector",
    max_unavailable: "maxUnavailable",
    unhealthy_pod_eviction_policy: "unhealthyPodEvictionPolicy" keep,
});
msg!(k8s_pb::api::policy::v1::PodDisruptionBudgetStatus {
    observed_generation: "observedGeneration",
    disrupted_pods: "disruptedPods",
    disruptions_allowed: "disruptionsAllowed" keep,
    current_healthy: "currentHealthy" keep,
    desired_healthy: "desiredHealthy" keep,
    expected_pods: "expectedPods" keep,
    conditions: "conditions",
});
msg!(k8s_pb::api::rbac::v1::AggregationRule {
    cluster_role_selectors: "clusterRoleSelectors",
});
msg!(k8s_pb::api::rbac::v1::ClusterRole {
    metadata: "metadata",
    rules: "rules",
    aggregation_rule: "aggregationRule",
});
msg!(k8s_pb::api::rbac::v1::ClusterRoleBinding {
    metadata: "metadata",
    subjects: "subjects",
    role_ref: "roleRef",
});
msg!(k8s_pb::api::rbac::v1::PolicyRule {
    verbs: "verbs",
    api_groups: "apiGroups",
    resources: "resources",
    resource_names: "resourceNames",
    non_resource_ur_ls: "nonResourceURLs",
});
msg!(k8s_pb::api::rbac::v1::Role {
    metadata: "metadata",
    rules: "rules",
});
msg!(k8s_pb::api::rbac::v1::RoleBinding {
    metadata: "metadata",
    subjects: "subjects",
    role_ref: "roleRef",
});
msg!(k8s_pb::api::rbac::v1::RoleRef {
    api_group: "apiGroup" keep,
    kind: "kind" keep,
    name: "name" keep,
});
msg!(k8s_pb::api::rbac::v1::Subject {
    kind: "kind" keep,
    api_group: "apiGroup",
    name: "name" keep,
    namespace: "namespace",
});
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
