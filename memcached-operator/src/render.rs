//! `render`: the objects the operator would own for each CR in a YAML
//! stream, computed by the logic module.

use serde_json::{Value, json};
use wasm_operator::runtime::call_error::{CallError, FieldError};

use crate::typed::Instance;

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("document {document}: {message}")]
    Yaml { document: usize, message: String },
    #[error("{}", describe(.what, .problems))]
    Rejected { what: String, problems: Vec<FieldError> },
    #[error("{what}: {source}")]
    Module { what: String, source: CallError },
}

fn describe(what: &str, problems: &[FieldError]) -> String {
    let lines: Vec<String> = problems.iter().map(|p| format!("  {p}")).collect();
    format!("{what} is invalid:\n{}", lines.join("\n"))
}

/// Every non-empty YAML document in `text`, as JSON values.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, RenderError> {
    let mut documents = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|err| RenderError::Yaml { document: index + 1, message: err.to_string() })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// Renders every CR; all problems of all CRs are reported, not just the first.
pub fn render_all(instance: &mut Instance, crs: &[Value]) -> Result<Vec<Value>, Vec<RenderError>> {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (index, cr) in crs.iter().enumerate() {
        let what = describe_cr(index, cr);
        match instance.render(&cr.to_string()) {
            Ok(rendered) => {
                for text in rendered {
                    match serde_json::from_str(&text) {
                        Ok(object) => objects.push(object),
                        Err(err) => errors.push(RenderError::Yaml { document: index + 1, message: err.to_string() }),
                    }
                }
            }
            Err(CallError::Logic(logic)) if !logic.field_errors().is_empty() => {
                errors.push(RenderError::Rejected { what, problems: logic.field_errors().to_vec() });
            }
            Err(source) => errors.push(RenderError::Module { what, source }),
        }
    }
    if errors.is_empty() { Ok(objects) } else { Err(errors) }
}

fn describe_cr(index: usize, cr: &Value) -> String {
    let kind = cr.get("kind").and_then(Value::as_str).unwrap_or("object");
    match cr.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("document {} ({kind} {name})", index + 1),
        None => format!("document {} ({kind})", index + 1),
    }
}

/// A `v1` List of the objects, as `kubectl get -o json` prints one.
pub fn as_json_list(objects: Vec<Value>) -> String {
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": objects });
    let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
    text.push('\n');
    text
}

/// Multi-document YAML, produced by the module so every host prints the same bytes.
pub fn as_yaml(instance: &mut Instance, objects: &[Value]) -> Result<String, CallError> {
    instance.to_yaml(&Value::Array(objects.to_vec()).to_string())
}
