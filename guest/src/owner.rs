//! The controller owner reference (`SetControllerReference`), set on every
//! owned object so garbage collection removes it with the CR.

use serde_json::{Map, Value, json};

use crate::api::Memcached;
use crate::error::Error;

/// Adds `memcached` as the controller owner of `object` (JSON), replacing an
/// earlier reference to the same CR and keeping other owners'. An object
/// controlled by someone else is an error: the operator must not take it.
/// A CR without a uid (one rendered off-cluster) gives a reference without one.
pub fn set_controller_reference(object: &mut Map<String, Value>, memcached: &Memcached) -> Result<(), Error> {
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    let uid = memcached.metadata.uid.as_deref().filter(|u| !u.is_empty());
    let mut reference = json!({
        "apiVersion": "memcached.c5c3.io/v1alpha1",
        "kind": "Memcached",
        "name": name,
        "controller": true,
        "blockOwnerDeletion": true,
    });
    if let (Some(uid), Value::Object(map)) = (uid, &mut reference) {
        map.insert("uid".into(), uid.into());
    }

    let metadata = match object.entry("metadata").or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(metadata) => metadata,
        _ => return Err(Error::malformed("metadata", "must be an object")),
    };
    let mut references = match metadata.remove("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(references)) => references,
        Some(_) => return Err(Error::malformed("metadata.ownerReferences", "must be a list")),
    };
    let same_owner = |r: &Value| {
        r.get("kind").and_then(Value::as_str) == Some("Memcached")
            && r.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("memcached.c5c3.io/"))
            && r.get("name").and_then(Value::as_str) == Some(name)
    };
    if let Some(other) = references
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true) && !same_owner(r))
    {
        let kind = other.get("kind").and_then(Value::as_str).unwrap_or("?");
        let other_name = other.get("name").and_then(Value::as_str).unwrap_or("?");
        return Err(Error::Invalid(vec![crate::error::FieldError::new(
            "metadata.ownerReferences",
            format!("already controlled by {kind} {other_name}; the operator will not take it over"),
        )]));
    }
    match references.iter_mut().find(|r| same_owner(r)) {
        Some(existing) => *existing = reference,
        None => references.push(reference),
    }
    metadata.insert("ownerReferences".into(), Value::Array(references));
    Ok(())
}
