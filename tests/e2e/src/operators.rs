//! The two operators the bench compares, as child processes: ours
//! (`target/release/memcached-operator`) and the C5C3 Go operator v0.4.0
//! (controller-runtime, built by `scripts/go-operator.sh`, webhooks off).
//! Each brings its own command line and reconcile counter. `make bench-e2e`
//! and tests/migration.rs run them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::loopback::{free_port, http_get};

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("{0}")]
    Script(String),
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error("the operator exited ({status}); last log lines:\n{tail}")]
    Exited { status: String, tail: String },
    #[error("the operator's /metrics: {0}")]
    Metrics(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ProcessError {
    let context = context.into();
    move |source| ProcessError::Io { context, source }
}

/// Which operator a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Ours,
    Go,
}

impl Flavor {
    pub fn label(self) -> &'static str {
        match self {
            Flavor::Ours => "ours",
            Flavor::Go => "Go v0.4.0",
        }
    }
}

/// The Go operator and its CRD folder from `scripts/go-operator.sh`
/// (cached after the first build; GO_OPERATOR_BINARY skips the build).
pub fn go_operator(root: &Path) -> Result<(PathBuf, PathBuf), ProcessError> {
    let script = root.join("scripts/go-operator.sh");
    let run = |args: &[&str]| -> Result<PathBuf, ProcessError> {
        let output = Command::new("bash")
            .arg(&script)
            .args(args)
            .stderr(Stdio::inherit())
            .output()
            .map_err(io(format!("running {}", script.display())))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        match stdout.lines().last() {
            Some(path) if output.status.success() => Ok(PathBuf::from(path.trim())),
            _ => {
                Err(ProcessError::Script(format!("{} {} failed ({})", script.display(), args.join(" "), output.status)))
            }
        }
    };
    Ok((run(&[])?, run(&["--crds"])?))
}

/// An operator as a child process; stopped (SIGTERM, then SIGKILL) on drop.
pub struct OperatorProcess {
    flavor: Flavor,
    child: Child,
    log: PathBuf,
    metrics: String,
    health: String,
    stopped: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
    pub cpu_seconds: f64,
}

/// Peak and current RSS, and CPU seconds (user + system) so far, of any
/// process: an operator, or the API server and etcd beside it.
pub fn usage_of(pid: u32) -> std::io::Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command (which may hold spaces) start at field 3.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the command.
    let hz = clock_ticks_per_second();
    Ok(Usage { peak_rss_kib: kib("VmHWM:"), rss_kib: kib("VmRSS:"), cpu_seconds: (ticks(11) + ticks(12)) as f64 / hz })
}

/// The unit of /proc's CPU times.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// What the bench reads from an operator's /metrics.
pub struct Scrape {
    /// Our operator only (`wasm_operator_api_requests_total`): the Go
    /// operator's requests come from the audit log alone.
    pub requests: Option<Requests>,
    pub reconciles: u64,
}

#[derive(Default, Clone, Copy)]
pub struct Requests {
    pub reads: u64,
    pub writes: u64,
    pub watches: u64,
}

impl OperatorProcess {
    /// Starts `binary` as `flavor` with its endpoints on free loopback ports,
    /// leader election off, `extra` flags last (ours: `--concurrency`,
    /// `--namespace`...; the Go operator: `--watch-namespaces=`...), logging
    /// to `log`.
    pub fn spawn(
        flavor: Flavor,
        binary: &Path,
        extra: &[String],
        kubeconfig: &Path,
        log: &Path,
    ) -> Result<Self, ProcessError> {
        let metrics = format!("127.0.0.1:{}", free_port().map_err(io("finding a free port"))?);
        let health = format!("127.0.0.1:{}", free_port().map_err(io("finding a free port"))?);
        let file = std::fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
        let mut command = Command::new(binary);
        match flavor {
            Flavor::Ours => {
                command
                    .args(["run", "--leader-elect=false", "--log-format", "json"])
                    // Plain-HTTP metrics on loopback, as the Go operator's below.
                    .args(["--metrics-bind-address", &metrics, "--metrics-secure=false"])
                    .args(["--health-probe-bind-address", &health])
                    .env_remove("WATCH_NAMESPACE");
            }
            Flavor::Go => {
                // Webhooks off (no cert-manager here); plain-HTTP metrics on
                // loopback; production logging (JSON, info), as ours logs.
                command.args([
                    "--enable-webhooks=false",
                    "--leader-elect=false",
                    "--metrics-secure=false",
                    &format!("--metrics-bind-address={metrics}"),
                    &format!("--health-probe-bind-address={health}"),
                    "--zap-devel=false",
                ]);
            }
        }
        let child = command
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(io(format!("starting {}", binary.display())))?;
        Ok(Self { flavor, child, log: log.to_owned(), metrics, health, stopped: false })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn check_alive(&mut self) -> Result<(), ProcessError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.stopped = true;
                Err(ProcessError::Exited { status: status.to_string(), tail: log_tail(&self.log) })
            }
            Err(error) => Err(io("checking the operator process")(error)),
        }
    }

    /// /readyz answers 200 and /metrics answers.
    pub async fn wait_ready(&mut self) -> Result<(), ProcessError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_alive()?;
            if let Ok((200, _)) = http_get(&self.health, "/readyz").await
                && let Ok((200, _)) = http_get(&self.metrics, "/metrics").await
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ProcessError::Timeout { what: "the operator's /readyz and /metrics".into(), seconds: 60 });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn scrape(&mut self) -> Result<Scrape, ProcessError> {
        self.check_alive()?;
        let (status, body) =
            http_get(&self.metrics, "/metrics").await.map_err(|e| ProcessError::Metrics(e.to_string()))?;
        if status != 200 {
            return Err(ProcessError::Metrics(format!("HTTP {status}")));
        }
        Ok(match self.flavor {
            Flavor::Ours => {
                let requests =
                    |verb: &str| metric_sum(&body, "wasm_operator_api_requests_total", &format!("verb=\"{verb}\""));
                Scrape {
                    requests: Some(Requests {
                        reads: requests("read"),
                        writes: ["create", "update", "patch", "delete"].iter().map(|v| requests(v)).sum(),
                        watches: requests("watch"),
                    }),
                    reconciles: metric_sum(&body, "wasm_operator_reconciles_total", ""),
                }
            }
            Flavor::Go => Scrape {
                requests: None,
                reconciles: metric_sum(&body, "controller_runtime_reconcile_total", "controller=\"memcached\""),
            },
        })
    }

    /// Peak and current RSS, and CPU seconds (user + system) so far.
    pub fn usage(&self) -> Result<Usage, ProcessError> {
        usage_of(self.pid()).map_err(io("reading the operator's /proc status"))
    }

    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: signalling our own child, which we have not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The sum of every sample of `name` whose labels contain `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &str) -> u64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            (rest.is_empty() || rest.starts_with('{')).then_some(())?;
            rest.contains(labels).then_some(())?;
            value.parse::<f64>().ok()
        })
        .sum::<f64>() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sum_adds_matching_series_only() {
        let text = "# HELP x\nwasm_operator_api_requests_total{verb=\"read\"} 7\n\
                    wasm_operator_api_requests_total{verb=\"create\"} 3\n\
                    wasm_operator_api_requests_total_other{verb=\"read\"} 100\n\
                    wasm_operator_reconciles_total{result=\"success\"} 5\n\
                    wasm_operator_reconciles_total{result=\"error\"} 2\n\
                    controller_runtime_reconcile_total{controller=\"memcached\",result=\"success\"} 9\n\
                    controller_runtime_reconcile_total{controller=\"other\",result=\"success\"} 4\n";
        assert_eq!(metric_sum(text, "wasm_operator_api_requests_total", "verb=\"read\""), 7);
        assert_eq!(metric_sum(text, "wasm_operator_reconciles_total", ""), 7);
        assert_eq!(metric_sum(text, "controller_runtime_reconcile_total", "controller=\"memcached\""), 9);
    }
}
