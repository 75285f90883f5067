//! The host's own permissions, asked of the API server before they are used.
//!
//! A watch the host's RBAC forbids fails with 403 at every relist and, before this, left
//! the host unready with nothing but the log to say why. Each part of the host declares
//! here what it is about to do ([`Access::require`]: the watch manager the list and watch
//! of each watched resource, the election its Lease, the Plugin objects their status), and
//! each rule not known yet is asked with a SelfSubjectAccessReview. The rules denied are
//! reported by name in `/readyz?verbose` and `/status` ([`Access::missing`]) and in one
//! error line per check (not per retry). Denied rules are asked again by
//! [`Access::recheck`] (the host does it periodically); a grant found there, or a rule
//! shown to work ([`Access::allowed`]), clears the report and wakes what backs off on a
//! 403 ([`Access::granted`]).
//!
//! A review that cannot be asked (an API server without the authorization API, a
//! transport error) proves nothing: logged once, nothing is reported missing.
//!
//! RBAC: `create` on `selfsubjectaccessreviews.authorization.k8s.io` (kube-apiserver's
//! default `system:basic-user` binding gives it to every authenticated user; `kubewasm
//! rbac` names it anyway).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

use kubewasm_core::sync::lock;

/// How long one review may take before it counts as not asked.
pub(crate) const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// One RBAC rule the host needs: a verb on a resource (`plugins/status` for a
/// subresource), cluster-wide or in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    /// The verb (`list`, `watch`, `get`, `create`, `update`, `patch`).
    pub verb: &'static str,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource, with its subresource after a `/`.
    pub resource: String,
    /// The namespace; None: cluster-wide.
    pub namespace: Option<String>,
    /// One object by name (a rule with `resourceNames`); None: any.
    pub name: Option<String>,
}

impl Rule {
    /// `verb` on `resource` of `group`, in `namespace` (None: cluster-wide).
    pub fn new(verb: &'static str, group: &str, resource: &str, namespace: Option<&str>) -> Rule {
        Rule {
            verb,
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            name: None,
        }
    }

    /// The rule for the object named `name` only.
    pub fn named(mut self, name: &str) -> Rule {
        self.name = Some(name.to_string());
        self
    }
}

/// `list configmaps cluster-wide`, `update leases.coordination.k8s.io in namespace kw`,
/// `patch plugins.kubewasm.dev/status cluster-wide`: what an RBAC rule must allow.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (plural, sub) = match self.resource.split_once('/') {
            Some((p, s)) => (p, Some(s)),
            None => (self.resource.as_str(), None),
        };
        write!(f, "{} {plural}", self.verb)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(sub) = sub {
            write!(f, "/{sub}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " named {name}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => f.write_str(" cluster-wide"),
        }
    }
}

/// A rule and why the host needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The rule.
    pub rule: Rule,
    /// What it is for, e.g. `the watch of v1/configmaps`.
    pub purpose: String,
    /// Whether the host cannot be ready without it (a watch never syncs, the Lease is
    /// never held); otherwise only a part of its work is lost (Plugin status).
    pub blocking: bool,
}

/// A rule the API server says the host lacks, as `/readyz?verbose` and `/status` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Missing {
    /// The rule, spelled as [`Rule`]'s `Display`.
    pub rule: String,
    /// The group of the resource (to match a plugin's resources).
    #[serde(skip)]
    pub group: String,
    /// The resource (plural) without subresource.
    #[serde(skip)]
    pub plural: String,
    /// What it is needed for (`; `-separated when several).
    pub needed_for: String,
    /// Whether it holds the host's readiness back.
    pub blocking: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Not asked yet.
    Unknown,
    Allowed,
    Denied,
    /// The review could not be asked; not reported.
    Unanswered,
}

#[derive(Debug)]
struct Entry {
    verdict: Verdict,
    /// Who needs it (a source per part of the host), and for what.
    purposes: BTreeMap<&'static str, BTreeSet<String>>,
    /// Blocking for some source.
    blocking: BTreeMap<&'static str, bool>,
}

/// What the host knows of its own permissions. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub(crate) struct Access {
    entries: Mutex<BTreeMap<Rule, Entry>>,
    /// Bumped each time a denied rule turns out granted.
    granted: watch::Sender<u64>,
}

impl Default for Access {
    fn default() -> Self {
        Access {
            entries: Mutex::new(BTreeMap::new()),
            granted: watch::Sender::new(0),
        }
    }
}

impl Access {
    /// Declare what part `source` of the host needs now (replacing what it declared
    /// before: rules nobody needs any more are forgotten), and ask the API server about
    /// each rule not known yet. The rules found denied are logged in one error line.
    pub(crate) async fn require(
        &self,
        client: &kube::Client,
        source: &'static str,
        needs: Vec<Need>,
    ) {
        let unknown: Vec<Rule> = {
            let mut entries = lock(&self.entries);
            for e in entries.values_mut() {
                e.purposes.remove(source);
                e.blocking.remove(source);
            }
            for n in needs {
                let e = entries.entry(n.rule).or_insert_with(|| Entry {
                    verdict: Verdict::Unknown,
                    purposes: BTreeMap::new(),
                    blocking: BTreeMap::new(),
                });
                e.purposes.entry(source).or_default().insert(n.purpose);
                let b = e.blocking.entry(source).or_insert(false);
                *b |= n.blocking;
            }
            entries.retain(|_, e| !e.purposes.is_empty());
            entries
                .iter()
                .filter(|(_, e)| e.verdict == Verdict::Unknown)
                .map(|(r, _)| r.clone())
                .collect()
        };
        if unknown.is_empty() {
            return;
        }
        let mut denied = Vec::new();
        let mut unanswered = Vec::new();
        for rule in unknown {
            let verdict = match review(client, Subject::Caller, &rule).await {
                Ok(true) => Verdict::Allowed,
                Ok(false) => Verdict::Denied,
                Err(e) => {
                    unanswered.push(format!("{rule}: {e}"));
                    Verdict::Unanswered
                }
            };
            if let Some(e) = lock(&self.entries).get_mut(&rule) {
                e.verdict = verdict;
            }
            if verdict == Verdict::Denied {
                denied.push(rule);
            }
        }
        if !unanswered.is_empty() {
            tracing::warn!(reviews = %unanswered.join("; "),
                "could not ask the API server whether the host may do what it needs (SelfSubjectAccessReview); the watches and writes will tell");
        }
        if !denied.is_empty() {
            let missing = self.describe(&denied);
            tracing::error!(needed_by = source, missing = %missing,
                "the host's RBAC does not allow what it needs; apply the RBAC `kubewasm rbac` prints for these plugins (or the deploy/ manifests), or fix the roles bound to the host's ServiceAccount");
        }
    }

    /// Ask again about every denied rule; the ones granted now are logged in one line,
    /// dropped from the report, and wake [`Access::granted`] subscribers.
    pub(crate) async fn recheck(&self, client: &kube::Client) {
        let denied: Vec<Rule> = lock(&self.entries)
            .iter()
            .filter(|(_, e)| e.verdict == Verdict::Denied)
            .map(|(r, _)| r.clone())
            .collect();
        let mut now_granted = Vec::new();
        for rule in denied {
            if let Ok(true) = review(client, Subject::Caller, &rule).await {
                now_granted.push(rule);
            }
        }
        self.mark_granted(&now_granted);
    }

    /// The rules in `rules` were shown to work (a watch synced): no longer missing.
    pub(crate) fn allowed(&self, rules: &[Rule]) {
        let was_denied: Vec<Rule> = {
            let mut entries = lock(&self.entries);
            rules
                .iter()
                .filter(|r| {
                    entries.get_mut(*r).is_some_and(|e| {
                        let denied = e.verdict == Verdict::Denied;
                        e.verdict = Verdict::Allowed;
                        denied
                    })
                })
                .cloned()
                .collect()
        };
        self.mark_granted(&was_denied);
    }

    /// Mark `rules` granted: logged in one line, and [`Access::granted`] woken.
    fn mark_granted(&self, rules: &[Rule]) {
        if rules.is_empty() {
            return;
        }
        {
            let mut entries = lock(&self.entries);
            for r in rules {
                if let Some(e) = entries.get_mut(r) {
                    e.verdict = Verdict::Allowed;
                }
            }
        }
        let granted: Vec<String> = rules.iter().map(ToString::to_string).collect();
        tracing::info!(granted = %granted.join(", "), "the host's RBAC now allows what was missing");
        self.granted.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes each time a rule denied before is found granted: a watch backing off on
    /// a 403 tries again at once.
    pub(crate) fn granted(&self) -> watch::Receiver<u64> {
        self.granted.subscribe()
    }

    /// Whether some rule is still to be asked again.
    pub(crate) fn any_denied(&self) -> bool {
        lock(&self.entries)
            .values()
            .any(|e| e.verdict == Verdict::Denied)
    }

    /// The rules the API server said the host lacks, in rule order.
    pub(crate) fn missing(&self) -> Vec<Missing> {
        lock(&self.entries)
            .iter()
            .filter(|(_, e)| e.verdict == Verdict::Denied)
            .map(|(r, e)| Missing {
                rule: r.to_string(),
                group: r.group.clone(),
                plural: r.resource.split('/').next().unwrap_or_default().to_string(),
                needed_for: purposes(e),
                blocking: e.blocking.values().any(|b| *b),
            })
            .collect()
    }

    /// `rule (for what), rule (for what)`.
    fn describe(&self, rules: &[Rule]) -> String {
        let entries = lock(&self.entries);
        rules
            .iter()
            .map(|r| match entries.get(r) {
                Some(e) => format!("{r} (for {})", purposes(e)),
                None => r.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn purposes(e: &Entry) -> String {
    e.purposes
        .values()
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whose access a review asks about.
#[derive(Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// The caller, the host itself (a SelfSubjectAccessReview).
    Caller,
    /// A ServiceAccount's user name and namespace, with the groups kube-apiserver gives
    /// a ServiceAccount (a SubjectAccessReview).
    Account { user: &'a str, namespace: &'a str },
}

/// Ask the API server whether `subject` may do `rule`, within [`REVIEW_TIMEOUT`]: the
/// one access review every check of the host and of the plugins' accounts goes through.
pub(crate) async fn review(
    client: &kube::Client,
    subject: Subject<'_>,
    rule: &Rule,
) -> Result<bool, String> {
    let (resource, subresource) = match rule.resource.split_once('/') {
        Some((r, s)) => (r.to_string(), Some(s.to_string())),
        None => (rule.resource.clone(), None),
    };
    let attributes = ResourceAttributes {
        namespace: rule.namespace.clone(),
        verb: Some(rule.verb.to_string()),
        group: Some(rule.group.clone()),
        resource: Some(resource),
        subresource,
        name: rule.name.clone(),
        ..Default::default()
    };
    let answer = match subject {
        Subject::Caller => {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(attributes),
                    ..Default::default()
                },
                ..Default::default()
            };
            let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
            bounded(api.create(&PostParams::default(), &review))
                .await
                .map(|a| a.status)
        }
        Subject::Account { user, namespace } => {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.to_string()),
                    groups: Some(vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{namespace}"),
                        "system:authenticated".into(),
                    ]),
                    resource_attributes: Some(attributes),
                    ..Default::default()
                },
                ..Default::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(client.clone());
            bounded(api.create(&PostParams::default(), &review))
                .await
                .map(|a| a.status)
        }
    };
    answer.map(|status| status.is_some_and(|s| s.allowed))
}

/// A request to the API server, bounded by [`REVIEW_TIMEOUT`], its error as text.
pub(crate) async fn bounded<T>(
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(REVIEW_TIMEOUT, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {REVIEW_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_spelled_as_rbac_needs_them() {
        assert_eq!(
            Rule::new("list", "", "configmaps", None).to_string(),
            "list configmaps cluster-wide"
        );
        assert_eq!(
            Rule::new("update", "coordination.k8s.io", "leases", Some("kw")).to_string(),
            "update leases.coordination.k8s.io in namespace kw"
        );
        assert_eq!(
            Rule::new("patch", "kubewasm.dev", "plugins/status", None).to_string(),
            "patch plugins.kubewasm.dev/status cluster-wide"
        );
    }
}
