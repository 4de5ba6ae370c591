//! Deleting a child the module no longer wants (a feature turned off, one
//! of several dropped): only when its controller owner reference is this
//! parent's UID, and only that very object (a UID precondition), so nothing
//! else is ever touched.

use kube::ResourceExt;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};

use crate::operator::context::{Context, ParentView};
use crate::operator::errors::ReconcileError;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::Cache;

/// `Ok(true)` when deleted; `Ok(false)` when it was not ours or is gone.
pub async fn delete_unwanted(
    ctx: &Context,
    cache: &Cache,
    parent: &ParentView<'_>,
    current: &CachedObject,
) -> Result<bool, ReconcileError> {
    let kind = &cache.kind;
    let name = current.name_any();
    let controlled_by_parent =
        current.owner_references().iter().any(|r| r.controller == Some(true) && r.uid == parent.uid);
    if !controlled_by_parent {
        return Ok(false);
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: current.uid(), resource_version: None }),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match kind.api(&ctx.identity.client, parent.namespace).delete(&name, &params).await {
        Ok(_) => {
            tracing::info!(
                module = ctx.module_name,
                kind = kind.name(),
                name,
                operation = "deleted",
                "{} reconciled",
                kind.name()
            );
            ctx.metrics.wrote(kind.name(), "deleted");
            Ok(true)
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        // The UID precondition failed: another object has that name now.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => {
            ctx.metrics.wrote(kind.name(), "failed");
            Err(ReconcileError::Api {
                verb: "delete",
                kind: kind.name().to_owned(),
                namespace: parent.namespace.to_owned(),
                name,
                source: Box::new(source),
            })
        }
    }
}
