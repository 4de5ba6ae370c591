//! The module's finalizer on a parent (`reach`'s `finalizes`, 1.3): added
//! before the first write for a parent, removed once the module is done
//! finalizing it, or once the version serving no longer finalizes. Each is
//! a merge patch of the parent's whole `finalizers` list that carries the
//! cached `resourceVersion`, so a list changed meanwhile (another
//! controller's finalizer) is refused with a Conflict and retried from the
//! new copy rather than overwritten.

use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::operator::context::Context;
use crate::operator::errors::ReconcileError;
use crate::operator::watching::cached_object::CachedObject;

/// Whether `parent` carries `finalizer`.
pub fn holds(parent: &CachedObject, finalizer: &str) -> bool {
    parent.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer` to the parent (which lacks it).
pub async fn add(ctx: &Context, parent: &CachedObject, finalizer: &str) -> Result<(), ReconcileError> {
    let mut finalizers = parent.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    patch(ctx, parent, finalizers).await
}

/// Removes `finalizer` from the parent (which holds it).
pub async fn remove(ctx: &Context, parent: &CachedObject, finalizer: &str) -> Result<(), ReconcileError> {
    let finalizers = parent.finalizers().iter().filter(|f| *f != finalizer).cloned().collect();
    patch(ctx, parent, finalizers).await
}

async fn patch(ctx: &Context, parent: &CachedObject, finalizers: Vec<String>) -> Result<(), ReconcileError> {
    let namespace = parent.meta().namespace.clone().unwrap_or_default();
    let name = parent.name_any();
    let body = json!({"metadata": {"finalizers": finalizers, "resourceVersion": parent.resource_version()}});
    let params = PatchParams { field_manager: Some(ctx.field_manager.clone()), ..PatchParams::default() };
    let api = ctx.parent_kind.api(&ctx.identity.client, &namespace);
    api.patch(&name, &params, &Patch::Merge(&body)).await.map(|_| ()).map_err(|source| ReconcileError::Api {
        verb: "patch",
        kind: ctx.parent_kind.name().to_owned(),
        namespace,
        name,
        source: Box::new(source),
    })
}
