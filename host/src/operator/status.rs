//! The parent's status, from the module, written through the status
//! subresource only when it changed.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::compare::{merge_patch, same_ignoring_nulls};
use super::{Context, ParentView, ReconcileError};

/// `Ok(true)` when the status changed and was written.
pub async fn write_status(
    ctx: &Context,
    parent: &ParentView<'_>,
    owned: &[String],
    problem: Option<&str>,
) -> Result<bool, ReconcileError> {
    // Kubernetes times have second precision.
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let text = ctx
        .call("status", |m| m.status(parent.json, owned, parent.related, &now, problem))
        .map_err(|source| ReconcileError::Module { function: "status", source })?;
    let new: Value = serde_json::from_str(&text)
        .map_err(|source| ReconcileError::BadObject { kind: "status".to_owned(), source })?;
    let old = parent.object.data.get("status").unwrap_or(&Value::Null);
    if same_ignoring_nulls(old, &new) {
        return Ok(false);
    }
    let patch = json!({ "status": merge_patch(old, &new) });
    let api: Api<DynamicObject> = ctx.kinds.parent.api(&ctx.client, parent.namespace);
    api.patch_status(parent.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|source| {
        ReconcileError::Api {
            verb: "patch status of",
            kind: ctx.kinds.parent.name().to_owned(),
            namespace: parent.namespace.to_owned(),
            name: parent.name.to_owned(),
            source,
        }
    })?;
    tracing::info!(kind = ctx.kinds.parent.name(), name = parent.name, "status updated");
    Ok(true)
}
