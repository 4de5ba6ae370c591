//! The soak's table, with the goals marked ✓ met or ✗ missed, and
//! what the replicas' logs say (failed reconciles by cause, panics).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::replicas::{Incarnation, Replica};
use crate::waits::{Life, Timeline};
use crate::world::{Converged, Key};
use crate::{Config, FaultRecord, Outcome, SoakError};

/// What the replicas' logs say.
#[derive(Debug, Default)]
pub struct Logs {
    /// "reconcile failed" lines by cause, with one error text each.
    pub failures: BTreeMap<&'static str, (usize, String)>,
    /// "the spec is invalid" lines.
    pub invalid: usize,
    /// Lines with a Rust panic.
    pub panics: Vec<String>,
    /// Each replica process: when it filled its caches, took the Lease,
    /// ended its start-up pass.
    pub lives: Vec<Life>,
    /// Each "reconcile failed" line: when, and of which CR.
    pub failed: Vec<(Instant, Key)>,
}

impl Logs {
    pub fn read(replicas: &[Replica]) -> Result<Self, SoakError> {
        let mut logs = Logs::default();
        let clock = Clock::now();
        for incarnation in replicas.iter().flat_map(|r| &r.incarnations) {
            let text = std::fs::read_to_string(&incarnation.log)
                .map_err(|e| SoakError::io(format!("reading {}", incarnation.log.display()), e))?;
            let mut life = Life { started: incarnation.started, caches_synced: None, led: None, pass_done: None };
            for line in text.lines() {
                if line.contains("panicked at") {
                    logs.panics.push(format!("{}: {}", incarnation.identity, truncate(line, 300)));
                }
                let Ok(event) = serde_json::from_str::<Value>(line) else { continue };
                // The JSON format flattens the fields (tracing's nests them).
                let field = |name: &str| {
                    event.get(name).or_else(|| event.pointer(&format!("/fields/{name}"))).and_then(Value::as_str)
                };
                let at = event.get("timestamp").and_then(Value::as_str).and_then(|t| clock.instant(t));
                match field("message") {
                    Some("reconcile failed") => {
                        let error = field("error").unwrap_or_default();
                        let entry = logs.failures.entry(cause(error)).or_insert((0, truncate(error, 240)));
                        entry.0 += 1;
                        if let (Some(at), Some(namespace), Some(name)) = (at, field("namespace"), field("name")) {
                            logs.failed.push((at, (namespace.to_owned(), name.to_owned())));
                        }
                    }
                    Some(message) if message.starts_with("the spec is invalid") => logs.invalid += 1,
                    Some("caches synced") => life.caches_synced = life.caches_synced.or(at),
                    Some("became the leader") => life.led = life.led.or(at),
                    Some("start-up pass done") => life.pass_done = life.pass_done.or(at),
                    _ => {}
                }
            }
            logs.lives.push(life);
        }
        Ok(logs)
    }
}

/// This machine's wall clock against its monotonic one, to place the
/// logs' timestamps among the soak's instants.
struct Clock {
    instant: Instant,
    wall: std::time::SystemTime,
}

impl Clock {
    fn now() -> Self {
        Clock { instant: Instant::now(), wall: std::time::SystemTime::now() }
    }

    /// A log line's RFC 3339 timestamp as an instant.
    fn instant(&self, timestamp: &str) -> Option<Instant> {
        let at = std::time::SystemTime::from(timestamp.parse::<k8s_openapi::jiff::Timestamp>().ok()?);
        let before = self.wall.duration_since(at).ok()?;
        self.instant.checked_sub(before)
    }
}

fn truncate(text: &str, chars: usize) -> String {
    let cut: String = text.chars().take(chars).collect();
    if cut.len() < text.len() { format!("{cut}…") } else { cut }
}

/// Why a reconcile failed, from its error text.
pub fn cause(error: &str) -> &'static str {
    let e = error.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| e.contains(n));
    if has(&["the logic module failed"]) {
        "the module failed (trap, deadline, memory)"
    } else if has(&["host refuses"]) {
        "a module answer refused"
    } else if has(&["still conflicting"]) {
        "409 Conflict after every retry"
    } else if has(&["already exists"]) {
        "409 AlreadyExists"
    } else if has(&["409", "conflict"]) {
        "409 Conflict"
    } else if has(&["being deleted", "terminating", "deletiontimestamp"]) {
        "an object being deleted"
    } else if has(&["404", "notfound", "not found"]) {
        "404 NotFound"
    } else if has(&["timed out", "timeout", "deadline"]) {
        "API request timed out"
    } else if has(&[
        "connect",
        "connection",
        "sendrequest",
        "broken pipe",
        "reset",
        "eof",
        "hyper",
        "service error",
        "tls",
        "closed",
    ]) {
        "API server unreachable (connection)"
    } else if has(&["429", "too many requests"]) {
        "429 Too Many Requests"
    } else if has(&["500", "503", "internal error", "unavailable"]) {
        "API server error (5xx)"
    } else if has(&["controller", "owner"]) {
        "an object controlled by another owner"
    } else {
        "other"
    }
}

/// Nearest-rank percentile of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// p50 / p99 / max of the changes `keep` admits, and their count.
fn spread(converged: &[Converged], keep: impl Fn(&Converged) -> bool) -> (usize, Duration, Duration, Duration) {
    let mut times: Vec<Duration> = converged.iter().filter(|c| keep(c)).map(|c| c.ended - c.started).collect();
    times.sort();
    (times.len(), percentile(&times, 50.0), percentile(&times, 99.0), times.last().copied().unwrap_or_default())
}

fn overlaps(change: &Converged, fault: &FaultRecord) -> bool {
    change.started <= fault.ended && fault.started <= change.ended
}

fn mark(met: bool) -> &'static str {
    if met { "✓" } else { "✗" }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Per incarnation: drift of resident memory while it led, after warm-up.
struct Drift {
    identity: String,
    lived: Duration,
    led: Duration,
    baseline: Option<u64>,
    end: Option<u64>,
    peak: u64,
    /// Some when it led at least a warm-up past its baseline.
    drift: Option<f64>,
}

/// How long a level of resident memory is read over: over this window,
/// not one sample. A hot swap keeps two versions' code resident
/// until the next release of idle code (up to 10 s), and a burst of
/// reconciles lasts seconds: one 10-s sample that falls in either is no
/// level, and drift is a change of level. Three minutes, not one: the
/// soak rotates a Secret every minute, and a leader's heap in use sits
/// ~2 MiB higher for a good part of each minute after it; a one-minute
/// window read that phase, not a level (a 10-minute run with
/// no faults read +4.1 % from heap in use 21.6 against 23.6 MiB, the same
/// two states in another proportion).
const LEVEL_WINDOW: Duration = Duration::from_secs(180);

fn drift(incarnation: &Incarnation, soak_started: Instant, warmup: Duration) -> Drift {
    let leading: Vec<(Instant, u64)> =
        incarnation.rss.iter().filter(|(_, _, leads)| *leads).map(|&(at, kib, _)| (at, kib)).collect();
    let led = match (leading.first(), leading.last()) {
        (Some(first), Some(last)) => last.0 - first.0,
        _ => Duration::ZERO,
    };
    let mut baseline = None;
    let mut end = None;
    if let (Some(first), Some(last)) = (leading.first(), leading.last()) {
        let warmed = first.0.max(soak_started) + warmup;
        let ends_from = last.0.checked_sub(LEVEL_WINDOW).unwrap_or(last.0);
        // Two whole windows, a warm-up apart at least.
        if ends_from >= warmed + LEVEL_WINDOW + warmup {
            baseline = level(&leading, warmed, warmed + LEVEL_WINDOW);
            end = level(&leading, ends_from, last.0);
        }
    }
    let measured = match (baseline, end) {
        (Some(b), Some(e)) if b > 0 => Some((e as f64 - b as f64) / b as f64 * 100.0),
        _ => None,
    };
    let lived = incarnation.ended.unwrap_or_else(Instant::now) - incarnation.started;
    Drift {
        identity: incarnation.identity.clone(),
        lived,
        led,
        baseline,
        end,
        peak: incarnation.peak_rss_kib,
        drift: measured,
    }
}

/// How far apart the samples a level is read from must be: the sampler's
/// period, less a second for its jitter.
const LEVEL_SPACING: Duration = Duration::from_secs(9);

/// The level of the samples taken from `from` to `to` (both included), one
/// per sampling period: their mean once the highest and the lowest sixth
/// are set aside.
/// - One per period: a swap or a kill also samples every 0.5 s while it
///   waits, and those runs sit in the seconds two versions' code is
///   resident (in a 35-minute soak, 10 of the 16 samples of one end window
///   came from the last seconds of a swap).
/// - The extremes set aside: a swap's or a burst's sample is no level.
/// - A mean of the rest, not a median: a leader's heap in use alternates
///   between two states ~2 MiB apart (the Secret rotated every minute and
///   its reconciles), each about half the time, and a median read which
///   state held the majority of a window (a 10-minute run with no faults:
///   +6.4 % by medians of three minutes, +4.3 % by this level, from the
///   same samples).
fn level(samples: &[(Instant, u64)], from: Instant, to: Instant) -> Option<u64> {
    let mut within = Vec::new();
    let mut last_taken: Option<Instant> = None;
    for &(at, kib) in samples.iter().filter(|(at, _)| *at >= from && *at <= to) {
        if last_taken.is_none_or(|taken| at - taken >= LEVEL_SPACING) {
            within.push(kib);
            last_taken = Some(at);
        }
    }
    within.sort_unstable();
    let aside = within.len() / 6;
    let kept = &within[aside..within.len() - aside];
    if kept.is_empty() {
        return None;
    }
    Some(kept.iter().sum::<u64>() / kept.len() as u64)
}

/// The windows between Lease renewals seen further apart than a leader
/// lets pass: from the last renewal before to the first after.
fn no_leader(renewals: &[(Instant, std::time::SystemTime)]) -> Vec<FaultRecord> {
    renewals
        .windows(2)
        .filter(|pair| pair[1].0 - pair[0].0 > crate::NO_LEADER_AFTER)
        .map(|pair| FaultRecord {
            kind: "no leader".into(),
            started: pair[0].0,
            ended: pair[1].0,
            partition: false,
            note: String::new(),
        })
        .collect()
}

/// The report, and whether every goal was met.
pub fn render(config: &Config, outcome: &Outcome, replicas: &[Replica]) -> (String, bool) {
    let mut out = String::new();
    let soak = outcome.soak_ended - outcome.soak_started;
    let converged = &outcome.world.converged;
    let partitions: Vec<&FaultRecord> = outcome.faults.iter().filter(|f| f.partition).collect();
    // Faults that disturb reconciling: partitions, resets, restarts, kills,
    // and every time without a leader (no renewal of the Lease for longer
    // than a leader lets pass, until the next one, by any replica).
    let gaps: Vec<FaultRecord> = no_leader(&outcome.lease.renewals);
    let disruptions: Vec<&FaultRecord> = outcome
        .faults
        .iter()
        .filter(|f| !f.kind.starts_with("hot swap") && f.kind != "latency")
        .chain(gaps.iter())
        .collect();
    let all = spread(converged, |_| true);
    let outside_partitions = spread(converged, |c| !partitions.iter().any(|f| overlaps(c, f)));
    let outside_all = spread(converged, |c| !disruptions.iter().any(|f| overlaps(c, f)));
    // A rotation rolls every Deployment referencing the Secret at once (a
    // burst through --concurrency), each counted as a change.
    let outside_all_no_rotation =
        spread(converged, |c| !c.label.starts_with("Secret rotated") && !disruptions.iter().any(|f| overlaps(c, f)));
    let pending = outcome.world.pending_list();
    let drifts: Vec<Drift> =
        replicas.iter().flat_map(|r| &r.incarnations).map(|i| drift(i, outcome.soak_started, outcome.warmup)).collect();
    let max_drift = drifts.iter().filter_map(|d| d.drift).fold(None::<f64>, |m, d| Some(m.map_or(d, |m| m.max(d))));
    let operator_noops = outcome.writes.unchanged_by(crate::OPERATOR_USER);
    let unchanged_modifications: usize = outcome.world.unchanged_modifications.values().sum();

    let goal_lost = outcome.lost.is_empty();
    let goal_noops = operator_noops == 0;
    let goal_drift = max_drift.is_some_and(|d| d < 5.0);
    let goal_p99 = outside_partitions.0 > 0 && outside_partitions.2 < Duration::from_secs(10);
    let goal_panics = outcome.logs.panics.is_empty();
    let goal_pending = pending.is_empty();
    let met = goal_lost && goal_noops && goal_drift && goal_p99 && goal_panics && goal_pending;

    let _ = writeln!(
        out,
        "## Soak: {:.0} minutes, {} CRs, seed {}{}",
        soak.as_secs_f64() / 60.0,
        config.crs,
        config.seed,
        if config.faults { "" } else { ", churn only (`--no-faults`)" }
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Machine: {}; commit {}; `--concurrency` {}; load average at the end {}. {} CRs created and converged in {:.1} s before the soak; warm-up {:.0} s.",
        outcome.machine,
        outcome.commit,
        config.concurrency.map_or_else(|| "the operator's default".to_owned(), |n| n.to_string()),
        crate::machine::load_average(),
        config.crs,
        outcome.created_in.as_secs_f64(),
        outcome.warmup.as_secs_f64()
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "| measure | value | goal |");
    let _ = writeln!(out, "|---|---|---|");
    let applied: usize = outcome.churn.applied.values().sum();
    let by_kind = |map: &BTreeMap<&'static str, usize>| {
        map.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    };
    let _ = writeln!(
        out,
        "| soak duration, CRs | {:.1} min, {} CRs | 60 min, 1000 CRs |",
        soak.as_secs_f64() / 60.0,
        config.crs
    );
    let _ = writeln!(out, "| changes applied | {applied}: {} | |", by_kind(&outcome.churn.applied));
    if !outcome.churn.failed.is_empty() {
        let _ = writeln!(
            out,
            "| changes the soak could not make (its own requests failed) | {} (last: {}) | |",
            by_kind(&outcome.churn.failed),
            outcome.churn.last_error.as_deref().unwrap_or("").replace('|', "/")
        );
    }
    let mut fault_counts: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for fault in &outcome.faults {
        let entry = fault_counts.entry(fault.kind.as_str()).or_default();
        entry.0 += 1;
        entry.1 += (fault.ended - fault.started).as_secs_f64();
    }
    let faults = fault_counts
        .iter()
        .map(|(k, (n, s))| if k.starts_with("hot swap") { format!("{k} {n}") } else { format!("{k} {n} ({s:.0} s)") })
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(out, "| faults injected | {}: {faults} | |", outcome.faults.len());
    let reconciles: BTreeMap<String, u64> = sum_series(replicas, "wasm_operator_reconciles_total");
    let _ = writeln!(out, "| reconciles (both replicas, every incarnation) | {} | |", join_series(&reconciles));
    let failures: usize = outcome.logs.failures.values().map(|(n, _)| n).sum();
    let causes =
        outcome.logs.failures.iter().map(|(cause, (n, _))| format!("{cause} {n}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(out, "| failed reconciles by cause (logs) | {failures}: {causes} | |");
    let module_failures = sum_series(replicas, "wasm_operator_module_failures_total");
    let conflicts = sum_series(replicas, "wasm_operator_conflicts_retried_total");
    let _ = writeln!(
        out,
        "| module failures (metrics); 409s retried | {}; {} | |",
        or_none(&join_series(&module_failures)),
        conflicts.values().sum::<u64>()
    );
    let row = |(n, p50, p99, max): (usize, Duration, Duration, Duration)| {
        format!("{n} changes: p50 {}, p99 {}, max {}", seconds(p50), seconds(p99), seconds(max))
    };
    let _ = writeln!(out, "| change → converged, all | {} | |", row(all));
    let _ = writeln!(
        out,
        "| change → converged, outside injected partitions (Toxiproxy's, and API server restarts: nothing reaches it) | {} | p99 < 10 s {} |",
        row(outside_partitions),
        mark(goal_p99)
    );
    let _ = writeln!(
        out,
        "| change → converged, outside every fault window (partitions, resets, API server restarts, no leader) | {} | |",
        row(outside_all)
    );
    let _ = writeln!(
        out,
        "| change → converged, outside every fault window, Secret rotations apart | {} | |",
        row(outside_all_no_rotation)
    );
    let leaderless: f64 = gaps.iter().map(|g| (g.ended - g.started).as_secs_f64()).sum();
    let _ = writeln!(
        out,
        "| time without a leader (Lease renewals more than {} s apart) | {leaderless:.0} s in {} gaps | |",
        crate::NO_LEADER_AFTER.as_secs(),
        gaps.len()
    );
    let _ = writeln!(
        out,
        "| changes never converged; superseded (CR deleted or replaced first) | {}; {} | 0 {} |",
        pending.len(),
        outcome.world.superseded,
        mark(goal_pending)
    );
    let others: Vec<String> = outcome
        .writes
        .unchanged
        .iter()
        .filter(|((user, _), _)| user != crate::OPERATOR_USER)
        .map(|((user, resource), n)| format!("{user} {resource} {n}"))
        .collect();
    let ours: Vec<String> = outcome
        .writes
        .unchanged
        .iter()
        .filter(|((user, _), _)| user == crate::OPERATOR_USER)
        .map(|((_, resource), n)| format!("{resource} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "| writes to unchanged objects by the operator (audit log: of {} successful writes) | {operator_noops}{} | 0 {} |",
        outcome.writes.by_operator,
        if ours.is_empty() { String::new() } else { format!(" ({})", ours.join(", ")) },
        mark(goal_noops)
    );
    let _ = writeln!(
        out,
        "| writes to unchanged objects by others (for comparison); watch events with no content change | {}; {unchanged_modifications} | |",
        or_none(&others.join(", ")),
    );
    let refused =
        outcome.writes.refused_by_code.iter().map(|(c, n)| format!("{c}: {n}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(out, "| the operator's writes refused by the API server, by code | {} | |", or_none(&refused));
    let lost = outcome
        .lost
        .iter()
        .take(3)
        .map(|l| format!("{}/{}: {}", l.cr.0, l.cr.1, truncate(&l.why, 200)))
        .collect::<Vec<_>>()
        .join("; ")
        .replace('|', "/");
    let _ = writeln!(
        out,
        "| lost updates (final children or status ≠ render of the final spec) | {} of {} CRs{} | 0 {} |",
        outcome.lost.len(),
        outcome.crs_checked,
        if lost.is_empty() { String::new() } else { format!(" ({lost})") },
        mark(goal_lost)
    );
    let takeovers: Vec<String> = outcome
        .kills
        .iter()
        .map(|k| {
            let led = k.takeover.map_or_else(|| "none".to_owned(), |t| format!("{:.1} s", t.as_secs_f64()));
            format!("{led} ({})", if k.pod_replaced { "pod replaced" } else { "container restarted" })
        })
        .collect();
    let holder = |h: &Option<String>| h.clone().unwrap_or_else(|| "none".to_owned());
    let changes: Vec<String> =
        outcome.lease.changes.iter().map(|c| format!("{} → {}", holder(&c.from), holder(&c.to))).collect();
    let _ = writeln!(
        out,
        "| failovers: leader changes; leaders killed, led again after each | {}{}; {} killed: {} | |",
        outcome.lease.changes.len(),
        if changes.is_empty() { String::new() } else { format!(" ({})", truncate(&changes.join(", "), 300)) },
        outcome.kills.len(),
        or_none(&takeovers.join(", "))
    );
    let exits: Vec<String> = outcome.exits.iter().map(|(identity, _, why)| format!("{identity}: {why}")).collect();
    let _ = writeln!(
        out,
        "| replicas that exited by themselves (started again, as a kubelet would) | {}{} | |",
        outcome.exits.len(),
        if exits.is_empty() {
            String::new()
        } else {
            format!(" ({})", truncate(&exits.join("; "), 400).replace('|', "/"))
        }
    );
    let swaps = sum_series(replicas, "wasm_operator_module_swaps_total");
    let _ = writeln!(
        out,
        "| hot swaps: identical versions offered, live on the leader; failing version rolled back after | {}, {}; {} | |",
        outcome.swaps.to_identical,
        outcome.swaps.live,
        outcome
            .swaps
            .rolled_back_in
            .map_or_else(|| "not rolled back".to_owned(), |t| format!("{:.1} s", t.as_secs_f64()))
    );
    let _ = writeln!(out, "| module_swaps_total (both replicas) | {} | |", or_none(&join_series(&swaps)));
    let _ = writeln!(out, "| panics in the logs | {} | 0 {} |", outcome.logs.panics.len(), mark(goal_panics));
    let _ = writeln!(
        out,
        "| RSS drift after warm-up, while leading (largest) | {} | < 5 % {} |",
        max_drift.map_or_else(|| "no incarnation led long enough".to_owned(), |d| format!("{d:+.1} %")),
        mark(goal_drift)
    );
    let _ = writeln!(
        out,
        "| settled after the soak (faults healed, changes converged, watches quiet 10 s) | {} | |",
        outcome.settled_in.map_or_else(|| "not within 300 s".to_owned(), |d| format!("in {:.1} s", d.as_secs_f64()))
    );
    let _ = writeln!(out);

    let timeline = Timeline {
        no_leader: gaps.iter().map(|g| (g.started, g.ended)).collect(),
        lives: outcome.logs.lives.clone(),
        faults: disruptions.iter().filter(|f| f.kind != "no leader").map(|f| (f.started, f.ended)).collect(),
        failures: outcome.logs.failed.clone(),
    };
    crate::waits::render(&mut out, converged, &timeline);

    let _ = writeln!(out, "Convergence by change:");
    let _ = writeln!(out);
    let _ = writeln!(out, "| change | count | p50 | p99 | max |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let mut labels: Vec<&str> = converged.iter().map(|c| c.label).collect();
    labels.sort();
    labels.dedup();
    for label in labels {
        let (n, p50, p99, max) = spread(converged, |c| c.label == label);
        let _ = writeln!(out, "| {label} | {n} | {} | {} | {} |", seconds(p50), seconds(p99), seconds(max));
    }
    let _ = writeln!(out);

    let _ = writeln!(
        out,
        "Resident memory per replica process (drift: while it led, the level (see docs/src/benchmarks/soak.md) of its first {:.0} s after {:.0} s of lead against that of its last {:.0} s, when it led that long again):",
        LEVEL_WINDOW.as_secs_f64(),
        outcome.warmup.as_secs_f64(),
        LEVEL_WINDOW.as_secs_f64()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| process | lived | led | RSS after warm-up (level) | RSS at the end of its lead (level) | peak | drift |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for d in &drifts {
        let _ = writeln!(
            out,
            "| {} | {:.1} min | {:.1} min | {} | {} | {} | {} |",
            d.identity,
            d.lived.as_secs_f64() / 60.0,
            d.led.as_secs_f64() / 60.0,
            d.baseline.map_or_else(|| "–".to_owned(), mib),
            d.end.map_or_else(|| "–".to_owned(), mib),
            mib(d.peak),
            d.drift.map_or_else(|| "–".to_owned(), |v| format!("{v:+.1} %"))
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Resident memory over time (MiB, every tenth of the soak; L leading):");
    let _ = writeln!(out);
    let marks: Vec<Instant> =
        (0..=10).map(|i| outcome.soak_started + (outcome.soak_ended - outcome.soak_started) * i / 10).collect();
    let _ = writeln!(
        out,
        "| process | {} |",
        (0..=10)
            .map(|i| format!("{:.0} min", soak.as_secs_f64() / 60.0 * f64::from(i) / 10.0))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---:|".repeat(11));
    for incarnation in replicas.iter().flat_map(|r| &r.incarnations) {
        let cells: Vec<String> = marks
            .iter()
            .map(|at| {
                incarnation.rss.iter().rfind(|(t, _, _)| t <= at && *at - *t < Duration::from_secs(30)).map_or_else(
                    || "".to_owned(),
                    |(_, kib, leads)| format!("{:.0}{}", *kib as f64 / 1024.0, if *leads { " L" } else { "" }),
                )
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", incarnation.identity, cells.join(" | "));
    }
    let _ = writeln!(out);
    if !outcome.logs.failures.is_empty() {
        let _ = writeln!(out, "An error of each cause:");
        let _ = writeln!(out);
        for (cause, (_, example)) in &outcome.logs.failures {
            let _ = writeln!(out, "- {cause}: `{}`", example.replace('`', "'"));
        }
        let _ = writeln!(out);
    }
    for problem in &outcome.swaps.problems {
        let _ = writeln!(out, "- swap: {problem}");
    }
    for panic in outcome.logs.panics.iter().take(5) {
        let _ = writeln!(out, "- panic: `{}`", panic.replace('`', "'"));
    }
    for item in pending.iter().take(10) {
        let _ = writeln!(out, "- never converged: {item}");
    }
    for lost in outcome.lost.iter().take(10) {
        let _ = writeln!(out, "- lost update: {}/{}: {}", lost.cr.0, lost.cr.1, truncate(&lost.why, 400));
    }
    let _ = writeln!(out, "\nGoals: {}", if met { "all met".to_owned() } else { "NOT all met (✗ above)".to_owned() });
    (out, met)
}

fn or_none(text: &str) -> String {
    if text.is_empty() { "none".to_owned() } else { text.to_owned() }
}

fn sum_series(replicas: &[Replica], name: &str) -> BTreeMap<String, u64> {
    let mut all = BTreeMap::new();
    for replica in replicas {
        for (labels, value) in replica.series(name) {
            *all.entry(labels).or_default() += value;
        }
    }
    all
}

fn join_series(series: &BTreeMap<String, u64>) -> String {
    series
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{} {v}", k.replace('"', "")))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&times, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&times, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&[], 99.0), Duration::ZERO);
    }

    #[test]
    fn errors_are_told_apart_by_cause() {
        assert_eq!(
            cause("the logic module failed in desired: the logic module trapped"),
            "the module failed (trap, deadline, memory)"
        );
        assert_eq!(
            cause("replace Deployment a/b: ApiError: Operation cannot be fulfilled (Conflict): 409"),
            "409 Conflict"
        );
        assert_eq!(cause("list: error trying to connect: tcp connect error"), "API server unreachable (connection)");
        assert_eq!(cause("something new"), "other");
    }

    #[test]
    fn drift_compares_the_level_after_warm_up_with_the_last_minutes() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let warmup = Duration::from_secs(180);
        // Every 10 s for 20 minutes, leading: 50 MiB, a swap's 58 MiB sample
        // now and then (both windows have one), ending at 52 MiB.
        let rss: Vec<(Instant, u64, bool)> = (0..=120)
            .map(|i| {
                let kib = if i % 15 == 3 {
                    58 << 10
                } else if i >= 100 {
                    52 << 10
                } else {
                    50 << 10
                };
                (at(i * 10), kib, true)
            })
            .collect();
        let incarnation = Incarnation {
            identity: "soak-a-1".into(),
            pod_name: "soak-a-pod1".into(),
            started: start,
            ended: Some(at(1200)),
            log: PathBuf::new(),
            rss,
            detail: Vec::new(),
            peak_rss_kib: 58 << 10,
            last_scrape: String::new(),
        };
        let d = drift(&incarnation, start, warmup);
        assert_eq!((d.baseline, d.end), (Some(50 << 10), Some(52 << 10)), "a high sample now and then moves no level");
        assert!((d.drift.expect("led long enough") - 4.0).abs() < 1e-9);
        // Led too briefly for two windows a warm-up apart: no figure.
        let short = Incarnation { rss: incarnation.rss[..40].to_vec(), ..incarnation };
        assert_eq!(drift(&short, start, warmup).drift, None);
    }

    #[test]
    fn a_run_of_samples_taken_during_a_swap_counts_as_one_in_a_level() {
        let start = Instant::now();
        let at = |tenths: u64| start + Duration::from_millis(tenths * 100);
        // Every 10 s at 50 MiB over a minute, and a swap at 30 s sampled
        // every 0.5 s for 5 s at 58 MiB: more samples than the level's own.
        let mut samples: Vec<(Instant, u64)> = (0..=6).map(|i| (at(i * 100), 50 << 10)).collect();
        samples.extend((1..=10).map(|i| (at(300 + i * 5), 58 << 10)));
        samples.sort_by_key(|(when, _)| *when);
        assert_eq!(level(&samples, start, at(600)), Some(50 << 10));
    }

    #[test]
    fn a_level_of_two_alternating_states_is_their_mean() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        // 10-s samples over 3 minutes: 50 MiB 8 times in 19, 52 MiB 11:
        // a median would read 52, the level is the time-weighted 51.2.
        let samples: Vec<(Instant, u64)> =
            (0..=18).map(|i| (at(i * 10), if i % 2 == 0 && i < 16 { 50 << 10 } else { 52 << 10 })).collect();
        let level = level(&samples, start, at(180)).expect("samples");
        assert!((51 << 10) < level && level < (51 << 10) + 512, "{level} KiB");
    }

    #[test]
    fn renewals_further_apart_than_a_leader_lets_pass_are_time_without_one() {
        let start = Instant::now();
        let wall = std::time::SystemTime::now();
        let at = |s: f64| (start + Duration::from_secs_f64(s), wall + Duration::from_secs_f64(s));
        // Every 2 s, 3.5 s under latency, then 16 s without, then every 2 s.
        let renewals = [at(0.0), at(2.0), at(5.5), at(21.5), at(23.5)];
        let gaps = no_leader(&renewals);
        assert_eq!(gaps.len(), 1);
        assert_eq!((gaps[0].started, gaps[0].ended), (renewals[2].0, renewals[3].0));
        assert!(no_leader(&renewals[..1]).is_empty());
    }
}
