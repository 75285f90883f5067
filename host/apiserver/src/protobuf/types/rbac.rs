//! `rbac.authorization.k8s.io/v1`: Roles, ClusterRoles and their bindings.

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
