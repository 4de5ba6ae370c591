//! Controller owner references: every object a parent owns carries one, so
//! the host finds it and garbage collection removes it with the parent. An
//! object with no controller is adopted; one with another controller is
//! refused, never taken over.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// The controller owner reference to `parent` (a JSON object as the API
/// server serves it).
pub fn owner_reference(parent: &Value) -> OwnerReference {
    let text = |pointer: &str| parent.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    OwnerReference {
        api_version: text("/apiVersion"),
        kind: text("/kind"),
        name: text("/metadata/name"),
        uid: text("/metadata/uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Makes `parent` the controller of `desired`, which will replace `current`
/// (the object as the server has it, if it exists). Other, non-controller
/// owner references of either are kept. An object controlled by another
/// parent is refused with an `invalid` error at `metadata.ownerReferences`.
pub fn adopt(parent: &Value, current: Option<&Value>, desired: &mut Value) -> Result<(), Error> {
    let owner = owner_reference(parent);
    let references = |object: &Value| -> Vec<OwnerReference> {
        object
            .pointer("/metadata/ownerReferences")
            .and_then(|list| Vec::<OwnerReference>::deserialize(list).ok())
            .unwrap_or_default()
    };
    // Ours stays where the server has it (a reordered list is a write on
    // every reconcile), once, as the controller.
    let mut kept: Vec<OwnerReference> = Vec::new();
    let mut placed = false;
    for reference in current.map(references).unwrap_or_default().into_iter().chain(references(desired)) {
        if reference.uid == owner.uid {
            if !placed {
                kept.push(owner.clone());
                placed = true;
            }
            continue;
        }
        if reference.controller == Some(true) {
            let name = desired.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            return Err(Error::invalid(
                "metadata.ownerReferences",
                format!(
                    "{name} is owned by another controller ({} {}); it is not taken over",
                    reference.kind, reference.name
                ),
            ));
        }
        if !kept.iter().any(|k| k.uid == reference.uid) {
            kept.push(reference);
        }
    }
    if !placed {
        kept.push(owner);
    }
    let list = serde_json::to_value(kept).map_err(|e| Error::unsupported(format!("ownerReferences: {e}")))?;
    match desired {
        Value::Object(object) => {
            let metadata = object.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(metadata) = metadata {
                metadata.insert("ownerReferences".into(), list);
                return Ok(());
            }
            Err(Error::malformed("metadata", "must be an object"))
        }
        _ => Err(Error::malformed("", "a desired object must be a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parent() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Site", "metadata": {"name": "web", "uid": "u-1"}})
    }

    #[test]
    fn an_orphan_is_adopted_keeping_other_owners() {
        let current = json!({"metadata": {"name": "web", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o-1"}]}});
        let mut desired = json!({"metadata": {"name": "web"}});
        adopt(&parent(), Some(&current), &mut desired).expect("adopted");
        let list = &desired["metadata"]["ownerReferences"];
        assert_eq!(list[0]["uid"], "o-1");
        assert_eq!(
            list[1],
            json!({"apiVersion": "example.com/v1", "kind": "Site", "name": "web", "uid": "u-1",
                                   "controller": true, "blockOwnerDeletion": true})
        );
    }

    #[test]
    fn another_controllers_object_is_refused() {
        let current = json!({"metadata": {"name": "web", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Site", "name": "rival", "uid": "u-2", "controller": true}]}});
        let mut desired = json!({"metadata": {"name": "web"}});
        let error = adopt(&parent(), Some(&current), &mut desired).expect_err("refused");
        assert_eq!(error.field_errors()[0].path, "metadata.ownerReferences");
        assert!(error.to_string().contains("Site rival"), "{error}");
    }

    #[test]
    fn our_own_reference_is_kept_once() {
        let mut desired = json!({"metadata": {"name": "web"}});
        adopt(&parent(), None, &mut desired).expect("set");
        let current = desired.clone();
        adopt(&parent(), Some(&current), &mut desired).expect("again");
        assert_eq!(desired, current);
    }

    #[test]
    fn ours_keeps_its_place_among_other_owners() {
        // A reordered list would be a write on every reconcile.
        let ours = serde_json::to_value(owner_reference(&parent())).expect("JSON");
        let other = json!({"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o-1"});
        let current = json!({"metadata": {"name": "web", "ownerReferences": [ours, other]}});
        let mut desired = json!({"metadata": {"name": "web"}});
        adopt(&parent(), Some(&current), &mut desired).expect("kept");
        assert_eq!(desired["metadata"]["ownerReferences"], current["metadata"]["ownerReferences"]);
    }

    #[test]
    fn our_uid_without_controller_becomes_the_controller_once() {
        let current = json!({"metadata": {"name": "web", "ownerReferences": [
            {"apiVersion": "example.com/v1", "kind": "Site", "name": "web", "uid": "u-1"}]}});
        let mut desired = json!({"metadata": {"name": "web"}});
        adopt(&parent(), Some(&current), &mut desired).expect("adopted");
        let list = desired["metadata"]["ownerReferences"].as_array().expect("a list");
        assert_eq!(list.len(), 1, "{list:?}");
        assert_eq!(list[0]["controller"], true);
    }
}
