//! What the soak and the rotation bench start from: a control plane with
//! Pods (kwok nodes) and the module's RBAC, namespaces with the Secrets the
//! samples reference, Toxiproxy in front of the API server, and the watches
//! that follow every CR and child.

use std::path::{Path, PathBuf};

use control_plane::{ControlPlane, Options, User};
use kube::Client;
use kube::api::ApiResource;
use memcached_e2e::cluster::{
    Sample, create_namespace_with_secrets, memcached_resource, owned_resources, read_samples,
};

use crate::replicas::Replica;
use crate::toxiproxy::{self, Toxiproxy};
use crate::world::{self, Shared, World};
use crate::{Modules, OPERATOR_USER, SoakError, audit, machine, progress};

pub struct Cluster {
    /// The operator and host binaries (`make soak` builds them).
    pub operator: PathBuf,
    pub host: PathBuf,
    /// Logs, module files and results: `target/soak`, emptied first.
    pub dir: PathBuf,
    pub machine: String,
    pub samples: Vec<Sample>,
    pub modules: Modules,
    pub plane: ControlPlane,
    pub admin: Client,
    pub namespaces: Vec<String>,
    pub proxy: Toxiproxy,
    pub owned: Vec<ApiResource>,
    pub world: Shared,
    pub watches: Vec<tokio::task::JoinHandle<()>>,
}

impl Cluster {
    pub async fn start(root: &Path, crs: usize, namespaces: usize) -> Result<Self, SoakError> {
        let operator = root.join("target/release/memcached-operator");
        let host = root.join("target/release/wasm-operator");
        for binary in [&operator, &host] {
            if !binary.is_file() {
                return Err(SoakError::Usage(format!("{} is missing; `make soak` builds it", binary.display())));
            }
        }
        let dir = root.join("target/soak");
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| SoakError::io(format!("clearing {}", dir.display()), e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| SoakError::io(format!("creating {}", dir.display()), e))?;
        let toxiproxy_binary = toxiproxy::binary(root)?;
        let samples = read_samples(&root.join("deploy/samples"), &operator)?;
        let modules = Modules::prepare(root, &dir)?;

        // A control plane with Pods (kwok nodes), sized as the bench sizes
        // it, with the soak's audit policy.
        let plane = ControlPlane::start_with(Options {
            extra_etcd_args: vec![format!("--quota-backend-bytes={}", 8u64 << 30)],
            extra_apiserver_args: vec![
                "--max-requests-inflight=800".into(),
                "--max-mutating-requests-inflight=400".into(),
            ],
            audit_policy: Some(audit::POLICY.into()),
            ..Options::pods()
        })?;
        progress(&format!("control plane at {} ({})", plane.server_url(), plane.dir().display()));
        plane.install_crds().await?;
        plane
            .apply_yaml(&format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: soak-operator-cluster-admin}}\n\
                 roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
                 subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {OPERATOR_USER}}}]\n"
            ))
            .await?;
        plane.wait_until_allowed(User::Operator, "create", "apps", "deployments", Some("default")).await?;
        // The module writes as its own ServiceAccount (the replicas' default
        // --module-identity), with exactly the rules `memcached-operator rbac`
        // prints for it, as deploy/ installs them.
        let rbac = std::process::Command::new(&operator)
            .args(["rbac", "--namespace", "default"])
            .output()
            .map_err(|e| SoakError::io("running memcached-operator rbac", e))?;
        if !rbac.status.success() {
            let stderr = String::from_utf8_lossy(&rbac.stderr);
            return Err(SoakError::Setup(format!("memcached-operator rbac: {stderr}")));
        }
        plane.apply_yaml(&String::from_utf8_lossy(&rbac.stdout)).await?;
        plane
            .wait_until_service_account_allowed(("default", "memcached"), "create", "apps", "deployments", None)
            .await?;
        let admin = plane.client(User::Admin).await?;
        let namespaces: Vec<String> = (0..namespaces.min(crs)).map(|i| format!("soak-{i}")).collect();
        for namespace in &namespaces {
            create_namespace_with_secrets(&admin, namespace).await?;
        }
        let proxy = Toxiproxy::start(&toxiproxy_binary, &dir.join("toxiproxy.log"))?;

        // Watches before the first create.
        let world: Shared = std::sync::Arc::new(std::sync::Mutex::new(World::default()));
        let owned = owned_resources();
        let watches = world::watch(&admin, &world, &memcached_resource(), &owned);
        Ok(Cluster {
            operator,
            host,
            dir,
            machine: machine::describe(),
            samples,
            modules,
            plane,
            admin,
            namespaces,
            proxy,
            owned,
            world,
            watches,
        })
    }

    /// Replica `name`, reaching the API server through its own Toxiproxy
    /// proxy (named `replica-<name>`), with `extra` flags.
    pub fn replica(&self, name: char, extra: Vec<String>) -> Result<Replica, SoakError> {
        let upstream = self.plane.server_url().trim_start_matches("https://").to_owned();
        let listen = self.proxy.add_proxy(&format!("replica-{name}"), &upstream)?;
        let kubeconfig = self.dir.join(format!("replica-{name}.kubeconfig"));
        toxiproxy::proxied_kubeconfig(&self.plane.kubeconfig(User::Operator), &listen, &kubeconfig)?;
        Replica::new(name, &self.operator, &kubeconfig, &self.modules.watched, &self.dir, extra)
    }
}

/// `--concurrency N` when given, else nothing: the operator's default.
pub fn concurrency_flag(concurrency: Option<u16>) -> Vec<String> {
    concurrency.map(|n| vec!["--concurrency".to_owned(), n.to_string()]).unwrap_or_default()
}
