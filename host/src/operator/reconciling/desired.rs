//! What a module answers from `desired`, checked before anything is written:
//! each object must be a Kubernetes object of one of the module's owned
//! kinds, in the parent's namespace, controlled by the parent, and named
//! once. A module answering anything else fails the reconcile and nothing
//! is written for that parent.

use std::collections::HashSet;

use serde_json::Value;

use crate::operator::kinds::Kind;

/// One object the module wants, checked.
pub struct DesiredObject {
    /// Index of its kind among the owned kinds.
    pub kind_index: usize,
    pub name: String,
    pub value: Value,
}

/// The parent as the checks need it.
pub struct Owner<'a> {
    pub namespace: &'a str,
    pub uid: &'a str,
}

pub fn check(owned: &[Kind], owner: &Owner<'_>, texts: Vec<String>) -> Result<Vec<DesiredObject>, String> {
    let mut seen = HashSet::new();
    let mut objects = Vec::with_capacity(texts.len());
    for (position, text) in texts.into_iter().enumerate() {
        let object = check_one(owned, owner, &text).map_err(|problem| format!("object {position}: {problem}"))?;
        if !seen.insert((object.kind_index, object.name.clone())) {
            let kind = owned[object.kind_index].name();
            return Err(format!("object {position}: {kind} {} is answered twice", object.name));
        }
        objects.push(object);
    }
    Ok(objects)
}

fn check_one(owned: &[Kind], owner: &Owner<'_>, text: &str) -> Result<DesiredObject, String> {
    let mut value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some(kind_index) = owned.iter().position(|k| k.resource.api_version == api_version && k.resource.kind == kind)
    else {
        let owned: Vec<String> = owned.iter().map(|k| format!("{}/{}", k.resource.api_version, k.name())).collect();
        return Err(format!("{api_version}/{kind} is not an owned kind of the manifest ({})", owned.join(", ")));
    };
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    if name.is_empty() {
        return Err(format!("{kind} has no metadata.name"));
    }
    match value.pointer("/metadata/namespace") {
        None | Some(Value::Null) => {
            if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("namespace".into(), owner.namespace.into());
            }
        }
        Some(Value::String(namespace)) if namespace == owner.namespace => {}
        Some(other) => {
            return Err(format!("{kind} {name} is in namespace {other}, not the parent's ({})", owner.namespace));
        }
    }
    let controlled = value
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["controller"] == Value::Bool(true) && r["uid"] == owner.uid));
    if !controlled {
        return Err(format!("{kind} {name} has no controller owner reference to the parent (uid {})", owner.uid));
    }
    Ok(DesiredObject { kind_index, name, value })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::modules::KindInfo;

    fn kinds() -> Vec<Kind> {
        let info = |group: &str, kind: &str, plural: &str| KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
        };
        vec![
            Kind::from_info(&info("", "ConfigMap", "configmaps")).expect("namespaced"),
            Kind::from_info(&info("apps", "Deployment", "deployments")).expect("namespaced"),
        ]
    }

    const OWNER: Owner<'static> = Owner { namespace: "team", uid: "u-1" };

    fn object(api_version: &str, kind: &str, name: &str, namespace: Option<&str>, controller_uid: &str) -> String {
        let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name,
            "ownerReferences": [{"apiVersion": "x/v1", "kind": "X", "name": "p", "uid": controller_uid, "controller": true}]}});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        object.to_string()
    }

    #[test]
    fn good_objects_pass_and_get_the_parents_namespace() {
        let answer = vec![
            object("apps/v1", "Deployment", "web", Some("team"), "u-1"),
            object("v1", "ConfigMap", "web", None, "u-1"),
            object("v1", "ConfigMap", "web-extra", None, "u-1"),
        ];
        let checked = check(&kinds(), &OWNER, answer).expect("valid");
        let identities: Vec<(usize, &str)> = checked.iter().map(|o| (o.kind_index, o.name.as_str())).collect();
        assert_eq!(identities, [(1, "web"), (0, "web"), (0, "web-extra")]);
        assert_eq!(checked[1].value["metadata"]["namespace"], "team");
    }

    #[test]
    fn each_bad_answer_is_refused_with_its_reason() {
        let refused = |text: String| check(&kinds(), &OWNER, vec![text]).err().expect("refused");
        assert!(refused("{".into()).starts_with("object 0: not JSON"));
        assert!(refused(object("v1", "Secret", "s", None, "u-1")).contains("v1/Secret is not an owned kind"));
        assert!(refused(object("apps/v2", "Deployment", "d", None, "u-1")).contains("not an owned kind"));
        assert!(refused(object("v1", "ConfigMap", "", None, "u-1")).contains("no metadata.name"));
        assert!(refused(object("v1", "ConfigMap", "c", Some("other"), "u-1")).contains("not the parent's"));
        assert!(refused(object("v1", "ConfigMap", "c", None, "u-2")).contains("no controller owner reference"));
        let twice = vec![object("v1", "ConfigMap", "c", None, "u-1"), object("v1", "ConfigMap", "c", None, "u-1")];
        assert_eq!(check(&kinds(), &OWNER, twice).err().as_deref(), Some("object 1: ConfigMap c is answered twice"));
    }
}
