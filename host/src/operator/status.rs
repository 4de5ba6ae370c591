//! The parent's status, from the module, written through the status
//! subresource only when it changed.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::compare::{merge_patch, same_ignoring_nulls};
use super::references::ParentKey;
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
    let key = (parent.namespace.to_owned(), parent.name.to_owned());
    let based_on = parent.object.metadata.resource_version.clone();
    if ctx.status_memo.already_written(&key, based_on.as_deref(), &new) {
        // The cached parent predates our own last write of this very status
        // (a child's event woke us before the parent's did): nothing to do.
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
    ctx.status_memo.wrote(key, based_on, new);
    tracing::info!(kind = ctx.kinds.parent.name(), name = parent.name, "status updated");
    Ok(true)
}

/// The status last written per parent, and the parent resourceVersion it was
/// computed from.
#[derive(Default)]
pub struct StatusMemo {
    written: std::sync::Mutex<std::collections::HashMap<ParentKey, (Option<String>, Value)>>,
}

impl StatusMemo {
    fn already_written(&self, parent: &ParentKey, based_on: Option<&str>, status: &Value) -> bool {
        let written = self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        written.get(parent).is_some_and(|(rv, last)| rv.as_deref() == based_on && same_ignoring_nulls(last, status))
    }

    fn wrote(&self, parent: ParentKey, based_on: Option<String>, status: Value) {
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(parent, (based_on, status));
    }

    pub fn forget(&self, parent: &ParentKey) {
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(parent);
    }
}
