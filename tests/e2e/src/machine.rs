//! The machine a bench ran on, printed with its results: times and CPU
//! seconds mean little without the cores, the CPU and how busy it was.

/// Cores, CPU model, RAM and the load averages now.
pub fn describe() -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
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
