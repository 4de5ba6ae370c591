//! Running the operator in-process against a real kube-apiserver
//! (tests/control-plane): one namespace per test, one operator per test
//! watching only that namespace, as the `memcached-operator` user (bound to
//! cluster-admin here; deploy/'s least-privilege RBAC has its own test), so
//! the API server's audit log tells its requests from the test's.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, User};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt};
use memcached_logic::exports;
use memcached_tests::engine;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wasm_operator::operator::endpoints::metrics::Metrics;
use wasm_operator::operator::errors::OperatorError;
use wasm_operator::operator::identity::ModuleIdentity;
use wasm_operator::operator::{self, Options};
use wasm_operator::planning::kinds::Kind;
use wasm_operator::planning::object_diff::same_ignoring_nulls;
use wasm_operator::runtime::logic_module::LogicModule;
use wasm_operator::runtime::slot::ModuleSlot;

pub const OPERATOR_USER: &str = "memcached-operator";
pub const WAIT: Duration = Duration::from_secs(30);

pub fn gvk(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn memcached_resource() -> ApiResource {
    gvk("memcached.c5c3.io", "v1alpha1", "Memcached", "memcacheds")
}

/// Every owned kind: (name, resource), in reconcile order.
pub fn owned_kinds() -> Vec<(&'static str, ApiResource)> {
    vec![
        ("Deployment", gvk("apps", "v1", "Deployment", "deployments")),
        ("Service", gvk("", "v1", "Service", "services")),
        ("PodDisruptionBudget", gvk("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")),
        ("HorizontalPodAutoscaler", gvk("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")),
        ("ServiceMonitor", gvk("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors")),
        ("NetworkPolicy", gvk("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies")),
    ]
}

pub fn secret_resource() -> ApiResource {
    gvk("", "v1", "Secret", "secrets")
}

/// Where the in-process operators' modules have their ServiceAccounts
/// (`--module-identity-namespace`); they need not exist to be impersonated.
pub const MODULE_IDENTITY_NAMESPACE: &str = "default";

/// Lets the operator user, and the modules' ServiceAccounts it acts as, do
/// anything: these tests are about behaviour (tests/module_identity.rs and
/// tests/deploy.rs are about least privilege).
pub async fn grant_operator_everything(plane: &ControlPlane) {
    plane
        .apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: test-operator-cluster-admin}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {OPERATOR_USER}}},\n\
             {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:serviceaccounts:{MODULE_IDENTITY_NAMESPACE}'}}]\n"
        ))
        .await
        .expect("binding the operator user");
    plane
        .wait_until_allowed(User::Operator, "create", "apps", "deployments", Some("default"))
        .await
        .expect("RBAC reaches the authorizer");
    plane
        .wait_until_service_account_allowed(
            (MODULE_IDENTITY_NAMESPACE, "memcached"),
            "create",
            "apps",
            "deployments",
            Some("default"),
        )
        .await
        .expect("RBAC reaches the authorizer");
}

pub fn options(namespace: &str) -> Options {
    Options {
        namespace: Some(namespace.to_owned()),
        metrics_address: "127.0.0.1:0".parse().expect("an address"),
        metrics_secure: None,
        health_address: "127.0.0.1:0".parse().expect("an address"),
        leader_election: None,
        concurrency: 2,
        module_call_concurrency: 2,
        max_reconcile_steps: 10,
        resync_period: Duration::from_secs(3600),
        swap_policy: Default::default(),
        logic_modules: None,
        record_budget: 4 << 20,
        module_identity: ModuleIdentity::ServiceAccounts {
            namespace: MODULE_IDENTITY_NAMESPACE.to_owned(),
            prefix: String::new(),
        },
    }
}

/// An operator running in this process until stopped or dropped.
pub struct Running {
    pub metrics: Arc<Metrics>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), OperatorError>>>,
}

impl Running {
    pub async fn start(plane: &ControlPlane, module: LogicModule, options: Options) -> Self {
        Self::start_modules(plane, vec![module], options).await
    }

    /// Several modules in one operator, as `--module a --module b` runs them.
    pub async fn start_modules(plane: &ControlPlane, modules: Vec<LogicModule>, options: Options) -> Self {
        let client = plane.client(User::Operator).await.expect("an operator client");
        Self::start_with_client(client, modules, options)
    }

    pub fn start_with_client(client: Client, modules: Vec<LogicModule>, options: Options) -> Self {
        Self::start_slots(client, modules.into_iter().map(ModuleSlot::new).collect(), options)
    }

    /// Modules in slots as the binary makes them (a watched file, say).
    pub fn start_slots(client: Client, slots: Vec<ModuleSlot>, options: Options) -> Self {
        let metrics = Arc::new(Metrics::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(operator::run::run(client, slots, metrics.clone(), options, shutdown));
        Self { metrics, stop: Some(stop), task: Some(task) }
    }

    /// Graceful shutdown; the operator's own result.
    pub async fn stop(mut self) -> Result<(), OperatorError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        tokio::time::timeout(WAIT, task).await.expect("stops in time").expect("the task did not panic")
    }

    /// Reconciles finished so far, by result.
    pub fn reconciles(&self, result: &str) -> u64 {
        metric_value(&self.metrics.encode(), "wasm_operator_reconciles_total", &format!("result=\"{result}\""))
    }

    pub fn metric(&self, name: &str, labels: &str) -> u64 {
        metric_value(&self.metrics.encode(), name, labels)
    }

    /// Module versions offered at run time, by result (succeeded, refused,
    /// rolled_back).
    pub fn swaps(&self, result: &str) -> u64 {
        self.metric("wasm_operator_module_swaps_total", &format!("result=\"{result}\""))
    }

    /// The digests `module_info` reports as serving.
    pub fn serving_digests(&self) -> Vec<String> {
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("wasm_operator_module_info{") && l.ends_with(" 1"))
            .filter_map(|l| l.split("digest=\"").nth(1)?.split('"').next().map(str::to_owned))
            .collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The sum of the samples of `name` whose labels contain `labels`.
pub fn metric_value(text: &str, name: &str, labels: &str) -> u64 {
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(labels))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The built-in Memcached module, loaded on the test binary's engine (the
/// compiled code comes from wasmtime's cache after the first load).
pub fn memcached_module() -> LogicModule {
    memcached_operator::typed::MemcachedModule::builtin(engine()).expect("the built-in module").into_logic()
}

/// A module file `make test` builds into target/, on the test binary's engine.
pub fn module_file(file: &str) -> LogicModule {
    let path = control_plane::repo_root().join("target").join(file);
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    LogicModule::from_file(engine(), &path, false).unwrap_or_else(|e| panic!("{file} loads: {e}"))
}

/// Polls `check` until it answers `Some`, or fails the test after `WAIT`.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(WAIT, what, check).await
}

pub async fn eventually_within<T, F, Fut>(wait: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + wait;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads `name`, lets `change` edit it and writes it back, reading again after
/// a 409: the operator writes the object's status meanwhile, as it would
/// under any user's read-modify-write.
pub async fn edit(api: &Api<DynamicObject>, name: &str, change: impl Fn(&mut DynamicObject)) -> DynamicObject {
    for _ in 0..5 {
        let mut object = api.get(name).await.unwrap_or_else(|e| panic!("reading {name}: {e}"));
        change(&mut object);
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(written) => return written,
            Err(kube::Error::Api(answer)) if answer.code == 409 => continue,
            Err(e) => panic!("writing {name}: {e}"),
        }
    }
    panic!("writing {name}: a 409 five times in a row")
}

/// The shared control plane, our CRDs, the operator user bound, and a fresh
/// namespace with an admin client.
pub struct TestNamespace<'a> {
    pub plane: &'a ControlPlane,
    pub client: Client,
    pub namespace: String,
}

impl TestNamespace<'static> {
    pub async fn new(prefix: &str) -> Self {
        let plane = ControlPlane::shared();
        plane.install_crds().await.expect("installing the CRDs");
        grant_operator_everything(plane).await;
        Self::on(plane, prefix).await
    }
}

impl<'a> TestNamespace<'a> {
    pub async fn on(plane: &'a ControlPlane, prefix: &str) -> Self {
        let namespace = plane.create_namespace(prefix).await.expect("a namespace");
        let client = plane.client(User::Admin).await.expect("an admin client");
        Self { plane, client, namespace }
    }

    pub fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, resource)
    }

    pub fn memcacheds(&self) -> Api<DynamicObject> {
        self.api(&memcached_resource())
    }

    pub async fn start_operator(&self) -> Running {
        Running::start(self.plane, memcached_module(), options(&self.namespace)).await
    }

    /// Creates a Memcached named `name` with `spec`.
    pub async fn create_memcached(&self, name: &str, spec: Value) -> DynamicObject {
        let object = json!({"apiVersion": "memcached.c5c3.io/v1alpha1", "kind": "Memcached",
                            "metadata": {"name": name}, "spec": spec});
        let object: DynamicObject = serde_json::from_value(object).expect("a DynamicObject");
        self.memcacheds().create(&PostParams::default(), &object).await.expect("creating the Memcached")
    }

    /// Replaces the CR's spec with `spec` (a PUT of the whole object).
    pub async fn set_spec(&self, name: &str, spec: Value) -> DynamicObject {
        edit(&self.memcacheds(), name, |current| current.data["spec"] = spec.clone()).await
    }

    pub async fn create_secret(&self, name: &str, data: Value) {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data});
        let secret: DynamicObject = serde_json::from_value(secret).expect("a Secret");
        self.api(&secret_resource()).create(&PostParams::default(), &secret).await.expect("creating a Secret");
    }

    pub async fn get(&self, resource: &ApiResource, name: &str) -> Option<DynamicObject> {
        self.api(resource).get_opt(name).await.expect("reading an object")
    }

    /// The live object of `kind` named `name`, once it exists.
    pub async fn wait_for(&self, kind: &str, name: &str) -> DynamicObject {
        let resource = resource_of(kind);
        eventually(&format!("{kind} {name} to exist"), || async { self.get(&resource, name).await }).await
    }

    pub async fn wait_gone(&self, kind: &str, name: &str) {
        let resource = resource_of(kind);
        eventually(&format!("{kind} {name} to be gone"), || async {
            self.get(&resource, name).await.is_none().then_some(())
        })
        .await
    }

    /// Waits until the CR's status has seen its current generation and
    /// `check` accepts the status; returns the status.
    pub async fn wait_status(&self, name: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        let mut last = Value::Null;
        loop {
            if let Ok(cr) = self.memcacheds().get(name).await {
                let generation = cr.metadata.generation;
                last = cr.data.get("status").cloned().unwrap_or(Value::Null);
                if generation.is_some() && last["observedGeneration"] == json!(generation) && check(&last) {
                    return last;
                }
            }
            assert!(Instant::now() < deadline, "timed out waiting for the status of {name}; last seen: {last:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Event notes recorded on objects in this namespace, by reason.
    pub async fn event_notes(&self, reason: &str) -> Vec<String> {
        let events = self.api(&gvk("events.k8s.io", "v1", "Event", "events"));
        let list = events.list(&Default::default()).await.expect("listing events");
        list.items
            .iter()
            .filter(|e| e.data["reason"] == json!(reason))
            .filter_map(|e| e.data["note"].as_str().map(str::to_owned))
            .collect()
    }

    /// Writes by the operator in this namespace since `mark`.
    pub async fn operator_writes(&self, mark: control_plane::AuditMark) -> Vec<control_plane::AuditEvent> {
        self.plane.audit_sync().await.expect("the audit log catches up");
        self.plane
            .writes_by(OPERATOR_USER, mark)
            .expect("reading the audit log")
            .into_iter()
            .filter(|e| e.namespace.as_deref() == Some(self.namespace.as_str()))
            .collect()
    }
}

pub fn resource_of(kind: &str) -> ApiResource {
    owned_kinds()
        .into_iter()
        .find(|(name, _)| *name == kind)
        .map(|(_, resource)| resource)
        .unwrap_or_else(|| panic!("unknown kind {kind}"))
}

/// A condition of a status by type.
pub fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == json!(type_)))
        .unwrap_or(&Value::Null)
}

pub fn controller_uid(object: &DynamicObject) -> Option<String> {
    object.owner_references().iter().find(|r| r.controller == Some(true)).map(|r| r.uid.clone())
}

impl TestNamespace<'_> {
    pub async fn wait_gone_memcached(&self, name: &str) {
        eventually(&format!("Memcached {name} to be gone"), || async {
            self.memcacheds().get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await
    }
}

pub fn everything_spec() -> Value {
    let path = control_plane::repo_root().join("deploy/samples/everything.yaml");
    let text = std::fs::read_to_string(&path).expect("reading the everything sample");
    let cr: Value = serde_norway::from_str(&text).expect("the sample is YAML");
    cr["spec"].clone()
}

pub async fn create_everything_secrets(ns: &TestNamespace<'_>) {
    ns.create_secret("memcached-sasl", json!({"memcached-sasl-db": "user:password"})).await;
    ns.create_secret("memcached-tls", json!({"tls.crt": "crt", "tls.key": "key", "ca.crt": "ca"})).await;
}

/// The JSON the module reads: the object with its apiVersion and kind, as
/// the operator hands it over.
pub fn with_type(object: &DynamicObject, resource: &ApiResource) -> String {
    Kind { resource: resource.clone() }.to_json(object)
}

/// Waits until the operator has converged on the CR's current spec: the
/// status saw this generation, and every owned kind exists exactly when the
/// module wants it and equals what the module builds from the live object
/// (a fixed point: nothing left to write). Returns the live objects by kind.
pub async fn converged(ns: &TestNamespace<'_>, name: &str) -> BTreeMap<&'static str, DynamicObject> {
    eventually(&format!("{name} to converge"), || async {
        let cr = ns.memcacheds().get(name).await.ok()?;
        let status = cr.data.get("status")?;
        if status["observedGeneration"] != json!(cr.metadata.generation?) {
            return None;
        }
        let cr_json = with_type(&cr, &memcached_resource());
        let mut secrets = Vec::new();
        for reference in exports::references(&cr_json).ok()? {
            if let Some(secret) = ns.get(&secret_resource(), &reference.name).await {
                secrets.push(with_type(&secret, &secret_resource()));
            }
        }
        let mut live = BTreeMap::new();
        for (kind, resource) in owned_kinds() {
            let object = ns.get(&resource, name).await;
            let current = object.as_ref().map(|o| with_type(o, &resource));
            let owned: Vec<String> = current.iter().cloned().collect();
            let desired = exports::desired(&cr_json, &owned, &secrets)
                .ok()?
                .into_iter()
                .find(|d| serde_json::from_str::<Value>(d).is_ok_and(|d| d["kind"] == kind));
            match (desired, current) {
                (None, None) => {}
                (Some(desired), Some(current)) => {
                    let desired: Value = serde_json::from_str(&desired).ok()?;
                    let current: Value = serde_json::from_str(&current).ok()?;
                    if !same_ignoring_nulls(&desired, &current) {
                        return None;
                    }
                    live.insert(kind, object?);
                }
                _ => return None,
            }
        }
        Some(live)
    })
    .await
}

/// The lines a child process writes to stderr, collected as they come (its
/// stderr must be piped).
pub fn collect_stderr(child: &mut std::process::Child) -> Arc<std::sync::Mutex<Vec<String>>> {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("a piped stderr");
    let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().expect("the log").push(line);
        }
    });
    lines
}

/// An operator binary (`target/release/NAME`) in one namespace as the
/// operator user (bound to cluster-admin by TestNamespace): `run
/// --namespace NS`, no leader election, metrics and probes on free ports of
/// 127.0.0.1, then `extra`; killed on drop.
pub struct Operator {
    pub child: std::process::Child,
    pub lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Operator {
    /// `memcached-operator run`.
    pub fn start(ns: &TestNamespace<'_>, extra: &[&str]) -> Self {
        Self::start_binary(ns, "memcached-operator", &[], extra)
    }

    /// `target/release/BINARY GLOBAL... run ... EXTRA...`.
    pub fn start_binary(ns: &TestNamespace<'_>, binary: &str, global: &[&str], extra: &[&str]) -> Self {
        use std::process::{Command, Stdio};
        let binary = control_plane::repo_root().join("target/release").join(binary);
        assert!(binary.is_file(), "{} is missing: run `make build`", binary.display());
        let mut child = Command::new(binary)
            .args(global)
            .args(["run", "--namespace", &ns.namespace, "--leader-elect=false"])
            .args(["--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"])
            .args(extra)
            .env("KUBECONFIG", ns.plane.kubeconfig(User::Operator))
            .env_remove("POD_NAME")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting the operator");
        let lines = collect_stderr(&mut child);
        Self { child, lines }
    }

    pub fn log(&self) -> Vec<Value> {
        let lines = self.lines.lock().expect("the log").clone();
        lines.iter().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    /// The metrics address, scheme and health address it logged.
    pub async fn serving(&self) -> (String, String, String) {
        let line = eventually("the operator to serve /metrics", || async {
            self.log().into_iter().find(|line| line["message"] == json!("serving /metrics, /healthz and /readyz"))
        })
        .await;
        let field = |name: &str| line[name].as_str().unwrap_or_else(|| panic!("{name} in {line}")).to_owned();
        (field("metrics_address"), field("metrics_scheme"), field("health_address"))
    }
}

/// The host binary `make build` builds (`target/release/wasm-operator`).
pub fn host_binary() -> std::path::PathBuf {
    let path = control_plane::repo_root().join("target/release/wasm-operator");
    assert!(path.is_file(), "{} is missing: run `make build`", path.display());
    path
}

/// A test module `make test` builds into target/, by its file name.
pub fn module_path(file: &str) -> String {
    let path = control_plane::repo_root().join("target").join(file);
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    path.to_string_lossy().into_owned()
}

/// Audit events as `verb resource[/subresource] name`, sorted.
pub fn described(writes: &[control_plane::AuditEvent]) -> Vec<String> {
    let mut described: Vec<String> = writes
        .iter()
        .map(|w| {
            let sub = w.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default();
            format!("{} {}{sub} {}", w.verb, w.resource.as_deref().unwrap_or(""), w.name.as_deref().unwrap_or(""))
        })
        .collect();
    described.sort();
    described
}
