//! Changing a running module's logic without a restart. A new version is
//! verified before anything changes (it loads and honours the contract,
//! keeps the module's parent kind, the kinds it adds are listed, and a dry
//! run over every cached parent fails none that the active version
//! reconciles), then swapped in atomically: reconciles in flight finish on
//! the version they started with, every later one runs on the new one with
//! the caches of its kinds. Every parent is then reconciled again at a
//! bounded rate, and for a watch window the new version is on probation:
//! failing on more parents than allowed returns the host to the previous
//! version by itself, which then reconciles every parent again. The
//! previous version's watches run until the window closes, so a rollback
//! needs no new list; then the watches of kinds only it used stop.
//!
//! The dry run is the swap's plan (`swap_plan`): what the new version would
//! change, parent by parent. A LogicModule's rollout (`rollout`) may hold a
//! version whose plan passes its gates' limits until its digest is
//! approved, or serve it to a canary first: the canary's parents only, for
//! the watch window, with failures there rolling it back; then every parent.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::rollout::{Canary, Rollout};
use super::shadow::{EndedShadow, Shadow};
use super::swap_plan::{SwapPlan, plan_swap};
use crate::modules::{KindInfo, LogicModule, Manifest, ModuleEngine, ModuleSlot, ModuleSource, WatchedFile, digest};
use crate::operator::Context;
use crate::operator::cached_object::CachedObject;
use crate::operator::kinds::Kinds;
use crate::operator::metrics::ModuleMetrics;
use crate::operator::references::ParentKey;
use crate::operator::serving::Serving;

/// How far a new module version is trusted.
#[derive(Clone, Debug)]
pub struct SwapPolicy {
    /// Parents the active version reconciles that the new one may fail in
    /// the dry run and still be swapped in.
    pub dry_run_failures_allowed: usize,
    /// Parents the new version may fail on within the watch window before
    /// the host rolls it back.
    pub rollback_failures_allowed: usize,
    /// How long after a swap failures roll it back.
    pub watch_window: Duration,
    /// Parents reconciled per second after a swap (the rollout).
    pub rollout_per_second: u32,
    /// How often watched module files are looked at.
    pub poll_interval: Duration,
    /// How long the first list of a kind a new version adds may take; a
    /// version whose kinds cannot be listed by then is refused.
    pub cache_sync_timeout: Duration,
}

impl Default for SwapPolicy {
    fn default() -> Self {
        Self {
            dry_run_failures_allowed: 0,
            rollback_failures_allowed: 0,
            watch_window: Duration::from_secs(120),
            rollout_per_second: 50,
            poll_interval: Duration::from_secs(1),
            cache_sync_timeout: Duration::from_secs(30),
        }
    }
}

/// Module versions kept compiled (the serving one among them), so going
/// back to one (by hand, or a rollback) costs no compile: as many as the
/// compile cache keeps on disk.
const RECENT_VERSIONS: usize = crate::modules::compiler::KEEP_COMPILED;

/// A module's swap state: the probation of its newest version, the
/// versions it recently ran or compiled, the last rollback, and which
/// parents the serving version has reconciled. Shared with the module's
/// sources, which compile ahead (also on a standby) and report on it.
pub struct SwapState {
    probation: Mutex<Option<Probation>>,
    recent: Mutex<VecDeque<Arc<LogicModule>>>,
    /// On a standby: the version the leader serves, held compiled, to take
    /// over with (and its probation, if it is on one); at start, the version
    /// the module's LogicModule says was serving.
    on_takeover: Mutex<Option<Takeover>>,
    /// Counts compiles and the versions held compiled.
    metrics: ModuleMetrics,
    last_rollback: Mutex<Option<Rollback>>,
    reconciled: Mutex<Reconciled>,
    /// Whether anyone reports `reconciled` (a LogicModule follower); until
    /// then a reconcile pays nothing for it.
    counting: std::sync::atomic::AtomicBool,
    /// Bumped on every swap and rollback, so sources can report.
    changes: watch::Sender<u64>,
    /// A version serving a canary's parents, while it does.
    canary: arc_swap::ArcSwapOption<CanaryServing>,
    /// A version running beside the serving one, writing nothing.
    pub(super) shadow: arc_swap::ArcSwapOption<Shadow>,
    /// The last shadow whose window ended.
    pub(super) shadow_ended: Mutex<Option<EndedShadow>>,
}

/// A version on a canary: it serves the parents `selection` picks until
/// `until`, the version serving serves the others.
pub struct CanaryServing {
    pub serving: Arc<Serving>,
    pub selection: Canary,
    pub until: SystemTime,
    /// How many parents it picked when it started.
    pub parents: usize,
}

impl SwapState {
    pub fn new(metrics: ModuleMetrics) -> Self {
        Self {
            probation: Mutex::default(),
            recent: Mutex::default(),
            on_takeover: Mutex::default(),
            metrics,
            last_rollback: Mutex::default(),
            reconciled: Mutex::default(),
            counting: std::sync::atomic::AtomicBool::new(false),
            changes: watch::Sender::new(0),
            canary: arc_swap::ArcSwapOption::empty(),
            shadow: arc_swap::ArcSwapOption::empty(),
            shadow_ended: Mutex::default(),
        }
    }
}

/// The version to serve on becoming the leader (or at start).
#[derive(Clone)]
pub struct Takeover {
    pub module: Arc<LogicModule>,
    /// When that version went live recently: the one before it, to roll
    /// back to, and when its watch window closes.
    pub probation: Option<PreviousVersion>,
}

/// The version a module on probation would roll back to.
#[derive(Clone)]
pub struct PreviousVersion {
    pub module: Arc<LogicModule>,
    /// When the probation ends.
    pub until: SystemTime,
}

/// A probation as the module's sources report it (LogicModule status), so
/// that a standby taking over, or a restart, keeps its rollback window.
#[derive(Clone)]
pub struct ProbationReport {
    /// The version on probation.
    pub digest: String,
    /// The version it would roll back to.
    pub previous: Arc<LogicModule>,
    pub until: SystemTime,
}

/// A rollback, as the module's sources report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollback {
    /// The version that failed.
    pub from: String,
    /// The version serving again.
    pub to: String,
    pub reason: String,
}

/// The parents the serving version has reconciled without error (hashed:
/// one word per parent, not its name).
#[derive(Default)]
struct Reconciled {
    digest: String,
    parents: HashSet<u64>,
}

/// The window after a swap in which failures roll it back. It holds both
/// versions with their caches: a rollback lists nothing again.
struct Probation {
    candidate: Arc<Serving>,
    previous: Arc<Serving>,
    until: Instant,
    /// `until` on the wall clock, for the sources to report.
    until_wall: SystemTime,
    /// Parents the candidate failed on, and why.
    failed: BTreeMap<ParentKey, String>,
    /// The candidate serves a canary only; `previous` still serves the rest.
    canary: bool,
}

impl Probation {
    fn new(candidate: Arc<Serving>, previous: Arc<Serving>, until_wall: SystemTime) -> Self {
        let left = until_wall.duration_since(SystemTime::now()).unwrap_or_default();
        Self { candidate, previous, until: Instant::now() + left, until_wall, failed: BTreeMap::new(), canary: false }
    }
}

/// What became of an offered version.
#[derive(Debug, PartialEq, Eq)]
pub enum Offered {
    /// The same bytes as the active version: nothing to do.
    Unchanged,
    /// Refused; the active version keeps serving.
    Refused(Refusal),
    /// Serving now, after its plan.
    Swapped { plan: SwapPlan },
    /// Serving the canary's parents, after its plan.
    Canary { plan: SwapPlan, parents: usize },
    /// Verified, and held by the rollout's gates until its digest is
    /// approved: why; the active version keeps serving.
    AwaitingApproval { plan: SwapPlan, held_by: Vec<String> },
}

/// What the checks that need no cluster state found for a version: it
/// loaded and honours the contract (else it would be a load refusal), and
/// whether its kinds can replace those of the version serving when it was
/// checked (the same parent kind; owned and read kinds the host can watch).
/// A standby runs them right after compiling ahead; the leader reuses the
/// result while that version still serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prechecked {
    /// The digest of the serving version it was checked against.
    pub against: String,
    pub kinds: Result<(), Refusal>,
}

impl Prechecked {
    pub fn new(active: &LogicModule, candidate: &LogicModule) -> Self {
        let kinds = same_parent(active.manifest(), candidate.manifest())
            .map_err(|message| Refusal::new("ParentKindChanged", message))
            .and_then(|()| {
                Kinds::from_manifest(candidate.manifest())
                    .map(drop)
                    .map_err(|error| Refusal::new("UnsupportedKind", error.to_string()))
            });
        Self { against: active.digest().to_owned(), kinds }
    }
}

/// Why a version was refused: a stable reason (conditions, events) and
/// what exactly was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// `LoadFailed` (not a component, does not compile, breaks the
    /// contract), `CompileFailed` (the compiler ran out of memory or time,
    /// or was killed), `ParentKindChanged`, `UnsupportedKind`, `WatchFailed`
    /// (a kind it adds cannot be listed), `Forbidden` (the module's identity
    /// may not do what its manifest claims), `DryRunFailed` or
    /// `VerificationStopped`.
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }
}

/// Watches the module file of `ctx`'s module and offers every new version,
/// until the task is dropped.
pub async fn watch_file(ctx: Arc<Context>, path: PathBuf, allow_precompiled: bool) {
    let mut file = WatchedFile::new(path.clone(), ctx.swap_policy.poll_interval / 4);
    // The file may hold another version than the one loaded at start: a
    // standby taking over after the leader swapped (`make soak` found the
    // new leader serving the old version until the file changed again).
    // The version it holds is offered once; the same bytes do nothing.
    match tokio::fs::read(&path).await {
        Ok(bytes) => {
            offer(&ctx, ModuleSource::File(path.clone()), bytes, allow_precompiled).await;
        }
        Err(error) => {
            tracing::warn!(module = ctx.module_name, file = %path.display(), error = %error, "cannot read the module file")
        }
    }
    loop {
        tokio::time::sleep(ctx.swap_policy.poll_interval).await;
        let Some(read) = file.changed().await else { continue };
        match read {
            Ok(bytes) => {
                offer(&ctx, ModuleSource::File(path.clone()), bytes, allow_precompiled).await;
            }
            Err(error) => {
                tracing::warn!(module = ctx.module_name, file = %path.display(), error = %error, "cannot read the module file")
            }
        }
    }
}

/// Verifies `bytes` as a new version of `ctx`'s module and, if it passes,
/// swaps it in and rolls it out.
pub async fn offer(ctx: &Arc<Context>, source: ModuleSource, bytes: Vec<u8>, allow_precompiled: bool) -> Offered {
    let active = ctx.serving().module.clone();
    if digest(&bytes) == active.digest() {
        return Offered::Unchanged;
    }
    let swap = ctx.swap.clone();
    let engine = active.engine().clone();
    let loaded = tokio::task::spawn_blocking(move || swap.load(&engine, source, &bytes, allow_precompiled))
        .await
        .unwrap_or_else(|panic| Err(Refusal::new("VerificationStopped", format!("loading stopped: {panic}"))));
    match loaded {
        Ok(candidate) => offer_loaded(ctx, candidate, None, &Rollout::default()).await,
        Err(refusal) => refused(ctx, refusal),
    }
}

/// Verifies a loaded version against the active one (its kinds, unless
/// `prechecked` against it already; the first list of the kinds it adds;
/// its plan over every cached parent, the dry run) and, if it passes and
/// `rollout`'s gates let it, swaps it in (or serves it to the canary) and
/// rolls it out.
pub async fn offer_loaded(
    ctx: &Arc<Context>,
    candidate: Arc<LogicModule>,
    prechecked: Option<Prechecked>,
    rollout: &Rollout,
) -> Offered {
    let started = Instant::now();
    let active = ctx.serving();
    if candidate.digest() == active.module.digest() {
        return Offered::Unchanged;
    }
    tracing::info!(module = ctx.module_name, source = %candidate.source(), digest = candidate.digest(), active = active.module.digest(), "a new module version: verifying");
    let kinds = match prechecked {
        Some(prechecked) if prechecked.against == active.module.digest() => prechecked.kinds,
        _ => Prechecked::new(&active.module, &candidate).kinds,
    };
    if let Err(refusal) = kinds {
        return refused(ctx, refusal);
    }
    if let Err(error) = ctx.identity.check(candidate.manifest()).await {
        // Not known to be forbidden when the API server could not answer.
        let reason = if error.is_transient() { "AccessCheckFailed" } else { "Forbidden" };
        return refused(ctx, Refusal::new(reason, error.to_string()));
    }
    let candidate = match ctx.serving_for(candidate) {
        Ok(serving) => Arc::new(serving),
        Err(error) => return refused(ctx, Refusal::new("UnsupportedKind", error.to_string())),
    };
    let added = candidate.kinds_beyond(&active);
    if !added.is_empty() {
        tracing::info!(module = ctx.module_name, kinds = ?added, "listing the kinds the new version adds");
    }
    if let Err(why) = candidate.wait_until_known(ctx.swap_policy.cache_sync_timeout).await {
        return refused(ctx, Refusal::new("WatchFailed", why));
    }
    let verifying = ctx.clone();
    let (checking, against) = (candidate.clone(), active.clone());
    let verified = tokio::task::spawn_blocking(move || {
        let dry_run_started = Instant::now();
        let plan = dry_run(&verifying, &against, &checking)?;
        Ok::<_, Refusal>((plan, dry_run_started.elapsed()))
    })
    .await
    .unwrap_or_else(|panic| Err(Refusal::new("VerificationStopped", format!("verification stopped: {panic}"))));
    let (plan, dry_run_took) = match verified {
        Ok(verified) => verified,
        Err(refusal) => return refused(ctx, refusal),
    };
    let kind = ctx.parent_kind.name();
    tracing::info!(module = ctx.module_name, digest = plan.digest, plan = plan.line(kind), "planned");
    let held_by = rollout.held_by(&plan);
    if !held_by.is_empty() {
        tracing::info!(module = ctx.module_name, digest = plan.digest, held_by = ?held_by, "verified; awaiting approval (spec.rollout.approvedDigest)");
        ctx.metrics.swap("awaiting_approval", None);
        return Offered::AwaitingApproval { plan, held_by };
    }
    if let Some(selection) = &rollout.canary {
        let parents = start_canary(ctx, candidate, active, selection.clone());
        ctx.metrics.swap("canary", Some(started.elapsed()));
        return Offered::Canary { plan, parents };
    }
    let previous = ctx.serve(candidate.clone());
    // A canary of another version ends: this one serves every parent.
    ctx.swap.canary.store(None);
    ctx.swap.remember(previous.module.clone());
    ctx.swap.remember(candidate.module.clone());
    ctx.metrics.unloaded(&previous.module);
    ctx.metrics.loaded(&candidate.module);
    let took = started.elapsed();
    ctx.metrics.swap("succeeded", Some(took));
    tracing::info!(
        module = ctx.module_name,
        from = previous.module.digest(),
        to = candidate.module.digest(),
        dry_run_parents = plan.summary.parents,
        dry_run_us = u64::try_from(dry_run_took.as_micros()).unwrap_or(u64::MAX),
        took_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        kinds_added = ?added,
        kinds_no_longer_used = ?previous.kinds_beyond(&candidate),
        "module version swapped in; rolling out"
    );
    let until = SystemTime::now() + ctx.swap_policy.watch_window;
    start_probation(ctx, Probation::new(candidate, previous, until));
    roll_out(ctx.clone(), None);
    Offered::Swapped { plan }
}

/// Serves `candidate` to the parents `selection` picks, `active` to the
/// others, for a watch window; answers how many parents it picked.
fn start_canary(ctx: &Arc<Context>, candidate: Arc<Serving>, active: Arc<Serving>, selection: Canary) -> usize {
    let parents = ctx.parents.state().iter().filter(|p| selection.selects(p)).count();
    let until = SystemTime::now() + ctx.swap_policy.watch_window;
    ctx.swap.remember(candidate.module.clone());
    tracing::info!(
        module = ctx.module_name,
        digest = candidate.module.digest(),
        serving = active.module.digest(),
        canary = selection.describe(),
        parents,
        "module version serves a canary until its watch window closes"
    );
    let replaced = ctx.swap.canary.swap(Some(Arc::new(CanaryServing {
        serving: candidate.clone(),
        selection: selection.clone(),
        until,
        parents,
    })));
    let mut probation = Probation::new(candidate, active, until);
    probation.canary = true;
    start_probation(ctx, probation);
    // The parents of a canary this one replaces go back to the serving
    // version (or on to this one): every parent then.
    roll_out(ctx.clone(), if replaced.is_some() { None } else { Some(selection) });
    parents
}

/// The version a reconcile of `parent` runs on: the canary's, when one
/// picks it, else the serving one.
pub fn version_for(ctx: &Context, parent: &CachedObject) -> Arc<Serving> {
    if let Some(canary) = ctx.swap.canary.load().as_ref()
        && canary.selection.selects(parent)
    {
        return canary.serving.clone();
    }
    ctx.serving()
}

/// Puts the serving version on probation until `probation.until`, when a
/// timer ends it (and with it the previous version's watches).
fn start_probation(ctx: &Arc<Context>, probation: Probation) {
    let (digest, until) = (probation.candidate.module.digest().to_owned(), probation.until);
    *ctx.swap.probation.lock().unwrap_or_else(PoisonError::into_inner) = Some(probation);
    ctx.swap.changed();
    let ctx = Arc::downgrade(ctx);
    tokio::spawn(async move {
        tokio::time::sleep_until(until.into()).await;
        end_probation(&ctx, &digest);
    });
}

/// The watch window of version `digest` is over: it is trusted now, and
/// the version it replaced is let go; or, after a canary, it serves every
/// parent now, on probation for another window.
fn end_probation(ctx: &Weak<Context>, digest: &str) {
    let Some(ctx) = ctx.upgrade() else { return };
    let mut probation = ctx.swap.probation.lock().unwrap_or_else(PoisonError::into_inner);
    if probation.as_ref().is_some_and(|p| p.candidate.module.digest() == digest) {
        let ended = probation.take();
        drop(probation);
        if let Some(canary) = ended.as_ref().filter(|p| p.canary) {
            promote(&ctx, canary.candidate.clone(), canary.previous.clone());
            return;
        }
        tracing::info!(module = ctx.module_name, digest, "module version passed its watch window");
        drop(ended);
        ctx.swap.changed();
    }
}

/// Taking over (or restarting) while the serving version is on probation:
/// the rest of its watch window, with `previous` (its caches listed) to roll
/// back to.
pub fn resume_probation(ctx: &Arc<Context>, previous: Arc<Serving>, until: SystemTime) {
    let candidate = ctx.serving();
    if until <= SystemTime::now() || candidate.module.digest() == previous.module.digest() {
        return;
    }
    tracing::info!(
        module = ctx.module_name,
        digest = candidate.module.digest(),
        previous = previous.module.digest(),
        left_s = until.duration_since(SystemTime::now()).unwrap_or_default().as_secs(),
        "the serving version is on probation from before: its watch window goes on here"
    );
    start_probation(ctx, Probation::new(candidate, previous, until));
}

/// A canary that passed its window: its version serves every parent, on
/// probation for a window of its own with `previous` to roll back to.
fn promote(ctx: &Arc<Context>, candidate: Arc<Serving>, previous: Arc<Serving>) {
    if ctx.swap.canary.load().as_ref().is_none_or(|c| c.serving.module.digest() != candidate.module.digest()) {
        // Replaced meanwhile.
        return;
    }
    let replaced = ctx.serve(candidate.clone());
    ctx.swap.canary.store(None);
    ctx.metrics.unloaded(&replaced.module);
    ctx.metrics.loaded(&candidate.module);
    ctx.metrics.swap("succeeded", None);
    tracing::info!(
        module = ctx.module_name,
        from = previous.module.digest(),
        to = candidate.module.digest(),
        "the canary passed its watch window: the module version serves every parent; rolling out"
    );
    let until = SystemTime::now() + ctx.swap_policy.watch_window;
    start_probation(ctx, Probation::new(candidate, previous, until));
    roll_out(ctx.clone(), None);
}

pub(crate) fn refused(ctx: &Context, refusal: Refusal) -> Offered {
    tracing::warn!(
        module = ctx.module_name,
        reason = refusal.reason,
        problem = refusal.message,
        "module version refused; the active version keeps serving"
    );
    ctx.metrics.swap("refused", None);
    Offered::Refused(refusal)
}

/// A reconcile's outcome on `module`: while that version is on probation,
/// a failure counts against it, and too many roll it back.
pub fn observe(ctx: &Arc<Context>, module: &LogicModule, parent: &ParentKey, failure: Option<String>) {
    if failure.is_none()
        && ctx.swap.counting.load(std::sync::atomic::Ordering::Relaxed)
        && ctx.module.current().digest() == module.digest()
    {
        ctx.swap.reconciled_by(module, parent);
    }
    let mut probation = ctx.swap.probation.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(current) = probation.as_mut() else { return };
    if current.candidate.module.digest() != module.digest() || Instant::now() > current.until {
        // Another version's, or the window is over (its timer ends it).
        return;
    }
    match failure {
        None => {
            current.failed.remove(parent);
        }
        Some(reason) => {
            current.failed.insert(parent.clone(), reason);
            if current.failed.len() > ctx.swap_policy.rollback_failures_allowed
                && let Some(failed) = probation.take()
            {
                drop(probation);
                roll_back(ctx, failed);
            }
        }
    }
}

fn roll_back(ctx: &Arc<Context>, failed: Probation) {
    let reason = failed
        .failed
        .iter()
        .take(3)
        .map(|((namespace, name), why)| format!("{namespace}/{name}: {why}"))
        .collect::<Vec<_>>()
        .join("; ");
    let (candidate, previous) = (&failed.candidate.module, &failed.previous.module);
    let canary = if failed.canary {
        // The canary's parents go back to the version serving the others.
        let on_canary =
            ctx.swap.canary.load().as_ref().is_some_and(|c| c.serving.module.digest() == candidate.digest());
        if !on_canary {
            return;
        }
        ctx.swap.canary.store(None);
        true
    } else {
        if ctx.serving().module.digest() != candidate.digest() {
            return;
        }
        ctx.serve(failed.previous.clone());
        false
    };
    // Not kept compiled: a version that failed is not one to go back to,
    // and its code would stay resident (make soak saw the leader's memory
    // grow by it). Offered again, it is mapped from the compile cache.
    ctx.swap.forget(candidate.digest());
    if !canary {
        ctx.metrics.unloaded(candidate);
        ctx.metrics.loaded(previous);
    }
    ctx.metrics.swap("rolled_back", None);
    *ctx.swap.last_rollback.lock().unwrap_or_else(PoisonError::into_inner) = Some(Rollback {
        from: candidate.digest().to_owned(),
        to: previous.digest().to_owned(),
        reason: reason.clone(),
    });
    ctx.swap.changed();
    tracing::error!(
        module = ctx.module_name,
        from = candidate.digest(),
        to = previous.digest(),
        failed_parents = failed.failed.len(),
        canary,
        reason,
        "module version rolled back"
    );
    roll_out(ctx.clone(), None);
}

impl SwapState {
    /// A version from `bytes`: one compiled before (kept by digest), or
    /// compiled now and kept, so a standby that compiled it ahead, a
    /// rollback, or going back by hand costs no compile.
    pub fn load(
        &self,
        engine: &ModuleEngine,
        source: ModuleSource,
        bytes: &[u8],
        allow_precompiled: bool,
    ) -> Result<Arc<LogicModule>, Refusal> {
        if let Some(module) = self.held(&digest(bytes)) {
            return Ok(module);
        }
        // Counted whether or not it loads: the work was done either way.
        self.metrics.compiled();
        let module = LogicModule::from_bytes(engine, source, bytes, allow_precompiled)
            .map(Arc::new)
            .map_err(|error| Refusal::new(error.reason(), error.to_string()))?;
        self.remember(module.clone());
        Ok(module)
    }

    /// The version `digest`, if held compiled.
    pub fn held(&self, digest: &str) -> Option<Arc<LogicModule>> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner).iter().find(|m| m.digest() == digest).cloned()
    }

    /// On a standby: the version to serve once it leads (the one the leader
    /// serves, held compiled, with its probation), or `None` for the one it
    /// was started on. At start: the version the module's source says was
    /// serving.
    pub fn serve_on_takeover(&self, takeover: Option<Takeover>) {
        *self.on_takeover.lock().unwrap_or_else(PoisonError::into_inner) = takeover;
    }

    /// On becoming the leader, before any reconcile: puts the version the
    /// previous leader served into `slot`, so this replica neither compiles
    /// it nor reconciles a parent with an older one first. Answers the
    /// version to roll back to while that one is still on probation.
    pub fn take_over(&self, slot: &ModuleSlot) -> Option<PreviousVersion> {
        let takeover = self.on_takeover.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        let previous = slot.current();
        if previous.digest() != takeover.module.digest() {
            tracing::info!(
                module = takeover.module.name(),
                from = previous.digest(),
                to = takeover.module.digest(),
                "taking over on the version the previous leader served (compiled ahead)"
            );
            slot.swap(takeover.module.clone());
        }
        takeover.probation.filter(|p| p.until > SystemTime::now() && p.module.digest() != takeover.module.digest())
    }

    /// The serving version's probation, if it is on one.
    pub fn probation(&self) -> Option<ProbationReport> {
        let probation = self.probation.lock().unwrap_or_else(PoisonError::into_inner);
        probation.as_ref().map(|p| ProbationReport {
            digest: p.candidate.module.digest().to_owned(),
            previous: p.previous.module.clone(),
            until: p.until_wall,
        })
    }

    /// The version serving a canary, while one does.
    pub fn canary(&self) -> Option<Arc<CanaryServing>> {
        self.canary.load_full()
    }

    /// The version running beside the serving one, while one does.
    pub fn shadow(&self) -> Option<Arc<Shadow>> {
        self.shadow.load_full()
    }

    /// The last shadow whose window ended.
    pub fn shadow_ended(&self) -> Option<EndedShadow> {
        self.shadow_ended.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The last rollback, if any.
    pub fn last_rollback(&self) -> Option<Rollback> {
        self.last_rollback.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Starts counting the parents the serving version reconciles, for
    /// [`SwapState::reconciled_parents`].
    pub fn count_reconciled_parents(&self) {
        self.counting.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many parents the version `digest` has reconciled since it went
    /// live (0 for a version not serving, or before counting started).
    pub fn reconciled_parents(&self, digest: &str) -> usize {
        let reconciled = self.reconciled.lock().unwrap_or_else(PoisonError::into_inner);
        if reconciled.digest == digest { reconciled.parents.len() } else { 0 }
    }

    /// Tells the module's sources that a swap or a rollback happened.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub(super) fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    fn reconciled_by(&self, module: &LogicModule, parent: &ParentKey) {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        parent.hash(&mut hasher);
        let mut reconciled = self.reconciled.lock().unwrap_or_else(PoisonError::into_inner);
        if reconciled.digest != module.digest() {
            // A reconcile by another version: count from zero for it.
            reconciled.digest = module.digest().to_owned();
            reconciled.parents.clear();
        }
        reconciled.parents.insert(hasher.finish());
    }

    /// Releases the resident code pages of the versions held compiled that
    /// serve nothing now (not `serving`, no canary, no shadow): a swap back
    /// or a rollback maps them again from the page cache. Answers the bytes
    /// released.
    pub fn release_idle_code(&self, serving: &LogicModule) -> u64 {
        let mut in_use = vec![serving.digest().to_owned()];
        in_use.extend(self.canary().map(|c| c.serving.module.digest().to_owned()));
        in_use.extend(self.shadow().map(|s| s.serving.module.digest().to_owned()));
        let mut held: Vec<Arc<LogicModule>> =
            self.recent.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        let on_takeover = self.on_takeover.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(takeover) = on_takeover {
            held.push(takeover.module);
            held.extend(takeover.probation.map(|p| p.module));
        }
        let idle: Vec<_> =
            held.iter().filter(|m| !in_use.iter().any(|d| d == m.digest())).map(|m| m.code_range()).collect();
        crate::resident_pages::release_within(&idle).unwrap_or_else(|error| {
            tracing::debug!(%error, "could not release idle versions' code pages");
            0
        })
    }

    /// No longer holds `digest` compiled (unless something else does).
    pub(crate) fn forget(&self, digest: &str) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = recent.iter().position(|m| m.digest() == digest)
            && let Some(dropped) = recent.remove(at)
        {
            self.metrics.ready(&dropped.manifest().version, dropped.digest(), false);
        }
    }

    pub(crate) fn remember(&self, module: Arc<LogicModule>) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.retain(|m| m.digest() != module.digest());
        self.metrics.ready(&module.manifest().version, module.digest(), true);
        recent.push_front(module);
        while recent.len() > RECENT_VERSIONS {
            if let Some(dropped) = recent.pop_back() {
                self.metrics.ready(&dropped.manifest().version, dropped.digest(), false);
            }
        }
    }
}

/// How often the versions held compiled but serving nothing give their
/// code pages back (a read of /proc/self/smaps, ~5 ms): a version just
/// replaced has finished its reconciles in flight by then (the deadline is
/// 5 s), and one used again costs a few minor faults.
const RELEASE_IDLE_CODE_EVERY: Duration = Duration::from_secs(10);

/// Releases the idle versions' code pages of the module in `slot` every
/// 10 s, on every replica (a standby holds the leader's versions too).
pub async fn release_idle_code(slot: ModuleSlot, swap: Arc<SwapState>) {
    let mut every = tokio::time::interval(RELEASE_IDLE_CODE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let serving = slot.current();
        let bytes = swap.release_idle_code(&serving);
        if bytes > 0 {
            tracing::debug!(module = serving.name(), kib = bytes / 1024, "released the code pages of idle versions");
        }
    }
}

/// The new version must reconcile the same parent kind: the controller
/// and its parent cache are set up for it. Its owned and read kinds may
/// change; their watches follow.
fn same_parent(active: &Manifest, candidate: &Manifest) -> Result<(), String> {
    let describe = |k: &KindInfo| format!("{}/{}/{}", k.group, k.version, k.kind);
    let key = |k: &KindInfo| (k.group.clone(), k.version.clone(), k.kind.clone(), k.plural.clone(), k.namespaced);
    if key(&active.parent) != key(&candidate.parent) {
        return Err(format!(
            "it reconciles {}, not {}: a module keeps its parent kind (run another module for another kind)",
            describe(&candidate.parent),
            describe(&active.parent)
        ));
    }
    Ok(())
}

/// The swap's plan over every cached parent, which is its dry run: a
/// parent the active version reconciles must not fail with the candidate
/// (beyond the allowed count).
fn dry_run(ctx: &Context, active: &Serving, candidate: &Serving) -> Result<SwapPlan, Refusal> {
    let allowed = ctx.swap_policy.dry_run_failures_allowed;
    let now = crate::planning::offline::now();
    let plan = plan_swap(ctx, active, candidate, allowed, &now)
        .map_err(|error| Refusal::new("UnsupportedKind", error.to_string()))?;
    if plan.regressions.len() > allowed {
        let examples: Vec<&str> = plan.regressions.iter().take(3).map(String::as_str).collect();
        return Err(Refusal::new(
            "DryRunFailed",
            format!(
                "the dry run failed on parents the active version reconciles ({allowed} allowed): {}",
                examples.join("; ")
            ),
        ));
    }
    Ok(plan)
}

/// Reconciles every parent again (those `only` picks, when given), at most
/// `rollout_per_second` a second, so the new desired state rolls out
/// without a burst of writes.
pub(super) fn roll_out(ctx: Arc<Context>, only: Option<Canary>) {
    tokio::spawn(async move {
        let per_second = ctx.swap_policy.rollout_per_second.max(1);
        let pause = Duration::from_secs(1) / per_second;
        for parent in ctx.parents.state() {
            let Some(namespace) = parent.namespace() else { continue };
            if only.as_ref().is_some_and(|canary| !canary.selects(&parent)) {
                continue;
            }
            let reference =
                ObjectRef::new_with(&parent.name_any(), ctx.parent_kind.resource.clone()).within(&namespace);
            if ctx.requeue.send(reference).is_err() {
                return;
            }
            tokio::time::sleep(pause).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, kind: &str) -> KindInfo {
        KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        }
    }

    fn manifest(parent: KindInfo, owned: Vec<KindInfo>) -> Manifest {
        Manifest {
            name: "m".into(),
            version: "1.0.0".into(),
            parent,
            crd: String::new(),
            owned,
            reads: vec![kind("", "Secret")],
            field_manager: "m".into(),
            event_reporter: "m".into(),
        }
    }

    #[test]
    fn a_new_version_keeps_its_parent_kind_and_may_change_the_others() {
        let active = manifest(kind("x.io", "Widget"), vec![kind("", "ConfigMap"), kind("apps", "Deployment")]);
        let reordered = manifest(kind("x.io", "Widget"), vec![kind("apps", "Deployment"), kind("", "ConfigMap")]);
        assert_eq!(same_parent(&active, &reordered), Ok(()));
        let fewer_owned = manifest(kind("x.io", "Widget"), vec![kind("", "ConfigMap")]);
        assert_eq!(same_parent(&active, &fewer_owned), Ok(()));

        let other_parent = manifest(kind("x.io", "Gadget"), active.owned.clone());
        let error = same_parent(&active, &other_parent).expect_err("another parent kind");
        assert!(error.starts_with("it reconciles x.io/v1/Gadget, not x.io/v1/Widget"), "{error}");
        let mut cluster_scoped = kind("x.io", "Widget");
        cluster_scoped.namespaced = false;
        assert!(same_parent(&active, &manifest(cluster_scoped, active.owned.clone())).is_err());
    }
}
