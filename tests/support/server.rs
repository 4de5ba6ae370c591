//! What the API server adds to an object it stores: identity and bookkeeping
//! metadata, every defaulted field, and status. Building from this shape
//! must change nothing the CR does not demand. (The host issue's tests do
//! the same against a real kube-apiserver.)

use serde_json::{Map, Value, json};

/// `object` as the API server would return it after a create.
pub fn server_shaped(object: &Value) -> Value {
    let mut object = object.clone();
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("uid".into(), json!("5f6a3c9e-2b1d-4c8e-9a7f-0d1e2f3a4b5c"));
        metadata.insert("resourceVersion".into(), json!("4711"));
        metadata.insert("generation".into(), json!(1));
        metadata.insert("creationTimestamp".into(), json!("2026-11-21T10:00:00Z"));
        metadata.insert(
            "managedFields".into(),
            json!([{ "manager": "memcached-operator", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-11-21T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {} }]),
        );
    }
    match kind.as_str() {
        "Deployment" => deployment_defaults(&mut object),
        "Service" => service_defaults(&mut object),
        "PodDisruptionBudget" => {
            object["status"] = json!({ "currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
                                        "expectedPods": 0, "observedGeneration": 1 });
        }
        "HorizontalPodAutoscaler" => {
            object["status"] = json!({ "currentReplicas": 0, "desiredReplicas": 0 });
        }
        _ => {}
    }
    object
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key).or_insert(value);
}

fn deployment_defaults(deployment: &mut Value) {
    if let Some(annotations) = deployment["metadata"].as_object_mut() {
        annotations
            .entry("annotations")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|a| a.insert("deployment.kubernetes.io/revision".into(), json!("1")));
    }
    let spec = deployment["spec"].as_object_mut().expect("Deployment spec");
    set_default(spec, "replicas", json!(1));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    set_default(spec, "revisionHistoryLimit", json!(10));
    let pod = spec["template"]["spec"].as_object_mut().expect("pod spec");
    set_default(pod, "dnsPolicy", json!("ClusterFirst"));
    set_default(pod, "restartPolicy", json!("Always"));
    set_default(pod, "schedulerName", json!("default-scheduler"));
    set_default(pod, "securityContext", json!({}));
    set_default(pod, "terminationGracePeriodSeconds", json!(30));
    for container in pod["containers"].as_array_mut().expect("containers") {
        let container = container.as_object_mut().expect("container");
        set_default(container, "imagePullPolicy", json!("IfNotPresent"));
        set_default(container, "resources", json!({}));
        set_default(container, "terminationMessagePath", json!("/dev/termination-log"));
        set_default(container, "terminationMessagePolicy", json!("File"));
        for probe in ["livenessProbe", "readinessProbe"] {
            if let Some(probe) = container.get_mut(probe).and_then(Value::as_object_mut) {
                set_default(probe, "timeoutSeconds", json!(1));
                set_default(probe, "successThreshold", json!(1));
                set_default(probe, "failureThreshold", json!(3));
            }
        }
    }
    if let Some(volumes) = pod.get_mut("volumes").and_then(Value::as_array_mut) {
        for volume in volumes {
            if let Some(secret) = volume.get_mut("secret").and_then(Value::as_object_mut) {
                set_default(secret, "defaultMode", json!(420));
            }
        }
    }
    deployment["status"] = json!({
        "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [{ "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                         "message": "Deployment has minimum availability.",
                         "lastTransitionTime": "2026-11-21T10:00:05Z", "lastUpdateTime": "2026-11-21T10:00:05Z" }]
    });
}

fn service_defaults(service: &mut Value) {
    let spec = service["spec"].as_object_mut().expect("Service spec");
    set_default(spec, "clusterIPs", json!(["None"]));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    set_default(spec, "ipFamilies", json!(["IPv4"]));
    set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    set_default(spec, "sessionAffinity", json!("None"));
    set_default(spec, "type", json!("ClusterIP"));
    service["status"] = json!({ "loadBalancer": {} });
}
