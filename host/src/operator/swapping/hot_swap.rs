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
//! the watch window, with failures there rolling it back; then every parent.//!
//! `precheck.rs` holds the checks that need no cluster state;
//! `probation.rs` the watch window, the rollback and the roll out to every
//! parent.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::{Instant, SystemTime};

use crate::operator::context::Context;
use crate::operator::swapping::precheck::Prechecked;
use crate::operator::swapping::probation::{roll_back, roll_out, start_probation};
use crate::operator::swapping::rollout::{Canary, Rollout, SwapPlan};
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::swap_plan::plan_swap;
use crate::operator::swapping::swap_state::{CanaryServing, Probation, Refusal};
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::references::ParentKey;
use crate::runtime::logic_module::{LogicModule, ModuleSource, digest};
use crate::runtime::source::WatchedFile;

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
    if let Err(error) = ctx.identity.check(&candidate).await {
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
    candidate.read_schemas().await;
    active.read_schemas().await;
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

/// The swap's plan over every cached parent, which is its dry run: a
/// parent the active version reconciles must not fail with the candidate
/// (beyond the allowed count).
fn dry_run(ctx: &Context, active: &Serving, candidate: &Serving) -> Result<SwapPlan, Refusal> {
    let allowed = ctx.swap_policy.dry_run_failures_allowed;
    let now = crate::planning::step::now();
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
