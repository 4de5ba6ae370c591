//! The `Queue` module: `example.c5c3.io/v1` `Queue` owns a StatefulSet
//! (with a volume claim template), a headless Service, a ConfigMap of
//! settings and, when asked, a PodDisruptionBudget. Written as a newcomer
//! writes a module on the Rust SDK: each object with only the fields it
//! sets (no `targetPort`, no `volumeMode`, no `replicas` unless the spec
//! has one), written by server-side apply (`WriteModel::Apply`). The API
//! server fills in the rest; `tests/apply_writes.rs` holds the
//! host to writing nothing in steady state, and to removing what a new
//! spec no longer sets. The feature `v2` builds its next version (see
//! Cargo.toml), which `plan` and a swap compare it with.

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasm_operator_sdk::k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use wasm_operator_sdk::k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, EnvVar, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, Service, ServicePort, ServiceSpec, VolumeMount, VolumeResourceRequirements,
};
use wasm_operator_sdk::k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use wasm_operator_sdk::prelude::*;

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
}

fn default_storage() -> String {
    "1Gi".to_owned()
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

const PORT: i32 = 5672;

pub struct Queues;

fn metadata(name: &str, queue: &Queue) -> ObjectMeta {
    let mut labels = queue.spec.labels.clone();
    if !cfg!(feature = "v2") {
        labels.insert("app.kubernetes.io/name".into(), "queue".into());
    }
    labels.insert("app.kubernetes.io/instance".into(), queue.name_any());
    ObjectMeta { name: Some(name.to_owned()), labels: Some(labels), ..ObjectMeta::default() }
}

fn selector(queue: &Queue) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/instance".to_owned(), queue.name_any())])
}

fn stateful_set(queue: &Queue) -> StatefulSet {
    let name = queue.name_any();
    let mut ports = vec![ContainerPort { name: Some("queue".into()), container_port: PORT, ..Default::default() }];
    ports.extend(queue.spec.metrics_port.map(|port| ContainerPort {
        name: Some("metrics".into()),
        container_port: port,
        ..Default::default()
    }));
    let mut env: Vec<EnvVar> = queue
        .spec
        .env
        .iter()
        .map(|(name, value)| EnvVar { name: name.clone(), value: Some(value.clone()), ..Default::default() })
        .collect();
    if cfg!(feature = "v2") {
        env.push(EnvVar { name: "QUEUE_MODE".into(), value: Some("durable".into()), ..Default::default() });
    }
    let container = Container {
        name: "queue".into(),
        image: Some(queue.spec.image.clone()),
        ports: Some(ports),
        env: (!env.is_empty()).then_some(env),
        volume_mounts: Some(vec![VolumeMount {
            name: "data".into(),
            mount_path: "/var/lib/queue".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some("data".into()), ..ObjectMeta::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_owned(), Quantity(queue.spec.storage.clone()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    StatefulSet {
        metadata: metadata(&name, queue),
        spec: StatefulSetSpec {
            replicas: queue.spec.replicas,
            service_name: Some(name.clone()),
            selector: LabelSelector { match_labels: Some(selector(queue)), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(selector(queue)), ..ObjectMeta::default() }),
                spec: Some(PodSpec { containers: vec![container], ..Default::default() }),
            },
            volume_claim_templates: Some(vec![claim]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn service(queue: &Queue) -> Service {
    let mut ports = vec![ServicePort { name: Some("queue".into()), port: PORT, ..Default::default() }];
    ports.extend(queue.spec.metrics_port.map(|port| ServicePort {
        name: Some("metrics".into()),
        port,
        ..Default::default()
    }));
    Service {
        metadata: metadata(&queue.name_any(), queue),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector(queue)),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
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
    }

    fn desired(queue: &Queue, _ctx: &Context) -> Result<Vec<Object>, Error> {
        let mut problems = Problems::default();
        problems.check(!queue.spec.image.is_empty(), "spec.image", "must name an image");
        problems.check(!queue.spec.storage.is_empty(), "spec.storage", "must be a quantity such as 1Gi");
        problems.into_result()?;
        let name = queue.name_any();
        let settings = ConfigMap {
            metadata: metadata(&format!("{name}-settings"), queue),
            data: Some(queue.spec.settings.clone()),
            ..Default::default()
        };
        let mut objects = vec![Object::new(&stateful_set(queue)), Object::new(&service(queue)), Object::new(&settings)];
        if queue.spec.disruption_budget {
            let budget = PodDisruptionBudget {
                metadata: metadata(&name, queue),
                spec: Some(PodDisruptionBudgetSpec {
                    max_unavailable: Some(IntOrString::Int(1)),
                    selector: Some(LabelSelector { match_labels: Some(selector(queue)), ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            objects.push(Object::new(&budget));
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

    #[test]
    fn an_applying_module_answers_only_what_it_sets() {
        let parent = queue(json!({"image": "queue:1", "labels": {"team": "a"}}));
        // The server's object, with its defaults and another's fields: not
        // merged into the answer.
        let live = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "orders", "namespace": "ns", "resourceVersion": "9", "labels": {"other": "x"}},
            "spec": {"clusterIP": "None", "ports": [{"name": "queue", "port": 5672, "targetPort": 5672, "protocol": "TCP"}]}});
        let answer: Vec<Value> = run::desired::<Queues>(&parent, &[live.to_string()], &[])
            .expect("desired")
            .iter()
            .map(|text| serde_json::from_str(text).expect("JSON"))
            .collect();
        let service = &answer[1];
        assert_eq!(service["spec"]["ports"], json!([{"name": "queue", "port": 5672}]));
        assert_eq!(service["metadata"].get("resourceVersion"), None);
        assert_eq!(service["metadata"]["labels"].get("other"), None);
        assert_eq!(service["metadata"]["labels"]["team"], "a");
        assert_eq!(service["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(answer[0]["spec"].get("replicas"), None, "no replicas unless the spec has them");
        assert_eq!(answer.len(), 3, "no budget unless asked");
    }

    #[test]
    fn an_object_of_another_controller_is_refused() {
        let parent = queue(json!({"image": "queue:1"}));
        let taken = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orders-settings",
            "ownerReferences": [{"apiVersion": "x/v1", "kind": "X", "name": "x", "uid": "other", "controller": true}]}});
        let error = run::desired::<Queues>(&parent, &[taken.to_string()], &[]).expect_err("refused");
        assert_eq!(error.field_errors()[0].path, "metadata.ownerReferences");
    }
}
