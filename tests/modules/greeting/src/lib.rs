//! The `Greeting` module: `example.c5c3.io/v1` `Greeting` owns a ConfigMap
//! named after it holding `spec.message`, and one more ConfigMap per entry
//! of `spec.audiences` (`<name>-<audience>`): any number of objects of one
//! kind per parent. It reads the Secret named by `spec.signatureSecret`
//! (the ConfigMaps say whether it exists). An empty message means no
//! ConfigMap at all.
//!
//! The host's tests also need modules that misbehave, and this is a real
//! module, so it can: the message `trap` makes it trap, `loop` makes it loop
//! forever, `allocate` makes it allocate without bound. Nothing here knows
//! of Memcached, and the host knows nothing of Greetings.

#[cfg(target_arch = "wasm32")]
mod component;

use serde_json::{Map, Value, json};

pub const GROUP: &str = "example.c5c3.io";
pub const VERSION: &str = "v1";
pub const CRD_YAML: &str = include_str!("../crd.yaml");

/// The module's version. The swap tests build variants of this module by
/// cargo feature: `v2` stamps `revision: "2"` on every ConfigMap;
/// `v1-rebuilt` behaves exactly as the default build; `fail-on-later`
/// behaves as `v2` but traps for messages starting with `later`;
/// `service-account` behaves as `v2` and also owns a ServiceAccount named
/// after each Greeting (another owned kind, so other watches);
/// `trap-always` traps on every parent, `loop-always` loops and
/// `allocate-always` allocates without bound on every parent.
pub const MODULE_VERSION: &str = if cfg!(feature = "service-account") {
    "0.4.0"
} else if cfg!(feature = "fail-on-later") {
    "0.3.0"
} else if cfg!(feature = "v2") {
    "0.2.0"
} else if cfg!(feature = "v1-rebuilt") {
    "0.1.0+rebuilt"
} else {
    env!("CARGO_PKG_VERSION")
};

/// What `v2` adds to every ConfigMap.
const REVISION: Option<&str> = if cfg!(feature = "v2") { Some("2") } else { None };

/// Whether this build owns a ServiceAccount per Greeting.
pub const OWNS_SERVICE_ACCOUNTS: bool = cfg!(feature = "service-account");

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

/// `spec.audiences`, a list of names (each a ConfigMap name suffix).
fn audiences(parent: &Value) -> Result<Vec<String>, Error> {
    let invalid = |i: usize| Error::Invalid(format!("spec.audiences[{i}]"), "must be a lowercase name".into());
    match parent.pointer("/spec/audiences") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item.as_str() {
                Some(name) if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-') => {
                    Ok(name.to_owned())
                }
                _ => Err(invalid(i)),
            })
            .collect(),
        Some(_) => Err(Error::Invalid("spec.audiences".into(), "must be a list".into())),
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

/// What the tests ask the module to do wrong, by message (or by build).
fn misbehave(message: &str) {
    if cfg!(feature = "trap-always") {
        panic!("this build traps on every parent");
    }
    if cfg!(feature = "fail-on-later") && message.starts_with("later") {
        panic!("this build traps on messages starting with 'later'");
    }
    let message = if cfg!(feature = "loop-always") {
        "loop"
    } else if cfg!(feature = "allocate-always") {
        "allocate"
    } else {
        message
    };
    match message {
        "trap" => panic!("asked to trap"),
        "loop" => {
            // Only the host's deadline ends this.
            let mut turns: u64 = 0;
            loop {
                turns = std::hint::black_box(turns.wrapping_add(1));
            }
        }
        "allocate" => {
            // Only the host's memory limit ends this (the allocation fails
            // and the module aborts).
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
            }
        }
        _ => {}
    }
}

/// Every ConfigMap the Greeting should own: one for the message, one per
/// audience. `owned` holds the ConfigMaps it controls now.
pub fn desired(parent: &str, owned: &[String], related: &[String]) -> Result<Vec<String>, Error> {
    let parent = parse("parent", parent)?;
    let message = message(&parent)?;
    let audiences = audiences(&parent)?;
    let secret = signature_secret(&parent)?;
    if message.is_empty() {
        return Ok(Vec::new());
    }
    misbehave(&message);
    let name =
        str_at(&parent, "/metadata/name").ok_or_else(|| Error::Invalid("metadata.name".into(), "required".into()))?;
    let signature = secret.map(|secret| {
        let found = related
            .iter()
            .any(|text| parse("related", text).is_ok_and(|s| str_at(&s, "/metadata/name") == Some(secret.as_str())));
        if found { format!("signed by {secret}") } else { "unsigned".to_owned() }
    });
    let owned: Vec<Value> = owned.iter().map(|text| parse("owned object", text)).collect::<Result<_, _>>()?;
    let mut objects = Vec::new();
    let mut add = |configmap: &str, text: String| -> Result<(), Error> {
        let current = owned.iter().find(|o| {
            str_at(o, "/kind").is_none_or(|kind| kind == "ConfigMap") && str_at(o, "/metadata/name") == Some(configmap)
        });
        let mut data = Map::new();
        data.insert("message".into(), json!(text));
        if let Some(signature) = &signature {
            data.insert("signature".into(), json!(signature));
        }
        if let Some(revision) = REVISION {
            data.insert("revision".into(), json!(revision));
        }
        objects.push(configmap_for(&parent, name, configmap, current, data)?.to_string());
        Ok(())
    };
    add(name, message.clone())?;
    for audience in &audiences {
        add(&format!("{name}-{audience}"), format!("{message}, {audience}"))?;
    }
    if OWNS_SERVICE_ACCOUNTS {
        let current = owned
            .iter()
            .find(|o| str_at(o, "/kind") == Some("ServiceAccount") && str_at(o, "/metadata/name") == Some(name));
        objects.push(service_account_for(&parent, name, current)?.to_string());
    }
    Ok(objects)
}

/// The Greeting's ServiceAccount (`service-account` builds), built on the
/// current one in place as the ConfigMaps are.
fn service_account_for(parent: &Value, greeting: &str, current: Option<&Value>) -> Result<Value, Error> {
    let mut object = owned_object(parent, greeting, "ServiceAccount", greeting, current);
    object["metadata"]["ownerReferences"] = json!([controller_of(parent, greeting)]);
    Ok(object)
}

/// An object of `kind` named `name` the Greeting owns: the current one (what
/// the server filled in is kept) or a new one, in the Greeting's namespace,
/// with the module's labels.
fn owned_object(parent: &Value, greeting: &str, kind: &str, name: &str, current: Option<&Value>) -> Value {
    let mut object = match current {
        Some(current) => current.clone(),
        None => json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}),
    };
    if let Some(namespace) = str_at(parent, "/metadata/namespace") {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object["metadata"]["labels"] =
        json!({"app.kubernetes.io/managed-by": "greeting-operator", "example.c5c3.io/greeting": greeting});
    object
}

/// The controller owner reference to the Greeting.
fn controller_of(parent: &Value, greeting: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Greeting",
        "name": greeting,
        "uid": str_at(parent, "/metadata/uid").unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The ConfigMap `configmap`, built on the current one in place: what we own
/// is set, what the server filled in is kept.
fn configmap_for(
    parent: &Value,
    greeting: &str,
    configmap: &str,
    current: Option<&Value>,
    data: Map<String, Value>,
) -> Result<Value, Error> {
    let mut object = owned_object(parent, greeting, "ConfigMap", configmap, current);
    let owner = controller_of(parent, greeting);
    let references = object["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
    if references.iter().any(|r| r["controller"] == json!(true) && r["uid"] != owner["uid"]) {
        return Err(Error::Invalid(
            "metadata.ownerReferences".into(),
            format!("ConfigMap {configmap} has another controller"),
        ));
    }
    let others = references.into_iter().filter(|r| r["controller"] != json!(true));
    object["metadata"]["ownerReferences"] = Value::Array(others.chain([owner]).collect());
    object["data"] = Value::Object(data);
    Ok(object)
}

pub fn status(parent: &str, owned: &[String]) -> Result<String, Error> {
    let parent = parse("parent", parent)?;
    let mut published: Vec<String> = owned
        .iter()
        .filter_map(|text| parse("owned", text).ok())
        .filter(|o| str_at(o, "/kind") == Some("ConfigMap"))
        .filter_map(|o| str_at(&o, "/metadata/name").map(str::to_owned))
        .collect();
    published.sort();
    let mut status = json!({"observedGeneration": parent.pointer("/metadata/generation").cloned().unwrap_or(json!(0))});
    let problem = message(&parent).and_then(|_| audiences(&parent)).err();
    status["phase"] = match (problem, published.as_slice()) {
        (Some(Error::Invalid(path, problem)), _) => json!(format!("Invalid: {path} {problem}")),
        (_, []) => json!("Nothing to publish"),
        (_, names) => json!(format!("Published in ConfigMap {}", names.join(", "))),
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

    fn objects(texts: Vec<String>) -> Vec<Value> {
        texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect()
    }

    #[test]
    fn the_configmaps_follow_the_message_and_keep_server_fields() {
        let cr = greeting(json!({"message": "hi", "signatureSecret": "sig", "audiences": ["world", "moon"]}));
        let created = objects(desired(&cr, &[], &[]).unwrap());
        let names: Vec<&str> = created.iter().map(|o| str_at(o, "/metadata/name").unwrap()).collect();
        assert_eq!(names, ["hello", "hello-world", "hello-moon"]);
        assert_eq!(created[0]["data"], json!({"message": "hi", "signature": "unsigned"}));
        assert_eq!(created[2]["data"]["message"], "hi, moon");
        assert!(created.iter().all(|o| o["metadata"]["ownerReferences"][0]["uid"] == "u-1"));

        let mut stored = created[1].clone();
        stored["metadata"]["resourceVersion"] = json!("7");
        let secret = json!({"kind": "Secret", "metadata": {"name": "sig"}}).to_string();
        let again = objects(desired(&cr, &[stored.to_string()], &[secret]).unwrap());
        assert_eq!(again[1]["metadata"]["resourceVersion"], "7");
        assert_eq!(again[0]["metadata"]["resourceVersion"], Value::Null);
        assert_eq!(again[1]["data"]["signature"], "signed by sig");
        assert_eq!(references(&cr).unwrap(), vec!["sig".to_owned()]);

        assert!(desired(&greeting(json!({})), &[], &[]).unwrap().is_empty());
        assert!(
            matches!(desired(&greeting(json!({"message": 3})), &[], &[]), Err(Error::Invalid(p, _)) if p == "spec.message")
        );
        assert!(
            matches!(desired(&greeting(json!({"message": "x", "audiences": ["Bad"]})), &[], &[]), Err(Error::Invalid(p, _)) if p == "spec.audiences[0]")
        );
        let status: Value =
            serde_json::from_str(&status(&cr, &[created[1].to_string(), created[0].to_string()]).unwrap()).unwrap();
        assert_eq!(status, json!({"observedGeneration": 2, "phase": "Published in ConfigMap hello, hello-world"}));
    }

    #[test]
    fn a_configmap_controlled_by_another_parent_is_refused() {
        let cr = greeting(json!({"message": "hi"}));
        let foreign = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hello", "ownerReferences": [{"uid": "other", "controller": true}]}});
        assert!(
            matches!(desired(&cr, &[foreign.to_string()], &[]), Err(Error::Invalid(p, _)) if p == "metadata.ownerReferences")
        );
    }
}
