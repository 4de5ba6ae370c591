//! One reconcile without a cluster: the calls the operator makes for a
//! parent, in its order (`operator/reconciling/reconcile.rs`), with the checks it
//! applies to the answers (`planning/answer_check.rs`), writing nothing.
//!
//! The owned objects the module is given are those of the given ones the
//! parent controls (a controller owner reference with its uid) of an owned
//! kind in its namespace, as the operator's caches give them; the related
//! objects are those of the given ones its `references` answer names. Each
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

use crate::planning::applied::{self, Change};
use crate::planning::field_set::FieldSet;
use crate::planning::kind_schema::{KindSchema, Schemas};
use crate::planning::kinds::{Kind, Kinds};
use crate::planning::step::{
    self, Answer, Applying, Child, Inputs, ModuleCaller, Parent, PlannedObject, StatusAnswer, StepError, Write, Writing,
};
use crate::runtime::bindings::{ObjectRef, WriteModel};
use crate::runtime::call_error::{CallError, CallResult, LogicError};
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

/// What the operator would do for the parent.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The objects it would create or update, in order, checked (for a
    /// module that applies: as applied, without `status` and the metadata
    /// the server sets, and without the host's digest annotation).
    pub desired: Vec<Value>,
    /// The write each of `desired` needs (the same order).
    pub writes: Vec<ObjectWrite>,
    /// Owned objects the parent controls that `desired` left out: the
    /// operator would delete them.
    pub deleted: Vec<Value>,
    /// The parent's new status, when the reconcile got that far.
    pub status: Option<Value>,
    /// What `status` was told went wrong.
    pub problem: Option<String>,
    /// Why the reconcile did not apply.
    pub error: Option<OutcomeError>,
    /// Given objects the operator would not pass to the module, and why.
    pub ignored: Vec<String>,
    /// Fields of the status answer the parent's schema prunes (the API
    /// server drops them; `status` is the answer without them).
    pub pruned: Vec<String>,
    /// The parent is being deleted: the operator calls nothing and writes
    /// nothing (the garbage collector removes the children).
    pub deleting: bool,
}

/// The write one desired object needs, and for an apply to an object that
/// exists, what it would change (`planning/applied.rs`): the decision the
/// operator makes, on the given objects.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectWrite {
    pub write: Write,
    pub changes: Vec<Change>,
}

#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// The module's own answer to `desired`: the spec is invalid (or
    /// malformed, or asks what it does not do). Nothing is written; the
    /// status is told.
    #[error("{0}")]
    Spec(LogicError),
    /// An answer the operator refuses (`ModuleInvalidOutput`): nothing is
    /// written and the parent gets `Stalled=True`.
    #[error("the operator would refuse the module's answer: {problem}")]
    Refused { problem: String },
    /// The module failed (a trap, its deadline or memory limit), or answered
    /// an error where the operator expects none.
    #[error("{function}: {error}")]
    Module { function: &'static str, error: CallError },
}

impl From<StepError> for OutcomeError {
    fn from(error: StepError) -> Self {
        match error {
            StepError::Module { function, source } => OutcomeError::Module { function, error: source },
            StepError::Refused(refused) => OutcomeError::Refused { problem: refused.to_string() },
        }
    }
}

impl OutcomeError {
    /// The short name a case's expectation uses: `invalid`, `malformed`,
    /// `unsupported`, `refused` or `failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            OutcomeError::Spec(LogicError::Invalid(_)) => "invalid",
            OutcomeError::Spec(LogicError::Malformed(_)) => "malformed",
            OutcomeError::Spec(LogicError::Unsupported(_)) => "unsupported",
            OutcomeError::Refused { .. } | OutcomeError::Module { error: CallError::Refused(_), .. } => "refused",
            OutcomeError::Module { .. } => "failed",
        }
    }

    /// The reason of the `Stalled` condition the operator would set: none
    /// for a spec error (the module's status reports it).
    pub fn stalled_reason(&self) -> &'static str {
        match self {
            OutcomeError::Spec(_) => "",
            OutcomeError::Refused { .. } => "ModuleInvalidOutput",
            OutcomeError::Module { error, .. } => error.reason(),
        }
    }

    /// The field paths it names.
    pub fn paths(&self) -> Vec<String> {
        match self {
            OutcomeError::Spec(error) => error.field_errors().iter().map(|e| e.path.clone()).collect(),
            _ => Vec::new(),
        }
    }
}

/// Runs `references`, `desired`, the answer checks and `status`, each call
/// on a fresh instance, as the operator makes them (`step`).
pub fn reconcile(module: &LogicModule, kinds: &Kinds, given: &Given<'_>) -> Outcome {
    let mut outcome = Outcome::default();
    if given.parent.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
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
    };

    let mut ignored = Vec::new();
    let planned = step::plan(&calls, &inputs, |reference| {
        find_related(&kinds.reads, reference, namespace, given.related, &mut ignored).map(|o| o.to_string())
    });
    outcome.ignored.append(&mut ignored);
    let plan = match planned {
        Ok(plan) => plan,
        Err(error) => {
            outcome.error = Some(error.into());
            return outcome;
        }
    };
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

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The object as the operator's caches hand it to a module: without
/// managedFields (`operator/cached_object.rs`).
pub fn module_view(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    object
}

/// The namespace an object is in: `default` when it names none, as kubectl
/// applies it.
pub fn namespace_of(object: &Value) -> &str {
    object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default")
}

fn kind_of<'k>(kinds: &'k [Kind], object: &Value) -> Option<(usize, &'k Kind)> {
    let api_version = str_at(object, "/apiVersion");
    let kind = str_at(object, "/kind");
    kinds.iter().enumerate().find(|(_, k)| k.is_group_kind_of(api_version, kind))
}

/// The parent, as owner references name it.
pub struct ParentId<'a> {
    pub kind: &'a Kind,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// The given objects the parent controls, of owned kinds, in its namespace,
/// in manifest order (then file order), as the operator's caches hold them
/// (a module reads them without managedFields: [`module_view`]).
pub fn select_owned<'v>(
    owned: &[Kind],
    parent: &ParentId<'_>,
    given: &'v [Value],
    ignored: &mut Vec<String>,
) -> Vec<(usize, &'v Value)> {
    let mut selected: Vec<(usize, &Value)> = Vec::new();
    for object in given {
        let Some((index, _)) = kind_of(owned, object) else {
            ignored.push(format!("owned {}: not an owned kind of the module", describe(object)));
            continue;
        };
        if namespace_of(object) != parent.namespace {
            continue;
        }
        let controller = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["controller"] == Value::Bool(true)));
        let uid = parent.uid;
        match controller.map(|r| (r, r["uid"].as_str().unwrap_or_default())) {
            Some((_, controller)) if controller == uid => selected.push((index, object)),
            // The parent by name, with another uid: a parent written by
            // hand (its uid filled in) and children captured from a cluster.
            Some((reference, other)) if names_parent(reference, parent) => ignored.push(format!(
                "owned {}: its controller is {} {} with uid {other}, not this parent's uid {uid} (give the parent its uid)",
                describe(object),
                parent.kind.name(),
                parent.name
            )),
            // Another parent's child (a file may hold several parents').
            Some(_) => {}
            None => ignored.push(format!(
                "owned {}: no controller owner reference (the operator passes only the objects a parent controls; uid {uid})",
                describe(object)
            )),
        }
    }
    selected.sort_by_key(|(index, _)| *index);
    selected
}

fn names_parent(reference: &Value, parent: &ParentId<'_>) -> bool {
    let api_version = reference["apiVersion"].as_str().unwrap_or_default();
    let kind = reference["kind"].as_str().unwrap_or_default();
    parent.kind.is_group_kind_of(api_version, kind) && reference["name"] == parent.name
}

/// The given objects `references` names (a reference without a namespace
/// is in the parent's), of the module's read kinds, in reference order.
pub fn select_related(
    reads: &[Kind],
    references: &[ObjectRef],
    namespace: &str,
    given: &[Value],
    ignored: &mut Vec<String>,
) -> Vec<Value> {
    references.iter().filter_map(|reference| find_related(reads, reference, namespace, given, ignored)).collect()
}

/// The given object `reference` names, as the module reads it; a reference
/// to a kind the manifest does not read is noted in `ignored`.
fn find_related(
    reads: &[Kind],
    reference: &ObjectRef,
    namespace: &str,
    given: &[Value],
    ignored: &mut Vec<String>,
) -> Option<Value> {
    // The operator has caches of the read kinds only.
    if !reads.iter().any(|k| k.resource.group == reference.group && k.resource.kind == reference.kind) {
        ignored.push(format!("reference to {} {}: not a read kind of the manifest", reference.kind, reference.name));
        return None;
    }
    let wanted_namespace = reference.namespace.as_deref().unwrap_or(namespace);
    let found = given.iter().find(|object| {
        let group = str_at(object, "/apiVersion").rsplit_once('/').map_or("", |(group, _)| group);
        group == reference.group
            && str_at(object, "/kind") == reference.kind
            && namespace_of(object) == wanted_namespace
            && str_at(object, "/metadata/name") == reference.name
    });
    found.map(module_view)
}

/// `kind namespace/name` (or `kind name`), for messages.
pub fn describe(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("object");
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("(no name)");
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::bindings::KindInfo;

    fn kind(group: &str, kind: &str) -> Kind {
        let info = KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        };
        Kind::from_info(&info).expect("namespaced")
    }

    fn child(kind: &str, name: &str, namespace: Option<&str>, controller: Option<&str>) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "managedFields": [{}]}});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(uid) = controller {
            object["metadata"]["ownerReferences"] = json!([{"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "name": if uid == "u-2" { "other" } else { "hello" }, "uid": uid, "controller": true}]);
        }
        object
    }

    #[test]
    fn owned_objects_are_those_the_parent_controls_in_manifest_order() {
        let owned = [kind("", "Service"), kind("", "ConfigMap")];
        let given = [
            child("ConfigMap", "a", None, Some("u-1")),
            child("Service", "b", Some("default"), Some("u-1")),
            child("ConfigMap", "other-parent", None, Some("u-2")),
            child("ConfigMap", "elsewhere", Some("team"), Some("u-1")),
            child("ConfigMap", "orphan", None, None),
            child("Secret", "not-owned", None, Some("u-1")),
            child("ConfigMap", "captured", None, Some("uid-in-the-cluster")),
        ];
        let mut ignored = Vec::new();
        let parent_kind = kind("example.c5c3.io", "Greeting");
        let parent = ParentId { kind: &parent_kind, namespace: "default", name: "hello", uid: "u-1" };
        let selected = select_owned(&owned, &parent, &given, &mut ignored);
        let names: Vec<(usize, &str)> = selected.iter().map(|(i, o)| (*i, str_at(o, "/metadata/name"))).collect();
        assert_eq!(names, [(0, "b"), (1, "a")]);
        assert_eq!(ignored.len(), 3, "{ignored:?}");
        assert!(ignored[0].contains("ConfigMap orphan: no controller owner reference"), "{ignored:?}");
        assert!(ignored[1].contains("Secret not-owned: not an owned kind"), "{ignored:?}");
        assert!(
            ignored[2]
                .contains("its controller is Greeting hello with uid uid-in-the-cluster, not this parent's uid u-1"),
            "{ignored:?}"
        );
    }

    #[test]
    fn related_objects_are_those_referenced_in_the_parents_namespace_by_default() {
        let reads = [kind("", "Secret")];
        let reference = |name: &str, namespace: Option<&str>| ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        };
        let given = [child("Secret", "tls", Some("team"), None), child("Secret", "sasl", None, None)];
        let mut ignored = Vec::new();
        let references = [reference("sasl", None), reference("tls", Some("team")), reference("missing", None)];
        let selected = select_related(&reads, &references, "default", &given, &mut ignored);
        let names: Vec<&str> = selected.iter().map(|o| str_at(o, "/metadata/name")).collect();
        assert_eq!(names, ["sasl", "tls"]);
        assert!(ignored.is_empty());
        let in_team = select_related(&reads, &[reference("sasl", None)], "team", &given, &mut ignored);
        assert!(in_team.is_empty(), "the parent's namespace, not any");
    }
}
