//! `make bench-e2e`: our operator binary and the C5C3 Go operator v0.4.0
//! (controller-runtime; `scripts/go-operator.sh` builds it, webhooks off),
//! each against a fresh, identical control plane with the same N Memcached
//! CRs, printed side by side.
//!
//! ```text
//! bench-e2e [--counts 1000,10000] [--namespaces 4] [--concurrency 8] [--create-concurrency 32]
//!           [--resync-period 60s] [--no-resync-pass] [--no-touch-pass] [--only-ours | --only-go]
//!           [--out target/bench-e2e/results.md]
//! ```
//!
//! For each N and each operator: a fresh control plane (etcd +
//! kube-apiserver with its audit log; no controller manager, whose garbage
//! collector would only add load; etcd's quota and the API server's inflight
//! limits raised for 10,000 CRs), that operator's own CRDs (ours from
//! deploy/crd and tests/crds, the Go operator's from its module), N CRs
//! cycling through every `deploy/samples/*.yaml` (minimal, monitoring, HA,
//! autoscaling, network policy, SASL, TLS, everything) with unique names
//! spread over a few namespaces (each with the two Secrets the samples
//! reference), and the operator as a separate process, authenticated as the
//! `memcached-operator` user (bound to cluster-admin) so the audit log tells
//! its requests from ours. Measured:
//!
//! - converged: from the first create until every CR has
//!   status.observedGeneration == metadata.generation and every object its
//!   sample renders to (`memcached-operator render`) exists, controlled by it
//!   (there is no kubelet: pods never run, so convergence is about objects),
//!   seen by watches opened before the first create (convergence.rs);
//! - reconciles (each operator's own counter) and writes per CR until then,
//!   the writes from the audit log, against the fewest that converge them
//!   (objects created + one status write per CR + one event per object);
//! - ours only: writes during one idle resync (`--resync-period`, by default
//!   60 ms per CR and at least 30 s, so that no resync falls before
//!   convergence and counts as a reconcile to converge: 10 minutes, ours'
//!   default, at 10,000 CRs; the Go operator has no such flag and resyncs
//!   every 10 h); `--no-resync-pass` skips it (and sets the period to 10 h
//!   unless `--resync-period` is given): 100 minutes at 100,000 CRs;
//! - both: writes during an idle touch, an annotation added to every CR,
//!   which changes nothing either operator renders (`--no-touch-pass` skips
//!   it: at 100,000 CRs the API server outgrows 24 GiB during it);
//! - peak RSS (VmHWM), RSS at convergence, CPU seconds to converge, and
//!   memory per CR and per cached object (RSS after the idle passes minus
//!   RSS before the first CR, over N or over the objects the operator caches:
//!   CRs, owned objects, Secrets, counted from the API server);
//! - the API server's and etcd's CPU seconds and peak RSS over the same
//!   window, and how busy the whole machine was until convergence: where
//!   one replica's limits come from at large N.
//!
//! compare.rs prints ours / Go against issue 13's targets and how each
//! operator's cost per CR grows from the smallest size to the largest.

mod compare;
mod convergence;
mod machine;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use control_plane::{AuditEvent, ControlPlane, Options, User};
use convergence::Tracker;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use memcached_e2e::cluster::{
    Sample, SampleError, create_namespace_with_secrets, memcached_resource, owned_resources, read_samples,
};
use memcached_e2e::operators::{self, Flavor, OperatorProcess, ProcessError, Requests, Usage, usage_of};
use serde_json::Value;

const OPERATOR_USER: &str = "memcached-operator";
/// CRs created (and touched) at once by the bench (admin client, exempt
/// from the API server's priority and fairness limits).
const CREATE_PARALLELISM: usize = 32;
/// The annotation the idle touch adds: neither operator renders it.
const TOUCH_ANNOTATION: &str = "bench.c5c3.io/touched";

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error("control plane: {0}")]
    Plane(#[from] control_plane::Error),
    #[error("API request: {0}")]
    Kube(#[from] kube::Error),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error(transparent)]
    Samples(#[from] SampleError),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let context = context.into();
    move |source| BenchError::Io { context, source }
}

struct Config {
    counts: Vec<usize>,
    namespaces: usize,
    create_concurrency: usize,
    concurrency: u16,
    /// Ours' `--resync-period`; None: [`default_resync_period`] per size.
    resync: Option<Duration>,
    out: PathBuf,
    operator: PathBuf,
    /// Which operators run, in this order, at each size.
    flavors: Vec<Flavor>,
    /// Ours waits for one idle resync after converging (`--no-resync-pass`: not).
    resync_pass: bool,
    /// Every CR is touched once idle (`--no-touch-pass`: not; at 100,000
    /// CRs the API server's memory for the touch outgrows a 24 GiB machine).
    touch_pass: bool,
}

const USAGE: &str = "usage: bench-e2e [--counts 1000,10000] [--namespaces 4] [--concurrency 8] [--create-concurrency 32] [--resync-period 60s] [--no-resync-pass] [--no-touch-pass] [--only-ours | --only-go] [--out FILE]";

fn parse_args(root: &Path, mut args: impl Iterator<Item = String>) -> Result<Config, BenchError> {
    let mut config = Config {
        counts: vec![1000, 10_000],
        namespaces: 4,
        create_concurrency: CREATE_PARALLELISM,
        concurrency: 8,
        resync: None,
        out: root.join("target/bench-e2e/results.md"),
        operator: root.join("target/release/memcached-operator"),
        flavors: vec![Flavor::Ours, Flavor::Go],
        resync_pass: true,
        touch_pass: true,
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
            "--create-concurrency" => {
                let text = value()?;
                config.create_concurrency = text
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| usage(format!("--create-concurrency {text:?}")))?;
            }
            "--concurrency" => {
                let text = value()?;
                config.concurrency =
                    text.parse().ok().filter(|n| *n > 0).ok_or_else(|| usage(format!("--concurrency {text:?}")))?;
            }
            "--resync-period" => {
                let text = value()?;
                config.resync = Some(
                    parse_seconds(&text).ok_or_else(|| usage(format!("--resync-period {text:?}: e.g. 30s or 2m")))?,
                );
            }
            "--out" => config.out = PathBuf::from(value()?),
            "--operator" => config.operator = PathBuf::from(value()?),
            "--no-resync-pass" => config.resync_pass = false,
            "--no-touch-pass" => config.touch_pass = false,
            "--only-ours" => config.flavors = vec![Flavor::Ours],
            "--only-go" => config.flavors = vec![Flavor::Go],
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

/// Where each operator's binary and CRDs are.
struct Binaries {
    ours: PathBuf,
    go: PathBuf,
    /// The Go operator's CRDs (Memcached, ServiceMonitor) as its module ships them.
    go_crds: PathBuf,
}

async fn run(root: &Path, config: &Config) -> Result<(), BenchError> {
    // Ours also renders the samples, to know what each CR owns.
    if !config.operator.is_file() {
        return Err(BenchError::Usage(format!("{} is missing; `make bench-e2e` builds it", config.operator.display())));
    }
    let (go, go_crds) =
        if config.flavors.contains(&Flavor::Go) { operators::go_operator(root)? } else { Default::default() };
    let binaries = Binaries { ours: config.operator.clone(), go, go_crds };
    let samples = read_samples(&root.join("deploy/samples"), &config.operator)?;
    let logs = root.join("target/bench-e2e");
    std::fs::create_dir_all(&logs).map_err(io(format!("creating {}", logs.display())))?;
    let machine = machine::describe();
    progress(&format!(
        "{machine}; samples {}; our concurrency {}",
        samples.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        config.concurrency
    ));

    let mut rows = Vec::new();
    for &count in &config.counts {
        for &flavor in &config.flavors {
            rows.push(run_one(config, &binaries, flavor, &samples, count, &logs).await?);
            let text = report(&rows, config, &samples, &machine);
            std::fs::write(&config.out, &text).map_err(io(format!("writing {}", config.out.display())))?;
        }
    }
    println!("\n{}", report(&rows, config, &samples, &machine));
    progress(&format!("tables written to {}", config.out.display()));
    Ok(())
}

/// Every table: each run, ours / Go with the targets, the growth per CR.
fn report(rows: &[Row], config: &Config, samples: &[Sample], machine: &str) -> String {
    format!(
        "{}{}{}{}",
        table(rows, config, samples, machine),
        servers_table(rows),
        compare::table(rows, machine),
        compare::growth(rows)
    )
}

fn progress(message: &str) {
    eprintln!("bench-e2e: {message}");
}

/// Time to converge allowed: generous, as the Go operator reconciles one CR
/// at a time (about 50 ms each at 1000 CRs on 2 cores).
fn converge_timeout(count: usize) -> Duration {
    Duration::from_secs(300) + Duration::from_millis(200) * count as u32
}

/// Ours' resync period at `count` CRs: 60 ms per CR, at least 30 s. The
/// resync requeues each CR that long after its last reconcile, so a period
/// shorter than convergence would add resyncs to the reconciles to converge
/// (at 10,000 CRs a 30 s period alone keeps 2 cores busy).
fn default_resync_period(count: usize) -> Duration {
    (Duration::from_millis(60) * count as u32).max(Duration::from_secs(30))
}

/// Without the resync pass: none in the whole run.
const NO_RESYNC: Duration = Duration::from_secs(10 * 3600);

fn resync_period(config: &Config, count: usize) -> Duration {
    match (config.resync, config.resync_pass) {
        (Some(period), _) => period,
        (None, true) => default_resync_period(count),
        (None, false) => NO_RESYNC,
    }
}

/// Time allowed for an idle pass to reconcile every CR (beyond the resync
/// period).
fn idle_pass_timeout(count: usize) -> Duration {
    // The Go operator's idle touch took 712 s at 10,000 CRs on a busy 2-core machine.
    Duration::from_secs(120) + Duration::from_millis(150) * count as u32
}

/// A fresh control plane without a controller manager (its garbage
/// collector would only add load), with its audit log, sized for 10,000 CRs
/// and their 30,000-odd objects: etcd's quota above its 2 GiB default (every
/// write keeps a revision until the API server compacts, every 5 minutes),
/// and the API server's inflight limits doubled (they also size its priority
/// levels' seats).
fn bench_plane_options() -> Options {
    Options {
        controller_manager: false,
        audit_log: true,
        extra_etcd_args: vec![format!("--quota-backend-bytes={}", 8u64 << 30)],
        extra_apiserver_args: vec!["--max-requests-inflight=800".into(), "--max-mutating-requests-inflight=400".into()],
        ..Options::default()
    }
}

/// One operator at one size.
struct Row {
    flavor: Flavor,
    crs: usize,
    applied: Duration,
    converged: Duration,
    reconciles: u64,
    /// From our operator's metrics, until converged (the Go operator has none).
    requests: Option<Requests>,
    /// From the audit log, until converged.
    audit: AuditCounts,
    /// Ours only: one `--resync-period`.
    resync: Option<IdlePass>,
    /// Ours' `--resync-period`.
    resync_period: Duration,
    /// None with `--no-touch-pass`.
    touch: Option<IdlePass>,
    /// The 1-minute load average when its control plane started.
    load_at_start: f64,
    /// What the operator caches, counted from the API server at
    /// convergence: the CRs, every object of an owned kind, the Secrets in
    /// the CRs' namespaces.
    cached_objects: usize,
    /// The fewest writes that converge these CRs.
    expected: Expected,
    /// VmRSS once ready, before the first CR.
    start_rss_kib: u64,
    /// VmRSS at the moment every CR converged.
    converged_rss_kib: u64,
    /// VmHWM at the end of the run.
    peak_rss_kib: u64,
    /// VmRSS after the idle passes.
    idle_rss_kib: u64,
    cpu_to_converge: f64,
    /// The API server and etcd over the same window.
    servers: Vec<ServerUsage>,
    /// CPU seconds the whole machine was busy from the first create to
    /// convergence, whoever used them.
    machine_busy_to_converge: f64,
}

/// A control plane process's share of a run.
struct ServerUsage {
    name: &'static str,
    cpu_to_converge: f64,
    peak_rss_kib: u64,
}

/// The API server's and etcd's usage now, by name.
fn server_usage(plane: &ControlPlane) -> Result<Vec<(&'static str, Usage)>, BenchError> {
    plane
        .server_pids()
        .into_iter()
        .map(|(name, pid)| Ok((name, usage_of(pid).map_err(io(format!("reading {name}'s /proc status")))?)))
        .collect()
}

/// Each server's CPU from `start` to `converged`, and its peak RSS so far.
fn server_rows(start: &[(&'static str, Usage)], converged: &[(&'static str, Usage)]) -> Vec<ServerUsage> {
    start
        .iter()
        .filter_map(|(name, before)| {
            let (_, after) = converged.iter().find(|(n, _)| n == name)?;
            Some(ServerUsage {
                name,
                cpu_to_converge: after.cpu_seconds - before.cpu_seconds,
                peak_rss_kib: after.peak_rss_kib,
            })
        })
        .collect()
}

impl Row {
    /// KiB of resident memory per CR, once idle.
    fn kib_per_cr(&self) -> f64 {
        self.idle_rss_kib.saturating_sub(self.start_rss_kib) as f64 / self.crs as f64
    }

    /// KiB of resident memory per cached object, once idle.
    fn kib_per_cached_object(&self) -> f64 {
        self.idle_rss_kib.saturating_sub(self.start_rss_kib) as f64 / self.cached_objects.max(1) as f64
    }

    /// CPU milliseconds to converge, per CR.
    fn cpu_ms_per_cr(&self) -> f64 {
        self.cpu_to_converge * 1000.0 / self.crs as f64
    }

    fn reconciles_per_cr(&self) -> f64 {
        self.reconciles as f64 / self.crs as f64
    }

    /// Writes of the idle passes to children and status (events and leases
    /// apart): both should be 0.
    fn idle_writes(&self) -> usize {
        self.resync.iter().chain(&self.touch).map(|pass| pass.audit.state_writes()).sum()
    }
}

/// The fewest writes that converge N CRs: create every object its sample
/// renders to, with one event each, and one status write per CR (the first
/// that records the observed generation); nothing else changes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expected {
    children: usize,
    statuses: usize,
    events: usize,
}

impl Expected {
    fn of(samples: &[Sample], count: usize) -> Self {
        let children = (0..count).map(|i| samples[i % samples.len()].children).sum();
        Expected { children, statuses: count, events: children }
    }

    fn total(&self) -> usize {
        self.children + self.statuses + self.events
    }
}

/// Objects each sample renders to, in sample order.
fn expected_children(samples: &[Sample]) -> Vec<usize> {
    samples.iter().map(|s| s.children).collect()
}

/// An idle pass: reconciles it caused and the operator's requests meanwhile.
struct IdlePass {
    reconciles: u64,
    audit: AuditCounts,
    window: Duration,
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
    /// Writes of any kind the API server refused (4xx: conflicts, not
    /// found...); they are counted above too.
    rejected_writes: usize,
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
                _ => {
                    if event.code.is_some_and(|c| c >= 400) && resource != "leases" {
                        counts.rejected_writes += 1;
                    }
                    counts.classify_write(event, resource);
                }
            }
        }
        counts
    }

    fn classify_write(&mut self, event: &AuditEvent, resource: &str) {
        match event.verb.as_str() {
            _ if resource == "events" => self.event_writes += 1,
            _ if resource == "leases" => self.lease_writes += 1,
            _ if event.subresource.as_deref() == Some("status") => self.status_writes += 1,
            _ if is_owned(resource) => self.child_writes += 1,
            verb => *self.other_writes.entry(format!("{verb} {resource}")).or_default() += 1,
        }
    }

    /// Writes that change state: children, status and other objects (no
    /// events, no leases).
    fn state_writes(&self) -> usize {
        self.child_writes + self.status_writes + self.other_writes.values().sum::<usize>()
    }

    /// Every write but leases.
    fn writes(&self) -> usize {
        self.child_writes + self.status_writes + self.event_writes + self.other_writes.values().sum::<usize>()
    }
}

fn is_owned(resource: &str) -> bool {
    owned_resources().iter().any(|r| r.plural == resource)
}

async fn install_crds(plane: &ControlPlane, flavor: Flavor, binaries: &Binaries) -> Result<(), BenchError> {
    match flavor {
        Flavor::Ours => plane.install_crds().await?,
        Flavor::Go => {
            let folder = &binaries.go_crds;
            let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
                .map_err(io(format!("reading {}", folder.display())))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
                .collect();
            files.sort();
            for file in files {
                let text = std::fs::read_to_string(&file).map_err(io(format!("reading {}", file.display())))?;
                plane.apply_yaml(&text).await?;
            }
        }
    }
    Ok(())
}

/// The API server holds every create of a custom resource for 2 s while
/// its CRD is less than 2 s established (kubernetes/kubernetes#99199: so
/// that another API server of an HA pair has seen the CRD too). The CRDs
/// were installed a moment ago, so without this the first creates of
/// either operator's run would wait 0-2 s, by chance, on the clock of its
/// time to converge. A dry-run create goes through the same handler (held
/// too, if the CRD is that new) and stores nothing: once it returns, real
/// creates are not held.
async fn wait_out_new_crd_delay(client: &Client, namespace: &str, sample: &Value) -> Result<(), BenchError> {
    let object = sample_named(sample, "bench-dry-run", namespace)?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &memcached_resource());
    api.create(&PostParams { dry_run: true, ..PostParams::default() }, &object).await?;
    Ok(())
}

/// A sample CR under another name and namespace.
fn sample_named(sample: &Value, name: &str, namespace: &str) -> Result<DynamicObject, BenchError> {
    let mut object = sample.clone();
    object["metadata"] = serde_json::json!({ "name": name, "namespace": namespace });
    serde_json::from_value(object).map_err(|e| BenchError::Usage(format!("the sample is not an object: {e}")))
}

async fn run_one(
    config: &Config,
    binaries: &Binaries,
    flavor: Flavor,
    samples: &[Sample],
    count: usize,
    logs: &Path,
) -> Result<Row, BenchError> {
    let label = format!("N={count} {}", flavor.label());
    progress(&format!("{label}: starting a control plane"));
    let load_at_start = machine::load_now();
    let plane = ControlPlane::start_with(bench_plane_options())?;
    install_crds(&plane, flavor, binaries).await?;
    let admin = plane.client(User::Admin).await?;
    plane
        .apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: bench-operator-cluster-admin}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {OPERATOR_USER}}},\n\
             {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:serviceaccounts:default'}}]\n"
        ))
        .await?;
    plane.wait_until_allowed(User::Operator, "create", "apps", "deployments", Some("default")).await?;
    // Ours writes as the module's ServiceAccount (`--module-identity`'s
    // default), in the kubeconfig's namespace.
    plane
        .wait_until_service_account_allowed(("default", "memcached"), "create", "apps", "deployments", Some("default"))
        .await?;
    let namespaces: Vec<String> = (0..config.namespaces.min(count)).map(|i| format!("bench-{i}")).collect();
    for namespace in &namespaces {
        create_namespace_with_secrets(&admin, namespace).await?;
    }
    wait_out_new_crd_delay(&admin, &namespaces[0], &samples[0].object).await?;

    let log = logs.join(format!("operator-{}-{count}.log", if flavor == Flavor::Ours { "ours" } else { "go" }));
    // The Go operator has no tuning flags: controller-runtime's defaults, one
    // worker, no periodic resync short of 10 h.
    let resync_every = resync_period(config, count);
    let (binary, extra) = match flavor {
        Flavor::Ours => (
            &binaries.ours,
            vec![
                "--concurrency".to_owned(),
                config.concurrency.to_string(),
                "--resync-period".to_owned(),
                format!("{}s", resync_every.as_secs()),
            ],
        ),
        Flavor::Go => (&binaries.go, vec![]),
    };
    let mut operator = OperatorProcess::spawn(flavor, binary, &extra, &plane.kubeconfig(User::Operator), &log)?;
    progress(&format!("{label}: operator pid {} (log {})", operator.pid(), log.display()));
    operator.wait_ready().await?;
    let start_usage = operator.usage()?;
    let servers_at_start = server_usage(&plane)?;
    let busy_at_start = machine::busy_cpu_seconds();
    let before = operator.scrape().await?;
    let mark = plane.audit_mark()?;

    // Watch before creating, so no change is missed.
    let expected = expected_children(samples);
    let tracker = Tracker::start(&admin, &memcached_resource(), &owned_resources(), move |name| {
        cr_index(name).map_or(0, |i| expected[i % expected.len()])
    });

    progress(&format!("{label}: creating {count} Memcacheds in {} namespaces", namespaces.len()));
    let started = Instant::now();
    let objects: Vec<Value> = samples.iter().map(|s| s.object.clone()).collect();
    let creating =
        tokio::spawn(create_all(admin.clone(), objects, count, namespaces.clone(), config.create_concurrency));
    let mut creating = Some(creating);
    let mut applied = None;
    let timeout = converge_timeout(count);
    let deadline = Instant::now() + timeout;
    let mut last_report = Instant::now();
    loop {
        if let Some(task) = creating.as_mut().filter(|t| t.is_finished()) {
            match task.await {
                Ok(result) => result?,
                Err(join) => return Err(BenchError::Usage(format!("creating the CRs: {join}"))),
            }
            applied = Some(started.elapsed());
            progress(&format!("{label}: all created after {:.1}s", started.elapsed().as_secs_f64()));
            creating = None;
        }
        let now = tracker.snapshot();
        if creating.is_none() && now.listed == count && now.status_converged == count && now.missing_children == 0 {
            break;
        }
        operator.check_alive()?;
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: format!(
                    "{count} CRs to converge ({} seen, {} with their generation observed, {} owned objects missing)",
                    now.listed, now.status_converged, now.missing_children
                ),
                seconds: timeout.as_secs(),
            });
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            progress(&format!(
                "{label}: {}/{count} status converged, {} owned objects missing, after {:.0}s",
                now.status_converged,
                now.missing_children,
                started.elapsed().as_secs_f64()
            ));
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let converged_after = started.elapsed();
    let converge_usage = operator.usage()?;
    let machine_busy_to_converge = machine::busy_cpu_seconds() - busy_at_start;
    let mut servers = server_rows(&servers_at_start, &server_usage(&plane)?);
    let at_convergence = operator.scrape().await?;
    // The watches stop here: the idle passes measure the operator alone.
    let watched = tracker.snapshot();
    drop(tracker);
    if watched.watch_errors > 0 {
        progress(&format!("{label}: the bench's watches saw {} errors (and resumed)", watched.watch_errors));
    }
    let cached_objects = count + watched.children + count_secrets(&admin, &namespaces).await?;
    plane.audit_sync().await?;
    let audit = AuditCounts::of(&plane.audit_events_since(mark)?);
    // Logged now too: a run that dies in its idle passes (at 100,000 CRs
    // the API server can outgrow the machine) keeps what it measured.
    let servers_now: Vec<String> = servers
        .iter()
        .map(|s| format!("{} {:.1} CPU s, peak {:.0} MiB", s.name, s.cpu_to_converge, mib(s.peak_rss_kib)))
        .collect();
    progress(&format!(
        "{label}: converged after {:.1}s; operator {:.1} CPU s, RSS {:.0} MiB (peak {:.0}); {}; machine busy {:.1} CPU s",
        converged_after.as_secs_f64(),
        converge_usage.cpu_seconds - start_usage.cpu_seconds,
        mib(converge_usage.rss_kib),
        mib(converge_usage.peak_rss_kib),
        servers_now.join(", "),
        machine_busy_to_converge,
    ));

    let quiet = settle(&label, &mut operator, count).await?;
    let resync = match flavor {
        Flavor::Ours if config.resync_pass => {
            progress(&format!("{label}: idle; waiting for one resync ({} s)", resync_every.as_secs()));
            let limit = resync_every + idle_pass_timeout(count);
            let pass = idle_pass(&label, &plane, &mut operator, count, quiet, limit).await?;
            Some(pass)
        }
        Flavor::Ours | Flavor::Go => None,
    };
    let touch = if config.touch_pass {
        let quiet = settle(&label, &mut operator, count).await?;
        progress(&format!("{label}: idle; touching every CR"));
        let touching = tokio::spawn(touch_all(admin.clone(), count, namespaces.clone(), config.create_concurrency));
        let touch = idle_pass(&label, &plane, &mut operator, count, quiet, idle_pass_timeout(count)).await?;
        match touching.await {
            Ok(result) => result?,
            Err(join) => return Err(BenchError::Usage(format!("touching the CRs: {join}"))),
        }
        Some(touch)
    } else {
        None
    };

    let end_usage = operator.usage()?;
    // The servers' peaks over the whole run, idle passes included.
    for (name, usage) in server_usage(&plane)? {
        if let Some(server) = servers.iter_mut().find(|s| s.name == name) {
            server.peak_rss_kib = usage.peak_rss_kib;
        }
    }
    operator.stop();
    drop(plane);

    let requests = match (at_convergence.requests, before.requests) {
        (Some(after), Some(before)) => Some(Requests {
            reads: after.reads - before.reads,
            writes: after.writes - before.writes,
            watches: after.watches,
        }),
        _ => None,
    };
    let row = Row {
        flavor,
        crs: count,
        applied: applied.unwrap_or(converged_after),
        converged: converged_after,
        reconciles: at_convergence.reconciles - before.reconciles,
        requests,
        audit,
        resync,
        resync_period: resync_every,
        touch,
        load_at_start,
        cached_objects,
        expected: Expected::of(samples, count),
        start_rss_kib: start_usage.rss_kib,
        converged_rss_kib: converge_usage.rss_kib,
        peak_rss_kib: end_usage.peak_rss_kib,
        idle_rss_kib: end_usage.rss_kib,
        cpu_to_converge: converge_usage.cpu_seconds - start_usage.cpu_seconds,
        servers,
        machine_busy_to_converge,
    };
    for (name, pass) in [("resync", row.resync.as_ref()), ("touch", row.touch.as_ref())] {
        if let Some(pass) = pass.filter(|p| p.audit.child_writes + p.audit.status_writes > 0) {
            progress(&format!(
                "{label}: WRITES DURING THE IDLE {name}: {} children, {} status, other {:?} (see {})",
                pass.audit.child_writes,
                pass.audit.status_writes,
                pass.audit.other_writes,
                log.display()
            ));
        }
    }
    Ok(row)
}

/// Waits until the operator's reconcile counter stands still for 3 s (60 s
/// plus 20 ms per CR at most: a backlog left after convergence would
/// otherwise count in the next idle pass) and returns it.
async fn settle(label: &str, operator: &mut OperatorProcess, count: usize) -> Result<u64, BenchError> {
    let mut quiet = operator.scrape().await?.reconciles;
    let limit = Duration::from_secs(60) + Duration::from_millis(20) * count as u32;
    let settle_deadline = Instant::now() + limit;
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
    if quiet_for < 3 {
        progress(&format!(
            "{label}: still reconciling after {}s idle; the next pass counts from here",
            limit.as_secs()
        ));
    }
    Ok(quiet)
}

/// Waits until every CR was reconciled once more than `quiet` (within
/// `limit`), then counts the operator's requests meanwhile.
async fn idle_pass(
    label: &str,
    plane: &ControlPlane,
    operator: &mut OperatorProcess,
    count: usize,
    quiet: u64,
    limit: Duration,
) -> Result<IdlePass, BenchError> {
    let mark = plane.audit_mark()?;
    let started = Instant::now();
    let mut last_report = Instant::now();
    loop {
        let done = operator.scrape().await?.reconciles.saturating_sub(quiet);
        if done >= count as u64 {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            progress(&format!("{label}: {done}/{count} reconciled after {:.0}s", started.elapsed().as_secs_f64()));
            last_report = Instant::now();
        }
        if started.elapsed() > limit {
            return Err(BenchError::Timeout {
                what: format!("an idle pass over {count} CRs ({done} reconciled)"),
                seconds: limit.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The last reconciles' requests, if any, reach the log.
    tokio::time::sleep(Duration::from_secs(2)).await;
    plane.audit_sync().await?;
    let audit = AuditCounts::of(&plane.audit_events_since(mark)?);
    let window = started.elapsed();
    let reconciles = operator.scrape().await?.reconciles.saturating_sub(quiet);
    Ok(IdlePass { reconciles, audit, window })
}

/// CR `i`: named `cache-i`, in namespace `i mod namespaces`, from sample `i mod samples`.
fn cr_name(i: usize) -> String {
    format!("cache-{i:05}")
}

fn cr_index(name: &str) -> Option<usize> {
    name.strip_prefix("cache-")?.parse().ok()
}

async fn create_all(
    client: Client,
    samples: Vec<Value>,
    count: usize,
    namespaces: Vec<String>,
    parallelism: usize,
) -> Result<(), BenchError> {
    let resource = memcached_resource();
    futures::stream::iter(0..count)
        .map(|i| {
            let namespace = &namespaces[i % namespaces.len()];
            let object = sample_named(&samples[i % samples.len()], &cr_name(i), namespace);
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
            async move {
                api.create(&PostParams::default(), &object?).await?;
                Ok::<_, BenchError>(())
            }
        })
        .buffer_unordered(parallelism)
        .try_collect::<()>()
        .await
}

/// Adds the touch annotation to every CR (no spec change: no new generation).
async fn touch_all(
    client: Client,
    count: usize,
    namespaces: Vec<String>,
    parallelism: usize,
) -> Result<(), BenchError> {
    let resource = memcached_resource();
    let patch = serde_json::json!({ "metadata": { "annotations": { TOUCH_ANNOTATION: "1" } } });
    futures::stream::iter(0..count)
        .map(|i| {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &namespaces[i % namespaces.len()], &resource);
            let patch = &patch;
            async move {
                api.patch(&cr_name(i), &PatchParams::default(), &Patch::Merge(patch)).await?;
                Ok::<_, BenchError>(())
            }
        })
        .buffer_unordered(parallelism)
        .try_collect::<()>()
        .await
}

/// The Secrets in the bench's namespaces (the ones the samples reference):
/// both operators cache them.
async fn count_secrets(client: &Client, namespaces: &[String]) -> Result<usize, BenchError> {
    let mut secrets = 0;
    for namespace in namespaces {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        secrets += api.list_metadata(&ListParams::default()).await?.items.len();
    }
    Ok(secrets)
}

fn per_cr(total: usize, crs: usize) -> String {
    format!("{:.1}", total as f64 / crs as f64)
}

fn idle_cell(pass: Option<&IdlePass>) -> String {
    match pass {
        None => "–".into(),
        Some(pass) => format!(
            "{}, {} (+{} events) in {:.0} s",
            pass.reconciles,
            pass.audit.state_writes(),
            pass.audit.event_writes,
            pass.window.as_secs_f64()
        ),
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn table(rows: &[Row], config: &Config, samples: &[Sample], machine: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "CRs cycling through the {} samples ({}), {} namespaces; ours with `--concurrency {}` and the \
         `--resync-period` its idle resync shows, the Go operator with its defaults and webhooks off; {machine}.\n\n",
        samples.len(),
        samples.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        config.namespaces,
        config.concurrency,
    ));
    out.push_str(
        "| operator | CRs | load at start | all created | converged | reconciles | requests/CR (metrics: reads + writes) | audit/CR: get, list | audit/CR: writes (children + status + events; rejected in all) | expected writes/CR (children + status + events) | idle resync (period): reconciles, writes | idle touch: reconciles, writes | cached objects | RSS: start, converged, peak, idle | CPU to converge |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let a = &row.audit;
        let e = &row.expected;
        let requests = row.requests.map_or_else(
            || "–".into(),
            |r| format!("{:.1} + {:.1}", r.reads as f64 / row.crs as f64, r.writes as f64 / row.crs as f64),
        );
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} s | {:.1} s | {} | {} | {}, {} | {} ({} + {} + {}; {} rejected) | {} ({} + {} + {}) | {} | {} | {} | {:.0}, {:.0}, {:.0}, {:.0} MiB | {:.1} s |\n",
            row.flavor.label(),
            row.crs,
            row.load_at_start,
            row.applied.as_secs_f64(),
            row.converged.as_secs_f64(),
            row.reconciles,
            requests,
            per_cr(a.gets, row.crs),
            per_cr(a.lists, row.crs),
            per_cr(a.writes(), row.crs),
            per_cr(a.child_writes, row.crs),
            per_cr(a.status_writes, row.crs),
            per_cr(a.event_writes, row.crs),
            a.rejected_writes,
            per_cr(e.total(), row.crs),
            per_cr(e.children, row.crs),
            per_cr(e.statuses, row.crs),
            per_cr(e.events, row.crs),
            match &row.resync {
                Some(pass) => format!("({} s) {}", row.resync_period.as_secs(), idle_cell(Some(pass))),
                None => idle_cell(None),
            },
            idle_cell(row.touch.as_ref()),
            row.cached_objects,
            mib(row.start_rss_kib),
            mib(row.converged_rss_kib),
            mib(row.peak_rss_kib),
            mib(row.idle_rss_kib),
            row.cpu_to_converge,
        ));
    }
    let watches: Vec<String> = rows.iter().filter_map(|r| r.requests.map(|q| q.watches.to_string())).collect();
    if watches.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "\nWatches opened by our operator: {} (one per cached kind; not per CR). \"converged\" counts from the first create.\n",
        watches.join(" / ")
    ));
    out
}

/// Where the machine's CPU went until convergence, and each process's peak.
fn servers_table(rows: &[Row]) -> String {
    let cores = machine::cores() as f64;
    let mut out = format!(
        "\nThe machine from the first create to convergence: CPU seconds of the operator, the API server and \
         etcd, the whole machine's busy CPU seconds (everyone's: the bench's own watches and creates are the \
         rest), each as a share of what {cores:.0} cores offer over that time; peak RSS of each process.\n\n\
         | operator | CRs | converged | operator CPU | API server CPU | etcd CPU | machine busy | peak RSS: operator, API server, etcd |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for row in rows {
        let offered = row.converged.as_secs_f64() * cores;
        let share = |seconds: f64| format!("{seconds:.1} s ({:.0} %)", 100.0 * seconds / offered.max(f64::EPSILON));
        let server = |name: &str| row.servers.iter().find(|s| s.name == name);
        let server_cpu = |name: &str| server(name).map_or_else(|| "–".into(), |s| share(s.cpu_to_converge));
        let server_peak =
            |name: &str| server(name).map_or_else(|| "–".into(), |s| format!("{:.0}", mib(s.peak_rss_kib)));
        out.push_str(&format!(
            "| {} | {} | {:.1} s | {} | {} | {} | {} | {:.0}, {}, {} MiB |\n",
            row.flavor.label(),
            row.crs,
            row.converged.as_secs_f64(),
            share(row.cpu_to_converge),
            server_cpu("kube-apiserver"),
            server_cpu("etcd"),
            share(row.machine_busy_to_converge),
            mib(row.peak_rss_kib),
            server_peak("kube-apiserver"),
            server_peak("etcd"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_resync_period_grows_with_the_crs() {
        assert_eq!(default_resync_period(100), Duration::from_secs(30));
        assert_eq!(default_resync_period(1000), Duration::from_secs(60));
        assert_eq!(default_resync_period(10_000), Duration::from_secs(600));
    }

    #[test]
    fn without_the_resync_pass_no_resync_falls_in_the_run_unless_asked() {
        let root = Path::new("/repo");
        let args = |list: &[&str]| parse_args(root, list.iter().map(|a| a.to_string())).expect("parses");
        assert_eq!(resync_period(&args(&[]), 100_000), Duration::from_secs(6000));
        assert_eq!(resync_period(&args(&["--no-resync-pass"]), 100_000), NO_RESYNC);
        let given = args(&["--no-resync-pass", "--resync-period", "2m"]);
        assert_eq!(resync_period(&given, 100_000), Duration::from_secs(120));
        assert!(!given.resync_pass);
    }

    #[test]
    fn the_touch_pass_runs_unless_skipped() {
        let root = Path::new("/repo");
        let args = |list: &[&str]| parse_args(root, list.iter().map(|a| a.to_string())).expect("parses");
        assert!(args(&[]).touch_pass);
        let skipped = args(&["--no-touch-pass"]);
        assert!(!skipped.touch_pass);
        assert!(skipped.resync_pass);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_seconds("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_seconds("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_seconds("0s"), None);
        assert_eq!(parse_seconds("x"), None);
    }

    #[test]
    fn cr_names_carry_their_index() {
        assert_eq!(cr_index(&cr_name(42)), Some(42));
        assert_eq!(cr_index("other"), None);
    }
}
