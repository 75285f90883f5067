//! Streaming lists (`sendInitialEvents`, KEP-3157) as kube-apiserver 1.36 serves and
//! refuses them: the current objects, then a bookmark annotated
//! `k8s.io/initial-events-end` (only where bookmarks are allowed); ListOptions validated
//! with its 422 messages (checked against kube-apiserver 1.36.2); and the two ways a
//! server may not serve them (the feature gate off: 422; a server ignoring the
//! parameters: a plain watch).

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use kubewasm_apiserver::{Config, WatchList};
use serde_json::Value;
use support::*;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn with_two(config: Config) -> (kubewasm_apiserver::ApiServer, Client) {
    let (s, client) = server_with(config).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    (s, client)
}

/// The lines of a watch that ends after a second (`timeoutSeconds=1`), as
/// `TYPE name-or-resourceVersion [annotated]`; or the refusal's status.
async fn watch_lines(client: &Client, query: &str) -> Result<Vec<String>, Box<kube::core::Status>> {
    let req = http::Request::get(format!("{CMS}?watch=1&timeoutSeconds=1&{query}"))
        .body(vec![])
        .expect("request");
    let text = match client.request_text(req).await {
        Ok(t) => t,
        Err(kube::Error::Api(s)) => return Err(s),
        Err(e) => panic!("request failed: {e}"),
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            let ty = v["type"].as_str().unwrap_or("?");
            let meta = &v["object"]["metadata"];
            if ty == "BOOKMARK" {
                let end = meta["annotations"]["k8s.io/initial-events-end"] == "true";
                format!("BOOKMARK{}", if end { " initial-events-end" } else { "" })
            } else {
                format!("{ty} {}", meta["name"].as_str().unwrap_or("?"))
            }
        })
        .collect())
}

async fn refusal(client: &Client, path_query: &str) -> (u16, String, Vec<(String, String)>) {
    let req = http::Request::get(format!("{CMS}?{path_query}"))
        .body(vec![])
        .expect("request");
    let text = match client.request_text(req).await {
        Ok(t) => panic!("expected a refusal of {path_query}, got {t}"),
        Err(kube::Error::Api(s)) => serde_json::to_value(&s).expect("status"),
        Err(e) => panic!("request failed: {e}"),
    };
    let causes = text["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or("").to_string(),
                c["field"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (
        text["code"].as_u64().unwrap_or(0) as u16,
        text["message"].as_str().unwrap_or("").to_string(),
        causes,
    )
}

#[tokio::test]
async fn a_watch_list_sends_the_objects_then_the_initial_events_end_bookmark() {
    let (_s, client) = with_two(Config::default()).await;
    let streaming =
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    for rv in ["", "&resourceVersion=0", "&resourceVersion=1"] {
        let lines = watch_lines(&client, &format!("{streaming}{rv}"))
            .await
            .expect("served");
        assert_eq!(
            lines,
            ["ADDED a", "ADDED b", "BOOKMARK initial-events-end"],
            "{rv}"
        );
    }
    // Without bookmarks allowed, no bookmark ends them (a client waiting would hang).
    let lines = watch_lines(
        &client,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    )
    .await
    .expect("served");
    assert_eq!(lines, ["ADDED a", "ADDED b"]);
    // A plain watch from "" or "0" is defaulted to a watch-list (same objects, and the
    // bookmark when allowed), as kube-apiserver 1.34+ defaults it.
    let lines = watch_lines(&client, "allowWatchBookmarks=true")
        .await
        .expect("served");
    assert_eq!(lines, ["ADDED a", "ADDED b", "BOOKMARK initial-events-end"]);
    // sendInitialEvents=false starts now: nothing of what exists.
    let lines = watch_lines(
        &client,
        "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    )
    .await
    .expect("served");
    assert!(lines.is_empty(), "{lines:?}");
}

/// A query, the message refusing it, and its causes (reason, field).
type Case = (&'static str, &'static str, Vec<(String, String)>);

#[tokio::test]
async fn list_options_are_refused_as_kube_apiserver_refuses_them() {
    let (_s, client) = server().await;
    let forbidden = |f: &str| ("FieldValueForbidden".to_string(), f.to_string());
    let unsupported = || {
        (
            "FieldValueNotSupported".to_string(),
            "resourceVersionMatch".to_string(),
        )
    };
    let cases: Vec<Case> = vec![
        (
            "watch=1&sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            vec![forbidden("resourceVersionMatch")],
        ),
        (
            "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]",
            vec![forbidden("resourceVersionMatch"), unsupported()],
        ),
        (
            "watch=1&resourceVersionMatch=NotOlderThan",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            vec![forbidden("resourceVersionMatch")],
        ),
        (
            "sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            vec![forbidden("sendInitialEvents")],
        ),
        (
            "resourceVersionMatch=NotOlderThan&limit=1",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            vec![forbidden("resourceVersionMatch")],
        ),
        (
            "resourceVersionMatch=Foo&resourceVersion=0&continue=x",
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided, resourceVersionMatch: Unsupported value: \"Foo\": supported values: \"Exact\", \"NotOlderThan\", \"\"]",
            vec![forbidden("resourceVersionMatch"), unsupported()],
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            vec![forbidden("resourceVersionMatch")],
        ),
    ];
    for (query, message, causes) in cases {
        let (code, got, got_causes) = refusal(&client, query).await;
        assert_eq!(code, 422, "{query}");
        assert_eq!(got, message, "{query}");
        assert_eq!(got_causes, causes, "{query}");
    }
    // What a list takes is still served.
    let req = http::Request::get(format!(
        "{CMS}?resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=1"
    ))
    .body(vec![])
    .expect("request");
    client.request_text(req).await.expect("a paged list");
}

#[tokio::test]
async fn a_server_with_the_feature_off_refuses_a_watch_list() {
    let (_s, client) = with_two(Config {
        watch_list: WatchList::Disabled,
        ..Config::default()
    })
    .await;
    let (code, message, _) = refusal(
        &client,
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
    );
    // A plain watch is not defaulted to a watch-list: no bookmark ends its objects.
    let lines = watch_lines(&client, "allowWatchBookmarks=true")
        .await
        .expect("served");
    assert_eq!(lines, ["ADDED a", "ADDED b"]);
}

#[tokio::test]
async fn a_server_ignoring_the_parameters_never_ends_the_initial_events() {
    let (_s, client) = with_two(Config {
        watch_list: WatchList::Ignored,
        ..Config::default()
    })
    .await;
    let lines = watch_lines(
        &client,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=0",
    )
    .await
    .expect("served");
    assert_eq!(lines, ["ADDED a", "ADDED b"]);
}
