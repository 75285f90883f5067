//! Garbage collection on the embedded API server: background, foreground and
//! orphan propagation, partial ownership and namespace deletion.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::*;

fn owner_ref(owner: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().expect("uid"),
        controller: Some(true),
        block_owner_deletion: Some(block),
    }
}

fn cm(name: &str, owners: Vec<OwnerReference>, finalizers: Vec<String>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: if owners.is_empty() {
                None
            } else {
                Some(owners)
            },
            finalizers: if finalizers.is_empty() {
                None
            } else {
                Some(finalizers)
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn gone(api: &Api<ConfigMap>, name: &str) {
    eventually(&format!("{name} deleted"), || async {
        match api.get_opt(name).await.expect("get") {
            None => Some(()),
            Some(_) => None,
        }
    })
    .await
}

#[tokio::test]
async fn background_deletion_removes_dependents_of_deleted_owners() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", vec![], vec![]))
        .await
        .expect("owner");
    let other = cms
        .create(&PostParams::default(), &cm("other-owner", vec![], vec![]))
        .await
        .expect("other");
    cms.create(
        &PostParams::default(),
        &cm("dep", vec![owner_ref(&owner, false)], vec![]),
    )
    .await
    .expect("dep");
    cms.create(
        &PostParams::default(),
        &cm(
            "shared",
            vec![owner_ref(&owner, false), owner_ref(&other, false)],
            vec![],
        ),
    )
    .await
    .expect("shared");
    cms.delete("owner", &DeleteParams::default())
        .await
        .expect("delete owner");
    gone(&cms, "dep").await;
    // A dependent with another live owner stays, minus the dangling reference.
    let shared = eventually("dangling reference removed", || async {
        let s = cms.get("shared").await.expect("shared stays");
        (s.owner_references().len() == 1).then_some(s)
    })
    .await;
    assert_eq!(shared.owner_references()[0].uid, other.uid().expect("uid"));
}

#[tokio::test]
async fn foreground_deletion_deletes_dependents_first() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", vec![], vec![]))
        .await
        .expect("owner");
    // The dependent holds a finalizer, so the owner must wait for it.
    cms.create(
        &PostParams::default(),
        &cm(
            "dep",
            vec![owner_ref(&owner, true)],
            vec!["example.com/hold".into()],
        ),
    )
    .await
    .expect("dep");
    let res = cms
        .delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete");
    let marked = res.left().expect("owner is kept while dependents exist");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        marked
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    let dep = eventually("dependent marked for deletion", || async {
        let d = cms.get("dep").await.expect("dep");
        d.metadata.deletion_timestamp.is_some().then_some(d)
    })
    .await;
    assert!(dep.metadata.deletion_timestamp.is_some());
    let still = cms
        .get("owner")
        .await
        .expect("owner waits for its blocking dependent");
    assert!(
        still
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    cms.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release dependent");
    gone(&cms, "dep").await;
    gone(&cms, "owner").await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", vec![], vec![]))
        .await
        .expect("owner");
    cms.create(
        &PostParams::default(),
        &cm("dep", vec![owner_ref(&owner, true)], vec![]),
    )
    .await
    .expect("dep");
    cms.delete(
        "owner",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await
    .expect("delete");
    gone(&cms, "owner").await;
    let dep = cms.get("dep").await.expect("dependent survives");
    assert!(dep.owner_references().is_empty());
}

#[tokio::test]
async fn namespace_deletion_deletes_its_contents() {
    let (_s, client) = server().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &Namespace {
            metadata: ObjectMeta {
                name: Some("doomed".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("ns");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    cms.create(&PostParams::default(), &cm("a", vec![], vec![]))
        .await
        .expect("a");
    cms.create(
        &PostParams::default(),
        &cm("held", vec![], vec!["example.com/hold".into()]),
    )
    .await
    .expect("held");
    let widgets = install_widgets(&client).await;
    let doomed_widgets: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "doomed", &widget_resource());
    let mut w = widget("w", json!({"a": "1"}));
    w.metadata.namespace = None;
    doomed_widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("widget in namespace");
    drop(widgets);
    nss.delete("doomed", &DeleteParams::default())
        .await
        .expect("delete ns");
    gone(&cms, "a").await;
    let ns = nss
        .get("doomed")
        .await
        .expect("namespace waits for held content");
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let e = api_err(
        cms.create(&PostParams::default(), &cm("new", vec![], vec![]))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(
        e.message.contains("because it is being terminated"),
        "{}",
        e.message
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    eventually("namespace removed", || async {
        nss.get_opt("doomed")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(doomed_widgets.get_opt("w").await.expect("get").is_none());
}
