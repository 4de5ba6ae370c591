//! Objects in and out of files: a YAML (or JSON) stream of documents or a
//! `List`, read into JSON values; objects printed back as YAML documents or
//! a `v1` List.

use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("document {document}: {message}")]
    Yaml { document: usize, message: String },
    #[error("document {document}: {what} is not a Kubernetes object (a mapping with apiVersion, kind and metadata)")]
    NotAnObject { document: usize, what: String },
}

/// Every non-empty document of `text`, the items of a `List` in its place.
pub fn objects(text: &str) -> Result<Vec<Value>, DocumentError> {
    let mut objects = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let number = index + 1;
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|error| DocumentError::Yaml { document: number, message: error.to_string() })?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if is_list(map) => {
                for item in map.get("items").and_then(Value::as_array).into_iter().flatten() {
                    objects.push(checked(number, item.clone())?);
                }
            }
            other => objects.push(checked(number, other)?),
        }
    }
    Ok(objects)
}

/// `v1` `List`, or a typed list (`ConfigMapList`) as `kubectl get -o yaml` prints one.
fn is_list(map: &serde_json::Map<String, Value>) -> bool {
    map.get("kind").and_then(Value::as_str).is_some_and(|kind| kind.ends_with("List")) && map.contains_key("items")
}

fn checked(document: usize, value: Value) -> Result<Value, DocumentError> {
    let is_object = value.get("apiVersion").is_some_and(Value::is_string)
        && value.get("kind").is_some_and(Value::is_string)
        && value.get("metadata").is_some_and(Value::is_object);
    if is_object {
        Ok(value)
    } else {
        let what = match &value {
            Value::Object(_) => "a mapping without apiVersion, kind or metadata",
            Value::Array(_) => "a sequence",
            _ => "a scalar",
        };
        Err(DocumentError::NotAnObject { document, what: what.to_owned() })
    }
}

/// Objects as YAML documents separated by `---`.
pub fn to_yaml(objects: &[Value]) -> String {
    let documents: Vec<String> = objects.iter().map(yaml).collect();
    documents.join("---\n")
}

/// One value as YAML. A JSON value always has a YAML form.
pub fn yaml(value: &Value) -> String {
    serde_norway::to_string(value).unwrap_or_else(|error| format!("# not printable as YAML: {error}\n"))
}

/// Objects as a `v1` List, as `kubectl get -o json` prints one.
pub fn to_json_list(objects: &[Value]) -> String {
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": objects });
    let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
    text.push('\n');
    text
}

pub use crate::planning::given_objects::describe;

/// The value without null object members, which the API server drops (and
/// which the host's comparisons ignore, `planning/object_diff.rs`).
pub fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_and_lists_give_their_objects() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let objects = objects(text).expect("parses");
        let names: Vec<String> = objects.iter().map(describe).collect();
        assert_eq!(names, ["ConfigMap a", "Secret b"]);
    }

    #[test]
    fn what_is_not_an_object_is_named_by_document() {
        let error = objects("apiVersion: v1\nkind: X\nmetadata: {}\n---\n- 1\n").expect_err("a sequence");
        assert_eq!(
            error.to_string(),
            "document 2: a sequence is not a Kubernetes object (a mapping with apiVersion, kind and metadata)"
        );
        let error = objects("a: [").expect_err("bad YAML");
        assert!(error.to_string().starts_with("document 1: "), "{error}");
    }

    #[test]
    fn null_members_go_and_the_rest_stays() {
        let value = json!({"a": null, "b": {"c": null, "d": [null, 1]}});
        assert_eq!(without_nulls(&value), json!({"b": {"d": [null, 1]}}));
    }
}
