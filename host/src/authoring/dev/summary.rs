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
            // A pod template's labels and annotations lead: a rollout often
            // changes only them (a restartedAt, a config checksum), and deep
            // in the spec they would fall past the cut.
            if let Some(Value::Object(metadata)) = object.pointer("/spec/template/metadata") {
                for field in ["labels", "annotations"] {
                    if let Some(value) = metadata.get(field).filter(|v| !v.is_null()) {
                        parts.push(format!("template {field} {}", flow(value)));
                    }
                }
            }
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

/// `text`, or its first characters, `…` and a fingerprint of the whole:
/// `dev` prints a line when it changes, so a change past the cut must
/// change the line too.
fn shorten(text: &str) -> String {
    if text.chars().count() <= LONGEST {
        return text.to_owned();
    }
    let fingerprint = format!("… #{:08x}", fingerprint(text));
    let mut short: String = text.chars().take(LONGEST - fingerprint.chars().count()).collect();
    short.push_str(&fingerprint);
    short
}

/// FNV-1a, 32 bits: stable across runs and builds, unlike std's hasher.
fn fingerprint(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
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

    /// A Deployment long enough to be cut short, its pod template's metadata
    /// as given.
    fn deployment(template_metadata: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": template_metadata, "spec": {"containers": [{
                    "name": "web", "image": "registry.k8s.io/pause:3.10",
                    "args": ["--listen=0.0.0.0:8080", "--threads=4", "--max-connections=1024"],
                    "env": [{"name": "MODE", "value": "production"}, {"name": "REGION", "value": "eu-west-1"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}]}}},
            "status": {"replicas": 2, "readyReplicas": 2}})
    }

    #[test]
    fn a_change_to_a_pod_templates_labels_or_annotations_changes_the_line() {
        let before = deployment(json!({"labels": {"app": "web"}}));
        let restarted = deployment(json!({"labels": {"app": "web"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}));
        let relabelled = deployment(json!({"labels": {"app": "web", "tier": "front"}}));
        let lines = [line(&before), line(&restarted), line(&relabelled)];
        for one in &lines {
            assert!(one.chars().count() <= LONGEST, "{one}");
        }
        assert!(lines[0].starts_with("template labels {app: web} spec {"), "{}", lines[0]);
        assert!(lines[1].contains("template annotations {kubectl.kubernetes.io/restartedAt: "), "{}", lines[1]);
        assert!(lines[2].starts_with("template labels {app: web, tier: front}"), "{}", lines[2]);
        assert_ne!(lines[0], lines[1]);
        assert_ne!(lines[0], lines[2]);
        assert_eq!(line(&before), lines[0], "the same object, the same line");
    }

    #[test]
    fn a_change_past_the_cut_changes_the_fingerprint() {
        let cut = |tail: &str| line(&json!({"kind": "ConfigMap", "data": {"a": "x".repeat(300), "z": tail}}));
        let (one, other) = (cut("one"), cut("two"));
        assert_eq!(one.chars().count(), LONGEST);
        assert!(one.contains("… #"), "{one}");
        assert_ne!(one, other);
    }
}
