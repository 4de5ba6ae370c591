//! What a module answers from `desired`, checked before anything is written:
//! each object must be a Kubernetes object of one of the module's owned
//! kinds, in the parent's namespace, controlled by the parent, and named
//! once. A module answering anything else fails the reconcile and nothing
//! is written for that parent.

use std::collections::HashSet;

use serde_json::Value;

use crate::planning::kinds::Kind;
use crate::runtime::answer::{Refusal, RefusedAnswer, check_bounds, parse};

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

/// The answer checked whole: within the limits on objects and bytes
/// (`runtime/answer.rs`: already refused there as it crossed the boundary,
/// checked again for answers that come another way), then each object.
pub fn check(owned: &[Kind], owner: &Owner<'_>, texts: Vec<String>) -> Result<Vec<DesiredObject>, RefusedAnswer> {
    check_bounds(texts.len(), texts.iter().map(String::len))?;
    let mut seen = HashSet::new();
    let mut objects = Vec::with_capacity(texts.len());
    for (position, text) in texts.into_iter().enumerate() {
        let object = check_one(owned, owner, position, &text)?;
        if !seen.insert((object.kind_index, object.name.clone())) {
            let kind = owned[object.kind_index].name();
            let problem = format!("object {position}: {kind} {} is answered twice (metadata.name)", object.name);
            return Err(RefusedAnswer::new(Refusal::Duplicate, problem));
        }
        objects.push(object);
    }
    Ok(objects)
}

/// The parent's labels or annotations (`what`) an answer sets: each of a
/// key the manifest names in `keys` (exactly, or under a prefix ending in
/// `/`), each key set once.
pub fn check_parent_keys(what: &str, keys: &[String], pairs: &[(String, String)]) -> Result<(), RefusedAnswer> {
    let mut seen = HashSet::new();
    for (key, _) in pairs {
        let named = keys.iter().any(|k| k == key || (k.ends_with('/') && key.starts_with(k.as_str())));
        if !named {
            let declared = if keys.is_empty() { "none".to_owned() } else { keys.join(", ") };
            let problem = format!(
                "parent-{what}: {key} is not a key the module's reach names (parent-{singular}-keys: {declared})",
                singular = what.trim_end_matches('s')
            );
            return Err(RefusedAnswer::new(Refusal::ParentKeyNotDeclared, problem));
        }
        if !seen.insert(key.as_str()) {
            let problem = format!("parent-{what}: {key} is set twice");
            return Err(RefusedAnswer::new(Refusal::Duplicate, problem));
        }
    }
    Ok(())
}

fn check_one(owned: &[Kind], owner: &Owner<'_>, position: usize, text: &str) -> Result<DesiredObject, RefusedAnswer> {
    let refused = |reason, problem: String| RefusedAnswer::new(reason, format!("object {position}: {problem}"));
    let mut value = parse(&format!("object {position}"), text)?;
    if !value.is_object() {
        return Err(refused(Refusal::NotObject, "not a JSON object".to_owned()));
    }
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some(kind_index) = owned.iter().position(|k| k.resource.api_version == api_version && k.resource.kind == kind)
    else {
        let owned: Vec<String> = owned.iter().map(|k| format!("{}/{}", k.resource.api_version, k.name())).collect();
        let problem = format!(
            "{api_version}/{kind} is not an owned kind of the manifest ({}) (apiVersion, kind)",
            owned.join(", ")
        );
        return Err(refused(Refusal::NotOwnedKind, problem));
    };
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    if name.is_empty() {
        return Err(refused(Refusal::NoName, format!("{kind} has no metadata.name")));
    }
    // No namespace: the parent's (owned kinds are namespaced, and every
    // write goes to the parent's namespace). Any other: refused.
    match value.pointer("/metadata/namespace") {
        None | Some(Value::Null) => {
            if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("namespace".into(), owner.namespace.into());
            }
        }
        Some(Value::String(namespace)) if namespace == owner.namespace => {}
        Some(other) => {
            let problem = format!(
                "{kind} {name} is in namespace {other}, not the parent's ({}) (metadata.namespace)",
                owner.namespace
            );
            return Err(refused(Refusal::OtherNamespace, problem));
        }
    }
    let references = value.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    let controllers =
        references.into_iter().flatten().enumerate().filter(|(_, r)| r["controller"] == Value::Bool(true));
    let mut controlled = false;
    for (index, reference) in controllers {
        if reference["uid"] != owner.uid {
            let uid = &reference["uid"];
            let problem = format!(
                "{kind} {name} names another controller (uid {uid}), not the parent (uid {}) (metadata.ownerReferences[{index}])",
                owner.uid
            );
            return Err(refused(Refusal::OtherOwner, problem));
        }
        controlled = true;
    }
    if !controlled {
        let problem = format!(
            "{kind} {name} has no controller owner reference to the parent (uid {}) (metadata.ownerReferences)",
            owner.uid
        );
        return Err(refused(Refusal::OtherOwner, problem));
    }
    Ok(DesiredObject { kind_index, name, value })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_parents_keys_must_be_named_by_the_reach() {
        let pair = |k: &str| (k.to_owned(), "v".to_owned());
        let keys = vec!["team".to_owned(), "example.com/".to_owned()];
        assert_eq!(check_parent_keys("labels", &keys, &[pair("team"), pair("example.com/tier")]), Ok(()));
        let other = check_parent_keys("labels", &keys, &[pair("tier")]).expect_err("not named");
        assert_eq!(other.reason, Refusal::ParentKeyNotDeclared);
        assert_eq!(
            other.problem,
            "parent-labels: tier is not a key the module's reach names (parent-label-keys: team, example.com/)"
        );
        let none = check_parent_keys("annotations", &[], &[pair("a")]).expect_err("none named");
        assert!(none.problem.ends_with("(parent-annotation-keys: none)"), "{}", none.problem);
        let twice = check_parent_keys("labels", &keys, &[pair("team"), pair("team")]).expect_err("twice");
        assert_eq!(twice.reason, Refusal::Duplicate);
    }
    use crate::runtime::bindings::KindInfo;

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

    fn refused(texts: Vec<String>) -> (Refusal, String) {
        let refused = check(&kinds(), &OWNER, texts).err().expect("refused");
        (refused.reason, refused.problem)
    }

    #[test]
    fn each_bad_answer_is_refused_with_its_reason_index_and_field() {
        let one = |text: String| refused(vec![text]);
        assert_eq!(one("{".into()).0, Refusal::NotJson);
        assert!(one("{".into()).1.starts_with("object 0: not JSON"));
        assert_eq!(one("[]".into()), (Refusal::NotObject, "object 0: not a JSON object".into()));
        let (reason, problem) = one(object("v1", "Secret", "s", None, "u-1"));
        assert_eq!(reason, Refusal::NotOwnedKind);
        assert!(problem.contains("v1/Secret is not an owned kind"), "{problem}");
        assert_eq!(one(object("apps/v2", "Deployment", "d", None, "u-1")).0, Refusal::NotOwnedKind);
        // A cluster-scoped kind is never owned (the manifest cannot name one).
        let cluster_role = object("rbac.authorization.k8s.io/v1", "ClusterRole", "admin", None, "u-1");
        assert_eq!(one(cluster_role).0, Refusal::NotOwnedKind);
        assert_eq!(one(object("v1", "ConfigMap", "", None, "u-1")).0, Refusal::NoName);
        let (reason, problem) = one(object("v1", "ConfigMap", "c", Some("other"), "u-1"));
        assert_eq!(reason, Refusal::OtherNamespace);
        assert!(
            problem.starts_with("object 0: ConfigMap c is in namespace \"other\"")
                && problem.ends_with("(metadata.namespace)"),
            "{problem}"
        );
        // An empty namespace is not the parent's either (only a missing one is filled in).
        assert_eq!(one(object("v1", "ConfigMap", "c", Some(""), "u-1")).0, Refusal::OtherNamespace);
        let (reason, problem) = one(object("v1", "ConfigMap", "c", None, "u-2"));
        assert_eq!(reason, Refusal::OtherOwner);
        assert!(problem.contains("uid \"u-2\"") && problem.ends_with("(metadata.ownerReferences[0])"), "{problem}");
        let mut no_controller: Value =
            serde_json::from_str(&object("v1", "ConfigMap", "c", None, "u-1")).expect("JSON");
        no_controller["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert_eq!(one(no_controller.to_string()).0, Refusal::OtherOwner);
        // This parent's controller reference, then another parent's.
        let mut two: Value = serde_json::from_str(&object("v1", "ConfigMap", "c", None, "u-1")).expect("JSON");
        let other = json!({"apiVersion": "x/v1", "kind": "X", "name": "q", "uid": "u-9", "controller": true});
        two["metadata"]["ownerReferences"].as_array_mut().expect("a list").push(other);
        let (reason, problem) = one(two.to_string());
        assert_eq!(reason, Refusal::OtherOwner);
        assert!(problem.ends_with("(metadata.ownerReferences[1])"), "{problem}");
        let twice = vec![object("v1", "ConfigMap", "c", None, "u-1"), object("v1", "ConfigMap", "c", None, "u-1")];
        assert_eq!(
            refused(twice),
            (Refusal::Duplicate, "object 1: ConfigMap c is answered twice (metadata.name)".into())
        );
    }

    #[test]
    fn an_object_without_a_namespace_is_put_in_the_parents_never_cluster_wide() {
        let checked = check(&kinds(), &OWNER, vec![object("v1", "ConfigMap", "c", None, "u-1")]).expect("valid");
        assert_eq!(checked[0].value["metadata"]["namespace"], "team");
        let null =
            object("v1", "ConfigMap", "c", None, "u-1").replace("\"name\":\"c\"", "\"name\":\"c\",\"namespace\":null");
        let checked = check(&kinds(), &OWNER, vec![null]).expect("valid");
        assert_eq!(checked[0].value["metadata"]["namespace"], "team");
    }

    #[test]
    fn hostile_sizes_and_depths_are_refused_before_parsing() {
        let good = object("v1", "ConfigMap", "c", None, "u-1");
        let many = vec![String::new(); crate::runtime::answer::MAX_OBJECTS + 1];
        let (reason, problem) = refused(many);
        assert_eq!(reason, Refusal::TooManyObjects, "{problem}");
        let padding = "a".repeat(crate::runtime::answer::MAX_ANSWER_BYTES);
        let large = format!("{},\"x\":\"{padding}\"}}", &good[..good.len() - 1]);
        let (reason, problem) = refused(vec![good.clone(), large]);
        assert_eq!(reason, Refusal::TooLarge);
        assert!(problem.starts_with("object 1:"), "{problem}");
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let (reason, problem) = refused(vec![good, deep]);
        assert_eq!(reason, Refusal::TooDeep);
        assert!(problem.starts_with("object 1: JSON nested deeper than"), "{problem}");
    }
}
