//! A value under a CRD's schema, as the API server treats it: the defaults
//! the schema sets filled in below it, then validated as an object is
//! (types, enums, bounds, lengths, counts, required fields, allOf, anyOf,
//! oneOf, not), a field the schema would prune counting as a problem. A
//! CRD's every `default` is checked so (`schema.rs`); a status answer is
//! defaulted so before it is compared (`planning/stored.rs`).

use serde_json::{Map, Value};

pub(super) fn flag(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key) == Some(&Value::Bool(true))
}

/// What is wrong with `default`, the default `schema` sets: checked after
/// the defaults of its own fields are filled in, and holding no field the
/// schema would prune.
pub fn check_default(default: &Value, schema: &Value) -> Vec<String> {
    let mut value = default.clone();
    apply_defaults(&mut value, schema);
    let mut problems = Vec::new();
    validate(&value, schema, "", Prune::Yes, &mut problems);
    problems
}

/// Fills in, below `value`, the defaults `schema` sets for absent fields,
/// as the API server does before it validates a default (and as it stores
/// a value: `planning/stored.rs`).
pub fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (name, property) in properties {
                    if let (false, Some(default)) = (object.contains_key(name), property.get("default")) {
                        object.insert(name.clone(), default.clone());
                    }
                    if let Some(child) = object.get_mut(name) {
                        apply_defaults(child, property);
                    }
                }
            } else if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                object.values_mut().for_each(|child| apply_defaults(child, values));
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                items.iter_mut().for_each(|child| apply_defaults(child, item));
            }
        }
        _ => {}
    }
}

/// Whether `value` passes `schema`'s value validations (no problems kept).
fn passes(value: &Value, schema: &Value) -> bool {
    let mut problems = Vec::new();
    validate(value, schema, "", Prune::No, &mut problems);
    problems.is_empty()
}

/// Whether a field no property names is a problem: in the structural
/// schema (the API server would prune it), not in a junctor's (which
/// restricts values only).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prune {
    Yes,
    No,
}

fn at(path: &str, problem: String) -> String {
    if path.is_empty() { problem } else { format!("{path}: {problem}") }
}

/// `value` against `schema`, as the API server validates an object (a
/// field the schema would prune is a problem too: a default must not hold
/// one). `path` locates `value` within the default.
fn validate(value: &Value, schema: &Value, path: &str, prune: Prune, problems: &mut Vec<String>) {
    let Some(map) = schema.as_object() else { return };
    let shown = || shorten(&value.to_string());
    if value.is_null() {
        if !flag(map, "nullable") && map.contains_key("type") {
            problems.push(at(path, "null, and the schema is not nullable".to_owned()));
        }
        return;
    }
    let int_or_string = flag(map, "x-kubernetes-int-or-string");
    let kind = map.get("type").and_then(Value::as_str);
    let fits = match (kind, value) {
        _ if int_or_string => value.is_string() || value.is_i64() || value.is_u64(),
        (None, _) => true,
        (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => true,
        (Some("object"), Value::Object(_)) | (Some("array"), Value::Array(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Some("number"), Value::Number(_)) => true,
        _ => false,
    };
    if !fits {
        let wanted = if int_or_string { "an integer or a string" } else { kind.unwrap_or_default() };
        problems.push(at(path, format!("{} is not of type {wanted}", shown())));
        return;
    }
    if let Some(Value::Array(allowed)) = map.get("enum")
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        problems.push(at(path, format!("{} is none of the enum's values {}", shown(), allowed.join(", "))));
    }
    let number = |key: &str| map.get(key).and_then(Value::as_f64);
    match value {
        Value::String(text) => {
            let length = text.chars().count() as f64;
            if let Some(least) = number("minLength").filter(|least| length < *least) {
                problems.push(at(path, format!("{} is shorter than minLength {least}", shown())));
            }
            if let Some(most) = number("maxLength").filter(|most| length > *most) {
                problems.push(at(path, format!("{} is longer than maxLength {most}", shown())));
            }
        }
        Value::Number(n) => bounds(n.as_f64().unwrap_or_default(), map, path, problems),
        Value::Array(items) => {
            let count = items.len() as f64;
            if let Some(least) = number("minItems").filter(|least| count < *least) {
                problems.push(at(path, format!("{count} items, fewer than minItems {least}")));
            }
            if let Some(most) = number("maxItems").filter(|most| count > *most) {
                problems.push(at(path, format!("{count} items, more than maxItems {most}")));
            }
            if let Some(item) = map.get("items") {
                for (index, child) in items.iter().enumerate() {
                    validate(child, item, &format!("{path}[{index}]"), prune, problems);
                }
            }
        }
        Value::Object(object) => fields(object, map, path, prune, problems),
        Value::Bool(_) | Value::Null => {}
    }
    junctors(value, map, path, problems);
}

fn bounds(n: f64, map: &Map<String, Value>, path: &str, problems: &mut Vec<String>) {
    let number = |key: &str| map.get(key).and_then(Value::as_f64);
    if let Some(least) = number("minimum") {
        let exclusive = flag(map, "exclusiveMinimum");
        if n < least || (exclusive && n == least) {
            let than = if exclusive { "not more than the exclusive minimum" } else { "less than minimum" };
            problems.push(at(path, format!("{n} is {than} {least}")));
        }
    }
    if let Some(most) = number("maximum") {
        let exclusive = flag(map, "exclusiveMaximum");
        if n > most || (exclusive && n == most) {
            let than = if exclusive { "not less than the exclusive maximum" } else { "more than maximum" };
            problems.push(at(path, format!("{n} is {than} {most}")));
        }
    }
    if let Some(step) = number("multipleOf").filter(|step| *step > 0.0 && (n / step).fract() != 0.0) {
        problems.push(at(path, format!("{n} is not a multiple of {step}")));
    }
}

/// An object's required, known and counted fields.
fn fields(object: &Map<String, Value>, map: &Map<String, Value>, path: &str, prune: Prune, problems: &mut Vec<String>) {
    let child = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
    if let Some(Value::Array(required)) = map.get("required") {
        for name in required.iter().filter_map(Value::as_str).filter(|name| !object.contains_key(*name)) {
            problems.push(at(path, format!("{name} is required")));
        }
    }
    let count = object.len() as f64;
    if let Some(least) = map.get("minProperties").and_then(Value::as_f64).filter(|least| count < *least) {
        problems.push(at(path, format!("{count} fields, fewer than minProperties {least}")));
    }
    if let Some(most) = map.get("maxProperties").and_then(Value::as_f64).filter(|most| count > *most) {
        problems.push(at(path, format!("{count} fields, more than maxProperties {most}")));
    }
    let properties = map.get("properties").and_then(Value::as_object);
    let values = map.get("additionalProperties").filter(|a| a.is_object());
    let keeps_unknown = prune == Prune::No
        || flag(map, "x-kubernetes-preserve-unknown-fields")
        || map.get("additionalProperties") == Some(&Value::Bool(true))
        || (properties.is_none() && values.is_none() && !map.contains_key("type"));
    for (name, field) in object {
        match (properties.and_then(|p| p.get(name)), values) {
            (Some(property), _) => validate(field, property, &child(name), prune, problems),
            (None, Some(values)) => validate(field, values, &child(name), prune, problems),
            (None, None) if !keeps_unknown => {
                problems.push(at(&child(name), "an unknown field, which the API server would prune".to_owned()));
            }
            (None, None) => {}
        }
    }
}

/// allOf, anyOf, oneOf and not, on the value.
fn junctors(value: &Value, map: &Map<String, Value>, path: &str, problems: &mut Vec<String>) {
    let list = |key: &str| map.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for schema in list("allOf") {
        validate(value, schema, path, Prune::No, problems);
    }
    let any = list("anyOf");
    if !any.is_empty() && !any.iter().any(|schema| passes(value, schema)) {
        problems.push(at(path, format!("{} matches none of anyOf", shorten(&value.to_string()))));
    }
    let one = list("oneOf");
    if !one.is_empty() && one.iter().filter(|schema| passes(value, schema)).count() != 1 {
        problems.push(at(path, format!("{} does not match exactly one of oneOf", shorten(&value.to_string()))));
    }
    if let Some(not) = map.get("not")
        && passes(value, not)
    {
        problems.push(at(path, format!("{} matches the schema of not", shorten(&value.to_string()))));
    }
}

fn shorten(text: &str) -> String {
    const LONGEST: usize = 60;
    if text.chars().count() <= LONGEST {
        return text.to_owned();
    }
    let short: String = text.chars().take(LONGEST - 1).collect();
    short + "…"
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The problems of the default `schema` sets.
    fn problems(schema: Value) -> Vec<String> {
        check_default(&schema["default"], &schema)
    }

    #[test]
    fn a_default_that_breaks_its_own_schema_is_refused_saying_why() {
        let shorter = problems(json!({"type": "string", "minLength": 1, "default": ""}));
        assert_eq!(shorter, ["\"\" is shorter than minLength 1"]);
        let cases = [
            (json!({"type": "integer", "maximum": 10, "default": 11}), "11 is more than maximum 10"),
            (json!({"type": "integer", "default": "3"}), "\"3\" is not of type integer"),
            (json!({"type": "string", "enum": ["a", "b"], "default": "c"}), "\"c\" is none of the enum's values"),
            (
                json!({"type": "array", "items": {"type": "string"}, "maxItems": 1, "default": ["a", "b"]}),
                "more than maxItems",
            ),
            (
                json!({"type": "array", "items": {"type": "string", "minLength": 2}, "default": ["ab", "c"]}),
                "[1]: \"c\" is shorter",
            ),
        ];
        for (schema, says) in cases {
            let found = problems(schema).join("; ");
            assert!(found.contains(says), "{says}: {found}");
        }
    }

    #[test]
    fn an_object_default_is_checked_after_its_own_fields_defaults_and_must_not_be_pruned() {
        let schema = |default: Value| {
            json!({"type": "object", "default": default, "required": ["port"], "properties": {
                "port": {"type": "integer", "default": 80, "minimum": 1},
                "host": {"type": "string"}}})
        };
        assert_eq!(problems(schema(json!({}))), Vec::<String>::new(), "port is filled in by its default");
        assert_eq!(problems(schema(json!({"port": 8080, "host": "h"}))), Vec::<String>::new());
        assert_eq!(problems(schema(json!({"port": 0}))), ["port: 0 is less than minimum 1"]);
        assert_eq!(
            problems(schema(json!({"extra": true}))),
            ["extra: an unknown field, which the API server would prune"]
        );
    }
}
