//! Watch semantics of the embedded API server: ordering from a resourceVersion,
//! synthetic ADDED, selector transitions, bookmarks, timeouts, 410 Expired after
//! compaction and kube-runtime's watcher relisting on it.

mod support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{
    DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use kubewasm_apiserver::Config;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use support::*;

fn cm(name: &str, v: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), "a".to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("v".to_string(), v.to_string())])),
        ..Default::default()
    }
}

fn describe(e: &WatchEvent<ConfigMap>) -> String {
    match e {
        WatchEvent::Added(o) => format!(
            "ADDED {} {}",
            o.name_any(),
            o.data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default()
        ),
        WatchEvent::Modified(o) => format!(
            "MODIFIED {} {}",
            o.name_any(),
            o.data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default()
        ),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.name_any()),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {} {}", e.code, e.reason),
    }
}

async fn next_events<S>(stream: &mut S, n: usize) -> Vec<WatchEvent<ConfigMap>>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < n {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("event within 20s")
            .expect("stream open")
            .expect("event ok");
        if !matches!(ev, WatchEvent::Bookmark(_)) {
            out.push(ev);
        }
    }
    out
}

#[tokio::test]
async fn watch_from_list_resource_version_sees_every_change_in_order() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("before", "0"))
        .await
        .expect("create");
    let list = cms.list(&ListParams::default()).await.expect("list");
    let from = list.metadata.resource_version.expect("rv");
    cms.create(&PostParams::default(), &cm("x", "1"))
        .await
        .expect("create x");
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch");
    // A no-op write is not an event.
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("noop");
    cms.create(&PostParams::default(), &cm("y", "1"))
        .await
        .expect("create y");
    let others: Api<Secret> = Api::namespaced(client.clone(), "default");
    others
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("s".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("secret");
    cms.delete("x", &DeleteParams::default())
        .await
        .expect("delete");
    cms.patch(
        "y",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "3"}})),
    )
    .await
    .expect("patch y");

    let mut stream = cms
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    let evs = next_events(&mut stream, 5).await;
    let got: Vec<String> = evs.iter().map(describe).collect();
    assert_eq!(
        got,
        [
            "ADDED x 1",
            "MODIFIED x 2",
            "ADDED y 1",
            "DELETED x",
            "MODIFIED y 3"
        ]
    );
    let rvs: Vec<u64> = evs
        .iter()
        .map(|e| match e {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => rv(o),
            _ => 0,
        })
        .collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "resourceVersions increase: {rvs:?}"
    );

    // Live events follow the backlog.
    cms.create(&PostParams::default(), &cm("z", "1"))
        .await
        .expect("create z");
    let live = next_events(&mut stream, 1).await;
    assert_eq!(describe(&live[0]), "ADDED z 1");
}

#[tokio::test]
async fn watch_without_resource_version_starts_with_current_state() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    cms.create(&PostParams::default(), &cm("b", "1"))
        .await
        .expect("b");
    let mut stream = cms
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let got: Vec<String> = next_events(&mut stream, 2)
        .await
        .iter()
        .map(describe)
        .collect();
    assert_eq!(got, ["ADDED a 1", "ADDED b 1"]);
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch");
    assert_eq!(
        describe(&next_events(&mut stream, 1).await[0]),
        "MODIFIED a 2"
    );
}

#[tokio::test]
async fn watch_selectors_turn_transitions_into_added_and_deleted() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = cms
        .watch(&WatchParams::default().labels("app=a"), &from)
        .await
        .expect("watch")
        .boxed();
    let mut by_name = cms
        .watch(&WatchParams::default().fields("metadata.name=t"), &from)
        .await
        .expect("watch")
        .boxed();
    cms.create(&PostParams::default(), &cm("t", "1"))
        .await
        .expect("create");
    cms.create(&PostParams::default(), &cm("other", "1"))
        .await
        .expect("create other");
    cms.patch(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "b"}}})),
    )
    .await
    .expect("relabel");
    cms.patch(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("unseen");
    cms.patch(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "a"}}})),
    )
    .await
    .expect("back");
    let got: Vec<String> = next_events(&mut stream, 4)
        .await
        .iter()
        .map(describe)
        .collect();
    assert_eq!(
        got,
        ["ADDED t 1", "ADDED other 1", "DELETED t", "ADDED t 2"]
    );
    let got: Vec<String> = next_events(&mut by_name, 4)
        .await
        .iter()
        .map(describe)
        .collect();
    assert_eq!(
        got,
        ["ADDED t 1", "MODIFIED t 1", "MODIFIED t 2", "MODIFIED t 2"]
    );
}

#[tokio::test]
async fn bookmarks_and_timeouts() {
    let (_s, client) = server_with(Config {
        bookmark_interval: Duration::from_millis(100),
        ..Config::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    let current = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = cms
        .watch(&WatchParams::default(), &current)
        .await
        .expect("watch")
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .expect("bookmark in time")
        .expect("ok")
        .expect("open");
    match ev {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, current),
        other => panic!("expected a bookmark, got {}", describe(&other)),
    }
    // timeoutSeconds ends the stream.
    let mut short = cms
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(1),
            &current,
        )
        .await
        .expect("watch")
        .boxed();
    let end = tokio::time::timeout(Duration::from_secs(20), short.next())
        .await
        .expect("stream ends");
    assert!(end.is_none(), "no events, then the end of the stream");
}

#[tokio::test]
async fn compacted_resource_version_gets_410_expired() {
    let (s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    cms.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    s.compact();
    let mut stream = cms
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch answers 200")
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("event");
    match ev {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message
                    .starts_with(&format!("too old resource version: {from} (")),
                "{}",
                e.message
            );
        }
        other => panic!("expected ERROR 410, got {}", describe(&other)),
    }
    // The current resourceVersion is still watchable.
    let now = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut ok = cms
        .watch(&WatchParams::default(), &now)
        .await
        .expect("watch")
        .boxed();
    cms.create(&PostParams::default(), &cm("b", "1"))
        .await
        .expect("b");
    assert_eq!(describe(&next_events(&mut ok, 1).await[0]), "ADDED b 1");
}

#[tokio::test]
async fn history_limit_bounds_the_watch_window() {
    let (_s, client) = server_with(Config {
        history_limit: 3,
        ..Config::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), "1"))
            .await
            .expect("create");
    }
    let mut stream = cms
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    let ev = stream.try_next().await.expect("ok").expect("event");
    assert!(
        matches!(ev, WatchEvent::Error(ref e) if e.code == 410),
        "{}",
        describe(&ev)
    );
}

#[tokio::test]
async fn watcher_relists_after_410_and_sees_changes_made_during_the_break() {
    let (s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("first", "1"))
        .await
        .expect("first");
    // Server-side timeout of 1s makes the watcher re-watch from its last resourceVersion.
    let mut w = watcher(cms.clone(), watcher::Config::default().timeout(1)).boxed();
    loop {
        match w.try_next().await.expect("watcher ok").expect("open") {
            watcher::Event::InitDone => break,
            _ => continue,
        }
    }
    // Move the global resourceVersion on (a kind this watcher does not see), then compact:
    // the watcher's resourceVersion is now older than the retained history.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("bump".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("secret");
    s.compact();
    let err = match tokio::time::timeout(Duration::from_secs(20), w.next())
        .await
        .expect("410 in time")
        .expect("open")
    {
        Err(e) => e,
        Ok(ev) => panic!("unexpected event before the 410: {ev:?}"),
    };
    assert!(format!("{err:?}").contains("410"), "{err:?}");
    // The watcher is between watches now: change state before it relists.
    cms.create(&PostParams::default(), &cm("during-break", "1"))
        .await
        .expect("during break");
    cms.patch(
        "first",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch");
    let mut relisted = Vec::new();
    loop {
        match w.try_next().await.expect("watcher ok").expect("open") {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => relisted.push(format!(
                "{} {}",
                o.name_any(),
                o.data
                    .as_ref()
                    .and_then(|d| d.get("v"))
                    .cloned()
                    .unwrap_or_default()
            )),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(relisted, ["during-break 1", "first 2"]);
}

#[tokio::test]
async fn streaming_list_watcher_and_many_watchers() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    let mut w = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        match w.try_next().await.expect("ok").expect("open") {
            watcher::Event::InitApply(o) => initial.push(o.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["a"]);

    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut streams = Vec::new();
    for _ in 0..200 {
        streams.push(
            cms.watch(&WatchParams::default(), &from)
                .await
                .expect("watch")
                .boxed(),
        );
    }
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("m{i}"), "1"))
            .await
            .expect("create");
    }
    for s in &mut streams {
        let got: Vec<String> = next_events(s, 3).await.iter().map(describe).collect();
        assert_eq!(got, ["ADDED m0 1", "ADDED m1 1", "ADDED m2 1"]);
    }
}
