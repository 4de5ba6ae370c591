//! A CRD's schemas checked as the API server checks them when the CRD is
//! created: the structural rules (every field typed, arrays with items, no
//! types or defaults inside allOf/anyOf/oneOf/not, no unsupported keywords,
//! list and map types that make sense), and every `default` valid against
//! its own schema with no field the schema would prune. A CRD the API
//! server would reject then fails `manifest`, `render`, `test` and the load
//! naming the field, not only `dev` or `kubectl apply`.
//!
//! Not checked: `pattern` and `format` (the API server's regular
//! expressions and formats), CEL rules (`x-kubernetes-validations`), and
//! the completeness of junctors (a property named only inside an `allOf`).

use serde_json::{Map, Value};

/// How many problems one error lists.
const LISTED: usize = 5;

const TYPES: [&str; 6] = ["object", "array", "string", "integer", "number", "boolean"];
const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];
/// Keywords of JSON Schema the API server refuses in a CRD.
const UNSUPPORTED: [&str; 7] =
    ["$ref", "$schema", "id", "definitions", "patternProperties", "additionalItems", "dependencies"];
/// What a schema inside a junctor must not set (it only validates values).
const STRUCTURAL_ONLY: [&str; 10] = [
    "default",
    "description",
    "title",
    "nullable",
    "additionalProperties",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
];

/// What is wrong with the schemas of `crd` (a parsed CRD), if anything.
pub fn check(crd: &Value) -> Result<(), String> {
    let mut problems = Vec::new();
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (index, version) in versions.iter().enumerate() {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
            structure(schema, &path, Place::Root, &mut problems);
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let more = problems.len().saturating_sub(LISTED);
    problems.truncate(LISTED);
    let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
    Err(format!("crd: the API server would refuse it: {}{more}", problems.join("; ")))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The schema of the whole object.
    Root,
    /// A field's schema (or an array's items, a map's values).
    Field,
    /// Inside allOf, anyOf, oneOf or not: values only. `typed`: under an
    /// x-kubernetes-int-or-string field, whose anyOf names its two types.
    Junctor { typed: bool },
}

fn flag(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key) == Some(&Value::Bool(true))
}

/// The structural rules at `schema` and below, and each default's value.
fn structure(schema: &Value, path: &str, place: Place, problems: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        problems.push(format!("{path}: must be an object (a schema)"));
        return;
    };
    for key in UNSUPPORTED.iter().filter(|key| map.contains_key(**key)) {
        problems.push(format!("{path}.{key}: not supported in a CRD"));
    }
    let kind = map.get("type").and_then(Value::as_str);
    let int_or_string = flag(map, "x-kubernetes-int-or-string");
    match place {
        Place::Junctor { typed } => {
            let mut forbidden: Vec<&str> = STRUCTURAL_ONLY.to_vec();
            if !typed {
                forbidden.push("type");
            }
            for key in forbidden.iter().filter(|key| map.contains_key(**key)) {
                problems.push(format!("{path}.{key}: must not be set inside allOf, anyOf, oneOf or not"));
            }
        }
        Place::Root | Place::Field => {
            let untyped_allowed = int_or_string
                || flag(map, "x-kubernetes-preserve-unknown-fields")
                || flag(map, "x-kubernetes-embedded-resource");
            match kind {
                None if !untyped_allowed => problems.push(format!("{path}.type: must be set")),
                Some(kind) if !TYPES.contains(&kind) => {
                    problems.push(format!("{path}.type: {kind:?} is none of {}", TYPES.join(", ")));
                }
                _ => {}
            }
            if place == Place::Root && kind.is_some_and(|kind| kind != "object") {
                problems.push(format!("{path}.type: must be object at the root"));
            }
        }
    }
    if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        problems.push(format!("{path}.x-kubernetes-preserve-unknown-fields: must be true or not set"));
    }
    if map.get("uniqueItems") == Some(&Value::Bool(true)) {
        problems.push(format!("{path}.uniqueItems: must not be true (use x-kubernetes-list-type: set)"));
    }
    if map.contains_key("properties") && map.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false)) {
        problems.push(format!("{path}: properties and additionalProperties must not both be set"));
    }
    if kind == Some("array") && !map.contains_key("items") && !matches!(place, Place::Junctor { .. }) {
        problems.push(format!("{path}.items: must be set for an array"));
    }
    list_and_map_types(map, kind, path, problems);
    if place == Place::Root {
        root_metadata(map, path, problems);
    }

    let inner = match place {
        Place::Junctor { .. } => place,
        _ => Place::Field,
    };
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, property) in properties {
            structure(property, &format!("{path}.properties[{name}]"), inner, problems);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get(key).filter(|child| child.is_object()) {
            structure(child, &format!("{path}.{key}"), inner, problems);
        }
    }
    for junctor in JUNCTORS {
        let children: Vec<&Value> = match map.get(junctor) {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(one) => vec![one],
            None => continue,
        };
        let typed = int_or_string || matches!(place, Place::Junctor { typed: true });
        for (index, child) in children.iter().enumerate() {
            let at = if junctor == "not" { format!("{path}.not") } else { format!("{path}.{junctor}[{index}]") };
            structure(child, &at, Place::Junctor { typed }, problems);
        }
    }
    if let Some(default) = map.get("default").filter(|_| !matches!(place, Place::Junctor { .. })) {
        let mut value = default.clone();
        apply_defaults(&mut value, schema);
        let mut wrong = Vec::new();
        validate(&value, schema, "", Prune::Yes, &mut wrong);
        problems.extend(wrong.into_iter().map(|problem| format!("{path}.default: {problem}")));
    }
}

/// x-kubernetes-list-type, -list-map-keys and -map-type, as the API server
/// requires them.
fn list_and_map_types(map: &Map<String, Value>, kind: Option<&str>, path: &str, problems: &mut Vec<String>) {
    let list_type = map.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys = map.get("x-kubernetes-list-map-keys").and_then(Value::as_array);
    if let Some(list_type) = list_type {
        if kind != Some("array") {
            problems.push(format!("{path}.x-kubernetes-list-type: only for an array"));
        }
        if !["atomic", "set", "map"].contains(&list_type) {
            problems.push(format!("{path}.x-kubernetes-list-type: {list_type:?} is none of atomic, set, map"));
        }
    }
    if keys.is_some() && list_type != Some("map") {
        problems.push(format!("{path}.x-kubernetes-list-map-keys: only with x-kubernetes-list-type: map"));
    }
    if list_type == Some("map") {
        let items = map.get("items");
        let item_properties = items.and_then(|items| items.get("properties")).and_then(Value::as_object);
        if items.and_then(|items| items.get("type")).and_then(Value::as_str) != Some("object") {
            problems.push(format!("{path}.items.type: must be object for x-kubernetes-list-type: map"));
        }
        match keys.filter(|keys| !keys.is_empty()) {
            None => {
                problems.push(format!("{path}.x-kubernetes-list-map-keys: must be set for x-kubernetes-list-type: map"))
            }
            Some(keys) => {
                for key in keys.iter().map(|key| key.as_str().unwrap_or_default()) {
                    let property = item_properties.and_then(|properties| properties.get(key));
                    let scalar = property
                        .and_then(|p| p.get("type"))
                        .and_then(Value::as_str)
                        .is_some_and(|t| ["string", "integer", "number", "boolean"].contains(&t));
                    if !scalar {
                        problems.push(format!(
                            "{path}.x-kubernetes-list-map-keys: {key:?} must be a property of the items with a scalar type"
                        ));
                    }
                }
            }
        }
    }
    if let Some(map_type) = map.get("x-kubernetes-map-type").and_then(Value::as_str) {
        if kind != Some("object") {
            problems.push(format!("{path}.x-kubernetes-map-type: only for an object"));
        }
        if !["granular", "atomic"].contains(&map_type) {
            problems.push(format!("{path}.x-kubernetes-map-type: {map_type:?} is neither granular nor atomic"));
        }
    }
}

/// The root's `metadata` may restrict only `name` and `generateName`.
fn root_metadata(map: &Map<String, Value>, path: &str, problems: &mut Vec<String>) {
    let Some(Value::Object(metadata)) = map.get("properties").and_then(|p| p.get("metadata")) else { return };
    let path = format!("{path}.properties[metadata]");
    for key in metadata.keys().filter(|key| !["type", "properties", "description"].contains(&key.as_str())) {
        problems.push(format!("{path}.{key}: only type and properties (name, generateName) may be set on metadata"));
    }
    if let Some(Value::Object(properties)) = metadata.get("properties") {
        for name in properties.keys().filter(|name| !["name", "generateName"].contains(&name.as_str())) {
            problems.push(format!("{path}.properties[{name}]: only name and generateName may be restricted"));
        }
    }
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

    /// A CRD whose `spec` has `schema` as its schema.
    fn crd(spec: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": spec, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
    }

    fn refused(spec: Value) -> String {
        check(&crd(spec)).expect_err("refused")
    }

    const SPEC: &str = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";

    #[test]
    fn a_default_that_breaks_its_own_schema_is_named_by_its_field() {
        let error = refused(json!({"type": "object", "properties": {
            "credentialsSecret": {"type": "string", "minLength": 1, "default": ""}}}));
        assert_eq!(
            error,
            format!(
                "crd: the API server would refuse it: {SPEC}.properties[credentialsSecret].default: \"\" is shorter than minLength 1"
            )
        );
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
            let error = refused(json!({"type": "object", "properties": {"field": schema}}));
            assert!(error.contains(&format!("{SPEC}.properties[field].default: ")), "{error}");
            assert!(error.contains(says), "{says}: {error}");
        }
    }

    #[test]
    fn an_object_default_is_checked_after_its_own_fields_defaults_and_must_not_be_pruned() {
        let schema = |default: Value| {
            json!({"type": "object", "default": default, "required": ["port"], "properties": {
                "port": {"type": "integer", "default": 80, "minimum": 1},
                "host": {"type": "string"}}})
        };
        assert_eq!(check(&crd(schema(json!({})))), Ok(()), "port is filled in by its default");
        assert_eq!(check(&crd(schema(json!({"port": 8080, "host": "h"})))), Ok(()));
        let error = refused(schema(json!({"port": 0})));
        assert!(error.contains(&format!("{SPEC}.default: port: 0 is less than minimum 1")), "{error}");
        let error = refused(schema(json!({"extra": true})));
        assert!(
            error.contains(&format!("{SPEC}.default: extra: an unknown field, which the API server would prune")),
            "{error}"
        );
    }

    #[test]
    fn structural_rules_are_named_by_their_field() {
        let cases = [
            (
                json!({"type": "object", "properties": {"x": {"description": "no type"}}}),
                "properties[x].type: must be set",
            ),
            (json!({"type": "array"}), ".items: must be set for an array"),
            (
                json!({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
                "properties and additionalProperties must not both be set",
            ),
            (
                json!({"type": "object", "anyOf": [{"type": "object", "default": {}}]}),
                "anyOf[0].type: must not be set inside",
            ),
            (json!({"type": "object", "x-kubernetes-preserve-unknown-fields": false}), "must be true or not set"),
            (
                json!({"type": "object", "properties": {"x": {"$ref": "#/definitions/y"}}}),
                "properties[x].$ref: not supported",
            ),
            (
                json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "map"}),
                "x-kubernetes-list-map-keys: must be set",
            ),
            (json!({"type": "text"}), ".type: \"text\" is none of"),
        ];
        for (schema, says) in cases {
            let error = refused(schema);
            assert!(error.contains(SPEC) && error.contains(says), "{says}: {error}");
        }
        let root = json!({"kind": "CustomResourceDefinition", "spec": {"versions": [{"schema": {"openAPIV3Schema":
            {"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}}}]}});
        let error = check(&root).expect_err("metadata restricted");
        assert!(error.contains("properties[metadata].properties[labels]: only name and generateName"), "{error}");
    }

    #[test]
    fn what_the_api_server_accepts_passes() {
        let spec = json!({"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1, "default": 1},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "default": "http"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "default": {"a": "b"}},
            "raw": {"x-kubernetes-preserve-unknown-fields": true},
            "image": {"type": "string", "nullable": true, "default": null},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "allOf": [{"minLength": 1}]}}});
        assert_eq!(check(&crd(spec)), Ok(()));
        let many = crd(json!({"type": "object", "properties": {
            "a": {"type": "string", "minLength": 2, "default": ""}, "b": {"type": "string", "minLength": 2, "default": ""},
            "c": {"type": "string", "minLength": 2, "default": ""}, "d": {"type": "string", "minLength": 2, "default": ""},
            "e": {"type": "string", "minLength": 2, "default": ""}, "f": {"type": "string", "minLength": 2, "default": ""}}}));
        assert!(check(&many).expect_err("six").ends_with("(and 1 more)"));
    }

    /// The load-time check (which `manifest`, `render`, `test` and every
    /// load run) refuses such a CRD, naming the field.
    #[test]
    fn the_load_time_check_runs_it() {
        let parent = super::super::KindInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Site".into(),
            plural: "sites".into(),
            namespaced: true,
        };
        let crd = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sites.example.com}
spec:
  group: example.com
  names: {kind: Site, plural: sites}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                credentialsSecret: {type: string, minLength: 1, default: ""}
"#;
        let error = super::super::check(crd, &parent).expect_err("refused");
        assert!(error.contains(&format!("{SPEC}.properties[credentialsSecret].default: \"\" is shorter")), "{error}");
        assert_eq!(super::super::check(&crd.replace(r#"default: """#, "default: db"), &parent), Ok(()));
    }

    /// Every CRD of this repository (the API server takes them all, in
    /// the tests that install them) passes.
    #[test]
    fn the_repositorys_crds_pass() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let files = [
            "deploy/crd/memcached.c5c3.io_memcacheds.yaml",
            "deploy/logic-modules/logicmodules.wasm-operator.c5c3.io.yaml",
            "examples/static-site/python/crd.yaml",
            "examples/static-site/typescript/crd.yaml",
            "tests/modules/notice-ts/crd.yaml",
            "tests/modules/echo-py/crd.yaml",
            "tests/crds/servicemonitors.monitoring.coreos.com.yaml",
            "third_party/metacontroller/manifests/production/metacontroller-crds-v1.yaml",
        ];
        for file in files {
            let text = std::fs::read_to_string(root.join(file)).expect(file);
            for document in serde_norway::Deserializer::from_str(&text) {
                let crd: Value = serde::Deserialize::deserialize(document).expect(file);
                if crd["kind"] == "CustomResourceDefinition" {
                    assert_eq!(check(&crd), Ok(()), "{file} {}", crd["metadata"]["name"]);
                }
            }
        }
    }
}
