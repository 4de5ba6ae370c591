//! The two replicas of `memcached-operator run`, leader election on, each
//! talking to the API server through its own Toxiproxy proxy. A replica
//! that exits or is killed is started again as a new incarnation (a new
//! process), in the same pod (the same POD_NAME, the Lease identity, as a
//! kubelet restarting a container) unless the soak replaces its pod; the
//! counters of the ones that ended are kept from their last scrape.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use memcached_e2e::loopback::{free_port, http_get};

use crate::SoakError;

/// The Lease both replicas compete for (in `default`).
pub const LEASE_NAME: &str = "memcached-operator-soak";

/// What one RSS sample was made of (KiB): RSS growing with the heap in use
/// is memory held; with the heap's free part, fragmentation; with the
/// file-backed part, pages of the binary or of compiled code mapped again.
#[derive(Clone, Copy, Default)]
pub struct MemoryDetail {
    /// RssFile (/proc/PID/status).
    pub file: Option<u64>,
    /// `wasm_operator_heap_bytes`, in use and free, when the scrape answered.
    pub heap: Option<(u64, u64)>,
}

/// One process of a replica.
pub struct Incarnation {
    /// `soak-a-1`, `soak-b-3`: the replica and its process.
    pub identity: String,
    /// `soak-a-pod1`: its pod's name (POD_NAME), its Lease identity.
    pub pod_name: String,
    pub started: Instant,
    pub ended: Option<Instant>,
    pub log: PathBuf,
    /// (when, VmRSS KiB, leading)
    pub rss: Vec<(Instant, u64, bool)>,
    /// Beside each RSS sample, what it was made of then.
    pub detail: Vec<MemoryDetail>,
    pub peak_rss_kib: u64,
    /// The last /metrics text it answered.
    pub last_scrape: String,
}

pub struct Replica {
    pub name: char,
    binary: PathBuf,
    kubeconfig: PathBuf,
    module: PathBuf,
    dir: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
    /// Its pod: the number in POD_NAME.
    pod: usize,
    /// It exited by itself, and nobody started it again yet.
    exit_noticed: bool,
    metrics: String,
    health: String,
    pub incarnations: Vec<Incarnation>,
}

impl Replica {
    pub fn new(
        name: char,
        binary: &Path,
        kubeconfig: &Path,
        module: &Path,
        dir: &Path,
        extra: Vec<String>,
    ) -> Result<Self, SoakError> {
        let port = || free_port().map_err(|e| SoakError::io("finding a free port", e));
        Ok(Replica {
            name,
            binary: binary.to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            module: module.to_owned(),
            dir: dir.to_owned(),
            extra,
            child: None,
            pod: 1,
            exit_noticed: false,
            metrics: format!("127.0.0.1:{}", port()?),
            health: format!("127.0.0.1:{}", port()?),
            incarnations: Vec::new(),
        })
    }

    /// The next start is in a new pod (a new POD_NAME).
    pub fn replace_pod(&mut self) {
        self.pod += 1;
    }

    /// Starts a new incarnation, in the replica's current pod.
    pub fn start(&mut self) -> Result<(), SoakError> {
        let number = self.incarnations.len() + 1;
        let identity = format!("soak-{}-{number}", self.name);
        let pod_name = format!("soak-{}-pod{}", self.name, self.pod);
        let log = self.dir.join(format!("{identity}.log"));
        let file = std::fs::File::create(&log).map_err(|e| SoakError::io(format!("creating {}", log.display()), e))?;
        let compiled = self.dir.join(format!("compiled-{}", self.name));
        let child = Command::new(&self.binary)
            .args(["run", "--leader-elect=true", "--leader-election-namespace", "default"])
            .args(["--leader-election-id", LEASE_NAME, "--log-format", "json"])
            .args(["--metrics-bind-address", &self.metrics, "--metrics-secure=false"])
            .args(["--health-probe-bind-address", &self.health])
            .arg("--module")
            .arg(&self.module)
            .arg("--compile-cache-dir")
            .arg(&compiled)
            .args(&self.extra)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("POD_NAME", &pod_name)
            .env_remove("WATCH_NAMESPACE")
            .env_remove("WASM_OPERATOR_MODULES")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(|e| SoakError::io(format!("starting {}", self.binary.display()), e))?;
        self.child = Some(child);
        self.incarnations.push(Incarnation {
            identity,
            pod_name,
            started: Instant::now(),
            ended: None,
            log,
            rss: Vec::new(),
            detail: Vec::new(),
            peak_rss_kib: 0,
            last_scrape: String::new(),
        });
        Ok(())
    }

    pub fn identity(&self) -> Option<&str> {
        self.incarnations.last().filter(|i| i.ended.is_none()).map(|i| i.identity.as_str())
    }

    /// /metrics answers (the standby serves it too).
    pub async fn wait_ready(&mut self) -> Result<(), SoakError> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            self.check_alive()?;
            if let Ok((200, _)) = http_get(&self.metrics, "/metrics").await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(SoakError::Timeout { what: format!("replica {}'s /metrics", self.name), seconds: 120 });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn check_alive(&mut self) -> Result<(), SoakError> {
        let Some(child) = self.child.as_mut() else { return Ok(()) };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.child = None;
                self.exit_noticed = true;
                if let Some(incarnation) = self.incarnations.last_mut() {
                    incarnation.ended = Some(Instant::now());
                }
                Err(SoakError::ReplicaExited { replica: self.name, status: status.to_string() })
            }
            Err(e) => Err(SoakError::io("checking a replica", e)),
        }
    }

    /// Whether it exited by itself since the last call (then it runs no
    /// more until started again).
    pub fn take_exit(&mut self) -> bool {
        let _ = self.check_alive();
        std::mem::take(&mut self.exit_noticed)
    }

    /// Scrapes /metrics and samples VmRSS; returns whether it leads.
    pub async fn sample(&mut self) -> Result<bool, SoakError> {
        self.check_alive()?;
        let Some(pid) = self.child.as_ref().map(Child::id) else { return Ok(false) };
        let scraped = http_get(&self.metrics, "/metrics").await;
        let rss = rss_kib(pid);
        let Some(incarnation) = self.incarnations.last_mut() else { return Ok(false) };
        let mut leads = false;
        let mut heap = None;
        if let Ok((200, text)) = scraped {
            leads = gauge(&text, "wasm_operator_leader") == Some(1.0);
            let state = |state: &str| gauge(&text, &format!("wasm_operator_heap_bytes{{state=\"{state}\"}}"));
            heap = state("in_use").zip(state("free")).map(|(used, free)| (used as u64 >> 10, free as u64 >> 10));
            incarnation.last_scrape = text;
        }
        if let Some((rss, peak, file)) = rss {
            incarnation.rss.push((Instant::now(), rss, leads));
            incarnation.detail.push(MemoryDetail { file, heap });
            incarnation.peak_rss_kib = incarnation.peak_rss_kib.max(peak);
        }
        Ok(leads)
    }

    /// Scrapes once more, then SIGKILL (no goodbye: the Lease is not
    /// released).
    pub async fn kill(&mut self) -> Result<(), SoakError> {
        let _ = self.sample().await;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(incarnation) = self.incarnations.last_mut() {
            incarnation.ended = Some(Instant::now());
        }
        Ok(())
    }

    /// SIGTERM and wait (the end of the soak), SIGKILL after 20 s.
    pub async fn stop(&mut self) {
        let _ = self.sample().await;
        let Some(mut child) = self.child.take() else { return };
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: signalling our own child, which we have not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        if let Some(incarnation) = self.incarnations.last_mut() {
            incarnation.ended = Some(Instant::now());
        }
    }

    /// A counter summed over every incarnation's last scrape.
    pub fn counter(&self, name: &str, labels: &str) -> u64 {
        self.incarnations.iter().map(|i| memcached_e2e::operators::metric_sum(&i.last_scrape, name, labels)).sum()
    }

    /// Every series of `name` summed over incarnations, by its labels.
    pub fn series(&self, name: &str) -> BTreeMap<String, u64> {
        let mut all = BTreeMap::new();
        for incarnation in &self.incarnations {
            for (labels, value) in series(&incarnation.last_scrape, name) {
                *all.entry(labels).or_default() += value;
            }
        }
        all
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// VmRSS, VmHWM and RssFile of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64, Option<u64>)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((kib("VmRSS:")?, kib("VmHWM:")?, kib("RssFile:")))
}

/// The value of a gauge without labels (or its first series).
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        (rest.is_empty() || rest.starts_with('{')).then_some(())?;
        value.parse().ok()
    })
}

/// Every series of `name`: its label text (`{...}` without the module
/// label) and its value.
pub fn series(text: &str, name: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            let labels = rest.strip_prefix('{')?.strip_suffix('}')?;
            let labels: Vec<&str> = labels.split(',').filter(|l| !l.starts_with("module=")).collect();
            Some((labels.join(","), value.parse::<f64>().ok()? as u64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_drop_the_module_label() {
        let text = "# HELP x\nwasm_operator_reconciles_total{module=\"memcached\",result=\"success\"} 7\n\
                    wasm_operator_reconciles_total{module=\"memcached\",result=\"error\"} 2\nwasm_operator_leader 1\n";
        assert_eq!(
            series(text, "wasm_operator_reconciles_total"),
            vec![("result=\"success\"".to_owned(), 7), ("result=\"error\"".to_owned(), 2)]
        );
        assert_eq!(gauge(text, "wasm_operator_leader"), Some(1.0));
    }
}
