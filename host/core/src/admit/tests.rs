//! Admission, from binding one intent to admitting a whole call.

use serde_json::{Value, json};

use super::bind::{add_owner, bind};
use super::*;
use crate::grant::GrantError;
use crate::intent::{Action, Intent, IntentError, RawIntent};
use crate::kind::{KindInfo, ResolveError, Resolver, guess};
use crate::manifest::{Grant, Manifest, Verb};
use crate::resource::{ResourceRef, TypeRef};

/// Resolution without a cluster: [`guess`] for everything.
#[derive(Debug, Clone, Copy, Default)]
struct Offline;

impl Resolver for Offline {
    async fn resolve_kind(&self, t: &TypeRef) -> Result<KindInfo, ResolveError> {
        Ok(guess(&ResourceRef::Kind(t.clone())))
    }
}

/// Knows no object (every owner reference other than the trigger is refused).
#[derive(Debug, Clone, Copy, Default)]
struct NoOwners;

impl Owners for NoOwners {
    fn uid(&self, _: &KindInfo, _: Option<&str>, _: &str) -> Option<String> {
        None
    }
}

fn trigger(ns: Option<&str>) -> Trigger {
    Trigger {
        api_version: "sites.kubewasm.dev/v1alpha1".into(),
        kind: "ContentSite".into(),
        name: "blog".into(),
        namespace: ns.map(str::to_string),
        uid: Some("u-1".into()),
    }
}

/// The object `add_owner` writes on, for its messages.
const OBJECT: &str = "ConfigMap x";

#[test]
fn a_rejection_is_spelled_one_way() {
    let refused = Rejection {
        index: 1,
        error: AdmitError::Refused(GrantError::NotGranted {
            verb: "create",
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some("a".into()),
        }),
    };
    assert_eq!(
        refused.to_string(),
        "intent #1 refused: no grant allows create on v1 Secret in namespace a"
    );
    let invalid = Rejection {
        index: 0,
        error: AdmitError::Invalid(IntentError::NotAnObject("object")),
    };
    assert_eq!(
        invalid.to_string(),
        "invalid intent #0: object must be a JSON object"
    );
}

#[test]
fn owner_reference_is_added_once() {
    let mut body = json!({"metadata":{"name":"x","namespace":"shop"}});
    let t = trigger(Some("shop"));
    add_owner(&mut body, &t, OBJECT, Some("shop")).unwrap();
    add_owner(&mut body, &t, OBJECT, Some("shop")).unwrap();
    assert_eq!(
        body["metadata"]["ownerReferences"],
        json!([{"apiVersion":"sites.kubewasm.dev/v1alpha1","kind":"ContentSite","name":"blog",
                "uid":"u-1","controller":true,"blockOwnerDeletion":true}])
    );
}

#[test]
fn owner_reference_cannot_cross_namespaces() {
    let mut body = json!({"metadata":{"name":"x"}});
    let err = add_owner(&mut body, &trigger(Some("shop")), OBJECT, Some("other")).unwrap_err();
    assert!(err.to_string().contains("cannot cross namespaces"), "{err}");
    let err = add_owner(&mut body, &trigger(Some("shop")), OBJECT, None).unwrap_err();
    assert!(err.to_string().contains("cluster-scoped"), "{err}");
    // A cluster-scoped owner may own namespaced objects.
    assert!(add_owner(&mut body, &trigger(None), OBJECT, Some("other")).is_ok());
}

#[test]
fn a_second_controller_is_refused() {
    let mut body = json!({"metadata":{"name":"x","ownerReferences":[
        {"apiVersion":"v1","kind":"X","name":"other","uid":"u-2","controller":true}]}});
    let err = add_owner(&mut body, &trigger(Some("shop")), OBJECT, Some("shop")).unwrap_err();
    assert_eq!(err, BindError::SecondController("other".into()));
}

fn site_kind(has_status: bool) -> KindInfo {
    KindInfo {
        group: "sites.kubewasm.dev".into(),
        version: "v1alpha2".into(),
        kind: "ContentSite".into(),
        plural: "contentsites".into(),
        namespaced: true,
        has_status,
        guessed: false,
    }
}

/// ConfigMaps as discovery describes them, served by `group` (`""`: core).
fn configmaps_in(group: &str) -> KindInfo {
    KindInfo {
        group: group.into(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        namespaced: true,
        has_status: false,
        guessed: false,
    }
}

/// A decoded server-side apply patch of ContentSite `name`.
fn site_patch(name: &str, body: Value, status: bool) -> Intent {
    let raw = RawIntent::Patch {
        target: crate::intent::ObjectRef {
            api_version: "sites.kubewasm.dev/v1alpha1".into(),
            kind: "ContentSite".into(),
            namespace: None,
            name: name.into(),
        },
        body: body.to_string(),
        strategy: crate::intent::Strategy::Apply,
        status,
        force: false,
    };
    crate::intent::decode(raw, 1 << 20).unwrap()
}

fn status_patch(name: &str) -> Intent {
    site_patch(name, json!({"status": {"phase": "Ready"}}), true)
}

#[test]
fn a_status_write_needs_a_status_subresource() {
    let err = bind(
        status_patch("blog"),
        site_kind(false),
        &trigger(Some("shop")),
    )
    .unwrap_err();
    assert_eq!(err, BindError::NoStatusSubresource("ContentSite".into()));
    assert!(
        err.to_string().contains("has no status subresource"),
        "{err}"
    );
    assert!(
        bind(
            status_patch("blog"),
            site_kind(true),
            &trigger(Some("shop"))
        )
        .is_ok()
    );
}

#[test]
fn an_intent_knows_whether_it_writes_its_trigger() {
    let t = trigger(Some("shop"));
    // Another version of the same group is the same object.
    let own = bind(status_patch("blog"), site_kind(true), &t).unwrap();
    assert!(own.targets(&t));
    assert!(own.requires_trigger(&t));
    let other = bind(status_patch("other"), site_kind(true), &t).unwrap();
    assert!(!other.targets(&t));
    assert!(!other.requires_trigger(&t));
    let elsewhere = trigger(Some("elsewhere"));
    assert!(!own.targets(&elsewhere));
    let created = bind(
        crate::intent::decode(
            create(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"blog"}})),
            1 << 20,
        )
        .unwrap(),
        configmaps_in(""),
        &t,
    )
    .unwrap();
    assert!(!created.targets(&t), "same name, another kind");
    assert!(!created.requires_trigger(&t));
}

#[test]
fn an_apply_patch_of_the_trigger_names_its_uid_so_it_never_recreates_it() {
    let t = trigger(Some("shop"));
    let patch = |name: &str, body: Value, status: bool| {
        bind(site_patch(name, body, status), site_kind(true), &t).unwrap()
    };
    let own = patch("blog", json!({"metadata": {"labels": {"a": "b"}}}), false);
    let Action::Apply { body, .. } = &own.intent.action else {
        panic!("apply")
    };
    assert_eq!(body["metadata"]["uid"], json!("u-1"));
    assert!(own.requires_trigger(&t));
    // The plugin's own uid is kept; other objects and status writes are left alone.
    let named = patch("blog", json!({"metadata": {"uid": "u-mine"}}), false);
    let Action::Apply { body, .. } = &named.intent.action else {
        panic!("apply")
    };
    assert_eq!(body["metadata"]["uid"], json!("u-mine"));
    // Refused for that uid: the plugin's mistake, not a deleted trigger.
    assert!(!named.requires_trigger(&t));
    let other = patch("other", json!({"metadata": {"labels": {"a": "b"}}}), false);
    let Action::Apply { body, .. } = &other.intent.action else {
        panic!("apply")
    };
    assert!(body["metadata"].get("uid").is_none());
    assert!(!other.requires_trigger(&t));
    let status = patch("blog", json!({"status": {"phase": "Ready"}}), true);
    let Action::Apply { body, .. } = &status.intent.action else {
        panic!("apply")
    };
    assert!(body["metadata"].get("uid").is_none());
}

fn manifest(namespaces: &[&str]) -> Manifest {
    Manifest {
        name: "p".into(),
        version: "1".into(),
        watches: vec![],
        grants: vec![Grant {
            api_groups: vec!["rbac.authorization.k8s.io".into(), "".into()],
            kinds: vec!["*".into()],
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            verbs: vec![Verb::Create],
            allow_force: false,
            finalizers: vec![],
        }],
        reads: vec![],
    }
}

fn create(object: Value) -> RawIntent {
    RawIntent::Create {
        object: object.to_string(),
        force: false,
        owned_by_trigger: false,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    // The offline resolver never awaits anything, so one poll finishes the future.
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("offline admission awaited something"),
    }
}

#[test]
fn a_cluster_scoped_kind_is_not_covered_by_a_namespaced_grant() {
    // The trigger is namespaced, but a ClusterRole has no namespace: a grant limited to
    // namespace shop does not cover it.
    let role = json!({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
        "metadata":{"name":"escalate"}});
    let err = block_on(admit(
        &manifest(&["shop"]),
        vec![create(role.clone())],
        1 << 20,
        &trigger(Some("shop")),
        &Offline,
        &NoOwners,
    ))
    .unwrap_err();
    assert!(
        matches!(
            err.error,
            AdmitError::Refused(GrantError::NotGranted {
                namespace: None,
                ..
            })
        ),
        "{err}"
    );
    // The same grant covers a namespaced kind in its namespace, defaulted from the trigger.
    let cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}});
    let ok = block_on(admit(
        &manifest(&["shop"]),
        vec![create(cm)],
        1 << 20,
        &trigger(Some("shop")),
        &Offline,
        &NoOwners,
    ))
    .unwrap();
    assert_eq!(ok[0].namespace.as_deref(), Some("shop"));
    // And a cluster-wide grant covers the ClusterRole.
    assert!(
        block_on(admit(
            &manifest(&[]),
            vec![create(role)],
            1 << 20,
            &trigger(Some("shop")),
            &Offline,
            &NoOwners
        ))
        .is_ok()
    );
}

#[test]
fn a_call_is_rejected_at_its_first_bad_intent() {
    let good = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}});
    let err = block_on(admit(
        &manifest(&[]),
        vec![create(good), create(json!({"kind":"X"}))],
        1 << 20,
        &trigger(Some("shop")),
        &Offline,
        &NoOwners,
    ))
    .unwrap_err();
    assert_eq!(err.index, 1);
    assert!(matches!(
        err.error,
        AdmitError::Invalid(IntentError::MissingApiVersion)
    ));
}

/// Knows a few objects by (kind, namespace, name).
struct Known(
    Vec<(
        &'static str,
        Option<&'static str>,
        &'static str,
        &'static str,
    )>,
);

impl Owners for Known {
    fn uid(&self, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(k, ns, n, _)| *k == kind.kind && *ns == namespace && *n == name)
            .map(|(.., uid)| uid.to_string())
    }
}

fn known() -> Known {
    Known(vec![
        ("ConfigMap", Some("shop"), "parent", "u-parent"),
        ("ConfigMap", Some("other"), "far", "u-far"),
        ("Secret", Some("shop"), "key", "u-key"),
        ("Namespace", None, "shop", "u-ns"),
    ])
}

fn writer(verbs: &[Verb], finalizers: &[&str]) -> Manifest {
    Manifest {
        name: "p".into(),
        version: "1".into(),
        watches: vec![],
        grants: vec![Grant {
            api_groups: vec!["".into()],
            kinds: vec!["ConfigMap".into()],
            namespaces: vec!["shop".into(), "other".into()],
            verbs: verbs.to_vec(),
            allow_force: false,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
        }],
        reads: vec![],
    }
}

fn owned(refs: Value) -> RawIntent {
    create(json!({"apiVersion":"v1","kind":"ConfigMap",
        "metadata":{"name":"child","namespace":"shop","ownerReferences": refs}}))
}

fn patched(body: Value, status: bool) -> RawIntent {
    RawIntent::Patch {
        target: crate::intent::ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: "victim".into(),
        },
        body: body.to_string(),
        strategy: crate::intent::Strategy::Merge,
        status,
        force: false,
    }
}

fn run(m: &Manifest, raw: RawIntent) -> Result<Vec<Prepared>, AdmitError> {
    block_on(admit(
        m,
        vec![raw],
        1 << 20,
        &trigger(Some("shop")),
        &Offline,
        &known(),
    ))
    .map_err(|r| r.error)
}

fn reference(kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": if kind == "ContentSite" {"sites.kubewasm.dev/v1alpha1"} else {"v1"},
           "kind": kind, "name": name, "uid": uid})
}

#[test]
fn owner_references_must_be_the_trigger_or_a_writable_object_with_its_uid() {
    let m = writer(&[Verb::Create, Verb::Patch], &[]);
    // The trigger, and a ConfigMap the plugin may write with its real uid.
    assert!(run(&m, owned(json!([reference("ContentSite", "blog", "u-1")]))).is_ok());
    assert!(
        run(
            &m,
            owned(json!([reference("ConfigMap", "parent", "u-parent")]))
        )
        .is_ok()
    );
    // A bogus uid: the garbage collector would delete the object.
    let err = run(
        &m,
        owned(json!([reference("ConfigMap", "parent", "bogus")])),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            AdmitError::Body(BodyError::OwnerUidMismatch { known: Some(_), .. })
        ),
        "{err}"
    );
    // An owner the host does not know.
    let err = run(&m, owned(json!([reference("ConfigMap", "ghost", "u-9")]))).unwrap_err();
    assert!(
        matches!(
            err,
            AdmitError::Body(BodyError::OwnerUidMismatch { known: None, .. })
        ),
        "{err}"
    );
    // The trigger's name with another uid is not the trigger.
    let err = run(&m, owned(json!([reference("ContentSite", "blog", "u-2")]))).unwrap_err();
    assert!(
        matches!(err, AdmitError::Body(BodyError::OwnerNotWritable { .. })),
        "{err}"
    );
    // An object the plugin may not write (a Secret), even with its real uid.
    let err = run(&m, owned(json!([reference("Secret", "key", "u-key")]))).unwrap_err();
    assert!(
        matches!(err, AdmitError::Body(BodyError::OwnerNotWritable { .. })),
        "{err}"
    );
    // The uid of an object in another namespace: looked up in the object's namespace.
    let err = run(&m, owned(json!([reference("ConfigMap", "far", "u-far")]))).unwrap_err();
    assert!(
        matches!(err, AdmitError::Body(BodyError::OwnerUidMismatch { .. })),
        "{err}"
    );
    // Malformed references.
    for bad in [
        json!([{"apiVersion":"v1","kind":"ConfigMap","name":"parent"}]),
        json!([{"apiVersion":"v1?x","kind":"ConfigMap","name":"parent","uid":"u"}]),
        json!([{"apiVersion":"v1","kind":"ConfigMap","name":"a?b","uid":"u"}]),
        json!(["x"]),
    ] {
        let err = run(&m, owned(bad.clone())).unwrap_err();
        assert!(
            matches!(err, AdmitError::Body(BodyError::BadOwnerReference { .. })),
            "{bad}: {err}"
        );
    }
    // A patch-only grant cannot hand its target a bogus owner either (merge or apply).
    let m = writer(&[Verb::Patch], &[]);
    let bogus = json!({"metadata":{"ownerReferences":[reference("ConfigMap", "parent", "bogus")]}});
    assert!(matches!(
        run(&m, patched(bogus, false)),
        Err(AdmitError::Body(BodyError::OwnerUidMismatch { .. }))
    ));
    // null is not a list: checked like any other value, and refused.
    assert!(matches!(
        run(
            &m,
            patched(json!({"metadata":{"ownerReferences":null}}), false)
        ),
        Err(AdmitError::Bind(BindError::OwnerReferencesNotList))
    ));
    // Removing owners (no owner written) needs nothing more than the patch grant.
    assert!(
        run(
            &m,
            patched(json!({"metadata":{"ownerReferences":[]}}), false)
        )
        .is_ok()
    );
}

#[test]
fn a_patch_writes_owner_references_only_where_it_may_delete() {
    let trigger_owner =
        json!({"metadata":{"ownerReferences":[reference("ContentSite", "blog", "u-1")]}});
    let parent_owner =
        json!({"metadata":{"ownerReferences":[reference("ConfigMap", "parent", "u-parent")]}});
    // patch alone: the trigger as owner, deleted, would take the object with it.
    let m = writer(&[Verb::Patch], &[]);
    for body in [&trigger_owner, &parent_owner] {
        let err = run(&m, patched(body.clone(), false)).unwrap_err();
        assert!(
            matches!(&err, AdmitError::Body(BodyError::OwnerNeedsDelete { reason, .. })
                if matches!(**reason, GrantError::NotGranted { verb: "delete", .. })),
            "{err}"
        );
        assert!(err.to_string().contains("needs delete on it too"), "{err}");
        // The apply strategy is a patch too.
        let mut apply = patched(body.clone(), false);
        if let RawIntent::Patch { strategy, .. } = &mut apply {
            *strategy = crate::intent::Strategy::Apply;
        }
        assert!(matches!(
            run(&m, apply),
            Err(AdmitError::Body(BodyError::OwnerNeedsDelete { .. }))
        ));
    }
    // With delete granted on the target, the same patches pass.
    let m = writer(&[Verb::Patch, Verb::Delete], &[]);
    for body in [&trigger_owner, &parent_owner] {
        assert!(run(&m, patched(body.clone(), false)).is_ok(), "{body}");
    }
    // create may name owners (a new object; `owned-by-trigger` is this).
    let m = writer(&[Verb::Create], &[]);
    assert!(run(&m, owned(json!([reference("ContentSite", "blog", "u-1")]))).is_ok());
}

#[test]
fn a_create_adds_owners_to_an_existing_object_only_where_it_may_delete() {
    let refs = json!([reference("ContentSite", "blog", "u-1")]);
    let live = |owners: Value| {
        json!({"apiVersion":"v1","kind":"ConfigMap",
               "metadata":{"name":"child","namespace":"shop","ownerReferences":owners}})
    };
    // create alone: whether the object exists matters, and an existing one without the
    // owner is not adopted.
    let m = writer(&[Verb::Create], &[]);
    let p = run(&m, owned(refs.clone())).unwrap().remove(0);
    assert!(adoption_matters(&m, &p));
    let err = check_adoption(&m, &p, &live(json!([]))).unwrap_err();
    assert!(
        matches!(&err, BodyError::AdoptionNeedsDelete { reason, .. }
            if matches!(**reason, GrantError::NotGranted { verb: "delete", .. })),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("adds owner ContentSite blog to ConfigMap shop/child, which already exists"),
        "{text}"
    );
    let rejection = Rejection {
        index: 0,
        error: err.into(),
    };
    assert!(rejection.is_refusal());
    assert!(
        rejection.to_string().starts_with("intent #0 refused: "),
        "{rejection}"
    );
    // Another owner carried already does not make this one carried.
    let other = json!([reference("ConfigMap", "parent", "u-parent")]);
    assert!(check_adoption(&m, &p, &live(other)).is_err());
    // The object already carries the owner (the plugin created it so): nothing new.
    assert!(check_adoption(&m, &p, &live(refs.clone())).is_ok());
    // A create writing no owner, or a plugin that may delete, needs no look.
    let plain = run(
        &m,
        create(json!({"apiVersion":"v1","kind":"ConfigMap",
        "metadata":{"name":"x","namespace":"shop"}})),
    )
    .unwrap()
    .remove(0);
    assert!(!adoption_matters(&m, &plain));
    let deleter = writer(&[Verb::Create, Verb::Delete], &[]);
    let p = run(&deleter, owned(refs)).unwrap().remove(0);
    assert!(!adoption_matters(&deleter, &p));
    assert!(check_adoption(&deleter, &p, &live(json!([]))).is_ok());
}

#[test]
fn null_finalizers_metadata_and_managed_fields_are_refused() {
    let m = writer(&[Verb::Create, Verb::Patch], &["example.com/cleanup"]);
    assert!(matches!(
        run(&m, patched(json!({"metadata":{"finalizers":null}}), false)),
        Err(AdmitError::Body(BodyError::FinalizersNotList))
    ));
    assert!(matches!(
        run(&m, owned(json!([])).clone_with_finalizers(Value::Null)),
        Err(AdmitError::Body(BodyError::FinalizersNotList))
    ));
    assert!(matches!(
        run(&m, patched(json!({"metadata":null}), false)),
        Err(AdmitError::Invalid(IntentError::BadMetadata))
    ));
    let err = run(
        &m,
        patched(json!({"metadata":{"managedFields":[{}]}}), false),
    )
    .unwrap_err();
    assert!(
        matches!(err, AdmitError::Body(BodyError::ManagedFields(_))),
        "{err}"
    );
}

#[test]
fn a_merge_patch_over_another_managers_field_needs_force() {
    let live = json!({"apiVersion":"v1","kind":"ConfigMap",
        "metadata":{"name":"victim","namespace":"shop","managedFields":[
            {"manager":"kubectl","operation":"Apply","fieldsV1":{"f:data":{"f:owned":{}}}}]},
        "data":{"owned":"a"}});
    let body = json!({"data":{"owned":"b"}});
    let mut m = writer(&[Verb::Patch], &[]);
    let p = run(&m, patched(body.clone(), false)).unwrap().remove(0);
    let err = check_merge(&m, &p, &live, "kubewasm-p").unwrap_err();
    assert_eq!(err.field, "data.owned");
    assert_eq!(err.manager, "kubectl");
    let rejection = Rejection {
        index: 0,
        error: err.into(),
    };
    assert!(
        rejection
            .to_string()
            .starts_with("intent #0 refused: merge patch of ConfigMap shop/victim changes data.owned, which field manager \"kubectl\" owns"),
        "{rejection}"
    );
    // A new key, or the owner itself patching: nothing taken.
    let p2 = run(&m, patched(json!({"data":{"new":"b"}}), false))
        .unwrap()
        .remove(0);
    assert!(check_merge(&m, &p2, &live, "kubewasm-p").is_ok());
    assert!(check_merge(&m, &p, &live, "kubectl").is_ok());
    // allowForce on the grant: the patch may take the field.
    m.grants[0].allow_force = true;
    assert!(check_merge(&m, &p, &live, "kubewasm-p").is_ok());
}

#[test]
fn owner_references_do_not_cross_namespaces() {
    let m = writer(&[Verb::Create], &[]);
    // The trigger is in shop; the object in other.
    let raw = create(json!({"apiVersion":"v1","kind":"ConfigMap",
        "metadata":{"name":"child","namespace":"other",
                    "ownerReferences":[reference("ContentSite", "blog", "u-1")]}}));
    let err = run(&m, raw).unwrap_err();
    assert!(
        matches!(err, AdmitError::Body(BodyError::CrossNamespaceOwner { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("cannot cross namespaces"), "{err}");
}

#[test]
fn finalizers_need_a_grant_naming_them() {
    let with = |f: Value| owned(json!([])).clone_with_finalizers(f);
    let m = writer(&[Verb::Create, Verb::Patch], &["example.com/cleanup"]);
    assert!(run(&m, with(json!(["example.com/cleanup"]))).is_ok());
    assert!(run(&m, with(json!([]))).is_ok());
    let err = run(&m, with(json!(["example.com/cleanup", "other.io/block"]))).unwrap_err();
    assert!(
        matches!(&err, AdmitError::Body(BodyError::FinalizerNotGranted { finalizer, .. }) if finalizer == "other.io/block"),
        "{err}"
    );
    assert!(matches!(
        run(&m, with(json!("x"))),
        Err(AdmitError::Body(BodyError::FinalizersNotList))
    ));
    // No finalizer granted: none may be added or kept, by create or patch.
    let m = writer(&[Verb::Create, Verb::Patch], &[]);
    assert!(run(&m, with(json!(["example.com/cleanup"]))).is_err());
    let keep = json!({"metadata":{"finalizers":["kubernetes.io/pvc-protection"]}});
    assert!(matches!(
        run(&m, patched(keep, false)),
        Err(AdmitError::Body(BodyError::FinalizerNotGranted { .. }))
    ));
}

#[test]
fn names_follow_the_resolved_resource_rule() {
    let m = Manifest {
        grants: vec![Grant {
            api_groups: vec!["".into()],
            kinds: vec!["*".into()],
            namespaces: vec![],
            verbs: vec![Verb::Create],
            allow_force: false,
            finalizers: vec![],
        }],
        ..writer(&[], &[])
    };
    let obj = |kind: &str, name: &str| {
        create(json!({"apiVersion":"v1","kind":kind,"metadata":{"name":name}}))
    };
    assert!(run(&m, obj("ConfigMap", "a.b-c")).is_ok());
    assert!(run(&m, obj("Service", "web")).is_ok());
    for (kind, name) in [
        ("ConfigMap", "Upper"),
        ("ConfigMap", "a_b"),
        ("Service", "1web"),
        ("Service", "a.b"),
        ("Namespace", "a.b"),
    ] {
        let err = run(&m, obj(kind, name)).unwrap_err();
        assert!(
            matches!(err, AdmitError::Bind(BindError::InvalidName { .. })),
            "{kind} {name}: {err}"
        );
    }
}

#[test]
fn the_grant_is_checked_on_the_resolved_resource() {
    /// Resolves every kind to another group's resource.
    struct Alias;
    impl Resolver for Alias {
        async fn resolve_kind(&self, _: &TypeRef) -> Result<KindInfo, ResolveError> {
            Ok(configmaps_in("evil.example"))
        }
    }
    let m = writer(&[Verb::Create], &[]);
    let raw = create(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}));
    let err = block_on(admit(
        &m,
        vec![raw],
        1 << 20,
        &trigger(Some("shop")),
        &Alias,
        &NoOwners,
    ))
    .unwrap_err();
    assert!(
        matches!(&err.error, AdmitError::Refused(GrantError::NotGranted { api_version, .. }) if api_version == "evil.example/v1"),
        "{err}"
    );
}

trait WithFinalizers {
    fn clone_with_finalizers(&self, f: Value) -> RawIntent;
}

impl WithFinalizers for RawIntent {
    fn clone_with_finalizers(&self, f: Value) -> RawIntent {
        let RawIntent::Create { object, .. } = self else {
            unreachable!("a create")
        };
        let mut v: Value = serde_json::from_str(object).unwrap();
        v["metadata"]["finalizers"] = f;
        create(v)
    }
}
