//! The machine a bench ran on, printed with its results: times and CPU
//! seconds mean little without the cores, the CPU and how busy it was.

/// Cores, CPU model, RAM and the load averages now.
pub fn describe() -> String {
    let cores = cores();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|rest| rest.split_once(':')).map(|(_, m)| m.trim()))
        .unwrap_or("unknown CPU")
        .to_owned();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let ram_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or_else(|| "?".into(), |kib| format!("{:.0}", kib as f64 / 1024.0 / 1024.0));
    format!("{cores} cores ({model}), {ram_gib} GiB RAM, load average {} at start", load_average())
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg prints them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "?".into())
}

/// The 1-minute load average.
pub fn load_now() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// CPU seconds every core of the machine has been busy since boot (all of
/// /proc/stat's `cpu` line but idle and iowait): with the wall time, how
/// much of the machine a run took, whoever took it.
pub fn busy_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .map(|rest| rest.split_whitespace().filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal (guest is in user).
    let busy: u64 = ticks.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, t)| t).sum();
    busy as f64 / memcached_e2e::operators::clock_ticks_per_second()
}

/// Cores the machine has.
pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
