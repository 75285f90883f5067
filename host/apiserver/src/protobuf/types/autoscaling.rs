//! `autoscaling/v1` and `v2`: HorizontalPodAutoscalers (`kubectl autoscale` sends
//! them: v1 up to kubectl 1.32, v2 after).

msg!(k8s_pb::api::autoscaling::v1::CrossVersionObjectReference {
    kind: "kind" keep,
    name: "name" keep,
    api_version: "apiVersion",
});
msg!(k8s_pb::api::autoscaling::v1::HorizontalPodAutoscaler {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::autoscaling::v1::HorizontalPodAutoscalerSpec {
    scale_target_ref: "scaleTargetRef" keep,
    min_replicas: "minReplicas" keep,
    max_replicas: "maxReplicas" keep,
    target_cpu_utilization_percentage: "targetCPUUtilizationPercentage" keep,
});
msg!(k8s_pb::api::autoscaling::v1::HorizontalPodAutoscalerStatus {
    observed_generation: "observedGeneration" keep,
    last_scale_time: "lastScaleTime" keep,
    current_replicas: "currentReplicas" keep,
    desired_replicas: "desiredReplicas" keep,
    current_cpu_utilization_percentage: "currentCPUUtilizationPercentage" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ContainerResourceMetricSource {
    name: "name" keep,
    target: "target" keep,
    container: "container" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ContainerResourceMetricStatus {
    name: "name" keep,
    current: "current" keep,
    container: "container" keep,
});
msg!(k8s_pb::api::autoscaling::v2::CrossVersionObjectReference {
    kind: "kind" keep,
    name: "name" keep,
    api_version: "apiVersion",
});
msg!(k8s_pb::api::autoscaling::v2::ExternalMetricSource {
    metric: "metric" keep,
    target: "target" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ExternalMetricStatus {
    metric: "metric" keep,
    current: "current" keep,
});
msg!(k8s_pb::api::autoscaling::v2::HpaScalingPolicy {
    r#type: "type" keep,
    value: "value" keep,
    period_seconds: "periodSeconds" keep,
});
msg!(k8s_pb::api::autoscaling::v2::HpaScalingRules {
    stabilization_window_seconds: "stabilizationWindowSeconds" keep,
    select_policy: "selectPolicy" keep,
    policies: "policies",
    tolerance: "tolerance" keep,
});
msg!(k8s_pb::api::autoscaling::v2::HorizontalPodAutoscaler {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::autoscaling::v2::HorizontalPodAutoscalerBehavior {
    scale_up: "scaleUp" keep,
    scale_down: "scaleDown" keep,
});
msg!(k8s_pb::api::autoscaling::v2::HorizontalPodAutoscalerCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::autoscaling::v2::HorizontalPodAutoscalerSpec {
    scale_target_ref: "scaleTargetRef" keep,
    min_replicas: "minReplicas" keep,
    max_replicas: "maxReplicas" keep,
    metrics: "metrics",
    behavior: "behavior" keep,
});
msg!(k8s_pb::api::autoscaling::v2::HorizontalPodAutoscalerStatus {
    observed_generation: "observedGeneration" keep,
    last_scale_time: "lastScaleTime" keep,
    current_replicas: "currentReplicas",
    desired_replicas: "desiredReplicas" keep,
    current_metrics: "currentMetrics" keep,
    conditions: "conditions",
});
msg!(k8s_pb::api::autoscaling::v2::MetricIdentifier {
    name: "name" keep,
    selector: "selector" keep,
});
msg!(k8s_pb::api::autoscaling::v2::MetricSpec {
    r#type: "type" keep,
    object: "object" keep,
    pods: "pods" keep,
    resource: "resource" keep,
    container_resource: "containerResource" keep,
    external: "external" keep,
});
msg!(k8s_pb::api::autoscaling::v2::MetricStatus {
    r#type: "type" keep,
    object: "object" keep,
    pods: "pods" keep,
    resource: "resource" keep,
    container_resource: "containerResource" keep,
    external: "external" keep,
});
msg!(k8s_pb::api::autoscaling::v2::MetricTarget {
    r#type: "type" keep,
    value: "value" keep,
    average_value: "averageValue" keep,
    average_utilization: "averageUtilization" keep,
});
msg!(k8s_pb::api::autoscaling::v2::MetricValueStatus {
    value: "value" keep,
    average_value: "averageValue" keep,
    average_utilization: "averageUtilization" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ObjectMetricSource {
    described_object: "describedObject" keep,
    target: "target" keep,
    metric: "metric" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ObjectMetricStatus {
    metric: "metric" keep,
    current: "current" keep,
    described_object: "describedObject" keep,
});
msg!(k8s_pb::api::autoscaling::v2::PodsMetricSource {
    metric: "metric" keep,
    target: "target" keep,
});
msg!(k8s_pb::api::autoscaling::v2::PodsMetricStatus {
    metric: "metric" keep,
    current: "current" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ResourceMetricSource {
    name: "name" keep,
    target: "target" keep,
});
msg!(k8s_pb::api::autoscaling::v2::ResourceMetricStatus {
    name: "name" keep,
    current: "current" keep,
});
