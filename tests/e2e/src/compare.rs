//! Ours against the Go operator, per size, as ratios against issue 23's
//! targets (below 1 means ours uses less), and how each operator's cost per
//! CR grows from the smallest size to the largest.

use crate::Row;
use memcached_e2e::operators::Flavor;

/// Issue 23's targets, ours / Go (issue 13's were 0.5, 0.5 and 0.8).
const PEAK_RSS_TARGET: f64 = 0.35;
/// From this many CRs on, the peak's target is [`LARGE_PEAK_RSS_TARGET`].
const LARGE: usize = 10_000;
const LARGE_PEAK_RSS_TARGET: f64 = 0.25;
const CPU_TARGET: f64 = 0.35;
const TIME_TARGET: f64 = 0.5;
const RECONCILES_PER_CR_TARGET: f64 = 1.1;
/// Cost per CR at the largest size over the smallest: 1.0 is linear; the
/// margin is for a shared machine's noise.
const LINEAR_GROWTH: f64 = 1.1;

fn peak_rss_target(crs: usize) -> f64 {
    if crs >= LARGE { LARGE_PEAK_RSS_TARGET } else { PEAK_RSS_TARGET }
}

/// `ours / go`; None when the Go value is zero.
fn ratio(ours: f64, go: f64) -> Option<f64> {
    (go > 0.0).then(|| ours / go)
}

fn verdict(met: bool) -> &'static str {
    if met { "✓" } else { "✗" }
}

/// `0.74 ✓` against `target` (at most), or "–".
fn against(ratio: Option<f64>, target: f64) -> String {
    ratio.map_or_else(|| "–".into(), |r| format!("{r:.2} {}", verdict(r <= target)))
}

fn pairs(rows: &[Row]) -> Vec<(&Row, &Row)> {
    rows.iter()
        .filter(|r| r.flavor == Flavor::Ours)
        .filter_map(|ours| rows.iter().find(|r| r.flavor == Flavor::Go && r.crs == ours.crs).map(|go| (ours, go)))
        .collect()
}

fn writes_per_cr(row: &Row) -> f64 {
    row.audit.writes() as f64 / row.crs as f64
}

/// The side-by-side table with each target marked met (✓) or not (✗), and
/// the machine it ran on.
pub fn table(rows: &[Row], machine: &str) -> String {
    let pairs = pairs(rows);
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\nOurs / the Go operator (below 1: ours uses less; ✓ target met, ✗ not met), on {machine}. Writes to converge \
         from the audit log, events included; expected = objects created + one status write per CR + one event per \
         object created. Idle writes: children and status (events apart) during ours' idle resync and idle touch, \
         the Go operator's idle touch. Memory per CR or per cached object = (idle RSS − RSS before the first CR) / \
         count; cached objects = CRs + every object of an owned kind + the Secrets in the CRs' namespaces.\n\n\
         | CRs | peak RSS ours/Go (≤ {PEAK_RSS_TARGET:.2}; ≤ {LARGE_PEAK_RSS_TARGET:.2} from {LARGE}) | RSS at convergence ours/Go | CPU to converge ours/Go (≤ {CPU_TARGET:.2}) | time to converge ours/Go (≤ {TIME_TARGET:.2}) | reconciles per CR ours (≤ {RECONCILES_PER_CR_TARGET:.1}) / Go | writes per CR: expected / ours / Go | idle writes ours (= 0) / Go | memory per CR (KiB) ours / Go | memory per cached object (KiB) ours / Go |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut met = 0;
    let mut targets = 0;
    for (ours, go) in pairs {
        let peak = ratio(ours.peak_rss_kib as f64, go.peak_rss_kib as f64);
        let cpu = ratio(ours.cpu_to_converge, go.cpu_to_converge);
        let time = ratio(ours.converged.as_secs_f64(), go.converged.as_secs_f64());
        let expected = ours.expected.total();
        let checks = [
            peak.is_some_and(|r| r <= peak_rss_target(ours.crs)),
            cpu.is_some_and(|r| r <= CPU_TARGET),
            time.is_some_and(|r| r <= TIME_TARGET),
            ours.reconciles_per_cr() <= RECONCILES_PER_CR_TARGET,
            ours.audit.writes() <= expected,
            ours.idle_writes() == 0,
        ];
        targets += checks.len();
        met += checks.iter().filter(|c| **c).count();
        out.push_str(&format!(
            "| {} | {} ({:.0} / {:.0} MiB) | {} ({:.0} / {:.0} MiB) | {} ({:.1} / {:.1} s) | {} ({:.1} / {:.1} s) | {:.2} {} / {:.2} | {:.2} / {:.2} {} / {:.2} | {} {} / {} | {:.0} / {:.0} | {:.1} / {:.1} |\n",
            ours.crs,
            against(peak, peak_rss_target(ours.crs)),
            crate::mib(ours.peak_rss_kib),
            crate::mib(go.peak_rss_kib),
            ratio(ours.converged_rss_kib as f64, go.converged_rss_kib as f64).map_or("–".into(), |r| format!("{r:.2}")),
            crate::mib(ours.converged_rss_kib),
            crate::mib(go.converged_rss_kib),
            against(cpu, CPU_TARGET),
            ours.cpu_to_converge,
            go.cpu_to_converge,
            against(time, TIME_TARGET),
            ours.converged.as_secs_f64(),
            go.converged.as_secs_f64(),
            ours.reconciles_per_cr(),
            verdict(ours.reconciles_per_cr() <= RECONCILES_PER_CR_TARGET),
            go.reconciles_per_cr(),
            expected as f64 / ours.crs as f64,
            writes_per_cr(ours),
            verdict(ours.audit.writes() <= expected),
            writes_per_cr(go),
            ours.idle_writes(),
            verdict(ours.idle_writes() == 0),
            go.idle_writes(),
            ours.kib_per_cr(),
            go.kib_per_cr(),
            ours.kib_per_cached_object(),
            go.kib_per_cached_object(),
        ));
    }
    out.push_str(&format!("\nTargets met: {met} of {targets}.\n"));
    out
}

/// Per operator, its cost per CR at the largest size over the smallest
/// (1.0 = linear; ✓ up to 1.1).
pub fn growth(rows: &[Row]) -> String {
    let mut out = String::new();
    for flavor in [Flavor::Ours, Flavor::Go] {
        let sized: Vec<&Row> = rows.iter().filter(|r| r.flavor == flavor).collect();
        let (Some(small), Some(large)) = (sized.iter().min_by_key(|r| r.crs), sized.iter().max_by_key(|r| r.crs))
        else {
            continue;
        };
        if small.crs == large.crs {
            continue;
        }
        if out.is_empty() {
            out.push_str(&format!(
                "\nGrowth from the smallest size to the largest: cost per CR at the largest / at the smallest \
                 (1.00 = linear; ✓ up to {LINEAR_GROWTH:.2}, for noise).\n\n\
                 | operator | CRs | memory per CR (KiB) | memory per cached object (KiB) | CPU per CR (ms) | time to converge per CR (ms) | peak RSS |\n\
                 |---|---:|---:|---:|---:|---:|---:|\n"
            ));
        }
        let cell = |small: f64, large: f64, precision: usize| match ratio(large, small) {
            Some(r) => format!("{small:.precision$} → {large:.precision$} ({r:.2} {})", verdict(r <= LINEAR_GROWTH)),
            None => format!("{small:.precision$} → {large:.precision$}"),
        };
        let time_ms = |row: &Row| row.converged.as_secs_f64() * 1000.0 / row.crs as f64;
        out.push_str(&format!(
            "| {} | {} → {} | {} | {} | {} | {} | {:.0} → {:.0} MiB |\n",
            flavor.label(),
            small.crs,
            large.crs,
            cell(small.kib_per_cr(), large.kib_per_cr(), 0),
            cell(small.kib_per_cached_object(), large.kib_per_cached_object(), 1),
            cell(small.cpu_ms_per_cr(), large.cpu_ms_per_cr(), 2),
            cell(time_ms(small), time_ms(large), 1),
            crate::mib(small.peak_rss_kib),
            crate::mib(large.peak_rss_kib),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_guard_against_zero_and_mark_the_target() {
        assert_eq!(ratio(1.0, 2.0), Some(0.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(against(Some(0.5), 0.5), "0.50 ✓");
        assert_eq!(against(Some(0.51), 0.5), "0.51 ✗");
        assert_eq!(against(None, 0.5), "–");
    }

    #[test]
    fn the_peak_target_tightens_at_ten_thousand() {
        assert_eq!(peak_rss_target(1000), 0.35);
        assert_eq!(peak_rss_target(10_000), 0.25);
        assert_eq!(peak_rss_target(100_000), 0.25);
    }
}
