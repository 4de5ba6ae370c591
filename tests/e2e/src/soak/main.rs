//! `make soak` (issue 22, item 4): two replicas of `memcached-operator run`
//! with leader election, N Memcached CRs on a local control plane with kwok
//! nodes, for a configurable time, under a seeded random schedule of churn
//! and faults; then a table of what held.
//!
//! ```text
//! soak [--minutes 60] [--crs 1000] [--seed 22] [--namespaces 4] [--changes-per-second 1]
//!      [--concurrency N] [--out target/soak/results.md]
//! ```
//!
//! - Churn (its own task, `--changes-per-second`): CR edits (a new
//!   `spec.memcached.maxConnections`), CRs deleted and created again, children
//!   deleted or edited by hand (a label the module sets), and every minute a
//!   Secret rotated (the CRs referencing it must roll their pod template's
//!   secret hash). Each change names the state that shows it converged
//!   (world.rs), seen by watches of full objects.
//! - Faults (a timeline drawn from the seed): latency, connection resets and
//!   partitions of a few seconds between one replica (or both) and the API
//!   server through Toxiproxy (toxiproxy.rs); a hot swap every 150 s
//!   alternating two module versions that behave the same (the Memcached
//!   component, and the same with a custom section: another digest), and
//!   once a version that traps on parents annotated
//!   `soak.c5c3.io/fail-on-later`, which must be rolled back once a parent
//!   gets the annotation; the API server restarted and the leader killed
//!   (SIGKILL) at intervals, the killed replica started again in the same
//!   pod (the same POD_NAME) or, every second kill, in a new one.
//! - Measured: each replica's resident memory over time and its drift after
//!   warm-up, reconciles and their failures by cause (metrics and logs),
//!   time from each change to convergence (all; outside partitions; outside
//!   every injected fault), writes to unchanged objects (audit.rs) and
//!   modifications without a content change (watches), lost updates at the
//!   end (verify.rs), failovers and the time until a replica leads again
//!   after each kill, panics in the
//!   logs, faults injected by kind and changes applied.

mod audit;
#[path = "../module_versions.rs"]
mod module_versions;
// The bench's; load_now is the bench's alone.
#[allow(dead_code)]
#[path = "../machine.rs"]
mod machine;
mod replicas;
mod report;
mod rotations;
mod setup;
mod toxiproxy;
mod verify;
mod waits;
mod world;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use memcached_e2e::cluster::{Sample, SampleError, memcached_resource, owned_resources};
use replicas::{LEASE_NAME, Replica};
use serde_json::{Value, json};
use setup::Cluster;
use tokio::sync::Mutex as AsyncMutex;
use toxiproxy::{NetworkFault, Toxiproxy};
use world::{Goal, Key, Shared, World, lock};

pub const OPERATOR_USER: &str = "memcached-operator";
/// The annotation the failing module version traps on.
pub const FAIL_ANNOTATION: &str = "soak.c5c3.io/fail-on-later";
/// A label the module sets on every child; the soak edits it by hand.
const EDITED_LABEL: &str = "app.kubernetes.io/managed-by";

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("{0}")]
    Usage(String),
    #[error("setting up: {0}")]
    Setup(String),
    #[error("control plane: {0}")]
    Plane(#[from] control_plane::Error),
    #[error("API request: {0}")]
    Kube(#[from] kube::Error),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("Toxiproxy: {0}")]
    Toxiproxy(String),
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error("replica {replica} exited by itself ({status})")]
    ReplicaExited { replica: char, status: String },
    #[error("render: {0}")]
    Render(String),
    #[error(transparent)]
    Samples(#[from] SampleError),
}

impl SoakError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SoakError::Io { context: context.into(), source }
    }
}

pub struct Config {
    pub minutes: f64,
    pub crs: usize,
    pub seed: u64,
    pub namespaces: usize,
    pub changes_per_second: f64,
    /// The operators' `--concurrency`; None for the operator's default,
    /// which is what a soak should try unless asked otherwise.
    pub concurrency: Option<u16>,
    /// Off with `--no-faults`: churn alone, one leader throughout, for a
    /// drift figure over the whole run (a fault-free baseline).
    pub faults: bool,
    pub out: PathBuf,
}

const USAGE: &str = "usage: soak [--minutes 60] [--crs 1000] [--seed 22] [--namespaces 4] [--changes-per-second 1] [--concurrency N] [--no-faults] [--out FILE]";

fn parse_args(root: &Path, mut args: impl Iterator<Item = String>) -> Result<Config, SoakError> {
    let mut config = Config {
        minutes: 60.0,
        crs: 1000,
        seed: 22,
        namespaces: 4,
        changes_per_second: 1.0,
        concurrency: None,
        faults: true,
        out: root.join("target/soak/results.md"),
    };
    let usage = |message: String| SoakError::Usage(format!("{message}\n{USAGE}"));
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| usage(format!("{arg} needs a value")));
        let bad = |text: &str| usage(format!("{arg} {text:?}"));
        match arg.as_str() {
            "--minutes" => {
                let text = value()?;
                config.minutes = text.parse().ok().filter(|m: &f64| *m > 0.0).ok_or_else(|| bad(&text))?;
            }
            "--crs" => {
                let text = value()?;
                config.crs = text.parse().ok().filter(|n| *n > 0).ok_or_else(|| bad(&text))?;
            }
            "--seed" => {
                let text = value()?;
                config.seed = text.parse().map_err(|_| bad(&text))?;
            }
            "--namespaces" => {
                let text = value()?;
                config.namespaces = text.parse().ok().filter(|n| *n > 0).ok_or_else(|| bad(&text))?;
            }
            "--changes-per-second" => {
                let text = value()?;
                config.changes_per_second = text.parse().ok().filter(|r: &f64| *r > 0.0).ok_or_else(|| bad(&text))?;
            }
            "--concurrency" => {
                let text = value()?;
                config.concurrency = Some(text.parse().ok().filter(|n| *n > 0).ok_or_else(|| bad(&text))?);
            }
            "--out" => config.out = PathBuf::from(value()?),
            "--no-faults" => config.faults = false,
            "-h" | "--help" => return Err(SoakError::Usage(USAGE.into())),
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    Ok(config)
}

fn main() -> ExitCode {
    let root = control_plane::repo_root();
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "rotations") {
        args.next();
        return match rotations::parse_args(&root, args) {
            Ok(config) => block_on(rotations::run(&root, &config)).map_or(ExitCode::FAILURE, |()| ExitCode::SUCCESS),
            Err(error) => {
                eprintln!("{error}");
                ExitCode::from(2)
            }
        };
    }
    if args.peek().is_some_and(|a| a == "audit") {
        args.next();
        return audit_command(args.next());
    }
    let config = match parse_args(&root, args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    block_on(run(&root, &config)).map_or(ExitCode::FAILURE, |met| {
        if met {
            ExitCode::SUCCESS
        } else {
            eprintln!("soak: a goal was missed (see the table)");
            ExitCode::FAILURE
        }
    })
}

/// `soak audit DIR`: the writes to unchanged objects in the audit log of a
/// control plane kept after a run (`CONTROL_PLANE_KEEP_DIR=1`), so a run's
/// figure can be checked again.
fn audit_command(dir: Option<String>) -> ExitCode {
    let Some(dir) = dir else {
        eprintln!("usage: soak audit <control plane directory, kept with CONTROL_PLANE_KEEP_DIR=1>");
        return ExitCode::from(2);
    };
    match audit::analyse(&Path::new(&dir).join("audit.log"), OPERATOR_USER) {
        Ok(writes) => {
            println!(
                "{} successful writes by {OPERATOR_USER}; writes to unchanged objects: by it {}, by others {}; refused by code {:?}",
                writes.by_operator,
                writes.unchanged_by(OPERATOR_USER),
                writes.unchanged.values().sum::<usize>() - writes.unchanged_by(OPERATOR_USER),
                writes.refused_by_code
            );
            for ((user, resource), count) in &writes.unchanged {
                println!("  {user} {resource}: {count}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `work` on a two-thread runtime; an error is printed (and is None).
fn block_on<T>(work: impl std::future::Future<Output = Result<T, SoakError>>) -> Option<T> {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: tokio runtime: {error}");
            return None;
        }
    };
    runtime.block_on(work).map_err(|error| eprintln!("error: {error}")).ok()
}

pub fn progress(message: &str) {
    eprintln!("soak {}: {message}", clock());
}

/// UTC time of day, HH:MM:SS.
fn clock() -> String {
    let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("{:02}:{:02}:{:02}", seconds / 3600 % 24, seconds / 60 % 60, seconds % 60)
}

/// splitmix64: small, seedable, good enough to draw a schedule.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }
}

/// The module files the soak swaps between.
pub struct Modules {
    /// The file both replicas watch.
    pub watched: PathBuf,
    /// Two versions with identical behaviour (different digests).
    pub good: [PathBuf; 2],
    pub failing: PathBuf,
}

impl Modules {
    fn prepare(root: &Path, dir: &Path) -> Result<Self, SoakError> {
        let built = root.join("target/memcached.wasm");
        let failing = root.join("target/memcached-soak-fail-on-later.wasm");
        for file in [&built, &failing] {
            if !file.is_file() {
                return Err(SoakError::Usage(format!("{} is missing; `make soak` builds it", file.display())));
            }
        }
        let bytes = std::fs::read(&built).map_err(|e| SoakError::io(format!("reading {}", built.display()), e))?;
        let a = dir.join("memcached-a.wasm");
        let b = dir.join("memcached-b.wasm");
        let write = |path: &Path, bytes: &[u8]| {
            std::fs::write(path, bytes).map_err(|e| SoakError::io(format!("writing {}", path.display()), e))
        };
        write(&a, &bytes)?;
        write(&b, &module_versions::with_custom_section(bytes, "soak-version", b"b"))?;
        let modules = Modules { watched: dir.join("memcached.wasm"), good: [a, b], failing };
        modules.install(&modules.good[0])?;
        Ok(modules)
    }

    /// Replaces the watched file by `version` (write, then rename).
    pub fn install(&self, version: &Path) -> Result<(), SoakError> {
        let next = self.watched.with_extension("next");
        std::fs::copy(version, &next)
            .and_then(|_| std::fs::rename(&next, &self.watched))
            .map(|_| ())
            .map_err(|e| SoakError::io(format!("installing {}", version.display()), e))
    }
}

/// `sha256:<hex>` of a file, as module_info labels it.
fn digest(path: &Path) -> Result<String, SoakError> {
    module_versions::digest_of(path).map_err(|e| SoakError::io(format!("sha256sum {}", path.display()), e))
}

/// One fault injected, for the table and the convergence windows.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    pub kind: String,
    pub started: Instant,
    pub ended: Instant,
    /// Windows that count as a partition for "outside injected partitions".
    pub partition: bool,
    pub note: String,
}

/// A change of Lease holder seen by the poller.
#[derive(Debug, Clone)]
pub struct LeaderChange {
    pub from: Option<String>,
    pub to: Option<String>,
}

/// A leader killed by the soak, and when a replica led again.
#[derive(Debug, Clone)]
pub struct Kill {
    pub identity: String,
    pub at: Instant,
    /// Its pod replaced (a new POD_NAME: the other replica must wait the
    /// Lease out), or only its container restarted (the same POD_NAME,
    /// which takes its own Lease back at once).
    pub pod_replaced: bool,
    /// Until the Lease was next renewed (by either replica).
    pub takeover: Option<Duration>,
}

/// What the Lease poller saw.
#[derive(Debug, Clone, Default)]
pub struct LeaseLog {
    /// Changes of holder.
    pub changes: Vec<LeaderChange>,
    /// Each renewal seen: when, and the renewTime written (a replica's
    /// clock, this machine's).
    pub renewals: Vec<(Instant, std::time::SystemTime)>,
}

/// Renewals further apart than this (the retry period is 2 s, plus two
/// round trips under injected latency) are time without a leader.
pub const NO_LEADER_AFTER: Duration = Duration::from_secs(4);

/// The swap sequence's results.
#[derive(Debug, Default, Clone)]
pub struct Swaps {
    pub to_identical: usize,
    /// Swaps seen live on the leader (its module_info) within 60 s.
    pub live: usize,
    pub failing_offered: usize,
    /// From the annotation that makes the failing version trap to the
    /// previous version serving again.
    pub rolled_back_in: Option<Duration>,
    pub problems: Vec<String>,
}

/// Changes the churn applied, by kind; requests that failed, by kind.
#[derive(Debug, Default, Clone)]
pub struct Churn {
    pub applied: BTreeMap<&'static str, usize>,
    pub failed: BTreeMap<&'static str, usize>,
    pub last_error: Option<String>,
}

pub struct Run {
    pub replicas: AsyncMutex<Vec<Replica>>,
    pub stop: AtomicBool,
    /// Replicas that exited by themselves (and were started again, as a
    /// kubelet would): identity, when, the last line of its log.
    pub exits: std::sync::Mutex<Vec<(String, Instant, String)>>,
}

/// Everything the report needs.
pub struct Outcome {
    pub machine: String,
    pub commit: String,
    pub soak_started: Instant,
    pub soak_ended: Instant,
    pub warmup: Duration,
    pub created_in: Duration,
    pub faults: Vec<FaultRecord>,
    pub kills: Vec<Kill>,
    pub lease: LeaseLog,
    pub swaps: Swaps,
    pub churn: Churn,
    pub world: World,
    pub writes: audit::Writes,
    pub lost: Vec<verify::Lost>,
    pub crs_checked: usize,
    pub settled_in: Option<Duration>,
    pub logs: report::Logs,
    pub exits: Vec<(String, Instant, String)>,
}

async fn run(root: &Path, config: &Config) -> Result<bool, SoakError> {
    let cluster = Cluster::start(root, config.crs, config.namespaces).await?;
    progress(&format!(
        "{}; {} CRs, {} min, seed {}, {} changes/s",
        cluster.machine, config.crs, config.minutes, config.seed, config.changes_per_second
    ));
    let Cluster {
        operator: _,
        host,
        dir,
        machine,
        samples,
        modules,
        plane,
        admin,
        namespaces,
        proxy,
        owned,
        world,
        watches,
        ..
    } = &cluster;
    let mut replicas = Vec::new();
    for name in ['a', 'b'] {
        replicas.push(cluster.replica(name, setup::concurrency_flag(config.concurrency))?);
    }

    for replica in &mut replicas {
        replica.start()?;
        replica.wait_ready().await?;
        progress(&format!("replica {} ready ({})", replica.name, replica.identity().unwrap_or("?")));
    }
    let shared = Arc::new(Run {
        replicas: AsyncMutex::new(replicas),
        stop: AtomicBool::new(false),
        exits: std::sync::Mutex::new(Vec::new()),
    });
    let lease_log = Arc::new(std::sync::Mutex::new(LeaseLog::default()));
    let lease_task = tokio::spawn(follow_lease(admin.clone(), lease_log.clone(), shared.clone()));
    let sampler = tokio::spawn(sample_replicas(shared.clone()));

    progress(&format!("creating {} Memcacheds in {} namespaces", config.crs, namespaces.len()));
    let created = Instant::now();
    create_all(admin, world, samples, config.crs, namespaces).await?;
    wait_converged(world, Duration::from_secs(600 + config.crs as u64 / 2), "every CR to converge").await?;
    let created_in = created.elapsed();
    progress(&format!("{} CRs converged in {:.1} s", config.crs, created_in.as_secs_f64()));
    // The initial creates are not soak changes.
    lock(world).converged.clear();

    let duration = Duration::from_secs_f64(config.minutes * 60.0);
    // Memory drift is measured per process while it leads, after this much
    // of its lead (caches filled, allocator settled).
    let warmup = (duration / 10).clamp(Duration::from_secs(60), Duration::from_secs(180));
    let soak_started = Instant::now();
    let churn_task =
        tokio::spawn(churn(admin.clone(), world.clone(), shared.clone(), config.seed, config.changes_per_second));
    let mut timeline =
        if config.faults { Timeline::draw(config.seed, duration) } else { Timeline { events: Vec::new() } };
    progress(&format!("fault timeline (s from now): {}", timeline.describe()));
    let mut faults = Vec::new();
    let mut kills = Vec::new();
    let mut swaps = Swaps::default();
    let mut active_good = 0usize;
    let fault_context = FaultContext { proxy, shared: &shared, admin, world, modules };
    while let Some((at, event)) = timeline.next() {
        let wait = (soak_started + at).saturating_duration_since(Instant::now());
        tokio::time::sleep(wait).await;
        match event {
            Event::Network { fault, target, seconds } => {
                faults.push(fault_context.network(fault, target, seconds).await?);
            }
            Event::Swap => {
                active_good = 1 - active_good;
                fault_context.swap(&modules.good[active_good], &mut swaps).await?;
                faults.push(FaultRecord {
                    kind: "hot swap (identical behaviour)".into(),
                    started: Instant::now(),
                    ended: Instant::now(),
                    partition: false,
                    note: String::new(),
                });
            }
            Event::FailingSwap => {
                let started = Instant::now();
                fault_context.failing_swap(&modules.good[active_good], &mut swaps, config.seed).await?;
                faults.push(FaultRecord {
                    kind: "hot swap that must roll back".into(),
                    started,
                    ended: Instant::now(),
                    partition: false,
                    note: String::new(),
                });
            }
            Event::RestartApiServer => {
                let started = Instant::now();
                progress("restarting the API server");
                let plane_ref = &plane;
                tokio::task::block_in_place(|| plane_ref.restart_apiserver())?;
                // Nothing reaches the API server meanwhile: a partition of
                // both replicas from it.
                faults.push(FaultRecord {
                    kind: "API server restart".into(),
                    started,
                    ended: Instant::now(),
                    partition: true,
                    note: String::new(),
                });
            }
            Event::KillLeader => {
                if let Some(kill) = fault_context.kill_leader(&lease_log, kills.len() % 2 == 1).await? {
                    faults.push(FaultRecord {
                        kind: "leader killed".into(),
                        started: kill.at,
                        ended: kill.at + kill.takeover.unwrap_or_default(),
                        partition: false,
                        note: String::new(),
                    });
                    kills.push(kill);
                }
            }
        }
    }
    let remaining = (soak_started + duration).saturating_duration_since(Instant::now());
    tokio::time::sleep(remaining).await;
    shared.stop.store(true, Ordering::SeqCst);
    let churn = churn_task.await.unwrap_or_default();
    let soak_ended = Instant::now();
    progress("soak over: healing every fault, waiting for convergence");
    proxy.heal_all()?;
    // The watched file ends on a version that behaves as the module render uses.
    modules.install(&modules.good[active_good])?;
    let settle_started = Instant::now();
    let settled = wait_settled(world, Duration::from_secs(300)).await;
    let settled_in = settled.then(|| settle_started.elapsed());
    // Lost updates: render the final state, again after a while if anything differs.
    let mut attempt = 0;
    let (crs_checked, lost) = loop {
        attempt += 1;
        let (checked, lost) =
            verify::check(admin, host, &modules.watched, &memcached_resource(), owned, namespaces, dir).await?;
        if lost.is_empty() || attempt == 6 {
            break (checked, lost);
        }
        progress(&format!("{} CRs differ from render; looking again in 10 s (e.g. {:?})", lost.len(), lost[0]));
        tokio::time::sleep(Duration::from_secs(10)).await;
    };
    shared.stop.store(true, Ordering::SeqCst);
    sampler.abort();
    lease_task.abort();
    let mut replicas = shared.replicas.lock().await;
    for replica in replicas.iter_mut() {
        replica.stop().await;
    }
    for task in watches {
        task.abort();
    }
    let audit_log = plane.audit_log_path().ok_or(SoakError::Plane(control_plane::Error::NoAuditLog))?;
    let writes = audit::analyse(&audit_log, OPERATOR_USER)?;
    let logs = report::Logs::read(&replicas)?;
    let world = std::mem::take(&mut *lock(world));
    let lease = lease_log.lock().map(|l| l.clone()).unwrap_or_default();
    let exits = shared.exits.lock().map(|e| e.clone()).unwrap_or_default();
    let outcome = Outcome {
        machine: machine.clone(),
        commit: commit(root),
        soak_started,
        soak_ended,
        warmup,
        created_in,
        faults,
        kills,
        lease,
        swaps,
        churn,
        world,
        writes,
        lost,
        crs_checked,
        settled_in,
        logs,
        exits,
    };
    let (text, met) = report::render(config, &outcome, &replicas);
    println!("\n{text}");
    if let Some(parent) = config.out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| SoakError::io(format!("creating {}", parent.display()), e))?;
    }
    std::fs::write(&config.out, &text).map_err(|e| SoakError::io(format!("writing {}", config.out.display()), e))?;
    write_rss_samples(dir, soak_started, &replicas)?;
    progress(&format!("table written to {}; logs and RSS samples in {}", config.out.display(), dir.display()));
    Ok(met)
}

/// Every RSS sample of every process, `rss.csv` beside its logs, with what
/// it was made of (file-backed pages, the heap in use and free): the drift
/// in the table is two medians; the whole series tells a leak from a burst,
/// and the other columns held memory from fragmentation and from pages
/// mapped again.
fn write_rss_samples(dir: &Path, started: Instant, replicas: &[replicas::Replica]) -> Result<(), SoakError> {
    let mut csv =
        String::from("process,seconds_since_soak_start,rss_kib,leading,rss_file_kib,heap_in_use_kib,heap_free_kib\n");
    let text = |kib: Option<u64>| kib.map(|k| k.to_string()).unwrap_or_default();
    for incarnation in replicas.iter().flat_map(|r| &r.incarnations) {
        for (i, (at, kib, leading)) in incarnation.rss.iter().enumerate() {
            let seconds = at.checked_duration_since(started).map_or(0.0, |d| d.as_secs_f64());
            let detail = incarnation.detail.get(i).copied().unwrap_or_default();
            let (used, free) = (text(detail.heap.map(|h| h.0)), text(detail.heap.map(|h| h.1)));
            let file = text(detail.file);
            csv.push_str(&format!("{},{seconds:.1},{kib},{leading},{file},{used},{free}\n", incarnation.identity));
        }
    }
    let path = dir.join("rss.csv");
    std::fs::write(&path, csv).map_err(|e| SoakError::io(format!("writing {}", path.display()), e))
}

fn commit(root: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "?".into())
}

fn cr_name(i: usize) -> String {
    format!("cache-{i:05}")
}

/// Creates CR `i` from sample `i mod samples` in namespace `i mod namespaces`.
async fn create_all(
    client: &Client,
    world: &Shared,
    samples: &[Sample],
    count: usize,
    namespaces: &[String],
) -> Result<(), SoakError> {
    let resource = memcached_resource();
    futures::stream::iter(0..count)
        .map(|i| {
            let namespace = namespaces[i % namespaces.len()].clone();
            let sample = &samples[i % samples.len()];
            let mut object = sample.object.clone();
            object["metadata"] = json!({ "name": cr_name(i), "namespace": namespace });
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
            let children = sample.children;
            async move {
                let object: DynamicObject = serde_json::from_value(object)
                    .map_err(|e| SoakError::Setup(format!("the sample is not an object: {e}")))?;
                let started = Instant::now();
                let created = api.create(&PostParams::default(), &object).await?;
                let uid = created.metadata.uid.clone().unwrap_or_default();
                let key = (namespace, cr_name(i));
                lock(world).expect("create", key, uid, Goal::Recreated { children }, started);
                Ok::<_, SoakError>(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
}

/// Until nothing is pending and every CR observes its generation.
async fn wait_converged(world: &Shared, timeout: Duration, what: &str) -> Result<(), SoakError> {
    let deadline = Instant::now() + timeout;
    loop {
        {
            let world = lock(world);
            if world.pending() == 0 && world.all_observed() {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            let pending = lock(world).pending_list();
            progress(&format!("still pending: {:?}", pending.iter().take(5).collect::<Vec<_>>()));
            return Err(SoakError::Timeout { what: what.into(), seconds: timeout.as_secs() });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// After the soak: every change converged, every CR observed, and the
/// watches quiet for 10 s (Pods of the last changes settle meanwhile).
async fn wait_settled(world: &Shared, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        {
            let world = lock(world);
            let quiet = world.last_event.is_none_or(|t| t.elapsed() > Duration::from_secs(10));
            if world.pending() == 0 && world.all_observed() && quiet {
                return true;
            }
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Polls the Lease every 250 ms (directly, not through a proxy) and records
/// each change of holder and each renewal.
async fn follow_lease(client: Client, log: Arc<std::sync::Mutex<LeaseLog>>, shared: Arc<Run>) {
    let api: Api<Lease> = Api::namespaced(client, "default");
    let mut holder: Option<String> = None;
    let mut renewed: Option<std::time::SystemTime> = None;
    let mut first = true;
    loop {
        if let Ok(Some(lease)) = api.get_opt(LEASE_NAME).await {
            let spec = lease.spec.unwrap_or_default();
            let now = spec.holder_identity.filter(|h| !h.is_empty());
            let renew_time = spec.renew_time.map(|t| std::time::SystemTime::from(t.0));
            if let Ok(mut log) = log.lock() {
                if now != holder {
                    if !first {
                        let change = LeaderChange { from: holder.clone(), to: now.clone() };
                        log.changes.push(change);
                    }
                    first = false;
                    holder = now;
                }
                if renew_time != renewed {
                    renewed = renew_time;
                    if let Some(written) = renew_time {
                        log.renewals.push((Instant::now(), written));
                    }
                }
            }
        }
        if shared.stop.load(Ordering::SeqCst) && holder.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Scrapes both replicas and samples their memory every 10 s; a replica
/// that exited by itself (e.g. on losing the Lease, as it should) is
/// started again within a second, as a kubelet would.
async fn sample_replicas(shared: Arc<Run>) {
    let mut tick = 0u64;
    loop {
        {
            let mut replicas = shared.replicas.lock().await;
            for replica in replicas.iter_mut() {
                let identity = replica.incarnations.last().map(|i| i.identity.clone()).unwrap_or_default();
                if replica.take_exit() && !shared.stop.load(Ordering::SeqCst) {
                    let why = replica.incarnations.last().map(|i| last_line(&i.log)).unwrap_or_default();
                    progress(&format!("{identity} exited by itself ({why}); starting it again"));
                    if let Ok(mut exits) = shared.exits.lock() {
                        exits.push((identity, Instant::now(), why));
                    }
                    if let Err(error) = replica.start() {
                        progress(&format!("could not start replica {} again: {error}", replica.name));
                    }
                } else if tick.is_multiple_of(10) {
                    let _ = replica.sample().await;
                }
            }
        }
        tick += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn last_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").chars().take(200).collect()
}

/// What the fault timeline does.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// On replica 0, 1, or both (2).
    Network {
        fault: NetworkFault,
        target: usize,
        seconds: f64,
    },
    Swap,
    FailingSwap,
    RestartApiServer,
    KillLeader,
}

/// The faults, drawn from the seed, in time order from the soak's start.
struct Timeline {
    events: Vec<(Duration, Event)>,
}

impl Timeline {
    fn draw(seed: u64, duration: Duration) -> Self {
        let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
        let total = duration.as_secs_f64();
        let mut events = Vec::new();
        // Network faults every ~40 s, cycling latency, resets, partition.
        let mut at = 20.0;
        let mut which = 0;
        while at < total - 30.0 {
            let target = rng.below(3);
            let (fault, seconds) = match which % 3 {
                0 => (
                    NetworkFault::Latency { latency_ms: 100 + 50 * rng.below(7) as u32, jitter_ms: 50 },
                    rng.between(15.0, 30.0),
                ),
                1 => (NetworkFault::Reset, rng.between(1.0, 3.0)),
                _ => (NetworkFault::Partition, rng.between(3.0, 8.0)),
            };
            events.push((at, Event::Network { fault, target, seconds }));
            which += 1;
            at += rng.between(35.0, 50.0);
        }
        // A hot swap every 150 s; the one nearest 40 % of the run must roll back.
        let mut swap_times = Vec::new();
        let mut at = 60.0 + rng.between(0.0, 10.0);
        while at < total - 60.0 {
            swap_times.push(at);
            at += 150.0;
        }
        let failing = swap_times
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| (*a - total * 0.4).abs().total_cmp(&(*b - total * 0.4).abs()))
            .map(|(i, _)| i);
        for (i, at) in swap_times.into_iter().enumerate() {
            events.push((at, if Some(i) == failing { Event::FailingSwap } else { Event::Swap }));
        }
        // The API server restarted and the leader killed, a few times a run.
        let every = (total / 3.0).max(300.0);
        let mut at = 100.0 + rng.between(0.0, 20.0);
        while at < total - 60.0 {
            events.push((at, Event::RestartApiServer));
            at += every;
        }
        let mut at = 250.0 + rng.between(0.0, 20.0);
        while at < total - 60.0 {
            events.push((at, Event::KillLeader));
            at += every;
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        Timeline { events: events.into_iter().rev().map(|(at, e)| (Duration::from_secs_f64(at), e)).collect() }
    }

    fn describe(&self) -> String {
        let name = |event: &Event| match event {
            Event::Network { fault, .. } => fault.label(),
            Event::Swap => "swap",
            Event::FailingSwap => "failing swap",
            Event::RestartApiServer => "API server restart",
            Event::KillLeader => "leader kill",
        };
        self.events
            .iter()
            .rev()
            .map(|(at, e)| format!("{:.0} {}", at.as_secs_f64(), name(e)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn next(&mut self) -> Option<(Duration, Event)> {
        self.events.pop()
    }
}

struct FaultContext<'a> {
    proxy: &'a Toxiproxy,
    shared: &'a Arc<Run>,
    admin: &'a Client,
    world: &'a Shared,
    modules: &'a Modules,
}

impl FaultContext<'_> {
    async fn network(&self, fault: NetworkFault, target: usize, seconds: f64) -> Result<FaultRecord, SoakError> {
        let proxies: Vec<&str> = match target {
            0 => vec!["replica-a"],
            1 => vec!["replica-b"],
            _ => vec!["replica-a", "replica-b"],
        };
        let started = Instant::now();
        for proxy in &proxies {
            self.proxy.inject(proxy, fault)?;
        }
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        for proxy in &proxies {
            self.proxy.heal(proxy, fault)?;
        }
        let note = format!("{} for {seconds:.1} s", proxies.join("+"));
        progress(&format!("{}: {note}", fault.label()));
        Ok(FaultRecord {
            kind: fault.label().into(),
            started,
            ended: Instant::now(),
            partition: fault == NetworkFault::Partition,
            note,
        })
    }

    /// The leader's /metrics text, if a replica leads.
    async fn leader_metrics(&self) -> Option<String> {
        let mut replicas = self.shared.replicas.lock().await;
        for replica in replicas.iter_mut() {
            if replica.sample().await.unwrap_or(false) {
                return replica.incarnations.last().map(|i| i.last_scrape.clone());
            }
        }
        None
    }

    /// The digest the leader serves now.
    async fn leader_digest(&self) -> Option<String> {
        let text = self.leader_metrics().await?;
        text.lines()
            .filter(|l| l.starts_with("wasm_operator_module_info") && l.ends_with(" 1"))
            .find_map(|l| l.split("digest=\"").nth(1)?.split('"').next().map(str::to_owned))
    }

    /// Until the leader serves `digest`; false after `seconds`.
    async fn wait_serving(&self, digest: &str, seconds: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < deadline {
            if let Some(text) = self.leader_metrics().await
                && text
                    .lines()
                    .any(|l| l.starts_with("wasm_operator_module_info") && l.contains(digest) && l.ends_with(" 1"))
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        false
    }

    async fn swap(&self, version: &Path, swaps: &mut Swaps) -> Result<(), SoakError> {
        let digest = digest(version)?;
        self.modules.install(version)?;
        swaps.to_identical += 1;
        if self.wait_serving(&digest, 60).await {
            swaps.live += 1;
            progress(&format!("hot swap to {} live", &digest[..19]));
        } else {
            let problem = format!("{} not serving on the leader 60 s after the swap", &digest[..19]);
            progress(&problem);
            swaps.problems.push(problem);
        }
        Ok(())
    }

    /// The failing version in, live; a parent annotated so it traps; rolled
    /// back; the file back to the version serving.
    async fn failing_swap(&self, serving: &Path, swaps: &mut Swaps, seed: u64) -> Result<(), SoakError> {
        let failing = digest(&self.modules.failing)?;
        // What the leader serves, which the rollback must restore (the
        // file's version, unless a takeover lost it).
        let file_version = digest(serving)?;
        let previous = self.leader_digest().await.unwrap_or_else(|| file_version.clone());
        if previous != file_version {
            swaps.problems.push(format!(
                "before the failing swap the leader served {}, not the file's {}",
                &previous[..19.min(previous.len())],
                &file_version[..19]
            ));
        }
        self.modules.install(&self.modules.failing)?;
        swaps.failing_offered += 1;
        if !self.wait_serving(&failing, 60).await {
            swaps.problems.push("the failing version never served (refused by its dry run?)".into());
            self.modules.install(serving)?;
            return Ok(());
        }
        progress("the failing version serves; annotating a parent so it traps");
        let key = {
            let world = lock(self.world);
            let mut keys: Vec<&Key> = world.crs.keys().collect();
            keys.sort();
            keys.get((seed as usize) % keys.len().max(1)).map(|k| (*k).clone())
        };
        let Some((namespace, name)) = key else { return Ok(()) };
        let api: Api<DynamicObject> = Api::namespaced_with(self.admin.clone(), &namespace, &memcached_resource());
        let annotate = |value: Value| json!({ "metadata": { "annotations": { FAIL_ANNOTATION: value } } });
        let annotated = Instant::now();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(annotate(json!("true")))).await?;
        if self.wait_serving(&previous, 180).await {
            swaps.rolled_back_in = Some(annotated.elapsed());
            progress(&format!("rolled back in {:.1} s", annotated.elapsed().as_secs_f64()));
        } else {
            progress("the failing version was not rolled back within 180 s");
            swaps.problems.push("the failing version was not rolled back within 180 s".into());
        }
        // The file back on the version serving (the same bytes: no swap).
        self.modules.install(serving)?;
        api.patch(&name, &PatchParams::default(), &Patch::Merge(annotate(Value::Null))).await?;
        Ok(())
    }

    /// SIGKILL the leader and start it again: in the same pod (its
    /// container restarted: the same POD_NAME, which takes its Lease back
    /// as soon as it is up), or, with `replace_pod`, in a new one (a new
    /// POD_NAME: a replica leads again once the Lease expires). Times until
    /// the Lease is renewed again, by either replica.
    async fn kill_leader(
        &self,
        lease: &Arc<std::sync::Mutex<LeaseLog>>,
        replace_pod: bool,
    ) -> Result<Option<Kill>, SoakError> {
        let mut replicas = self.shared.replicas.lock().await;
        let mut leader = None;
        for (i, replica) in replicas.iter_mut().enumerate() {
            if replica.sample().await.unwrap_or(false) {
                leader = Some(i);
            }
        }
        let Some(i) = leader else {
            progress("no replica leads: no leader to kill");
            return Ok(None);
        };
        let identity = replicas[i].identity().unwrap_or_default().to_owned();
        let at = Instant::now();
        let at_wall = std::time::SystemTime::now();
        replicas[i].kill().await?;
        progress(&format!(
            "killed the leader {identity} ({})",
            if replace_pod { "its pod replaced" } else { "its container restarted" }
        ));
        if replace_pod {
            replicas[i].replace_pod();
        }
        replicas[i].start()?;
        drop(replicas);
        let deadline = at + Duration::from_secs(90);
        let mut takeover = None;
        while Instant::now() < deadline {
            // A renewal written after the kill is a live leader's.
            let renewed = lease.lock().ok().and_then(|log| {
                log.renewals.iter().find(|(_, written)| *written > at_wall).map(|(seen, _)| *seen - at)
            });
            if renewed.is_some() {
                takeover = renewed;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        match takeover {
            Some(t) => progress(&format!("led again after {:.1} s", t.as_secs_f64())),
            None => progress("no leader within 90 s"),
        }
        Ok(Some(Kill { identity, at, pod_replaced: replace_pod, takeover }))
    }
}

/// The churn: random changes at `rate` per second until told to stop; a
/// Secret rotated every minute.
async fn churn(client: Client, world: Shared, shared: Arc<Run>, seed: u64, rate: f64) -> Churn {
    let mut rng = Rng::new(seed ^ 0xC0FF_EE00);
    let mut churn = Churn::default();
    let mut last_rotation = Instant::now();
    let mut rotation = 0u64;
    let owned = owned_resources();
    while !shared.stop.load(Ordering::SeqCst) {
        let pause = rng.between(0.5, 1.5) / rate;
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
        let result = if last_rotation.elapsed() >= Duration::from_secs(60) {
            last_rotation = Instant::now();
            rotation += 1;
            ("Secret rotated", rotate_secret(&client, &world, &mut rng, rotation).await)
        } else {
            let roll = rng.unit();
            if roll < 0.4 {
                ("CR edited", edit_cr(&client, &world, &mut rng).await)
            } else if roll < 0.5 {
                ("CR edited and at once edited back", edit_cr_and_back(&client, &world, &mut rng).await)
            } else if roll < 0.65 {
                ("child deleted", delete_child(&client, &world, &owned, &mut rng).await)
            } else if roll < 0.85 {
                ("child edited by hand", edit_child(&client, &world, &owned, &mut rng).await)
            } else {
                ("CR deleted and created again", recreate_cr(&client, &world, &mut rng).await)
            }
        };
        match result {
            (label, Ok(true)) => *churn.applied.entry(label).or_default() += 1,
            (_, Ok(false)) => {}
            (label, Err(error)) => {
                *churn.failed.entry(label).or_default() += 1;
                churn.last_error = Some(format!("{label}: {error}"));
            }
        }
    }
    churn
}

/// A random CR: its key, uid and object.
fn pick_cr(world: &Shared, rng: &mut Rng) -> Option<(Key, String, Value)> {
    let world = lock(world);
    let mut keys: Vec<&Key> = world.crs.keys().collect();
    if keys.is_empty() {
        return None;
    }
    keys.sort();
    let key = keys[rng.below(keys.len())].clone();
    let object = world.crs.get(&key)?.clone();
    let uid = object.pointer("/metadata/uid").and_then(Value::as_str)?.to_owned();
    Some((key, uid, object))
}

async fn edit_cr(client: &Client, world: &Shared, rng: &mut Rng) -> Result<bool, SoakError> {
    let Some(((namespace, name), uid, _)) = pick_cr(world, rng) else { return Ok(false) };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &memcached_resource());
    let connections = 512 + 64 * rng.below(100);
    let patch = json!({ "spec": { "memcached": { "maxConnections": connections } } });
    let started = Instant::now();
    let patched = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    if patched.metadata.uid.as_deref() != Some(uid.as_str()) {
        return Ok(false);
    }
    let generation = patched.metadata.generation.unwrap_or(0);
    lock(world).expect("CR edited", (namespace, name), uid, Goal::ObservedGeneration { generation }, started);
    Ok(true)
}

/// Two edits back to back, the second restoring the first's value: the
/// operator must not take its own write of the first, not yet in its cache,
/// for the object as it is.
async fn edit_cr_and_back(client: &Client, world: &Shared, rng: &mut Rng) -> Result<bool, SoakError> {
    let Some(((namespace, name), uid, object)) = pick_cr(world, rng) else { return Ok(false) };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &memcached_resource());
    let before = object.pointer("/spec/memcached/maxConnections").cloned().unwrap_or(Value::Null);
    let started = Instant::now();
    let there = json!({ "spec": { "memcached": { "maxConnections": 40_000 + rng.below(1000) } } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&there)).await?;
    let back = json!({ "spec": { "memcached": { "maxConnections": before } } });
    let patched = api.patch(&name, &PatchParams::default(), &Patch::Merge(&back)).await?;
    if patched.metadata.uid.as_deref() != Some(uid.as_str()) {
        return Ok(false);
    }
    let generation = patched.metadata.generation.unwrap_or(0);
    let goal = Goal::ObservedGeneration { generation };
    lock(world).expect("CR edited and at once edited back", (namespace, name), uid, goal, started);
    Ok(true)
}

async fn recreate_cr(client: &Client, world: &Shared, rng: &mut Rng) -> Result<bool, SoakError> {
    let Some(((namespace, name), uid, object)) = pick_cr(world, rng) else { return Ok(false) };
    let children = lock(world).children_of(&uid).len();
    if children == 0 {
        return Ok(false);
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &memcached_resource());
    let started = Instant::now();
    api.delete(&name, &DeleteParams::background()).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.get_opt(&name).await?.is_some() {
        if Instant::now() > deadline {
            return Err(SoakError::Timeout { what: format!("{namespace}/{name} to be deleted"), seconds: 30 });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resource = memcached_resource();
    let mut fresh = json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": { "name": name, "namespace": namespace },
        "spec": object["spec"],
    });
    if let Some(annotations) = object.pointer("/metadata/annotations") {
        fresh["metadata"]["annotations"] = annotations.clone();
    }
    let fresh: DynamicObject =
        serde_json::from_value(fresh).map_err(|e| SoakError::Setup(format!("a CR to create again: {e}")))?;
    let created = api.create(&PostParams::default(), &fresh).await?;
    let uid = created.metadata.uid.unwrap_or_default();
    lock(world).expect("CR deleted and created again", (namespace, name), uid, Goal::Recreated { children }, started);
    Ok(true)
}

/// A random child of a random CR.
fn pick_child(world: &Shared, rng: &mut Rng) -> Option<(Key, String, usize, String, Value)> {
    let (key, uid, _) = pick_cr(world, rng)?;
    let mut children = lock(world).children_of(&uid);
    if children.is_empty() {
        return None;
    }
    children.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let (kind, name, object) = children.swap_remove(rng.below(children.len()));
    Some((key, uid, kind, name, object))
}

async fn delete_child(
    client: &Client,
    world: &Shared,
    owned: &[ApiResource],
    rng: &mut Rng,
) -> Result<bool, SoakError> {
    let Some((key, uid, kind, name, object)) = pick_child(world, rng) else { return Ok(false) };
    let old_uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.0, &owned[kind]);
    let started = Instant::now();
    api.delete(&name, &DeleteParams::background()).await?;
    lock(world).expect("child deleted", key, uid, Goal::ChildBack { kind, name, old_uid }, started);
    Ok(true)
}

async fn edit_child(client: &Client, world: &Shared, owned: &[ApiResource], rng: &mut Rng) -> Result<bool, SoakError> {
    let Some((key, uid, kind, name, object)) = pick_child(world, rng) else { return Ok(false) };
    let Some(value) = object.pointer("/metadata/labels").and_then(|l| l.get(EDITED_LABEL)).and_then(Value::as_str)
    else {
        return Ok(false);
    };
    let value = value.to_owned();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.0, &owned[kind]);
    let patch = json!({ "metadata": { "labels": { EDITED_LABEL: "edited-by-hand" } } });
    let started = Instant::now();
    let edited = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let edited_rv = edited.metadata.resource_version.and_then(|v| v.parse().ok()).unwrap_or(0);
    let goal = Goal::LabelRestored { kind, name, label: EDITED_LABEL.into(), value, edited_rv };
    lock(world).expect("child edited by hand", key, uid, goal, started);
    Ok(true)
}

/// A new value in one of the two Secrets of a random namespace; each CR
/// there that references it must roll its pod template's secret hash.
async fn rotate_secret(client: &Client, world: &Shared, rng: &mut Rng, rotation: u64) -> Result<bool, SoakError> {
    let Some(((namespace, _), _, _)) = pick_cr(world, rng) else { return Ok(false) };
    let secret = if rng.below(2) == 0 { SASL_SECRET } else { TLS_SECRET };
    rotate(client, world, &namespace, secret, rotation).await?;
    Ok(true)
}

/// Whether CR `cr`'s spec names Secret `secret`.
pub fn references_secret(cr: &Value, secret: &str) -> bool {
    cr.get("spec").is_some_and(|spec| spec.to_string().contains(secret))
}

/// The two Secrets the samples reference, and the key each rotation changes.
pub const SASL_SECRET: (&str, &str) = ("memcached-sasl", "password-file");
pub const TLS_SECRET: (&str, &str) = ("memcached-tls", "tls.crt");

/// A new value in `secret` of `namespace`; returns how many CRs reference
/// it, each expected to roll its pod template's secret hash.
pub async fn rotate(
    client: &Client,
    world: &Shared,
    namespace: &str,
    (secret, key): (&str, &str),
    rotation: u64,
) -> Result<usize, SoakError> {
    // Who references it, and the hash each Deployment has now.
    let referencing: Vec<(Key, String, String)> = {
        let world = lock(world);
        world
            .crs
            .iter()
            .filter(|((ns, _), cr)| ns == namespace && references_secret(cr, secret))
            .filter_map(|(key, cr)| {
                let uid = cr.pointer("/metadata/uid").and_then(Value::as_str)?.to_owned();
                let hash = world.secret_hash_of(key, &uid)?;
                Some((key.clone(), uid, hash))
            })
            .collect()
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let patch = json!({ "stringData": { key: format!("rotation-{rotation}") } });
    let started = Instant::now();
    api.patch(secret, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let mut world = lock(world);
    let count = referencing.len();
    for (cr, uid, old) in referencing {
        world.expect("Secret rotated (per referencing CR)", cr, uid, Goal::SecretHashChanged { old }, started);
    }
    Ok(count)
}
