//! The pods mode ([`crate::Options::pods`]): kube-scheduler, and kwok as the
//! fake kubelet of a few fake Nodes, beside the workload controllers, so a
//! Deployment's Pods are scheduled, get an IP and become Ready. No container
//! runs: kwok writes the status a kubelet would (see kwok-stages.yaml).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Node, NodeAddress, NodeSpec, NodeStatus, Pod, PodSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

use k8s_openapi::api::storage::v1::StorageClass;

use crate::process::Proc;
use crate::volumes::{self, Provisioner};
use crate::{ControlPlane, Error, User, lock, write};

/// The kube-controller-manager controllers the pods mode adds: every one a
/// cluster runs by default (`*`), as kubeadm starts them: Deployments,
/// ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs make Pods;
/// EndpointSlices list the Ready Pods behind a Service; the volume binder
/// binds claims to the volumes of [`crate::volumes`]; the HPA controller
/// holds an autoscaled Deployment at its minReplicas (no metrics server, so
/// it never scales on load); node-lifecycle watches kwok's Node leases.
/// Those that need a cloud provider (service-lb, node-route,
/// cloud-node-lifecycle) or signing keys it is not given (csrsigning) start
/// as no-ops, as on a cluster without them.
pub const POD_CONTROLLERS: [&str; 1] = ["*"];

/// How long a fake Node's lease lasts; kwok renews it, so node-lifecycle
/// sees a live kubelet (40 s, the kubelet's default).
const NODE_LEASE_SECONDS: &str = "40";

/// kwok manages the Nodes with this annotation, and only those.
pub const FAKE_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// One fake Node per zone, so hard anti-affinity on the hostname and zone
/// spread (the samples use both) can place three replicas.
pub const FAKE_NODES: [(&str, &str); 3] =
    [("kwok-node-0", "zone-a"), ("kwok-node-1", "zone-b"), ("kwok-node-2", "zone-c")];

const STAGES: &str = include_str!("kwok-stages.yaml");
const SECONDS: u64 = 60;

/// The Node objects kwok will bring up: each with its zone, its InternalIP
/// 10.1.0.<n> and its Pod range 10.244.<n>.0/24 (kwok hands out Pod IPs from
/// the Node's podCIDR), so a Pod's address tells its Node.
fn fake_node(index: usize, name: &str, zone: &str) -> Node {
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/zone", zone),
        ("type", "kwok"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let (key, value) = FAKE_NODE_ANNOTATION;
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            annotations: Some([(key.to_owned(), value.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec { pod_cidr: Some(format!("10.244.{}.0/24", index + 1)), ..NodeSpec::default() }),
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress { type_: "InternalIP".into(), address: format!("10.1.0.{}", index + 1) },
                NodeAddress { type_: "Hostname".into(), address: name.into() },
            ]),
            ..NodeStatus::default()
        }),
    }
}

impl ControlPlane {
    /// Starts kube-scheduler and kwok, creates the fake Nodes, and returns
    /// once a probe Pod has been scheduled, got an IP, become Ready and been
    /// deleted again: every step a test's Pods will take.
    pub(crate) fn start_pods(&self, scheduler_port: u16) -> Result<(), Error> {
        let kubeconfig = self.kubeconfig(User::Admin).to_string_lossy().into_owned();
        let args: Vec<String> = [
            "--kubeconfig",
            &kubeconfig,
            "--leader-elect=false",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            &scheduler_port.to_string(),
        ]
        .map(String::from)
        .to_vec();
        let log = self.dir.join("logs/kube-scheduler.log");
        let scheduler = Proc::spawn("kube-scheduler", &self.assets.join("kube-scheduler"), &args, log)?;
        *lock(&self.scheduler) = Some(scheduler);

        let stages = self.dir.join("kwok-stages.yaml");
        write(&stages, STAGES)?;
        let (key, value) = FAKE_NODE_ANNOTATION;
        let args: Vec<String> = [
            "--kubeconfig",
            &kubeconfig,
            "--config",
            &stages.to_string_lossy(),
            "--manage-nodes-with-annotation-selector",
            &format!("{key}={value}"),
            // Only for Nodes without a podCIDR; kwok's default (10.0.0.0/24)
            // is the Service range here.
            "--cidr",
            "10.244.0.0/24",
            "--node-lease-duration-seconds",
            NODE_LEASE_SECONDS,
        ]
        .map(String::from)
        .to_vec();
        let kwok = Proc::spawn("kwok", &self.assets.join("kwok"), &args, self.dir.join("logs/kwok.log"))?;
        *lock(&self.kwok) = Some(kwok);

        crate::block_on(async {
            self.create_fake_nodes().await?;
            self.wait_nodes_ready().await?;
            let classes: Api<StorageClass> = Api::all(self.client(User::Admin).await?);
            classes.create(&PostParams::default(), &volumes::storage_class()).await?;
            self.probe_pod().await
        })??;
        let provisioner = Provisioner::start(self.kubeconfig(User::Admin), self.dir.join("volumes"))?;
        *lock(&self.provisioner) = Some(provisioner);
        Ok(())
    }

    async fn create_fake_nodes(&self) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client(User::Admin).await?);
        for (index, (name, zone)) in FAKE_NODES.iter().enumerate() {
            nodes.create(&PostParams::default(), &fake_node(index, name, zone)).await?;
        }
        Ok(())
    }

    /// Waits until kwok has made every fake Node Ready, then lifts the
    /// `node.kubernetes.io/not-ready` taint the API server's
    /// TaintNodesByCondition admission puts on a new Node: the node-lifecycle
    /// controller would, but it would also want heartbeats kwok is not asked
    /// for here.
    async fn wait_nodes_ready(&self) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client(User::Admin).await?);
        let ready = |node: &Node| {
            let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
            conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
        };
        self.poll("kwok to bring the fake Nodes up", || async {
            let list = nodes.list(&Default::default()).await?;
            Ok(list.items.iter().filter(|n| ready(n)).count() >= FAKE_NODES.len())
        })
        .await?;
        let untaint = serde_json::json!({"spec": {"taints": null}});
        for (name, _) in FAKE_NODES {
            nodes.patch(name, &PatchParams::default(), &Patch::Merge(&untaint)).await?;
        }
        Ok(())
    }

    /// A Pod in `default` must be scheduled, Running, Ready with an IP, and
    /// gone after a graceful delete (kwok deletes it at once).
    async fn probe_pod(&self) -> Result<(), Error> {
        let pods: Api<Pod> = Api::namespaced(self.client(User::Admin).await?, "default");
        let probe = Pod {
            metadata: ObjectMeta { generate_name: Some("pod-probe-".into()), ..ObjectMeta::default() },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "probe".into(),
                    image: Some("registry.k8s.io/pause:3.10".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        };
        let name = pods.create(&PostParams::default(), &probe).await?.metadata.name.unwrap_or_default();
        self.poll("a probe Pod to be scheduled and Ready with an IP", || async {
            let pod = pods.get(&name).await?;
            Ok(pod_ready_with_ip(&pod))
        })
        .await?;
        pods.delete(&name, &DeleteParams::default()).await?;
        self.poll("kwok to delete the probe Pod", || async { Ok(pods.get_opt(&name).await?.is_none()) }).await
    }

    async fn poll<F, Fut>(&self, what: &str, mut done: F) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<bool, Error>>,
    {
        let deadline = Instant::now() + Duration::from_secs(SECONDS);
        loop {
            self.check_alive()?;
            if done().await? {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: what.into(), seconds: SECONDS });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Scheduled, Ready and holding an IP: what kwok's pod-ready stage writes.
pub fn pod_ready_with_ip(pod: &Pod) -> bool {
    let scheduled = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    let status = pod.status.as_ref();
    let has_ip = status.and_then(|s| s.pod_ip.as_deref()).is_some_and(|ip| !ip.is_empty());
    let ready = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    scheduled && has_ip && ready
}
