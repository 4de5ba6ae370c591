//! Pods that start (issue 14, item 5), against a control plane in its pods
//! mode: kube-scheduler, kube-controller-manager with the Deployment,
//! ReplicaSet and EndpointSlice controllers, and kwok as the fake kubelet of
//! three Nodes (one per zone). The operator runs in-process. A Memcached's
//! Pods are scheduled, get IPs and become Ready, and its status follows:
//! readyReplicas, Available and Ready, and a serverList naming the Service
//! whose endpoints are those Pods. Scaling moves real Pods (including one the
//! scheduler cannot place), and changing a referenced Secret rolls the
//! Deployment to a new ReplicaSet whose new Pods become Ready.

#[path = "operator_support.rs"]
mod operator_support;

use std::collections::BTreeSet;
use std::time::Duration;

use control_plane::{ControlPlane, FAKE_NODES, Options, pod_ready_with_ip};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use operator_support::*;

/// Rollouts and scale-downs take a few controller round trips each.
const POD_WAIT: Duration = Duration::from_secs(60);

async fn pods_namespace(prefix: &str) -> TestNamespace<'static> {
    let plane = ControlPlane::shared_with(Options::pods());
    plane.install_crds().await.expect("installing the CRDs");
    grant_operator_everything(plane).await;
    TestNamespace::on(plane, prefix).await
}

fn instance(name: &str) -> ListParams {
    ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"))
}

async fn pods_of(ns: &TestNamespace<'_>, name: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), &ns.namespace);
    pods.list(&instance(name)).await.expect("listing Pods").items
}

fn pod_ip(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default()
}

fn node_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

/// The Pods of `name` once exactly `count` exist, none is being deleted, and
/// every one is scheduled, Ready and has an IP.
async fn ready_pods(ns: &TestNamespace<'_>, name: &str, count: usize) -> Vec<Pod> {
    eventually_within(POD_WAIT, &format!("{count} Ready Pods of {name}"), || async {
        let pods = pods_of(ns, name).await;
        let settled =
            pods.len() == count && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none() && pod_ready_with_ip(p));
        settled.then_some(pods)
    })
    .await
}

/// Waits for a status that has seen the current generation with
/// `readyReplicas == ready` and the Ready condition `ready_condition`.
async fn status_with(ns: &TestNamespace<'_>, name: &str, ready: i64, ready_condition: &str) -> Value {
    eventually_within(POD_WAIT, &format!("{name}: readyReplicas {ready}, Ready {ready_condition}"), || async {
        let cr = ns.memcacheds().get(name).await.ok()?;
        let status = cr.data.get("status")?.clone();
        let current = status["observedGeneration"] == json!(cr.metadata.generation?);
        (current && status["readyReplicas"] == json!(ready) && condition(&status, "Ready")["status"] == ready_condition)
            .then_some(status)
    })
    .await
}

/// The ready addresses of the EndpointSlices of Service `name`.
async fn endpoint_addresses(ns: &TestNamespace<'_>, name: &str) -> BTreeSet<String> {
    let slices: Api<EndpointSlice> = Api::namespaced(ns.client.clone(), &ns.namespace);
    let params = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    let list = slices.list(&params).await.expect("listing EndpointSlices");
    list.items
        .iter()
        .flat_map(|slice| slice.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect()
}

async fn set_replicas(ns: &TestNamespace<'_>, name: &str, replicas: i32) {
    let patch = json!({"spec": {"replicas": replicas}});
    ns.memcacheds().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scaling the Memcached");
}

/// A Pod's IP lies in the podCIDR of the Node it runs on: kwok gave it.
async fn assert_ip_from_its_node(ns: &TestNamespace<'_>, pod: &Pod) {
    let nodes: Api<Node> = Api::all(ns.client.clone());
    let node = nodes.get(&node_of(pod)).await.expect("the Pod's Node");
    let cidr = node.spec.and_then(|s| s.pod_cidr).expect("fake Nodes have a podCIDR");
    let prefix = cidr.strip_suffix("0/24").expect("a /24");
    let ip = pod_ip(pod);
    assert!(ip.starts_with(prefix), "Pod IP {ip} is not from its Node's range {cidr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_become_ready_and_follow_scaling() {
    let ns = pods_namespace("pods-scale").await;
    let _operator = ns.start_operator().await;
    // Hard anti-affinity: at most one Pod per Node, and there are three.
    let spec = json!({"replicas": 1, "highAvailability": {"antiAffinityPreset": "hard"}});
    ns.create_memcached("cache", spec).await;

    let status = status_with(&ns, "cache", 1, "True").await;
    assert_eq!(condition(&status, "Available")["status"], "True", "{status:#}");
    let pods = ready_pods(&ns, "cache", 1).await;
    assert_ip_from_its_node(&ns, &pods[0]).await;

    // Up to three: one per Node, each with an IP of its Node's range.
    set_replicas(&ns, "cache", 3).await;
    let status = status_with(&ns, "cache", 3, "True").await;
    assert_eq!(condition(&status, "Available")["status"], "True", "{status:#}");
    assert_eq!(status["serverList"], json!([format!("cache.{}:11211", ns.namespace)]), "{status:#}");
    let pods = ready_pods(&ns, "cache", 3).await;
    let nodes: BTreeSet<String> = pods.iter().map(node_of).collect();
    assert_eq!(nodes, FAKE_NODES.iter().map(|(n, _)| n.to_string()).collect(), "one Pod per Node");
    for pod in &pods {
        assert_ip_from_its_node(&ns, pod).await;
    }
    // The serverList names the Service; its endpoints are exactly these Pods.
    let ips: BTreeSet<String> = pods.iter().map(pod_ip).collect();
    assert_eq!(ips.len(), 3, "distinct Pod IPs: {ips:?}");
    eventually_within(POD_WAIT, "the Service's endpoints to be the Ready Pods", || async {
        (endpoint_addresses(&ns, "cache").await == ips).then_some(())
    })
    .await;

    // A fourth cannot be placed (no Node left without one): 3/4 Ready.
    set_replicas(&ns, "cache", 4).await;
    let status = status_with(&ns, "cache", 3, "False").await;
    assert_eq!(condition(&status, "Degraded")["status"], "True", "{status:#}");
    assert_eq!(condition(&status, "Available")["status"], "True", "{status:#}");
    let servers = status["serverList"].as_array().map_or(0, Vec::len);
    assert_eq!(servers, 0, "no servers while not Ready: {status:#}");
    let unschedulable = eventually("the fourth Pod to be Unschedulable", || async {
        let pods = pods_of(&ns, "cache").await;
        pods.into_iter().find(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
            conditions.iter().any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))
        })
    })
    .await;
    assert!(node_of(&unschedulable).is_empty() && pod_ip(&unschedulable).is_empty());

    // Down to two: the Pending one and one more go, Ready again.
    set_replicas(&ns, "cache", 2).await;
    let status = status_with(&ns, "cache", 2, "True").await;
    assert_eq!(condition(&status, "Degraded")["status"], "False", "{status:#}");
    let pods = ready_pods(&ns, "cache", 2).await;
    let ips: BTreeSet<String> = pods.iter().map(pod_ip).collect();
    eventually_within(POD_WAIT, "the Service's endpoints to follow the scale-down", || async {
        (endpoint_addresses(&ns, "cache").await == ips).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_referenced_secret_change_rolls_out_new_ready_pods() {
    let ns = pods_namespace("pods-rollout").await;
    ns.create_secret("sasl", json!({"password-file": "memcached:first"})).await;
    let _operator = ns.start_operator().await;
    let spec =
        json!({"replicas": 2, "security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "sasl"}}}});
    ns.create_memcached("cache", spec).await;
    status_with(&ns, "cache", 2, "True").await;
    let before: BTreeSet<String> =
        ready_pods(&ns, "cache", 2).await.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let deployments: Api<Deployment> = Api::namespaced(ns.client.clone(), &ns.namespace);
    let hash_of = |d: &Deployment| {
        let template = d.spec.template.metadata.as_ref();
        template.and_then(|m| m.annotations.as_ref()?.get("memcached.c5c3.io/secret-hash").cloned())
    };
    let old_hash = hash_of(&deployments.get("cache").await.expect("the Deployment")).expect("a secret hash");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(ns.client.clone(), &ns.namespace);
    let old_sets: Vec<String> = replica_sets
        .list(&instance("cache"))
        .await
        .expect("ReplicaSets")
        .items
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    assert_eq!(old_sets.len(), 1, "{old_sets:?}");

    // New credentials: the operator rewrites the hash, the Deployment rolls.
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.namespace);
    let patch = json!({"stringData": {"password-file": "memcached:second"}});
    secrets.patch("sasl", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("changing the Secret");

    let new_set = eventually_within(POD_WAIT, "a new ReplicaSet with 2 Ready Pods, the old one at 0", || async {
        let sets = replica_sets.list(&instance("cache")).await.ok()?.items;
        let ready = |r: &ReplicaSet| r.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
        let replicas = |r: &ReplicaSet| r.spec.replicas.unwrap_or(0);
        let is_old = |r: &ReplicaSet| r.metadata.name.as_ref().is_some_and(|n| old_sets.contains(n));
        let new = sets.iter().find(|r| !is_old(r))?;
        let old_drained = sets.iter().filter(|r| is_old(r)).all(|r| replicas(r) == 0);
        (ready(new) == 2 && old_drained).then(|| new.metadata.name.clone().unwrap_or_default())
    })
    .await;
    let new_hash = hash_of(&deployments.get("cache").await.expect("the Deployment")).expect("a secret hash");
    assert_ne!(new_hash, old_hash, "the Secret's change must change the hash");

    // Every Pod now is new, Ready with an IP, and belongs to the new ReplicaSet.
    let pods = ready_pods(&ns, "cache", 2).await;
    for pod in &pods {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        assert!(!before.contains(&uid), "Pod {:?} survived the rollout", pod.metadata.name);
        let owner = pod.metadata.owner_references.as_ref().and_then(|o| o.first()).map(|o| o.name.clone());
        assert_eq!(owner.as_deref(), Some(new_set.as_str()));
    }
    // The status saw the rollout through: 2/2 Ready, nothing left to update.
    ns.wait_status("cache", |s| {
        s["readyReplicas"] == 2
            && condition(s, "Ready")["status"] == "True"
            && condition(s, "Progressing")["status"] == "False"
    })
    .await;
}
