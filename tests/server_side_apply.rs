//! The host's write decision for modules that answer the fields they set,
//! checked against a real API server for every kind an author commonly
//! owns: after the server applies an answer, the fields the host counts
//! for it are exactly the fields the server records for the module's
//! manager, and the host finds nothing left to change (so a steady state
//! sends nothing). The decision is the host's own: on this API server a
//! second, unchanged apply of a Job or a PersistentVolumeClaim still writes
//! (a new resourceVersion, nothing else different). A field the next answer drops is found as one
//! to remove, and the server removes it; a field another manager sets
//! beside the module is no change.

use std::sync::Arc;

use control_plane::{ControlPlane, User};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use wasm_operator::planning::applied::{Change, changes, holds, with_digest};
use wasm_operator::planning::field_set::FieldSet;
use wasm_operator::planning::kind_schema::KindSchema;
use wasm_operator::planning::kinds::Kind;
use wasm_operator::runtime::bindings::KindInfo;

const MANAGER: &str = "wasm-operator-test";

fn kind(group: &str, version: &str, kind: &str, plural: &str) -> Kind {
    let info = KindInfo {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
    };
    Kind::from_info(&info).expect("a namespaced kind")
}

/// Each kind, with an answer as an author writes it: only what the module
/// means, leaving every default to the server.
fn answers() -> Vec<(Kind, Value)> {
    let labels = json!({"app": "orders"});
    let pod = json!({
        "metadata": {"labels": labels},
        "spec": {"containers": [{
            "name": "main", "image": "registry.example/orders:1",
            "ports": [{"containerPort": 8080}, {"containerPort": 9090, "name": "metrics"}],
            "env": [{"name": "MODE", "value": "queue"}],
            "resources": {"requests": {"cpu": "0.5", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
            "livenessProbe": {"tcpSocket": {"port": "metrics"}}
        }]}
    });
    let job_pod = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "once", "image": "busybox", "command": ["true"]}]}});
    vec![
        (
            kind("apps", "v1", "StatefulSet", "statefulsets"),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "orders", "labels": labels},
                "spec": {"serviceName": "orders", "replicas": 2, "selector": {"matchLabels": labels}, "template": pod,
                    "volumeClaimTemplates": [{"metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        ),
        (
            kind("", "v1", "Service", "services"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "orders"},
                "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "metrics", "port": 9090}]}}),
        ),
        (
            kind("apps", "v1", "Deployment", "deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": labels}, "template": pod}}),
        ),
        (
            kind("batch", "v1", "Job", "jobs"),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
                "spec": {"backoffLimit": 2, "template": job_pod}}),
        ),
        (
            kind("batch", "v1", "CronJob", "cronjobs"),
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
                "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": job_pod}}}}),
        ),
        (
            kind("networking.k8s.io", "v1", "Ingress", "ingresses"),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "orders"},
                "spec": {"rules": [{"host": "orders.example", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "orders", "port": {"number": 80}}}}]}}]}}),
        ),
        (
            kind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies"),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "orders"},
                "spec": {"podSelector": {"matchLabels": labels},
                    "ingress": [{"ports": [{"port": 8080}], "from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}}),
        ),
        (
            kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "orders"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}),
        ),
        (
            kind("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 4,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
        ),
        (
            kind("", "v1", "ServiceAccount", "serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "orders"}}),
        ),
        (
            kind("rbac.authorization.k8s.io", "v1", "Role", "roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "orders"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        ),
        (
            kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "orders"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "orders"},
                "subjects": [{"kind": "ServiceAccount", "name": "orders"}]}),
        ),
        (
            kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "scratch"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "500Mi"}}}}),
        ),
        (
            kind("", "v1", "ConfigMap", "configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orders", "labels": labels},
                "data": {"mode": "queue", "size": "10"}}),
        ),
        (
            kind("", "v1", "Secret", "secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "orders"}, "type": "Opaque",
                "data": {"token": "c2VjcmV0"}}),
        ),
    ]
}

async fn setup(prefix: &str) -> (Client, String) {
    let plane = ControlPlane::shared();
    let namespace = plane.create_namespace(prefix).await.expect("creating a namespace");
    let client = plane.client(User::Admin).await.expect("an admin client");
    (client, namespace)
}

fn api(client: &Client, namespace: &str, kind: &Kind) -> Api<DynamicObject> {
    let resource: &ApiResource = &kind.resource;
    Api::namespaced_with(client.clone(), namespace, resource)
}

async fn apply(api: &Api<DynamicObject>, answer: &Value) -> Value {
    let name = answer["metadata"]["name"].as_str().expect("a name");
    let applied = api
        .patch(name, &PatchParams::apply(MANAGER), &Patch::Apply(answer))
        .await
        .unwrap_or_else(|error| panic!("applying {} {name}: {error}", answer["kind"]));
    serde_json::to_value(applied).expect("an object")
}

/// The fields the server records for `manager`'s apply.
fn owned_by(object: &Value, manager: &str) -> Option<FieldSet> {
    let entries = object["metadata"]["managedFields"].as_array()?;
    let entry = entries.iter().find(|entry| entry["manager"] == manager && entry["operation"] == "Apply")?;
    Some(FieldSet::from_fields_v1(&entry["fieldsV1"]).expect("fieldsV1 the host reads"))
}

async fn schemas(client: &Client, kinds: &[Kind]) -> Vec<Arc<KindSchema>> {
    wasm_operator::operator::watching::kind_schemas::fetch(client, kinds).await.expect("the kinds' schemas")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fields_counted_are_the_servers_and_an_applied_answer_needs_nothing_more() {
    let (client, namespace) = setup("ssa-kinds").await;
    let answers = answers();
    let kinds: Vec<Kind> = answers.iter().map(|(kind, _)| kind.clone()).collect();
    let schemas = schemas(&client, &kinds).await;
    let mut failures = Vec::new();
    for ((kind, answer), schema) in answers.iter().zip(&schemas) {
        let api = api(&client, &namespace, kind);
        let answer = &with_digest(answer.clone());
        let live = apply(&api, answer).await;
        // An answer that sets nothing but its name leaves no entry.
        let owned = owned_by(&live, MANAGER).unwrap_or_default();
        let counted = FieldSet::of(schema, answer);
        if counted != owned {
            let only = |a: &FieldSet, b: &FieldSet| -> Vec<String> {
                a.iter().filter(|p| !b.contains(p)).map(|p| wasm_operator::planning::field_set::display(p)).collect()
            };
            failures.push(format!(
                "{}: counted but not recorded {:?}; recorded but not counted {:?}",
                kind.name(),
                only(&counted, &owned),
                only(&owned, &counted)
            ));
        }
        if !holds(schema, &live, answer, Some(&owned)) {
            failures.push(format!("{}: after the apply the host would apply again", kind.name()));
        }
        // What `plan` would show: nothing, defaults inside atomic lists
        // (claim templates, network policy ports) included.
        let left = changes(schema, &live, answer, Some(&owned));
        if !left.is_empty() {
            failures.push(format!("{}: after the apply the host still shows {left:?}", kind.name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_field_is_found_and_removed_and_another_managers_field_is_left_alone() {
    let (client, namespace) = setup("ssa-drop").await;
    let answers = answers();
    let (kind, before) = answers.iter().find(|(kind, _)| kind.name() == "Deployment").expect("the Deployment").clone();
    let schema = schemas(&client, std::slice::from_ref(&kind)).await.remove(0);
    let api = api(&client, &namespace, &kind);
    let mut before = before;
    before["metadata"]["labels"] = json!({"team": "shop", "tier": "web"});
    let before = with_digest(before);
    apply(&api, &before).await;

    // Another manager (as an HPA scales it) sets replicas and a label.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"audit": "on"}},
        "spec": {"replicas": 3}});
    let live = api
        .patch("web", &PatchParams::apply("autoscaler"), &Patch::Apply(&other))
        .await
        .expect("another manager's apply");
    let live = serde_json::to_value(live).expect("an object");
    let owned = owned_by(&live, MANAGER).expect("the module's entry");
    assert_eq!(changes(&schema, &live, &before, Some(&owned)), [], "another manager's fields are no change");
    assert!(holds(&schema, &live, &before, Some(&owned)), "no write beside another manager");

    // The next version drops a label and an env var.
    let mut after = before.clone();
    after["metadata"]["labels"] = json!({"team": "shop"});
    after["spec"]["template"]["spec"]["containers"][0]["env"] = json!([]);
    let after = with_digest(after);
    assert!(!holds(&schema, &live, &after, Some(&owned)));
    let found = changes(&schema, &live, &after, Some(&owned));
    let dropped: Vec<&str> =
        found.iter().filter(|change| matches!(change, Change::Drop { .. })).map(Change::path).collect();
    assert_eq!(
        dropped,
        // The env var goes whole: one change, not one per member.
        ["metadata.labels.tier", "spec.template.spec.containers[name=main].env[name=MODE]"],
        "{found:?}"
    );
    let live = apply(&api, &after).await;
    assert_eq!(
        live["metadata"]["labels"],
        json!({"team": "shop", "audit": "on"}),
        "the dropped label is gone, the other's stays"
    );
    assert_eq!(live["spec"]["replicas"], json!(3), "the other manager's replicas stay");
    assert!(live["spec"]["template"]["spec"]["containers"][0].get("env").is_none(), "the env var is gone: {live}");
    let owned = owned_by(&live, MANAGER).expect("the module's entry");
    assert_eq!(changes(&schema, &live, &after, Some(&owned)), []);
    assert!(holds(&schema, &live, &after, Some(&owned)));

    // Someone edits a field the module sets (an update takes it over):
    // the module applies again.
    let mut edited = live.clone();
    edited["metadata"]["labels"]["team"] = json!("ops");
    edited["metadata"].as_object_mut().expect("metadata").remove("managedFields");
    let edited: DynamicObject = serde_json::from_value(edited).expect("an object");
    let live = api
        .replace(
            "web",
            &kube::api::PostParams { field_manager: Some("kubectl-edit".into()), ..Default::default() },
            &edited,
        )
        .await
        .expect("an edit");
    let live = serde_json::to_value(live).expect("an object");
    let owned = owned_by(&live, MANAGER).expect("the module's entry");
    assert!(!holds(&schema, &live, &after, Some(&owned)), "the edited label is the module's again");
    assert_eq!(
        changes(&schema, &live, &after, Some(&owned)),
        [Change::Set { path: "metadata.labels.team".into(), from: Some(json!("ops")), to: json!("shop") }]
    );
}
