//! `soak rotations`: the soak's largest burst, measured alone. A Secret
//! rotated in one namespace rolls every Memcached there that references it
//! (the namespace where most do); each is one reconcile. This times
//! the rolls at each `--concurrency`, with the API server near and behind
//! the soak's worst injected latency, to choose the operator's default.
//!
//! ```text
//! soak rotations [--crs 1000] [--concurrency 4,8,16,32,64] [--rotations 4]
//!                [--latency-ms 400] [--out target/soak/rotations.md]
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::report::percentile;
use crate::setup::{Cluster, concurrency_flag};
use crate::toxiproxy::NetworkFault;
use crate::world::{Shared, lock};
use crate::{SASL_SECRET, SoakError, TLS_SECRET, create_all, progress, references_secret, rotate, wait_converged};

pub struct Config {
    pub crs: usize,
    pub concurrencies: Vec<u16>,
    /// Rotations per concurrency and network (alternating the two Secrets).
    pub rotations: usize,
    /// Added each way, ± 50 ms; the soak injects 100-400.
    pub latency_ms: u32,
    pub out: PathBuf,
}

const USAGE: &str =
    "usage: soak rotations [--crs 1000] [--concurrency 4,8,16,32,64] [--rotations 4] [--latency-ms 400] [--out FILE]";

pub fn parse_args(root: &Path, mut args: impl Iterator<Item = String>) -> Result<Config, SoakError> {
    let mut config = Config {
        crs: 1000,
        concurrencies: vec![4, 8, 16, 32, 64],
        rotations: 4,
        latency_ms: 400,
        out: root.join("target/soak/rotations.md"),
    };
    let usage = |message: String| SoakError::Usage(format!("{message}\n{USAGE}"));
    while let Some(arg) = args.next() {
        let text = args.next().ok_or_else(|| usage(format!("{arg} needs a value")))?;
        let bad = || usage(format!("{arg} {text:?}"));
        match arg.as_str() {
            "--crs" => config.crs = text.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?,
            "--rotations" => config.rotations = text.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?,
            "--latency-ms" => config.latency_ms = text.parse().ok().filter(|n| *n >= 50).ok_or_else(bad)?,
            "--concurrency" => {
                let parsed: Result<Vec<u16>, _> = text.split(',').map(str::parse).collect();
                config.concurrencies = parsed.ok().filter(|c| !c.is_empty() && !c.contains(&0)).ok_or_else(bad)?;
            }
            "--out" => config.out = PathBuf::from(text),
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    Ok(config)
}

/// One row: rolls of `rotations` rotations at one concurrency and network.
struct Row {
    concurrency: u16,
    network: String,
    /// Each CR's time from the Secret's patch to its Deployment rolled.
    rolls: Vec<Duration>,
    /// Per rotation, until its last CR rolled.
    whole: Vec<Duration>,
}

pub async fn run(root: &Path, config: &Config) -> Result<(), SoakError> {
    let cluster = Cluster::start(root, config.crs, 4).await?;
    let Cluster { admin, world, samples, namespaces, proxy, .. } = &cluster;
    progress(&format!("{}; rotations at --concurrency {:?}", cluster.machine, config.concurrencies));
    let mut rows = Vec::new();
    let mut rotation = 0u64;
    for (index, &concurrency) in config.concurrencies.iter().enumerate() {
        // A new replica (and proxy) per concurrency; the previous one stopped
        // and released the Lease.
        let name = char::from(b'a' + u8::try_from(index).unwrap_or(0));
        let mut replica = cluster.replica(name, concurrency_flag(Some(concurrency)))?;
        replica.start()?;
        replica.wait_ready().await?;
        if rows.is_empty() {
            create_all(admin, world, samples, config.crs, namespaces).await?;
        }
        wait_converged(world, Duration::from_secs(600), "every CR to converge").await?;
        // The new leader's first reconciles of every parent are done and quiet.
        tokio::time::sleep(Duration::from_secs(10)).await;
        for latency in [None, Some(config.latency_ms)] {
            let proxy_name = format!("replica-{name}");
            let fault = latency.map(|latency_ms| NetworkFault::Latency { latency_ms, jitter_ms: 50 });
            if let Some(fault) = fault {
                proxy.inject(&proxy_name, fault)?;
            }
            let mut row = Row {
                concurrency,
                network: latency.map_or_else(|| "direct".to_owned(), |ms| format!("+{ms} ± 50 ms each way")),
                rolls: Vec::new(),
                whole: Vec::new(),
            };
            for turn in 0..config.rotations {
                rotation += 1;
                let secret = if turn % 2 == 0 { SASL_SECRET } else { TLS_SECRET };
                lock(world).converged.clear();
                let namespace = most_referencing(world, namespaces, secret.0);
                let rolled = rotate(admin, world, namespace, secret, rotation).await?;
                wait_converged(world, Duration::from_secs(600), "a rotation to roll").await?;
                let times: Vec<Duration> =
                    lock(world).converged.iter().map(|c| c.ended.saturating_duration_since(c.started)).collect();
                if times.len() != rolled {
                    return Err(SoakError::Setup(format!("{rolled} CRs to roll, {} rolled", times.len())));
                }
                row.whole.push(times.iter().copied().max().unwrap_or_default());
                row.rolls.extend(times);
                // Its Events and status writes drain before the next.
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            if let Some(fault) = fault {
                proxy.heal(&proxy_name, fault)?;
            }
            progress(&line(&row));
            rows.push(row);
        }
        replica.stop().await;
    }
    let text = table(&format!("{}; commit {}", cluster.machine, crate::commit(root)), config, &rows);
    println!("\n{text}");
    std::fs::write(&config.out, &text).map_err(|e| SoakError::io(format!("writing {}", config.out.display()), e))?;
    progress(&format!("table written to {}", config.out.display()));
    Ok(())
}

/// The namespace where the most CRs reference `secret` (the samples are
/// spread over the namespaces, so some reference none).
fn most_referencing<'a>(world: &Shared, namespaces: &'a [String], secret: &str) -> &'a str {
    let world = lock(world);
    let referencing = |namespace: &str| {
        world.crs.iter().filter(|((ns, _), cr)| ns == namespace && references_secret(cr, secret)).count()
    };
    namespaces.iter().max_by_key(|namespace| referencing(namespace)).map_or("", String::as_str)
}

fn line(row: &Row) -> String {
    let mut sorted = row.rolls.clone();
    sorted.sort();
    let mut whole = row.whole.clone();
    whole.sort();
    format!(
        "| {} | {} | {} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s |",
        row.concurrency,
        row.network,
        row.whole.len(),
        row.rolls.len(),
        percentile(&sorted, 50.0).as_secs_f64(),
        percentile(&sorted, 99.0).as_secs_f64(),
        percentile(&whole, 50.0).as_secs_f64(),
        whole.last().copied().unwrap_or_default().as_secs_f64(),
    )
}

fn table(machine: &str, config: &Config, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Secret rotations by --concurrency ({} CRs in 4 namespaces)", config.crs);
    let _ = writeln!(out);
    let _ = writeln!(out, "Machine: {machine}.");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| --concurrency | network | rotations | CRs rolled | roll p50 | roll p99 | whole rotation p50 | whole rotation max |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let _ = writeln!(out, "{}", line(row));
    }
    out
}
