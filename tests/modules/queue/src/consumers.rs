//! The consumers: a Deployment with probes and resources, which a
//! HorizontalPodAutoscaler scales (so the Deployment sets no `replicas`).

use std::collections::BTreeMap;

use wasm_operator_sdk::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use wasm_operator_sdk::k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use wasm_operator_sdk::k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements,
};
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasm_operator_sdk::prelude::*;

use crate::{Consumers, PORT, Queue, V2, data, metadata, pod_labels};

/// The consumers' name: the Deployment's and the autoscaler's.
fn name(queue: &Queue) -> String {
    format!("{}-consumers", queue.name_any())
}

fn probe(path: &str, period: Option<i32>) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("http".into()),
            ..Default::default()
        }),
        period_seconds: period,
        ..Default::default()
    }
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(name, value)| ((*name).to_owned(), Quantity((*value).to_owned()))).collect()
}

pub fn deployment(queue: &Queue, consumers: &Consumers) -> Deployment {
    let mut env = vec![EnvVar {
        name: "QUEUE_URL".into(),
        value: Some(format!("amqp://{}:{PORT}", queue.name_any())),
        ..Default::default()
    }];
    let mut ports = vec![ContainerPort { name: Some("http".into()), container_port: 8080, ..Default::default() }];
    if !V2 {
        env.push(EnvVar {
            name: "PREFETCH".into(),
            value_from: Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: data::settings_name(queue),
                    key: data::PREFETCH_KEY.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        ports.push(ContainerPort { name: Some("metrics".into()), container_port: 9102, ..Default::default() });
    }
    let container = Container {
        name: "consumer".into(),
        image: Some(consumers.image.clone()),
        env: Some(env),
        ports: Some(ports),
        readiness_probe: Some(probe("/ready", None)),
        liveness_probe: Some(probe("/live", Some(20))),
        // The CPU limit as an author may write it: the server stores `500m`.
        resources: Some(ResourceRequirements {
            requests: Some(quantities(&[("cpu", "100m"), ("memory", "64Mi")])),
            limits: Some(quantities(&[("cpu", "0.5"), ("memory", "128Mi")])),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: metadata(&name(queue), queue),
        spec: DeploymentSpec {
            selector: LabelSelector { match_labels: Some(pod_labels(queue, "consumer")), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(pod_labels(queue, "consumer")), ..ObjectMeta::default() }),
                spec: Some(PodSpec { containers: vec![container], ..Default::default() }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn autoscaler(queue: &Queue, consumers: &Consumers) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: metadata(&name(queue), queue),
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: name(queue),
            },
            min_replicas: Some(consumers.min_replicas),
            max_replicas: consumers.max_replicas,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(80),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}
