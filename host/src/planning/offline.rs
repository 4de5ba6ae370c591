//! One reconcile without a cluster: the calls the operator makes for a
//! parent, in its order (`operator/reconciling/reconcile.rs`), with the checks it
//! applies to the answers (`planning/answer_check.rs`), writing nothing.
//!
//! The owned objects the module is given are those of the given ones the
//! parent controls (a controller owner reference with its uid) of an owned
//! kind in its namespace, as the operator's caches give them; the related
//! objects are those of the given ones its `references` answer names
//! (`given_objects.rs`). What the operator would do is an `Outcome`
//! (`outcome.rs`). Each
//! desired object's write is decided as the operator decides it: for a
//! module that applies, from the fields its manager applied (the given
//! objects' `managedFields`) and each kind's schema (`Given::schemas`). The
//! status is computed from the objects as they would be after the writes:
//! the desired objects, checked (for an invalid spec: the current ones, and
//! `problem` set to the operator's `invalid: ...` text), unless the objects
//! `status` was given are named (a recorded reconcile's `statusOwned`: the
//! objects as the operator's writes left them, server-filled fields and
//! the children's own status included).

use std::sync::Arc;

use serde_json::Value;

use crate::planning::applied;
use crate::planning::field_set::FieldSet;
use crate::planning::given_objects::{ParentId, find_related, module_view, select_owned, str_at};
use crate::planning::kind_schema::{KindSchema, Schemas};
use crate::planning::kinds::Kinds;
use crate::planning::outcome::{ObjectWrite, Outcome, OutcomeError};
use crate::planning::step::{
    self, Answer, Applying, Child, Inputs, ModuleCaller, Parent, PlannedObject, StatusAnswer, StepError, Write, Writing,
};
use crate::runtime::bindings::WriteModel;
use crate::runtime::call_error::CallResult;
use crate::runtime::contract::finalizer_of;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::reconciler::Reconciler;

/// What the operator would hand the module, and the parent it is for.
pub struct Given<'a> {
    /// The parent, with a namespace and a uid (`authoring/parents.rs` completes one written without).
    pub parent: &'a Value,
    /// Objects that exist: those the parent controls are passed as owned.
    pub owned: &'a [Value],
    /// Objects that exist: those `references` names are passed as related.
    pub related: &'a [Value],
    /// RFC 3339, what `status` is told the time is.
    pub now: &'a str,
    /// Why the writes failed, for `status` (as a refused write would).
    pub problem: Option<&'a str>,
    /// The objects `status` is given, when known (a recorded reconcile's):
    /// instead of the checked desired ones (resp. the current ones).
    pub status_owned: Option<&'a [Value]>,
    /// How the API server merges each owned kind, for a module that
    /// applies (read from the cluster). A kind without one is merged as
    /// one without a published schema: lists replaced whole.
    pub schemas: Option<&'a Schemas>,
}

/// Runs `references`, `desired`, the answer checks and `status`, each call
/// on a fresh instance, as the operator makes them (`step`).
pub fn reconcile(module: &LogicModule, kinds: &Kinds, given: &Given<'_>) -> Outcome {
    let mut outcome = Outcome::default();
    let deleting = given.parent.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    // As the operator: a parent being deleted is finalized by a module that
    // finalizes and holds its finalizer on it; otherwise nothing is called.
    let finalizer = finalizer_of(&module.manifest().name);
    let held = given
        .parent
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|f| f.as_str() == Some(finalizer.as_str())));
    if deleting && !(module.finalizes() && held) {
        outcome.deleting = true;
        return outcome;
    }
    let namespace = str_at(given.parent, "/metadata/namespace");
    let uid = str_at(given.parent, "/metadata/uid");
    let parent_json = module_view(given.parent).to_string();
    let parent = Parent { json: &parent_json, namespace, uid };
    let calls = FreshInstances { module, parent: given.parent };

    let name = str_at(given.parent, "/metadata/name");
    let owner = ParentId { kind: &kinds.parent, namespace, name, uid };
    let current = select_owned(&kinds.owned, &owner, given.owned, &mut outcome.ignored);
    let applying = (module.write_model() == WriteModel::Apply).then(|| applying(module, kinds, &current, given));
    let current: Vec<(usize, Value)> =
        current.into_iter().map(|(index, object)| (index, module_view(object))).collect();
    let current_json: Vec<String> = current.iter().map(|(_, o)| o.to_string()).collect();
    let children: Vec<Child<'_>> = current
        .iter()
        .map(|(kind_index, o)| Child { kind_index: *kind_index, name: str_at(o, "/metadata/name") })
        .collect();
    let inputs = Inputs {
        parent,
        owned_kinds: &kinds.owned,
        owned: &current_json,
        children: &children,
        keep_answer: false,
        writing: applying.as_ref().map_or(Writing::Replace, Writing::Apply),
        reach: module.reach(),
        now: given.now,
    };

    let mut ignored = Vec::new();
    let related = |reference: &_| {
        find_related(&kinds.reads, reference, namespace, given.related, &mut ignored).map(|o| o.to_string())
    };
    let planned =
        if deleting { step::finalize_plan(&calls, &inputs, related) } else { step::plan(&calls, &inputs, related) };
    outcome.ignored.append(&mut ignored);
    let plan = match planned {
        Ok(plan) => plan,
        Err(error) => {
            outcome.error = Some(error.into());
            return outcome;
        }
    };
    outcome.again_after = plan.again_after;
    outcome.finalized = plan.done;
    let status_owned: Option<Vec<String>> =
        given.status_owned.map(|objects| objects.iter().map(|o| module_view(o).to_string()).collect());
    let related = &plan.related;
    match plan.answer {
        Answer::Invalid(error) => {
            // As the operator: nothing changes, and `status` hears why.
            let problem = error.to_string();
            outcome.error = Some(OutcomeError::Spec(error));
            let owned = status_owned.as_deref().unwrap_or(&current_json);
            let answer = step::status(
                &calls,
                module.status_schema(),
                parent,
                owned,
                related,
                given.now.to_owned(),
                Some(&problem),
            );
            finish_status(answer, Some(problem), &mut outcome);
        }
        Answer::Writes { objects, deletes } => {
            outcome.deleted = deletes.into_iter().map(|index| current[index].1.clone()).collect();
            outcome.writes = objects.iter().map(|object| object_write(applying.as_ref(), &current, object)).collect();
            // As the module answered it: the digest is the host's mark.
            let answered = |object: PlannedObject| match applying {
                Some(_) => applied::without_digest(object.value),
                None => object.value,
            };
            outcome.desired = objects.into_iter().map(answered).collect();
            let after: Vec<String> = match status_owned {
                Some(owned) => owned,
                None => outcome.desired.iter().map(ToString::to_string).collect(),
            };
            let answer = step::status(
                &calls,
                module.status_schema(),
                parent,
                &after,
                related,
                given.now.to_owned(),
                given.problem,
            );
            finish_status(answer, given.problem.map(str::to_owned), &mut outcome);
        }
    }
    outcome
}

/// What deciding the applies of a module needs, from the given objects:
/// each owned kind's schema, and the fields the module's manager applied
/// to each child (its `managedFields`).
fn applying(module: &LogicModule, kinds: &Kinds, current: &[(usize, &Value)], given: &Given<'_>) -> Applying {
    let schemas = kinds
        .owned
        .iter()
        .map(|kind| given.schemas.map_or_else(|| Arc::new(KindSchema::untyped()), |schemas| schemas.of(kind)))
        .collect();
    let manager = &module.manifest().field_manager;
    let applied = current.iter().map(|(_, object)| FieldSet::applied_by(object, manager)).collect();
    Applying { schemas, applied }
}

/// The write `object` needs, with what an apply would change.
fn object_write(applying: Option<&Applying>, current: &[(usize, Value)], object: &PlannedObject) -> ObjectWrite {
    let changes = match (applying, object.write, object.current) {
        (Some(applying), Write::Apply, Some(index)) => match applying.schemas.get(object.kind_index) {
            Some(schema) => {
                let owned = applying.applied.get(index).and_then(Option::as_ref);
                applied::changes(schema, &current[index].1, &object.value, owned)
            }
            None => Vec::new(),
        },
        _ => Vec::new(),
    };
    ObjectWrite { write: object.write, changes }
}

/// The status answer as the operator reads it: JSON, or a refused answer.
fn finish_status(answer: Result<StatusAnswer, StepError>, problem: Option<String>, outcome: &mut Outcome) {
    outcome.problem = problem;
    match answer {
        Ok(answer) => {
            outcome.status = Some(answer.value);
            outcome.pruned = answer.pruned;
        }
        // A spec error found before stays the reconcile's error.
        Err(error) => {
            if outcome.error.is_none() {
                outcome.error = Some(error.into());
            }
        }
    }
}

/// Each call on a fresh instance; what the module logged goes to the log
/// (standard error) with the parent's `namespace/name`, as in the operator.
struct FreshInstances<'a> {
    module: &'a LogicModule,
    parent: &'a Value,
}

impl ModuleCaller for FreshInstances<'_> {
    fn call<T>(&self, _function: &'static str, call: impl FnOnce(&mut Reconciler) -> CallResult<T>) -> CallResult<T> {
        self.module.reconciler().and_then(|mut instance| {
            let result = call(&mut instance);
            let log = instance.take_log();
            if !log.is_empty() {
                let who =
                    format!("{}/{}", str_at(self.parent, "/metadata/namespace"), str_at(self.parent, "/metadata/name"));
                log.emit(self.module.name(), Some(&who));
            }
            result
        })
    }
}
