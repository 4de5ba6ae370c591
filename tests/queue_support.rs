//! The Queue module's children (tests/modules/queue and its TypeScript and
//! Python copies), for the tests that follow them: each kind it may own,
//! and the name it gives the object of that kind, for the Queue `orders`.

use kube::api::ApiResource;

use crate::operator_support::gvk;

/// One child: its kind's resource and its name.
pub struct Child {
    pub resource: ApiResource,
    pub name: &'static str,
}

/// All fifteen, in the module's order (what a spec setting every optional
/// field makes).
pub fn children() -> Vec<Child> {
    let child = |group, version, kind, plural, name| Child { resource: gvk(group, version, kind, plural), name };
    vec![
        child("apps", "v1", "StatefulSet", "statefulsets", "orders"),
        child("", "v1", "Service", "services", "orders"),
        child("", "v1", "ConfigMap", "configmaps", "orders-settings"),
        child("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "orders"),
        child("apps", "v1", "Deployment", "deployments", "orders-consumers"),
        child("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "orders-consumers"),
        child("batch", "v1", "Job", "jobs", "orders-migrate"),
        child("batch", "v1", "CronJob", "cronjobs", "orders-purge"),
        child("networking.k8s.io", "v1", "Ingress", "ingresses", "orders"),
        child("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", "orders"),
        child("", "v1", "ServiceAccount", "serviceaccounts", "orders"),
        child("rbac.authorization.k8s.io", "v1", "Role", "roles", "orders"),
        child("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "orders"),
        child("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "orders-backup"),
        child("", "v1", "Secret", "secrets", "orders-credentials"),
    ]
}

/// A child by kind.
pub fn child(kind: &str) -> Child {
    children().into_iter().find(|c| c.resource.kind == kind).unwrap_or_else(|| panic!("no Queue child {kind}"))
}

/// A spec that sets every optional field: the Queue owns all fifteen.
pub fn full_spec() -> serde_json::Value {
    serde_json::json!({"image": "queue:1", "metricsPort": 9090, "labels": {"team": "a", "tier": "gold"},
           "settings": {"a": "1", "b": "2"}, "env": {"A": "1", "B": "2"}, "disruptionBudget": true,
           "consumers": {"image": "consumer:1"}, "migrate": true, "purgeSchedule": "* * * * *",
           "host": "orders.example.com", "isolated": true, "peerDiscovery": true, "backupStorage": "2Gi",
           "username": "admin"})
}
