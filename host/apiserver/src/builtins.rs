//! The built-in resources: every resource kube-apiserver 1.36 serves by default.
//!
//! Group, version, kind, plural and scope come from k8s-openapi's `Resource` impls (the
//! generated bindings of the upstream OpenAPI), so none of them is typed by hand here.
//! What k8s-openapi does not carry (short names, categories, subresources, the verbs of
//! the virtual kinds, whether `metadata.generation` is kept) is our own small table,
//! read once off a real 1.36 control plane's discovery (`tests/data/builtins-1.36.json`
//! holds that discovery; `tests/builtins.rs` compares this table with it both ways).

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
    authorization::v1 as authz, autoscaling, batch::v1 as batch, certificates::v1 as certs,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as disco,
    events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as net, node::v1 as node,
    policy::v1 as policy, rbac::v1 as rbac, resource::v1 as dra, scheduling::v1 as scheduling,
    storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};

/// Which verbs a resource has. Of the virtual kinds, SelfSubjectAccessReview,
/// SubjectAccessReview, SelfSubjectReview and TokenReview are answered by the server
/// (`review`); the others are refused with 405, saying they are not emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verbs {
    /// Stored: create, delete, deletecollection (not namespaces), get, list, patch,
    /// update, watch.
    Crud,
    /// Read-only (`componentstatuses`: get and list).
    Read,
    /// A virtual kind that is only created and stored nowhere (reviews, `bindings`).
    Create,
}

/// One built-in resource in one version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Builtin {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) extra: Extra,
}

/// What k8s-openapi does not say about a resource.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extra {
    /// Short names, as discovery lists them.
    pub(crate) short: &'static [&'static str],
    /// Categories (`all`, `api-extensions`).
    pub(crate) categories: &'static [&'static str],
    /// Verbs of the main resource.
    pub(crate) verbs: Verbs,
    /// Has a `status` subresource.
    pub(crate) status: bool,
    /// Keeps `metadata.generation` (its registry strategy sets it).
    pub(crate) generation: bool,
    /// Has a `scale` subresource (`autoscaling/v1` Scale).
    pub(crate) scale: bool,
    /// Subresources kube-apiserver has that this server does not emulate (they need a
    /// node, a controller or a token issuer); not listed in discovery here.
    pub(crate) unemulated: &'static [&'static str],
    /// DELETE answers the object even once it is gone (`ReturnDeletedObject` in its
    /// kube-apiserver registry).
    pub(crate) returns_deleted: bool,
}

const D: Extra = Extra {
    short: &[],
    categories: &[],
    verbs: Verbs::Crud,
    status: false,
    generation: false,
    scale: false,
    unemulated: &[],
    returns_deleted: false,
};
/// `D` for a resource whose DELETE answers the object.
const RD: Extra = Extra {
    returns_deleted: true,
    ..D
};

/// Namespaced or not, from k8s-openapi's scope marker type.
pub(crate) trait Scope {
    const NAMESPACED: bool;
}

impl Scope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

const fn of<T: Resource>(extra: Extra) -> Builtin
where
    T::Scope: Scope,
{
    Builtin {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: <T::Scope as Scope>::NAMESPACED,
        extra,
    }
}

const ALL: &[&str] = &["all"];
const API_EXT: &[&str] = &["api-extensions"];
const CREATE: Extra = Extra {
    verbs: Verbs::Create,
    ..D
};
const STATUS: Extra = Extra { status: true, ..D };
const GEN: Extra = Extra {
    generation: true,
    ..D
};
const WORKLOAD: Extra = Extra {
    categories: ALL,
    status: true,
    generation: true,
    ..D
};
const ADMISSION: Extra = Extra {
    categories: API_EXT,
    generation: true,
    ..D
};

/// Every built-in resource, groups in kube-apiserver's discovery order; a resource
/// served in several versions is listed once per version, preferred version first.
pub(crate) const BUILTINS: &[Builtin] = &[
    of::<core::Binding>(CREATE),
    of::<core::ComponentStatus>(Extra {
        short: &["cs"],
        verbs: Verbs::Read,
        ..D
    }),
    of::<core::ConfigMap>(Extra {
        short: &["cm"],
        ..D
    }),
    of::<core::Endpoints>(Extra {
        short: &["ep"],
        ..D
    }),
    of::<core::Event>(Extra {
        short: &["ev"],
        ..D
    }),
    of::<core::LimitRange>(Extra {
        short: &["limits"],
        ..D
    }),
    of::<core::Namespace>(Extra {
        short: &["ns"],
        status: true,
        unemulated: &["finalize"],
        ..RD
    }),
    of::<core::Node>(Extra {
        short: &["no"],
        status: true,
        unemulated: &["proxy"],
        ..D
    }),
    of::<core::PersistentVolumeClaim>(Extra {
        short: &["pvc"],
        status: true,
        ..RD
    }),
    of::<core::PersistentVolume>(Extra {
        short: &["pv"],
        status: true,
        ..RD
    }),
    // kube-apiserver keeps a Pod's generation (1.33+); kept off here as before, see
    // the README.
    of::<core::Pod>(Extra {
        short: &["po"],
        categories: ALL,
        status: true,
        unemulated: &[
            "attach",
            "binding",
            "ephemeralcontainers",
            "eviction",
            "exec",
            "log",
            "portforward",
            "proxy",
            "resize",
        ],
        ..RD
    }),
    of::<core::PodTemplate>(Extra {
        generation: true,
        ..RD
    }),
    of::<core::ReplicationController>(Extra {
        short: &["rc"],
        scale: true,
        ..WORKLOAD
    }),
    of::<core::ResourceQuota>(Extra {
        short: &["quota"],
        status: true,
        ..RD
    }),
    of::<core::Secret>(D),
    of::<core::ServiceAccount>(Extra {
        short: &["sa"],
        unemulated: &["token"],
        ..RD
    }),
    of::<core::Service>(Extra {
        short: &["svc"],
        categories: ALL,
        status: true,
        unemulated: &["proxy"],
        ..RD
    }),
    of::<apireg::APIService>(Extra {
        categories: API_EXT,
        status: true,
        ..D
    }),
    of::<apps::ControllerRevision>(D),
    of::<apps::DaemonSet>(Extra {
        short: &["ds"],
        ..WORKLOAD
    }),
    of::<apps::Deployment>(Extra {
        short: &["deploy"],
        scale: true,
        ..WORKLOAD
    }),
    of::<apps::ReplicaSet>(Extra {
        short: &["rs"],
        scale: true,
        ..WORKLOAD
    }),
    of::<apps::StatefulSet>(Extra {
        short: &["sts"],
        scale: true,
        ..WORKLOAD
    }),
    of::<events::Event>(Extra {
        short: &["ev"],
        ..D
    }),
    of::<authn::SelfSubjectReview>(CREATE),
    of::<authn::TokenReview>(CREATE),
    of::<authz::LocalSubjectAccessReview>(CREATE),
    of::<authz::SelfSubjectAccessReview>(CREATE),
    of::<authz::SelfSubjectRulesReview>(CREATE),
    of::<authz::SubjectAccessReview>(CREATE),
    of::<autoscaling::v2::HorizontalPodAutoscaler>(Extra {
        short: &["hpa"],
        categories: ALL,
        status: true,
        ..D
    }),
    of::<autoscaling::v1::HorizontalPodAutoscaler>(Extra {
        short: &["hpa"],
        categories: ALL,
        status: true,
        ..D
    }),
    of::<batch::CronJob>(Extra {
        short: &["cj"],
        ..WORKLOAD
    }),
    of::<batch::Job>(WORKLOAD),
    of::<certs::CertificateSigningRequest>(Extra {
        short: &["csr"],
        status: true,
        unemulated: &["approval"],
        ..D
    }),
    of::<net::IngressClass>(GEN),
    of::<net::Ingress>(Extra {
        short: &["ing"],
        status: true,
        generation: true,
        ..D
    }),
    of::<net::IPAddress>(Extra {
        short: &["ip"],
        ..D
    }),
    of::<net::NetworkPolicy>(Extra {
        short: &["netpol"],
        generation: true,
        ..D
    }),
    of::<net::ServiceCIDR>(STATUS),
    of::<policy::PodDisruptionBudget>(Extra {
        short: &["pdb"],
        status: true,
        generation: true,
        ..D
    }),
    of::<rbac::ClusterRoleBinding>(D),
    of::<rbac::ClusterRole>(D),
    of::<rbac::RoleBinding>(D),
    of::<rbac::Role>(D),
    of::<storage::CSIDriver>(RD),
    of::<storage::CSINode>(RD),
    of::<storage::CSIStorageCapacity>(D),
    of::<storage::StorageClass>(Extra {
        short: &["sc"],
        ..RD
    }),
    of::<storage::VolumeAttachment>(Extra { status: true, ..RD }),
    of::<storage::VolumeAttributesClass>(Extra {
        short: &["vac"],
        ..RD
    }),
    of::<admission::MutatingAdmissionPolicy>(ADMISSION),
    of::<admission::MutatingAdmissionPolicyBinding>(ADMISSION),
    of::<admission::MutatingWebhookConfiguration>(ADMISSION),
    of::<admission::ValidatingAdmissionPolicy>(Extra {
        status: true,
        ..ADMISSION
    }),
    of::<admission::ValidatingAdmissionPolicyBinding>(ADMISSION),
    of::<admission::ValidatingWebhookConfiguration>(ADMISSION),
    of::<apiext::CustomResourceDefinition>(Extra {
        short: &["crd", "crds"],
        categories: API_EXT,
        status: true,
        generation: true,
        ..D
    }),
    of::<scheduling::PriorityClass>(Extra {
        short: &["pc"],
        generation: true,
        ..D
    }),
    of::<coordination::Lease>(D),
    of::<node::RuntimeClass>(D),
    of::<disco::EndpointSlice>(GEN),
    of::<dra::DeviceClass>(Extra {
        generation: true,
        ..RD
    }),
    of::<dra::ResourceClaim>(Extra { status: true, ..RD }),
    of::<dra::ResourceClaimTemplate>(RD),
    of::<dra::ResourceSlice>(Extra {
        generation: true,
        ..RD
    }),
    of::<flowcontrol::FlowSchema>(Extra {
        status: true,
        generation: true,
        ..D
    }),
    of::<flowcontrol::PriorityLevelConfiguration>(Extra {
        status: true,
        generation: true,
        ..D
    }),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The backticked names of the README line starting with `- **{label}**`.
    fn readme_list(label: &str) -> BTreeSet<String> {
        let readme = include_str!("../README.md");
        let start = readme
            .find(&format!("- **{label}**"))
            .unwrap_or_else(|| panic!("README has no `{label}` item"));
        let item = &readme[start + 2..];
        let item = &item[..item.find("\n- ").unwrap_or(item.len())];
        item.split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect()
    }

    #[test]
    fn readme_lists_what_the_table_does_not_emulate() {
        let subs: BTreeSet<String> = BUILTINS
            .iter()
            .flat_map(|b| {
                b.extra
                    .unemulated
                    .iter()
                    .map(|s| format!("{}/{s}", b.plural))
            })
            .collect();
        assert_eq!(readme_list("Subresources not emulated"), subs);
        // The virtual kinds `http` answers itself are routed before the store.
        let answered = [
            "selfsubjectaccessreviews",
            "subjectaccessreviews",
            "selfsubjectreviews",
            "tokenreviews",
        ];
        let virtual_kinds: BTreeSet<String> = BUILTINS
            .iter()
            .filter(|b| b.extra.verbs == Verbs::Create && !answered.contains(&b.plural))
            .map(|b| b.plural.to_string())
            .collect();
        assert_eq!(readme_list("Virtual kinds not emulated"), virtual_kinds);
    }

    #[test]
    fn table_comes_from_k8s_openapi() {
        let quota = BUILTINS
            .iter()
            .find(|b| b.kind == "ResourceQuota")
            .expect("ResourceQuota in the table");
        assert_eq!(
            (quota.group, quota.version, quota.plural, quota.namespaced),
            ("", "v1", "resourcequotas", true)
        );
        let pc = BUILTINS
            .iter()
            .find(|b| b.kind == "PriorityClass")
            .expect("PriorityClass in the table");
        assert_eq!(
            (pc.group, pc.plural, pc.namespaced),
            ("scheduling.k8s.io", "priorityclasses", false)
        );
    }
}
