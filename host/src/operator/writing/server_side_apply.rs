//! The write of a module that applies (`writes`: `apply`): server-side
//! apply of the answer the plan prepared (`planning/applied.rs`: without
//! what the server sets, with its digest), under the module's field
//! manager. The API server merges it by the kind's own schema and removes
//! what the manager applied before and no longer applies.
//!
//! A field another manager set that the answer sets too is taken over: the
//! apply is sent without force first, and a conflict (409, each field and
//! its manager in the causes) is reported (a Warning event `FieldsTakenOver`
//! on the parent, `wasm_operator_apply_conflicts_total`, and the condition
//! `FieldsTakenOver` in the status the reconcile writes) before the apply
//! is sent again with force. The module's answer is what the object should
//! hold, as with `replace`, where an update overwrites whatever another
//! writer changed; taking over also corrects a field edited by hand. Only a
//! conflict costs the second request.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::core::Request;
use kube::core::response::StatusCause;
use serde_json::Value;

use crate::operator::context::{Context, ParentView};
use crate::operator::errors::ReconcileError;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::Cache;
use crate::operator::writing::create_or_update::{Applied, Outcome, written};

/// Applies `applied` (an answer the plan prepared); `exists` says whether
/// the object was there when the reconcile read it (the outcome's name).
pub async fn server_side_apply(
    ctx: &Context,
    cache: &Cache,
    parent: &ParentView<'_>,
    regarding: &ObjectReference,
    exists: bool,
    applied: Value,
) -> Result<Applied, ReconcileError> {
    let kind = &cache.kind;
    let name = applied.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_error = |source| ReconcileError::Api {
        verb: "apply",
        kind: kind.name().to_owned(),
        namespace: parent.namespace.to_owned(),
        name: name.clone(),
        source: Box::new(source),
    };
    let mut params = PatchParams::apply(&ctx.field_manager);
    let mut took_over = None;
    let object = loop {
        let api = kind.api(&ctx.identity.client, parent.namespace);
        let mut request = Request::new(api.resource_url())
            .patch(&name, &params, &Patch::Apply(&applied))
            .map_err(|source| api_error(kube::Error::BuildRequest(source)))?;
        request.extensions_mut().insert("apply");
        // Read back compact, as the caches hold objects.
        let sent = ctx.identity.client.request::<CachedObject>(request);
        match ctx.own_write(kind, parent.namespace, &name, parent.name, sent).await {
            Ok(object) => break object,
            Err(kube::Error::Api(status)) if status.code == 409 && !params.force => {
                let causes = status.details.as_ref().map(|details| details.causes.as_slice()).unwrap_or_default();
                let taken = taken_over(causes);
                tracing::warn!(
                    module = ctx.module_name,
                    kind = kind.name(),
                    namespace = parent.namespace,
                    name,
                    fields = taken,
                    "fields another manager set are taken over"
                );
                ctx.metrics.apply_conflicted(kind.name());
                let note = format!("{} {name}: took over {taken}", kind.name());
                ctx.events.warning(regarding, "FieldsTakenOver", note.clone()).await;
                took_over = Some(note);
                params = params.force();
            }
            Err(source) => {
                ctx.metrics.wrote(kind.name(), "failed");
                return Err(api_error(source));
            }
        }
    };
    let outcome = if exists { Outcome::Updated } else { Outcome::Created };
    Ok(Applied { taken_over: took_over, ..written(ctx, kind, &name, outcome, &object) })
}

/// The fields of a conflict and who set them, as the API server names
/// them: `.spec.replicas (kube-controller-manager)`, or what it said when
/// it named none.
fn taken_over(causes: &[StatusCause]) -> String {
    let named: Vec<String> = causes
        .iter()
        .filter(|cause| !cause.field.is_empty())
        .map(|cause| {
            // `conflict with "manager" using apps/v1`, or `... with "manager"`.
            let manager = cause.message.split('"').nth(1).unwrap_or(&cause.message);
            format!("{} ({manager})", cause.field)
        })
        .collect();
    if named.is_empty() { "fields another manager set".to_owned() } else { named.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(field: &str, message: &str) -> StatusCause {
        StatusCause { reason: "FieldManagerConflict".into(), message: message.into(), field: field.into() }
    }

    #[test]
    fn a_conflict_names_each_field_and_its_manager() {
        let causes = [
            cause(".spec.replicas", r#"conflict with "kube-controller-manager" using apps/v1"#),
            cause(".metadata.labels.team", r#"conflict with "kubectl-edit""#),
        ];
        assert_eq!(
            taken_over(&causes),
            ".spec.replicas (kube-controller-manager), .metadata.labels.team (kubectl-edit)"
        );
        assert_eq!(taken_over(&[]), "fields another manager set");
        assert_eq!(taken_over(&[cause(".data.k", "a message without a name")]), ".data.k (a message without a name)");
    }
}
