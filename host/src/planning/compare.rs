//! One parent's two outcomes (`offline::reconcile` with the current and the
//! new version, on the same inputs) as what the new version does
//! differently (`parent_plan.rs`).
//!
//! Each version leaves an end state per object (`compare/end_state.rs`).
//! The plan is the difference of the two end states:
//!
//! - `create`: in the new end state only (a `live` object the current
//!   version deletes and the new one keeps is one too);
//! - `delete`: in the current end state only (`live: false` when it is an
//!   object the current version would create and the new one does not);
//! - `update`: in both, different: the fields from the current version's
//!   end state to the new one's;
//! - `unmanaged`: an object the current version manages, of a kind the new
//!   version does not own: the operator leaves it where it is (its owner
//!   reference still ties it to the parent) and no longer reconciles it; the
//!   fields are what the new end state (the live object) differs in from
//!   the current one's.
//!
//! The status: the new version's against the current one's (the live status
//! when the current version fails without one). A parent the new version
//! fails on is a failure, unless the current version fails on it too.

mod end_state;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fields;
use crate::planning::given_objects::module_view;
use crate::planning::kinds::Kinds;
use crate::planning::outcome::Outcome;
use crate::planning::parent_plan::{Action, Failure, ObjectChange, ParentPlan};
use end_state::{Key, apply_changes, end_state, key_of};

/// A version's outcome for the parent, with its kinds.
pub struct Side<'a> {
    pub outcome: &'a Outcome,
    pub kinds: &'a Kinds,
}

/// What `new` does differently from `current` for `parent`, given the live
/// objects the parent controls (of either version's owned kinds).
pub fn compare(parent: &Value, live: &[Value], current: &Side<'_>, new: &Side<'_>) -> ParentPlan {
    let text = |pointer: &str| parent.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut plan = ParentPlan {
        namespace: text("/metadata/namespace"),
        name: text("/metadata/name"),
        new_error: new.outcome.error.as_ref().map(Failure::of),
        current_error: current.outcome.error.as_ref().map(Failure::of),
        ..ParentPlan::default()
    };
    if plan.new_error.is_some() || new.outcome.deleting {
        // A failing version writes nothing; its error is the news.
        return plan;
    }
    if current.outcome.error.is_none()
        && current.outcome.desired == new.outcome.desired
        && current.outcome.writes == new.outcome.writes
        && current.outcome.deleted == new.outcome.deleted
        && current.outcome.status == new.outcome.status
    {
        // The same answers leave the same end state: nothing to list, and
        // no end states to build (a shadow compares on every reconcile).
        return plan;
    }
    // As a module reads them: managedFields are the API server's record.
    let live: Vec<Value> = live.iter().map(module_view).collect();
    let live: BTreeMap<Key, &Value> = live.iter().map(|object| (key_of(object), object)).collect();
    let before = end_state(current.outcome, &live);
    let after = end_state(new.outcome, &live);

    // Objects the current version manages, of kinds the new one does not own.
    let owned_by_new =
        |(group, kind, _): &Key| new.kinds.owned.iter().any(|k| k.resource.group == *group && k.resource.kind == *kind);
    let unmanaged: BTreeSet<Key> = if current.outcome.error.is_none() {
        current.outcome.desired.iter().map(key_of).filter(|key| live.contains_key(key) && !owned_by_new(key)).collect()
    } else {
        BTreeSet::new()
    };

    let keys: BTreeSet<&Key> = before.objects.keys().chain(after.objects.keys()).collect();
    for key in keys {
        let (old, new_object) = (before.objects.get(key), after.objects.get(key));
        let is_live = live.contains_key(key);
        let (action, object, mut changes) = match (old, new_object) {
            _ if unmanaged.contains(key) => {
                let (Some(old), Some(new_object)) = (old, new_object) else { continue };
                (Action::Unmanaged, new_object, fields::diff(old, new_object))
            }
            (None, Some(created)) => {
                let base = live.get(key).map_or_else(|| Value::Object(Default::default()), |o| (*o).clone());
                let shown = if is_live { created.clone() } else { content(created) };
                (Action::Create, created, fields::diff(&base, &shown))
            }
            (Some(deleted), None) => (Action::Delete, deleted, Vec::new()),
            (Some(old), Some(new_object)) => {
                let (applied_before, applied_after) = (before.applies.get(key), after.applies.get(key));
                let mut changes = fields::diff(old, new_object);
                changes.extend(apply_changes(applied_before.copied(), applied_after.copied()));
                // An apply that changes no value is still a request.
                let applies_anew = applied_after.is_some_and(|after| applied_before != Some(after));
                if changes.is_empty() && !applies_anew {
                    continue;
                }
                (Action::Update, new_object, changes)
            }
            (None, None) => continue,
        };
        if fields::is_secret(object) {
            fields::redact_changes(&mut changes);
        }
        let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
        plan.objects.push(ObjectChange {
            action,
            api_version: field("apiVersion"),
            kind: key.1.clone(),
            namespace: plan.namespace.clone(),
            name: key.2.clone(),
            live: is_live,
            fields: changes,
        });
    }
    // Creates, updates, deletes, then what is left alone; by kind and name
    // within each (the keys' order).
    plan.objects.sort_by_key(|o| match o.action {
        Action::Create => 0,
        Action::Update => 1,
        Action::Delete => 2,
        Action::Unmanaged => 3,
    });

    if let Some(status) = &new.outcome.status {
        let old = current.outcome.status.clone().unwrap_or_else(|| parent.get("status").cloned().unwrap_or_default());
        plan.status = fields::diff(&old, status);
    }
    plan
}

/// What an object to create holds beyond what names it: no apiVersion,
/// kind, name, namespace or owner references (every created object has
/// the parent's).
fn content(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for housekeeping in ["name", "namespace", "ownerReferences"] {
                metadata.remove(housekeeping);
            }
            if metadata.is_empty() {
                map.remove("metadata");
            }
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::planning::applied::Change;
    use crate::planning::fields::FieldChange;
    use crate::planning::kinds::Kind;
    use crate::planning::outcome::{ObjectWrite, OutcomeError};
    use crate::planning::step::Write;
    use crate::runtime::bindings::KindInfo;
    use crate::runtime::call_error::CallError;

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

    fn kinds(owned: &[&str]) -> Kinds {
        let info = KindInfo {
            group: "example.c5c3.io".into(),
            version: "v1".into(),
            kind: "Greeting".into(),
            plural: "greetings".into(),
            namespaced: true,
        };
        Kinds {
            parent: Kind::from_info(&info).expect("namespaced"),
            owned: owned.iter().map(|k| kind(k)).collect(),
            reads: vec![kind("Secret")],
        }
    }

    fn parent() -> Value {
        json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
               "metadata": {"name": "hello", "namespace": "team", "uid": "u-1"},
               "status": {"phase": "live"}})
    }

    fn object(kind: &str, name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "team",
               "ownerReferences": [{"uid": "u-1", "controller": true}]}, "data": data})
    }

    fn outcome(desired: Vec<Value>, deleted: Vec<Value>, status: Value) -> Outcome {
        Outcome { desired, deleted, status: Some(status), ..Outcome::default() }
    }

    fn failed() -> Outcome {
        Outcome {
            error: Some(OutcomeError::Module {
                function: "desired",
                error: CallError::Panicked { message: "boom".into() },
            }),
            ..Outcome::default()
        }
    }

    fn lines(plan: &ParentPlan) -> Vec<String> {
        plan.objects
            .iter()
            .map(|o| {
                let fields: Vec<String> = o.fields.iter().map(FieldChange::line).collect();
                format!("{} {} {} live={} [{}]", o.action.as_str(), o.kind, o.name, o.live, fields.join("; "))
            })
            .collect()
    }

    #[test]
    fn the_same_answers_make_no_plan_and_a_changed_field_an_update() {
        let live = [object("ConfigMap", "hello", json!({"message": "hi"}))];
        let v1 = outcome(vec![live[0].clone()], vec![], json!({"phase": "done"}));
        let same = outcome(vec![live[0].clone()], vec![], json!({"phase": "done"}));
        let (k1, k2) = (kinds(&["ConfigMap"]), kinds(&["ConfigMap"]));
        let plan = compare(&parent(), &live, &Side { outcome: &v1, kinds: &k1 }, &Side { outcome: &same, kinds: &k2 });
        assert!(!plan.noteworthy(), "{plan:?}");

        let v2 = outcome(
            vec![object("ConfigMap", "hello", json!({"message": "hi", "revision": "2"}))],
            vec![],
            json!({"phase": "done", "revision": 2}),
        );
        let plan = compare(&parent(), &live, &Side { outcome: &v1, kinds: &k1 }, &Side { outcome: &v2, kinds: &k2 });
        assert_eq!(lines(&plan), ["update ConfigMap hello live=true [data.revision: (none) -> \"2\"]"]);
        assert_eq!(plan.status.iter().map(FieldChange::line).collect::<Vec<_>>(), ["revision: (none) -> 2"]);
        assert!(plan.changed() && !plan.fails());
        assert_eq!(plan.count(Action::Update), 1);
    }

    fn applied(desired: Value, write: Write, changes: Vec<Change>) -> Outcome {
        let writes = vec![ObjectWrite { write, changes }];
        Outcome { desired: vec![desired], writes, status: Some(json!({})), ..Outcome::default() }
    }

    #[test]
    fn an_apply_is_planned_by_what_it_changes_in_the_live_object() {
        // Another manager's key stays: the answer lacking it removes nothing.
        let live = [object("ConfigMap", "hello", json!({"message": "hi", "team": "a", "theirs": "x"}))];
        let answer = object("ConfigMap", "hello", json!({"message": "hi"}));
        let holds = applied(answer.clone(), Write::Unchanged, vec![]);
        let drops = vec![Change::Drop { path: "data.team".into(), from: Some(json!("a")) }];
        let dropping = applied(answer.clone(), Write::Apply, drops);
        let k = kinds(&["ConfigMap"]);
        let (current, new) = (Side { outcome: &holds, kinds: &k }, Side { outcome: &dropping, kinds: &k });
        let plan = compare(&parent(), &live, &current, &new);
        assert_eq!(lines(&plan), ["update ConfigMap hello live=true [data.team: \"a\" -> (none)]"]);

        // The same apply on both sides is no difference; one that only
        // takes fields over is still a write, with no value to show.
        let plan = compare(&parent(), &live, &new, &Side { outcome: &dropping, kinds: &k });
        assert!(!plan.noteworthy(), "{plan:?}");
        let owning = applied(answer, Write::Apply, vec![Change::Own { path: "data.message".into() }]);
        let plan = compare(&parent(), &live, &current, &Side { outcome: &owning, kinds: &k });
        assert_eq!(lines(&plan), ["update ConfigMap hello live=true []"]);
        // Back to a version whose answer the object holds: the field the
        // other would drop stays.
        let plan = compare(&parent(), &live, &new, &current);
        assert_eq!(lines(&plan), ["update ConfigMap hello live=true [data.team: (none) -> \"a\"]"]);
    }

    #[test]
    fn creates_and_deletes_are_relative_to_what_the_current_version_leaves() {
        let live = [object("ConfigMap", "hello", json!({"message": "hi"})), object("ConfigMap", "old", json!({}))];
        // Current: keeps hello, deletes old, creates world.
        let v1 = outcome(
            vec![live[0].clone(), object("ConfigMap", "world", json!({"message": "hi, world"}))],
            vec![live[1].clone()],
            json!({}),
        );
        // New: keeps hello and old, creates moon, not world; deletes nothing.
        let v2 = outcome(
            vec![live[0].clone(), live[1].clone(), object("ConfigMap", "moon", json!({"message": "hi, moon"}))],
            vec![],
            json!({}),
        );
        let k = kinds(&["ConfigMap"]);
        let plan = compare(&parent(), &live, &Side { outcome: &v1, kinds: &k }, &Side { outcome: &v2, kinds: &k });
        assert_eq!(
            lines(&plan),
            [
                "create ConfigMap moon live=false [data.message: (none) -> \"hi, moon\"]",
                "create ConfigMap old live=true []",
                "delete ConfigMap world live=false []",
            ]
        );
    }

    #[test]
    fn a_kind_the_new_version_does_not_own_is_left_unmanaged_and_a_new_kind_created() {
        let live = [object("ConfigMap", "hello", json!({})), object("ServiceAccount", "hello", json!(null))];
        let with_accounts = outcome(live.to_vec(), vec![], json!({}));
        let without = outcome(vec![live[0].clone()], vec![], json!({}));
        let (both, configmaps) = (kinds(&["ConfigMap", "ServiceAccount"]), kinds(&["ConfigMap"]));
        let plan = compare(
            &parent(),
            &live,
            &Side { outcome: &with_accounts, kinds: &both },
            &Side { outcome: &without, kinds: &configmaps },
        );
        assert_eq!(lines(&plan), ["unmanaged ServiceAccount hello live=true []"]);
        assert!(plan.changed());

        // The other way: the new kind's object is created.
        let live = &live[..1];
        let with_accounts =
            outcome(vec![live[0].clone(), object("ServiceAccount", "hello", json!(null))], vec![], json!({}));
        let plan = compare(
            &parent(),
            live,
            &Side { outcome: &without, kinds: &configmaps },
            &Side { outcome: &with_accounts, kinds: &both },
        );
        assert_eq!(lines(&plan), ["create ServiceAccount hello live=false []"]);

        // A version that deletes what it owns and the other does not.
        let live = [object("ConfigMap", "hello", json!({})), object("ServiceAccount", "stale", json!(null))];
        let deletes = outcome(vec![live[0].clone()], vec![live[1].clone()], json!({}));
        let plan = compare(
            &parent(),
            &live,
            &Side { outcome: &without, kinds: &configmaps },
            &Side { outcome: &deletes, kinds: &both },
        );
        assert_eq!(lines(&plan), ["delete ServiceAccount stale live=true []"]);
    }

    #[test]
    fn failures_are_the_new_versions_only_when_the_current_one_succeeds() {
        let live = [object("ConfigMap", "hello", json!({"message": "hi"}))];
        let ok = outcome(vec![live[0].clone()], vec![], json!({"phase": "done"}));
        let k = kinds(&["ConfigMap"]);
        let plan =
            compare(&parent(), &live, &Side { outcome: &ok, kinds: &k }, &Side { outcome: &failed(), kinds: &k });
        assert!(plan.fails() && !plan.both_fail() && !plan.changed());
        let error = plan.new_error.as_ref().expect("an error");
        assert_eq!(error.kind, "failed");
        assert!(error.message.starts_with("desired: "), "{}", error.message);

        let plan =
            compare(&parent(), &live, &Side { outcome: &failed(), kinds: &k }, &Side { outcome: &failed(), kinds: &k });
        assert!(plan.both_fail() && !plan.fails() && plan.noteworthy());

        // The current version fails, the new one fixes it: its writes, and
        // its status against the live one.
        let fixed =
            outcome(vec![object("ConfigMap", "hello", json!({"message": "fixed"}))], vec![], json!({"phase": "done"}));
        let plan =
            compare(&parent(), &live, &Side { outcome: &failed(), kinds: &k }, &Side { outcome: &fixed, kinds: &k });
        assert!(!plan.fails() && plan.current_error.is_some());
        assert_eq!(lines(&plan), ["update ConfigMap hello live=true [data.message: \"hi\" -> \"fixed\"]"]);
        assert_eq!(plan.status.iter().map(FieldChange::line).collect::<Vec<_>>(), ["phase: \"live\" -> \"done\""]);
    }

    #[test]
    fn a_secrets_data_is_redacted_in_the_plan() {
        let live = [object("Secret", "creds", json!({"password": "b2xk"}))];
        let v1 = outcome(live.to_vec(), vec![], json!({}));
        let v2 = outcome(vec![object("Secret", "creds", json!({"password": "bmV3"}))], vec![], json!({}));
        let k = kinds(&["Secret"]);
        let plan = compare(&parent(), &live, &Side { outcome: &v1, kinds: &k }, &Side { outcome: &v2, kinds: &k });
        assert_eq!(lines(&plan), ["update Secret creds live=true [data.password: (redacted) -> (redacted)]"]);
    }
}
