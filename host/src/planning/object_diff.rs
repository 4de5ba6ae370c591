//! Comparing objects the way the API server reads them, and the merge patch
//! between two statuses.

use serde_json::{Map, Value};

/// Equal, counting a null member as absent (the API server drops nulls, and
/// returns some, such as a pod template's `creationTimestamp: null`).
pub fn same_ignoring_nulls(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => members_match(a, b) && members_match(b, a),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_ignoring_nulls(a, b))
        }
        (a, b) => a == b,
    }
}

/// Every non-null member of `a` is in `b`, with an equal value.
fn members_match(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.iter().filter(|(_, value)| !value.is_null()).all(|(key, value)| match b.get(key) {
        Some(other) => same_ignoring_nulls(value, other),
        None => false,
    })
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: members that
/// are gone become null, objects are patched member by member, everything
/// else is replaced.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(from), Value::Object(to)) => {
            let mut patch = Map::new();
            for (key, old) in from {
                match to.get(key) {
                    None | Some(Value::Null) if !old.is_null() => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    _ => {}
                }
            }
            for (key, new) in to {
                if new.is_null() {
                    continue;
                }
                match from.get(key) {
                    Some(old) if same_ignoring_nulls(old, new) => {}
                    Some(old @ Value::Object(_)) if new.is_object() => {
                        patch.insert(key.clone(), merge_patch(old, new));
                    }
                    _ => {
                        patch.insert(key.clone(), new.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        (_, to) => to.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nulls_count_as_absent_and_everything_else_counts() {
        let server = json!({"spec": {"template": {"metadata": {"creationTimestamp": null, "labels": {"a": "1"}}}}});
        let ours = json!({"spec": {"template": {"metadata": {"labels": {"a": "1"}}}}});
        assert!(same_ignoring_nulls(&server, &ours));
        assert!(same_ignoring_nulls(&ours, &server));
        let changed = json!({"spec": {"template": {"metadata": {"labels": {"a": "2"}}}}});
        assert!(!same_ignoring_nulls(&changed, &ours));
        let extra = json!({"spec": {"template": {"metadata": {"labels": {"a": "1", "b": "2"}}}}});
        assert!(!same_ignoring_nulls(&extra, &ours));
        assert!(!same_ignoring_nulls(&ours, &extra));
        assert!(!same_ignoring_nulls(&json!([1, 2]), &json!([2, 1])));
        assert!(!same_ignoring_nulls(&json!({"a": []}), &json!({})));
    }

    #[test]
    fn the_merge_patch_turns_the_old_status_into_the_new_one() {
        let old = json!({"readyReplicas": 1, "serverList": ["a:11211"], "nested": {"x": 1, "y": 2}, "gone": true});
        let new = json!({"readyReplicas": 2, "serverList": [], "nested": {"x": 1}, "added": "z"});
        let patch = merge_patch(&old, &new);
        assert_eq!(
            patch,
            json!({"readyReplicas": 2, "serverList": [], "nested": {"y": null}, "gone": null, "added": "z"})
        );
        assert_eq!(apply(&old, &patch), new);
        assert_eq!(merge_patch(&new, &new), json!({}));
        assert_eq!(merge_patch(&Value::Null, &new), new);
    }

    /// RFC 7386's apply, to check the patch against.
    fn apply(target: &Value, patch: &Value) -> Value {
        let Value::Object(patch) = patch else { return patch.clone() };
        let mut result = target.as_object().cloned().unwrap_or_default();
        for (key, value) in patch {
            if value.is_null() {
                result.remove(key);
            } else {
                let merged = apply(result.get(key).unwrap_or(&Value::Null), value);
                result.insert(key.clone(), merged);
            }
        }
        Value::Object(result)
    }
}
