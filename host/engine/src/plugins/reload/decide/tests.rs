//! Reload's decision, without a cluster, files or a compiler: a source's state, what a
//! reconcile sees of it and the plugins at work in, the next state and the actions out.

use std::path::PathBuf;

use kubewasm_core::grant::ApprovedWatch;
use kubewasm_core::manifest::{Grant, Verb, Watch};
use kubewasm_core::resource::{ResourceRef, TypeRef};
use kubewasm_runtime::LimitOverrides;

use super::*;

impl Loadable for Manifest {
    fn manifest_mut(&mut self) -> &mut Manifest {
        self
    }
}

/// The plugins at work: name → (manifest, the source it serves from).
#[derive(Default)]
struct Env(BTreeMap<String, (Manifest, Origin)>);

impl Serving for Env {
    fn serving(&self, name: &str) -> Option<(&Manifest, String)> {
        let (m, origin) = self.0.get(name)?;
        Some((m, origin.to_string()))
    }

    fn served_from(&self, origin: &Origin) -> Option<String> {
        let (name, _) = self.0.iter().find(|(_, (_, o))| o == origin)?;
        Some(name.clone())
    }
}

fn configmaps() -> ResourceRef {
    ResourceRef::Kind(TypeRef::new("v1", "ConfigMap"))
}

fn secrets() -> ResourceRef {
    ResourceRef::Kind(TypeRef::new("v1", "Secret"))
}

fn watch(resource: ResourceRef) -> Watch {
    Watch {
        id: "w".into(),
        resource,
        namespace: None,
        label_selector: None,
        field_selector: None,
        fields: kubewasm_core::projection::Projection::whole(),
    }
}

/// Plugin `name` at `version`, watching `resources` and patching ConfigMaps.
fn manifest(name: &str, version: &str, resources: &[ResourceRef]) -> Manifest {
    Manifest {
        name: name.into(),
        version: version.into(),
        watches: resources.iter().cloned().map(watch).collect(),
        grants: vec![patch_configmaps()],
        reads: vec![],
    }
}

fn patch_configmaps() -> Grant {
    Grant {
        api_groups: vec![String::new()],
        kinds: vec!["ConfigMap".into()],
        namespaces: vec![],
        verbs: vec![Verb::Patch],
        allow_force: false,
        finalizers: vec![],
    }
}

/// Watching `resources`, patching ConfigMaps.
fn approval(resources: &[ResourceRef]) -> Approval {
    Approval {
        mode: Default::default(),
        watches: resources
            .iter()
            .map(|r| ApprovedWatch {
                resource: r.clone(),
                namespaces: vec![],
            })
            .collect(),
        grants: vec![patch_configmaps()],
        reads: vec![],
    }
}

fn origin(name: &str) -> Origin {
    Origin::File(PathBuf::from(format!("/plugins/{name}.wasm")))
}

fn file(name: &str) -> Box<PluginFile> {
    Box::new(PluginFile {
        path: PathBuf::from(format!("/plugins/{name}.wasm")),
        bytes: Vec::new(),
        digest: "d".into(),
        settings: None,
        overrides: LimitOverrides::default(),
        tenant: None,
    })
}

/// A look at file `name` at version `fingerprint`, its newest version `newest`.
fn look(name: &str, fingerprint: &str, newest: Newest, job: Job<Manifest>) -> Look<Manifest> {
    Look {
        item: Item {
            origin: origin(name),
            fingerprint: fingerprint.into(),
            newest,
            approval_now: Some(approval(&[configmaps()])),
            object: None,
            account: Some(name.into()),
        },
        access: None,
        job,
        pull_timeout: Duration::from_secs(60),
    }
}

fn read(name: &str) -> Newest {
    Newest::Read(file(name), Some(approval(&[configmaps()])))
}

/// The actions, as words.
fn said(d: &Decision<Manifest>) -> Vec<String> {
    d.actions
        .iter()
        .map(|a| match a {
            Action::Discard => "discard".to_string(),
            Action::Start(Newest::Read(f, _)) => format!("load {}", f.path.display()),
            Action::Start(_) => "start".to_string(),
            Action::Unload(name) => format!("unload {name}"),
            Action::Serve(m, _) => format!("serve {} {}", m.name, m.version),
        })
        .collect()
}

/// A source whose version at `fingerprint` was looked at.
fn looked_at(fingerprint: &str) -> SourceState {
    SourceState {
        fingerprint: fingerprint.into(),
        ..SourceState::default()
    }
}

/// The plugins at work, each serving from the file named after it.
fn env_with(manifests: &[Manifest]) -> Env {
    Env(manifests
        .iter()
        .map(|m| (m.name.clone(), (m.clone(), origin(&m.name))))
        .collect())
}

#[tokio::test]
async fn a_changed_file_is_loaded_in_a_job_then_replaces_the_version_serving() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    // Changed: its load starts; the old version serves meanwhile.
    let d = decide(&mut state, look("a", "fp2", read("a"), Job::None), &env);
    assert_eq!(said(&d), ["load /plugins/a.wasm"]);
    assert!(d.running);
    // The next reconcile while it runs: nothing new to do.
    let d = decide(
        &mut state,
        look("a", "fp2", read("a"), Job::Running(0)),
        &env,
    );
    assert!(said(&d).is_empty() && d.running);
    // It ended: the new version serves, and the file counts as looked at.
    let loaded = Job::Loaded(Ok(manifest("a", "2", &[configmaps()])));
    let d = decide(&mut state, look("a", "fp2", read("a"), loaded), &env);
    assert_eq!(said(&d), ["serve a 2"]);
    assert!(!d.running);
    assert_eq!(state.fingerprint, "fp2");
    assert_eq!(state.rejected, None);
}

#[tokio::test]
async fn an_unchanged_file_keeps_serving_and_wants_no_job() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    let d = decide(
        &mut state,
        look("a", "fp1", Newest::Unchanged, Job::None),
        &env,
    );
    assert_eq!(said(&d), ["discard"]);
}

#[tokio::test]
async fn a_load_failing_keeps_the_old_version_serving() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    let failed = Job::Loaded(Err("not a component".into()));
    let d = decide(&mut state, look("a", "fp2", read("a"), failed), &env);
    assert!(said(&d).is_empty(), "{:?}", said(&d));
    assert_eq!(state.rejected.as_deref(), Some("not a component"));
    // Looked at: the same bytes are not loaded again.
    assert!(state.unchanged("fp2"));
    let reason = state.object.failure.as_ref().map(|f| f.reason);
    assert_eq!(reason, Some("LoadFailed"));
}

#[tokio::test]
async fn an_approval_narrowed_unloads_the_version_serving() {
    // Serving a version that watches Secrets, whose approval now covers ConfigMaps only.
    let env = env_with(&[manifest("a", "1", &[configmaps(), secrets()])]);
    let mut state = looked_at("fp1");
    let d = decide(&mut state, look("a", "fp2", read("a"), Job::None), &env);
    // Unloaded at once, whatever becomes of the newest version, whose load starts.
    assert_eq!(said(&d), ["unload a", "load /plugins/a.wasm"]);
    // Its load ends, and it fits: it serves again, as a new plugin.
    let loaded = Job::Loaded(Ok(manifest("a", "2", &[configmaps()])));
    let env = Env::default();
    let d = decide(&mut state, look("a", "fp2", read("a"), loaded), &env);
    assert_eq!(said(&d), ["serve a 2"]);
}

#[tokio::test]
async fn a_version_asking_more_than_its_approval_is_refused_and_the_old_one_serves() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    let greedy = Job::Loaded(Ok(manifest("a", "2", &[configmaps(), secrets()])));
    let d = decide(&mut state, look("a", "fp2", read("a"), greedy), &env);
    assert!(said(&d).is_empty(), "{:?}", said(&d));
    let rejected = state.rejected.clone().unwrap_or_default();
    assert!(rejected.contains("Secret"), "{rejected}");
    assert!(matches!(state.object.approved, Some(Err(_))));
}

#[tokio::test]
async fn a_name_another_source_serves_is_refused() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = SourceState::default();
    let copy = Job::Loaded(Ok(manifest("a", "1", &[configmaps()])));
    let d = decide(&mut state, look("b", "fp", read("b"), copy), &env);
    assert!(said(&d).is_empty(), "{:?}", said(&d));
    let reason = state.object.failure.as_ref().map(|f| f.reason);
    assert_eq!(reason, Some("NameInUse"));
}

#[tokio::test]
async fn a_renamed_plugin_takes_its_old_name_out() {
    // Source a serves plugin "old"; its newest version calls itself "new".
    let mut env = Env::default();
    let old = manifest("old", "1", &[configmaps()]);
    env.0.insert("old".into(), (old, origin("a")));
    let mut state = looked_at("fp1");
    let renamed = Job::Loaded(Ok(manifest("new", "1", &[configmaps()])));
    let d = decide(&mut state, look("a", "fp2", read("a"), renamed), &env);
    assert_eq!(said(&d), ["unload old", "serve new 1"]);
}

#[tokio::test]
async fn an_account_denied_its_reads_unloads_and_refuses_until_granted() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    let mut denied = look("a", "fp1", Newest::Unchanged, Job::None);
    denied.access = Some(AccessVerdict::Denied {
        why: "may not list configmaps".into(),
        missing: vec!["list configmaps cluster-wide".into()],
    });
    let d = decide(&mut state, denied, &env);
    assert_eq!(said(&d), ["unload a", "discard"]);
    assert!(state.access_refused);
    assert_eq!(state.missing_reads, ["list configmaps cluster-wide"]);
    // Granted while nothing changed: looked at again at once (it has no version to load
    // in this reconcile).
    let mut allowed = look("a", "fp1", Newest::Unchanged, Job::None);
    allowed.access = Some(AccessVerdict::Allowed);
    let d = decide(&mut state, allowed, &Env::default());
    assert!(said(&d).is_empty());
    assert!(!state.unchanged("fp1"));
    assert!(state.missing_reads.is_empty());
}

#[tokio::test]
async fn an_unanswered_review_keeps_the_version_serving() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    let mut unanswered = look("a", "fp1", Newest::Unchanged, Job::None);
    unanswered.access = Some(AccessVerdict::Unanswered("no answer".into()));
    let d = decide(&mut state, unanswered, &env);
    assert_eq!(said(&d), ["discard"]);
}

#[tokio::test]
async fn registry_trouble_is_retried_with_backoff_and_the_old_version_serves() {
    let env = env_with(&[manifest("a", "1", &[configmaps()])]);
    let mut state = looked_at("fp1");
    let newest = Newest::Failed {
        failure: Failure::new("RegistryUnavailable", "registry down"),
        retry: true,
    };
    let d = decide(&mut state, look("a", "fp2", newest, Job::None), &env);
    assert_eq!(said(&d), ["discard"]);
    // Not tried again before its backoff.
    assert!(state.unchanged("fp2"));
    assert!(state.retry_at.is_some());
}

#[test]
fn a_removed_file_takes_its_plugin_and_unseen_objects_stay() {
    let mut sources: BTreeMap<Origin, SourceState> = BTreeMap::from([
        (origin("a"), looked_at("fp")),
        (origin("b"), looked_at("fp")),
        (Origin::Object("c".into()), looked_at("fp")),
    ]);
    let listed = HashSet::from([origin("b")]);
    let looked_at = Looked {
        files: true,
        objects: false,
    };
    let gone = gone(&mut sources, &listed, looked_at);
    assert_eq!(gone, [origin("a")]);
    // The Plugin objects were not looked at this time (their cache not synced): kept.
    assert_eq!(sources.len(), 2);
    assert!(sources.contains_key(&Origin::Object("c".into())));
}
