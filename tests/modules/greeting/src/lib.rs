//! The `Greeting` module: `example.c5c3.io/v1` `Greeting` owns one ConfigMap
//! named after it holding `spec.message`, and reads the Secret named by
//! `spec.signatureSecret` (the ConfigMap says whether it exists). An empty
//! message means the ConfigMap must not exist; the message `trap` makes the
//! module trap (the host's tests need a failing module). Nothing here knows
//! of Memcached, and the host knows nothing of Greetings.

#[cfg(target_arch = "wasm32")]
mod component;

use serde_json::{json, Map, Value};

pub const GROUP: &str = "example.c5c3.io";
pub const VERSION: &str = "v1";

#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    /// A field and what is wrong with it.
    Invalid(String, String),
    Malformed(String),
    Unsupported(String),
}

fn parse(what: &str, text: &str) -> Result<Value, Error> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Malformed(format!("{what}: {e}")))?;
    if value.is_object() { Ok(value) } else { Err(Error::Malformed(format!("{what}: not a JSON object"))) }
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// `spec.message`, which must be a string.
fn message(parent: &Value) -> Result<String, Error> {
    match parent.pointer("/spec/message") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(message)) => Ok(message.clone()),
        Some(_) => Err(Error::Invalid("spec.message".into(), "must be a string".into())),
    }
}

fn signature_secret(parent: &Value) -> Result<Option<String>, Error> {
    match parent.pointer("/spec/signatureSecret") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) if !name.is_empty() => Ok(Some(name.clone())),
        Some(_) => Err(Error::Invalid("spec.signatureSecret".into(), "must be a Secret name".into())),
    }
}

pub fn references(parent: &str) -> Result<Vec<String>, Error> {
    let parent = parse("parent", parent)?;
    Ok(signature_secret(&parent)?.into_iter().collect())
}

pub fn desired(kind: &str, parent: &str, current: Option<&str>, related: &[String]) -> Result<Option<String>, Error> {
    if kind != "ConfigMap" {
        return Err(Error::Unsupported(format!("no owned kind {kind}")));
    }
    let parent = parse("parent", parent)?;
    let message = message(&parent)?;
    let secret = signature_secret(&parent)?;
    if message.is_empty() {
        return Ok(None);
    }
    // For the host's tests: a module that traps. The host must survive it.
    if message == "trap" {
        panic!("asked to trap");
    }
    let name = str_at(&parent, "/metadata/name").ok_or_else(|| Error::Invalid("metadata.name".into(), "required".into()))?;
    let mut object = match current {
        Some(text) => parse("current ConfigMap", text)?,
        None => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
    };
    if let Some(namespace) = str_at(&parent, "/metadata/namespace") {
        object["metadata"]["namespace"] = json!(namespace);
    }
    // Mutate in place: set what we own, keep what the server filled in.
    object["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "greeting-operator", "example.c5c3.io/greeting": name});
    let owner = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Greeting",
        "name": name,
        "uid": str_at(&parent, "/metadata/uid").unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let others = object["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| refs.iter().filter(|r| r["controller"] != json!(true)).cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    if object["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["controller"] == json!(true) && r["uid"] != owner["uid"]))
    {
        return Err(Error::Invalid("metadata.ownerReferences".into(), "the ConfigMap has another controller".into()));
    }
    object["metadata"]["ownerReferences"] = Value::Array([others, vec![owner]].concat());
    let mut data = Map::new();
    data.insert("message".into(), json!(message));
    if let Some(secret) = secret {
        let found = related.iter().any(|text| {
            parse("related", text).is_ok_and(|s| str_at(&s, "/metadata/name") == Some(secret.as_str()))
        });
        data.insert("signature".into(), json!(if found { format!("signed by {secret}") } else { "unsigned".to_owned() }));
    }
    object["data"] = Value::Object(data);
    Ok(Some(object.to_string()))
}

pub fn status(parent: &str, owned: &[String]) -> Result<String, Error> {
    let parent = parse("parent", parent)?;
    let configmap = owned
        .iter()
        .filter_map(|text| parse("owned", text).ok())
        .find(|o| str_at(o, "/kind") == Some("ConfigMap"))
        .and_then(|o| str_at(&o, "/metadata/name").map(str::to_owned));
    let mut status = json!({"observedGeneration": parent.pointer("/metadata/generation").cloned().unwrap_or(json!(0))});
    status["phase"] = match (message(&parent), configmap) {
        (Err(Error::Invalid(path, problem)), _) => json!(format!("Invalid: {path} {problem}")),
        (_, Some(name)) => json!(format!("Published in ConfigMap {name}")),
        (_, None) => json!("Nothing to publish"),
    };
    Ok(status.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greeting(spec: Value) -> String {
        json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
               "metadata": {"name": "hello", "namespace": "ns", "uid": "u-1", "generation": 2}, "spec": spec})
        .to_string()
    }

    #[test]
    fn the_configmap_follows_the_message_and_keeps_server_fields() {
        let cr = greeting(json!({"message": "hi", "signatureSecret": "sig"}));
        let created: Value = serde_json::from_str(&desired("ConfigMap", &cr, None, &[]).unwrap().unwrap()).unwrap();
        assert_eq!(created["data"], json!({"message": "hi", "signature": "unsigned"}));
        assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "u-1");

        let mut stored = created.clone();
        stored["metadata"]["resourceVersion"] = json!("7");
        let secret = json!({"kind": "Secret", "metadata": {"name": "sig"}}).to_string();
        let again: Value =
            serde_json::from_str(&desired("ConfigMap", &cr, Some(&stored.to_string()), &[secret]).unwrap().unwrap()).unwrap();
        assert_eq!(again["metadata"]["resourceVersion"], "7");
        assert_eq!(again["data"]["signature"], "signed by sig");
        assert_eq!(references(&cr).unwrap(), vec!["sig".to_owned()]);

        assert_eq!(desired("ConfigMap", &greeting(json!({})), None, &[]).unwrap(), None);
        assert!(matches!(desired("ConfigMap", &greeting(json!({"message": 3})), None, &[]), Err(Error::Invalid(p, _)) if p == "spec.message"));
        assert!(matches!(desired("Secret", &cr, None, &[]), Err(Error::Unsupported(_))));
        let status: Value = serde_json::from_str(&status(&cr, &[created.to_string()]).unwrap()).unwrap();
        assert_eq!(status, json!({"observedGeneration": 2, "phase": "Published in ConfigMap hello"}));
    }
}
