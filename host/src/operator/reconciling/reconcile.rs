//! One reconcile of one parent: related objects and current children from
//! the caches, every desired child from the module in one call, checked,
//! then CreateOrUpdate per desired object, deletion of the children the
//! module no longer wants, events, and the status. One module version
//! serves the whole reconcile.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::modules::CallError;
use crate::operator::cached_object::CachedObject;
use crate::operator::caches::Availability;
use crate::operator::create_or_update::{Outcome, create_or_update};
use crate::operator::delete_unwanted::delete_unwanted;
use crate::operator::desired::{self, Owner};
use crate::operator::inputs::{Inputs, inputs};
use crate::operator::recording::Reconciled;
use crate::operator::serving::Serving;
use crate::operator::status::{write_stalled, write_status};
use crate::operator::{Calls, Context, ParentView, ReconcileError, hot_swap, shadow};

pub async fn reconcile(parent: Arc<CachedObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    // One module version, with its caches, for the whole reconcile, even if
    // a swap happens meanwhile: the next reconcile takes the new one. A
    // canary's version for the parents it picks.
    let serving = hot_swap::version_for(&ctx, &parent);
    let module = &serving.module;
    let result = reconcile_parent(&parent, &ctx, &serving).await;
    if let Err(error) = &result
        && let Some(refusal) = error.refusal()
    {
        ctx.metrics.refused_answer(refusal.label());
    }
    if let Err(error) = &result
        && let Some(reason) = error.module_failure()
    {
        module_failed(&ctx, &parent, reason, error).await;
    }
    if let Some(shadow) = ctx.swap.shadow() {
        // Beside the reconcile, on the same inputs; writes nothing.
        shadow::compare(&ctx, &serving, &shadow, &parent);
    }
    let key = (parent.namespace().unwrap_or_default(), parent.name_any());
    let failure = result.as_ref().err().filter(|e| e.counts_against_the_module()).map(ToString::to_string);
    hot_swap::observe(&ctx, module, &key, failure);
    let label = match &result {
        Ok(Verdict::Applied) => "success",
        Ok(Verdict::Invalid) => "invalid",
        Ok(Verdict::Deleting) => "deleting",
        Err(_) => "error",
    };
    ctx.metrics.reconciled(label, started.elapsed());
    match result {
        Ok(Verdict::Deleting) => {
            ctx.backoff.reset(&key);
            Ok(Action::await_change())
        }
        // An invalid spec stays invalid until the parent changes.
        Ok(Verdict::Invalid) => Ok(Action::await_change()),
        Ok(Verdict::Applied) => {
            ctx.backoff.reset(&key);
            Ok(Action::requeue(ctx.resync_period))
        }
        Err(error) => Err(error),
    }
}

/// Requeue a failed reconcile with a per-parent exponential backoff.
pub fn error_policy(parent: Arc<CachedObject>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = (parent.namespace().unwrap_or_default(), parent.name_any());
    let delay = ctx.backoff.next(&key);
    tracing::warn!(
        module = ctx.module_name,
        namespace = key.0,
        name = key.1,
        error = %error,
        retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        "reconcile failed"
    );
    Action::requeue(delay)
}

enum Verdict {
    Applied,
    Invalid,
    Deleting,
}

async fn reconcile_parent(parent: &CachedObject, ctx: &Context, serving: &Serving) -> Result<Verdict, ReconcileError> {
    let module = &serving.module;
    let (Some(namespace), Some(uid)) = (parent.meta().namespace.as_deref(), parent.meta().uid.as_deref()) else {
        return Err(ReconcileError::MissingMetadata);
    };
    let name = parent.meta().name.as_deref().unwrap_or_default();
    let parent_key = (namespace.to_owned(), name.to_owned());
    if parent.meta().deletion_timestamp.is_some() {
        // The garbage collector removes the children; nothing to write.
        ctx.forget(&parent_key);
        return Ok(Verdict::Deleting);
    }
    let parent_json = parent.module_json(&ctx.parent_kind);
    let regarding = parent.object_ref(&ctx.parent_kind.resource);

    let Inputs { related_keys, related, current, current_json } =
        inputs(ctx, Calls::Recorded, serving, parent, &parent_json)?;
    ctx.references.set(parent_key, related_keys);
    let view = ParentView {
        serving,
        module,
        object: parent,
        json: &parent_json,
        namespace,
        name,
        uid,
        owned: &current_json,
        related: &related,
    };

    let answer = match ctx
        .call(module, (namespace, name), "desired", |m| m.desired(&parent_json, &current_json, &related))
    {
        Ok(answer) => answer,
        Err(CallError::Logic(error)) => {
            // Bad input changes nothing and deletes nothing: report it.
            tracing::warn!(module = ctx.module_name, namespace, name, error = %error, "the spec is invalid; nothing changed");
            // The contract's `status` hears why (its `problem`), as for a
            // refused write.
            let problem = error.to_string();
            let mut answered = None;
            let written = write_status(ctx, &view, &current_json, Some(&problem), &mut answered).await;
            if let Some(status) = &answered {
                let desired = Err(&error);
                ctx.recorder.record(&recorded(&view, desired, None, Some(&problem), status));
            }
            if written? {
                ctx.events.warning(&regarding, "InvalidSpec", error.to_string()).await;
            }
            return Ok(Verdict::Invalid);
        }
        Err(source) => return Err(ReconcileError::Module { function: "desired", source }),
    };
    let owner = Owner { namespace, uid };
    // What it answered, for the record (a copy only when recording).
    let answered_desired = ctx.recorder.enabled().then(|| answer.clone());
    // Checked, then held as text while the writes wait on the API server:
    // a tree of every desired object is several times its JSON.
    let desired: Vec<(usize, String, String)> = match desired::check(&serving.owned_kinds, &owner, answer) {
        Ok(desired) => desired.into_iter().map(|o| (o.kind_index, o.name, o.value.to_string())).collect(),
        Err(refused) => {
            ctx.metrics.module_failed("ModuleInvalidOutput");
            return Err(ReconcileError::InvalidOutput(refused));
        }
    };

    let mut owned_now = Vec::new();
    let mut failure = None;
    let mut not_served = BTreeSet::new();
    let mut wanted = BTreeSet::new();
    for (kind_index, child, text) in desired {
        let cache = &serving.owned[kind_index];
        let kind = cache.kind.name();
        wanted.insert((kind_index, child.clone()));
        let existing = current.iter().find(|(i, o)| *i == kind_index && o.name_any() == child).map(|(_, o)| o.clone());
        if failure.is_some() {
            // Stopped at an earlier failure; the status still sees the rest.
            owned_now.extend(existing.map(|o| o.module_json(&cache.kind)));
            continue;
        }
        if cache.availability() != Availability::Served {
            not_served.insert(format!("{kind} ({})", cache.kind.resource.api_version));
            continue;
        }
        // Text this process wrote from a JSON object parses back.
        let value = serde_json::from_str(&text).unwrap_or_default();
        match create_or_update(ctx, cache, &view, existing, value).await {
            Ok(applied) => {
                match (applied.outcome, applied.written) {
                    (Outcome::Created, Some(reference)) => {
                        let note = format!("Created {kind} {child}");
                        ctx.events.child_changed(&regarding, reference, "Created", "Create", note).await;
                    }
                    (Outcome::Updated, Some(reference)) => {
                        let note = format!("Updated {kind} {child}");
                        ctx.events.child_changed(&regarding, reference, "Updated", "Update", note).await;
                    }
                    _ => {}
                }
                owned_now.push(applied.json);
            }
            Err(error) => failure = Some(error),
        }
    }

    // What it controls and the module no longer wants goes; but not after a
    // failure, and the status still sees it.
    for (kind_index, object) in &current {
        let cache = &serving.owned[*kind_index];
        if wanted.contains(&(*kind_index, object.name_any())) {
            continue;
        }
        if failure.is_some() {
            owned_now.push(object.module_json(&cache.kind));
            continue;
        }
        match delete_unwanted(ctx, cache, &view, object).await {
            Ok(true) => {
                let note = format!("Deleted {} {}", cache.kind.name(), object.name_any());
                let reference = object.object_ref(&cache.kind.resource);
                ctx.events.child_changed(&regarding, reference, "Deleted", "Delete", note).await;
            }
            Ok(false) => {}
            Err(error) => {
                owned_now.push(object.module_json(&cache.kind));
                failure = Some(error);
            }
        }
    }

    let problem = match (&failure, not_served.is_empty()) {
        (Some(error), _) => Some(error.to_string()),
        (None, false) => {
            let kinds = not_served.into_iter().collect::<Vec<_>>().join(", ");
            tracing::warn!(
                module = ctx.module_name,
                namespace,
                name,
                kinds,
                "wanted kinds are not served by the API server; skipped"
            );
            Some(format!("not served by the API server (is the CRD installed?): {kinds}"))
        }
        (None, true) => None,
    };
    let mut answered = None;
    let status_changed = write_status(ctx, &view, &owned_now, problem.as_deref(), &mut answered).await;
    if let (Some(desired), Some(status)) = (&answered_desired, &answered) {
        let reconciled = recorded(&view, Ok(desired), Some(&owned_now), problem.as_deref(), status);
        ctx.recorder.record(&reconciled);
    }
    if let Some(error) = failure {
        ctx.events.warning(&regarding, "ReconcileFailed", error.to_string()).await;
        return Err(error);
    }
    if status_changed? && let Some(problem) = problem {
        ctx.events.warning(&regarding, "KindNotServed", problem).await;
    }
    Ok(Verdict::Applied)
}

/// The reconcile as its record takes it (`recording/`).
fn recorded<'a>(
    view: &ParentView<'a>,
    desired: Result<&'a [String], &'a crate::modules::LogicError>,
    status_owned: Option<&'a [String]>,
    problem: Option<&'a str>,
    status: &'a crate::operator::status::StatusAnswer,
) -> Reconciled<'a> {
    Reconciled {
        version: &view.module.manifest().version,
        digest: view.module.digest(),
        namespace: view.namespace,
        name: view.name,
        parent: view.json,
        owned: view.owned,
        related: view.related,
        desired,
        status_owned,
        problem,
        status,
    }
}

/// The module itself failed (trapped, ran out of time or memory, or
/// answered something unusable): a Warning event and a `Stalled` condition
/// on the parent, written by the host since the module cannot. Nothing else
/// changes.
async fn module_failed(ctx: &Context, parent: &CachedObject, reason: &'static str, error: &ReconcileError) {
    let regarding = parent.object_ref(&ctx.parent_kind.resource);
    ctx.events.warning(&regarding, reason, error.to_string()).await;
    if let Err(status_error) = write_stalled(ctx, parent, reason, &error.to_string()).await {
        tracing::warn!(module = ctx.module_name, error = %status_error, "could not record the Stalled condition");
    }
}
