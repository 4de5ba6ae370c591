//! One reconcile of one parent: related objects and current children from
//! the caches, every desired child from the module in one call, then
//! CreateOrUpdate or delete per owned kind, events, and the status.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::caches::Availability;
use super::create_or_update::{create_or_update, Outcome};
use super::delete_disabled::delete_disabled;
use super::references::Related;
use super::status::write_status;
use super::{Context, ParentView, ReconcileError};
use crate::module::CallError;

pub async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let result = reconcile_parent(&parent, &ctx).await;
    let label = match &result {
        Ok(Verdict::Applied) => "success",
        Ok(Verdict::Invalid) => "invalid",
        Ok(Verdict::Deleting) => "deleting",
        Err(_) => "error",
    };
    ctx.metrics.reconciled(label, started.elapsed());
    let key = (parent.namespace().unwrap_or_default(), parent.name_any());
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
pub fn error_policy(parent: Arc<DynamicObject>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = (parent.namespace().unwrap_or_default(), parent.name_any());
    let delay = ctx.backoff.next(&key);
    tracing::warn!(
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

async fn reconcile_parent(parent: &DynamicObject, ctx: &Context) -> Result<Verdict, ReconcileError> {
    let (Some(namespace), Some(uid)) = (parent.metadata.namespace.as_deref(), parent.metadata.uid.as_deref()) else {
        return Err(ReconcileError::MissingMetadata);
    };
    let name = parent.metadata.name.as_deref().unwrap_or_default();
    let parent_key = (namespace.to_owned(), name.to_owned());
    if parent.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the children; nothing to write.
        ctx.forget(&parent_key);
        return Ok(Verdict::Deleting);
    }
    let parent_json = ctx.kinds.parent.to_json(parent);
    let regarding = parent.object_ref(&ctx.kinds.parent.resource);

    // Related objects (Secrets) the parent references, from the caches.
    let references = match ctx.call("references", |m| m.references(&parent_json)) {
        Ok(references) => references,
        // An invalid parent: desired-all below reports it with every path.
        Err(CallError::Logic(_)) => Vec::new(),
        Err(source) => return Err(module_failed(ctx, &regarding, "references", source).await),
    };
    let mut related_keys = BTreeSet::new();
    let mut related = Vec::new();
    for reference in &references {
        let Some(cache) = ctx.reads.iter().find(|c| {
            c.kind.resource.group == reference.group && c.kind.resource.kind == reference.kind
        }) else {
            continue;
        };
        related_keys.insert(Related {
            kind: reference.kind.clone(),
            namespace: namespace.to_owned(),
            name: reference.name.clone(),
        });
        if let Some(object) = cache.get(namespace, &reference.name) {
            related.push(cache.kind.to_json(&object));
        }
    }
    ctx.references.set(parent_key, related_keys);

    // The children it controls now, from the caches, in manifest order.
    let current: Vec<Option<Arc<DynamicObject>>> = ctx
        .owned
        .iter()
        .map(|cache| match cache.availability() {
            Availability::Served => cache.controlled_by(namespace, uid),
            _ => None,
        })
        .collect();
    let current_json: Vec<Option<String>> = ctx
        .owned
        .iter()
        .zip(&current)
        .map(|(cache, object)| object.as_ref().map(|o| cache.kind.to_json(o)))
        .collect();
    let view = ParentView { object: parent, json: &parent_json, namespace, name, uid, related: &related };

    let desired = match ctx.call("desired-all", |m| m.desired_all(&parent_json, &current_json, &related)) {
        Ok(desired) if desired.len() == ctx.owned.len() => desired,
        Ok(desired) => {
            let message = format!("desired-all answered {} objects for {} owned kinds", desired.len(), ctx.owned.len());
            let source = CallError::Module(wasmtime::Error::msg(message));
            return Err(module_failed(ctx, &regarding, "desired-all", source).await);
        }
        Err(CallError::Logic(error)) => {
            // Bad input changes nothing and deletes nothing: report it.
            let owned: Vec<String> = current_json.iter().flatten().cloned().collect();
            tracing::warn!(namespace, name, error = %error, "the spec is invalid; nothing changed");
            if write_status(ctx, &view, &owned, None).await? {
                ctx.events.warning(&regarding, "InvalidSpec", error.to_string()).await;
            }
            return Ok(Verdict::Invalid);
        }
        Err(source) => return Err(module_failed(ctx, &regarding, "desired-all", source).await),
    };

    let mut owned_now = Vec::new();
    let mut failure = None;
    let mut not_served = Vec::new();
    let children = ctx.owned.iter().zip(desired).zip(current);
    for ((cache, desired), current) in children {
        let kind = cache.kind.name();
        if failure.is_some() {
            // Stopped at an earlier failure; the status still sees the rest.
            owned_now.extend(current.map(|c| cache.kind.to_json(&c)));
            continue;
        }
        if cache.availability() != Availability::Served {
            if desired.is_some() {
                not_served.push(format!("{kind} ({})", cache.kind.resource.api_version));
            }
            continue;
        }
        match (desired, current) {
            (Some(desired), current) => match create_or_update(ctx, cache, &view, current, desired).await {
                Ok(applied) => {
                    let child = applied.object.name_any();
                    let reference = applied.object.object_ref(&cache.kind.resource);
                    match applied.outcome {
                        Outcome::Created => {
                            let note = format!("Created {kind} {child}");
                            ctx.events.child_changed(&regarding, reference, "Created", "Create", note).await;
                        }
                        Outcome::Updated => {
                            let note = format!("Updated {kind} {child}");
                            ctx.events.child_changed(&regarding, reference, "Updated", "Update", note).await;
                        }
                        Outcome::Unchanged => {}
                    }
                    owned_now.push(cache.kind.to_json(&applied.object));
                }
                Err(error) => failure = Some(error),
            },
            (None, Some(current)) => match delete_disabled(ctx, cache, &view, &current).await {
                Ok(true) => {
                    let note = format!("Deleted {kind} {}", current.name_any());
                    let reference = current.object_ref(&cache.kind.resource);
                    ctx.events.child_changed(&regarding, reference, "Deleted", "Delete", note).await;
                }
                Ok(false) => {}
                Err(error) => failure = Some(error),
            },
            (None, None) => {}
        }
    }

    let problem = match (&failure, not_served.is_empty()) {
        (Some(error), _) => Some(error.to_string()),
        (None, false) => {
            let kinds = not_served.join(", ");
            tracing::warn!(namespace, name, kinds, "wanted kinds are not served by the API server; skipped");
            Some(format!("not served by the API server (is the CRD installed?): {kinds}"))
        }
        (None, true) => None,
    };
    let status_changed = write_status(ctx, &view, &owned_now, problem.as_deref()).await;
    if let Some(error) = failure {
        ctx.events.warning(&regarding, "ReconcileFailed", error.to_string()).await;
        return Err(error);
    }
    if status_changed?
        && let Some(problem) = problem
    {
        ctx.events.warning(&regarding, "KindNotServed", problem).await;
    }
    Ok(Verdict::Applied)
}

async fn module_failed(
    ctx: &Context,
    regarding: &k8s_openapi::api::core::v1::ObjectReference,
    function: &'static str,
    source: CallError,
) -> ReconcileError {
    let error = ReconcileError::Module { function, source };
    ctx.events.warning(regarding, "ModuleFailed", error.to_string()).await;
    error
}
