//! The parent's status, as the module answered it (`planning/step.rs`),
//! written through the status subresource only when it changed; and the one condition the host writes
//! itself, `Stalled`, when the module failed and cannot report it.

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::Request;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::operator::context::{Context, ParentView};
use crate::operator::errors::ReconcileError;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::writing::status_memo::StatusMemo;
use crate::operator::writing::write_answer::VersionWritten;
use crate::planning::object_diff::{merge_patch, same_ignoring_nulls};
use crate::planning::step::{StatusAnswer, now};

/// Writes `status` (the module's answer, `planning/step.rs`) to the parent;
/// `Ok(true)` when it changed and was written.
pub async fn write_status(
    ctx: &Context,
    parent: &ParentView<'_>,
    status: &StatusAnswer,
) -> Result<bool, ReconcileError> {
    let (text, new) = (&status.text, &status.value);
    let key = (parent.namespace.to_owned(), parent.name.to_owned());
    let based_on = parent.object.resource_version();
    let written_hash = StatusMemo::hash(text);
    if ctx.status_memo.already_written(&key, based_on.as_deref(), written_hash) {
        // This very status, computed from this very cached parent, is what
        // this process wrote last (a child's event woke us before the
        // parent's echo did): nothing to do, and nothing to ask.
        return Ok(false);
    }
    let api: Api<DynamicObject> = ctx.parent_kind.api(&ctx.identity.client, parent.namespace);
    let id = (ctx.parent_kind.id(), parent.namespace.to_owned(), parent.name.to_owned());
    let old = match baseline(ctx.own_writes.awaiting_echo(&id)) {
        // The cache now, not the copy this reconcile started with: our last
        // write's echo may have arrived since (the cache takes an event
        // before its echo is recognised), and compared with the older copy
        // a status equal to that write would be written again.
        Baseline::Cached => {
            let now = ctx.parents.get(&ObjectRef::from_obj_with(parent.object, ctx.parent_kind.resource.clone()));
            now.map_or_else(|| parent.object.status(), |cached| cached.status())
        }
        // The echo of our last write to this parent is still to come, so
        // the cache may not show what the server holds: compared with the
        // cache, a status equal to that write would be written again (a
        // write that changes nothing), and one equal to the cached status
        // would be left unwritten while the server shows ours (make soak
        // found both). One read, only in that window.
        Baseline::Server => match server_status(ctx, &api, parent).await? {
            Some(status) => status,
            None => return Ok(false),
        },
    };
    if same_ignoring_nulls(&old, new) {
        return Ok(false);
    }
    let patch = json!({ "status": merge_patch(&old, new) });
    let request = patch_status(ctx, &api, parent.name, &patch);
    let parent_kind = &ctx.parent_kind;
    ctx.own_write(parent_kind, parent.namespace, parent.name, parent.name, request).await.map_err(|source| {
        ReconcileError::Api {
            verb: "patch status of",
            kind: ctx.parent_kind.name().to_owned(),
            namespace: parent.namespace.to_owned(),
            name: parent.name.to_owned(),
            source: Box::new(source),
        }
    })?;
    ctx.status_memo.wrote(key, based_on, written_hash);
    tracing::info!(module = ctx.module_name, kind = ctx.parent_kind.name(), name = parent.name, "status updated");
    Ok(true)
}

/// What the status to write is compared with.
#[derive(Debug, PartialEq, Eq)]
enum Baseline {
    /// The cached parent's: it holds our last write to it, or a later version.
    Cached,
    /// The API server's: our last write's echo has not reached the cache.
    Server,
}

fn baseline(awaiting_echo: bool) -> Baseline {
    if awaiting_echo { Baseline::Server } else { Baseline::Cached }
}

/// The parent's status as the API server holds it; `None` once it is gone.
/// A list of that one name: the module's identity may list its parents
/// (checked at load), not necessarily get them.
async fn server_status(
    ctx: &Context,
    api: &Api<DynamicObject>,
    parent: &ParentView<'_>,
) -> Result<Option<Value>, ReconcileError> {
    let one = ListParams::default().fields(&format!("metadata.name={}", parent.name));
    let fresh = api.list(&one).await.map_err(|source| ReconcileError::Api {
        verb: "list",
        kind: ctx.parent_kind.name().to_owned(),
        namespace: parent.namespace.to_owned(),
        name: parent.name.to_owned(),
        source: Box::new(source),
    })?;
    Ok(fresh.items.into_iter().next().map(|p| p.data.get("status").cloned().unwrap_or(Value::Null)))
}

/// A merge patch of `name`'s status subresource, as `Api::patch_status`
/// sends it; of the answer (the whole parent, managedFields included) only
/// the version written is read.
async fn patch_status(
    ctx: &Context,
    api: &Api<DynamicObject>,
    name: &str,
    patch: &Value,
) -> kube::Result<VersionWritten> {
    let params = PatchParams { field_manager: Some(ctx.field_manager.clone()), ..PatchParams::default() };
    let mut request = Request::new(api.resource_url())
        .patch_subresource("status", name, &params, &Patch::Merge(patch))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch_subresource");
    ctx.identity.client.request::<VersionWritten>(request).await
}

/// The condition the host sets when the module itself failed for this
/// parent (kstatus's `Stalled`: the controller cannot make progress). The
/// module's next successful status replaces the conditions, and with them
/// this one.
pub const STALLED: &str = "Stalled";

/// Sets `Stalled=True` with `reason` on the parent's status conditions,
/// keeping the others; writes only when that changes something.
pub async fn write_stalled(
    ctx: &Context,
    parent: &CachedObject,
    reason: &str,
    message: &str,
) -> Result<bool, ReconcileError> {
    let (Some(namespace), Some(name)) = (parent.meta().namespace.as_deref(), parent.meta().name.as_deref()) else {
        return Err(ReconcileError::MissingMetadata);
    };
    let now = now();
    let current = parent.status().get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let stalled = Condition { kind: STALLED, reason, message };
    let Some(conditions) = with_condition(current, &stalled, parent.meta().generation, &now, &[]) else {
        return Ok(false);
    };
    let patch = json!({ "status": { "conditions": conditions } });
    let api: Api<DynamicObject> = ctx.parent_kind.api(&ctx.identity.client, namespace);
    let request = patch_status(ctx, &api, name, &patch);
    ctx.own_write(&ctx.parent_kind, namespace, name, name, request).await.map_err(|source| ReconcileError::Api {
        verb: "patch status of",
        kind: ctx.parent_kind.name().to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source: Box::new(source),
    })?;
    Ok(true)
}

/// The condition the host adds to the status a module answers when the
/// reconcile's applies took fields over from another field manager (a
/// module that writes by server-side apply): `True`, reason
/// `ApplyConflict`, the message naming each object, field and manager. A
/// later reconcile that takes nothing over writes the module's status
/// without it.
pub const FIELDS_TAKEN_OVER: &str = "FieldsTakenOver";

/// Adds `FieldsTakenOver=True` to `status` (the module's answer) for the
/// fields `taken` names, true since the parent's own condition was, if it
/// is there already.
pub fn add_fields_taken_over(status: &mut StatusAnswer, parent: &CachedObject, taken: &[String]) {
    let message = taken.join("; ");
    add_condition(status, parent, &Condition { kind: FIELDS_TAKEN_OVER, reason: "ApplyConflict", message: &message });
}

/// Adds `Stalled=True` (reason `NotSettling`) to `status` (the module's
/// answer) for a parent whose reconciles wrote at each of `steps` steps
/// in a row: the host stops waking it by its own writes. The module's next
/// status without it, when a change or the resync reconciles it, replaces it.
pub fn add_not_settling(status: &mut StatusAnswer, parent: &CachedObject, steps: u32) {
    let message = format!(
        "wrote in {steps} reconciles in a row, each woken by its own writes: the next waits for a change or the resync"
    );
    add_condition(status, parent, &Condition { kind: STALLED, reason: "NotSettling", message: &message });
}

/// Adds `condition` to `status` (the module's answer), true since the
/// parent's own condition was, if it is there already.
fn add_condition(status: &mut StatusAnswer, parent: &CachedObject, condition: &Condition<'_>) {
    let Value::Object(members) = &mut status.value else { return };
    let answered = members.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let earlier = parent.status().get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(conditions) = with_condition(answered, condition, parent.meta().generation, &status.now, &earlier) {
        members.insert("conditions".into(), Value::Array(conditions));
        // The text is what the status memo knows a written status by.
        status.text = status.value.to_string();
    }
}

/// A condition the host sets, `True`.
struct Condition<'a> {
    kind: &'a str,
    reason: &'a str,
    message: &'a str,
}

/// `conditions` with `condition`; none when it is already there with that
/// reason and message. True since it was in `conditions` or `earlier` (the
/// parent's conditions, when `conditions` is a new answer), or since `now`.
fn with_condition(
    mut conditions: Vec<Value>,
    condition: &Condition<'_>,
    generation: Option<i64>,
    now: &str,
    earlier: &[Value],
) -> Option<Vec<Value>> {
    let Condition { kind, reason, .. } = *condition;
    // The API server refuses condition messages over 32 KiB; a trap's
    // backtrace can be long.
    let message: String = condition.message.chars().take(1024).collect();
    let existing = conditions.iter().position(|c| c["type"] == kind);
    if let Some(index) = existing {
        let condition = &conditions[index];
        if condition["status"] == "True" && condition["reason"] == reason && condition["message"] == message.as_str() {
            return None;
        }
    }
    let since = existing
        .map(|index| &conditions[index])
        .into_iter()
        .chain(earlier.iter().filter(|c| c["type"] == kind))
        .find(|c| c["status"] == "True")
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    let mut condition =
        json!({"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": since});
    if let Some(generation) = generation {
        condition["observedGeneration"] = json!(generation);
    }
    match existing {
        Some(index) => conditions[index] = condition,
        None => conditions.push(condition),
    }
    Some(conditions)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_that_is_not_one_json_object_is_refused_with_its_reason() {
        use crate::runtime::answer::{Refusal, check_status};
        let reason = |text: &str| check_status(text).map(|_| ()).map_err(|refused| refused.reason);
        for text in ["[]", "\"x\"", "42", "null", "true"] {
            assert_eq!(reason(text), Err(Refusal::StatusNotObject), "{text}");
        }
        assert_eq!(reason("{\"phase\": \"x\"} trailing"), Err(Refusal::NotJson));
        // Deep nesting is refused by a scan, before serde_json recurses.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(reason(&deep), Err(Refusal::TooDeep));
        assert_eq!(reason(&"{\"a\":".repeat(100_000)), Err(Refusal::TooDeep));
        assert_eq!(reason("{\"phase\": \"Ready\"}"), Ok(()));
        let refused = check_status("[]").expect_err("refused");
        assert_eq!(refused.problem, "status: [] is not a JSON object");
    }

    /// `make soak` found both: a reconcile wrote status A computed on the
    /// cached parent at version 5; before that write's echo reached the
    /// cache, the next reconcile (woken by a child) computed either B, the
    /// status the cache still showed (so it wrote nothing and A stayed for
    /// good), or A again on the parent at version 6, someone else's change
    /// (so it wrote A again: a write that changed nothing). Until the echo
    /// is in the cache, the server's status is the one compared with.
    #[test]
    fn the_status_is_compared_with_the_servers_until_our_last_writes_echo_is_cached() {
        use crate::operator::watching::own_writes::OwnWrites;
        let writes = OwnWrites::default();
        let parent = ("example.com/Cache".to_owned(), "ns".to_owned(), "cache".to_owned());
        assert_eq!(baseline(writes.awaiting_echo(&parent)), Baseline::Cached, "nothing written yet");
        writes.writing(&parent);
        assert_eq!(writes.answered(&parent, Some("7")), crate::operator::watching::own_writes::Held::Nothing);
        assert_eq!(baseline(writes.awaiting_echo(&parent)), Baseline::Server, "the echo (7) is still to come");
        // Someone else's change (6) before ours, seen first: still waiting.
        assert!(!writes.is_echo(&parent, Some("6")));
        // ... which supersedes the entry: a later event means the cache
        // moved on, so it is compared with again.
        assert_eq!(baseline(writes.awaiting_echo(&parent)), Baseline::Cached);
        writes.writing(&parent);
        writes.answered(&parent, Some("9"));
        assert!(writes.is_echo(&parent, Some("9")), "our echo");
        assert_eq!(baseline(writes.awaiting_echo(&parent)), Baseline::Cached, "the cache holds our write");
    }

    fn with_stalled(
        conditions: Vec<Value>,
        reason: &str,
        message: &str,
        generation: Option<i64>,
        now: &str,
    ) -> Option<Vec<Value>> {
        with_condition(conditions, &Condition { kind: STALLED, reason, message }, generation, now, &[])
    }

    #[test]
    fn stalled_is_added_kept_and_updated_once() {
        let ready =
            json!({"type": "Ready", "status": "False", "reason": "X", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let set =
            with_stalled(vec![ready.clone()], "ModuleTrapped", "boom", Some(3), "2026-11-23T10:00:00Z").expect("added");
        assert_eq!(set[0], ready, "other conditions are kept");
        assert_eq!(
            set[1],
            json!({"type": "Stalled", "status": "True", "reason": "ModuleTrapped", "message": "boom",
                   "lastTransitionTime": "2026-11-23T10:00:00Z", "observedGeneration": 3})
        );
        // The same failure again writes nothing.
        assert_eq!(with_stalled(set.clone(), "ModuleTrapped", "boom", Some(3), "2026-11-23T11:00:00Z"), None);
        // Another failure updates it, keeping when it became true.
        let changed =
            with_stalled(set, "ModuleDeadlineExceeded", "slow", Some(4), "2026-11-23T12:00:00Z").expect("changed");
        assert_eq!(changed.len(), 2);
        assert_eq!(changed[1]["reason"], "ModuleDeadlineExceeded");
        assert_eq!(changed[1]["lastTransitionTime"], "2026-11-23T10:00:00Z");
        let long = "x".repeat(5000);
        let cut = with_stalled(Vec::new(), "ModuleTrapped", &long, None, "2026-11-23T10:00:00Z").expect("added");
        assert_eq!(cut[0]["message"].as_str().map(str::len), Some(1024));
    }

    #[test]
    fn a_condition_added_to_a_new_answer_is_true_since_the_parents_was() {
        let taken = Condition {
            kind: FIELDS_TAKEN_OVER,
            reason: "ApplyConflict",
            message: "StatefulSet orders: took over .spec.replicas (kubectl-edit)",
        };
        let answered = vec![json!({"type": "Ready", "status": "True", "reason": "Up"})];
        let fresh = with_condition(answered.clone(), &taken, Some(2), "2026-12-01T10:00:00Z", &[]).expect("added");
        assert_eq!(fresh[1]["lastTransitionTime"], "2026-12-01T10:00:00Z");
        assert_eq!(fresh[1]["type"], "FieldsTakenOver");
        let earlier =
            [json!({"type": "FieldsTakenOver", "status": "True", "lastTransitionTime": "2026-12-01T09:00:00Z"})];
        let again = with_condition(answered.clone(), &taken, Some(2), "2026-12-01T10:00:00Z", &earlier).expect("added");
        assert_eq!(again[1]["lastTransitionTime"], "2026-12-01T09:00:00Z", "a fight that goes on");
        let ended =
            [json!({"type": "FieldsTakenOver", "status": "False", "lastTransitionTime": "2026-12-01T09:00:00Z"})];
        let anew = with_condition(answered, &taken, Some(2), "2026-12-01T10:00:00Z", &ended).expect("added");
        assert_eq!(anew[1]["lastTransitionTime"], "2026-12-01T10:00:00Z");
    }
}
