//! Secret values out of a record, at recording: every value of a core v1
//! Secret's `data` and `stringData` becomes a fixed placeholder (keys
//! kept; valid base64 in `data`), and so does the whole
//! `kubectl.kubernetes.io/last-applied-configuration` annotation, which
//! repeats them. Only texts that can be a Secret are parsed; the others are
//! kept as they are.

use serde_json::{Map, Value};

/// What a redacted `data` value becomes: base64 of `redacted`.
pub const REDACTED_DATA: &str = "cmVkYWN0ZWQ=";
/// What a redacted `stringData` value (and the last-applied annotation)
/// becomes.
pub const REDACTED_TEXT: &str = "redacted";

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `text` (an object as JSON) with a Secret's values replaced; `Some` of
/// the Secret's `namespace/name` when it was one (and something was
/// replaced or not: a Secret is named either way, so the record says so).
pub fn redact(text: &mut String) -> Option<String> {
    // The host's JSON is compact (serde_json); a text without this cannot
    // be a Secret. One with it (a ConfigMap quoting one) is parsed to check.
    if !text.contains("\"Secret\"") {
        return None;
    }
    let mut object: Value = serde_json::from_str(text).ok()?;
    if object.get("apiVersion").and_then(Value::as_str) != Some("v1")
        || object.get("kind").and_then(Value::as_str) != Some("Secret")
    {
        return None;
    }
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let who = if namespace.is_empty() { name.to_owned() } else { format!("{namespace}/{name}") };
    if let Some(Value::Object(data)) = object.get_mut("data") {
        replace_values(data, REDACTED_DATA);
    }
    if let Some(Value::Object(data)) = object.get_mut("stringData") {
        replace_values(data, REDACTED_TEXT);
    }
    if let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations")
        && let Some(last_applied) = annotations.get_mut(LAST_APPLIED)
    {
        *last_applied = Value::String(REDACTED_TEXT.to_owned());
    }
    // The original text goes: nothing of a value stays in the record.
    *text = object.to_string();
    Some(who)
}

fn replace_values(data: &mut Map<String, Value>, placeholder: &str) {
    for value in data.values_mut() {
        if !value.is_null() {
            *value = Value::String(placeholder.to_owned());
        }
    }
}

/// Redacts each of `texts`, adding the Secrets' names to `redacted`.
pub fn redact_all(texts: &mut [String], redacted: &mut Vec<String>) {
    for text in texts {
        if let Some(secret) = redact(text)
            && !redacted.contains(&secret)
        {
            redacted.push(secret);
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_secrets_values_are_replaced_and_its_keys_kept() {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "sasl", "namespace": "team", "annotations": {
                LAST_APPLIED: "{\"data\":{\"password\":\"aHVudGVyMg==\"}}", "keep": "me"}},
            "data": {"password": "aHVudGVyMg==", "user": "YWRtaW4="},
            "stringData": {"token": "hunter2"},
            "type": "Opaque"
        });
        let mut text = secret.to_string();
        assert_eq!(redact(&mut text), Some("team/sasl".to_owned()));
        assert!(!text.contains("hunter2") && !text.contains("aHVudGVyMg") && !text.contains("YWRtaW4"), "{text}");
        let redacted: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(redacted["data"], json!({"password": REDACTED_DATA, "user": REDACTED_DATA}));
        assert_eq!(redacted["stringData"], json!({"token": REDACTED_TEXT}));
        assert_eq!(redacted["metadata"]["annotations"]["keep"], "me");
        assert_eq!(redacted["type"], "Opaque");
        let decoded = base64::engine::general_purpose::STANDARD.decode(REDACTED_DATA).expect("valid base64");
        assert_eq!(decoded, REDACTED_TEXT.as_bytes());
    }

    #[test]
    fn other_objects_are_left_alone_even_when_they_quote_a_secret() {
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"copy": "{\"kind\":\"Secret\",\"data\":{\"a\":\"b\"}}"}});
        let mut text = config_map.to_string();
        let before = text.clone();
        assert_eq!(redact(&mut text), None);
        assert_eq!(text, before);
        // Another group's kind called Secret is not a core Secret.
        let mut other = json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"a": "b"}}).to_string();
        assert_eq!(redact(&mut other), None);
        let mut texts = vec![
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "dg=="}})
                .to_string(),
            before,
        ];
        let mut names = Vec::new();
        redact_all(&mut texts, &mut names);
        assert_eq!(names, ["n/a"]);
        assert!(!texts[0].contains("dg=="));
    }
}
