//! `coordination.k8s.io/v1`: Leases.

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
