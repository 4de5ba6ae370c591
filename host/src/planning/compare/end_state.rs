//! What one version leaves of a parent's objects, object by object: the
//! live objects, with what it writes in place of them (its desired object,
//! or the live one when that is the same, so no write happens) and without
//! what it deletes. A version that fails writes nothing: its end state is
//! the live objects.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::planning::applied::Change;
use crate::planning::fields::FieldChange;
use crate::planning::object_diff::same_ignoring_nulls;
use crate::planning::outcome::{ObjectWrite, Outcome};
use crate::planning::step::Write;

/// An object by group, kind and name (the namespace is the parent's).
pub(super) type Key = (String, String, String);

pub(super) fn key_of(object: &Value) -> Key {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_version = text("/apiVersion");
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group).to_owned();
    (group, text("/kind"), text("/metadata/name"))
}

/// The objects as a version leaves them, and what its applies change in
/// the live objects it applies to (an apply keeps the fields others set,
/// so its end state is told by its changes, not by its answer).
pub(super) struct EndState<'o> {
    pub(super) objects: BTreeMap<Key, Value>,
    pub(super) applies: BTreeMap<Key, &'o [Change]>,
}

pub(super) fn end_state<'o>(outcome: &'o Outcome, live: &BTreeMap<Key, &Value>) -> EndState<'o> {
    let objects = live.iter().map(|(key, object)| (key.clone(), (*object).clone())).collect();
    let mut state = EndState { objects, applies: BTreeMap::new() };
    if outcome.error.is_some() {
        return state;
    }
    for deleted in &outcome.deleted {
        state.objects.remove(&key_of(deleted));
    }
    for (index, desired) in outcome.desired.iter().enumerate() {
        let key = key_of(desired);
        match outcome.writes.get(index) {
            // As the operator decides: no request, the live one stays.
            Some(ObjectWrite { write: Write::Unchanged, .. }) => continue,
            Some(ObjectWrite { write: Write::Apply, changes }) if live.contains_key(&key) => {
                state.applies.insert(key, changes);
                continue;
            }
            _ => {}
        }
        // Equal to the live object: no write, the live one stays.
        if live.get(&key).is_some_and(|object| same_ignoring_nulls(object, desired)) {
            continue;
        }
        state.objects.insert(key, desired.clone());
    }
    state
}

/// A path's live value, and what each side's apply leaves there (none:
/// it changes nothing there; `Some(None)`: it removes the field).
type LeftAt<'a> = (Option<&'a Value>, [Option<Option<&'a Value>>; 2]);

/// The fields two versions' applies leave differently, each from the
/// value `current`'s leaves (the live one where it changes none) to the
/// value `new`'s leaves. A field that only becomes the module's, or items
/// only reordered, keep their values and show none.
pub(super) fn apply_changes(current: Option<&[Change]>, new: Option<&[Change]>) -> Vec<FieldChange> {
    let (current, new) = (current.unwrap_or_default(), new.unwrap_or_default());
    let mut paths: BTreeMap<&str, LeftAt<'_>> = BTreeMap::new();
    for (side, changes) in [current, new].into_iter().enumerate() {
        for change in changes {
            let (path, from, left) = match change {
                Change::Set { path, from, to } => (path, from, Some(to)),
                Change::Drop { path, from } => (path, from, None),
                Change::Own { .. } | Change::Order { .. } => continue,
            };
            let entry = paths.entry(path).or_default();
            entry.0 = from.as_ref();
            entry.1[side] = Some(left);
        }
    }
    paths
        .into_iter()
        .filter_map(|(path, (live, [before, after]))| {
            let (before, after) = (before.unwrap_or(live), after.unwrap_or(live));
            (before != after).then(|| FieldChange { path: path.to_owned(), old: before.cloned(), new: after.cloned() })
        })
        .collect()
}
