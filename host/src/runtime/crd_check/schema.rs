//! A CRD's schemas checked as the API server checks them when the CRD is
//! created: the structural rules (every field typed, arrays with items, no
//! types or defaults inside allOf/anyOf/oneOf/not, no unsupported keywords,
//! list and map types that make sense), and every `default` valid against
//! its own schema with no field the schema would prune (as `validation.rs`
//! checks a value). A CRD the API server would reject then fails
//! `manifest`, `render`, `test` and the load naming the field, not only
//! `dev` or `kubectl apply`.
//!
//! Not checked: `pattern` and `format` (the API server's regular
//! expressions and formats), CEL rules (`x-kubernetes-validations`), and
//! the completeness of junctors (a property named only inside an `allOf`).

use serde_json::{Map, Value};

use super::validation::{check_default, flag};

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
        let wrong = check_default(default, schema);
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
