//! A value as the API server stores it under a custom resource's structural
//! schema: unknown fields pruned, nulls of fields that are not nullable
//! dropped, defaults filled in. The host compares a module's status answer
//! with the parent's status in this form, so a status holding a field the
//! schema prunes is written once, not on every reconcile; `render` and
//! `test` name the pruned fields.

use serde_json::{Map, Value};

use crate::runtime::crd_check::validation::apply_defaults;

/// A value as stored, and the fields the schema pruned from it.
#[derive(Debug, PartialEq)]
pub struct Stored {
    pub value: Value,
    /// Each pruned field's path, below `at` as given.
    pub pruned: Vec<String>,
}

/// `value` as the API server stores it under `schema` (a structural
/// schema: the CRD's `openAPIV3Schema` or one of its properties); `at`
/// names where `value` sits (`status`).
pub fn as_stored(value: &Value, schema: &Value, at: &str) -> Stored {
    let mut value = value.clone();
    let mut pruned = Vec::new();
    prune(&mut value, schema, at, &mut pruned);
    apply_defaults(&mut value, schema);
    Stored { value, pruned }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn child(at: &str, name: &str) -> String {
    if at.is_empty() { name.to_owned() } else { format!("{at}.{name}") }
}

fn prune(value: &mut Value, schema: &Value, at: &str, pruned: &mut Vec<String>) {
    match value {
        Value::Object(object) => prune_object(object, schema, at, pruned),
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (index, child) in items.iter_mut().enumerate() {
                    prune(child, item, &format!("{at}[{index}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(object: &mut Map<String, Value>, schema: &Value, at: &str, pruned: &mut Vec<String>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let values = schema.get("additionalProperties").filter(|values| values.is_object());
    let typed = schema.get("type").is_some() || properties.is_some() || values.is_some();
    // Kept as they are: anything below a schema without a type (not
    // structural: only reached inside preserved fields), and the unknown
    // fields of one that preserves them or allows any (`true`).
    let keeps_unknown = !typed
        || flag(schema, "x-kubernetes-preserve-unknown-fields")
        || schema.get("additionalProperties") == Some(&Value::Bool(true));
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let names: Vec<String> = object.keys().cloned().collect();
    for name in names {
        let field_schema = properties.and_then(|properties| properties.get(&name)).or(values);
        let Some(field) = object.get_mut(&name) else { continue };
        match field_schema {
            Some(field_schema) => {
                if field.is_null() && !flag(field_schema, "nullable") {
                    object.remove(&name);
                    continue;
                }
                prune(field, field_schema, &child(at, &name), pruned);
            }
            None if keeps_unknown || (embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata")) => {}
            None => {
                if !field.is_null() {
                    pruned.push(child(at, &name));
                }
                object.remove(&name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "ready": {"type": "integer", "default": 0},
                "phase": {"type": "string"},
                "note": {"type": "string", "nullable": true},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"}
                }}},
                "byZone": {"type": "object", "additionalProperties": {"type": "object", "properties": {"count": {"type": "integer"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "object", "properties": {}}}},
                "nothing": {"type": "object"}
            }
        })
    }

    #[test]
    fn unknown_fields_are_pruned_and_named_and_defaults_filled_in() {
        let status = json!({
            "phase": "Running",
            "extra": "dropped",
            "conditions": [{"type": "Ready", "status": "True", "reason": "x"}],
            "byZone": {"a": {"count": 1, "other": 2}},
            "free": {"anything": {"goes": 1}, "known": {"pruned": 1}},
            "nothing": {"gone": 1},
            "note": null,
            "phaseNull": null
        });
        let stored = as_stored(&status, &schema(), "status");
        assert_eq!(
            stored.value,
            json!({
                "phase": "Running",
                "ready": 0,
                "conditions": [{"type": "Ready", "status": "True"}],
                "byZone": {"a": {"count": 1}},
                "free": {"anything": {"goes": 1}, "known": {}},
                "nothing": {},
                "note": null
            })
        );
        assert_eq!(
            stored.pruned,
            [
                "status.byZone.a.other",
                "status.conditions[0].reason",
                "status.extra",
                "status.free.known.pruned",
                "status.nothing.gone",
            ]
        );
    }

    #[test]
    fn a_stored_value_is_stored_as_it_is() {
        let stored = as_stored(&json!({"phase": "Running"}), &schema(), "status");
        assert_eq!(as_stored(&stored.value, &schema(), "status"), Stored { value: stored.value, pruned: vec![] });
    }

    #[test]
    fn a_null_of_a_field_that_is_not_nullable_takes_its_default() {
        let stored = as_stored(&json!({"ready": null}), &schema(), "status");
        assert_eq!(stored.value, json!({"ready": 0}));
        assert!(stored.pruned.is_empty());
    }
}
