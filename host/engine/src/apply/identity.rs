//! Who a plugin acts as, asked of the API server: its ServiceAccount `kubewasm-P` in the
//! plugins' namespace, which the host impersonates for its writes and whose RBAC bounds
//! its reads.
//!
//! With [`WriteIdentity::PluginServiceAccounts`] every write of plugin `P` impersonates
//! the ServiceAccount `kubewasm-P` in the plugins' namespace. When the host may not
//! (RBAC from `kubewasm rbac` not applied, or applied for another namespace than
//! `--plugin-namespace`), each write fails with a 403 about impersonation, one per event.
//! [`check_impersonation`] asks the API server instead, with a SelfSubjectAccessReview of
//! `impersonate serviceaccounts kubewasm-P` in that namespace, so the plugin is marked not
//! ready with one line saying which account, which namespace and how to fix it.
//!
//! Reads are served from the host's caches, so [`AccountReviews`] asks, with
//! SubjectAccessReviews for `kubewasm-P`, whether it may read what the approval lets the
//! plugin read; the reloader refuses or unloads a plugin it may not
//! (`plugins::reload`). [`check_account_name`] says which names may have an account.

use kube::Api;
use kube::api::PostParams;
use kubewasm_core::manifest::Manifest;

use crate::serve::access::{REVIEW_TIMEOUT, Rule, Subject, review};

use super::WriteIdentity;

/// Check that the host may impersonate the ServiceAccount `plugin` writes as (nothing to
/// check with [`WriteIdentity::Host`]). `Err` is the one line to show for the plugin (its
/// `Ready` condition, `/readyz?verbose`, the log). A review that cannot be asked (an API
/// server without the authorization API, a transport error) proves nothing: it is logged
/// and the plugin is not held back; its writes will tell.
pub async fn check_impersonation(
    client: &kube::Client,
    identity: &WriteIdentity,
    plugin: &Manifest,
) -> Result<(), String> {
    // A NamespacedPlugin's plugin (`NS/P`) writes as its account in NS whatever the
    // identity (`apply::Writer`).
    let namespace = match (plugin.name.split_once('/'), identity) {
        (Some((ns, _)), _) => ns,
        (None, WriteIdentity::PluginServiceAccounts { namespace }) => namespace.as_str(),
        (None, WriteIdentity::Host) => return Ok(()),
    };
    let account = plugin.field_manager();
    let rule = Rule::new("impersonate", "", "serviceaccounts", Some(namespace)).named(&account);
    let allowed = match review(client, Subject::Caller, &rule).await {
        Ok(allowed) => allowed,
        Err(e) => {
            tracing::warn!(plugin = %plugin.name, account = %account, namespace = %namespace, error = %e,
                "cannot ask whether the host may impersonate the plugin's ServiceAccount; its writes will tell");
            return Ok(());
        }
    };
    if allowed {
        return Ok(());
    }
    Err(format!(
        "the host may not impersonate ServiceAccount {account} in namespace {namespace}, so every write of plugin {} would be refused; apply the RBAC `kubewasm rbac --service-account-namespace {namespace}` prints (it lets the host impersonate {account}), or point --plugin-namespace at the namespace the plugins' ServiceAccounts are in, or run with --no-impersonation",
        plugin.name
    ))
}

/// Plugin names whose ServiceAccount would be one the host or its deployment uses:
/// `kubewasm-host` is kept for the host (and `kubewasm`, the host's account in deploy/,
/// is out of reach: every plugin's account is `kubewasm-` and a non-empty name).
const RESERVED_PLUGIN_NAMES: &[&str] = &["host"];

/// Whether plugin `name` may have the ServiceAccount `kubewasm-<name>` in `namespace`:
/// a DNS label (so `kubewasm-<name>` is a valid ServiceAccount name; manifests are held
/// to that already), not reserved, and not the host's own account (`host_user`, when the
/// API server said who the host is: a Helm release named `kubewasm-X` runs as
/// `kubewasm-X`, which plugin `X` would otherwise impersonate). `Err` says why not.
pub fn check_account_name(
    name: &str,
    namespace: &str,
    host_user: Option<&str>,
) -> Result<(), String> {
    if !kubewasm_core::names::is_dns_label(name) {
        return Err(format!(
            "plugin name {name:?} is not a DNS label, so kubewasm-{name} is no ServiceAccount name"
        ));
    }
    if RESERVED_PLUGIN_NAMES.contains(&name) {
        return Err(format!(
            "plugin name {name:?} is reserved: ServiceAccount kubewasm-{name} is kept for the host"
        ));
    }
    let user = service_account_user(namespace, name);
    if host_user == Some(user.as_str()) {
        return Err(format!(
            "plugin {name} would act as ServiceAccount kubewasm-{name} in namespace {namespace}, which is the host's own account; rename the plugin"
        ));
    }
    Ok(())
}

/// The user name of plugin `plugin`'s ServiceAccount in `namespace`.
fn service_account_user(namespace: &str, plugin: &str) -> String {
    format!("system:serviceaccount:{namespace}:kubewasm-{plugin}")
}

/// Whether a plugin's ServiceAccount may read what it is approved to read, as the API
/// server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessVerdict {
    /// Every rule is allowed (or there is nothing to read).
    Allowed,
    /// Some rules are denied, or the account cannot be the plugin's.
    Denied {
        /// The one line that says which and what to do.
        why: String,
        /// Each rule denied, as `verb resource.group in namespace NS` (or
        /// `cluster-wide`); empty when the account's name is refused.
        missing: Vec<String>,
    },
    /// A review could not be asked (a transport error, no authorization API, the host
    /// may not create SubjectAccessReviews): the one line that says so.
    Unanswered(String),
}

/// Asks the API server, with SubjectAccessReviews for each plugin's ServiceAccount
/// (`system:serviceaccount:NS:kubewasm-<plugin>` and its groups), whether it may `get`,
/// `list` and `watch` every resource where the plugin's approval lets it read
/// ([`kubewasm_core::rbac::read_rules`]: the rules `kubewasm approve` and `kubewasm rbac`
/// give it). The host serves a plugin's reads from caches it fills with its own
/// credentials, so without this whoever may create a Plugin could read whatever the host
/// can. Asked before a plugin loads and, for plugins at work, again after each
/// [`AccountReviews::forget`] (every `--access-review-interval`).
///
/// Allowed answers are kept until [`AccountReviews::forget`]; denials and failures are
/// never kept, so the next look asks again.
pub struct AccountReviews {
    client: kube::Client,
    discovery: std::sync::Arc<crate::watch::discovery::Discovery>,
    /// Where the plugins' ServiceAccounts are.
    namespace: String,
    /// The namespaces the host watches (empty: every one): a plugin reads nothing
    /// elsewhere, so a cluster-wide read is asked in each of these instead.
    host_namespaces: Vec<String>,
    /// The host's own user, asked once (None inside: not known).
    host_user: tokio::sync::OnceCell<Option<String>>,
    allowed: std::sync::Mutex<std::collections::HashSet<(String, Rule)>>,
}

/// Verbs a reading plugin's account needs: the host's caches list and watch, a plugin's
/// `get` reads one object.
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

impl AccountReviews {
    /// Reviews of the accounts in `namespace`, resolving kinds through `discovery`, for a
    /// host watching `host_namespaces` (empty: all).
    pub fn new(
        client: kube::Client,
        discovery: std::sync::Arc<crate::watch::discovery::Discovery>,
        namespace: String,
        host_namespaces: Vec<String>,
    ) -> Self {
        AccountReviews {
            client,
            discovery,
            namespace,
            host_namespaces,
            host_user: tokio::sync::OnceCell::new(),
            allowed: std::sync::Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Forget what was allowed: the next review of each plugin asks again.
    pub fn forget(&self) {
        kubewasm_core::sync::lock(&self.allowed).clear();
    }

    /// Whether plugin `plugin`, approved for `approval`, may be served: its account name
    /// ([`check_account_name`]) and every read rule of its approval.
    pub async fn review(
        &self,
        plugin: &str,
        approval: &kubewasm_core::grant::Approval,
    ) -> AccessVerdict {
        let host_user = self
            .host_user
            .get_or_init(|| host_user(&self.client))
            .await
            .as_deref();
        // A NamespacedPlugin's plugin (`NS/P`) has its account in its own namespace.
        let (namespace, plugin) = plugin
            .split_once('/')
            .unwrap_or((self.namespace.as_str(), plugin));
        if let Err(why) = check_account_name(plugin, namespace, host_user) {
            return AccessVerdict::Denied {
                why,
                missing: Vec::new(),
            };
        }
        let rules = self.rules(approval).await;
        let user = service_account_user(namespace, plugin);
        let asks: Vec<Rule> = {
            let known = kubewasm_core::sync::lock(&self.allowed);
            rules
                .into_iter()
                .filter(|r| !known.contains(&(user.clone(), r.clone())))
                .collect()
        };
        let answers = futures::future::join_all(asks.iter().map(|r| {
            let subject = Subject::Account {
                user: &user,
                namespace,
            };
            review(&self.client, subject, r)
        }))
        .await;
        let mut missing = Vec::new();
        let mut unanswered = None;
        for (rule, answer) in asks.into_iter().zip(answers) {
            match answer {
                Ok(true) => {
                    kubewasm_core::sync::lock(&self.allowed).insert((user.clone(), rule));
                }
                Ok(false) => missing.push(rule.to_string()),
                Err(e) => unanswered = Some(e),
            }
        }
        let account = format!(
            "ServiceAccount kubewasm-{plugin} in namespace {}",
            namespace
        );
        if !missing.is_empty() {
            return AccessVerdict::Denied {
                why: format!(
                    "{account} may not read what plugin {plugin} is approved to read: {}; grant it (the roles `kubewasm approve` prints give it exactly that) or narrow the approval's watches and reads",
                    missing.join("; ")
                ),
                missing,
            };
        }
        match unanswered {
            Some(e) => AccessVerdict::Unanswered(format!(
                "cannot ask whether {account} may read what plugin {plugin} is approved to read (a SubjectAccessReview: the host needs create on subjectaccessreviews.authorization.k8s.io, which `kubewasm rbac` gives it): {e}; it is not loaded until the API server answers"
            )),
            None => AccessVerdict::Allowed,
        }
    }

    /// The rules to ask: each read rule of the approval, each verb; a cluster-wide read
    /// of a namespaced kind in each namespace the host watches, when it watches only some.
    async fn rules(&self, approval: &kubewasm_core::grant::Approval) -> Vec<Rule> {
        let scopes = approval.read_scopes();
        let mut resolved = std::collections::HashMap::new();
        for r in scopes.keys() {
            // Not served (yet): guessed, as `kubewasm rbac` guesses it.
            if let Ok(k) = self.discovery.resolve(r).await {
                resolved.insert(r.clone(), (*k).clone());
            }
        }
        let mut out = Vec::new();
        for rule in kubewasm_core::rbac::read_rules(&scopes, &|r| resolved.get(r).cloned()) {
            let places: Vec<Option<String>> = match &rule.namespace {
                None if rule.namespaced && !self.host_namespaces.is_empty() => {
                    self.host_namespaces.iter().cloned().map(Some).collect()
                }
                Some(ns)
                    if !self.host_namespaces.is_empty() && !self.host_namespaces.contains(ns) =>
                {
                    vec![]
                }
                other => vec![other.clone()],
            };
            for place in places {
                for verb in READ_VERBS {
                    out.push(Rule::new(
                        verb,
                        &rule.group,
                        &rule.resource,
                        place.as_deref(),
                    ));
                }
            }
        }
        out
    }
}

/// The host's own user name, as a SelfSubjectReview answers it (None: not answered, e.g.
/// an API server without `authentication.k8s.io/v1` SelfSubjectReviews).
async fn host_user(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let answer = tokio::time::timeout(
        REVIEW_TIMEOUT,
        api.create(&PostParams::default(), &SelfSubjectReview::default()),
    )
    .await;
    match answer {
        Ok(Ok(r)) => r.status?.user_info?.username,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "cannot ask the API server who the host is");
            None
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_map_only_onto_accounts_of_their_own() {
        assert_eq!(check_account_name("web", "kw", None), Ok(()));
        for bad in ["Web", "a.b", "-a", ""] {
            let err = check_account_name(bad, "kw", None).unwrap_err();
            assert!(err.contains("not a DNS label"), "{bad}: {err}");
        }
        let err = check_account_name("host", "kw", None).unwrap_err();
        assert!(err.contains("reserved"), "{err}");
        // A Helm release named kubewasm-web runs as kubewasm-web: plugin web may not be it.
        let host = "system:serviceaccount:kw:kubewasm-web";
        let err = check_account_name("web", "kw", Some(host)).unwrap_err();
        assert!(err.contains("the host's own account"), "{err}");
        assert_eq!(check_account_name("web", "other", Some(host)), Ok(()));
    }
}
