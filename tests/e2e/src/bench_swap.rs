//! `make bench-swap`: how long changing a running operator's logic takes.
//!
//! ```text
//! bench-swap [--module greeting|memcached] [--counts 1000] [--poll 100ms]
//!            [--strategies tiered,optimized]
//! ```
//!
//! For each N: a fresh control plane, N parents, and for each compile
//! strategy (`--compile-strategy` of `run`) `target/release/wasm-operator
//! run` as a separate process watching a module file, with a compile cache
//! of its own. The parents are Greetings (the Greeting test module, one
//! ConfigMap each) or Memcacheds (the Memcached module, `{replicas: 1}`).
//! Then two swaps, each by renaming a new version over the file:
//!
//! - cold: to a version this cache has never compiled (Greeting v2; the
//!   Memcached module with a custom section appended: the same code,
//!   another digest);
//! - warm: to a version compiled into the cache beforehand, by a run of the
//!   operator on it before this one started (as a restart, a standby or a
//!   rollback finds it).
//!
//! Measured from outside, as a user sees it: from the rename until the
//! operator's `module_info` names the new digest (live); with a tiered
//! compile, until its log says the optimized code replaced the baseline
//! code; for Greeting, until the first ConfigMap written by the new version
//! and every one (Memcached versions that differ only in a custom section
//! write nothing). From the operator's log: the time from noticing the file
//! to serving it, and the dry run's share (every cached parent through both
//! versions), per parent. Not a timed test: it prints a table.

mod loopback;
mod module_versions;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, Options, User};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use loopback::{free_port, http_get};
use module_versions::digest_of;
use serde_json::{Value, json};

const CREATE_PARALLELISM: usize = 16;
const WAIT: Duration = Duration::from_secs(600);
const OPTIMIZED_IN_PLACE: &str = "a version's optimized code replaced its baseline code";

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Whose parents and versions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    Greeting,
    Memcached,
}

impl Subject {
    fn name(self) -> &'static str {
        match self {
            Subject::Greeting => "Greeting",
            Subject::Memcached => "Memcached",
        }
    }
}

struct Settings {
    subject: Subject,
    counts: Vec<usize>,
    poll: String,
    strategies: Vec<String>,
}

fn main() -> ExitCode {
    let root = control_plane::repo_root();
    let usage = "usage: bench-swap [--module greeting|memcached] [--counts 1000] [--poll 100ms] [--strategies tiered,optimized]";
    let mut settings = Settings {
        subject: Subject::Greeting,
        counts: vec![1000],
        poll: "100ms".to_owned(),
        strategies: vec!["tiered".to_owned()],
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--counts", Some(value)) => {
                settings.counts = value.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            }
            ("--poll", Some(value)) => settings.poll = value,
            ("--module", Some(value)) if value == "greeting" => settings.subject = Subject::Greeting,
            ("--module", Some(value)) if value == "memcached" => settings.subject = Subject::Memcached,
            ("--strategies", Some(value)) => {
                settings.strategies = value.split(',').map(|s| s.trim().to_owned()).collect();
            }
            _ => {
                eprintln!("{usage}");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("bench-swap: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut rows = Vec::new();
    for &count in &settings.counts {
        match runtime.block_on(run_one(&root, count, &settings)) {
            Ok(mut measured) => rows.append(&mut measured),
            Err(error) => {
                eprintln!("bench-swap: N={count}: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    print_table(&settings, &rows);
    ExitCode::SUCCESS
}

fn print_table(settings: &Settings, rows: &[Row]) {
    let millis = |d: Option<Duration>| d.map_or_else(|| "-".to_owned(), |d| format!("{} ms", d.as_millis()));
    println!();
    println!(
        "swap to live, module file polled every {} (wasm-operator, {} module; {})",
        settings.poll,
        settings.subject.name(),
        machine()
    );
    println!(
        "| parents | compile | swap | rename -> live | rename -> optimized code in place | rename -> first write by the new version | noticed -> serving (in the operator) | dry run | dry run per parent | every parent rolled out |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} ms | {} | {} | {} ms | {} ms | {:.1} µs | {} |",
            row.parents,
            row.strategy,
            row.swap,
            row.live.as_millis(),
            millis(row.optimized),
            millis(row.first_write),
            row.in_process_us / 1000,
            row.dry_run_us / 1000,
            row.dry_run_us as f64 / row.parents.max(1) as f64,
            row.rolled_out.map_or_else(|| "-".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
        );
    }
}

struct Row {
    parents: usize,
    strategy: String,
    swap: &'static str,
    live: Duration,
    /// Until the optimized code replaced the baseline code (tiered, cold).
    optimized: Option<Duration>,
    /// Greeting only: its versions write different ConfigMaps.
    first_write: Option<Duration>,
    in_process_us: u64,
    dry_run_us: u64,
    rolled_out: Option<Duration>,
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned()))
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    format!("{cores} cores, {cpu}")
}

fn progress(message: &str) {
    eprintln!("bench-swap: {message}");
}

fn greetings() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.c5c3.io", "v1", "Greeting"), "greetings")
}

fn memcacheds() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("memcached.c5c3.io", "v1beta1", "Memcached"), "memcacheds")
}

fn configmaps() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps")
}

/// The three versions a run swaps between, as files in `work`.
struct Versions {
    first: PathBuf,
    cold: PathBuf,
    warm: PathBuf,
}

fn versions(root: &Path, work: &Path, subject: Subject) -> Result<Versions, Error> {
    let target = root.join("target");
    Ok(match subject {
        Subject::Greeting => Versions {
            first: target.join("greeting.wasm"),
            cold: target.join("greeting-v2.wasm"),
            warm: target.join("greeting-v1-rebuilt.wasm"),
        },
        Subject::Memcached => {
            let bytes = std::fs::read(target.join("memcached.wasm"))?;
            let marked = |mark: &str| -> Result<PathBuf, Error> {
                let path = work.join(format!("memcached-{mark}.wasm"));
                std::fs::write(
                    &path,
                    module_versions::with_custom_section(bytes.clone(), "bench-swap", mark.as_bytes()),
                )?;
                Ok(path)
            };
            Versions { first: target.join("memcached.wasm"), cold: marked("cold")?, warm: marked("warm")? }
        }
    })
}

fn replace(live: &Path, source: &Path) -> Result<Instant, Error> {
    let beside = live.with_extension("wasm.next");
    std::fs::copy(source, &beside)?;
    let at = Instant::now();
    std::fs::rename(&beside, live)?;
    Ok(at)
}

async fn create_parents(plane: &ControlPlane, subject: Subject, count: usize) -> Result<(), Error> {
    let admin = plane.client(User::Admin).await?;
    let resource = match subject {
        Subject::Greeting => {
            // The module ships its CRD: `wasm-operator crd` prints it.
            let root = control_plane::repo_root();
            let crd = Command::new(root.join("target/release/wasm-operator"))
                .args(["--module", &root.join("target/greeting.wasm").display().to_string(), "crd"])
                .output()?;
            if !crd.status.success() {
                return Err(format!("wasm-operator crd: {}", String::from_utf8_lossy(&crd.stderr)).into());
            }
            plane.apply_yaml(&String::from_utf8_lossy(&crd.stdout)).await?;
            greetings()
        }
        Subject::Memcached => {
            plane.install_crds().await?;
            memcacheds()
        }
    };
    let api: Api<DynamicObject> = Api::namespaced_with(admin, "default", &resource);
    progress(&format!("N={count}: creating {count} {}s", subject.name()));
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let parent = match subject {
                    Subject::Greeting => json!({
                        "apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                        "metadata": {"name": format!("g-{i:05}")}, "spec": {"message": format!("hi {i}")}
                    }),
                    Subject::Memcached => json!({
                        "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                        "metadata": {"name": format!("m-{i:05}")}, "spec": {"replicas": 1}
                    }),
                };
                api.create(&PostParams::default(), &serde_json::from_value(parent)?).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(CREATE_PARALLELISM)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(())
}

async fn run_one(root: &Path, count: usize, settings: &Settings) -> Result<Vec<Row>, Error> {
    let work = std::env::temp_dir().join(format!("bench-swap-{}-{count}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let versions = versions(root, &work, settings.subject)?;
    progress(&format!("N={count}: starting a control plane"));
    let plane =
        ControlPlane::start_with(Options { controller_manager: false, audit_log: false, ..Options::default() })?;
    create_parents(&plane, settings.subject, count).await?;
    let mut rows = Vec::new();
    for strategy in &settings.strategies {
        rows.append(&mut swaps(root, &work, &plane, &versions, count, settings, strategy).await?);
    }
    drop(plane);
    let _ = std::fs::remove_dir_all(&work);
    Ok(rows)
}

/// One operator with `strategy`: the warm version compiled into its cache
/// first, then started on the first version, then the cold and warm swaps.
async fn swaps(
    root: &Path,
    work: &Path,
    plane: &ControlPlane,
    versions: &Versions,
    count: usize,
    settings: &Settings,
    strategy: &str,
) -> Result<Vec<Row>, Error> {
    let cache = work.join(format!("compiled-{strategy}"));
    let live = work.join("module.wasm");
    let label = format!("N={count} {strategy}");

    // The warm version, compiled into this cache by a run on it.
    progress(&format!("{label}: compiling the warm version into the cache"));
    std::fs::copy(&versions.warm, &live)?;
    let warm_digest = digest_of(&versions.warm)?;
    let mut primer =
        Operator::start(root, plane, &live, &cache, &settings.poll, "optimized", &work.join("primer.log"))?;
    primer.wait_live(&warm_digest, Instant::now()).await?;
    primer.stop();

    std::fs::copy(&versions.first, &live)?;
    let log = work.join(format!("operator-{strategy}.log"));
    let mut operator = Operator::start(root, plane, &live, &cache, &settings.poll, strategy, &log)?;
    progress(&format!("{label}: waiting for every parent reconciled by the first version"));
    wait_until(|| async { Ok(operator.reconciles().await? >= count) }).await?;
    if strategy == "tiered" {
        wait_log(&log, OPTIMIZED_IN_PLACE, &digest_of(&versions.first)?).await?;
    }
    let admin = plane.client(User::Admin).await?;
    let configmaps_api: Api<DynamicObject> = Api::namespaced_with(admin, "default", &configmaps());
    let greeting = settings.subject == Subject::Greeting;
    if greeting {
        wait_until(|| async { Ok(configmaps_api.list(&Default::default()).await?.items.len() >= count) }).await?;
    }

    let mut rows = Vec::new();
    for (swap, file) in [("cold", &versions.cold), ("warm", &versions.warm)] {
        let wanted = digest_of(file)?;
        // Greeting: the first ConfigMap the new version writes (v2 adds a
        // revision, v1-rebuilt takes it away).
        let revision_now = swap == "cold";
        let first_write = greeting.then(|| {
            let api = configmaps_api.clone();
            tokio::spawn(async move {
                let changes = watcher(api, watcher::Config::default()).applied_objects();
                let mut changes = std::pin::pin!(changes);
                while let Some(Ok(object)) = changes.next().await {
                    if object.data["data"]["revision"].is_string() == revision_now {
                        return Instant::now();
                    }
                }
                Instant::now()
            })
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        progress(&format!("{label}: {swap} swap to {}", file.display()));
        let renamed = replace(&live, file)?;
        let live_at = operator.wait_live(&wanted, renamed).await?;
        let optimized = if strategy == "tiered" && swap == "cold" {
            wait_log(&log, OPTIMIZED_IN_PLACE, &wanted).await?;
            Some(renamed.elapsed())
        } else {
            None
        };
        let (first_write, rolled_out) = match first_write {
            Some(first_write) => {
                let written = tokio::time::timeout(WAIT, first_write).await??;
                // The rollout: every ConfigMap as the new version wants it.
                wait_until(|| async {
                    let all = configmaps_api.list(&Default::default()).await?.items;
                    Ok(all.len() >= count && all.iter().all(|c| c.data["data"]["revision"].is_string() == revision_now))
                })
                .await?;
                (Some(written.saturating_duration_since(renamed)), Some(renamed.elapsed()))
            }
            None => (None, None),
        };
        let (in_process_us, dry_run_us) = swap_log(&log, &wanted)?;
        rows.push(Row {
            parents: count,
            strategy: strategy.to_owned(),
            swap,
            live: live_at.duration_since(renamed),
            optimized,
            first_write,
            in_process_us,
            dry_run_us,
            rolled_out,
        });
    }
    operator.stop();
    Ok(rows)
}

/// `took_us` and `dry_run_us` of the log line saying `digest` was swapped in.
fn swap_log(log: &Path, digest: &str) -> Result<(u64, u64), Error> {
    log_lines(log)?
        .into_iter()
        .find(|entry| entry["to"] == digest)
        .and_then(|entry| Some((entry["took_us"].as_u64()?, entry["dry_run_us"].as_u64()?)))
        .ok_or_else(|| format!("no swap of {digest} in {}", log.display()).into())
}

fn log_lines(log: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(log)?;
    Ok(text.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).collect())
}

/// Until the operator logs `message` of `digest`.
async fn wait_log(log: &Path, message: &str, digest: &str) -> Result<(), Error> {
    let started = Instant::now();
    loop {
        if log_lines(log)?.iter().any(|l| l["message"] == message && l["digest"] == digest) {
            return Ok(());
        }
        if started.elapsed() > WAIT {
            return Err(format!("no {message:?} for {digest} in {}", log.display()).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_until<F, Fut>(mut check: F) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, Error>>,
{
    let started = Instant::now();
    while !check().await? {
        if started.elapsed() > WAIT {
            return Err("timed out".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

struct Operator {
    child: Child,
    metrics: String,
    log: PathBuf,
}

impl Operator {
    /// `wasm-operator run` on the module file `live`, compiling into `cache`.
    fn start(
        root: &Path,
        plane: &ControlPlane,
        live: &Path,
        cache: &Path,
        poll: &str,
        strategy: &str,
        log: &Path,
    ) -> Result<Self, Error> {
        let metrics = format!("127.0.0.1:{}", free_port()?);
        let health = format!("127.0.0.1:{}", free_port()?);
        let child = Command::new(root.join("target/release/wasm-operator"))
            .args(["--module", &live.display().to_string(), "run", "--leader-elect=false", "--log-format", "json"])
            .args([
                "--metrics-bind-address",
                &metrics,
                "--metrics-secure=false",
                "--health-probe-bind-address",
                &health,
            ])
            .args(["--module-poll-interval", poll, "--swap-rollout-per-second", "1000", "--concurrency", "8"])
            .args(["--compile-strategy", strategy, "--compile-cache-dir", &cache.display().to_string()])
            // Swap timing, not identity: it writes as the admin it runs as.
            .args(["--module-identity", "operator"])
            .env("KUBECONFIG", plane.kubeconfig(User::Admin))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()?;
        Ok(Self { child, metrics, log: log.to_owned() })
    }

    /// When `module_info` first names `digest` as serving.
    async fn wait_live(&self, digest: &str, since: Instant) -> Result<Instant, Error> {
        loop {
            if let Ok((_, body)) = http_get(&self.metrics, "/metrics").await
                && body
                    .lines()
                    .any(|l| l.starts_with("wasm_operator_module_info{") && l.contains(digest) && l.ends_with(" 1"))
            {
                return Ok(Instant::now());
            }
            if since.elapsed() > WAIT {
                return Err(format!("{digest} never went live; see {}", self.log.display()).into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Reconciles so far, every result.
    async fn reconciles(&self) -> Result<usize, Error> {
        let Ok((_, body)) = http_get(&self.metrics, "/metrics").await else { return Ok(0) };
        Ok(body
            .lines()
            .filter(|l| l.starts_with("wasm_operator_reconciles_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as usize)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.stop();
    }
}
