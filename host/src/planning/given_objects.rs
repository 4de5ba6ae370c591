//! The given objects as the operator's caches would pass them to a module:
//! the owned ones the parent controls, of an owned kind in its namespace,
//! and the related ones its `references` answer names, each as a module
//! reads it (without managedFields); and what the others were passed over
//! for.

use serde_json::Value;

use crate::planning::kinds::Kind;
use crate::runtime::bindings::ObjectRef;

pub(super) fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The object as the operator's caches hand it to a module: without
/// managedFields (`operator/watching/cached_object.rs`).
pub fn module_view(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    object
}

/// The namespace an object is in: `default` when it names none, as kubectl
/// applies it.
pub fn namespace_of(object: &Value) -> &str {
    object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default")
}

fn kind_of<'k>(kinds: &'k [Kind], object: &Value) -> Option<(usize, &'k Kind)> {
    let api_version = str_at(object, "/apiVersion");
    let kind = str_at(object, "/kind");
    kinds.iter().enumerate().find(|(_, k)| k.is_group_kind_of(api_version, kind))
}

/// The parent, as owner references name it.
pub struct ParentId<'a> {
    pub kind: &'a Kind,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// The given objects the parent controls, of owned kinds, in its namespace,
/// in manifest order (then file order), as the operator's caches hold them
/// (a module reads them without managedFields: [`module_view`]).
pub fn select_owned<'v>(
    owned: &[Kind],
    parent: &ParentId<'_>,
    given: &'v [Value],
    ignored: &mut Vec<String>,
) -> Vec<(usize, &'v Value)> {
    let mut selected: Vec<(usize, &Value)> = Vec::new();
    for object in given {
        let Some((index, _)) = kind_of(owned, object) else {
            ignored.push(format!("owned {}: not an owned kind of the module", describe(object)));
            continue;
        };
        if namespace_of(object) != parent.namespace {
            continue;
        }
        let controller = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["controller"] == Value::Bool(true)));
        let uid = parent.uid;
        match controller.map(|r| (r, r["uid"].as_str().unwrap_or_default())) {
            Some((_, controller)) if controller == uid => selected.push((index, object)),
            // The parent by name, with another uid: a parent written by
            // hand (its uid filled in) and children captured from a cluster.
            Some((reference, other)) if names_parent(reference, parent) => ignored.push(format!(
                "owned {}: its controller is {} {} with uid {other}, not this parent's uid {uid} (give the parent its uid)",
                describe(object),
                parent.kind.name(),
                parent.name
            )),
            // Another parent's child (a file may hold several parents').
            Some(_) => {}
            None => ignored.push(format!(
                "owned {}: no controller owner reference (the operator passes only the objects a parent controls; uid {uid})",
                describe(object)
            )),
        }
    }
    selected.sort_by_key(|(index, _)| *index);
    selected
}

fn names_parent(reference: &Value, parent: &ParentId<'_>) -> bool {
    let api_version = reference["apiVersion"].as_str().unwrap_or_default();
    let kind = reference["kind"].as_str().unwrap_or_default();
    parent.kind.is_group_kind_of(api_version, kind) && reference["name"] == parent.name
}

/// The given objects `references` names (a reference without a namespace
/// is in the parent's), of the module's read kinds, in reference order.
pub fn select_related(
    reads: &[Kind],
    references: &[ObjectRef],
    namespace: &str,
    given: &[Value],
    ignored: &mut Vec<String>,
) -> Vec<Value> {
    references.iter().filter_map(|reference| find_related(reads, reference, namespace, given, ignored)).collect()
}

/// The given object `reference` names, as the module reads it; a reference
/// to a kind the manifest does not read is noted in `ignored`.
pub(super) fn find_related(
    reads: &[Kind],
    reference: &ObjectRef,
    namespace: &str,
    given: &[Value],
    ignored: &mut Vec<String>,
) -> Option<Value> {
    // The operator has caches of the read kinds only.
    if !reads.iter().any(|k| k.resource.group == reference.group && k.resource.kind == reference.kind) {
        ignored.push(format!("reference to {} {}: not a read kind of the manifest", reference.kind, reference.name));
        return None;
    }
    let wanted_namespace = reference.namespace.as_deref().unwrap_or(namespace);
    let found = given.iter().find(|object| {
        let group = str_at(object, "/apiVersion").rsplit_once('/').map_or("", |(group, _)| group);
        group == reference.group
            && str_at(object, "/kind") == reference.kind
            && namespace_of(object) == wanted_namespace
            && str_at(object, "/metadata/name") == reference.name
    });
    found.map(module_view)
}

/// `kind namespace/name` (or `kind name`), for messages.
pub fn describe(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("object");
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("(no name)");
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::bindings::KindInfo;

    fn kind(group: &str, kind: &str) -> Kind {
        let info = KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        };
        Kind::from_info(&info).expect("namespaced")
    }

    fn child(kind: &str, name: &str, namespace: Option<&str>, controller: Option<&str>) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "managedFields": [{}]}});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(uid) = controller {
            object["metadata"]["ownerReferences"] = json!([{"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "name": if uid == "u-2" { "other" } else { "hello" }, "uid": uid, "controller": true}]);
        }
        object
    }

    #[test]
    fn owned_objects_are_those_the_parent_controls_in_manifest_order() {
        let owned = [kind("", "Service"), kind("", "ConfigMap")];
        let given = [
            child("ConfigMap", "a", None, Some("u-1")),
            child("Service", "b", Some("default"), Some("u-1")),
            child("ConfigMap", "other-parent", None, Some("u-2")),
            child("ConfigMap", "elsewhere", Some("team"), Some("u-1")),
            child("ConfigMap", "orphan", None, None),
            child("Secret", "not-owned", None, Some("u-1")),
            child("ConfigMap", "captured", None, Some("uid-in-the-cluster")),
        ];
        let mut ignored = Vec::new();
        let parent_kind = kind("example.c5c3.io", "Greeting");
        let parent = ParentId { kind: &parent_kind, namespace: "default", name: "hello", uid: "u-1" };
        let selected = select_owned(&owned, &parent, &given, &mut ignored);
        let names: Vec<(usize, &str)> = selected.iter().map(|(i, o)| (*i, str_at(o, "/metadata/name"))).collect();
        assert_eq!(names, [(0, "b"), (1, "a")]);
        assert_eq!(ignored.len(), 3, "{ignored:?}");
        assert!(ignored[0].contains("ConfigMap orphan: no controller owner reference"), "{ignored:?}");
        assert!(ignored[1].contains("Secret not-owned: not an owned kind"), "{ignored:?}");
        assert!(
            ignored[2]
                .contains("its controller is Greeting hello with uid uid-in-the-cluster, not this parent's uid u-1"),
            "{ignored:?}"
        );
    }

    #[test]
    fn related_objects_are_those_referenced_in_the_parents_namespace_by_default() {
        let reads = [kind("", "Secret")];
        let reference = |name: &str, namespace: Option<&str>| ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        };
        let given = [child("Secret", "tls", Some("team"), None), child("Secret", "sasl", None, None)];
        let mut ignored = Vec::new();
        let references = [reference("sasl", None), reference("tls", Some("team")), reference("missing", None)];
        let selected = select_related(&reads, &references, "default", &given, &mut ignored);
        let names: Vec<&str> = selected.iter().map(|o| str_at(o, "/metadata/name")).collect();
        assert_eq!(names, ["sasl", "tls"]);
        assert!(ignored.is_empty());
        let in_team = select_related(&reads, &[reference("sasl", None)], "team", &given, &mut ignored);
        assert!(in_team.is_empty(), "the parent's namespace, not any");
    }
}
