//! `scheduling.k8s.io/v1`: PriorityClasses.

msg!(k8s_pb::api::scheduling::v1::PriorityClass {
    metadata: "metadata",
    value: "value" keep,
    global_default: "globalDefault",
    description: "description",
    preemption_policy: "preemptionPolicy" keep,
});
