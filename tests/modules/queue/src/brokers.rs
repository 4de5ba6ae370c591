//! The brokers: their StatefulSet, the headless Service in front of them,
//! and what guards them (a PodDisruptionBudget, a NetworkPolicy) or
//! exposes them (an Ingress).

use std::collections::BTreeMap;

use wasm_operator_sdk::k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use wasm_operator_sdk::k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec,
    Service, ServicePort, ServiceSpec, VolumeMount, VolumeResourceRequirements,
};
use wasm_operator_sdk::k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule, IngressServiceBackend, IngressSpec,
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
    ServiceBackendPort,
};
use wasm_operator_sdk::k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasm_operator_sdk::prelude::*;

use crate::{PORT, Queue, V2, metadata, pod_labels};

fn selector(queue: &Queue) -> LabelSelector {
    LabelSelector { match_labels: Some(pod_labels(queue, "broker")), ..Default::default() }
}

/// The named ports, made by `port`: the queue's, and the metrics one when
/// the spec has it.
fn ports<T>(queue: &Queue, port: impl Fn(&str, i32) -> T) -> Vec<T> {
    let mut ports = vec![port("queue", PORT)];
    ports.extend(queue.spec.metrics_port.map(|number| port("metrics", number)));
    ports
}

pub fn stateful_set(queue: &Queue) -> StatefulSet {
    let name = queue.name_any();
    let mut env: Vec<EnvVar> = queue
        .spec
        .env
        .iter()
        .map(|(name, value)| EnvVar { name: name.clone(), value: Some(value.clone()), ..Default::default() })
        .collect();
    if V2 {
        env.push(EnvVar { name: "QUEUE_MODE".into(), value: Some("durable".into()), ..Default::default() });
    }
    let container = Container {
        name: "queue".into(),
        image: Some(queue.spec.image.clone()),
        ports: Some(ports(queue, |name, number| ContainerPort {
            name: Some(name.into()),
            container_port: number,
            ..Default::default()
        })),
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
            selector: selector(queue),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(pod_labels(queue, "broker")), ..ObjectMeta::default() }),
                spec: Some(PodSpec {
                    service_account_name: queue.spec.peer_discovery.then(|| name.clone()),
                    containers: vec![container],
                    ..Default::default()
                }),
            },
            volume_claim_templates: Some(vec![claim]),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn service(queue: &Queue) -> Service {
    Service {
        metadata: metadata(&queue.name_any(), queue),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(pod_labels(queue, "broker")),
            ports: Some(ports(queue, |name, port| ServicePort { name: Some(name.into()), port, ..Default::default() })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn disruption_budget(queue: &Queue) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: metadata(&queue.name_any(), queue),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(selector(queue)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn ingress(queue: &Queue, host: &str) -> Ingress {
    let name = queue.name_any();
    let backend = IngressServiceBackend {
        name: name.clone(),
        port: Some(ServiceBackendPort { name: Some("queue".into()), ..Default::default() }),
    };
    Ingress {
        metadata: metadata(&name, queue),
        spec: Some(IngressSpec {
            rules: Some(vec![IngressRule {
                host: Some(host.to_owned()),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".into()),
                        path_type: "Prefix".into(),
                        backend: IngressBackend { service: Some(backend), ..Default::default() },
                    }],
                }),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Only this Queue's Pods (brokers and consumers) reach the brokers' port.
pub fn network_policy(queue: &Queue) -> NetworkPolicy {
    let peers = NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("app.kubernetes.io/instance".to_owned(), queue.name_any())])),
            ..Default::default()
        }),
        ..Default::default()
    };
    NetworkPolicy {
        metadata: metadata(&queue.name_any(), queue),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(queue)),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![peers]),
                ports: Some(vec![NetworkPolicyPort { port: Some(IntOrString::Int(PORT)), ..Default::default() }]),
            }]),
            ..Default::default()
        }),
    }
}
