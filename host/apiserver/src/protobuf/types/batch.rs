//! `batch/v1`: Jobs and CronJobs.

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
