//! The kind resolution model: what a kind or resource argument is once the cluster (or,
//! offline, the best guess) says which resource serves it. `kubewasm run` resolves through
//! discovery; `kubewasm test` and `kubewasm rbac` without a cluster use [`guess`]. Both
//! produce a [`KindInfo`], so the rest of the pipeline never knows which it was.

use std::any::TypeId;
use std::future::Future;

use crate::resource::{ResourceKey, ResourceRef, TypeRef};

/// A kind bound to the resource that serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KindInfo {
    /// API group, `""` for core.
    pub group: String,
    /// Served version.
    pub version: String,
    /// Kind, e.g. `MongoDB`.
    pub kind: String,
    /// Plural resource name, e.g. `mongodb` (whatever the CRD says, not a guess).
    pub plural: String,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Whether it has a `status` subresource.
    pub has_status: bool,
    /// True when this came from [`guess`], not from a cluster.
    pub guessed: bool,
}

impl KindInfo {
    /// `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Its kind.
    pub fn type_ref(&self) -> TypeRef {
        TypeRef::new(self.api_version(), self.kind.clone())
    }

    /// Its resource's identity.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            group: self.group.clone(),
            version: self.version.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// Why a kind could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The cluster does not serve it (yet): a CRD not installed, a typo.
    #[error("{0} is not served by the API server")]
    NotServed(String),
    /// Resolution itself failed (the API server unreachable, a 5xx): may work later.
    #[error("resolving {what}: {source}")]
    Unavailable {
        /// What was being resolved.
        what: String,
        /// The underlying failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Something that resolves kinds: discovery against a cluster, or offline (a test case's
/// objects, then [`guess`]).
pub trait Resolver: Sync {
    /// Resolve a kind.
    fn resolve_kind(
        &self,
        t: &TypeRef,
    ) -> impl Future<Output = Result<KindInfo, ResolveError>> + Send;
}

/// A built-in kind as k8s-openapi describes it.
struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
}

fn builtin<T: k8s_openapi::Resource>() -> Builtin
where
    T::Scope: 'static,
{
    Builtin {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: TypeId::of::<T::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>(),
    }
}

/// The built-in kinds a plugin is likely to watch, read or write, with their exact plurals
/// and scopes (taken from k8s-openapi, so they are not guesses).
fn builtins() -> &'static [Builtin] {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v2 as autoscaling,
        batch::v1 as batch, certificates::v1 as certificates, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery, events::v1 as events,
        networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac,
        scheduling::v1 as scheduling, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    static TABLE: std::sync::OnceLock<Vec<Builtin>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            builtin::<core::ConfigMap>(),
            builtin::<core::Endpoints>(),
            builtin::<core::Event>(),
            builtin::<core::LimitRange>(),
            builtin::<core::Namespace>(),
            builtin::<core::Node>(),
            builtin::<core::PersistentVolume>(),
            builtin::<core::PersistentVolumeClaim>(),
            builtin::<core::Pod>(),
            builtin::<core::PodTemplate>(),
            builtin::<core::ReplicationController>(),
            builtin::<core::ResourceQuota>(),
            builtin::<core::Secret>(),
            builtin::<core::Service>(),
            builtin::<core::ServiceAccount>(),
            builtin::<apps::ControllerRevision>(),
            builtin::<apps::DaemonSet>(),
            builtin::<apps::Deployment>(),
            builtin::<apps::ReplicaSet>(),
            builtin::<apps::StatefulSet>(),
            builtin::<autoscaling::HorizontalPodAutoscaler>(),
            builtin::<batch::CronJob>(),
            builtin::<batch::Job>(),
            builtin::<certificates::CertificateSigningRequest>(),
            builtin::<coordination::Lease>(),
            builtin::<discovery::EndpointSlice>(),
            builtin::<events::Event>(),
            builtin::<networking::Ingress>(),
            builtin::<networking::IngressClass>(),
            builtin::<networking::NetworkPolicy>(),
            builtin::<node::RuntimeClass>(),
            builtin::<policy::PodDisruptionBudget>(),
            builtin::<rbac::ClusterRole>(),
            builtin::<rbac::ClusterRoleBinding>(),
            builtin::<rbac::Role>(),
            builtin::<rbac::RoleBinding>(),
            builtin::<scheduling::PriorityClass>(),
            builtin::<storage::CSIDriver>(),
            builtin::<storage::CSINode>(),
            builtin::<storage::StorageClass>(),
            builtin::<storage::VolumeAttachment>(),
            builtin::<admission::MutatingWebhookConfiguration>(),
            builtin::<admission::ValidatingWebhookConfiguration>(),
            builtin::<admission::ValidatingAdmissionPolicy>(),
            builtin::<admission::ValidatingAdmissionPolicyBinding>(),
            builtin::<apiextensions::CustomResourceDefinition>(),
            builtin::<apiregistration::APIService>(),
        ]
    })
}

/// What a resolver is asked for a grant's group and kind: a grant names a group, not a
/// version, so the kind in whichever version the group serves (`v1` for the core group).
pub fn grant_ref(group: &str, kind: &str) -> ResourceRef {
    let api_version = if group.is_empty() {
        "v1".to_string()
    } else {
        format!("{group}/*")
    };
    ResourceRef::Kind(TypeRef::new(api_version, kind))
}

/// The offline guess of a kind's or resource argument's resource. Built-in kinds come
/// from a table (exact plural and scope); anything else gets English plural rules and is
/// assumed namespaced. Marked `guessed` unless the table knew it.
pub fn guess(r: &ResourceRef) -> KindInfo {
    match r {
        ResourceRef::Kind(t) => {
            let (group, version) = (t.group(), t.version());
            if let Some(b) = builtins()
                .iter()
                .find(|b| b.group == group && b.kind == t.kind)
            {
                return KindInfo {
                    group: group.to_string(),
                    version: version.to_string(),
                    kind: t.kind.clone(),
                    plural: b.plural.to_string(),
                    namespaced: b.namespaced,
                    has_status: true,
                    guessed: false,
                };
            }
            KindInfo {
                group: group.to_string(),
                version: version.to_string(),
                kind: t.kind.clone(),
                plural: guess_plural(&t.kind),
                namespaced: true,
                has_status: true,
                guessed: true,
            }
        }
        ResourceRef::Resource(arg) => {
            let known = builtins()
                .iter()
                .find(|b| b.group == arg.group && b.plural == arg.plural);
            KindInfo {
                group: arg.group.clone(),
                version: arg
                    .version
                    .clone()
                    .or_else(|| known.map(|b| b.version.to_string()))
                    .unwrap_or_else(|| "v1".to_string()),
                kind: known.map(|b| b.kind.to_string()).unwrap_or_default(),
                plural: arg.plural.clone(),
                namespaced: known.is_none_or(|b| b.namespaced),
                has_status: true,
                guessed: known.is_none(),
            }
        }
    }
}

/// The plural of a kind by English rules: lowercase, `es` after `s`, `x`, `ch`, `sh`;
/// `ies` for a consonant + `y`; otherwise `s` (`Gateway` → `gateways`,
/// `NetworkPolicy` → `networkpolicies`, `Ingress` → `ingresses`). CRDs may choose any
/// plural (MongoDB's is `mongodb`), which is why a cluster's answer always wins.
pub(crate) fn guess_plural(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else if let Some(stem) = k.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{k}s")
    }
}

/// Whether a resource argument names the same resource as a kind, judged offline (the
/// kind's guessed or built-in plural against the argument's plural).
pub fn resource_names_kind(arg: &crate::resource::ResourceArg, t: &TypeRef) -> bool {
    let k = guess(&ResourceRef::Kind(t.clone()));
    arg.group == k.group
        && arg.version.as_deref().is_none_or(|v| v == k.version)
        && arg.plural == k.plural
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ResourceArg;

    #[test]
    fn plural_guesses() {
        for (kind, plural) in [
            ("SeldonDeployment", "seldondeployments"),
            ("Ingress", "ingresses"),
            ("NetworkPolicy", "networkpolicies"),
            ("Gateway", "gateways"),
            ("Box", "boxes"),
            ("MongoDB", "mongodbs"),
        ] {
            assert_eq!(guess_plural(kind), plural, "{kind}");
        }
    }

    #[test]
    fn builtins_are_exact() {
        let g = |av: &str, k: &str| guess(&ResourceRef::Kind(TypeRef::new(av, k)));
        let ep = g("v1", "Endpoints");
        assert_eq!(
            (ep.plural.as_str(), ep.namespaced, ep.guessed),
            ("endpoints", true, false)
        );
        let ns = g("v1", "Namespace");
        assert_eq!((ns.plural.as_str(), ns.namespaced), ("namespaces", false));
        let cr = g("rbac.authorization.k8s.io/v1", "ClusterRole");
        assert!(!cr.namespaced && !cr.guessed);
        let crd = g("mongodb.com/v1", "MongoDB");
        assert!(crd.guessed && crd.namespaced);
        assert_eq!(crd.api_version(), "mongodb.com/v1");
    }

    #[test]
    fn resource_arguments() {
        let r = ResourceArg::parse("seldondeployments.v1.machinelearning.seldon.io").unwrap();
        assert!(resource_names_kind(
            &r,
            &TypeRef::new("machinelearning.seldon.io/v1", "SeldonDeployment")
        ));
        assert!(!resource_names_kind(
            &r,
            &TypeRef::new("machinelearning.seldon.io/v2", "SeldonDeployment")
        ));
        let cm = guess(&ResourceRef::Resource(
            ResourceArg::parse("configmaps").unwrap(),
        ));
        assert_eq!(
            (cm.kind.as_str(), cm.version.as_str(), cm.guessed),
            ("ConfigMap", "v1", false)
        );
        let nodes = guess(&ResourceRef::Resource(ResourceArg::parse("nodes").unwrap()));
        assert!(!nodes.namespaced);
    }
}
