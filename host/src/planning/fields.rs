//! Field-level differences between two objects (or two statuses), as
//! `path: old -> new` lines: maps member by member (the members a merge
//! patch names, `planning/object_diff.rs`), lists by `name` when every item has
//! one (containers, ports, env) and by index otherwise. A null member counts
//! as absent, as in the operator's comparisons. A Secret's `data` and
//! `stringData` values are never shown: only that they change.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::planning::object_diff::{merge_patch, same_ignoring_nulls};

/// What a redacted value is shown as.
pub const REDACTED: &str = "(redacted)";

/// One field that differs. `old` is `None` when the field is added, `new`
/// when it is removed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldChange {
    /// `data.revision`, `spec.containers[name=web].image`, `args[2]`,
    /// `metadata.labels["app.kubernetes.io/name"]`.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

impl FieldChange {
    /// `path: old -> new`, each value as compact JSON, `(none)` when absent.
    pub fn line(&self) -> String {
        let show = |value: &Option<Value>| value.as_ref().map_or_else(|| "(none)".to_owned(), compact);
        format!("{}: {} -> {}", self.path, show(&self.old), show(&self.new))
    }
}

fn compact(value: &Value) -> String {
    match value {
        // A redaction marker reads as a marker, not as a string value.
        Value::String(text) if text == REDACTED => REDACTED.to_owned(),
        other => other.to_string(),
    }
}

/// The fields in which `new` differs from `old`, in path order.
pub fn diff(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    walk(&mut String::new(), present(old), present(new), &mut changes);
    changes
}

/// `None` for an absent (null) value.
fn present(value: &Value) -> Option<&Value> {
    (!value.is_null()).then_some(value)
}

fn walk(path: &mut String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (None, None) => {}
        (Some(old), Some(new)) if same_ignoring_nulls(old, new) => {}
        (Some(old_value @ Value::Object(old_map)), Some(new_value @ Value::Object(new_map))) => {
            // The members a merge patch from one to the other names.
            let patch = merge_patch(old_value, new_value);
            let keys: BTreeSet<&String> = patch.as_object().into_iter().flat_map(Map::keys).collect();
            for key in keys {
                within(path, &key_segment(path, key), |path| {
                    walk(path, old_map.get(key).and_then(present), new_map.get(key).and_then(present), out);
                });
            }
        }
        (Some(Value::Array(old_items)), Some(Value::Array(new_items))) => lists(path, old_items, new_items, out),
        // A map added or removed whole: its fields, one a line.
        (None, Some(Value::Object(map))) | (Some(Value::Object(map)), None) if !map.is_empty() => {
            let added = old.is_none();
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                let value = map.get(key).and_then(present);
                within(path, &key_segment(path, key), |path| {
                    if added { walk(path, None, value, out) } else { walk(path, value, None, out) }
                });
            }
        }
        (old, new) => out.push(FieldChange { path: path.clone(), old: old.cloned(), new: new.cloned() }),
    }
}

/// Runs `f` with `segment` appended to `path`, then takes it off again.
fn within(path: &mut String, segment: &str, f: impl FnOnce(&mut String)) {
    let length = path.len();
    path.push_str(segment);
    f(path);
    path.truncate(length);
}

/// `.key` (no dot at the start), or `["key"]` for a key that is not a plain
/// word (label keys with dots and slashes).
fn key_segment(path: &str, key: &str) -> String {
    match (is_word(key), path.is_empty()) {
        (true, true) => key.to_owned(),
        (true, false) => format!(".{key}"),
        (false, _) => format!("[{}]", Value::from(key)),
    }
}

/// Whether a path may name `key` after a dot: one word, not a label key
/// with dots and slashes (written `["app.kubernetes.io/name"]`).
pub fn is_word(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Items by `name` when every item of both lists is a map with a distinct
/// string `name`; by index otherwise.
fn lists(path: &mut String, old: &[Value], new: &[Value], out: &mut Vec<FieldChange>) {
    if let (Some(old_names), Some(new_names)) = (names(old), names(new)) {
        let mut order: Vec<&str> = old_names.clone();
        order.extend(new_names.iter().filter(|name| !old_names.contains(name)));
        for name in order {
            let (before, after) = (named(old, &old_names, name), named(new, &new_names, name));
            within(path, &format!("[name={name}]"), |path| walk(path, before, after, out));
        }
        return;
    }
    for index in 0..old.len().max(new.len()) {
        let (before, after) = (old.get(index).and_then(present), new.get(index).and_then(present));
        within(path, &format!("[{index}]"), |path| walk(path, before, after, out));
    }
}

/// The item named `name`; `names` are the items' names.
fn named<'v>(items: &'v [Value], names: &[&str], name: &str) -> Option<&'v Value> {
    names.iter().position(|n| *n == name).and_then(|index| items.get(index))
}

/// The items' names, when every item has a distinct one.
fn names(items: &[Value]) -> Option<Vec<&str>> {
    let names: Vec<&str> = items.iter().map(|item| item.get("name").and_then(Value::as_str)).collect::<Option<_>>()?;
    let distinct: BTreeSet<&str> = names.iter().copied().collect();
    (distinct.len() == names.len()).then_some(names)
}

/// Whether `object` is a Secret (core `v1`), whose data is never printed.
pub fn is_secret(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// The changes with every value under `data` or `stringData` replaced by
/// [`REDACTED`]: that a key is added, changed or removed shows, its value
/// does not.
pub fn redact_changes(changes: &mut [FieldChange]) {
    for change in changes {
        let secret = ["data", "stringData"].iter().any(|root| {
            change.path == *root
                || change.path.starts_with(&format!("{root}."))
                || change.path.starts_with(&format!("{root}["))
        });
        if secret {
            for value in [&mut change.old, &mut change.new].into_iter().flatten() {
                *value = Value::from(REDACTED);
            }
        }
    }
}

/// A Secret with the values of `data` and `stringData` replaced by
/// [`REDACTED`]; any other object as it is.
pub fn redact_object(object: &Value) -> Value {
    let mut object = object.clone();
    if !is_secret(&object) {
        return object;
    }
    for root in ["data", "stringData"] {
        if let Some(map) = object.get_mut(root).and_then(Value::as_object_mut) {
            for value in map.values_mut() {
                *value = Value::from(REDACTED);
            }
        } else if let Some(value) = object.get_mut(root).filter(|v| !v.is_null()) {
            *value = Value::from(REDACTED);
        }
    }
    object
}

/// The changes as indented lines.
pub fn lines(changes: &[FieldChange], indent: &str) -> String {
    let mut text = String::new();
    for change in changes {
        let _ = writeln!(text, "{indent}{}", change.line());
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lines_of(old: Value, new: Value) -> Vec<String> {
        diff(&old, &new).iter().map(FieldChange::line).collect()
    }

    #[test]
    fn a_changed_added_and_removed_field_each_make_a_line() {
        let old = json!({"data": {"message": "hi", "gone": "x"}, "metadata": {"name": "a", "resourceVersion": "7"}});
        let new =
            json!({"data": {"message": "hello", "revision": "2"}, "metadata": {"name": "a", "resourceVersion": "7"}});
        assert_eq!(
            lines_of(old, new),
            ["data.gone: \"x\" -> (none)", "data.message: \"hi\" -> \"hello\"", "data.revision: (none) -> \"2\""]
        );
    }

    #[test]
    fn nulls_are_absent_and_equal_objects_have_no_lines() {
        assert!(diff(&json!({"a": 1, "b": null}), &json!({"a": 1})).is_empty());
        assert!(diff(&json!({"spec": {"x": [1, 2]}}), &json!({"spec": {"x": [1, 2]}})).is_empty());
        assert_eq!(lines_of(json!({"a": null}), json!({"a": 1})), ["a: (none) -> 1"]);
    }

    #[test]
    fn named_lists_go_by_name_and_others_by_index() {
        let old = json!({"containers": [{"name": "web", "image": "a:1"}, {"name": "side", "image": "s:1"}],
                         "args": ["-p", "11211"]});
        let new = json!({"containers": [{"name": "side", "image": "s:1"}, {"name": "web", "image": "a:2"},
                                        {"name": "new", "image": "n:1"}],
                         "args": ["-p", "11212", "-v"]});
        assert_eq!(
            lines_of(old, new),
            [
                "args[1]: \"11211\" -> \"11212\"",
                "args[2]: (none) -> \"-v\"",
                "containers[name=web].image: \"a:1\" -> \"a:2\"",
                "containers[name=new].image: (none) -> \"n:1\"",
                "containers[name=new].name: (none) -> \"new\"",
            ]
        );
    }

    #[test]
    fn keys_that_are_not_words_are_quoted_and_whole_maps_expand() {
        let old = json!({"metadata": {"labels": {"app.kubernetes.io/name": "a"}}});
        let new = json!({"metadata": {"labels": {"app.kubernetes.io/name": "b"}}, "data": {"k": "v", "e": {}}});
        assert_eq!(
            lines_of(old, new),
            [
                "data.e: (none) -> {}",
                "data.k: (none) -> \"v\"",
                "metadata.labels[\"app.kubernetes.io/name\"]: \"a\" -> \"b\"",
            ]
        );
        assert_eq!(lines_of(json!({"a": {"b": 1}}), json!({})), ["a.b: 1 -> (none)"]);
        assert_eq!(lines_of(json!({"a": 1}), json!({"a": {"b": 1}})), ["a: 1 -> {\"b\":1}"]);
    }

    #[test]
    fn a_secrets_values_are_never_shown() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                            "data": {"password": "c2VjcmV0"}, "stringData": {"token": "plain"}});
        assert!(is_secret(&secret));
        assert!(!is_secret(&json!({"apiVersion": "v1", "kind": "ConfigMap"})));
        let redacted = redact_object(&secret);
        assert_eq!(redacted["data"], json!({"password": REDACTED}));
        assert_eq!(redacted["stringData"], json!({"token": REDACTED}));
        assert_eq!(redacted["metadata"], secret["metadata"]);

        let mut changed = secret.clone();
        changed["data"]["password"] = json!("bmV3");
        changed["data"]["added"] = json!("eA==");
        changed["metadata"]["labels"] = json!({"a": "b"});
        let mut changes = diff(&secret, &changed);
        redact_changes(&mut changes);
        let text = lines(&changes, "  ");
        assert_eq!(
            text,
            "  data.added: (none) -> (redacted)\n  data.password: (redacted) -> (redacted)\n  metadata.labels.a: (none) -> \"b\"\n"
        );
        assert!(!text.contains("bmV3") && !text.contains("c2VjcmV0"));
    }
}
