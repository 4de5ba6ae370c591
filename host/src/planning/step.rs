//! One reconcile's module calls, in the order the host makes them, with the
//! checks on their answers and the write each answer calls for, and no I/O.
//! The operator (`operator/reconciling/reconcile.rs`) performs what this
//! plans; everything that shows what a version would do without writing
//! (`offline`: `render`, `test`, `plan`, a swap's dry run, a shadow, a
//! replayed record) runs the same functions and leaves the writes out.
//!
//! A reconcile is two halves around its writes: [`plan`] (`references`,
//! `desired`, the answer checks, the write each desired object needs and
//! the children to delete), then [`status`] (from the objects as written).
//! A write refused with a conflict asks again through [`desire`], the
//! middle of the same plan, with the object as the API server has it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::planning::answer_check::{self, DesiredObject, Owner};
use crate::planning::applied;
use crate::planning::field_set::FieldSet;
use crate::planning::kind_schema::KindSchema;
use crate::planning::kinds::Kind;
use crate::planning::object_diff::same_ignoring_nulls;
use crate::planning::stored::as_stored;
use crate::runtime::answer::{RefusedAnswer, check_status};
use crate::runtime::bindings::{ObjectRef, ReachManifest};
use crate::runtime::call_error::{CallError, CallResult, LogicError};
use crate::runtime::reconciler::Reconciler;

/// Who makes a module call: the operator (timed and counted, the module's
/// log lines emitted with the parent) or a command (a fresh instance, its
/// log to standard error). Each call is on a fresh instance.
pub trait ModuleCaller {
    fn call<T>(&self, function: &'static str, call: impl FnOnce(&mut Reconciler) -> CallResult<T>) -> CallResult<T>;
}

/// Why a step stopped: the module failed (or answered an error where none
/// is expected), or it answered something the host refuses.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("the logic module failed in {function}: {source}")]
    Module { function: &'static str, source: CallError },
    #[error("the logic module answered something the host refuses: {0}")]
    Refused(RefusedAnswer),
}

/// The parent, as the module reads it.
#[derive(Clone, Copy)]
pub struct Parent<'a> {
    /// The object, as the module is given it.
    pub json: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
}

/// One child the parent controls now: which owned kind, and its name.
#[derive(Clone, Copy, Debug)]
pub struct Child<'a> {
    pub kind_index: usize,
    pub name: &'a str,
}

/// What a reconcile starts from.
pub struct Inputs<'a> {
    pub parent: Parent<'a>,
    /// The manifest's owned kinds (a child's `kind_index` is into these).
    pub owned_kinds: &'a [Kind],
    /// The children the parent controls now, as the module reads them, and
    /// which they are (the same order).
    pub owned: &'a [String],
    pub children: &'a [Child<'a>],
    /// Keep `desired`'s answer as given ([`Plan::answered`]).
    pub keep_answer: bool,
    /// How the module's answers are written (its `writes`).
    pub writing: Writing<'a>,
    /// What the module reaches (`reach`, 1.3), when it exports it.
    pub reach: Option<&'a ReachManifest>,
    /// The time the module's `answer` is told (RFC 3339).
    pub now: &'a str,
}

/// How an answer becomes a write: the module's `writes` model, with what
/// deciding an apply needs.
#[derive(Clone, Copy)]
pub enum Writing<'a> {
    /// The answer is the whole object: updated unless the child equals it.
    Replace,
    /// The answer holds the fields the module sets: applied unless the
    /// child holds it (`planning/applied.rs`).
    Apply(&'a Applying),
}

/// What deciding an apply needs besides the answer and the child.
pub struct Applying {
    /// Each owned kind's schema, by kind index.
    pub schemas: Vec<Arc<KindSchema>>,
    /// The fields the module's manager applied to each child (the children's
    /// order); none where it never applied one.
    pub applied: Vec<Option<FieldSet>>,
}

/// The write one desired object needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// It does not exist: created (by an apply, for a module that applies).
    Create,
    /// It differs: updated to the answer (`replace`).
    Update,
    /// It does not hold the answer: applied (`apply`).
    Apply,
    /// It is as the module wants it: no request at all.
    Unchanged,
}

/// One desired object, checked, with the write it needs.
pub struct PlannedObject {
    pub kind_index: usize,
    pub name: String,
    /// Its index among the current children, when it exists.
    pub current: Option<usize>,
    pub write: Write,
    pub value: Value,
}

/// What one reconcile would do, before its writes.
pub struct Plan {
    /// The related objects the module was given, as it read them.
    pub related: Vec<String>,
    pub answer: Answer,
    /// What `desired` answered, as it answered it, when the inputs asked to
    /// keep it (a recorded reconcile).
    pub answered: Option<Vec<String>>,
    /// When the answer asked to be reconciled again with nothing changed.
    pub again_after: Option<Duration>,
    /// For a parent being deleted ([`finalize_plan`]): whether the module
    /// is done with it.
    pub done: Option<bool>,
}

/// What `desired` answered, and the writes it calls for.
pub enum Answer {
    Writes {
        /// Every desired object, checked, in the module's order.
        objects: Vec<PlannedObject>,
        /// The current children (their indexes) no desired object names:
        /// the host deletes them.
        deletes: Vec<usize>,
    },
    /// The parent is invalid (or malformed, or asks what the module does
    /// not do): nothing is written, and `status` hears why.
    Invalid(LogicError),
}

/// What `desired` answered, checked.
pub enum Desire {
    Wanted(Wanted),
    Invalid(LogicError),
}

/// The objects an answer wants, checked, and the timer it asked for.
pub struct Wanted {
    pub objects: Vec<DesiredObject>,
    pub again_after: Option<Duration>,
}

/// The first half: what the parent references (found with `related`, which
/// answers the object a reference names as the module reads it, or none),
/// what the module wants, checked, and the write each object needs.
pub fn plan(
    calls: &impl ModuleCaller,
    inputs: &Inputs<'_>,
    related: impl FnMut(&ObjectRef) -> Option<String>,
) -> Result<Plan, StepError> {
    let related: Vec<String> = references(calls, inputs.parent)?.iter().filter_map(related).collect();
    let mut answered = None;
    let mut again_after = None;
    let answer = match desire_keeping(calls, inputs, &related, &mut answered)? {
        Desire::Wanted(wanted) => {
            again_after = wanted.again_after;
            let (objects, deletes) = writes(inputs, wanted.objects);
            Answer::Writes { objects, deletes }
        }
        Desire::Invalid(error) => Answer::Invalid(error),
    };
    Ok(Plan { related, answer, answered, again_after, done: None })
}

/// While the parent is being deleted, for a module whose reach finalizes:
/// what should still exist (`finalize`), checked as `desired`'s answer is,
/// the writes it calls for, and whether the module is done. Done, every
/// child is deleted (and the caller removes the finalizer); an error keeps
/// everything as it is.
pub fn finalize_plan(
    calls: &impl ModuleCaller,
    inputs: &Inputs<'_>,
    related: impl FnMut(&ObjectRef) -> Option<String>,
) -> Result<Plan, StepError> {
    let related: Vec<String> = references(calls, inputs.parent)?.iter().filter_map(related).collect();
    let parent = inputs.parent;
    let finalizing = match calls.call("finalize", |m| m.finalize(parent.json, inputs.owned, &related, inputs.now)) {
        Ok(finalizing) => finalizing,
        Err(CallError::Logic(error)) => {
            return Ok(Plan {
                related,
                answer: Answer::Invalid(error),
                answered: None,
                again_after: None,
                done: Some(false),
            });
        }
        Err(source) => return Err(StepError::Module { function: "finalize", source }),
    };
    let wanted = if finalizing.done {
        Vec::new()
    } else {
        let owner = Owner { namespace: parent.namespace, uid: parent.uid };
        answer_check::check(inputs.owned_kinds, &owner, finalizing.objects).map_err(StepError::Refused)?
    };
    let (objects, deletes) = writes(inputs, wanted);
    Ok(Plan {
        related,
        answer: Answer::Writes { objects, deletes },
        answered: None,
        again_after: finalizing.again_after,
        done: Some(finalizing.done),
    })
}

/// The objects `parent` references. An invalid parent references nothing:
/// `desired` then reports it with every path.
pub fn references(calls: &impl ModuleCaller, parent: Parent<'_>) -> Result<Vec<ObjectRef>, StepError> {
    match calls.call("references", |m| m.references(parent.json)) {
        Ok(references) => Ok(references),
        Err(CallError::Logic(_)) => Ok(Vec::new()),
        Err(source) => Err(StepError::Module { function: "references", source }),
    }
}

/// `desired` on these inputs, its answer checked.
pub fn desire(calls: &impl ModuleCaller, inputs: &Inputs<'_>, related: &[String]) -> Result<Desire, StepError> {
    desire_keeping(calls, inputs, related, &mut None)
}

fn desire_keeping(
    calls: &impl ModuleCaller,
    inputs: &Inputs<'_>,
    related: &[String],
    answered: &mut Option<Vec<String>>,
) -> Result<Desire, StepError> {
    let answer = match calls.call("desired", |m| m.answer(inputs.parent.json, inputs.owned, related, inputs.now)) {
        Ok(answer) => answer,
        Err(CallError::Logic(error)) => return Ok(Desire::Invalid(error)),
        Err(source) => return Err(StepError::Module { function: "desired", source }),
    };
    if inputs.keep_answer {
        *answered = Some(answer.objects.clone());
    }
    let no_keys: &[String] = &[];
    let (label_keys, annotation_keys) = inputs
        .reach
        .map_or((no_keys, no_keys), |reach| (&reach.parent_label_keys[..], &reach.parent_annotation_keys[..]));
    answer_check::check_parent_keys("labels", label_keys, &answer.parent_labels).map_err(StepError::Refused)?;
    answer_check::check_parent_keys("annotations", annotation_keys, &answer.parent_annotations)
        .map_err(StepError::Refused)?;
    let owner = Owner { namespace: inputs.parent.namespace, uid: inputs.parent.uid };
    let objects = answer_check::check(inputs.owned_kinds, &owner, answer.objects).map_err(StepError::Refused)?;
    Ok(Desire::Wanted(Wanted { objects, again_after: answer.again_after }))
}

/// The writes `wanted` calls for against the current children: each
/// object created, written or left as it is, and the children no object
/// names deleted. With `replace`, an object is left as it is when the child
/// as the module read it equals it (counting a null as absent); with
/// `apply`, when the child holds the answer (`planning/applied.rs`), and the
/// object planned is what is applied (`applied::prepared`).
pub fn writes(inputs: &Inputs<'_>, wanted: Vec<DesiredObject>) -> (Vec<PlannedObject>, Vec<usize>) {
    let objects: Vec<PlannedObject> = wanted
        .into_iter()
        .map(|object| {
            let current = inputs
                .children
                .iter()
                .position(|child| child.kind_index == object.kind_index && child.name == object.name);
            let (write, value) = match inputs.writing {
                Writing::Replace => {
                    let write = match current {
                        None => Write::Create,
                        Some(index) if is_unchanged(&inputs.owned[index], &object.value) => Write::Unchanged,
                        Some(_) => Write::Update,
                    };
                    (write, object.value)
                }
                Writing::Apply(applying) => {
                    let value = applied::prepared(object.value);
                    let write = match current {
                        None => Write::Create,
                        Some(index) if holds(applying, object.kind_index, &inputs.owned[index], index, &value) => {
                            Write::Unchanged
                        }
                        Some(_) => Write::Apply,
                    };
                    (write, value)
                }
            };
            PlannedObject { kind_index: object.kind_index, name: object.name, current, write, value }
        })
        .collect();
    let deletes =
        (0..inputs.children.len()).filter(|index| !objects.iter().any(|o| o.current == Some(*index))).collect();
    (objects, deletes)
}

/// Whether the child `index` (its text `current`) holds `value`, an answer
/// prepared for an apply.
fn holds(applying: &Applying, kind_index: usize, current: &str, index: usize, value: &Value) -> bool {
    let (Some(schema), Ok(live)) = (applying.schemas.get(kind_index), serde_json::from_str::<Value>(current)) else {
        return false;
    };
    applied::holds(schema, &live, value, applying.applied.get(index).and_then(Option::as_ref))
}

/// The comparison every write decision of a module that replaces makes.
pub fn is_unchanged(current: &str, desired: &Value) -> bool {
    serde_json::from_str::<Value>(current).is_ok_and(|current| same_ignoring_nulls(&current, desired))
}

/// What `status` answered, checked, and the time it was told.
pub struct StatusAnswer {
    /// RFC 3339, what `status` was told the time is.
    pub now: String,
    /// Its answer, as the module gave it (JSON).
    pub text: String,
    /// Its answer as the API server will store it (`planning/stored.rs`):
    /// what the parent's status is compared with.
    pub value: Value,
    /// The fields of the answer the parent's schema prunes.
    pub pruned: Vec<String>,
}

/// The second half: the parent's status from the objects as the writes
/// left them (`owned`), told what went wrong (`problem`), if anything;
/// read as the API server stores it under `schema` (the CRD's status
/// schema, when the module ships one).
#[allow(clippy::too_many_arguments)]
pub fn status(
    calls: &impl ModuleCaller,
    schema: Option<&Value>,
    parent: Parent<'_>,
    owned: &[String],
    related: &[String],
    now: String,
    problem: Option<&str>,
) -> Result<StatusAnswer, StepError> {
    let text = calls
        .call("status", |m| m.status(parent.json, owned, related, &now, problem))
        .map_err(|source| StepError::Module { function: "status", source })?;
    let value = check_status(&text).map_err(StepError::Refused)?;
    let (value, pruned) = match schema {
        Some(schema) => {
            let stored = as_stored(&value, schema, "status");
            (stored.value, stored.pruned)
        }
        None => (value, Vec::new()),
    };
    Ok(StatusAnswer { now, text, value, pruned })
}

/// The current time as `status` is told it (RFC 3339, seconds).
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::bindings::KindInfo;

    fn kind(kind: &str) -> Kind {
        let info = KindInfo {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        };
        Kind::from_info(&info).expect("namespaced")
    }

    fn object(kind: &str, name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "ns"}, "data": data})
    }

    #[test]
    fn each_desired_object_gets_the_write_it_needs_and_unnamed_children_are_deleted() {
        let kinds = [kind("ConfigMap"), kind("Secret")];
        let owned = [
            object("ConfigMap", "same", json!({"a": "1"})).to_string(),
            object("ConfigMap", "changed", json!({"a": "1"})).to_string(),
            object("Secret", "same", json!({})).to_string(),
            object("ConfigMap", "unwanted", json!({})).to_string(),
        ];
        let children = [
            Child { kind_index: 0, name: "same" },
            Child { kind_index: 0, name: "changed" },
            Child { kind_index: 1, name: "same" },
            Child { kind_index: 0, name: "unwanted" },
        ];
        let inputs = Inputs {
            parent: Parent { json: "{}", namespace: "ns", uid: "u" },
            owned_kinds: &kinds,
            owned: &owned,
            children: &children,
            keep_answer: false,
            writing: Writing::Replace,
            reach: None,
            now: "2026-12-02T00:00:00Z",
        };
        let desired =
            |kind_index: usize, name: &str, value: Value| DesiredObject { kind_index, name: name.into(), value };
        let mut same = object("ConfigMap", "same", json!({"a": "1"}));
        // A null counts as absent, as the API server drops it.
        same["metadata"]["labels"] = Value::Null;
        let wanted = vec![
            desired(0, "new", object("ConfigMap", "new", json!({}))),
            desired(0, "changed", object("ConfigMap", "changed", json!({"a": "2"}))),
            desired(0, "same", same),
            // Same name, another kind: not the ConfigMap.
            desired(1, "same", object("Secret", "same", json!({}))),
        ];
        let (objects, deletes) = writes(&inputs, wanted);
        let planned: Vec<(&str, Option<usize>, Write)> =
            objects.iter().map(|o| (o.name.as_str(), o.current, o.write)).collect();
        assert_eq!(
            planned,
            [
                ("new", None, Write::Create),
                ("changed", Some(1), Write::Update),
                ("same", Some(0), Write::Unchanged),
                ("same", Some(2), Write::Unchanged)
            ]
        );
        assert_eq!(deletes, [3]);
    }

    #[test]
    fn a_current_object_that_does_not_parse_is_updated() {
        assert!(!is_unchanged("{not json", &json!({})));
        assert!(is_unchanged(r#"{"a": null}"#, &json!({})));
    }
}
