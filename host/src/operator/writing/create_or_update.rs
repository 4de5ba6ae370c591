//! CreateOrUpdate, the seeds' `reconcileResource`, for an object the
//! reconcile's plan (`planning/step.rs`) found to create or to update:
//! create it, or update it with the resourceVersion the module kept. A 409
//! (a stale resourceVersion, or an object created meanwhile) re-reads the
//! object from the API server, asks again (the caller runs the same step
//! with the object as it is now) and retries, at most `MAX_ATTEMPTS`
//! times; equal to the object now means no further request. An object that
//! exists but is not the parent's yet (an orphan to adopt, or another's)
//! reaches the module this way, and the module decides.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::PostParams;
use kube::core::Request;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::operator::context::{Context, ParentView};
use crate::operator::errors::ReconcileError;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::Cache;
use crate::planning::kinds::Kind;
use crate::planning::step::is_unchanged;
use crate::runtime::answer::{Refusal, RefusedAnswer};

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
    /// The object as the API server now has it, as a module reads it.
    pub json: String,
    /// What was written, when something was.
    pub written: Option<ObjectReference>,
    /// The fields an apply took over from other managers, and theirs
    /// (`server_side_apply.rs`), when it did.
    pub taken_over: Option<String>,
}

/// The module's answer for one object again, given the object as the API
/// server has it now (`None`: it does not exist).
pub type AskAgain<'a> = dyn Fn(Option<&str>) -> Result<Value, ReconcileError> + Send + Sync + 'a;

/// Creates `desired`, or updates `current` (the object as the module read
/// it) to it.
pub async fn create_or_update(
    ctx: &Context,
    cache: &Cache,
    parent: &ParentView<'_>,
    current: Option<String>,
    desired: Value,
    ask_again: &AskAgain<'_>,
) -> Result<Applied, ReconcileError> {
    let kind = &cache.kind;
    let api = kind.api(&ctx.identity.client, parent.namespace);
    let params = PostParams { field_manager: Some(ctx.field_manager.clone()), ..PostParams::default() };
    // The current object as the module read it, as text: a reconcile in
    // flight holds text, not trees, while it waits on the API server (64 in
    // flight during a Secret rotation). The plan compared it already; after
    // a conflict the object re-read is compared again.
    let mut current = current;
    let mut desired = desired;
    let mut compare = false;
    let name = desired.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_error = |verb, source| ReconcileError::Api {
        verb,
        kind: kind.name().to_owned(),
        namespace: parent.namespace.to_owned(),
        name: name.clone(),
        source: Box::new(source),
    };
    for attempt in 1..=MAX_ATTEMPTS {
        if compare
            && let Some(current_json) = &current
            && is_unchanged(current_json, &desired)
        {
            return Ok(unchanged(ctx, kind, &name, current_json.clone()));
        }
        // The body as kube's `Api::replace` would send it; the tree goes
        // before the request waits.
        let body = request_body(std::mem::take(&mut desired)).map_err(|source| {
            let problem = format!("{} {name}: {source}", kind.name());
            ReconcileError::InvalidOutput(RefusedAnswer::new(Refusal::NotObject, problem))
        })?;
        let (outcome, verb, built) = match &current {
            Some(_) => (Outcome::Updated, "replace", Request::new(api.resource_url()).replace(&name, &params, body)),
            None => (Outcome::Created, "create", Request::new(api.resource_url()).create(&params, body)),
        };
        let mut request = built.map_err(|source| api_error(verb, kube::Error::BuildRequest(source)))?;
        request.extensions_mut().insert(verb);
        // Read back compact (no managedFields, no tree of spec and status),
        // as the caches hold objects.
        let sent = ctx.identity.client.request::<CachedObject>(request);
        let result =
            ctx.own_write(kind, parent.namespace, &name, parent.name, sent).await.map(|object| (outcome, object));
        match result {
            Ok((outcome, object)) => return Ok(written(ctx, kind, &name, outcome, &object)),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::info!(
                    module = ctx.module_name,
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
                let fresh = api.get_opt(&name).await.map_err(|source| api_error("get", source))?;
                current = fresh.map(|object| kind.to_json(&object));
                desired = ask_again(current.as_deref())?;
                compare = true;
            }
            Err(source) => {
                ctx.metrics.wrote(kind.name(), "failed");
                return Err(api_error(if current.is_some() { "update" } else { "create" }, source));
            }
        }
    }
    ctx.metrics.wrote(kind.name(), "failed");
    Err(ReconcileError::Conflict {
        kind: kind.name().to_owned(),
        namespace: parent.namespace.to_owned(),
        name,
        attempts: MAX_ATTEMPTS,
    })
}

/// An object the API server has just written (`object`, its answer):
/// logged and counted.
pub fn written(ctx: &Context, kind: &Kind, name: &str, outcome: Outcome, object: &CachedObject) -> Applied {
    tracing::info!(
        module = ctx.module_name,
        kind = kind.name(),
        name,
        operation = outcome.as_str(),
        "{} reconciled",
        kind.name()
    );
    ctx.metrics.wrote(kind.name(), outcome.as_str());
    let written = Some(object.object_ref(&kind.resource));
    Applied { outcome, json: object.module_json(kind), written, taken_over: None }
}

/// An object the module wants as it is: no request. Counted and logged as
/// every write is.
pub fn unchanged(ctx: &Context, kind: &Kind, name: &str, json: String) -> Applied {
    tracing::debug!(
        module = ctx.module_name,
        kind = kind.name(),
        name,
        operation = "unchanged",
        "{} reconciled",
        kind.name()
    );
    ctx.metrics.wrote(kind.name(), Outcome::Unchanged.as_str());
    Applied { outcome: Outcome::Unchanged, json, written: None, taken_over: None }
}

/// `desired` as kube's `Api::create` and `Api::replace` send a
/// `DynamicObject` made from it: apiVersion and kind, the metadata as
/// `ObjectMeta` writes it (members it does not know, and nulls, left out),
/// then the other members as they are. Serialized straight from the tree,
/// not through the `DynamicObject`, whose flattened members serde buffers
/// whole when it is deserialized.
fn request_body(desired: Value) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct RequestBody<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        kind: &'a str,
        metadata: ObjectMeta,
        #[serde(flatten)]
        members: &'a Map<String, Value>,
    }
    let Value::Object(mut members) = desired else {
        return Err(serde::de::Error::custom("the object is not a JSON object"));
    };
    let (Some(Value::String(api_version)), Some(Value::String(kind))) =
        (members.remove("apiVersion"), members.remove("kind"))
    else {
        return Err(serde::de::Error::custom("apiVersion and kind must be strings"));
    };
    let metadata = match members.remove("metadata") {
        Some(metadata) => ObjectMeta::deserialize(metadata)?,
        None => return Err(serde::de::Error::missing_field("metadata")),
    };
    serde_json::to_vec(&RequestBody { api_version: &api_version, kind: &kind, metadata, members: &members })
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use serde_json::json;

    use super::*;

    /// What kube's `Api::replace` sends for a `DynamicObject` made from it.
    fn as_kube_sends(desired: &Value) -> Vec<u8> {
        let object: DynamicObject = serde_json::from_value(desired.clone()).unwrap();
        serde_json::to_vec(&object).unwrap()
    }

    #[test]
    fn the_body_is_what_kube_sends_for_a_dynamic_object() {
        let objects = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "ns", "labels": {"b": "2", "a": "1"},
                                "ownerReferences": [{"apiVersion": "x/v1", "kind": "X", "name": "p", "uid": "u",
                                                     "controller": true, "blockOwnerDeletion": true}],
                                "resourceVersion": "12", "annotations": {}},
                   "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                   "status": {"replicas": null}}),
            // Nulls and members ObjectMeta does not know are left out of the
            // metadata; a timestamp is written as ObjectMeta writes it.
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "web", "uid": null, "surprise": {"x": 1},
                                "creationTimestamp": "2026-11-28T01:02:03Z", "generation": 4},
                   "spec": {"ports": [{"port": 11211}]}, "data": "at the top level", "zzz": [1, {"b": null}]}),
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "only"}}),
        ];
        for desired in objects {
            let body = request_body(desired.clone()).unwrap();
            assert_eq!(
                String::from_utf8(body).unwrap(),
                String::from_utf8(as_kube_sends(&desired)).unwrap(),
                "for {desired}"
            );
        }
    }

    #[test]
    fn a_body_that_is_no_object_is_refused_with_what_is_wrong() {
        let no_kind = request_body(json!({"apiVersion": "v1", "metadata": {"name": "x"}})).unwrap_err();
        assert!(no_kind.to_string().contains("apiVersion and kind"), "{no_kind}");
        let no_metadata = request_body(json!({"apiVersion": "v1", "kind": "Service"})).unwrap_err();
        assert!(no_metadata.to_string().contains("metadata"), "{no_metadata}");
        let bad_metadata =
            request_body(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": 7}})).unwrap_err();
        assert!(bad_metadata.to_string().contains("invalid type"), "{bad_metadata}");
        assert!(request_body(json!(["not", "an", "object"])).is_err());
    }
}
