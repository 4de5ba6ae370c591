//! One reconcile of one parent, performed: the current children and the
//! related objects from the caches, the plan of the module's calls
//! (`planning/step.rs`), then its writes (CreateOrUpdate per desired object
//! that differs, the deletion of the children the module no longer wants),
//! events, and the status the module answers from the objects as written.
//! One module version serves the whole reconcile.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::Value;

use crate::operator::context::{Calls, Context, ModuleCalls, ParentView};
use crate::operator::errors::ReconcileError;
use crate::operator::reconciling::inputs::{Children, related_from_caches};
use crate::operator::reconciling::{applying, waiting};
use crate::operator::recording::recorder::Reconciled;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::{hot_swap, shadow_run};
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::Availability;
use crate::operator::watching::own_writes::ObjectId;
use crate::operator::watching::steps::ParentKey;
use crate::operator::writing::create_or_update::{Outcome, create_or_update, unchanged};
use crate::operator::writing::delete_unwanted::delete_unwanted;
use crate::operator::writing::finalizer;
use crate::operator::writing::server_side_apply::server_side_apply;
use crate::operator::writing::status::{add_fields_taken_over, add_not_settling, write_stalled, write_status};
use crate::planning::step::{
    self, Answer, Desire, Inputs, Parent, PlannedObject, StatusAnswer, StepError, Write, Writing,
};
use crate::runtime::bindings::WriteModel;
use crate::runtime::call_error::{CallError, LogicError};

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
        shadow_run::compare(&ctx, &serving, &shadow, &parent);
    }
    let key = (parent.namespace().unwrap_or_default(), parent.name_any());
    let failure = result.as_ref().err().filter(|e| e.counts_against_the_module()).map(ToString::to_string);
    hot_swap::observe(&ctx, module, &key, failure);
    let label = match &result {
        Ok(Verdict::Applied(_)) => "success",
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
        Ok(Verdict::Applied(timer)) => {
            ctx.backoff.reset(&key);
            ctx.metrics.timers(ctx.timers.set(&key, timer.is_some()));
            Ok(Action::requeue(waiting::next_reconcile(timer, ctx.resync_period)))
        }
        Err(error) => {
            // Its retry comes before any timer it had.
            ctx.metrics.timers(ctx.timers.forget(&key));
            Err(error)
        }
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
    /// Its answer applied, with the timer it asked for.
    Applied(Option<std::time::Duration>),
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
    let deleting = parent.meta().deletion_timestamp.is_some();
    let finalizer = ctx.finalizer.as_str();
    let finalizes = module.finalizes();
    let held = finalizer::holds(parent, finalizer);
    if deleting && !(finalizes && held) {
        // The garbage collector removes the children; nothing to write. A
        // finalizer this version no longer wants lets the parent go.
        if held {
            finalizer::remove(ctx, parent, finalizer).await?;
        }
        ctx.forget(&parent_key);
        return Ok(Verdict::Deleting);
    }
    if !deleting && finalizes != held {
        // Before the first write, so that no child is made without it; or
        // the version serving no longer finalizes.
        if finalizes {
            finalizer::add(ctx, parent, finalizer).await?;
        } else {
            finalizer::remove(ctx, parent, finalizer).await?;
        }
    }
    // A step when every write of the reconcile before has landed.
    let step = ctx.steps.begin(&parent_key);
    if step > 0 {
        ctx.metrics.reconcile_step("continued");
    }
    let parent_json = parent.module_json(&ctx.parent_kind);
    let now = step::now();
    let regarding = parent.object_ref(&ctx.parent_kind.resource);
    let calls = ctx.calls(Calls::Recorded, module, (namespace, name));

    // The plan: the module's calls and their checks (`planning/step.rs`).
    let children = Children::of(serving, namespace, uid);
    let keys = children.keys();
    let applying = match module.write_model() {
        WriteModel::Replace => None,
        WriteModel::Apply => Some(applying::applying(serving, &children, &ctx.field_manager).await?),
    };
    let inputs = Inputs {
        parent: Parent { json: &parent_json, namespace, uid },
        owned_kinds: &serving.owned_kinds,
        owned: &children.json,
        children: &keys,
        keep_answer: ctx.recorder.enabled(),
        writing: applying.as_ref().map_or(Writing::Replace, Writing::Apply),
        reach: module.reach(),
        now: &now,
    };
    let mut related_keys = BTreeSet::new();
    let related = |reference: &_| related_from_caches(serving, namespace, reference, &mut related_keys);
    let planned =
        if deleting { step::finalize_plan(&calls, &inputs, related) } else { step::plan(&calls, &inputs, related) };
    let plan = match planned {
        Ok(plan) => plan,
        // `references` failed: the index keeps what it knew.
        Err(StepError::Module { function: "references", source }) => {
            return Err(ReconcileError::Module { function: "references", source });
        }
        Err(error) => {
            ctx.references.set(parent_key, related_keys);
            if let StepError::Refused(_) = error {
                ctx.metrics.module_failed("ModuleInvalidOutput");
            }
            return Err(error.into());
        }
    };
    ctx.references.set(parent_key.clone(), related_keys);
    let view = ParentView {
        serving,
        module,
        object: parent,
        json: &parent_json,
        namespace,
        name,
        uid,
        owned: &children.json,
        related: &plan.related,
    };
    match plan.answer {
        Answer::Invalid(error) if deleting => {
            // The finalizer stays; the retry asks again.
            ctx.metrics.finalizing(ctx.finalizing.set(&parent_key, true));
            ctx.events.warning(&regarding, "FinalizeFailed", error.to_string()).await;
            Err(ReconcileError::Module { function: "finalize", source: CallError::Logic(error) })
        }
        Answer::Invalid(error) => {
            invalid_spec(ctx, &calls, &view, &regarding, &error).await?;
            Ok(Verdict::Invalid)
        }
        Answer::Writes { objects, deletes } => {
            let answered = plan.answered.as_deref();
            let last_step = ctx.steps.is_last(step);
            let written =
                apply(ctx, &calls, &view, &regarding, &children, objects, deletes, answered, last_step).await?;
            next_step(ctx, &parent_key, &regarding, step, &written).await;
            match plan.done {
                Some(true) => {
                    finalizer::remove(ctx, parent, finalizer).await?;
                    ctx.forget(&parent_key);
                    Ok(Verdict::Deleting)
                }
                Some(false) => {
                    ctx.metrics.finalizing(ctx.finalizing.set(&parent_key, true));
                    Ok(Verdict::Applied(plan.again_after))
                }
                None => Ok(Verdict::Applied(plan.again_after)),
            }
        }
    }
}

/// After a reconcile at `step` that wrote `written`: the next step, as soon
/// as each written object's event has reached the caches (`watching/steps.rs`);
/// or, at the last step allowed, a Warning event and no next step.
async fn next_step(ctx: &Context, parent: &ParentKey, regarding: &ObjectReference, step: u32, written: &[ObjectId]) {
    if written.is_empty() || !ctx.steps.enabled() {
        return;
    }
    if ctx.steps.is_last(step) {
        ctx.metrics.reconcile_step("stopped");
        let note = format!(
            "wrote in {} reconciles in a row, each woken by its own writes: the next waits for a change or the resync",
            ctx.steps.max()
        );
        ctx.events.warning(regarding, "NotSettling", note).await;
        return;
    }
    ctx.steps.wrote(parent, step, written);
    // After `wrote`, so that an echo arriving meanwhile is not missed: one
    // whose echo has come already has landed.
    for id in written {
        if !ctx.own_writes.awaiting_echo(id)
            && let Some((namespace, name)) = ctx.steps.landed(id)
        {
            ctx.reconcile_again(&namespace, &name);
        }
    }
}

/// Bad input changes nothing and deletes nothing: the status says why.
async fn invalid_spec(
    ctx: &Context,
    calls: &ModuleCalls<'_>,
    view: &ParentView<'_>,
    regarding: &ObjectReference,
    error: &LogicError,
) -> Result<(), ReconcileError> {
    let (namespace, name) = (view.namespace, view.name);
    tracing::warn!(module = ctx.module_name, namespace, name, error = %error, "the spec is invalid; nothing changed");
    // The contract's `status` hears why (its `problem`), as for a refused
    // write.
    let problem = error.to_string();
    let parent = Parent { json: view.json, namespace, uid: view.uid };
    let schema = calls.module().status_schema();
    let status = step::status(calls, schema, parent, view.owned, view.related, step::now(), Some(&problem))?;
    ctx.recorder.record(&recorded(view, Err(error), None, Some(&problem), &status));
    if write_status(ctx, view, &status).await? {
        ctx.events.warning(regarding, "InvalidSpec", error.to_string()).await;
    }
    Ok(())
}

/// Performs the plan's writes, in the module's order, then the deletions,
/// then the status from the objects as written. A failed write stops the
/// writes after it (the status still sees every object). The objects it
/// created or changed; at the `last_step` allowed, their status says the
/// parent does not settle.
#[allow(clippy::too_many_arguments)]
async fn apply(
    ctx: &Context,
    calls: &ModuleCalls<'_>,
    view: &ParentView<'_>,
    regarding: &ObjectReference,
    children: &Children,
    objects: Vec<PlannedObject>,
    deletes: Vec<usize>,
    answered: Option<&[String]>,
    last_step: bool,
) -> Result<Vec<ObjectId>, ReconcileError> {
    let serving = view.serving;
    // Held as text while the writes wait on the API server: a tree of
    // every desired object is several times its JSON.
    let objects: Vec<(usize, String, Option<usize>, Option<String>)> = objects
        .into_iter()
        .map(|o| (o.kind_index, o.name, o.current, (o.write != Write::Unchanged).then(|| o.value.to_string())))
        .collect();
    let applies = calls.module().write_model() == WriteModel::Apply;
    let mut owned_now = Vec::new();
    let mut failure = None;
    let mut not_served = BTreeSet::new();
    let mut taken_over = Vec::new();
    let mut changed = Vec::new();
    for (kind_index, child, current, text) in objects {
        let cache = &serving.owned[kind_index];
        let kind = cache.kind.name();
        let current_json = current.map(|index| children.json[index].clone());
        if failure.is_some() {
            // Stopped at an earlier failure; the status still sees the rest.
            owned_now.extend(current_json);
            continue;
        }
        if cache.availability() != Availability::Served {
            not_served.insert(format!("{kind} ({})", cache.kind.resource.api_version));
            continue;
        }
        let Some(text) = text else {
            let json = current_json.unwrap_or_default();
            owned_now.push(unchanged(ctx, &cache.kind, &child, json).json);
            continue;
        };
        // Text this process wrote from a JSON object parses back.
        let value = serde_json::from_str(&text).unwrap_or_default();
        let again = |fresh: Option<&str>| ask_again(calls, view, kind_index, &child, fresh);
        let written = if applies {
            server_side_apply(ctx, cache, view, regarding, current_json.is_some(), value).await
        } else {
            create_or_update(ctx, cache, view, current_json, value, &again).await
        };
        match written {
            Ok(applied) => {
                if matches!(applied.outcome, Outcome::Created | Outcome::Updated) {
                    changed.push((cache.kind.id(), view.namespace.to_owned(), child.clone()));
                }
                match (applied.outcome, applied.written) {
                    (Outcome::Created, Some(reference)) => {
                        let note = format!("Created {kind} {child}");
                        ctx.events.child_changed(regarding, reference, "Created", "Create", note).await;
                    }
                    (Outcome::Updated, Some(reference)) => {
                        let note = format!("Updated {kind} {child}");
                        ctx.events.child_changed(regarding, reference, "Updated", "Update", note).await;
                    }
                    _ => {}
                }
                taken_over.extend(applied.taken_over);
                owned_now.push(applied.json);
            }
            Err(error) => failure = Some(error),
        }
    }

    // What it controls and the module no longer wants goes; but not after a
    // failure, and the status still sees it.
    for index in deletes {
        let (kind_index, object) = &children.objects[index];
        let cache = &serving.owned[*kind_index];
        if failure.is_some() {
            owned_now.push(children.json[index].clone());
            continue;
        }
        match delete_unwanted(ctx, cache, view, object).await {
            Ok(true) => {
                let note = format!("Deleted {} {}", cache.kind.name(), object.name_any());
                let reference = object.object_ref(&cache.kind.resource);
                ctx.events.child_changed(regarding, reference, "Deleted", "Delete", note).await;
            }
            Ok(false) => {}
            Err(error) => {
                owned_now.push(children.json[index].clone());
                failure = Some(error);
            }
        }
    }

    let problem = match (&failure, not_served.is_empty()) {
        (Some(error), _) => Some(error.to_string()),
        (None, false) => {
            let kinds = not_served.into_iter().collect::<Vec<_>>().join(", ");
            let (namespace, name) = (view.namespace, view.name);
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
    let parent = Parent { json: view.json, namespace: view.namespace, uid: view.uid };
    let schema = calls.module().status_schema();
    let status_written =
        match step::status(calls, schema, parent, &owned_now, view.related, step::now(), problem.as_deref()) {
            Ok(mut status) => {
                if let Some(desired) = answered {
                    ctx.recorder.record(&recorded(view, Ok(desired), Some(&owned_now), problem.as_deref(), &status));
                }
                if !taken_over.is_empty() {
                    add_fields_taken_over(&mut status, view.object, &taken_over);
                }
                if last_step && !changed.is_empty() {
                    add_not_settling(&mut status, view.object, ctx.steps.max());
                }
                write_status(ctx, view, &status).await
            }
            Err(error) => Err(error.into()),
        };
    if let Some(error) = failure {
        ctx.events.warning(regarding, "ReconcileFailed", error.to_string()).await;
        return Err(error);
    }
    if status_written? && let Some(problem) = problem {
        ctx.events.warning(regarding, "KindNotServed", problem).await;
    }
    Ok(changed)
}

/// After a conflict: the module's answer for this one object again, by the
/// same step, given the object as the API server has it now in place of
/// the one it read (or without it, if it is gone).
fn ask_again(
    calls: &ModuleCalls<'_>,
    view: &ParentView<'_>,
    kind_index: usize,
    name: &str,
    fresh: Option<&str>,
) -> Result<Value, ReconcileError> {
    let serving = view.serving;
    let kind = serving.owned_kinds[kind_index].name();
    let same = |text: &String| {
        serde_json::from_str::<Value>(text).is_ok_and(|v| {
            v.get("kind").and_then(Value::as_str) == Some(kind)
                && v.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
        })
    };
    let mut owned: Vec<String> = view.owned.iter().filter(|text| !same(text)).cloned().collect();
    owned.extend(fresh.map(str::to_owned));
    let inputs = Inputs {
        parent: Parent { json: view.json, namespace: view.namespace, uid: view.uid },
        owned_kinds: &serving.owned_kinds,
        owned: &owned,
        children: &[],
        keep_answer: false,
        // Asked again only after a replace's conflict.
        writing: Writing::Replace,
        reach: view.module.reach(),
        now: &step::now(),
    };
    match step::desire(calls, &inputs, view.related)? {
        Desire::Wanted(wanted) => wanted
            .objects
            .into_iter()
            .find(|o| o.kind_index == kind_index && o.name == name)
            .map(|o| o.value)
            .ok_or_else(|| ReconcileError::Vanished { kind: kind.to_owned(), name: name.to_owned() }),
        // The module refuses the object as it is now (e.g. it has another
        // controller): say which object.
        Desire::Invalid(source) => Err(ReconcileError::Refused {
            kind: kind.to_owned(),
            namespace: view.namespace.to_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// The reconcile as its record takes it (`recording/`).
fn recorded<'a>(
    view: &ParentView<'a>,
    desired: Result<&'a [String], &'a LogicError>,
    status_owned: Option<&'a [String]>,
    problem: Option<&'a str>,
    status: &'a StatusAnswer,
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
