//! The controller owner reference (`SetControllerReference`), set on every
//! owned object so garbage collection removes it with the CR.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Map, Value};

use crate::api::Memcached;
use crate::error::{Error, FieldError};
use crate::kinds::MEMCACHED;

/// The reference to `memcached`, as its controller. A CR rendered
/// off-cluster has no uid; its reference then has an empty one, which
/// `render` leaves out of what it prints.
pub fn controller_reference(memcached: &Memcached) -> OwnerReference {
    OwnerReference {
        api_version: MEMCACHED.api_version(),
        kind: MEMCACHED.kind.into(),
        name: memcached.metadata.name.clone().unwrap_or_default(),
        uid: memcached.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Adds `memcached` as the controller owner, replacing an earlier reference
/// to the same CR and keeping other owners'. An object controlled by someone
/// else is an error: the operator must not take it over.
pub fn upsert_controller_reference(references: &mut Vec<OwnerReference>, memcached: &Memcached) -> Result<(), Error> {
    let reference = controller_reference(memcached);
    let same_owner = |r: &OwnerReference| {
        r.kind == reference.kind && r.api_version.starts_with("memcached.c5c3.io/") && r.name == reference.name
    };
    if let Some(other) = references.iter().find(|r| r.controller == Some(true) && !same_owner(r)) {
        return Err(Error::Invalid(vec![FieldError::new(
            "metadata.ownerReferences",
            format!("already controlled by {} {}; the operator will not take it over", other.kind, other.name),
        )]));
    }
    match references.iter_mut().find(|r| same_owner(r)) {
        Some(existing) => *existing = reference,
        None => references.push(reference),
    }
    Ok(())
}

/// `upsert_controller_reference` on an object held as JSON.
pub fn set_controller_reference(object: &mut Map<String, Value>, memcached: &Memcached) -> Result<(), Error> {
    let metadata = match object.entry("metadata").or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(metadata) => metadata,
        _ => return Err(Error::malformed("metadata", "must be an object")),
    };
    let mut references: Vec<OwnerReference> = match metadata.remove("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => serde_json::from_value(value)
            .map_err(|err| Error::malformed("metadata.ownerReferences", err.to_string()))?,
    };
    upsert_controller_reference(&mut references, memcached)?;
    let mut references = serde_json::to_value(references)
        .map_err(|err| Error::Unsupported(format!("serializing ownerReferences: {err}")))?;
    drop_empty_uids(&mut references);
    metadata.insert("ownerReferences".into(), references);
    Ok(())
}

/// Removes `uid: ""` from owner references (a CR rendered off-cluster has none).
pub fn drop_empty_uids(references: &mut Value) {
    for reference in references.as_array_mut().into_iter().flatten() {
        if let Some(map) = reference.as_object_mut()
            && map.get("uid").and_then(Value::as_str) == Some("")
        {
            map.remove("uid");
        }
    }
}
