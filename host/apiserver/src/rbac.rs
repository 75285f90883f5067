//! RBAC authorization and impersonation, as kube-apiserver's `--authorization-mode=RBAC`
//! does them, faithfully enough to test least-privilege setups: Roles, ClusterRoles,
//! RoleBindings and ClusterRoleBindings stored in this server (verbs, apiGroups,
//! resources with subresources such as `deployments/status`, resourceNames,
//! nonResourceURLs, namespaced versus cluster scope; no aggregation), subjects of kind
//! User, Group and ServiceAccount, and `Impersonate-User` / `Impersonate-Group` checked as
//! the `impersonate` verb on `users`, `groups` or `serviceaccounts`.
//!
//! Off unless [`crate::Config::rbac`] is set: then every token of [`crate::Config::users`]
//! authenticates as its user, the admin token ([`crate::Config::token`]) as a member of
//! `system:masters` (which, as on kube-apiserver, is allowed everything), and a request
//! is answered 403 Forbidden with kube-apiserver's message unless a rule allows it.
//! Discovery, `/version`, `/openapi` and health endpoints are open to every authenticated
//! user, as kube-apiserver's default `system:discovery` and `system:public-info-viewer`
//! bindings make them.

use serde_json::Value;

use crate::error::StatusError;
use crate::store::{ListOptions, Store};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:NS:NAME` for a ServiceAccount).
    pub name: String,
    /// Its groups (`system:authenticated` included).
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with `groups` plus `system:authenticated`, and for a ServiceAccount its
    /// `system:serviceaccounts` groups, as kube-apiserver's authenticators add them.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        let name = name.into();
        let mut g: Vec<String> = groups.iter().map(|s| s.to_string()).collect();
        if let Some((ns, _)) = service_account(&name) {
            g.push("system:serviceaccounts".into());
            g.push(format!("system:serviceaccounts:{ns}"));
        }
        g.push("system:authenticated".into());
        g.dedup();
        UserInfo { name, groups: g }
    }

    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// `system:serviceaccount:NS:NAME` → (NS, NAME).
fn service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// What a resource request asks to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// get, list, watch, create, update, patch, delete, deletecollection, impersonate.
    pub(crate) verb: String,
    /// API group (`""` core).
    pub(crate) group: String,
    /// The resource (plural).
    pub(crate) resource: String,
    /// The subresource (`status`), if any.
    pub(crate) subresource: Option<String>,
    /// The namespace; None at the cluster scope.
    pub(crate) namespace: Option<String>,
    /// The object's name, when the request names one.
    pub(crate) name: Option<String>,
}

fn list_all(store: &Store, plural: &str) -> Vec<Value> {
    let Some(t) = store.target(RBAC_GROUP, "v1", plural, "") else {
        return Vec::new();
    };
    store
        .list(&t, &ListOptions::default())
        .ok()
        .and_then(|l| l.get("items").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

fn get_role(store: &Store, plural: &str, namespace: &str, name: &str) -> Option<Value> {
    let t = store.target(RBAC_GROUP, "v1", plural, namespace)?;
    store.get(&t, name).ok()
}

fn strs(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_ns: Option<&str>) -> bool {
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match subject.get("kind").and_then(Value::as_str) {
        Some("User") => name == user.name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            // A ServiceAccount subject without a namespace means the binding's (RoleBindings).
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .or(binding_ns)
                .unwrap_or("");
            service_account(&user.name) == Some((ns, name))
        }
        _ => false,
    }
}

fn covers(list: &[String], wanted: &str) -> bool {
    list.iter().any(|x| x == "*" || x == wanted)
}

fn resource_rule_allows(rule: &Value, a: &Attributes) -> bool {
    let resources = strs(rule, "resources");
    let combined = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let resource_ok = resources.iter().any(|r| {
        r == "*"
            || *r == combined
            // `*/status` covers the status of every resource.
            || (a.subresource.as_ref().is_some_and(|sub| *r == format!("*/{sub}")))
    });
    let names = strs(rule, "resourceNames");
    covers(&strs(rule, "verbs"), &a.verb)
        && covers(&strs(rule, "apiGroups"), &a.group)
        && resource_ok
        && (names.is_empty() || a.name.as_ref().is_some_and(|n| names.contains(n)))
}

/// Whether a `nonResourceURLs` rule allows `verb` on `path` (every non-resource endpoint
/// of this server is open to authenticated users, see the module docs; the rules count
/// in a SelfSubjectAccessReview).
fn non_resource_rule_allows(rule: &Value, verb: &str, path: &str) -> bool {
    covers(&strs(rule, "verbs"), verb)
        && strs(rule, "nonResourceURLs").iter().any(|u| {
            u == "*" || u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        })
}

/// kube-apiserver's description of a subject in an RBAC reason (`describeSubject`).
fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "ServiceAccount" {
        let ns = subject
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        format!("{kind} {:?}", format!("{name}/{ns}"))
    } else {
        format!("{kind} {name:?}")
    }
}

/// The roles bound to `user` that apply in `namespace` (None: cluster-wide only, i.e.
/// ClusterRoleBindings), each with kube-apiserver's description of the binding, as its
/// RBAC reasons spell it: `ClusterRoleBinding "b" of ClusterRole "r" to User "u"`.
fn bound_rules(
    store: &Store,
    user: &UserInfo,
    namespace: Option<&str>,
) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    let role_rules = |role: Option<Value>| -> Vec<Value> {
        role.and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let str_at = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    for b in list_all(store, "clusterrolebindings") {
        let subjects = b.get("subjects").and_then(Value::as_array).cloned();
        let Some(subject) = subjects
            .into_iter()
            .flatten()
            .find(|s| subject_matches(s, user, None))
        else {
            continue;
        };
        let role = str_at(&b, "/roleRef/name");
        if str_at(&b, "/roleRef/kind") == "ClusterRole" {
            let about = format!(
                "ClusterRoleBinding {:?} of ClusterRole {role:?} to {}",
                str_at(&b, "/metadata/name"),
                describe_subject(&subject, "")
            );
            out.push((
                about,
                role_rules(get_role(store, "clusterroles", "", &role)),
            ));
        }
    }
    let Some(ns) = namespace else {
        return out;
    };
    for b in list_all(store, "rolebindings") {
        if b.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns) {
            continue;
        }
        let subjects = b.get("subjects").and_then(Value::as_array).cloned();
        let Some(subject) = subjects
            .into_iter()
            .flatten()
            .find(|s| subject_matches(s, user, Some(ns)))
        else {
            continue;
        };
        let role = str_at(&b, "/roleRef/name");
        let kind = str_at(&b, "/roleRef/kind");
        let rules = match kind.as_str() {
            "Role" => role_rules(get_role(store, "roles", ns, &role)),
            // A RoleBinding may grant a ClusterRole's rules within its namespace.
            "ClusterRole" => role_rules(get_role(store, "clusterroles", "", &role)),
            _ => continue,
        };
        let about = format!(
            "RoleBinding {:?} of {kind} {role:?} to {}",
            format!("{}/{ns}", str_at(&b, "/metadata/name")),
            describe_subject(&subject, ns)
        );
        out.push((about, rules));
    }
    out
}

/// Whether `user` may do `a`.
pub(crate) fn allowed(store: &Store, user: &UserInfo, a: &Attributes) -> bool {
    allowed_by(store, user, a).is_some()
}

/// Whether `user` may do `a`, and why: kube-apiserver's reason (`RBAC: allowed by …`;
/// empty for `system:masters`, which no binding grants). None: denied.
pub(crate) fn allowed_by(store: &Store, user: &UserInfo, a: &Attributes) -> Option<String> {
    if user.is_master() {
        return Some(String::new());
    }
    bound_rules(store, user, a.namespace.as_deref())
        .into_iter()
        .find(|(_, rules)| rules.iter().any(|r| resource_rule_allows(r, a)))
        .map(|(about, _)| format!("RBAC: allowed by {about}"))
}

/// Whether `user` may `verb` the non-resource URL `path`, and why (as [`allowed_by`]).
/// Discovery, version, OpenAPI and health URLs are open to every authenticated user, as
/// kube-apiserver's default `system:discovery` binding makes them.
pub(crate) fn non_resource_allowed_by(
    store: &Store,
    user: &UserInfo,
    verb: &str,
    path: &str,
) -> Option<String> {
    if user.is_master() {
        return Some(String::new());
    }
    let open = [
        "/api", "/apis", "/healthz", "/livez", "/readyz", "/version", "/openapi",
    ];
    let discovery = verb == "get"
        && user.groups.iter().any(|g| g == "system:authenticated")
        && open.iter().any(|p| {
            path == *p
                || path
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with('/'))
        });
    if discovery {
        return Some(
            "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\"".into(),
        );
    }
    bound_rules(store, user, None)
        .into_iter()
        .find(|(_, rules)| {
            rules
                .iter()
                .any(|r| non_resource_rule_allows(r, verb, path))
        })
        .map(|(about, _)| format!("RBAC: allowed by {about}"))
}

/// kube-apiserver's 403 for `a`, e.g. `deployments.apps "d" is forbidden: User "u" cannot
/// patch resource "deployments/status" in API group "apps" in the namespace "ns"`.
pub(crate) fn forbidden(user: &UserInfo, a: &Attributes) -> StatusError {
    let qualified = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let object = match &a.name {
        Some(n) => format!("{qualified} {n:?}"),
        None => qualified,
    };
    let resource = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let scope = match &a.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    let mut e = StatusError::forbidden(format!(
        "{object} is forbidden: User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        user.name, a.verb, a.group
    ));
    let mut details = serde_json::json!({"kind": a.resource});
    if let Some(n) = &a.name {
        details["name"] = Value::String(n.clone());
    }
    if !a.group.is_empty() {
        details["group"] = Value::String(a.group.clone());
    }
    e.details = Some(details);
    e
}

/// Apply `Impersonate-User` / `Impersonate-Group`: the caller must be allowed the
/// `impersonate` verb on each (a ServiceAccount user on `serviceaccounts` in its namespace,
/// by name; another user on `users`; each group on `groups`). Returns the impersonated user
/// (groups as asked, or a ServiceAccount's own, plus `system:authenticated`).
pub(crate) fn impersonate(
    store: &Store,
    caller: &UserInfo,
    user: Option<&str>,
    groups: &[String],
) -> Result<Option<UserInfo>, StatusError> {
    let Some(user) = user else {
        if groups.is_empty() {
            return Ok(None);
        }
        return Err(StatusError::internal(
            "requested [] without impersonating a user",
        ));
    };
    let check = |a: Attributes| -> Result<(), StatusError> {
        if allowed(store, caller, &a) {
            Ok(())
        } else {
            Err(forbidden(caller, &a))
        }
    };
    match service_account(user) {
        Some((ns, name)) => check(Attributes {
            verb: "impersonate".into(),
            group: String::new(),
            resource: "serviceaccounts".into(),
            subresource: None,
            namespace: Some(ns.to_string()),
            name: Some(name.to_string()),
        })?,
        None => check(Attributes {
            verb: "impersonate".into(),
            group: String::new(),
            resource: "users".into(),
            subresource: None,
            namespace: None,
            name: Some(user.to_string()),
        })?,
    }
    for g in groups {
        check(Attributes {
            verb: "impersonate".into(),
            group: String::new(),
            resource: "groups".into(),
            subresource: None,
            namespace: None,
            name: Some(g.clone()),
        })?;
    }
    let mut info = if groups.is_empty() {
        UserInfo::new(user, &[])
    } else {
        let gs: Vec<&str> = groups.iter().map(String::as_str).collect();
        let mut i = UserInfo::new(user, &gs);
        // Asked-for groups replace a ServiceAccount's own.
        i.groups = groups.to_vec();
        i.groups.push("system:authenticated".into());
        i
    };
    info.groups.dedup();
    Ok(Some(info))
}

/// The verb of a request, as kube-apiserver's request info names it.
pub(crate) fn verb(method: &http::Method, named: bool, watch: bool) -> &'static str {
    match *method {
        http::Method::GET | http::Method::HEAD if watch => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(
        verb: &str,
        group: &str,
        resource: &str,
        sub: Option<&str>,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(str::to_string),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    #[test]
    fn rules_match_verbs_groups_subresources_and_names() {
        let rule =
            json!({"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]});
        assert!(resource_rule_allows(
            &rule,
            &attrs(
                "patch",
                "apps",
                "deployments",
                Some("status"),
                Some("a"),
                Some("d")
            )
        ));
        assert!(!resource_rule_allows(
            &rule,
            &attrs("patch", "apps", "deployments", None, Some("a"), Some("d"))
        ));
        assert!(!resource_rule_allows(
            &rule,
            &attrs(
                "update",
                "apps",
                "deployments",
                Some("status"),
                Some("a"),
                Some("d")
            )
        ));
        let named = json!({"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["x"], "verbs": ["impersonate"]});
        assert!(resource_rule_allows(
            &named,
            &attrs(
                "impersonate",
                "",
                "serviceaccounts",
                None,
                Some("a"),
                Some("x")
            )
        ));
        assert!(!resource_rule_allows(
            &named,
            &attrs(
                "impersonate",
                "",
                "serviceaccounts",
                None,
                Some("a"),
                Some("y")
            )
        ));
        let url = json!({"nonResourceURLs": ["/apis/*"], "verbs": ["get"]});
        assert!(non_resource_rule_allows(&url, "get", "/apis/apps"));
        assert!(!non_resource_rule_allows(&url, "get", "/api"));
    }

    #[test]
    fn messages_are_kube_apiservers() {
        let u = UserInfo::new("system:serviceaccount:kw:x", &[]);
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kw",
                "system:authenticated"
            ]
        );
        let e = forbidden(
            &u,
            &attrs(
                "patch",
                "apps",
                "deployments",
                Some("status"),
                Some("kw"),
                Some("d"),
            ),
        );
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "deployments.apps \"d\" is forbidden: User \"system:serviceaccount:kw:x\" cannot patch resource \"deployments/status\" in API group \"apps\" in the namespace \"kw\""
        );
        let e = forbidden(&u, &attrs("list", "", "namespaces", None, None, None));
        assert_eq!(
            e.message,
            "namespaces is forbidden: User \"system:serviceaccount:kw:x\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        );
    }
}
