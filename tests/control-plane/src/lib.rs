//! A real Kubernetes control plane on loopback for tests and `make run`:
//! etcd, kube-apiserver and (optionally) kube-controller-manager from
//! `scripts/envtest.sh`, on free ports in a temp dir, with two static-token
//! users and a JSON audit log; in the pods mode ([`Options::pods`]) also
//! kube-scheduler and kwok with fake Nodes, so Pods start. See
//! tests/envtest/README.md.
//!
//! ```no_run
//! # async fn demo() -> Result<(), control_plane::Error> {
//! use control_plane::{ControlPlane, User};
//! let cp = ControlPlane::shared();          // one per test process
//! cp.install_crds().await?;
//! let ns = cp.create_namespace("my-test").await?;
//! let client = cp.client(User::Operator).await?;
//! # Ok(()) }
//! ```

mod apply;
pub mod audit;
mod error;
mod pki;
mod pods;
mod process;
mod volumes;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use apply::FIELD_MANAGER;
pub use audit::{AuditEvent, AuditMark};
pub use error::Error;
pub use pods::{FAKE_NODES, POD_CONTROLLERS, pod_ready_with_ip};
use process::Proc;
pub use volumes::{PROVISIONER, STORAGE_CLASS};

/// The binaries `scripts/envtest.sh` provides.
const BINARIES: [&str; 6] = ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kube-scheduler", "kwok"];
/// Temp dirs are `<tmp>/memcached-control-plane-<pid>-<random>`; the pid lets
/// a later run remove what a killed test process left behind.
const DIR_PREFIX: &str = "memcached-control-plane-";
const START_ATTEMPTS: usize = 3;

/// Who a client or kubeconfig authenticates as (static bearer tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum User {
    /// `admin`, in `system:masters`: every permission, no RBAC needed.
    Admin,
    /// `memcached-operator`, in no group: only the RBAC a test binds to it
    /// (besides what every authenticated user gets, such as discovery).
    Operator,
}

impl User {
    /// The user name the API server sees (RBAC subjects, audit events).
    pub fn name(self) -> &'static str {
        match self {
            User::Admin => "admin",
            User::Operator => "memcached-operator",
        }
    }

    fn kubeconfig_file(self) -> &'static str {
        match self {
            User::Admin => "kubeconfig",
            User::Operator => "operator.kubeconfig",
        }
    }
}

/// What to run besides etcd and the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Run kube-controller-manager (garbage collection, namespace deletion).
    pub controller_manager: bool,
    /// The controllers it runs. No deployment/replicaset controllers by
    /// default: without nodes they would only fight tests that write
    /// Deployment status themselves.
    pub controllers: Vec<String>,
    /// Write the API server's audit log (Metadata level, ResponseComplete).
    pub audit_log: bool,
    /// Pods that start: also run kube-scheduler, the controllers in
    /// [`POD_CONTROLLERS`] (added to `controllers`) and kwok as the fake
    /// kubelet of [`FAKE_NODES`]. Needs `controller_manager`. Off by default:
    /// about a second more to start, and most tests need no Pods.
    pub pods: bool,
    /// Flags appended to etcd's (e.g. `--quota-backend-bytes` for tens of
    /// thousands of objects). None by default.
    pub extra_etcd_args: Vec<String>,
    /// Flags appended to kube-apiserver's (e.g. higher inflight limits).
    /// None by default.
    pub extra_apiserver_args: Vec<String>,
    /// The audit policy (YAML) instead of [`audit::POLICY`] (e.g. request
    /// and response bodies of some writes, for `make soak`). Keep
    /// `omitStages: [RequestReceived, ResponseStarted]`: the readers expect
    /// one event per request.
    pub audit_policy: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            controller_manager: true,
            controllers: vec!["garbagecollector".into(), "namespace".into()],
            audit_log: true,
            pods: false,
            extra_etcd_args: Vec::new(),
            extra_apiserver_args: Vec::new(),
            audit_policy: None,
        }
    }
}

impl Options {
    /// The default options in the pods mode.
    pub fn pods() -> Self {
        Options { pods: true, ..Options::default() }
    }

    /// The controllers kube-controller-manager runs: `controllers`, plus
    /// [`POD_CONTROLLERS`] in the pods mode.
    fn effective_controllers(&self) -> Vec<String> {
        let mut controllers = self.controllers.clone();
        if self.pods {
            for controller in POD_CONTROLLERS {
                if !controllers.iter().any(|c| c == controller) {
                    controllers.push(controller.into());
                }
            }
        }
        controllers
    }
}

/// A running control plane. Dropping it stops kwok, the scheduler, the
/// controller manager, the API server and etcd (in that order) and removes its
/// temp dir; the processes also die with the test process if it is killed.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    assets: PathBuf,
    options: Options,
    api_port: u16,
    apiserver_args: Vec<String>,
    etcd: Mutex<Option<Proc>>,
    apiserver: Mutex<Option<Proc>>,
    controller_manager: Mutex<Option<Proc>>,
    scheduler: Mutex<Option<Proc>>,
    kwok: Mutex<Option<Proc>>,
    provisioner: Mutex<Option<volumes::Provisioner>>,
    startup: Duration,
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

impl ControlPlane {
    /// Starts a control plane with the default [`Options`]; blocks until it
    /// is ready. Safe to call from inside a tokio runtime.
    pub fn start() -> Result<Self, Error> {
        Self::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> Result<Self, Error> {
        if options.pods && !options.controller_manager {
            return Err(Error::Options("pods needs controller_manager: Deployments make Pods through it".into()));
        }
        let began = Instant::now();
        let assets = find_assets()?;
        sweep_stale_dirs();
        let mut attempt = 1;
        loop {
            match Self::start_once(&assets, &options) {
                Ok(mut plane) => {
                    plane.startup = began.elapsed();
                    tracing::info!(
                        server = %plane.server_url(),
                        dir = %plane.dir.display(),
                        seconds = plane.startup.as_secs_f64(),
                        "control plane ready"
                    );
                    return Ok(plane);
                }
                // A free port taken by someone else between our probe and the
                // bind shows up as an early exit: try again on new ports.
                Err(e @ Error::Exited { .. }) if attempt < START_ATTEMPTS => {
                    tracing::warn!(attempt, error = %e, "control plane start failed; retrying");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One control plane per test process, started on first use and stopped
    /// when the process exits (an atexit hook, and PR_SET_PDEATHSIG if the
    /// process is killed). Panics if it cannot start.
    ///
    /// Tests sharing it must not restart it or change cluster-wide state that
    /// others rely on; they should work in a namespace of their own
    /// ([`ControlPlane::create_namespace`]).
    pub fn shared() -> &'static ControlPlane {
        Self::shared_with(Options::default())
    }

    /// [`ControlPlane::shared`] with `options` (e.g. [`Options::pods`]). All
    /// callers in one process must pass the same options: it panics otherwise.
    pub fn shared_with(options: Options) -> &'static ControlPlane {
        let plane = SHARED.get_or_init(|| {
            let started = ControlPlane::start_with(options.clone()).map_err(|e| e.to_string());
            if started.is_ok() {
                // SAFETY: registering a plain extern "C" fn.
                unsafe { libc::atexit(stop_shared) };
            }
            started
        });
        match plane {
            Ok(plane) if plane.options == options => plane,
            Ok(plane) => panic!("the shared control plane runs with {:?}, not {options:?}", plane.options),
            Err(e) => panic!("the shared control plane did not start: {e}"),
        }
    }

    fn start_once(assets: &Path, options: &Options) -> Result<Self, Error> {
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}-{}", std::process::id(), pki::suffix()?));
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let [etcd_port, peer_port, api_port, kcm_port, scheduler_port] = free_ports()?;
        // From here on, dropping `plane` (on any error) stops what runs and
        // removes the dir.
        let mut plane = ControlPlane {
            dir,
            assets: assets.to_owned(),
            options: options.clone(),
            api_port,
            apiserver_args: Vec::new(),
            etcd: Mutex::new(None),
            apiserver: Mutex::new(None),
            controller_manager: Mutex::new(None),
            scheduler: Mutex::new(None),
            kwok: Mutex::new(None),
            provisioner: Mutex::new(None),
            startup: Duration::ZERO,
        };
        let dir = plane.dir.clone();
        let path = |name: &str| dir.join(name).to_string_lossy().into_owned();

        let admin_token = pki::token()?;
        let operator_token = pki::token()?;
        let (sa_key, sa_pub) = pki::service_account_key_pair()?;
        write(
            &dir.join("tokens.csv"),
            &format!(
                "{admin_token},admin,admin-uid,system:masters\n{operator_token},{},memcached-operator-uid\n",
                User::Operator.name()
            ),
        )?;
        write(&dir.join("sa.key"), &sa_key)?;
        write(&dir.join("sa.pub"), &sa_pub)?;

        let etcd_args: Vec<String> = [
            "--name",
            "default",
            "--data-dir",
            &path("etcd"),
            "--listen-client-urls",
            &format!("http://127.0.0.1:{etcd_port}"),
            "--advertise-client-urls",
            &format!("http://127.0.0.1:{etcd_port}"),
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{peer_port}"),
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer_port}"),
            "--initial-cluster",
            &format!("default=http://127.0.0.1:{peer_port}"),
            // Test data need not survive a power cut; fsync dominates etcd's latency.
            "--unsafe-no-fsync",
            "--log-level",
            "warn",
        ]
        .map(String::from)
        .to_vec();
        let etcd_args = [etcd_args, options.extra_etcd_args.clone()].concat();
        let etcd = Proc::spawn("etcd", &assets.join("etcd"), &etcd_args, dir.join("logs/etcd.log"))?;
        *lock(&plane.etcd) = Some(etcd);
        plane.wait_sync(&format!("etcd on 127.0.0.1:{etcd_port}"), 30, || {
            TcpStream::connect(("127.0.0.1", etcd_port)).is_ok()
        })?;

        let mut apiserver_args: Vec<String> = [
            "--etcd-servers",
            &format!("http://127.0.0.1:{etcd_port}"),
            "--cert-dir",
            &path("certs"),
            "--secure-port",
            &api_port.to_string(),
            "--bind-address",
            "127.0.0.1",
            "--advertise-address",
            "127.0.0.1",
            "--endpoint-reconciler-type",
            "none",
            "--service-cluster-ip-range",
            "10.0.0.0/24",
            "--service-account-issuer",
            &format!("https://127.0.0.1:{api_port}"),
            "--service-account-key-file",
            &path("sa.pub"),
            "--service-account-signing-key-file",
            &path("sa.key"),
            "--token-auth-file",
            &path("tokens.csv"),
            "--authorization-mode",
            "RBAC",
            // No token controller runs, so Pods could never get their token.
            "--disable-admission-plugins",
            "ServiceAccount",
            // As in many production clusters: setting an owner reference
            // needs delete on the object, blockOwnerDeletion needs update
            // on the owner's finalizers (tests/deploy.rs relies on it).
            "--enable-admission-plugins",
            "OwnerReferencesPermissionEnforcement",
            // MutatingAdmissionPolicy is beta and off by default in 1.35;
            // deploy/admission/ stores the Memcached defaults with it.
            "--feature-gates",
            "MutatingAdmissionPolicy=true",
            "--runtime-config",
            "admissionregistration.k8s.io/v1beta1=true",
            "--allow-privileged=true",
        ]
        .map(String::from)
        .to_vec();
        if options.audit_log {
            write(&dir.join("audit-policy.yaml"), options.audit_policy.as_deref().unwrap_or(audit::POLICY))?;
            apiserver_args.extend(
                [
                    "--audit-policy-file",
                    &path("audit-policy.yaml"),
                    "--audit-log-path",
                    &path("audit.log"),
                    "--audit-log-format",
                    "json",
                    // Blocking: the event is written before the request's
                    // handler returns, so a test rarely has to wait for it.
                    "--audit-log-mode",
                    "blocking",
                    // In megabytes; 0 would mean lumberjack's default of
                    // 100 MB, after which the log rotates and a mark taken
                    // before points into the new file (a run at 100,000
                    // CRs writes several GB).
                    "--audit-log-maxsize",
                    "1000000",
                ]
                .map(String::from),
            );
        }
        apiserver_args.extend(options.extra_apiserver_args.iter().cloned());
        plane.apiserver_args = apiserver_args;
        plane.spawn_apiserver()?;

        // The API server writes its self-signed certificate (with its CA) on
        // start; the key is written after the certificate.
        let cert = dir.join("certs/apiserver.crt");
        let key = dir.join("certs/apiserver.key");
        plane.wait_sync("the API server's serving certificate", 60, || key.exists())?;
        let ca = std::fs::read(&cert).map_err(|e| Error::io(format!("reading {}", cert.display()), e))?;
        for (user, token) in [(User::Admin, &admin_token), (User::Operator, &operator_token)] {
            let text = kubeconfig_yaml(&plane.server_url(), &ca, user, token)?;
            write(&plane.kubeconfig(user), &text)?;
        }
        block_on(plane.wait_apiserver_ready())??;

        if options.controller_manager {
            let controllers = options.effective_controllers().join(",");
            let mut args: Vec<String> = [
                "--kubeconfig",
                &plane.kubeconfig(User::Admin).to_string_lossy(),
                "--leader-elect=false",
                "--controllers",
                &controllers,
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &kcm_port.to_string(),
            ]
            .map(String::from)
            .to_vec();
            if options.pods {
                // The HPA controller handles a new HPA only after one sync
                // period (15 s by default): an autoscaled Deployment would
                // sit below its minReplicas that long.
                args.push("--horizontal-pod-autoscaler-sync-period=2s".into());
                // The token controller fills in service-account-token
                // Secrets, signed as the API server verifies them.
                args.push(format!("--service-account-private-key-file={}", path("sa.key")));
                args.push(format!("--root-ca-file={}", path("certs/apiserver.crt")));
            }
            let binary = assets.join("kube-controller-manager");
            let kcm =
                Proc::spawn("kube-controller-manager", &binary, &args, dir.join("logs/kube-controller-manager.log"))?;
            *lock(&plane.controller_manager) = Some(kcm);
            if options.controllers.iter().any(|c| c == "garbagecollector") {
                block_on(plane.wait_garbage_collector())??;
            }
        }
        if options.pods {
            plane.start_pods(scheduler_port)?;
        }
        Ok(plane)
    }

    fn spawn_apiserver(&self) -> Result<(), Error> {
        let binary = self.assets.join("kube-apiserver");
        // Appending, so a restart keeps the log of the first run.
        let log = self.dir.join("logs/kube-apiserver.log");
        let previous = std::fs::read(&log).unwrap_or_default();
        let proc = Proc::spawn("kube-apiserver", &binary, &self.apiserver_args, log.clone())?;
        if !previous.is_empty() {
            let _ = std::fs::write(self.dir.join("logs/kube-apiserver.previous.log"), previous);
        }
        *lock(&self.apiserver) = Some(proc);
        Ok(())
    }

    /// Errors if any process that should run has exited.
    fn check_alive(&self) -> Result<(), Error> {
        for slot in [&self.etcd, &self.apiserver, &self.controller_manager, &self.scheduler, &self.kwok] {
            if let Some(proc) = lock(slot).as_mut() {
                proc.check_alive()?;
            }
        }
        Ok(())
    }

    fn wait_sync(&self, what: &str, seconds: u64, mut ready: impl FnMut() -> bool) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            self.check_alive()?;
            if ready() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: what.into(), seconds });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// /readyz answers ok and the `default` namespace exists.
    async fn wait_apiserver_ready(&self) -> Result<(), Error> {
        const SECONDS: u64 = 60;
        let client = self.client(User::Admin).await?;
        let deadline = Instant::now() + Duration::from_secs(SECONDS);
        let namespaces: Api<Namespace> = Api::all(client.clone());
        loop {
            self.check_alive()?;
            let request = http::Request::get("/readyz").body(Vec::new());
            let ready = match request {
                Ok(request) => matches!(client.request_text(request).await.as_deref(), Ok("ok")),
                Err(_) => false,
            };
            if ready && matches!(namespaces.get_opt("default").await, Ok(Some(_))) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: "the API server to be ready".into(), seconds: SECONDS });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Proves the garbage collector runs: a ConfigMap owned by a deleted
    /// ConfigMap must disappear.
    async fn wait_garbage_collector(&self) -> Result<(), Error> {
        const SECONDS: u64 = 60;
        let client = self.client(User::Admin).await?;
        let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
        let named = |prefix: &str| ConfigMap {
            metadata: ObjectMeta { generate_name: Some(prefix.into()), ..ObjectMeta::default() },
            ..ConfigMap::default()
        };
        let owner = config_maps.create(&PostParams::default(), &named("gc-probe-owner-")).await?;
        let mut dependent = named("gc-probe-dependent-");
        dependent.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.metadata.name.clone().unwrap_or_default(),
            uid: owner.metadata.uid.clone().unwrap_or_default(),
            ..OwnerReference::default()
        }]);
        let dependent = config_maps.create(&PostParams::default(), &dependent).await?;
        let dependent_name = dependent.metadata.name.unwrap_or_default();
        config_maps.delete(&owner.metadata.name.unwrap_or_default(), &DeleteParams::background()).await?;
        let deadline = Instant::now() + Duration::from_secs(SECONDS);
        loop {
            self.check_alive()?;
            if config_maps.get_opt(&dependent_name).await?.is_none() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "the garbage collector to delete a dependent".into(),
                    seconds: SECONDS,
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the API server and starts it again on the same port, certificates
    /// and etcd; returns once it is ready. Clients reconnect on their own.
    /// Not for the shared control plane: other tests would see it go away.
    pub fn restart_apiserver(&self) -> Result<(), Error> {
        let old = lock(&self.apiserver).take().ok_or(Error::Stopped)?;
        let began = Instant::now();
        old.stop(Duration::from_secs(30));
        self.spawn_apiserver()?;
        block_on(self.wait_apiserver_ready())??;
        tracing::info!(seconds = began.elapsed().as_secs_f64(), "API server restarted");
        Ok(())
    }

    /// The process ids of the API server and etcd while they run, by name:
    /// a bench reads their CPU and memory from /proc.
    pub fn server_pids(&self) -> Vec<(&'static str, u32)> {
        [&self.apiserver, &self.etcd]
            .into_iter()
            .filter_map(|slot| lock(slot).as_ref().map(|proc| (proc.name, proc.child.id())))
            .collect()
    }

    /// `https://127.0.0.1:<port>`
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The kubeconfig file for `user` (certificate and token inline, so a
    /// copy works anywhere while the control plane runs).
    pub fn kubeconfig(&self, user: User) -> PathBuf {
        self.dir.join(user.kubeconfig_file())
    }

    pub async fn client(&self, user: User) -> Result<Client, Error> {
        let path = self.kubeconfig(user);
        let kubeconfig = Kubeconfig::read_from(&path)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// `kubectl --kubeconfig <admin>`; add the arguments.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(self.assets.join("kubectl"));
        command.arg("--kubeconfig").arg(self.kubeconfig(User::Admin));
        command
    }

    /// Server-side applies every document of `yaml` as admin (field manager
    /// `control-plane`, forced), in order; a namespaced object without a
    /// namespace goes to `default`. Waits for each CRD to be Established, so
    /// its custom resources can follow in the same call.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>, Error> {
        let client = self.client(User::Admin).await?;
        apply::apply_yaml(&client, yaml).await
    }

    /// Applies our CRD (deploy/crd/) and the test-only ones (tests/crds/:
    /// ServiceMonitor). Idempotent, so every test may call it.
    pub async fn install_crds(&self) -> Result<(), Error> {
        let root = repo_root();
        for folder in [root.join("deploy/crd"), root.join("tests/crds")] {
            for file in yaml_files(&folder)? {
                let text =
                    std::fs::read_to_string(&file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
                self.apply_yaml(&text).await?;
            }
        }
        Ok(())
    }

    /// Creates a namespace named `<prefix>-<random>` and returns its name.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, Error> {
        let client = self.client(User::Admin).await?;
        let namespace = Namespace {
            metadata: ObjectMeta { generate_name: Some(format!("{prefix}-")), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        let created = Api::<Namespace>::all(client).create(&PostParams::default(), &namespace).await?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    /// Waits until the API server's authorizer lets `user` do `verb` on
    /// `resource` (in `group`, "" for core; in `namespace`, or cluster-wide).
    /// RBAC objects reach the authorizer through an informer, so a request
    /// right after applying a RoleBinding can still be denied.
    pub async fn wait_until_allowed(
        &self,
        user: User,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(), Error> {
        self.wait_until_subject_allowed(user.name(), &[], (verb, group, resource, None), namespace).await
    }

    /// [`Self::wait_until_allowed`] on the object `name` only (rules with
    /// `resourceNames`, such as `impersonate` on one ServiceAccount).
    pub async fn wait_until_allowed_on(
        &self,
        user: User,
        (verb, group, resource, name): (&str, &str, &str, &str),
        namespace: Option<&str>,
    ) -> Result<(), Error> {
        self.wait_until_subject_allowed(user.name(), &[], (verb, group, resource, Some(name)), namespace).await
    }

    /// [`Self::wait_until_allowed`] for ServiceAccount `name` in
    /// `account_namespace` (with the groups the API server gives it).
    pub async fn wait_until_service_account_allowed(
        &self,
        (account_namespace, name): (&str, &str),
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(), Error> {
        let user = format!("system:serviceaccount:{account_namespace}:{name}");
        let groups =
            ["system:serviceaccounts", &format!("system:serviceaccounts:{account_namespace}")].map(String::from);
        self.wait_until_subject_allowed(&user, &groups, (verb, group, resource, None), namespace).await
    }

    async fn wait_until_subject_allowed(
        &self,
        user: &str,
        groups: &[String],
        (verb, group, resource, name): (&str, &str, &str, Option<&str>),
        namespace: Option<&str>,
    ) -> Result<(), Error> {
        const SECONDS: u64 = 30;
        let reviews: Api<SubjectAccessReview> = Api::all(self.client(User::Admin).await?);
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.into()),
                groups: (!groups.is_empty()).then(|| groups.to_vec()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    name: name.map(String::from),
                    namespace: namespace.map(String::from),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let deadline = Instant::now() + Duration::from_secs(SECONDS);
        loop {
            let answer = reviews.create(&PostParams::default(), &review).await?;
            if answer.status.is_some_and(|s| s.allowed) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let what = format!("{user} to be allowed to {verb} {resource}");
                return Err(Error::Timeout { what, seconds: SECONDS });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The audit log file, if it is on.
    pub fn audit_log_path(&self) -> Option<PathBuf> {
        self.options.audit_log.then(|| self.dir.join("audit.log"))
    }

    /// Every request the API server completed, oldest first.
    pub fn audit_events(&self) -> Result<Vec<AuditEvent>, Error> {
        self.audit_events_since(AuditMark(0))
    }

    /// The end of the audit log now; pass it to [`Self::audit_events_since`].
    pub fn audit_mark(&self) -> Result<AuditMark, Error> {
        audit::mark(&self.audit_log_path().ok_or(Error::NoAuditLog)?)
    }

    pub fn audit_events_since(&self, mark: AuditMark) -> Result<Vec<AuditEvent>, Error> {
        audit::read(&self.audit_log_path().ok_or(Error::NoAuditLog)?, mark)
    }

    /// Writes (create, update, patch, delete, deletecollection) by `user`
    /// since `mark`.
    pub fn writes_by(&self, user: &str, mark: AuditMark) -> Result<Vec<AuditEvent>, Error> {
        let events = self.audit_events_since(mark)?;
        Ok(events.into_iter().filter(|e| e.user == user && e.is_write()).collect())
    }

    /// Returns once every request that completed before the call is in the
    /// audit log: it sends a marker request and waits for its event.
    pub async fn audit_sync(&self) -> Result<(), Error> {
        const SECONDS: u64 = 10;
        let mark = self.audit_mark()?;
        let marker = format!("audit-sync-{}", pki::suffix()?);
        let client = self.client(User::Admin).await?;
        Api::<ConfigMap>::namespaced(client, "default").get_opt(&marker).await?;
        let deadline = Instant::now() + Duration::from_secs(SECONDS);
        loop {
            let events = self.audit_events_since(mark)?;
            if events.iter().any(|e| e.name.as_deref() == Some(marker.as_str())) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: "the audit log to catch up".into(), seconds: SECONDS });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How long [`ControlPlane::start`] took, up to ready.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The temp dir: kubeconfigs, certs, etcd data, `logs/`, `audit.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder holding etcd, kube-apiserver, kube-controller-manager,
    /// kubectl, kube-scheduler and kwok.
    pub fn assets(&self) -> &Path {
        &self.assets
    }

    /// Stops everything and removes the temp dir (kept when
    /// CONTROL_PLANE_KEEP_DIR is set). Idempotent; Drop calls it.
    pub fn stop(&self) {
        drop(lock(&self.provisioner).take());
        for (slot, grace) in [
            (&self.kwok, Duration::from_secs(10)),
            (&self.scheduler, Duration::from_secs(10)),
            (&self.controller_manager, Duration::from_secs(10)),
            (&self.apiserver, Duration::from_secs(30)),
            (&self.etcd, Duration::from_secs(10)),
        ] {
            if let Some(proc) = lock(slot).take() {
                proc.stop(grace);
            }
        }
        if std::env::var_os("CONTROL_PLANE_KEEP_DIR").is_some() {
            tracing::info!(dir = %self.dir.display(), "keeping the control plane's dir");
        } else if self.dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.dir)
        {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove the control plane's dir");
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

extern "C" fn stop_shared() {
    if let Some(Ok(plane)) = SHARED.get() {
        plane.stop();
    }
}

/// The repository root (this crate lives in tests/control-plane).
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The folder with the six binaries: KUBEBUILDER_ASSETS when it has them all,
/// else whatever scripts/envtest.sh prints (it builds what is missing).
pub fn find_assets() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from)
        && BINARIES.iter().all(|b| dir.join(b).is_file())
    {
        return Ok(dir);
    }
    let script = repo_root().join("scripts/envtest.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| Error::io(format!("running {}", script.display()), e))?;
    if !output.status.success() {
        return Err(Error::Assets(format!("{} failed ({})", script.display(), output.status)));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = stdout
        .lines()
        .last()
        .map(|line| PathBuf::from(line.trim()))
        .ok_or_else(|| Error::Assets(format!("{} printed no folder", script.display())))?;
    match BINARIES.iter().find(|b| !dir.join(b).is_file()) {
        Some(missing) => Err(Error::Assets(format!("{} has no {missing}", dir.display()))),
        None => Ok(dir),
    }
}

fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    // All bound at once, so they differ.
    let listeners = (0..N)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::io("finding free loopback ports", e))?;
    let mut ports = [0u16; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map_err(|e| Error::io("reading a bound port", e))?.port();
    }
    Ok(ports)
}

/// Removes the dirs of control planes whose test process is gone (killed
/// before it could clean up).
fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::debug!(dir = %entry.path().display(), "removing a stale control plane dir");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn yaml_files(folder: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(folder).map_err(|e| Error::io(format!("listing {}", folder.display()), e))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    Ok(files)
}

fn kubeconfig_yaml(server: &str, ca_pem: &[u8], user: User, token: &str) -> Result<String, Error> {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "control-plane", "cluster": { "server": server, "certificate-authority-data": ca } }],
        "users": [{ "name": user.name(), "user": { "token": token } }],
        "contexts": [{ "name": user.name(), "context": { "cluster": "control-plane", "user": user.name(), "namespace": "default" } }],
        "current-context": user.name(),
    });
    serde_norway::to_string(&config).map_err(|e| Error::Manifest { index: 0, message: e.to_string() })
}

/// Writes via a temp file and rename, so a reader never sees half a file.
fn write(path: &Path, text: &str) -> Result<(), Error> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves the process handles intact.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `future` on a runtime of its own in a scoped thread, so the blocking
/// API works both from plain code and from inside a #[tokio::test].
fn block_on<F>(future: F) -> Result<F::Output, Error>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::io("building a tokio runtime", e))?;
            Ok(runtime.block_on(future))
        });
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
