//! An object as `dev` prints it: in one line (a ConfigMap's data, a
//! Secret's keys, else its spec and status, in YAML's flow style, cut
//! short), or whole as YAML without the server's bookkeeping. A Secret's
//! values are never printed.

use serde_json::{Map, Value};

use crate::authoring::documents;

/// The longest one-line summary, in characters.
const LONGEST: usize = 240;

/// `kind namespace/name` (or `kind name`).
pub fn name_of(object: &Value) -> String {
    documents::describe(object)
}

/// The one-line summary of an owned object.
pub fn line(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default();
    let mut parts = Vec::new();
    match kind {
        "ConfigMap" => {
            parts.push(format!("data {}", flow(object.get("data").unwrap_or(&Value::Object(Map::new())))));
            if let Some(Value::Object(binary)) = object.get("binaryData") {
                parts.push(format!("binaryData keys {}", keys(binary)));
            }
        }
        "Secret" => {
            let data = object.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
            parts.push(format!("data keys {}", keys(&data)));
        }
        _ => {
            for field in ["spec", "status"] {
                if let Some(value) = object.get(field).filter(|v| !v.is_null()) {
                    parts.push(format!("{field} {}", flow(value)));
                }
            }
        }
    }
    shorten(&parts.join(" "))
}

/// The object as YAML, without managedFields and resourceVersion, a
/// Secret's values hidden.
pub fn yaml(object: &Value) -> String {
    documents::yaml(&cleaned(object))
}

pub fn cleaned(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.remove("managedFields");
        metadata.remove("resourceVersion");
    }
    if object["kind"] == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(Value::Object(data)) = object.get_mut(field) {
                for value in data.values_mut() {
                    *value = Value::String("(hidden)".to_owned());
                }
            }
        }
    }
    object
}

fn keys(map: &Map<String, Value>) -> String {
    format!("[{}]", map.keys().map(|key| scalar(key)).collect::<Vec<_>>().join(", "))
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= LONGEST {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(LONGEST - 1).collect();
    short.push('…');
    short
}

/// `value` in YAML's flow style: `{message: hello, revision: "2"}`.
pub fn flow(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(items) => format!("[{}]", items.iter().map(flow).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let members: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", scalar(k), flow(v))).collect();
            format!("{{{}}}", members.join(", "))
        }
    }
}

/// A string plain when YAML would read it back as that string, else quoted.
fn scalar(text: &str) -> String {
    if plain(text) { text.to_owned() } else { serde_json::to_string(text).unwrap_or_default() }
}

fn plain(text: &str) -> bool {
    const SPECIAL: &[char] =
        &[':', ',', '{', '}', '[', ']', '#', '"', '\'', '\n', '\r', '\t', '&', '*', '!', '|', '>', '%', '@', '`'];
    let reads_as_other = text.parse::<f64>().is_ok()
        || ["true", "false", "null", "~", "yes", "no", "on", "off", "y", "n"]
            .iter()
            .any(|word| text.eq_ignore_ascii_case(word));
    !text.is_empty()
        && text.trim() == text
        && !text.contains(SPECIAL)
        && !text.starts_with(['-', '?'])
        && !reads_as_other
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_configmap_in_a_line_quotes_what_yaml_would_misread() {
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello"},
            "data": {"message": "hi, world", "plain": "Published in ConfigMap hello", "revision": "2"}});
        assert_eq!(
            line(&configmap),
            r#"data {message: "hi, world", plain: Published in ConfigMap hello, revision: "2"}"#
        );
        let secret =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "c2VjcmV0"}});
        assert_eq!(line(&secret), "data keys [password]");
        assert!(!yaml(&secret).contains("c2VjcmV0"));
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 11211}], "selector": {"app": "x"}}, "status": {}});
        assert_eq!(line(&service), "spec {ports: [{port: 11211}], selector: {app: x}} status {}");
        let long = json!({"kind": "ConfigMap", "data": {"text": "x".repeat(400)}});
        assert_eq!(line(&long).chars().count(), LONGEST);
    }
}
