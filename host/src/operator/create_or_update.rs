//! CreateOrUpdate, the seeds' `reconcileResource`: the desired object comes
//! from the module given the current one; equal means no API call at all;
//! otherwise create, or update with the resourceVersion the module kept.
//! A 409 (a stale resourceVersion, or an object created meanwhile) re-reads
//! the object from the API server, asks the module again and retries, at
//! most `MAX_ATTEMPTS` times.

use std::sync::Arc;

use kube::api::{DynamicObject, PostParams};
use kube::ResourceExt;
use serde_json::Value;

use super::caches::Cache;
use crate::module::CallError;
use super::compare::same_ignoring_nulls;
use super::{Context, ParentView, ReconcileError};

pub const MAX_ATTEMPTS: u32 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Unchanged => "unchanged",
        }
    }
}

pub struct Applied {
    pub outcome: Outcome,
    /// The object as the API server now has it.
    pub object: DynamicObject,
}

pub async fn create_or_update(
    ctx: &Context,
    cache: &Cache,
    parent: &ParentView<'_>,
    current: Option<Arc<DynamicObject>>,
    desired: String,
) -> Result<Applied, ReconcileError> {
    let kind = &cache.kind;
    let api = kind.api(&ctx.client, parent.namespace);
    let mut current: Option<DynamicObject> = current.map(Arc::unwrap_or_clone);
    let mut desired = desired;
    for attempt in 1..=MAX_ATTEMPTS {
        let desired_value: Value = serde_json::from_str(&desired)
            .map_err(|source| ReconcileError::BadObject { kind: kind.name().to_owned(), source })?;
        if let Some(current_object) = &current
            && same_ignoring_nulls(&kind.to_value(current_object), &desired_value)
        {
            let name = current_object.name_any();
            tracing::info!(kind = kind.name(), name, operation = "unchanged", "{} reconciled", kind.name());
            ctx.metrics.wrote(kind.name(), Outcome::Unchanged.as_str());
            return Ok(Applied { outcome: Outcome::Unchanged, object: current_object.clone() });
        }
        let desired_object: DynamicObject = serde_json::from_value(desired_value)
            .map_err(|source| ReconcileError::BadObject { kind: kind.name().to_owned(), source })?;
        let name = desired_object.name_any();
        let result = match &current {
            Some(_) => api.replace(&name, &PostParams::default(), &desired_object).await.map(|o| (Outcome::Updated, o)),
            None => api.create(&PostParams::default(), &desired_object).await.map(|o| (Outcome::Created, o)),
        };
        match result {
            Ok((outcome, object)) => {
                tracing::info!(kind = kind.name(), name, operation = outcome.as_str(), "{} reconciled", kind.name());
                ctx.metrics.wrote(kind.name(), outcome.as_str());
                return Ok(Applied { outcome, object });
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::info!(
                    kind = kind.name(),
                    name,
                    attempt,
                    max_retries = MAX_ATTEMPTS,
                    "Conflict retrying {} reconciliation",
                    kind.name()
                );
                ctx.metrics.conflict_retried(kind.name());
                if attempt == MAX_ATTEMPTS {
                    break;
                }
                current = api.get_opt(&name).await.map_err(|source| ReconcileError::Api {
                    verb: "get",
                    kind: kind.name().to_owned(),
                    namespace: parent.namespace.to_owned(),
                    name: name.clone(),
                    source,
                })?;
                let current_json = current.as_ref().map(|c| kind.to_json(c));
                let answer =
                    ctx.call("desired", |m| m.desired(kind.name(), parent.json, current_json.as_deref(), parent.related));
                desired = match answer {
                    Ok(Some(desired)) => desired,
                    Ok(None) => return Err(ReconcileError::Vanished { kind: kind.name().to_owned() }),
                    // The module refuses the object as it is now (e.g. it
                    // has another controller): say which object.
                    Err(CallError::Logic(source)) => {
                        return Err(ReconcileError::Refused {
                            kind: kind.name().to_owned(),
                            namespace: parent.namespace.to_owned(),
                            name,
                            source,
                        });
                    }
                    Err(source) => return Err(ReconcileError::Module { function: "desired", source }),
                };
            }
            Err(source) => {
                ctx.metrics.wrote(kind.name(), "failed");
                return Err(ReconcileError::Api {
                    verb: if current.is_some() { "update" } else { "create" },
                    kind: kind.name().to_owned(),
                    namespace: parent.namespace.to_owned(),
                    name,
                    source,
                });
            }
        }
    }
    ctx.metrics.wrote(kind.name(), "failed");
    Err(ReconcileError::Conflict {
        kind: kind.name().to_owned(),
        namespace: parent.namespace.to_owned(),
        name: parent.name.to_owned(),
        attempts: MAX_ATTEMPTS,
    })
}
