//! `make bench-swap`: how long changing a running operator's logic takes.
//!
//! ```text
//! bench-swap [--counts 1000] [--poll 100ms]
//! ```
//!
//! For each N: a fresh control plane, N Greeting parents (the Greeting test
//! module, one ConfigMap each), and `target/release/wasm-operator run` as a
//! separate process watching a module file, with a compile cache of its own
//! (a fresh `XDG_CACHE_HOME`). Then two swaps, each by renaming a new
//! version over the file:
//!
//! - cold: v1 -> v2, which this cache has never compiled;
//! - warm: v2 -> v1-rebuilt, compiled into the cache beforehand (as a
//!   standby, a restart or a rollback finds it).
//!
//! Measured from outside, as a user sees it: from the rename until the
//! operator's `module_info` names the new digest (live), and until the
//! first ConfigMap written by the new version; from the operator's log, the
//! time it took from noticing the file to serving it, and the dry run's
//! share (every cached parent through both versions), per parent. Not a
//! timed test: it prints a table.

mod loopback;

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, Options, User};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use loopback::{free_port, http_get};
use serde_json::{Value, json};

const CREATE_PARALLELISM: usize = 16;
const WAIT: Duration = Duration::from_secs(600);

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let root = control_plane::repo_root();
    let mut counts = vec![1000];
    let mut poll = "100ms".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--counts", Some(value)) => {
                counts = value.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            }
            ("--poll", Some(value)) => poll = value,
            _ => {
                eprintln!("usage: bench-swap [--counts 1000] [--poll 100ms]");
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
    for count in counts {
        match runtime.block_on(run_one(&root, count, &poll)) {
            Ok(mut measured) => rows.append(&mut measured),
            Err(error) => {
                eprintln!("bench-swap: N={count}: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!();
    println!("swap to live, module file polled every {poll} (wasm-operator, Greeting module; {})", machine());
    println!(
        "| parents | swap | rename -> live | rename -> first write by the new version | noticed -> serving (in the operator) | dry run | dry run per parent | every parent rolled out |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        println!(
            "| {} | {} | {} ms | {} ms | {} ms | {} ms | {:.1} µs | {:.1} s |",
            row.parents,
            row.swap,
            row.live.as_millis(),
            row.first_write.as_millis(),
            row.in_process_us / 1000,
            row.dry_run_us / 1000,
            row.dry_run_us as f64 / row.parents.max(1) as f64,
            row.rolled_out.as_secs_f64()
        );
    }
    ExitCode::SUCCESS
}

struct Row {
    parents: usize,
    swap: &'static str,
    live: Duration,
    first_write: Duration,
    in_process_us: u64,
    dry_run_us: u64,
    rolled_out: Duration,
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

fn configmaps() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps")
}

fn replace(live: &Path, source: &Path) -> Result<Instant, Error> {
    let beside = live.with_extension("wasm.next");
    std::fs::copy(source, &beside)?;
    let at = Instant::now();
    std::fs::rename(&beside, live)?;
    Ok(at)
}

fn digest_of(path: &Path, root: &Path, cache: &Path) -> Result<String, Error> {
    let out = Command::new(root.join("target/release/wasm-operator"))
        .args(["--module", &path.display().to_string(), "manifest"])
        .env("XDG_CACHE_HOME", cache)
        .output()?;
    let manifests: Value = serde_json::from_slice(&out.stdout)?;
    manifests[0]["digest"].as_str().map(str::to_owned).ok_or_else(|| format!("no digest for {}", path.display()).into())
}

async fn run_one(root: &Path, count: usize, poll: &str) -> Result<Vec<Row>, Error> {
    let work = std::env::temp_dir().join(format!("bench-swap-{}-{count}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let cache = work.join("cache");
    let module = |name: &str| root.join("target").join(name);
    let live = work.join("greeting.wasm");
    std::fs::copy(module("greeting.wasm"), &live)?;
    // The warm version is compiled into this cache before anything runs; the
    // cold one never is.
    let warm_digest = digest_of(&module("greeting-v1-rebuilt.wasm"), root, &cache)?;

    progress(&format!("N={count}: starting a control plane"));
    let plane =
        ControlPlane::start_with(Options { controller_manager: false, audit_log: false, ..Options::default() })?;
    let crd = std::fs::read_to_string(root.join("tests/modules/greeting/crd.yaml"))?;
    plane.apply_yaml(&crd).await?;
    let admin = plane.client(User::Admin).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "default", &greetings());
    progress(&format!("N={count}: creating {count} Greetings"));
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let greeting: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                    "metadata": {"name": format!("g-{i:05}")}, "spec": {"message": format!("hi {i}")}
                }))?;
                api.create(&PostParams::default(), &greeting).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(CREATE_PARALLELISM)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;

    let metrics = format!("127.0.0.1:{}", free_port()?);
    let health = format!("127.0.0.1:{}", free_port()?);
    let log = work.join("operator.log");
    let mut operator = Operator(
        Command::new(root.join("target/release/wasm-operator"))
            .args(["--module", &live.display().to_string(), "run", "--leader-elect=false", "--log-format", "json"])
            .args([
                "--metrics-bind-address",
                &metrics,
                "--metrics-secure=false",
                "--health-probe-bind-address",
                &health,
            ])
            .args(["--module-poll-interval", poll, "--swap-rollout-per-second", "1000", "--concurrency", "8"])
            // Swap timing, not identity: it writes as the admin it runs as.
            .args(["--module-identity", "operator"])
            .env("KUBECONFIG", plane.kubeconfig(User::Admin))
            .env("XDG_CACHE_HOME", &cache)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?,
    );
    let configmaps_api: Api<DynamicObject> = Api::namespaced_with(admin, "default", &configmaps());
    progress(&format!("N={count}: waiting for every ConfigMap from v1"));
    wait_until(|| async { Ok(configmaps_api.list(&Default::default()).await?.items.len() >= count) }).await?;

    let mut rows = Vec::new();
    for (swap, file) in [("cold", "greeting-v2.wasm"), ("warm", "greeting-v1-rebuilt.wasm")] {
        let wanted =
            if swap == "cold" { digest_of(&module(file), root, &work.join("scratch"))? } else { warm_digest.clone() };
        let revision_now = swap == "cold";
        // The first ConfigMap the new version writes: v2 adds a revision,
        // v1-rebuilt takes it away.
        let first_write = {
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
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        progress(&format!("N={count}: {swap} swap to {file}"));
        let renamed = replace(&live, &module(file))?;
        let live_at = loop {
            let (_, body) = http_get(&metrics, "/metrics").await?;
            if body
                .lines()
                .any(|l| l.starts_with("wasm_operator_module_info{") && l.contains(&wanted) && l.ends_with(" 1"))
            {
                break Instant::now();
            }
            if renamed.elapsed() > WAIT {
                return Err(format!("{swap}: the new version never went live; see {}", log.display()).into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let written = tokio::time::timeout(WAIT, first_write).await??;
        // The rollout: every ConfigMap as the new version wants it.
        wait_until(|| async {
            let all = configmaps_api.list(&Default::default()).await?.items;
            Ok(all.len() >= count && all.iter().all(|c| c.data["data"]["revision"].is_string() == revision_now))
        })
        .await?;
        let rolled_out = renamed.elapsed();
        let (in_process_us, dry_run_us) = swap_log(&log, &wanted)?;
        rows.push(Row {
            parents: count,
            swap,
            live: live_at.duration_since(renamed),
            first_write: written.saturating_duration_since(renamed),
            in_process_us,
            dry_run_us,
            rolled_out,
        });
    }
    operator.stop();
    drop(plane);
    let _ = std::fs::remove_dir_all(&work);
    Ok(rows)
}

/// `took_us` and `dry_run_us` of the log line saying `digest` was swapped in.
fn swap_log(log: &Path, digest: &str) -> Result<(u64, u64), Error> {
    let text = std::fs::read_to_string(log)?;
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|entry| entry["to"] == digest)
        .and_then(|entry| Some((entry["took_us"].as_u64()?, entry["dry_run_us"].as_u64()?)))
        .ok_or_else(|| format!("no swap of {digest} in {}", log.display()).into())
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

struct Operator(Child);

impl Operator {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.stop();
    }
}
