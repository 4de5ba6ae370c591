//! Merging what a module wants onto what the API server has, so that what
//! the server filled in (defaults, resourceVersion, uid, a container's
//! terminationMessagePath) survives and an unchanged parent writes nothing:
//! the host replaces an object whenever the answer differs from it.

use serde_json::{Map, Value};

/// `current` with `desired`'s fields applied:
/// - objects are merged member by member; a `null` in `desired` removes it;
/// - a list of objects that all have a `name` (containers, ports, volumes,
///   env) is merged item by item by name, in `desired`'s order; items
///   `desired` does not list are dropped;
/// - anything else (other lists, scalars) is replaced.
///
/// Merging the same `desired` onto the server's answer gives the server's
/// answer back unchanged.
pub fn merge(current: &Value, desired: &Value) -> Value {
    match (current, desired) {
        (Value::Object(current), Value::Object(desired)) => Value::Object(merge_objects(current, desired)),
        (Value::Array(current), Value::Array(desired)) if named(desired) && named(current) => {
            Value::Array(merge_named(current, desired))
        }
        (_, desired) => desired.clone(),
    }
}

fn merge_objects(current: &Map<String, Value>, desired: &Map<String, Value>) -> Map<String, Value> {
    let mut merged = current.clone();
    for (key, value) in desired {
        if value.is_null() {
            merged.remove(key);
            continue;
        }
        let next = match current.get(key) {
            Some(old) => merge(old, value),
            None => value.clone(),
        };
        merged.insert(key.clone(), next);
    }
    merged
}

fn name_of(item: &Value) -> Option<&str> {
    item.get("name").and_then(Value::as_str)
}

/// A non-empty list whose items are all objects with a string `name`.
fn named(items: &[Value]) -> bool {
    items.iter().all(|item| name_of(item).is_some())
}

fn merge_named(current: &[Value], desired: &[Value]) -> Vec<Value> {
    desired
        .iter()
        .map(|item| match current.iter().find(|old| name_of(old) == name_of(item)) {
            Some(old) => merge(old, item),
            None => item.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn server_deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "d-1", "resourceVersion": "12",
                          "labels": {"app": "web"}},
            "spec": {"replicas": 2, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "containers": [{"name": "nginx", "image": "nginx:1", "imagePullPolicy": "IfNotPresent",
                                         "terminationMessagePath": "/dev/termination-log",
                                         "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}]}],
                         "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}},
            "status": {"replicas": 2, "readyReplicas": 2}
        })
    }

    fn wanted(image: &str, replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "containers": [{"name": "nginx", "image": image,
                                         "ports": [{"containerPort": 80, "name": "http"}]}]}}}
        })
    }

    #[test]
    fn an_unchanged_answer_gives_the_server_object_back() {
        assert_eq!(merge(&server_deployment(), &wanted("nginx:1", 2)), server_deployment());
    }

    #[test]
    fn changed_fields_are_applied_and_defaults_kept() {
        let merged = merge(&server_deployment(), &wanted("nginx:2", 3));
        assert_eq!(merged["spec"]["replicas"], 3);
        let container = &merged["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:2");
        assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(container["ports"][0]["protocol"], "TCP");
        assert_eq!(merged["metadata"]["resourceVersion"], "12");
        assert_eq!(merged["status"]["readyReplicas"], 2);
    }

    #[test]
    fn named_items_follow_the_desired_list_and_nulls_remove() {
        let current = json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "x": 1, "args": ["a"]});
        let desired =
            json!({"env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}], "x": null, "args": ["b", "c"]});
        assert_eq!(
            merge(&current, &desired),
            json!({"env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}], "args": ["b", "c"]})
        );
    }
}
