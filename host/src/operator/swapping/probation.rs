//! A swapped version's watch window: its probation started (or resumed
//! after a take-over), ended when the window closes (a canary's promoted
//! to every parent then), or cut short by a rollback to the version before;
//! and the reconciles at a bounded rate that carry each change of version
//! to every parent.

use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::operator::context::Context;
use crate::operator::swapping::rollout::Canary;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::swap_state::{Probation, Rollback};

/// Puts the serving version on probation until `probation.until`, when a
/// timer ends it (and with it the previous version's watches).
pub(super) fn start_probation(ctx: &Arc<Context>, probation: Probation) {
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

/// The failures of version `failed` passed what its probation allows: the
/// version before it serves again (the canary's parents only, after a
/// canary), and every parent is reconciled on it.
pub(super) fn roll_back(ctx: &Arc<Context>, failed: Probation) {
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
