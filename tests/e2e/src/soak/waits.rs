//! What each slow change waited on: its time from made to converged, cut
//! into what held it up, from a timeline the soak records: time without a
//! leader (the Lease's renewals), when each replica process started,
//! filled its caches, took the Lease and ended its start-up pass (its
//! log), the faults injected, and each failed reconcile of the CR (the
//! logs). So every run says why its tail is what it is.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::world::{Converged, Key};

/// A change slower than this has its wait told apart.
pub const SLOW: Duration = Duration::from_secs(2);

/// What a change waited on, most telling first: a moment that fits
/// several is counted once, under the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wait {
    /// No replica led while the next leader's process started and
    /// filled its caches.
    Restart,
    /// No replica led while the next leader, ready, waited for the Lease.
    LeaseExpiry,
    /// No replica led, for no reason the timeline shows.
    NoLeader,
    /// An injected fault (partition, reset, API server restart).
    Fault,
    /// A new leader's start-up pass (every parent reconciled once).
    StartUpPass,
    /// The CR's reconciles failed, and were retried after a backoff.
    Retries,
    /// The rest: its turn, the reconcile, the watch events back.
    Reconciling,
}

impl Wait {
    pub fn describe(self) -> &'static str {
        match self {
            Wait::Restart => "no leader: a restart and its caches' first fill",
            Wait::LeaseExpiry => "no leader: the Lease's expiry",
            Wait::NoLeader => "no leader: otherwise",
            Wait::Fault => "an injected fault, with a leader",
            Wait::StartUpPass => "the new leader's start-up pass",
            Wait::Retries => "failed reconciles, retried",
            Wait::Reconciling => "its turn and its reconcile",
        }
    }
}

/// One replica process, from its log.
#[derive(Debug, Clone)]
pub struct Life {
    pub started: Instant,
    pub caches_synced: Option<Instant>,
    /// When it took the Lease.
    pub led: Option<Instant>,
    /// When its start-up pass ended.
    pub pass_done: Option<Instant>,
}

/// Everything a change may have waited on.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Time without a leader: from the last renewal of the Lease seen to
    /// the next one.
    pub no_leader: Vec<(Instant, Instant)>,
    pub lives: Vec<Life>,
    /// Injected faults that disturb reconciling.
    pub faults: Vec<(Instant, Instant)>,
    /// Each failed reconcile, of which CR.
    pub failures: Vec<(Instant, Key)>,
}

/// How long the Lease poller may see a new leader's first renewal after
/// the leader took it (it polls every 250 ms, plus a round trip).
const SEEN_WITHIN: Duration = Duration::from_secs(1);

impl Timeline {
    /// Every labelled window, in no order.
    fn windows(&self) -> Vec<(Wait, Instant, Instant)> {
        let mut windows = Vec::new();
        for &(from, to) in &self.no_leader {
            windows.push((Wait::NoLeader, from, to));
            // The process that led next: started within the gap (a
            // restart), or ready all along (a standby).
            let next = self
                .lives
                .iter()
                .filter_map(|life| life.led.map(|led| (led, life)))
                .filter(|(led, _)| *led >= from && *led <= to + SEEN_WITHIN)
                .min_by_key(|(led, _)| *led);
            let Some((led, life)) = next else { continue };
            let led = led.min(to);
            let ready = life.caches_synced.unwrap_or(led).clamp(from, led);
            if life.started > from {
                windows.push((Wait::Restart, from, ready));
            }
            windows.push((Wait::LeaseExpiry, ready, led));
        }
        for life in &self.lives {
            if let (Some(led), Some(done)) = (life.led, life.pass_done) {
                windows.push((Wait::StartUpPass, led, done));
            }
        }
        windows.extend(self.faults.iter().map(|&(from, to)| (Wait::Fault, from, to)));
        windows
    }

    /// What `change` waited on, for how long; its whole time in all.
    pub fn waits(&self, change: &Converged) -> BTreeMap<Wait, Duration> {
        let (start, end) = (change.started, change.ended);
        let mut windows = self.windows();
        if let Some(first) = self
            .failures
            .iter()
            .filter(|(at, cr)| *cr == change.parent && *at >= start && *at <= end)
            .map(|(at, _)| *at)
            .min()
        {
            windows.push((Wait::Retries, first, end));
        }
        windows.retain(|(_, from, to)| from < to && *to > start && *from < end);
        let mut cuts: Vec<Instant> = vec![start, end];
        for (_, from, to) in &windows {
            cuts.extend([*from, *to].into_iter().filter(|at| *at > start && *at < end));
        }
        cuts.sort();
        cuts.dedup();
        let mut waits = BTreeMap::new();
        for piece in cuts.windows(2) {
            let (from, to) = (piece[0], piece[1]);
            let wait = windows
                .iter()
                .filter(|(_, w_from, w_to)| *w_from <= from && to <= *w_to)
                .map(|(wait, _, _)| *wait)
                .min()
                .unwrap_or(Wait::Reconciling);
            *waits.entry(wait).or_default() += to - from;
        }
        waits
    }
}

/// The report's section: for the changes slower than [`SLOW`], what they
/// waited on in all, and the slowest ones one by one.
pub fn render(out: &mut String, converged: &[Converged], timeline: &Timeline) {
    let mut slow: Vec<(&Converged, BTreeMap<Wait, Duration>)> =
        converged.iter().filter(|c| c.ended - c.started >= SLOW).map(|c| (c, timeline.waits(c))).collect();
    slow.sort_by_key(|(c, _)| std::cmp::Reverse(c.ended - c.started));
    let _ = writeln!(
        out,
        "What the changes slower than {} s waited on ({} of {}; a moment that fits several counted under the first):",
        SLOW.as_secs(),
        slow.len(),
        converged.len()
    );
    let _ = writeln!(out);
    if slow.is_empty() {
        let _ = writeln!(out, "No change was that slow.");
        let _ = writeln!(out);
        return;
    }
    let total: Duration = slow.iter().map(|(c, _)| c.ended - c.started).sum();
    let mut by_wait: BTreeMap<Wait, (usize, Duration)> = BTreeMap::new();
    for (_, waits) in &slow {
        for (wait, time) in waits {
            let entry = by_wait.entry(*wait).or_default();
            entry.0 += 1;
            entry.1 += *time;
        }
    }
    let _ = writeln!(out, "| waited on | changes | time | share of their time |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for (wait, (changes, time)) in &by_wait {
        let _ = writeln!(
            out,
            "| {} | {changes} | {:.1} s | {:.0} % |",
            wait.describe(),
            time.as_secs_f64(),
            time.as_secs_f64() / total.as_secs_f64().max(f64::EPSILON) * 100.0
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "The slowest:");
    let _ = writeln!(out);
    for (change, waits) in slow.iter().take(10) {
        let parts: Vec<String> =
            waits.iter().map(|(wait, time)| format!("{} {:.1} s", wait.describe(), time.as_secs_f64())).collect();
        let _ = writeln!(
            out,
            "- {:.1} s, {} {}/{}: {}",
            (change.ended - change.started).as_secs_f64(),
            change.label,
            change.parent.0,
            change.parent.1,
            parts.join(", ")
        );
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded run, by hand: seconds from its start.
    struct Run(Instant);

    impl Run {
        /// Instants are never before the run's start: the times are
        /// shifted by a minute, the earliest being -30 s.
        fn at(&self, seconds: f64) -> Instant {
            self.0 + Duration::from_secs_f64(seconds + 60.0)
        }

        fn change(&self, label: &'static str, cr: &str, from: f64, to: f64) -> Converged {
            Converged { label, parent: key(cr), started: self.at(from), ended: self.at(to) }
        }
    }

    fn key(name: &str) -> Key {
        ("soak-1".to_owned(), name.to_owned())
    }

    fn seconds(waits: &BTreeMap<Wait, Duration>) -> Vec<(Wait, f64)> {
        waits.iter().map(|(w, d)| (*w, (d.as_secs_f64() * 10.0).round() / 10.0)).collect()
    }

    /// - 0 s: a leads (started at -30), b a standby since -30, ready at -28;
    /// - 10 s: a stops renewing (killed, its pod replaced); b takes the
    ///   Lease at 25 once it expired, is seen renewing at 25.2, ends its
    ///   start-up pass at 26;
    /// - 40 s: b killed, restarted at 40.5 in the same pod: caches filled at
    ///   42, the Lease taken back at 42.1, seen at 42.3; pass done at 44;
    /// - 60-66 s: a partition while b leads; cache-a's reconciles fail at
    ///   62 and 64.
    fn recorded(run: &Run) -> Timeline {
        Timeline {
            no_leader: vec![(run.at(10.0), run.at(25.2)), (run.at(40.0), run.at(42.3))],
            lives: vec![
                Life {
                    started: run.at(-30.0),
                    caches_synced: Some(run.at(-29.0)),
                    led: Some(run.at(-28.0)),
                    pass_done: Some(run.at(-20.0)),
                },
                Life {
                    started: run.at(-30.0),
                    caches_synced: Some(run.at(-28.0)),
                    led: Some(run.at(25.0)),
                    pass_done: Some(run.at(26.0)),
                },
                Life {
                    started: run.at(40.5),
                    caches_synced: Some(run.at(42.0)),
                    led: Some(run.at(42.1)),
                    pass_done: Some(run.at(44.0)),
                },
            ],
            faults: vec![(run.at(60.0), run.at(66.0))],
            failures: vec![
                (run.at(62.0), key("cache-a")),
                (run.at(64.0), key("cache-a")),
                (run.at(63.0), key("cache-b")),
            ],
        }
    }

    #[test]
    fn a_change_made_while_the_lease_ran_out_waited_on_its_expiry_then_the_pass() {
        let run = Run(Instant::now());
        let timeline = recorded(&run);
        let waits = timeline.waits(&run.change("CR edited", "cache-a", 12.0, 27.5));
        assert_eq!(
            seconds(&waits),
            [(Wait::LeaseExpiry, 13.0), (Wait::NoLeader, 0.2), (Wait::StartUpPass, 0.8), (Wait::Reconciling, 1.5)]
        );
    }

    #[test]
    fn a_change_made_during_a_restart_waited_on_the_restart_then_the_pass() {
        let run = Run(Instant::now());
        let timeline = recorded(&run);
        let waits = timeline.waits(&run.change("child deleted", "cache-a", 41.0, 45.0));
        assert_eq!(
            seconds(&waits),
            [
                (Wait::Restart, 1.0),
                (Wait::LeaseExpiry, 0.1),
                (Wait::NoLeader, 0.2),
                (Wait::StartUpPass, 1.7),
                (Wait::Reconciling, 1.0)
            ]
        );
    }

    #[test]
    fn a_change_through_a_fault_waited_on_it_then_on_its_retries_and_only_its_own() {
        let run = Run(Instant::now());
        let timeline = recorded(&run);
        let waits = timeline.waits(&run.change("CR edited", "cache-a", 61.0, 70.0));
        assert_eq!(seconds(&waits), [(Wait::Fault, 5.0), (Wait::Retries, 4.0)]);
        // Another CR's failures are not this change's retries.
        let other = timeline.waits(&run.change("CR edited", "cache-c", 61.0, 70.0));
        assert_eq!(seconds(&other), [(Wait::Fault, 5.0), (Wait::Reconciling, 4.0)]);
    }

    #[test]
    fn the_section_sums_the_slow_changes_and_lists_the_slowest_first() {
        let run = Run(Instant::now());
        let timeline = recorded(&run);
        let changes = [
            run.change("CR edited", "cache-a", 12.0, 27.5),
            run.change("CR edited", "cache-b", 50.0, 50.4),
            run.change("child deleted", "cache-a", 41.0, 45.0),
        ];
        let mut out = String::new();
        render(&mut out, &changes, &timeline);
        assert!(out.contains("(2 of 3;"), "{out}");
        assert!(out.contains("| no leader: the Lease's expiry | 2 | 13.1 s | 67 % |"), "{out}");
        assert!(out.contains("| its turn and its reconcile | 2 | 2.5 s | 13 % |"), "{out}");
        let first = out.find("- 15.5 s, CR edited soak-1/cache-a").expect("the slowest listed");
        let second = out.find("- 4.0 s, child deleted soak-1/cache-a").expect("the next listed");
        assert!(first < second, "{out}");
        let mut none = String::new();
        render(&mut none, &changes[1..2], &timeline);
        assert!(none.contains("No change was that slow."), "{none}");
    }
}
