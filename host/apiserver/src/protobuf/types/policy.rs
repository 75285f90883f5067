//! `policy/v1`: PodDisruptionBudgets.

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
