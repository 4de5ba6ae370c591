//! `make bench-e2e`: the operator binary against a real control plane with N
//! Memcached CRs, every feature on.
//!
//! ```text
//! bench-e2e [--counts 100,1000] [--namespaces 4] [--concurrency 8]
//!           [--resync-period 30s] [--out target/bench-e2e/results.md]
//! ```
//!
//! For each N: a fresh control plane (etcd + kube-apiserver with its audit
//! log; no controller manager, whose garbage collector would only add load),
//! the CRDs, N copies of `deploy/samples/everything.yaml` with unique names
//! spread over a few namespaces (each namespace with the two Secrets the
//! sample references), and `target/release/memcached-operator run
//! --leader-elect=false` as a separate process, authenticated as the
//! `memcached-operator` user (bound to cluster-admin) so the audit log tells
//! its requests from ours. Measured:
//!
//! - converged: from the first create until every CR has
//!   status.observedGeneration == metadata.generation and all six owned
//!   objects exist (there is no kubelet: pods never run, so convergence is
//!   about objects, not readiness);
//! - API requests per CR until then, from the operator's own
//!   `wasm_operator_api_requests_total` and from the audit log;
//! - writes during one idle resync (after convergence, until every CR was
//!   reconciled once more by `--resync-period`), events and leases aside;
//! - the operator's peak RSS (VmHWM) and CPU time.

mod loopback;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use control_plane::{AuditEvent, ControlPlane, Options, User};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use loopback::http_get;
use serde_json::Value;

const OPERATOR_USER: &str = "memcached-operator";
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(600);
/// CRs created at once by the bench (admin client).
const CREATE_PARALLELISM: usize = 16;

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error("control plane: {0}")]
    Plane(#[from] control_plane::Error),
    #[error("API request: {0}")]
    Kube(#[from] kube::Error),
    #[error("watching Memcacheds: {0}")]
    Watch(#[from] watcher::Error),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("the sample {path}: {message}")]
    Sample { path: PathBuf, message: String },
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error("the operator exited ({status}); last log lines:\n{tail}")]
    OperatorExited { status: String, tail: String },
    #[error("the operator's /metrics: {0}")]
    Metrics(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let context = context.into();
    move |source| BenchError::Io { context, source }
}

struct Config {
    counts: Vec<usize>,
    namespaces: usize,
    concurrency: u16,
    resync: Duration,
    resync_flag: String,
    out: PathBuf,
    operator: PathBuf,
}

const USAGE: &str =
    "usage: bench-e2e [--counts 100,1000] [--namespaces 4] [--concurrency 8] [--resync-period 30s] [--out FILE]";

fn parse_args(root: &Path, mut args: impl Iterator<Item = String>) -> Result<Config, BenchError> {
    let mut config = Config {
        counts: vec![100, 1000],
        namespaces: 4,
        concurrency: 8,
        resync: Duration::from_secs(30),
        resync_flag: "30s".into(),
        out: root.join("target/bench-e2e/results.md"),
        operator: root.join("target/release/memcached-operator"),
    };
    let usage = |message: String| BenchError::Usage(format!("{message}\n{USAGE}"));
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| usage(format!("{arg} needs a value")));
        match arg.as_str() {
            "--counts" => {
                let text = value()?;
                config.counts = text
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().ok().filter(|n| *n > 0))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| usage(format!("--counts {text:?}: positive integers, comma-separated")))?;
            }
            "--namespaces" => {
                let text = value()?;
                config.namespaces =
                    text.parse().ok().filter(|n| *n > 0).ok_or_else(|| usage(format!("--namespaces {text:?}")))?;
            }
            "--concurrency" => {
                let text = value()?;
                config.concurrency =
                    text.parse().ok().filter(|n| *n > 0).ok_or_else(|| usage(format!("--concurrency {text:?}")))?;
            }
            "--resync-period" => {
                let text = value()?;
                config.resync =
                    parse_seconds(&text).ok_or_else(|| usage(format!("--resync-period {text:?}: e.g. 30s or 2m")))?;
                config.resync_flag = text;
            }
            "--out" => config.out = PathBuf::from(value()?),
            "--operator" => config.operator = PathBuf::from(value()?),
            "-h" | "--help" => return Err(BenchError::Usage(USAGE.into())),
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    Ok(config)
}

/// `30s`, `2m` or `90` (seconds).
fn parse_seconds(text: &str) -> Option<Duration> {
    let (number, unit) = match text.strip_suffix('s') {
        Some(n) => (n, 1),
        None => match text.strip_suffix('m') {
            Some(n) => (n, 60),
            None => (text, 1),
        },
    };
    number.parse::<u64>().ok().filter(|n| *n > 0).map(|n| Duration::from_secs(n * unit))
}

fn main() -> ExitCode {
    let root = control_plane::repo_root();
    let config = match parse_args(&root, std::env::args().skip(1)) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&root, &config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(root: &Path, config: &Config) -> Result<(), BenchError> {
    if !config.operator.is_file() {
        return Err(BenchError::Usage(format!("{} is missing; `make bench-e2e` builds it", config.operator.display())));
    }
    let sample_path = root.join("deploy/samples/everything.yaml");
    let template = read_sample(&sample_path)?;
    let logs = root.join("target/bench-e2e");
    std::fs::create_dir_all(&logs).map_err(io(format!("creating {}", logs.display())))?;
    let machine = machine_line();
    progress(&format!("{machine}; resync period {}, operator concurrency {}", config.resync_flag, config.concurrency));

    let mut rows = Vec::new();
    for &count in &config.counts {
        rows.push(run_one(config, &template, count, &logs).await?);
        let table = table(&rows, config, &machine);
        if rows.len() == config.counts.len() {
            println!("\n{table}");
        }
        std::fs::write(&config.out, &table).map_err(io(format!("writing {}", config.out.display())))?;
    }
    progress(&format!("table written to {}", config.out.display()));
    Ok(())
}

fn progress(message: &str) {
    eprintln!("bench-e2e: {message}");
}

fn machine_line() -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    format!("{cores} cores, load average {load} at start")
}

fn read_sample(path: &Path) -> Result<Value, BenchError> {
    let text = std::fs::read_to_string(path).map_err(io(format!("reading {}", path.display())))?;
    let sample: Value = serde_norway::from_str(&text)
        .map_err(|e| BenchError::Sample { path: path.to_owned(), message: e.to_string() })?;
    if sample.pointer("/spec").is_none_or(Value::is_null) {
        return Err(BenchError::Sample { path: path.to_owned(), message: "no spec".into() });
    }
    Ok(sample)
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn memcached_resource() -> ApiResource {
    resource("memcached.c5c3.io", "v1alpha1", "Memcached", "memcacheds")
}

/// What the everything sample owns: one of each.
fn owned_resources() -> Vec<ApiResource> {
    vec![
        resource("apps", "v1", "Deployment", "deployments"),
        resource("", "v1", "Service", "services"),
        resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
        resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
        resource("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors"),
        resource("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies"),
    ]
}

/// One row of the table.
struct Row {
    crs: usize,
    applied: Duration,
    converged: Duration,
    reconciles: u64,
    /// From the operator's metrics, until converged.
    requests: Requests,
    /// From the audit log, until converged.
    audit: AuditCounts,
    idle_reconciles: u64,
    idle: AuditCounts,
    idle_window: Duration,
    peak_rss_kib: u64,
    /// VmRSS after the idle resync.
    idle_rss_kib: u64,
    cpu_seconds: f64,
}

#[derive(Default, Clone, Copy)]
struct Requests {
    reads: u64,
    writes: u64,
    watches: u64,
}

/// The operator's requests in the audit log, by what they touched.
#[derive(Default)]
struct AuditCounts {
    gets: usize,
    lists: usize,
    /// Owned objects: create, update, patch, delete.
    child_writes: usize,
    status_writes: usize,
    event_writes: usize,
    lease_writes: usize,
    /// Writes other than the above, as `verb resource`.
    other_writes: BTreeMap<String, usize>,
}

impl AuditCounts {
    fn of(events: &[AuditEvent]) -> Self {
        let mut counts = AuditCounts::default();
        for event in events.iter().filter(|e| e.user == OPERATOR_USER) {
            let resource = event.resource.as_deref().unwrap_or("");
            match event.verb.as_str() {
                "get" => counts.gets += 1,
                "list" => counts.lists += 1,
                _ if !event.is_write() => {}
                _ if resource == "events" => counts.event_writes += 1,
                _ if resource == "leases" => counts.lease_writes += 1,
                _ if event.subresource.as_deref() == Some("status") => counts.status_writes += 1,
                _ if is_owned(resource) => counts.child_writes += 1,
                verb => *counts.other_writes.entry(format!("{verb} {resource}")).or_default() += 1,
            }
        }
        counts
    }

    fn writes(&self) -> usize {
        self.child_writes + self.status_writes + self.event_writes + self.other_writes.values().sum::<usize>()
    }
}

fn is_owned(resource: &str) -> bool {
    owned_resources().iter().any(|r| r.plural == resource)
}

async fn run_one(config: &Config, template: &Value, count: usize, logs: &Path) -> Result<Row, BenchError> {
    progress(&format!("N={count}: starting a control plane"));
    let plane = ControlPlane::start_with(Options { controller_manager: false, audit_log: true, ..Options::default() })?;
    plane.install_crds().await?;
    let admin = plane.client(User::Admin).await?;
    plane
        .apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: bench-operator-cluster-admin}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {OPERATOR_USER}}}]\n"
        ))
        .await?;
    plane.wait_until_allowed(User::Operator, "create", "apps", "deployments", Some("default")).await?;
    let namespaces: Vec<String> = (0..config.namespaces.min(count)).map(|i| format!("bench-{i}")).collect();
    for namespace in &namespaces {
        create_namespace_with_secrets(&admin, namespace).await?;
    }

    let log = logs.join(format!("operator-{count}.log"));
    let mut operator = OperatorProcess::spawn(config, &plane.kubeconfig(User::Operator), &log)?;
    progress(&format!("N={count}: operator pid {} (log {})", operator.pid(), log.display()));
    operator.wait_ready().await?;
    let before = operator.scrape().await?;
    let mark = plane.audit_mark()?;

    // Watch before creating, so no status change is missed.
    let memcacheds: Api<DynamicObject> = Api::all_with(admin.clone(), &memcached_resource());
    let mut statuses = watcher(memcacheds, watcher::Config::default()).default_backoff().applied_objects().boxed();

    progress(&format!("N={count}: creating {count} Memcacheds in {} namespaces", namespaces.len()));
    let started = Instant::now();
    let creating = tokio::spawn(create_all(admin.clone(), template.clone(), count, namespaces.clone()));
    let mut creating = Some(creating);
    let mut applied = None;
    let mut converged: HashSet<(String, String)> = HashSet::new();
    let deadline = tokio::time::Instant::now() + CONVERGE_TIMEOUT;
    let mut last_report = Instant::now();
    while converged.len() < count {
        if let Some(task) = creating.as_mut().filter(|t| t.is_finished()) {
            match task.await {
                Ok(result) => result?,
                Err(join) => return Err(BenchError::Usage(format!("creating the CRs: {join}"))),
            }
            applied = Some(started.elapsed());
            progress(&format!("N={count}: all created after {:.1}s", started.elapsed().as_secs_f64()));
            creating = None;
        }
        let next = tokio::time::timeout_at(
            deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)),
            statuses.try_next(),
        )
        .await;
        match next {
            Ok(Ok(Some(object))) => {
                let key = (object.namespace().unwrap_or_default(), object.name_any());
                if is_converged(&object) {
                    converged.insert(key);
                } else {
                    converged.remove(&key);
                }
            }
            Ok(Ok(None)) => return Err(BenchError::Usage("the Memcached watch ended".into())),
            Ok(Err(error)) => return Err(error.into()),
            Err(_) => {
                operator.check_alive()?;
                if tokio::time::Instant::now() >= deadline {
                    return Err(BenchError::Timeout {
                        what: format!("{count} CRs to converge ({} did)", converged.len()),
                        seconds: CONVERGE_TIMEOUT.as_secs(),
                    });
                }
            }
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            progress(&format!(
                "N={count}: {}/{count} converged after {:.0}s",
                converged.len(),
                started.elapsed().as_secs_f64()
            ));
            last_report = Instant::now();
        }
    }
    drop(statuses);
    if let Some(task) = creating {
        // Every CR converged, so every create returned.
        match task.await {
            Ok(result) => result?,
            Err(join) => return Err(BenchError::Usage(format!("creating the CRs: {join}"))),
        }
        applied = Some(started.elapsed());
    }
    // Then every owned object must exist.
    loop {
        let missing = missing_children(&admin, count).await?;
        if missing == 0 {
            break;
        }
        operator.check_alive()?;
        if tokio::time::Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: format!("{missing} owned objects"),
                seconds: CONVERGE_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let converged_after = started.elapsed();
    let at_convergence = operator.scrape().await?;
    plane.audit_sync().await?;
    let audit = AuditCounts::of(&plane.audit_events_since(mark)?);
    progress(&format!("N={count}: converged after {:.1}s", converged_after.as_secs_f64()));

    // One idle resync: let trailing reconciles settle, then wait until every
    // CR was reconciled once more.
    let mut quiet = operator.scrape().await?.reconciles;
    let settle_deadline = Instant::now() + Duration::from_secs(60);
    let mut quiet_for = 0;
    while quiet_for < 3 && Instant::now() < settle_deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = operator.scrape().await?.reconciles;
        if now == quiet {
            quiet_for += 1;
        } else {
            quiet = now;
            quiet_for = 0;
        }
    }
    progress(&format!("N={count}: idle; waiting for one resync ({})", config.resync_flag));
    let idle_mark = plane.audit_mark()?;
    let idle_started = Instant::now();
    let idle_deadline = idle_started + config.resync + Duration::from_secs(120);
    let idle_reconciles = loop {
        operator.check_alive()?;
        let done = operator.scrape().await?.reconciles.saturating_sub(quiet);
        if done >= count as u64 {
            break done;
        }
        if Instant::now() > idle_deadline {
            return Err(BenchError::Timeout {
                what: format!("an idle resync of {count} CRs ({done} reconciled)"),
                seconds: idle_deadline.duration_since(idle_started).as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // The last reconciles' requests, if any, reach the log.
    tokio::time::sleep(Duration::from_secs(2)).await;
    plane.audit_sync().await?;
    let idle = AuditCounts::of(&plane.audit_events_since(idle_mark)?);
    let idle_window = idle_started.elapsed();
    let idle_reconciles = operator.scrape().await?.reconciles.saturating_sub(quiet).max(idle_reconciles);

    let usage = operator.usage()?;
    operator.stop();
    drop(plane);

    let requests = Requests {
        reads: at_convergence.requests.reads - before.requests.reads,
        writes: at_convergence.requests.writes - before.requests.writes,
        watches: at_convergence.requests.watches,
    };
    let row = Row {
        crs: count,
        applied: applied.unwrap_or(converged_after),
        converged: converged_after,
        reconciles: at_convergence.reconciles - before.reconciles,
        requests,
        audit,
        idle_reconciles,
        idle,
        idle_window,
        peak_rss_kib: usage.peak_rss_kib,
        idle_rss_kib: usage.rss_kib,
        cpu_seconds: usage.cpu_seconds,
    };
    if !row.idle.other_writes.is_empty() || row.idle.child_writes + row.idle.status_writes > 0 {
        progress(&format!(
            "N={count}: WRITES DURING THE IDLE RESYNC: {} children, {} status, other {:?} (see {})",
            row.idle.child_writes,
            row.idle.status_writes,
            row.idle.other_writes,
            log.display()
        ));
    }
    Ok(row)
}

fn is_converged(object: &DynamicObject) -> bool {
    let generation = object.metadata.generation;
    let observed = object.data.pointer("/status/observedGeneration").and_then(Value::as_i64);
    generation.is_some() && observed == generation
}

async fn create_namespace_with_secrets(client: &Client, namespace: &str) -> Result<(), BenchError> {
    let meta = |name: &str| ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &Namespace { metadata: meta(namespace), ..Namespace::default() })
        .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let strings = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    // Placeholders: no pod ever mounts them here.
    let sasl = Secret {
        metadata: meta("memcached-sasl"),
        string_data: Some(strings(&[("password-file", "memcached:bench-password")])),
        ..Secret::default()
    };
    let tls = Secret {
        metadata: meta("memcached-tls"),
        string_data: Some(strings(&[
            ("tls.crt", "placeholder"),
            ("tls.key", "placeholder"),
            ("ca.crt", "placeholder"),
        ])),
        ..Secret::default()
    };
    for secret in [sasl, tls] {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

async fn create_all(client: Client, template: Value, count: usize, namespaces: Vec<String>) -> Result<(), BenchError> {
    let resource = memcached_resource();
    futures::stream::iter(0..count)
        .map(|i| {
            let namespace = &namespaces[i % namespaces.len()];
            let mut object = template.clone();
            object["metadata"] = serde_json::json!({ "name": format!("cache-{i:04}"), "namespace": namespace });
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
            async move {
                let object: DynamicObject = serde_json::from_value(object)
                    .map_err(|e| BenchError::Usage(format!("the sample is not an object: {e}")))?;
                api.create(&PostParams::default(), &object).await?;
                Ok::<_, BenchError>(())
            }
        })
        .buffer_unordered(CREATE_PARALLELISM)
        .try_collect::<()>()
        .await
}

/// How many of the 6 × count owned objects are missing (by controller owner).
async fn missing_children(client: &Client, count: usize) -> Result<usize, BenchError> {
    let parents: Api<DynamicObject> = Api::all_with(client.clone(), &memcached_resource());
    let uids: HashSet<String> =
        parents.list(&ListParams::default()).await?.items.iter().filter_map(|p| p.uid()).collect();
    let mut missing = 0;
    for kind in owned_resources() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind);
        let mut owners: HashMap<String, usize> = HashMap::new();
        for object in api.list(&ListParams::default()).await?.items {
            for owner in object.owner_references().iter().filter(|o| o.controller == Some(true)) {
                *owners.entry(owner.uid.clone()).or_default() += 1;
            }
        }
        missing += uids.iter().filter(|uid| !owners.contains_key(*uid)).count();
    }
    missing += count.saturating_sub(uids.len()) * owned_resources().len();
    Ok(missing)
}

/// The operator as a child process; stopped (SIGTERM, then SIGKILL) on drop.
struct OperatorProcess {
    child: Child,
    log: PathBuf,
    metrics: String,
    health: String,
    stopped: bool,
}

struct Usage {
    peak_rss_kib: u64,
    rss_kib: u64,
    cpu_seconds: f64,
}

struct Scrape {
    requests: Requests,
    reconciles: u64,
}

fn free_port() -> Result<u16, BenchError> {
    loopback::free_port().map_err(io("finding a free port"))
}

impl OperatorProcess {
    fn spawn(config: &Config, kubeconfig: &Path, log: &Path) -> Result<Self, BenchError> {
        let metrics = format!("127.0.0.1:{}", free_port()?);
        let health = format!("127.0.0.1:{}", free_port()?);
        let file = std::fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
        let child = Command::new(&config.operator)
            .args(["run", "--leader-elect=false", "--log-format", "json"])
            .args(["--concurrency", &config.concurrency.to_string()])
            .args(["--resync-period", &config.resync_flag])
            .args(["--metrics-bind-address", &metrics, "--health-probe-bind-address", &health])
            .env("KUBECONFIG", kubeconfig)
            .env_remove("WATCH_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(io(format!("starting {}", config.operator.display())))?;
        Ok(Self { child, log: log.to_owned(), metrics, health, stopped: false })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn check_alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.stopped = true;
                Err(BenchError::OperatorExited { status: status.to_string(), tail: log_tail(&self.log) })
            }
            Err(error) => Err(io("checking the operator process")(error)),
        }
    }

    async fn wait_ready(&mut self) -> Result<(), BenchError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_alive()?;
            if let Ok((200, _)) = http_get(&self.health, "/readyz").await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(BenchError::Timeout { what: "the operator's /readyz".into(), seconds: 60 });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn scrape(&mut self) -> Result<Scrape, BenchError> {
        self.check_alive()?;
        let (status, body) =
            http_get(&self.metrics, "/metrics").await.map_err(|e| BenchError::Metrics(e.to_string()))?;
        if status != 200 {
            return Err(BenchError::Metrics(format!("HTTP {status}")));
        }
        let requests = |verb: &str| metric_sum(&body, "wasm_operator_api_requests_total", &format!("verb=\"{verb}\""));
        Ok(Scrape {
            requests: Requests {
                reads: requests("read"),
                writes: ["create", "update", "patch", "delete"].iter().map(|v| requests(v)).sum(),
                watches: requests("watch"),
            },
            reconciles: metric_sum(&body, "wasm_operator_reconciles_total", ""),
        })
    }

    /// Peak and current RSS, and CPU seconds (user + system) so far.
    fn usage(&self) -> Result<Usage, BenchError> {
        let pid = self.pid();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(io("reading the operator's /proc status"))?;
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        let stat =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(io("reading the operator's /proc stat"))?;
        // Fields after the command (which may hold spaces) start at field 3.
        let fields: Vec<&str> =
            stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // utime and stime are fields 14 and 15, i.e. 11 and 12 after the command.
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Ok(Usage {
            peak_rss_kib: kib("VmHWM:"),
            rss_kib: kib("VmRSS:"),
            cpu_seconds: (ticks(11) + ticks(12)) as f64 / hz,
        })
    }

    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: signalling our own child, which we have not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The sum of every sample of `name` whose labels contain `labels`.
fn metric_sum(text: &str, name: &str, labels: &str) -> u64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            (rest.is_empty() || rest.starts_with('{')).then_some(())?;
            rest.contains(labels).then_some(())?;
            value.parse::<f64>().ok()
        })
        .sum::<f64>() as u64
}

fn per_cr(total: usize, crs: usize) -> String {
    format!("{:.1}", total as f64 / crs as f64)
}

fn table(rows: &[Row], config: &Config, machine: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Every feature on (deploy/samples/everything.yaml), {} namespaces, operator `--concurrency {} --resync-period {}`; {machine}.\n\n",
        config.namespaces, config.concurrency, config.resync_flag
    ));
    out.push_str(
        "| CRs | all created | converged | reconciles | requests/CR (metrics: reads + writes) | audit/CR: get, list | audit/CR: writes (children + status + events) | idle resync: reconciles, writes | RSS: peak, idle | operator CPU |\n",
    );
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let a = &row.audit;
        let idle_writes =
            row.idle.child_writes + row.idle.status_writes + row.idle.other_writes.values().sum::<usize>();
        out.push_str(&format!(
            "| {} | {:.1} s | {:.1} s | {} | {:.1} + {:.1} | {}, {} | {} ({} + {} + {}) | {}, {} (+{} events) in {:.0} s | {:.0}, {:.0} MiB | {:.1} s |\n",
            row.crs,
            row.applied.as_secs_f64(),
            row.converged.as_secs_f64(),
            row.reconciles,
            row.requests.reads as f64 / row.crs as f64,
            row.requests.writes as f64 / row.crs as f64,
            per_cr(a.gets, row.crs),
            per_cr(a.lists, row.crs),
            per_cr(a.writes(), row.crs),
            per_cr(a.child_writes, row.crs),
            per_cr(a.status_writes, row.crs),
            per_cr(a.event_writes, row.crs),
            row.idle_reconciles,
            idle_writes,
            row.idle.event_writes,
            row.idle_window.as_secs_f64(),
            row.peak_rss_kib as f64 / 1024.0,
            row.idle_rss_kib as f64 / 1024.0,
            row.cpu_seconds,
        ));
    }
    out.push_str(&format!(
        "\nWatches opened by the operator: {} (one per cached kind; not per CR). \"converged\" counts from the first create.\n",
        rows.iter().map(|r| r.requests.watches.to_string()).collect::<Vec<_>>().join(" / ")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sum_adds_matching_series_only() {
        let text = "# HELP x\nwasm_operator_api_requests_total{verb=\"read\"} 7\n\
                    wasm_operator_api_requests_total{verb=\"create\"} 3\n\
                    wasm_operator_api_requests_total_other{verb=\"read\"} 100\n\
                    wasm_operator_reconciles_total{result=\"success\"} 5\n\
                    wasm_operator_reconciles_total{result=\"error\"} 2\n";
        assert_eq!(metric_sum(text, "wasm_operator_api_requests_total", "verb=\"read\""), 7);
        assert_eq!(metric_sum(text, "wasm_operator_reconciles_total", ""), 7);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_seconds("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_seconds("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_seconds("0s"), None);
        assert_eq!(parse_seconds("x"), None);
    }
}
