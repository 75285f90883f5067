//! `core/v1` pods: the Pod, its spec and status, containers, probes, scheduling and
//! security contexts (volume mounts included; the volumes themselves are in
//! `core_volume`).

msg!(k8s_pb::api::core::v1::Affinity {
    node_affinity: "nodeAffinity",
    pod_affinity: "podAffinity",
    pod_anti_affinity: "podAntiAffinity",
});
msg!(k8s_pb::api::core::v1::AppArmorProfile {
    r#type: "type" keep,
    localhost_profile: "localhostProfile" keep,
});
msg!(k8s_pb::api::core::v1::Capabilities {
    add: "add",
    drop: "drop",
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
msg!(k8s_pb::api::core::v1::ExecAction { command: "command" });
msg!(k8s_pb::api::core::v1::FileKeySelector {
    volume_name: "volumeName" keep,
    path: "path" keep,
    key: "key" keep,
    optional: "optional" keep,
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
msg!(k8s_pb::api::core::v1::SecretEnvSource {
    local_object_reference: "",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::SecretKeySelector {
    local_object_reference: "",
    key: "key" keep,
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
msg!(k8s_pb::api::core::v1::SleepAction {
    seconds: "seconds" keep,
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
