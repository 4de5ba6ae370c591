//! The `Queue` module: `example.c5c3.io/v1` `Queue` runs message brokers
//! (a StatefulSet with a volume claim template, a headless Service with a
//! second port when asked, a ConfigMap of settings) and, each when its spec
//! asks: a PodDisruptionBudget, a NetworkPolicy and an Ingress for the
//! brokers; consumers (a Deployment with probes and resources, scaled by a
//! HorizontalPodAutoscaler); a migration Job and a purge CronJob; a
//! ServiceAccount with a Role and RoleBinding for peer discovery; a backup
//! PersistentVolumeClaim; and a credentials Secret.
//!
//! Written as a newcomer writes a module on the Rust SDK: each object with
//! only the fields it sets (no `targetPort`, no `volumeMode`, no
//! `replicas` an autoscaler owns), written by server-side apply
//! (`WriteModel::Apply`). The API server fills in the rest;
//! `tests/apply_writes.rs` holds the host to writing nothing in steady
//! state, and to removing what a new spec no longer sets. The feature `v2`
//! builds its next version (see Cargo.toml), which `plan` and a swap
//! compare it with.

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasm_operator_sdk::k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use wasm_operator_sdk::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use wasm_operator_sdk::k8s_openapi::api::batch::v1::{CronJob, Job};
use wasm_operator_sdk::k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use wasm_operator_sdk::k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use wasm_operator_sdk::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use wasm_operator_sdk::k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use wasm_operator_sdk::prelude::*;

mod access;
mod brokers;
mod consumers;
mod data;
mod tasks;

#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.c5c3.io",
    version = "v1",
    kind = "Queue",
    plural = "queues",
    namespaced,
    status = "QueueStatus",
    crates(
        kube_core = "::wasm_operator_sdk::kube_core",
        k8s_openapi = "::wasm_operator_sdk::k8s_openapi",
        serde_json = "::wasm_operator_sdk::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    pub image: String,
    /// None: whoever scales the StatefulSet (an autoscaler) decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The size of each replica's claim.
    #[serde(default = "default_storage")]
    pub storage: String,
    /// A second port on the Pods and the Service, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_port: Option<i32>,
    /// Labels every child carries.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The ConfigMap's data.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// The container's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A PodDisruptionBudget allowing one Pod down.
    #[serde(default)]
    pub disruption_budget: bool,
    /// Consumers of the queue: a Deployment an autoscaler scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<Consumers>,
    /// A Job that migrates the queue's data once.
    #[serde(default)]
    pub migrate: bool,
    /// The schedule of a CronJob purging expired messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_schedule: Option<String>,
    /// A host name the brokers are reached at, through an Ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Only Pods of this Queue reach the brokers (a NetworkPolicy).
    #[serde(default)]
    pub isolated: bool,
    /// The brokers find each other through the API: a ServiceAccount, a
    /// Role reading Pods and Endpoints, and its RoleBinding.
    #[serde(default)]
    pub peer_discovery: bool,
    /// The size of a claim for backups, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_storage: Option<String>,
    /// The user name of a credentials Secret, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Consumers {
    pub image: String,
    #[serde(default = "default_min_replicas")]
    pub min_replicas: i32,
    #[serde(default = "default_max_replicas")]
    pub max_replicas: i32,
}

fn default_storage() -> String {
    "1Gi".to_owned()
}

fn default_min_replicas() -> i32 {
    2
}

fn default_max_replicas() -> i32 {
    4
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    pub observed_generation: i64,
    pub ready_replicas: i32,
    /// None of the module's: declared so that the API server keeps the
    /// host's (`FieldsTakenOver`, `Stalled`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The brokers' port.
const PORT: i32 = 5672;

/// Whether this is the module's next version (the feature `v2`).
const V2: bool = cfg!(feature = "v2");

pub struct Queues;

/// The metadata every child carries: its name, the spec's labels and the
/// Queue's instance label (and, before v2, `app.kubernetes.io/name`).
fn metadata(name: &str, queue: &Queue) -> ObjectMeta {
    let mut labels = queue.spec.labels.clone();
    if !V2 {
        labels.insert("app.kubernetes.io/name".into(), "queue".into());
    }
    labels.insert("app.kubernetes.io/instance".into(), queue.name_any());
    ObjectMeta { name: Some(name.to_owned()), labels: Some(labels), ..ObjectMeta::default() }
}

/// The labels of one component's Pods, which select them.
fn pod_labels(queue: &Queue, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/instance".to_owned(), queue.name_any()),
        ("app.kubernetes.io/component".to_owned(), component.to_owned()),
    ])
}

impl Reconciler for Queues {
    type Parent = Queue;
    type Status = QueueStatus;

    const WRITES: WriteModel = WriteModel::Apply;

    fn manifest() -> Manifest {
        Manifest::new::<Queue>("queue", env!("CARGO_PKG_VERSION"))
            .owns::<StatefulSet>()
            .owns::<Service>()
            .owns::<ConfigMap>()
            .owns::<PodDisruptionBudget>()
            .owns::<Deployment>()
            .owns::<HorizontalPodAutoscaler>()
            .owns::<Job>()
            .owns::<CronJob>()
            .owns::<Ingress>()
            .owns::<NetworkPolicy>()
            .owns::<ServiceAccount>()
            .owns::<Role>()
            .owns::<RoleBinding>()
            .owns::<PersistentVolumeClaim>()
            .owns::<Secret>()
    }

    fn desired(queue: &Queue, _ctx: &Context) -> Result<Vec<Object>, Error> {
        let spec = &queue.spec;
        let mut problems = Problems::default();
        problems.check(!spec.image.is_empty(), "spec.image", "must name an image");
        problems.check(!spec.storage.is_empty(), "spec.storage", "must be a quantity such as 1Gi");
        if let Some(consumers) = &spec.consumers {
            problems.check(!consumers.image.is_empty(), "spec.consumers.image", "must name an image");
            problems.check(
                consumers.min_replicas <= consumers.max_replicas,
                "spec.consumers.maxReplicas",
                "must be at least minReplicas",
            );
        }
        problems.into_result()?;
        let mut objects = vec![
            Object::new(&brokers::stateful_set(queue)),
            Object::new(&brokers::service(queue)),
            Object::new(&data::settings(queue)),
        ];
        if spec.disruption_budget {
            objects.push(Object::new(&brokers::disruption_budget(queue)));
        }
        if let Some(consumers) = &spec.consumers {
            objects.push(Object::new(&consumers::deployment(queue, consumers)));
            objects.push(Object::new(&consumers::autoscaler(queue, consumers)));
        }
        if spec.migrate {
            objects.push(Object::new(&tasks::migration(queue)));
        }
        if let Some(schedule) = &spec.purge_schedule {
            objects.push(Object::new(&tasks::purge(queue, schedule)));
        }
        if let Some(host) = spec.host.as_deref().filter(|_| !V2) {
            objects.push(Object::new(&brokers::ingress(queue, host)));
        }
        if spec.isolated {
            objects.push(Object::new(&brokers::network_policy(queue)));
        }
        if spec.peer_discovery {
            objects.push(Object::new(&access::service_account(queue)));
            objects.push(Object::new(&access::role(queue)));
            objects.push(Object::new(&access::role_binding(queue)));
        }
        if let Some(size) = &spec.backup_storage {
            objects.push(Object::new(&data::backup_claim(queue, size)));
        }
        if let Some(username) = &spec.username {
            objects.push(Object::new(&data::credentials(queue, username)));
        }
        Ok(objects)
    }

    fn status(queue: &Queue, ctx: &Context) -> Result<QueueStatus, Error> {
        let ready = ctx
            .owned::<StatefulSet>(&queue.name_any())
            .and_then(|set| set.status)
            .and_then(|status| status.ready_replicas)
            .unwrap_or(0);
        Ok(QueueStatus {
            observed_generation: queue.metadata.generation.unwrap_or(0),
            ready_replicas: ready,
            conditions: Vec::new(),
        })
    }
}

wasm_operator_sdk::export_reconciler!(Queues);

#[cfg(test)]
mod tests {
    use wasm_operator_sdk::run;
    use wasm_operator_sdk::serde_json::{self, Value, json};

    use super::*;

    fn queue(spec: Value) -> String {
        json!({"apiVersion": "example.c5c3.io/v1", "kind": "Queue",
               "metadata": {"name": "orders", "namespace": "ns", "uid": "u-1", "generation": 1}, "spec": spec})
        .to_string()
    }

    fn answer(spec: Value, owned: &[Value]) -> Vec<Value> {
        let owned: Vec<String> = owned.iter().map(Value::to_string).collect();
        run::desired::<Queues>(&queue(spec), &owned, &[])
            .expect("desired")
            .iter()
            .map(|text| serde_json::from_str(text).expect("JSON"))
            .collect()
    }

    #[test]
    fn an_applying_module_answers_only_what_it_sets() {
        // The server's object, with its defaults and another's fields: not
        // merged into the answer.
        let live = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "orders", "namespace": "ns", "resourceVersion": "9", "labels": {"other": "x"}},
            "spec": {"clusterIP": "None", "ports": [{"name": "queue", "port": 5672, "targetPort": 5672, "protocol": "TCP"}]}});
        let answer = answer(json!({"image": "queue:1", "labels": {"team": "a"}}), &[live]);
        let service = &answer[1];
        assert_eq!(service["spec"]["ports"], json!([{"name": "queue", "port": 5672}]));
        assert_eq!(service["metadata"].get("resourceVersion"), None);
        assert_eq!(service["metadata"]["labels"].get("other"), None);
        assert_eq!(service["metadata"]["labels"]["team"], "a");
        assert_eq!(service["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(answer[0]["spec"].get("replicas"), None, "no replicas unless the spec has them");
        assert_eq!(answer.len(), 3, "nothing optional unless asked");
    }

    #[test]
    fn every_optional_object_comes_when_its_spec_asks() {
        let spec = json!({"image": "queue:1", "disruptionBudget": true, "consumers": {"image": "c:1"},
            "migrate": true, "purgeSchedule": "0 * * * *", "host": "q.example.com", "isolated": true,
            "peerDiscovery": true, "backupStorage": "2Gi", "username": "admin"});
        let answer = answer(spec, &[]);
        let kinds: Vec<&str> = answer.iter().map(|o| o["kind"].as_str().expect("a kind")).collect();
        assert_eq!(
            kinds,
            [
                "StatefulSet",
                "Service",
                "ConfigMap",
                "PodDisruptionBudget",
                "Deployment",
                "HorizontalPodAutoscaler",
                "Job",
                "CronJob",
                "Ingress",
                "NetworkPolicy",
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "PersistentVolumeClaim",
                "Secret"
            ]
        );
        let deployment = &answer[4];
        assert_eq!(deployment["spec"].get("replicas"), None, "the autoscaler's");
        assert_eq!(answer[14]["data"]["username"], "YWRtaW4=");
        assert_eq!(answer[12]["subjects"][0]["namespace"], "ns");
        assert_eq!(answer[0]["spec"]["template"]["spec"]["serviceAccountName"], "orders");
    }

    #[test]
    fn an_object_of_another_controller_is_refused() {
        let taken = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orders-settings",
            "ownerReferences": [{"apiVersion": "x/v1", "kind": "X", "name": "x", "uid": "other", "controller": true}]}});
        let error = run::desired::<Queues>(&queue(json!({"image": "queue:1"})), &[taken.to_string()], &[])
            .expect_err("refused");
        assert_eq!(error.field_errors()[0].path, "metadata.ownerReferences");
    }
}
