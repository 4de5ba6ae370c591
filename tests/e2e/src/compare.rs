//! Ours against the Go operator, per size, as ratios (issue 13's table):
//! below 1 means ours uses less.

use crate::Row;
use memcached_e2e::operators::Flavor;

/// `ours / go`, two decimals; "–" when the Go value is zero.
fn ratio(ours: f64, go: f64) -> String {
    if go > 0.0 { format!("{:.2}", ours / go) } else { "–".into() }
}

/// Writes of an idle pass, events and leases aside.
fn idle_writes(row: &Row) -> usize {
    let audit = &row.touch.audit;
    audit.child_writes + audit.status_writes + audit.other_writes.values().sum::<usize>()
}

fn writes_per_cr(row: &Row) -> f64 {
    row.audit.writes() as f64 / row.crs as f64
}

pub fn table(rows: &[Row]) -> String {
    let pairs: Vec<(&Row, &Row)> = rows
        .iter()
        .filter(|r| r.flavor == Flavor::Ours)
        .filter_map(|ours| rows.iter().find(|r| r.flavor == Flavor::Go && r.crs == ours.crs).map(|go| (ours, go)))
        .collect();
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nOurs / the Go operator (below 1: ours uses less). Writes from the audit log, events included \
         (the idle touch: children and status only); memory per CR = (idle RSS − RSS before the first CR) / CRs.\n\n\
         | CRs | peak RSS ours/Go | CPU to converge ours/Go | converge time ours/Go | reconciles per CR ours / Go | writes per CR ours / Go | idle-touch writes ours / Go | memory per CR (KiB) ours / Go |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (ours, go) in pairs {
        out.push_str(&format!(
            "| {} | {} ({:.0} / {:.0} MiB) | {} ({:.1} / {:.1} s) | {} ({:.1} / {:.1} s) | {:.2} / {:.2} | {:.1} / {:.1} | {} / {} | {:.0} / {:.0} |\n",
            ours.crs,
            ratio(ours.peak_rss_kib as f64, go.peak_rss_kib as f64),
            ours.peak_rss_kib as f64 / 1024.0,
            go.peak_rss_kib as f64 / 1024.0,
            ratio(ours.cpu_to_converge, go.cpu_to_converge),
            ours.cpu_to_converge,
            go.cpu_to_converge,
            ratio(ours.converged.as_secs_f64(), go.converged.as_secs_f64()),
            ours.converged.as_secs_f64(),
            go.converged.as_secs_f64(),
            ours.reconciles as f64 / ours.crs as f64,
            go.reconciles as f64 / go.crs as f64,
            writes_per_cr(ours),
            writes_per_cr(go),
            idle_writes(ours),
            idle_writes(go),
            ours.kib_per_cr(),
            go.kib_per_cr(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_guard_against_zero() {
        assert_eq!(ratio(1.0, 2.0), "0.50");
        assert_eq!(ratio(1.0, 0.0), "–");
    }
}
