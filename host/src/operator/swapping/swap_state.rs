//! What a module's swaps keep between them: the policy they follow, the
//! version on probation and the one it would roll back to, the versions
//! held compiled, a canary or a shadow running, the last rollback, and
//! which parents the serving version has reconciled. Shared with the
//! module's sources (a file, a LogicModule), which compile ahead (also on
//! a standby) and report on it. The swaps themselves are `hot_swap.rs`.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use crate::operator::endpoints::metrics::ModuleMetrics;
use crate::operator::swapping::rollout::Canary;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::shadow::{EndedShadow, Shadow};
use crate::operator::watching::references::ParentKey;
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::{LogicModule, ModuleSource, digest};
use crate::runtime::slot::ModuleSlot;

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
const RECENT_VERSIONS: usize = crate::runtime::compiler::KEEP_COMPILED;

/// A module's swap state: the probation of its newest version, the
/// versions it recently ran or compiled, the last rollback, and which
/// parents the serving version has reconciled. Shared with the module's
/// sources, which compile ahead (also on a standby) and report on it.
pub struct SwapState {
    pub(super) probation: Mutex<Option<Probation>>,
    pub(super) recent: Mutex<VecDeque<Arc<LogicModule>>>,
    /// On a standby: the version the leader serves, held compiled, to take
    /// over with (and its probation, if it is on one); at start, the version
    /// the module's LogicModule says was serving.
    pub(super) on_takeover: Mutex<Option<Takeover>>,
    /// Counts compiles and the versions held compiled.
    pub(super) metrics: ModuleMetrics,
    pub(super) last_rollback: Mutex<Option<Rollback>>,
    pub(super) reconciled: Mutex<Reconciled>,
    /// Whether anyone reports `reconciled` (a LogicModule follower); until
    /// then a reconcile pays nothing for it.
    pub(super) counting: std::sync::atomic::AtomicBool,
    /// Bumped on every swap and rollback, so sources can report.
    pub(super) changes: watch::Sender<u64>,
    /// A version serving a canary's parents, while it does.
    pub(super) canary: arc_swap::ArcSwapOption<CanaryServing>,
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
pub(super) struct Reconciled {
    pub(super) digest: String,
    pub(super) parents: HashSet<u64>,
}

/// The window after a swap in which failures roll it back. It holds both
/// versions with their caches: a rollback lists nothing again.
pub(super) struct Probation {
    pub(super) candidate: Arc<Serving>,
    pub(super) previous: Arc<Serving>,
    pub(super) until: Instant,
    /// `until` on the wall clock, for the sources to report.
    pub(super) until_wall: SystemTime,
    /// Parents the candidate failed on, and why.
    pub(super) failed: BTreeMap<ParentKey, String>,
    /// The candidate serves a canary only; `previous` still serves the rest.
    pub(super) canary: bool,
}

impl Probation {
    pub(super) fn new(candidate: Arc<Serving>, previous: Arc<Serving>, until_wall: SystemTime) -> Self {
        let left = until_wall.duration_since(SystemTime::now()).unwrap_or_default();
        Self { candidate, previous, until: Instant::now() + left, until_wall, failed: BTreeMap::new(), canary: false }
    }
}

/// Why a version was refused: a stable reason (conditions, events) and
/// what exactly was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// `LoadFailed` (not a component, does not compile, breaks the
    /// contract), `CompileFailed` (the compiler ran out of memory or time,
    /// or was killed), `ParentKindChanged`, `FieldManagerChanged`,
    /// `UnsupportedKind`, `WatchFailed`
    /// (a kind it adds cannot be listed), `Forbidden` (the module's identity
    /// may not do what its manifest claims), `DryRunFailed` or
    /// `VerificationStopped`.
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub(super) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }
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

    pub(super) fn reconciled_by(&self, module: &LogicModule, parent: &ParentKey) {
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
        crate::memory::resident_pages::release_within(&idle).unwrap_or_else(|error| {
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
