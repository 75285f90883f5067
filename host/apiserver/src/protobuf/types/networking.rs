//! `networking.k8s.io/v1`: Ingresses.

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
