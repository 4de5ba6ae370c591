//! The pods mode's volumes, as a cluster with rancher's local-path
//! provisioner has them: a default StorageClass ([`STORAGE_CLASS`],
//! WaitForFirstConsumer) and a provisioner that gives each claim the
//! scheduler has placed (`volume.kubernetes.io/selected-node`) a hostPath
//! PersistentVolume on that Node, bound to the claim; kube-controller-
//! manager's binder completes the binding. A released volume is deleted
//! (reclaimPolicy Delete). No container runs, so nothing is ever written
//! to the paths.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::thread::JoinHandle;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;

use crate::Error;

/// The default StorageClass of the pods mode.
pub const STORAGE_CLASS: &str = "local-path";
/// Its provisioner's name (in the PVs' `pv.kubernetes.io/provisioned-by`).
pub const PROVISIONER: &str = "control-plane.local/hostpath";

const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// The StorageClass every claim without one gets (the API server's
/// DefaultStorageClass admission sets it).
pub(crate) fn storage_class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(STORAGE_CLASS.into()),
            annotations: Some([("storageclass.kubernetes.io/is-default-class".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..StorageClass::default()
    }
}

/// The provisioner, on a thread of its own; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Provisioner {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Provisioner {
    /// Provisions from now on, as the user of `kubeconfig`, under `root`.
    pub(crate) fn start(kubeconfig: PathBuf, root: PathBuf) -> Result<Self, Error> {
        let (stop, stopped) = oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("building the provisioner's runtime", e))?;
        // The client is made on the runtime that drives it.
        let run = async move {
            match client(&kubeconfig).await {
                Ok(client) => provision(client, root, stopped).await,
                Err(error) => tracing::error!(%error, "the volume provisioner has no client"),
            }
        };
        let thread = std::thread::Builder::new()
            .name("provisioner".into())
            .spawn(move || runtime.block_on(run))
            .map_err(|e| Error::io("starting the provisioner's thread", e))?;
        Ok(Provisioner { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn client(kubeconfig: &std::path::Path) -> Result<Client, Error> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Watches claims and volumes until `stopped`: a placed claim gets its
/// volume, a released volume of ours goes.
async fn provision(client: Client, root: PathBuf, mut stopped: oneshot::Receiver<()>) {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client);
    let mut claim_events = watcher(claims, watcher::Config::default()).default_backoff().applied_objects().boxed();
    let mut volume_events =
        watcher(volumes.clone(), watcher::Config::default()).default_backoff().applied_objects().boxed();
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            Some(claim) = claim_events.next() => match claim {
                Ok(claim) => {
                    if let Some(volume) = volume_for(&claim, &root) {
                        create(&volumes, &volume).await;
                    }
                }
                Err(error) => tracing::debug!(%error, "watching PersistentVolumeClaims"),
            },
            Some(volume) = volume_events.next() => match volume {
                Ok(volume) if released_of_ours(&volume) => delete(&volumes, &volume.name_any()).await,
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, "watching PersistentVolumes"),
            },
        }
    }
}

async fn create(volumes: &Api<PersistentVolume>, volume: &PersistentVolume) {
    match volumes.create(&PostParams::default(), volume).await {
        Ok(_) => tracing::debug!(volume = volume.name_any(), "provisioned"),
        // Provisioned on an earlier event of the same claim.
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => tracing::warn!(volume = volume.name_any(), %error, "provisioning"),
    }
}

async fn delete(volumes: &Api<PersistentVolume>, name: &str) {
    match volumes.delete(name, &DeleteParams::default()).await {
        Ok(_) => tracing::debug!(volume = name, "deleted a released volume"),
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => tracing::warn!(volume = name, %error, "deleting a released volume"),
    }
}

fn released_of_ours(volume: &PersistentVolume) -> bool {
    let ours = volume.annotations().get(PROVISIONED_BY).is_some_and(|by| by == PROVISIONER);
    let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let deleting = volume.metadata.deletion_timestamp.is_some();
    ours && released && !deleting
}

/// The volume a claim of our class should get, once the scheduler has
/// placed its Pod: on that Node, as big as the claim asks, bound to it.
pub(crate) fn volume_for(claim: &PersistentVolumeClaim, root: &std::path::Path) -> Option<PersistentVolume> {
    let spec = claim.spec.as_ref()?;
    let pending = claim.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|phase| phase == "Pending");
    let ours = spec.storage_class_name.as_deref() == Some(STORAGE_CLASS);
    if !pending || !ours || spec.volume_name.is_some() || claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let node = claim.annotations().get(SELECTED_NODE)?;
    let namespace = claim.namespace()?;
    let name = claim.name_any();
    let uid = claim.uid()?;
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|requests| requests.get("storage").cloned())
        .unwrap_or_else(|| Quantity("1Gi".into()));
    let path = root.join(format!("{namespace}_{name}_{uid}"));
    let on_node = NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: "kubernetes.io/hostname".into(),
            operator: "In".into(),
            values: Some(vec![node.clone()]),
        }]),
        ..NodeSelectorTerm::default()
    };
    Some(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("pvc-{uid}")),
            annotations: Some([(PROVISIONED_BY.to_owned(), PROVISIONER.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_owned(), size)])),
            access_modes: spec.access_modes.clone().or_else(|| Some(vec!["ReadWriteOnce".into()])),
            volume_mode: spec.volume_mode.clone(),
            persistent_volume_reclaim_policy: Some("Delete".into()),
            storage_class_name: Some(STORAGE_CLASS.into()),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(namespace),
                name: Some(name),
                uid: Some(uid),
                ..ObjectReference::default()
            }),
            host_path: Some(HostPathVolumeSource {
                path: path.to_string_lossy().into_owned(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector { node_selector_terms: vec![on_node] }),
            }),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(annotations: &[(&str, &str)], class: &str, phase: &str) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-web-0", "namespace": "ns", "uid": "u-1",
                "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "2Gi"}}},
            "status": {"phase": phase}
        }))
        .expect("a claim")
    }

    #[test]
    fn a_placed_pending_claim_of_our_class_gets_a_volume_on_its_node() {
        let root = std::path::Path::new("/tmp/volumes");
        let volume =
            volume_for(&claim(&[(SELECTED_NODE, "kwok-node-1")], STORAGE_CLASS, "Pending"), root).expect("a volume");
        let spec = volume.spec.expect("a spec");
        assert_eq!(volume.metadata.name.as_deref(), Some("pvc-u-1"));
        assert_eq!(spec.capacity.expect("capacity")["storage"], Quantity("2Gi".into()));
        let claim_ref = spec.claim_ref.expect("bound to the claim");
        assert_eq!((claim_ref.namespace.as_deref(), claim_ref.name.as_deref()), (Some("ns"), Some("data-web-0")));
        let terms = spec.node_affinity.and_then(|a| a.required).expect("node affinity").node_selector_terms;
        assert_eq!(
            terms[0].match_expressions.as_ref().expect("an expression")[0].values,
            Some(vec!["kwok-node-1".into()])
        );
        assert_eq!(spec.host_path.expect("hostPath").path, "/tmp/volumes/ns_data-web-0_u-1");

        assert!(volume_for(&claim(&[], STORAGE_CLASS, "Pending"), root).is_none(), "not placed yet");
        assert!(volume_for(&claim(&[(SELECTED_NODE, "n")], "other", "Pending"), root).is_none(), "another class");
        assert!(volume_for(&claim(&[(SELECTED_NODE, "n")], STORAGE_CLASS, "Bound"), root).is_none(), "bound");
    }
}
