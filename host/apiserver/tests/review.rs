//! SelfSubjectAccessReviews, answered as kube-apiserver answers them: for the caller (or
//! whom it impersonates), by the stored RBAC objects, with kube-apiserver's reasons and
//! validation, for any authenticated user, stored nowhere.

mod support;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kubewasm_apiserver::{ApiServer, Config};
use serde_json::json;
use support::*;

const HOST: &str = "system:serviceaccount:kw:kubewasm";

fn client_as(server: &ApiServer, token: &str) -> kube::Client {
    let mut c = server.client_config();
    c.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(c).expect("client")
}

fn impersonate(namespace: &str, name: &str) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some("impersonate".into()),
                group: Some(String::new()),
                resource: Some("serviceaccounts".into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn review(client: &kube::Client, r: &SelfSubjectAccessReview) -> (bool, Option<String>) {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), r)
        .await
        .expect("a review is answered");
    let status = answer.status.expect("status");
    (status.allowed, status.reason)
}

async fn create(admin: &kube::Client, plural: &str, kind: &str, obj: serde_json::Value) {
    let group = if kind == "Namespace" {
        ""
    } else {
        "rbac.authorization.k8s.io"
    };
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, "v1", kind),
        plural,
    );
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(admin.clone(), ns, &ar),
        None => Api::all_with(admin.clone(), &ar),
    };
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    api.create(&PostParams::default(), &o)
        .await
        .expect("create");
}

#[tokio::test]
async fn reviews_answer_for_the_caller_by_its_roles() {
    let (server, admin) =
        server_with(Config::default().with_rbac("admin", &[("host", HOST), ("nobody", "jane")]))
            .await;
    create(
        &admin,
        "namespaces",
        "Namespace",
        json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kw"}}),
    )
    .await;
    create(
        &admin,
        "roles",
        "Role",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "kubewasm", "namespace": "kw"},
        "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"],
                   "resourceNames": ["kubewasm-a"], "verbs": ["impersonate"]}]}),
    )
    .await;
    create(
        &admin,
        "rolebindings",
        "RoleBinding",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "kubewasm", "namespace": "kw"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubewasm"},
        "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kw"}]}),
    )
    .await;
    let host = client_as(&server, "host");
    assert_eq!(
        review(&host, &impersonate("kw", "kubewasm-a")).await,
        (
            true,
            Some(
                "RBAC: allowed by RoleBinding \"kubewasm/kw\" of Role \"kubewasm\" to ServiceAccount \"kubewasm/kw\""
                    .into()
            )
        )
    );
    // Another name, another namespace: denied, with no reason (as kube-apiserver).
    assert_eq!(
        review(&host, &impersonate("kw", "kubewasm-b")).await,
        (false, None)
    );
    assert_eq!(
        review(&host, &impersonate("default", "kubewasm-a")).await,
        (false, None)
    );
    // A user with no binding may still ask (kube-apiserver's system:basic-user).
    let jane = client_as(&server, "nobody");
    assert_eq!(
        review(&jane, &impersonate("kw", "kubewasm-a")).await,
        (false, None)
    );
    // Discovery URLs are open to every authenticated user (system:discovery).
    let url = |path: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(review(&jane, &url("/apis/apps")).await.0);
    assert!(!review(&jane, &url("/metrics")).await.0);
    // The admin (system:masters) may do anything; so may everyone without RBAC.
    assert_eq!(
        review(&admin, &impersonate("kw", "kubewasm-b")).await,
        (true, None)
    );
    let (_open, anyone) = support::server().await;
    assert!(review(&anyone, &impersonate("kw", "x")).await.0);
}

#[tokio::test]
async fn reviews_are_validated_and_never_stored() {
    let (server, admin) = server().await;
    let url = format!(
        "{}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        server.url()
    );
    let post = |body: serde_json::Value| {
        let req = http::Request::post(&url)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        let client = admin.clone();
        async move { client.request_text(req).await }
    };
    let both = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"},
                 "nonResourceAttributes": {"verb": "get", "path": "/api"}}});
    let neither = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {}});
    for (body, want) in [
        (
            both,
            "cannot be specified in combination with resourceAttributes",
        ),
        (
            neither,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ),
    ] {
        match post(body).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{s:?}");
                assert!(s.message.contains(want), "{}", s.message);
                assert!(
                    s.message.starts_with(
                        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec."
                    ),
                    "{}",
                    s.message
                );
            }
            other => panic!("want 422, got {other:?}"),
        }
    }
    // Create only: no list, no get.
    let list = http::Request::get(&url).body(Vec::new()).unwrap();
    match admin.request_text(list).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 405, "{s:?}"),
        other => panic!("want 405, got {other:?}"),
    }
}

fn subject_review(
    user: &str,
    groups: &[&str],
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> k8s_openapi::api::authorization::v1::SubjectAccessReview {
    use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec};
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            resource_attributes: Some(ResourceAttributes {
                namespace: namespace.map(str::to_string),
                verb: Some(verb.into()),
                group: Some(String::new()),
                resource: Some(resource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// SubjectAccessReviews: the question asked about another user (a plugin's ServiceAccount,
/// with the groups kube-apiserver gives it), answered from the RBAC objects stored, only
/// for a caller allowed to create them.
#[tokio::test]
async fn subject_access_reviews_answer_for_the_named_user_to_callers_allowed_to_ask() {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let (server, admin) =
        server_with(Config::default().with_rbac("admin", &[("host", HOST), ("nobody", "jane")]))
            .await;
    let sa = "system:serviceaccount:kw:kubewasm-a";
    let groups = [
        "system:serviceaccounts",
        "system:serviceaccounts:kw",
        "system:authenticated",
    ];
    for (plural, kind, obj) in [
        (
            "namespaces",
            "Namespace",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
        ),
        (
            "clusterroles",
            "ClusterRole",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "ask"},
                   "rules": [{"apiGroups": ["authorization.k8s.io"],
                              "resources": ["subjectaccessreviews"], "verbs": ["create"]}]}),
        ),
        (
            "clusterrolebindings",
            "ClusterRoleBinding",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "ask"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ask"},
                   "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kw"}]}),
        ),
        (
            "roles",
            "Role",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "read", "namespace": "a"},
                   "rules": [{"apiGroups": [""], "resources": ["secrets"],
                              "verbs": ["get", "list", "watch"]}]}),
        ),
        (
            "rolebindings",
            "RoleBinding",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "read", "namespace": "a"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
                   "subjects": [{"kind": "ServiceAccount", "name": "kubewasm-a", "namespace": "kw"}]}),
        ),
        (
            "clusterrolebindings",
            "ClusterRoleBinding",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "all-sas-read-configmaps"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm"},
                   "subjects": [{"kind": "Group", "name": "system:serviceaccounts:kw"}]}),
        ),
        (
            "clusterroles",
            "ClusterRole",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "cm"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
        ),
    ] {
        create(&admin, plural, kind, obj).await;
    }
    let ask = |client: &kube::Client, r: SubjectAccessReview| {
        let api: Api<SubjectAccessReview> = Api::all(client.clone());
        async move { api.create(&PostParams::default(), &r).await }
    };
    let host = client_as(&server, "host");
    let allowed = |r: Result<SubjectAccessReview, kube::Error>| {
        r.expect("answered").status.expect("status").allowed
    };
    // The ServiceAccount's Role, in its namespace only, for its verbs only.
    assert!(allowed(
        ask(
            &host,
            subject_review(sa, &groups, "list", "secrets", Some("a"))
        )
        .await
    ));
    assert!(!allowed(
        ask(
            &host,
            subject_review(sa, &groups, "list", "secrets", Some("b"))
        )
        .await
    ));
    assert!(!allowed(
        ask(&host, subject_review(sa, &groups, "list", "secrets", None)).await
    ));
    assert!(!allowed(
        ask(
            &host,
            subject_review(sa, &groups, "delete", "secrets", Some("a"))
        )
        .await
    ));
    // Another ServiceAccount is judged by its own bindings.
    let other = "system:serviceaccount:kw:kubewasm-b";
    assert!(!allowed(
        ask(
            &host,
            subject_review(other, &groups, "list", "secrets", Some("a"))
        )
        .await
    ));
    // A binding to a group the review names applies; without the group it does not.
    assert!(allowed(
        ask(
            &host,
            subject_review(other, &groups, "list", "configmaps", None)
        )
        .await
    ));
    assert!(!allowed(
        ask(
            &host,
            subject_review(other, &[], "list", "configmaps", None)
        )
        .await
    ));
    // Asking needs create on subjectaccessreviews: jane may not (403), the admin may.
    match ask(
        &client_as(&server, "nobody"),
        subject_review(sa, &groups, "list", "secrets", Some("a")),
    )
    .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("jane asked: {other:?}"),
    }
    assert!(allowed(
        ask(
            &admin,
            subject_review(sa, &groups, "list", "secrets", Some("a"))
        )
        .await
    ));
    // A review naming nobody is invalid, as kube-apiserver says.
    match ask(
        &admin,
        subject_review("", &[], "list", "secrets", Some("a")),
    )
    .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{s:?}"),
        other => panic!("a review of nobody: {other:?}"),
    }
    // Who am I: the caller's user.
    let me: Api<k8s_openapi::api::authentication::v1::SelfSubjectReview> = Api::all(host.clone());
    let who = me
        .create(&PostParams::default(), &Default::default())
        .await
        .expect("answered");
    assert_eq!(
        who.status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .as_deref(),
        Some(HOST)
    );
}

/// A TokenReview of `token`, asked by `client`.
async fn token_review(
    client: &kube::Client,
    token: &str,
) -> Result<k8s_openapi::api::authentication::v1::TokenReview, kube::Error> {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    let api: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.into(),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &review).await
}

#[tokio::test]
async fn token_reviews_name_the_user_of_a_known_token_to_callers_allowed_to_ask() {
    let (server, admin) = server_with(Config::default().with_rbac(
        "admin",
        &[
            ("host", HOST),
            ("prom", "system:serviceaccount:monitoring:prometheus"),
            ("nobody", "jane"),
        ],
    ))
    .await;
    // The host may ask once a role lets it create tokenreviews.
    let host = client_as(&server, "host");
    match token_review(&host, "prom").await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            assert!(s.message.contains("tokenreviews"), "{}", s.message);
        }
        other => panic!("the host asked without the RBAC: {other:?}"),
    }
    create(
        &admin,
        "clusterroles",
        "ClusterRole",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reviewer"},
        "rules": [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                   "verbs": ["create"]}]}),
    )
    .await;
    create(
        &admin,
        "clusterrolebindings",
        "ClusterRoleBinding",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "reviewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reviewer"},
        "subjects": [{"kind": "ServiceAccount", "name": "kubewasm", "namespace": "kw"}]}),
    )
    .await;
    // A ServiceAccount's token: its user and the groups kube-apiserver gives it.
    let answer = token_review(&host, "prom").await.expect("answered");
    let status = answer.status.expect("status");
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.expect("user");
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:monitoring:prometheus")
    );
    assert_eq!(
        user.groups.unwrap_or_default(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:monitoring",
            "system:authenticated"
        ]
    );
    // The admin token is a member of system:masters.
    let status = token_review(&host, "admin")
        .await
        .expect("answered")
        .status
        .expect("status");
    let groups = status.user.and_then(|u| u.groups).unwrap_or_default();
    assert!(groups.iter().any(|g| g == "system:masters"), "{groups:?}");
    // A token nobody was given: not authenticated, and no user.
    let status = token_review(&host, "forged")
        .await
        .expect("answered")
        .status
        .expect("status");
    assert_eq!(status.authenticated, Some(false));
    assert_eq!(status.user.and_then(|u| u.username), None);
    // An empty token is a bad request, in kube-apiserver's words.
    match token_review(&host, "").await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400, "{s:?}");
            assert!(s.message.contains("token is required"), "{}", s.message);
        }
        other => panic!("an empty token: {other:?}"),
    }
    // Still refused to a caller without the rule.
    match token_review(&client_as(&server, "nobody"), "prom").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("jane asked: {other:?}"),
    }
}

#[tokio::test]
async fn without_rbac_a_token_review_still_knows_only_the_tokens_given() {
    let (_server, client) = server_with(Config::default()).await;
    let status = token_review(&client, "anything")
        .await
        .expect("answered")
        .status
        .expect("status");
    assert_eq!(status.authenticated, Some(false));
}
