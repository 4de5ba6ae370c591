//! Lost updates: at the end, every CR's children and status must be what
//! `wasm-operator render` makes of its final spec (the Memcached module the
//! operator serves, its children and the Secrets as they are): each object
//! rendered exists and holds every field rendered (the API server adds
//! defaults), the CR controls no other object of an owned kind, and its
//! status is the rendered one (condition times apart).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};

use futures::future::try_join_all;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::SoakError;
use crate::world::{Key, controller_uid, key_of};

/// A CR whose final state is not what its spec renders to.
#[derive(Debug, Clone)]
pub struct Lost {
    pub cr: Key,
    pub why: String,
}

/// Lists everything, renders every CR, compares.
pub async fn check(
    client: &Client,
    host: &Path,
    module: &Path,
    parents: &ApiResource,
    owned: &[ApiResource],
    namespaces: &[String],
    dir: &Path,
) -> Result<(usize, Vec<Lost>), SoakError> {
    // List items come without apiVersion and kind: render needs them.
    let list = |resource: &ApiResource| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        let types = kube::core::TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() };
        async move {
            api.list(&ListParams::default()).await.map(|l| {
                l.items.into_iter().map(|o| DynamicObject { types: Some(types.clone()), ..o }).collect::<Vec<_>>()
            })
        }
    };
    let crs = list(parents).await?;
    let mut children = Vec::new();
    for items in try_join_all(owned.iter().map(list)).await? {
        children.extend(items);
    }
    let mut secrets = Vec::new();
    for namespace in namespaces {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        secrets.extend(api.list(&ListParams::default()).await?.items);
    }
    let as_values = |items: Vec<DynamicObject>| -> Vec<Value> {
        items.into_iter().filter_map(|o| serde_json::to_value(o).ok()).collect()
    };
    let crs = as_values(crs);
    let children = as_values(children);
    let secrets: Vec<Value> = secrets
        .into_iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .map(|mut s| {
            s["apiVersion"] = json!("v1");
            s["kind"] = json!("Secret");
            s
        })
        .collect();
    let write = |name: &str, items: &[Value]| -> Result<std::path::PathBuf, SoakError> {
        let path = dir.join(name);
        let text = json!({ "apiVersion": "v1", "kind": "List", "items": items }).to_string();
        std::fs::write(&path, text).map_err(|e| SoakError::io(format!("writing {}", path.display()), e))?;
        Ok(path)
    };
    let crs_file = write("final-crs.json", &crs)?;
    let owned_file = write("final-children.json", &children)?;
    let secrets_file = write("final-secrets.json", &secrets)?;
    let output = Command::new(host)
        .arg("render")
        .arg("--module")
        .arg(module)
        .arg("-f")
        .arg(&crs_file)
        .arg("--owned")
        .arg(&owned_file)
        .arg("--related")
        .arg(&secrets_file)
        .args(["-o", "json"])
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| SoakError::io(format!("running {} render", host.display()), e))?;
    let rendered: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        SoakError::Render(format!("no JSON ({e}); stderr: {}", String::from_utf8_lossy(&output.stderr)))
    })?;
    let items = rendered.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok((crs.len(), compare(&crs, &children, &items)))
}

/// `rendered`: per CR, its objects, then the CR with its status.
fn compare(crs: &[Value], children: &[Value], rendered: &[Value]) -> Vec<Lost> {
    let actual_crs: HashMap<Key, &Value> = crs.iter().map(|cr| (key_of(cr), cr)).collect();
    let by_identity: HashMap<(String, String, String), &Value> =
        children.iter().map(|c| ((kind(c), key_of(c).0, key_of(c).1), c)).collect();
    let mut lost = Vec::new();
    let mut seen = BTreeSet::new();
    let mut objects: Vec<&Value> = Vec::new();
    for item in rendered {
        if kind(item) != "Memcached" {
            objects.push(item);
            continue;
        }
        let key = key_of(item);
        seen.insert(key.clone());
        let mut why = Vec::new();
        let Some(cr) = actual_crs.get(&key) else {
            why.push("rendered but not listed".to_owned());
            lost.push(Lost { cr: key, why: why.join("; ") });
            objects.clear();
            continue;
        };
        let uid = cr.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        let mut expected = BTreeSet::new();
        for object in objects.drain(..) {
            let identity = (kind(object), key_of(object).0, key_of(object).1);
            expected.insert(identity.clone());
            match by_identity.get(&identity) {
                None => why.push(format!("{} {} missing", identity.0, identity.2)),
                Some(actual) => {
                    if let Some(path) = mismatch(object, actual, "") {
                        why.push(format!("{} {}: {path}", identity.0, identity.2));
                    }
                }
            }
        }
        for child in children.iter().filter(|c| controller_uid(c).as_deref() == Some(uid)) {
            let identity = (kind(child), key_of(child).0, key_of(child).1);
            if !expected.contains(&identity) {
                why.push(format!("{} {} not rendered but still there", identity.0, identity.2));
            }
        }
        let rendered_status = without_times(item.get("status").cloned().unwrap_or(Value::Null));
        let actual_status = without_times(cr.get("status").cloned().unwrap_or(Value::Null));
        if let Some(path) = mismatch(&rendered_status, &actual_status, "status") {
            why.push(path);
        } else if let Some(path) = mismatch(&actual_status, &rendered_status, "status (extra)") {
            why.push(path);
        }
        if !why.is_empty() {
            lost.push(Lost { cr: key, why: why.join("; ") });
        }
    }
    for key in actual_crs.keys().filter(|k| !seen.contains(*k)) {
        lost.push(Lost { cr: key.clone(), why: "not rendered (render failed on it)".into() });
    }
    lost.sort_by(|a, b| a.cr.cmp(&b.cr));
    lost
}

fn kind(object: &Value) -> String {
    object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Status conditions without lastTransitionTime (the time render was told).
fn without_times(mut status: Value) -> Value {
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions {
            if let Some(condition) = condition.as_object_mut() {
                condition.remove("lastTransitionTime");
            }
        }
    }
    status
}

/// Where `actual` lacks a field of `expected` or holds another value: the
/// first such path. Nulls in `expected` stand for absent fields; lists must
/// have the same length, element by element.
fn mismatch(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Null, _) => None,
        (Value::Object(expected), Value::Object(actual)) => expected.iter().find_map(|(key, value)| {
            let path = format!("{path}.{key}");
            match actual.get(key) {
                None if value.is_null() => None,
                None => Some(format!("{path} missing")),
                Some(actual) => mismatch(value, actual, &path),
            }
        }),
        (Value::Array(expected), Value::Array(actual)) if expected.len() == actual.len() => {
            expected.iter().zip(actual).enumerate().find_map(|(i, (e, a))| mismatch(e, a, &format!("{path}[{i}]")))
        }
        (Value::Array(expected), Value::Array(actual)) => {
            Some(format!("{path}: {} items, {} rendered", actual.len(), expected.len()))
        }
        (expected, actual) if expected == actual => None,
        (expected, actual) => Some(format!("{path}: {actual} where {expected} is rendered")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_added_by_the_server_are_no_mismatch_but_a_changed_field_is() {
        let rendered = json!({ "spec": { "a": 1, "l": [{ "x": "y" }], "n": null } });
        let actual = json!({ "spec": { "a": 1, "b": 2, "l": [{ "x": "y", "z": 0 }] } });
        assert_eq!(mismatch(&rendered, &actual, ""), None);
        let changed = json!({ "spec": { "a": 2, "l": [{ "x": "y" }] } });
        assert_eq!(mismatch(&rendered, &changed, "").as_deref(), Some(".spec.a: 2 where 1 is rendered"));
    }

    #[test]
    fn a_child_gone_or_left_over_and_a_stale_status_are_lost_updates() {
        let cr = json!({ "kind": "Memcached", "metadata": { "namespace": "n", "name": "c", "uid": "u" },
                         "status": { "readyReplicas": 1 } });
        let owner = json!([{ "uid": "u", "controller": true }]);
        let deployment = json!({ "kind": "Deployment", "metadata": { "namespace": "n", "name": "c", "ownerReferences": owner },
                                 "spec": { "replicas": 1 } });
        let pdb = json!({ "kind": "PodDisruptionBudget", "metadata": { "namespace": "n", "name": "c", "ownerReferences": owner } });
        let rendered = [deployment.clone(), cr.clone()];
        assert!(compare(std::slice::from_ref(&cr), std::slice::from_ref(&deployment), &rendered).is_empty());
        let lost = compare(std::slice::from_ref(&cr), &[deployment.clone(), pdb], &rendered);
        assert_eq!(lost.len(), 1);
        assert!(lost[0].why.contains("PodDisruptionBudget c not rendered"), "{}", lost[0].why);
        let stale = json!({ "kind": "Memcached", "metadata": { "namespace": "n", "name": "c", "uid": "u" },
                            "status": { "readyReplicas": 0 } });
        let lost = compare(&[stale], &[deployment], &rendered);
        assert!(lost[0].why.contains("status.readyReplicas"), "{}", lost[0].why);
    }
}
