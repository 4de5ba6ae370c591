//! The arguments the commands of both binaries share: which modules to
//! load, how `run` (and `dev`) runs the operator, how modules compile, the
//! registry, the log format; and what a binary built on this host is.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args, ValueEnum};

use crate::duration::parse_duration;
use crate::runtime::compiler::{self, CompileOptions};
use crate::runtime::oci::{Registry, RegistryOptions};

/// What a binary built on this host is: its name (the default Lease name)
/// and the module it runs when no `--module` is given.
#[derive(Clone, Copy)]
pub struct Flavor {
    pub binary: &'static str,
    pub builtin: Option<BuiltIn>,
}

#[derive(Clone, Copy)]
pub struct BuiltIn {
    pub name: &'static str,
    pub bytes: &'static [u8],
}

/// Which logic modules to load.
#[derive(Args, Clone, Debug, Default)]
pub struct ModuleArgs {
    /// A logic module (a component exporting wasm-operator:controller);
    /// repeat it to run several in one process. Replaces the built-in one.
    #[arg(long = "module", global = true, env = "WASM_OPERATOR_MODULES", value_delimiter = ',', value_name = "PATH")]
    pub modules: Vec<PathBuf>,
    /// Accept modules precompiled by `precompile` (native code: only ones you built).
    #[arg(long, global = true, env = "WASM_OPERATOR_ALLOW_PRECOMPILED")]
    pub allow_precompiled: bool,
}

/// `ModuleArgs` for a command that loads no module (`new`, `componentize`,
/// `push`). The global flags would otherwise be listed in its help; an
/// argument of the same id (and type: clap hands a global's value down to
/// it) here keeps clap from adding them, and refuses them if given.
#[derive(Args, Clone, Debug, Default)]
pub struct NoModules {
    #[arg(long = "module", hide = true, value_parser = refuse_module)]
    modules: Vec<PathBuf>,
    #[arg(long, hide = true, value_parser = refuse_allow_precompiled)]
    allow_precompiled: bool,
}

const LOADS_NO_MODULE: &str = "this command loads no module";

fn refuse_module(_: &str) -> Result<PathBuf, String> {
    Err(LOADS_NO_MODULE.to_owned())
}

/// The flag's absence ("false", its default) passes.
fn refuse_allow_precompiled(value: &str) -> Result<bool, String> {
    if value == "false" { Ok(false) } else { Err(LOADS_NO_MODULE.to_owned()) }
}

#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Watch only this namespace (default: every namespace).
    #[arg(long, env = "WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Where Prometheus scrapes /metrics.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub metrics_bind_address: SocketAddr,
    /// Serve /metrics over HTTPS, only to requests whose bearer token the API
    /// server accepts (TokenReview) and allows `get` on the path
    /// (SubjectAccessReview); false: plain HTTP, open to anyone. A bare
    /// `--metrics-secure` means true, as the Go operator's flag.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub metrics_secure: bool,
    /// A directory holding tls.crt and tls.key for /metrics, read again when
    /// they change (default: a self-signed certificate made at start).
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_dir: Option<PathBuf>,
    /// Where kubelet probes /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub health_probe_bind_address: SocketAddr,
    /// Hold a coordination.k8s.io Lease so only one replica reconciles.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub leader_elect: bool,
    /// The Lease's namespace (default: POD_NAMESPACE, else the client's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// The Lease's name (default: the binary's name).
    #[arg(long)]
    pub leader_election_id: Option<String>,
    /// Parents reconciled at once, per module. A reconcile mostly waits on
    /// the API server (the module's calls take microseconds), so a change
    /// that wakes many parents at once (a Secret they share) is done in
    /// round trips of this many. 64: a Secret rotation rolling ~190
    /// parents behind 400 ms of latency each way takes a p99 of 3.6 s at
    /// 64, 8.3 s at 32, 18.8 s at 16 (`make soak-rotations`).
    #[arg(long, default_value_t = 64)]
    pub concurrency: u16,
    /// Calls into one module running at once, each on a thread of its own
    /// off the async workers (default: the CPUs this process may use). A
    /// reconcile waiting on the API server holds none; a slow module delays
    /// only its own reconciles.
    #[arg(long, default_value_t = crate::runtime::call_pool::default_size())]
    pub module_call_concurrency: usize,
    /// Reconciles in a row a parent is woken by its own writes landing in
    /// the caches (the next step of a module that decides in steps); after
    /// them it waits for a change or the resync. 0: its own writes wake
    /// nothing. Default: 10, or 0 when only the built-in module runs (it
    /// settles in one step).
    #[arg(long)]
    pub max_reconcile_steps: Option<u32>,
    /// How often every parent is reconciled even when nothing changed (e.g. 10m, 30s).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub resync_period: Duration,
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Watch each --module file and swap in a new version when it is replaced.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub watch_modules: bool,
    /// How often watched module files are looked at.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub module_poll_interval: Duration,
    /// Parents the active version reconciles that a new version may fail in its dry run and still be swapped in.
    #[arg(long, default_value_t = 0)]
    pub swap_dry_run_failures_allowed: usize,
    /// Parents a new version may fail on within the watch window before it is rolled back.
    #[arg(long, default_value_t = 0)]
    pub swap_rollback_failures_allowed: usize,
    /// How long after a swap failures roll it back.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub swap_watch_window: Duration,
    /// Parents reconciled per second after a swap.
    #[arg(long, default_value_t = 50)]
    pub swap_rollout_per_second: u32,
    /// How long a new version's added kinds may take to list (their watches
    /// start before its dry run); it is refused (WatchFailed) if they cannot
    /// be listed by then, e.g. while the operator's role does not grant them.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub swap_cache_sync_timeout: Duration,
    /// Follow each module's LogicModule resource (deploy/logic-modules/): new
    /// versions are pulled from the OCI registry it names, verified and swapped in.
    #[arg(long, env = "WASM_OPERATOR_LOGIC_MODULES", default_value_t = false, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub logic_modules: bool,
    /// How often a failed pull is retried, and a tag a LogicModule allows resolved again.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub registry_poll_interval: Duration,
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Memory kept per module for recorded reconciles (their inputs and
    /// answers, Secret values redacted; the oldest go first), exported on the
    /// metrics address's /records for `wasm-operator record` (e.g. 4Mi, 512Ki;
    /// 0 records nothing).
    #[arg(long, env = "WASM_OPERATOR_RECORD_BUDGET", default_value = "4Mi", value_parser = parse_bytes)]
    pub record_budget: u64,
    /// Who each module's writes are made as. service-account: the
    /// ServiceAccount named after the module (its manifest's name) in
    /// --module-identity-namespace, impersonated, so a module may write only
    /// what its own Role grants; a module whose Role lacks what its manifest
    /// claims is refused at load and at swap. operator: the operator's own
    /// identity, for clusters that forbid impersonation (every module may then
    /// do all the operator's role allows). Default: service-account for `run`,
    /// operator for `dev`.
    #[arg(long, value_enum, env = "WASM_OPERATOR_MODULE_IDENTITY")]
    pub module_identity: Option<ModuleIdentityArg>,
    /// Where the modules' ServiceAccounts are (default: POD_NAMESPACE, else
    /// the client's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub module_identity_namespace: Option<String>,
    /// Put before a module's name to name its ServiceAccount (`team-b-` makes
    /// module `web` act as `team-b-web`), so that two operators running a
    /// module of the same name keep their accounts apart in one namespace.
    #[arg(long, env = "WASM_OPERATOR_MODULE_IDENTITY_PREFIX", default_value = "", value_name = "PREFIX")]
    pub module_identity_prefix: String,
}

/// `--module-identity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModuleIdentityArg {
    ServiceAccount,
    Operator,
}

/// How `run` compiles a module that is not precompiled: at start, and every
/// new version from a file or a LogicModule. Always in a child process of
/// this binary, so a compile that runs out of memory or time costs that
/// version, never the operator.
#[derive(Args, Clone, Debug)]
pub struct CompileArgs {
    /// Most memory one compile may use (e.g. 256Mi, 1Gi; 0 for no bound but
    /// the pod's). The pod's limit must hold this beside the operator.
    #[arg(long, env = "WASM_OPERATOR_COMPILE_MEMORY_LIMIT", default_value = compiler::DEFAULT_MEMORY_LIMIT, value_parser = parse_bytes)]
    pub compile_memory_limit: u64,
    /// Threads one compile uses: more is faster and takes more memory.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub compile_threads: u16,
    /// How long one compile may take.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub compile_timeout: Duration,
    /// Where compiled versions are kept, by digest (default: wasm-operator/compiled
    /// in the temporary directory, TMPDIR or /tmp).
    #[arg(long, env = "WASM_OPERATOR_COMPILE_CACHE_DIR", value_name = "DIR")]
    pub compile_cache_dir: Option<PathBuf>,
    /// optimized: a version goes live once its optimized code (Cranelift) is
    /// compiled; tiered: a version nothing compiled goes live on baseline
    /// code (Winch, ~7-15x quicker to compile, slower to run), replaced in
    /// place by its optimized code compiled in the background (a version
    /// whose optimizing compile then fails goes on serving on baseline code).
    #[arg(long, value_enum, env = "WASM_OPERATOR_COMPILE_STRATEGY", default_value_t = CompileStrategy::Optimized)]
    pub compile_strategy: CompileStrategy,
}

/// How a version nothing has compiled gets its code (`--compile-strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompileStrategy {
    Tiered,
    Optimized,
}

impl CompileArgs {
    /// Out-of-process compiles by this very binary.
    pub fn options(&self) -> Result<CompileOptions> {
        Ok(CompileOptions {
            program: std::env::current_exe().context("finding this binary, which compiles modules")?,
            cache_dir: self
                .compile_cache_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("wasm-operator").join("compiled")),
            memory_limit: (self.compile_memory_limit > 0).then_some(self.compile_memory_limit),
            timeout: self.compile_timeout,
            threads: usize::from(self.compile_threads),
            keep: compiler::KEEP_COMPILED,
        })
    }
}

/// `512Mi`, `1Gi`, `300M` or plain bytes, as Kubernetes writes quantities.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{text:?} is not a size such as 320Mi"))?;
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use Ki, Mi, Gi, k, M or G)")),
    };
    number.checked_mul(factor).ok_or_else(|| format!("{text:?} is too large"))
}

/// How OCI registries are reached.
#[derive(Args, Clone, Debug, Default)]
pub struct RegistryArgs {
    /// A registry (host:port) spoken to over plain HTTP, not HTTPS; repeatable.
    #[arg(
        long = "insecure-registry",
        env = "WASM_OPERATOR_INSECURE_REGISTRIES",
        value_delimiter = ',',
        value_name = "HOST:PORT"
    )]
    pub insecure_registries: Vec<String>,
    /// Registry credentials as a Docker config.json (`auths`), e.g. a mounted
    /// kubernetes.io/dockerconfigjson Secret; anonymous without it.
    #[arg(long, env = "WASM_OPERATOR_REGISTRY_CREDENTIALS", value_name = "FILE")]
    pub registry_credentials: Option<PathBuf>,
}

impl RegistryArgs {
    pub fn registry(&self) -> Result<Registry> {
        let credentials = match &self.registry_credentials {
            Some(path) => docker_credentials(path)?,
            None => Default::default(),
        };
        Ok(Registry::new(RegistryOptions { insecure: self.insecure_registries.clone(), credentials }))
    }
}

/// User and password per registry host from a Docker config.json: each
/// `auths` entry's `auth` (base64 of user:password) or `username`/`password`.
fn docker_credentials(path: &std::path::Path) -> Result<std::collections::BTreeMap<String, (String, String)>> {
    use base64::Engine;
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(default)]
        auths: std::collections::BTreeMap<String, Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
    }
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let config: Config =
        serde_json::from_slice(&text).with_context(|| format!("{} is not a Docker config.json", path.display()))?;
    let mut credentials = std::collections::BTreeMap::new();
    for (host, entry) in config.auths {
        let pair = match (entry.auth, entry.username, entry.password) {
            (Some(auth), _, _) => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .with_context(|| format!("{}: auths.{host}.auth is not base64 of user:password", path.display()))?;
                let (user, password) = decoded.split_once(':').with_context(|| {
                    format!("{}: auths.{host}.auth has no ':' between user and password", path.display())
                })?;
                (user.to_owned(), password.to_owned())
            }
            (None, Some(user), Some(password)) => (user, password),
            _ => bail!("{}: auths.{host} has neither auth nor username and password", path.display()),
        };
        // Docker writes some hosts as URLs.
        let host = host.trim_start_matches("https://").trim_start_matches("http://").trim_end_matches('/');
        credentials.insert(host.to_owned(), pair);
    }
    Ok(credentials)
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_read_as_kubernetes_writes_them() {
        assert_eq!(parse_bytes("320Mi"), Ok(320 << 20));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("500M"), Ok(500_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert!(parse_bytes("12Xi").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("Mi").unwrap_err().contains("not a size"));
        assert!(parse_bytes("99999999999Gi").unwrap_err().contains("too large"));
    }
}
