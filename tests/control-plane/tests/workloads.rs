//! The pods mode runs what a cluster runs: a StatefulSet with a volume
//! claim template comes up with its replicas Ready on the fake Nodes and
//! its claims Bound (the default StorageClass's provisioner gives each a
//! volume on its Pod's Node); a DaemonSet gets a Pod per Node and its
//! status; a deleted claim's volume is deleted.

use std::time::Duration;

use control_plane::{ControlPlane, FAKE_NODES, Options, STORAGE_CLASS, User, pod_ready_with_ip};
use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

const WAIT: Duration = Duration::from_secs(90);

/// Polls `check` until it gives a value, for at most [`WAIT`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulsets_get_bound_volumes_and_daemonsets_a_status() {
    let plane = ControlPlane::start_with(Options { audit_log: false, ..Options::pods() }).expect("control plane");
    eprintln!("pods mode started in {:.2}s", plane.startup_time().as_secs_f64());
    let client = plane.client(User::Admin).await.expect("client");

    let statefulset: StatefulSet = from_json(serde_json::json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "registry.k8s.io/pause:3.10",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }));
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    statefulsets.create(&PostParams::default(), &statefulset).await.expect("create the StatefulSet");

    let daemonset: DaemonSet = from_json(serde_json::json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10"}]}}
        }
    }));
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    daemonsets.create(&PostParams::default(), &daemonset).await.expect("create the DaemonSet");

    // The StatefulSet: both replicas Ready, one after the other.
    let ready = eventually("the StatefulSet's 2 replicas Ready", || async {
        let status = statefulsets.get("db").await.ok()?.status?;
        (status.ready_replicas == Some(2) && status.available_replicas == Some(2)).then_some(status)
    })
    .await;
    assert_eq!(ready.replicas, 2);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["db-0", "db-1"] {
        let pod = pods.get(name).await.expect("the StatefulSet's Pod");
        assert!(pod_ready_with_ip(&pod), "{name} is Ready with an IP");
    }

    // Its claims: Bound, of the default class, to a volume on the Pod's Node.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    for ordinal in 0..2 {
        let claim = claims.get(&format!("data-db-{ordinal}")).await.expect("the claim of the template");
        let spec = claim.spec.expect("a claim spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some(STORAGE_CLASS), "the default class");
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
        let volume = volumes.get(&spec.volume_name.expect("bound to a volume")).await.expect("the volume");
        let node = pods.get(&format!("db-{ordinal}")).await.expect("Pod").spec.and_then(|s| s.node_name);
        let on = volume.spec.and_then(|s| s.node_affinity).and_then(|a| a.required).expect("node affinity");
        let values = on.node_selector_terms[0].match_expressions.as_ref().and_then(|e| e[0].values.clone());
        assert_eq!(values, node.map(|n| vec![n]), "the volume is on db-{ordinal}'s Node");
    }

    // The DaemonSet: a Pod on every Node, and a status saying so.
    let nodes = FAKE_NODES.len() as i32;
    eventually("the DaemonSet's status", || async {
        let status = daemonsets.get("agent").await.ok()?.status?;
        (status.desired_number_scheduled == nodes && status.number_ready == nodes).then_some(())
    })
    .await;
    let agents = pods.list(&ListParams::default().labels("app=agent")).await.expect("list").items;
    assert_eq!(agents.len(), FAKE_NODES.len());

    // Deleting the StatefulSet leaves its claims (as Kubernetes does); a
    // deleted claim's volume is deleted once no Pod uses it.
    statefulsets.delete("db", &DeleteParams::background()).await.expect("delete the StatefulSet");
    let volume = claims.get("data-db-1").await.expect("claim").spec.and_then(|s| s.volume_name).expect("volume");
    claims.delete("data-db-1", &DeleteParams::default()).await.expect("delete the claim");
    eventually("the released volume deleted", || async {
        volumes.get_opt(&volume).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(claims.get_opt("data-db-0").await.expect("get").is_some(), "the other claim stays");
}
