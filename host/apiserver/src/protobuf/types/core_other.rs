//! `core/v1` (the legacy group) apart from pods and volumes: ConfigMaps, Secrets,
//! Services, Endpoints, Events, Namespaces, ServiceAccounts, ResourceQuotas,
//! LimitRanges and the references they share.

msg!(k8s_pb::api::core::v1::ClientIpConfig {
    timeout_seconds: "timeoutSeconds" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMap {
    metadata: "metadata",
    immutable: "immutable" keep,
    data: "data",
    binary_data: "binaryData",
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
msg!(k8s_pb::api::core::v1::LimitRange {
    metadata: "metadata",
    spec: "spec",
});
msg!(k8s_pb::api::core::v1::LimitRangeItem {
    r#type: "type" keep,
    max: "max",
    min: "min",
    default: "default",
    default_request: "defaultRequest",
    max_limit_request_ratio: "maxLimitRequestRatio",
});
msg!(k8s_pb::api::core::v1::LimitRangeSpec {
    limits: "limits" keep,
});
msg!(k8s_pb::api::core::v1::LoadBalancerIngress {
    ip: "ip",
    hostname: "hostname",
    ip_mode: "ipMode" keep,
    ports: "ports",
});
msg!(k8s_pb::api::core::v1::LoadBalancerStatus { ingress: "ingress" });
msg!(k8s_pb::api::core::v1::LocalObjectReference { name: "name" });
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
msg!(k8s_pb::api::core::v1::ObjectReference {
    kind: "kind",
    namespace: "namespace",
    name: "name",
    uid: "uid",
    api_version: "apiVersion",
    resource_version: "resourceVersion",
    field_path: "fieldPath",
});
msg!(k8s_pb::api::core::v1::PortStatus {
    port: "port" keep,
    protocol: "protocol" keep,
    error: "error" keep,
});
msg!(k8s_pb::api::core::v1::ResourceQuota {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::core::v1::ResourceQuotaSpec {
    hard: "hard",
    scopes: "scopes",
    scope_selector: "scopeSelector",
});
msg!(k8s_pb::api::core::v1::ResourceQuotaStatus {
    hard: "hard",
    used: "used",
});
msg!(k8s_pb::api::core::v1::ScopeSelector {
    match_expressions: "matchExpressions",
});
msg!(k8s_pb::api::core::v1::ScopedResourceSelectorRequirement {
    scope_name: "scopeName" keep,
    operator: "operator" keep,
    values: "values",
});
msg!(k8s_pb::api::core::v1::Secret {
    metadata: "metadata",
    immutable: "immutable" keep,
    data: "data",
    string_data: "stringData",
    r#type: "type",
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
