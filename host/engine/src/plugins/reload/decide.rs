//! Reload's decision for one source, without I/O: from what the reloader knows of the
//! source ([`SourceState`]), its newest version, the approval in force, its account's
//! access and where its job stands ([`Look`]), to the source's next state and the actions
//! to take ([`Action`]: start or stop its job, unload a plugin, put a loaded version to
//! work; nothing: the version serving keeps serving). [`super::Reloader`] gathers the
//! inputs and carries the actions out.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use kubewasm_core::grant::{Approval, approve, check_approval, still_fits};
use kubewasm_core::manifest::Manifest;
use kubewasm_core::plugin_object::{Condition, Permissions};
use kubewasm_runtime::Loaded;
use kubewasm_runtime::PluginFile;

use crate::Error;
use crate::apply::identity::AccessVerdict;
use crate::plugins::objects::{Busy, Failure, Fetch, STAGE_LOADING, STAGE_PULLING, TagMove};

use crate::plugins::environment::Origin;

/// What the reloader knows about one source of a plugin.
#[derive(Default)]
pub(super) struct SourceState {
    /// Fingerprint of the last version looked at (loaded or rejected); empty: look again.
    pub(super) fingerprint: String,
    /// Why the newest version was rejected.
    pub(super) rejected: Option<String>,
    /// Plugin objects only: what serves (pinned reference, digest) and how the newest
    /// spec fared.
    pub(super) object: ObjectOutcome,
    /// Plugin objects only: the generation looked at last.
    pub(super) object_generation: i64,
    /// Plugin objects only: the object's conditions as last read, for transition times.
    pub(super) object_previous: Vec<Condition>,
    /// A failure worth trying again (the registry down, a secret missing): when, and how
    /// many tries so far. Until then the source counts as unchanged.
    pub(super) retry_at: Option<tokio::time::Instant>,
    retries: u32,
    /// Refused because its ServiceAccount may not read what it is approved to (or that
    /// could not be asked): looked at again at the next access review.
    pub(super) access_refused: bool,
    /// The read rules its ServiceAccount was found to lack, as the last review said.
    pub(super) missing_reads: Vec<String>,
    /// A job (load, or pull and load) runs for its newest version: a retry due is being
    /// made, so it does not wake the reloader again before the job ends.
    pub(super) running: bool,
}

/// First retry of a failed pull, doubling per try up to [`RETRY_MAX`]: registry trouble
/// is retried with backoff, never hot.
const RETRY_BASE: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(300);

impl SourceState {
    /// Whether `fingerprint` is what was last looked at, and no retry of it is due.
    pub(super) fn unchanged(&self, fingerprint: &str) -> bool {
        self.fingerprint == fingerprint
            && self
                .retry_at
                .is_none_or(|at| tokio::time::Instant::now() < at)
    }

    /// `fingerprint` was looked at, and nothing of it is to be tried again.
    fn looked_at(&mut self, fingerprint: String) {
        self.fingerprint = fingerprint;
        self.retries = 0;
        self.retry_at = None;
    }
}

/// How a Plugin object's newest spec fared, and what serves for it.
#[derive(Default, Clone)]
pub(super) struct ObjectOutcome {
    pub(super) serving_module: Option<(String, String)>,
    pub(super) failure: Option<Failure>,
    pub(super) pulled: Option<bool>,
    /// Whether the newest module fits its approval; if not, why (the reason `Ready` says
    /// too).
    pub(super) approved: Option<Result<(), Failure>>,
    pub(super) requested: Option<Permissions>,
    /// The job running for the newest spec, and that spec's generation.
    pub(super) busy: Option<(i64, Busy)>,
    /// The tag of the newest spec moved when it was last pulled.
    pub(super) moved: Option<TagMove>,
}

/// One source's newest version, read: the file (with the approval that bounds it), or
/// why it could not be read; `Unchanged` when its fingerprint says nothing changed.
pub(crate) enum Newest {
    Unchanged,
    Read(Box<PluginFile>, Option<Approval>),
    /// A Plugin object's module to pull, then load under the approval.
    Fetch(Box<Fetch>, Option<Approval>),
    /// Unreadable (a file mid-write, bad settings, a failed pull): the fingerprint is
    /// kept only when `retry` is false.
    Failed {
        failure: Failure,
        retry: bool,
    },
}

/// One source to look at in a reconcile.
pub(crate) struct Item {
    pub(super) origin: Origin,
    pub(super) fingerprint: String,
    pub(super) newest: Newest,
    /// The approval in force for this source now, when known even if the newest version
    /// could not be read (a Plugin's permissions): the running version must fit it.
    pub(super) approval_now: Option<Approval>,
    /// Plugin objects: the generation, and the conditions as last read.
    pub(super) object: Option<ObjectSeen>,
    /// The plugin this source is approved as (its file's or object's name), when known.
    pub(super) account: Option<String>,
}

/// A Plugin object as a reconcile saw it: generation, and its conditions as last read.
pub(super) type ObjectSeen = (i64, Vec<Condition>);

/// A loaded version as the decision sees it: its manifest, which the approval bounds.
pub(crate) trait Loadable {
    fn manifest_mut(&mut self) -> &mut Manifest;
}

impl Loadable for Loaded {
    fn manifest_mut(&mut self) -> &mut Manifest {
        &mut self.plugin.manifest
    }
}

/// The plugins at work, as the decision sees them.
pub(crate) trait Serving {
    /// The manifest of the plugin `name` at work, and where it was loaded from.
    fn serving(&self, name: &str) -> Option<(&Manifest, String)>;

    /// The plugin serving from `origin` (an older version when the newest was rejected).
    fn served_from(&self, origin: &Origin) -> Option<String>;
}

/// What a file's job came to: the version loaded, or why not.
pub(crate) type FileJob<L> = Result<L, String>;

/// What a Plugin object's job came to: its pull, then the load of what it pulled.
pub(crate) struct ObjectJob<L> {
    /// The fingerprint to record (the spec's, and the digest's once resolved).
    pub(crate) fingerprint: String,
    /// The module loaded (None: its tag still names the digest looked at), or why the
    /// pull failed.
    pub(crate) result: Result<Option<ObjectLoad<L>>, Failure>,
}

/// A Plugin object's module, pulled and loaded (or not).
pub(crate) struct ObjectLoad<L> {
    pub(crate) pinned: String,
    pub(crate) digest: String,
    pub(crate) moved: Option<TagMove>,
    pub(crate) loaded: FileJob<L>,
}

/// Where the job of a source's newest version stands.
pub(crate) enum Job<L> {
    /// None runs for it (one of an older version is stopped when it starts).
    None,
    /// It runs, at this stage.
    Running(u8),
    /// A file's load ended.
    Loaded(FileJob<L>),
    /// A Plugin object's pull and load ended.
    Fetched(ObjectJob<L>),
}

/// One source as a reconcile looks at it.
pub(crate) struct Look<L> {
    pub(crate) item: Item,
    /// Whether its plugin's account may read what its approval lets it (None: not asked).
    pub(crate) access: Option<AccessVerdict>,
    pub(crate) job: Job<L>,
    /// How long one pull may take, as a Plugin's status says while it pulls.
    pub(crate) pull_timeout: Duration,
}

/// What to do for one source, in order.
pub(crate) enum Action<L> {
    /// Stop its job: that version is not wanted (unchanged, refused or unreadable).
    Discard,
    /// Start the job of its newest version ([`Newest::Read`]: a load; [`Newest::Fetch`]:
    /// a pull, then a load).
    Start(Newest),
    /// Take this plugin out of the environment (its queue closes, its calls are dropped).
    Unload(String),
    /// Put this version to work under its name, bounded by the approval: it replaces the
    /// version serving under that name (its queue stays), or starts new.
    Serve(L, Option<Approval>),
}

/// A source's decision.
pub(crate) struct Decision<L> {
    pub(crate) actions: Vec<Action<L>>,
    /// Its job runs: the reconcile after it ends takes the result.
    pub(crate) running: bool,
}

/// Decide what becomes of one source: refused or unloaded for its account's access, its
/// serving version unloaded when the approval in force no longer covers it, its job
/// started or its result taken, a good version put to work. `state` becomes the source's
/// next state.
pub(crate) fn decide<L: Loadable>(
    state: &mut SourceState,
    look: Look<L>,
    env: &dyn Serving,
) -> Decision<L> {
    let mut d = Decider {
        state,
        origin: look.item.origin.clone(),
        serving: env.served_from(&look.item.origin),
        env,
        unloaded: HashSet::new(),
        actions: Vec::new(),
    };
    let running = d.run(look);
    Decision {
        actions: d.actions,
        running,
    }
}

/// One decision under way: the source, what it has decided so far.
struct Decider<'a, L> {
    state: &'a mut SourceState,
    origin: Origin,
    /// The plugin this source serves, as the decision goes.
    serving: Option<String>,
    env: &'a dyn Serving,
    /// Plugins this decision has unloaded (the environment still has them).
    unloaded: HashSet<String>,
    actions: Vec<Action<L>>,
}

/// Whether a step of the decision has settled it.
enum Flow {
    Go,
    /// Decided; its job runs (true) or not.
    Done(bool),
}

impl<L: Loadable> Decider<'_, L> {
    fn run(&mut self, look: Look<L>) -> bool {
        let Look {
            item,
            access,
            job,
            pull_timeout,
        } = look;
        let Item {
            fingerprint,
            newest,
            approval_now,
            object,
            ..
        } = item;
        let state = &mut *self.state;
        state.running = false;
        // A generation is observed once its job has ended (status says so then; while a
        // Plugin's job runs, status reports the generation it works on).
        let observed = state.object_generation;
        let generation = object.as_ref().map(|(g, _)| *g).unwrap_or_default();
        if let Some((generation, previous)) = object {
            state.object_generation = generation;
            state.object_previous = previous;
        }
        if let Flow::Done(running) = self.access(access.as_ref(), &newest, &fingerprint) {
            return running;
        }
        if !matches!(newest, Newest::Fetch(..)) {
            self.state.object.busy = None;
        }
        if let Newest::Unchanged = newest {
            // Back to the version it serves: a job for another one is not wanted.
            self.actions.push(Action::Discard);
            return false;
        }
        // The approval in force now bounds what may keep running, whatever becomes of the
        // newest version: narrowing it unloads a version that uses more.
        if let Some(approval) = &approval_now {
            self.narrowed(approval);
        }
        // The fingerprint is recorded only with the job's result: until then every
        // reconcile sees the source as changed, and asks again.
        let (loaded, approval, fingerprint, module) = match newest {
            Newest::Unchanged => return false,
            Newest::Failed { failure, retry } => {
                self.actions.push(Action::Discard);
                self.failed(fingerprint, failure, retry);
                return false;
            }
            Newest::Read(file, approval) => match job {
                Job::Loaded(loaded) => (loaded, approval, fingerprint, None),
                job => return self.runs(job, Newest::Read(file, approval), observed),
            },
            Newest::Fetch(fetch, approval) => match job {
                Job::Fetched(done) => {
                    self.state.object.busy = None;
                    match self.fetched(done) {
                        Some((loaded, fingerprint, module)) => {
                            (loaded, approval, fingerprint, Some(module))
                        }
                        None => return false,
                    }
                }
                job => {
                    self.state.object.busy =
                        busy(&fetch, &job, pull_timeout).map(|busy| (generation, busy));
                    return self.runs(job, Newest::Fetch(fetch, approval), observed);
                }
            },
        };
        self.state.looked_at(fingerprint);
        self.accept(loaded, approval, module);
        false
    }

    /// The refusal, or the unload, the account's access verdict calls for.
    fn access(
        &mut self,
        access: Option<&AccessVerdict>,
        newest: &Newest,
        fingerprint: &str,
    ) -> Flow {
        let state = &mut *self.state;
        // The approval's reads bound by the plugin's own account: refused before it loads,
        // unloaded when lost. A review the API server did not answer refuses a load but
        // leaves a version at work serving (an API server outage must not unload every
        // plugin; it is asked again at the next review).
        state.missing_reads = match access {
            Some(AccessVerdict::Denied { missing, .. }) => missing.clone(),
            _ => Vec::new(),
        };
        let (reason, why, unload) = match access {
            Some(AccessVerdict::Denied { why, .. }) => ("AccessDenied", why.clone(), true),
            Some(AccessVerdict::Unanswered(why)) => ("AccessUnknown", why.clone(), false),
            // Granted since it was refused, while nothing changed: this reconcile has no
            // newest version to load (the refusal recorded it as looked at), so the next
            // one must look again, and is asked for now (a Plugin's retry is due at once;
            // a file's comes with the next review). Until then it stays refused.
            Some(AccessVerdict::Allowed) | None
                if state.access_refused
                    && matches!(newest, Newest::Unchanged)
                    && self.serving.is_none() =>
            {
                state.fingerprint.clear();
                state.retry_at = Some(tokio::time::Instant::now());
                return Flow::Done(false);
            }
            Some(AccessVerdict::Allowed) | None => {
                state.access_refused = false;
                return Flow::Go;
            }
        };
        if unload
            && let Some(name) = self.serving.clone()
            && self.unload(&name)
        {
            tracing::error!(plugin = %name, source = %self.origin, error = %why, "plugin unloaded: its ServiceAccount may not read what it is approved to read");
            self.serving = None;
            self.state.object.serving_module = None;
        }
        let loading = !matches!(newest, Newest::Unchanged);
        if !(loading || unload) {
            // Unanswered while serving, nothing new: keep serving; every reconcile
            // asks again.
            tracing::warn!(source = %self.origin, error = %why, "cannot review the plugin's access; it keeps serving");
            return Flow::Go;
        }
        self.actions.push(Action::Discard);
        let state = &mut *self.state;
        state.object.busy = None;
        if state.rejected.as_deref() != Some(why.as_str()) {
            tracing::error!(source = %self.origin, error = %why, still_serving = self.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
        }
        if loading {
            state.fingerprint = fingerprint.to_string();
        }
        state.access_refused = true;
        state.rejected = Some(why.clone());
        state.object.approved = Some(Err(Failure::new(reason, why.clone())));
        state.object.failure = Some(Failure::new(reason, why));
        Flow::Done(false)
    }

    /// Unload the version serving when `approval` no longer covers it.
    fn narrowed(&mut self, approval: &Approval) {
        let Some(name) = self.serving.clone() else {
            return;
        };
        let Some(why) = self
            .serving(&name)
            .and_then(|(manifest, _)| still_approved(manifest, approval).err())
        else {
            return;
        };
        tracing::error!(plugin = %name, source = %self.origin, error = %why, "plugin unloaded: its approval no longer covers it");
        self.unload(&name);
        self.serving = None;
        self.state.object.serving_module = None;
    }

    /// The job of `newest` has not ended: it runs (started now when none did).
    fn runs(&mut self, job: Job<L>, newest: Newest, observed: i64) -> bool {
        if let Job::None = job {
            self.actions.push(Action::Start(newest));
        }
        self.state.object_generation = observed;
        self.state.running = true;
        true
    }

    /// A Plugin object's ended job: its load, the fingerprint to record and the module
    /// pulled; None when there is nothing to load (the pull failed, or the tag still
    /// names the digest looked at).
    fn fetched(&mut self, job: ObjectJob<L>) -> Option<(FileJob<L>, String, (String, String))> {
        let ObjectJob {
            fingerprint,
            result,
        } = job;
        match result {
            Err(failure) => {
                let retry = failure.retry();
                self.failed(fingerprint, failure, retry);
                None
            }
            Ok(None) => {
                self.state.looked_at(fingerprint);
                None
            }
            Ok(Some(load)) => {
                self.state.object.pulled = Some(true);
                self.state.object.moved = load.moved;
                Some((load.loaded, fingerprint, (load.pinned, load.digest)))
            }
        }
    }

    /// A loaded version: put to work when the approval covers it and its name is its own;
    /// else rejected, and the version serving keeps serving.
    fn accept(
        &mut self,
        loaded: FileJob<L>,
        approval: Option<Approval>,
        module: Option<(String, String)>,
    ) {
        let mut loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                self.reject(e.clone(), "LoadFailed", e);
                self.state.object.approved = None;
                return;
            }
        };
        let manifest = loaded.manifest_mut();
        self.state.object.requested = Some(Permissions::requested_by(manifest));
        if let Err((reason, why)) = confine(&self.origin, manifest) {
            self.state.object.approved = Some(Err(Failure::new(reason, why.clone())));
            self.reject(why.clone(), reason, why);
            return;
        }
        // The operator's approval, not the plugin's own answer, bounds what it may hold:
        // a version asking for more is refused and the old one keeps serving.
        if let Err(e) = approve(manifest, approval.as_ref()) {
            let e = Error::Load(kubewasm_runtime::Error::NotApproved(e)).to_string();
            self.state.object.approved = Some(Err(Failure::new("NotApproved", e.clone())));
            self.reject(e.clone(), "NotApproved", e);
            return;
        }
        self.state.object.approved = Some(Ok(()));
        let name = manifest.name.clone();
        if let Some(why) = self.name_refused(&name) {
            let (reason, why) = why;
            self.reject(why.clone(), reason, why);
            return;
        }
        self.state.rejected = None;
        self.state.object.failure = None;
        if let Some(module) = module {
            self.state.object.serving_module = Some(module);
        }
        if let Some(old_name) = self.serving.clone().filter(|n| *n != name)
            && self.unload(&old_name)
        {
            tracing::info!(plugin = %old_name, source = %self.origin, "plugin renamed to {name}");
        }
        self.actions.push(Action::Serve(loaded, approval));
        self.serving = Some(name);
    }

    /// Why a version naming itself `name` may not serve from this source, if it may not:
    /// a Plugin object is named after its plugin, and a name another source serves is
    /// taken.
    fn name_refused(&self, name: &str) -> Option<(&'static str, String)> {
        if let Origin::Object(object_name) | Origin::Shadow(object_name) = &self.origin
            && object_name != name
        {
            return Some((
                "NameMismatch",
                format!(
                    "the module describes itself as plugin {name:?}: a Plugin object is named after its plugin"
                ),
            ));
        }
        let (_, other) = self.serving(name)?;
        if self.serving.as_deref() == Some(name) {
            return None;
        }
        let e = Error::DuplicateName {
            origin: self.origin.to_string(),
            name: name.to_string(),
            other,
        };
        Some(("NameInUse", e.to_string()))
    }

    /// The newest version failed before any load: said once per failure, retried with
    /// backoff when `retry` (registry trouble), else when it changes.
    fn failed(&mut self, fingerprint: String, failure: Failure, retry: bool) {
        let state = &mut *self.state;
        // Said once per failure, not at every retry of the same one.
        if state.object.failure.as_ref() != Some(&failure) {
            tracing::error!(source = %self.origin, error = %failure.message, still_serving = self.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
        }
        state.fingerprint = fingerprint;
        if retry {
            let backoff = RETRY_BASE
                .saturating_mul(1 << state.retries.min(10))
                .min(RETRY_MAX);
            state.retries += 1;
            state.retry_at = Some(tokio::time::Instant::now() + backoff);
        } else {
            state.retries = 0;
            state.retry_at = None;
        }
        state.rejected = Some(failure.message.clone());
        state.object.pulled = failure.is_pull().then_some(false);
        state.object.approved = failure.is_approval().then(|| Err(failure.clone()));
        state.object.failure = Some(failure);
    }

    /// The newest version is rejected: the version serving, if any, keeps serving.
    fn reject(&mut self, error: String, reason: &'static str, why: String) {
        tracing::error!(error = %error, source = %self.origin, still_serving = self.serving.as_deref().unwrap_or("nothing"), "plugin rejected");
        self.state.rejected = Some(why.clone());
        self.state.object.failure = Some(Failure::new(reason, why));
    }

    /// The plugin `name` at work, unless this decision unloaded it.
    fn serving(&self, name: &str) -> Option<(&Manifest, String)> {
        if self.unloaded.contains(name) {
            return None;
        }
        self.env.serving(name)
    }

    /// Take the plugin `name` out of the environment; false when it is not at work.
    fn unload(&mut self, name: &str) -> bool {
        if self.serving(name).is_none() {
            return false;
        }
        self.unloaded.insert(name.to_string());
        self.actions.push(Action::Unload(name.to_string()));
        true
    }
}

/// Which kinds of sources a reconcile looked at: a kind not looked at this time (the
/// Plugin objects' cache not synced) keeps its sources as they are.
#[derive(Clone, Copy)]
pub(super) struct Looked {
    pub(super) files: bool,
    pub(super) objects: bool,
}

/// The sources that disappeared (not `listed`, of a kind looked at), taken out of
/// `sources`: the plugins they serve are to be unloaded.
pub(super) fn gone(
    sources: &mut BTreeMap<Origin, SourceState>,
    listed: &HashSet<Origin>,
    looked_at: Looked,
) -> Vec<Origin> {
    let gone: Vec<Origin> = sources
        .keys()
        .filter(|o| !listed.contains(*o))
        .filter(|o| match o {
            Origin::File(_) => looked_at.files,
            Origin::Object(_) | Origin::Shadow(_) | Origin::Namespaced { .. } => looked_at.objects,
        })
        .cloned()
        .collect();
    for origin in &gone {
        sources.remove(origin);
    }
    gone
}

/// What a Plugin's status says while the job of `fetch` runs (None: nothing; a rescan's
/// look at a tag says nothing until the tag moved).
fn busy<L>(fetch: &Fetch, job: &Job<L>, deadline: Duration) -> Option<Busy> {
    let module = fetch.module().to_string();
    let stage = match job {
        Job::Running(stage) => *stage,
        _ => 0,
    };
    match stage {
        STAGE_LOADING.. => Some(Busy::Loading { module }),
        STAGE_PULLING => Some(Busy::Pulling { module, deadline }),
        _ if fetch.recheck() => None,
        _ => Some(Busy::Pulling { module, deadline }),
    }
}

/// Whether a running version still fits `approval` ([`still_fits`]), and if not, why.
fn still_approved(running: &Manifest, approval: &Approval) -> Result<(), String> {
    if still_fits(running, Some(approval)) {
        return Ok(());
    }
    Err(match check_approval(running, Some(approval)) {
        Err(e) => e.to_string(),
        Ok(()) => format!(
            "plugin {}: a finalizer it was given is no longer approved",
            running.name
        ),
    })
}

/// A NamespacedPlugin's module confined to its namespace (`core::tenant::
/// confine_manifest`), then named `NS/P` in the host once it calls itself `P`; any other
/// module as it is. `Err`: the reason and message to refuse it with.
fn confine(origin: &Origin, m: &mut Manifest) -> Result<(), (&'static str, String)> {
    let Origin::Namespaced { namespace, name } = origin else {
        return Ok(());
    };
    if m.name != *name {
        return Err((
            "NameMismatch",
            format!(
                "the module describes itself as plugin {:?}: a NamespacedPlugin is named after its plugin",
                m.name
            ),
        ));
    }
    let offline = kubewasm_core::tenant::offline;
    kubewasm_core::tenant::confine_manifest(namespace, m, &offline)
        .map_err(|c| (c.reason, c.message))?;
    m.name = format!("{namespace}/{name}");
    Ok(())
}

#[cfg(test)]
mod tests;
