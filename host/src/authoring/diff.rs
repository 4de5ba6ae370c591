//! Expected against actual, as people read them: both as YAML (null members
//! dropped, as the operator's comparisons ignore them) and a unified diff.

use serde_json::Value;
use similar::TextDiff;

use super::documents::{without_nulls, yaml};
use crate::planning::object_diff::same_ignoring_nulls;

/// Equal as the operator compares objects: a null member counts as absent.
pub fn same(expected: &Value, actual: &Value) -> bool {
    same_ignoring_nulls(expected, actual)
}

/// A unified diff of the two values' YAML (`-` expected, `+` actual).
pub fn unified(expected: &Value, actual: &Value) -> String {
    let expected = yaml(&without_nulls(expected));
    let actual = yaml(&without_nulls(actual));
    TextDiff::from_lines(&expected, &actual).unified_diff().context_radius(3).header("expected", "actual").to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nulls_are_no_difference_and_a_change_shows_as_lines() {
        assert!(same(&json!({"a": 1, "b": null}), &json!({"a": 1})));
        let diff = unified(&json!({"data": {"message": "hi"}, "b": null}), &json!({"data": {"message": "hello"}}));
        assert_eq!(diff, "--- expected\n+++ actual\n@@ -1,2 +1,2 @@\n data:\n-  message: hi\n+  message: hello\n");
    }
}
