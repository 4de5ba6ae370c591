//! The command line both binaries share: `wasm-operator` (modules given
//! with `--module`) and binaries that carry a built-in module (such as
//! `memcached-operator`), which add their own commands.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args, Subcommand, ValueEnum};

use crate::modules::compiler::{self, CompileOptions};
use crate::modules::oci::{Registry, RegistryOptions};
use crate::modules::{LogicModule, ModuleEngine, ModuleSlot, ModuleSource};
use crate::operator::api_requests::CountRequestsLayer;
use crate::operator::hot_swap::SwapPolicy;
use crate::operator::http::SecureMetrics;
use crate::operator::identity::ModuleIdentity;
use crate::operator::leader::LeaderElectionOptions;
use crate::operator::logic_modules::LogicModuleOptions;
use crate::operator::metrics::Metrics;
use crate::operator::metrics_auth::ReviewCache;
use crate::operator::{self, Options};

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

/// The commands every binary built on this host has.
#[derive(Subcommand)]
pub enum HostCommand {
    /// Run every module against the cluster kubectl would use (in-cluster
    /// config, else KUBECONFIG or ~/.kube/config).
    Run(Box<RunArgs>),
    /// Print each module's CustomResourceDefinition, as the module ships it.
    Crd,
    /// Print what each module says of itself (kinds, names) and its digest.
    Manifest,
    /// Print the RBAC each module's own identity needs under `run`'s
    /// --module-identity=service-account: its ServiceAccount, a ClusterRole
    /// with exactly what its manifest claims (what `run` checks at load and
    /// at swap), the binding, and the Role letting the operator impersonate it.
    Rbac {
        /// The namespace of the modules' ServiceAccounts and of the
        /// operator's own (`run`'s --module-identity-namespace).
        #[arg(long)]
        namespace: String,
        /// The operator's ServiceAccount, which may impersonate the modules'
        /// (default: the binary's name).
        #[arg(long, value_name = "NAME")]
        operator_service_account: Option<String>,
        /// Before each module's name in its ServiceAccount's (`run`'s
        /// --module-identity-prefix).
        #[arg(long, default_value = "", value_name = "PREFIX")]
        module_identity_prefix: String,
    },
    /// Compile a module ahead of time for this binary and CPU; load the
    /// result with `--module FILE --allow-precompiled` to start without compiling.
    Precompile {
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Compile one component into native code under a memory bound: what
    /// `run` starts in a child process for every new module version, so a
    /// compile never takes the operator's own memory.
    #[command(hide = true)]
    CompileModule {
        #[arg(long, value_name = "FILE")]
        input: PathBuf,
        #[arg(long, value_name = "FILE")]
        output: PathBuf,
        /// Bytes of data segment the compile may use (RLIMIT_DATA).
        #[arg(long, value_name = "BYTES")]
        memory_limit: Option<u64>,
        /// Compile threads (RAYON_NUM_THREADS sizes the pool beyond one).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Which code: baseline (Winch) or optimized (Cranelift).
        #[arg(long, default_value = "optimized")]
        tier: crate::modules::compiler::Tier,
        /// A version already serves on baseline code: leave it the CPU.
        #[arg(long)]
        background: bool,
    },
    /// Publish a logic module to an OCI registry (CNCF wasm layout) and print
    /// its reference pinned by digest, for a LogicModule's spec.image.
    Push {
        /// The component (checked to be a logic module first).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Where to push: host[:port]/repository[:tag].
        #[arg(value_name = "REF")]
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        no_modules: NoModules,
    },
}

impl HostCommand {
    pub fn execute(self, flavor: &Flavor, modules: &ModuleArgs) -> Result<ExitCode> {
        match self {
            HostCommand::Run(args) => run_command(flavor, modules, *args),
            HostCommand::Crd => crd_command(flavor, modules),
            HostCommand::Manifest => manifest_command(flavor, modules),
            HostCommand::Rbac { namespace, operator_service_account, module_identity_prefix } => {
                let operator = operator_service_account.as_deref().unwrap_or(flavor.binary);
                rbac_command(flavor, modules, &namespace, operator, &module_identity_prefix)
            }
            HostCommand::Precompile { output } => precompile_command(flavor, modules, &output),
            HostCommand::Push { file, reference, registry, .. } => push_command(&file, &reference, &registry),
            HostCommand::CompileModule { input, output, memory_limit, threads, tier, background } => {
                crate::modules::compiler::quiet_panics();
                if background {
                    crate::modules::compiler::yield_cpu();
                }
                let engine = ModuleEngine::compile_only(threads, tier)
                    .map_err(|e| anyhow::anyhow!("setting up wasmtime: {e:#}"))?;
                crate::modules::compiler::compile_in_this_process(&engine, &input, &output, memory_limit)?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
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

pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration: jiff::SignedDuration = text.parse().map_err(|e| format!("{text:?} is not a duration: {e}"))?;
    Duration::try_from(duration).map_err(|e| format!("{text:?}: {e}"))
}

/// Prints an error the way both binaries do, and maps it to the exit code.
pub fn exit(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The modules `args` name, or the flavor's built-in one, all on `engine`.
pub fn load_modules(engine: &ModuleEngine, flavor: &Flavor, args: &ModuleArgs) -> Result<Vec<LogicModule>> {
    if args.modules.is_empty() {
        let Some(builtin) = flavor.builtin else {
            bail!("no logic module: give one or more with --module PATH");
        };
        let module = LogicModule::from_bytes(engine, ModuleSource::BuiltIn(builtin.name), builtin.bytes, false)?;
        return Ok(vec![module]);
    }
    args.modules
        .iter()
        .map(|path| LogicModule::from_file(engine, path, args.allow_precompiled).map_err(anyhow::Error::from))
        .collect()
}

/// The one module a command that takes one works on.
pub fn load_one(engine: &ModuleEngine, flavor: &Flavor, args: &ModuleArgs) -> Result<LogicModule> {
    if args.modules.len() > 1 {
        bail!("this command takes one --module, not {}", args.modules.len());
    }
    let mut modules = load_modules(engine, flavor, args)?;
    modules.pop().context("no logic module")
}

pub fn engine() -> Result<ModuleEngine> {
    ModuleEngine::new().map_err(|e| anyhow::anyhow!("setting up wasmtime: {e:#}"))
}

/// `crd`: each module's CustomResourceDefinition, as the module ships it.
pub fn crd_command(flavor: &Flavor, args: &ModuleArgs) -> Result<ExitCode> {
    let engine = engine()?;
    let modules = load_modules(&engine, flavor, args)?;
    let mut documents = Vec::new();
    for module in &modules {
        let crd = module.manifest().crd.trim_end();
        if crd.is_empty() {
            bail!("{} ships no CRD in its manifest", module.source());
        }
        documents.push(crd.trim_start_matches("---\n").to_owned());
    }
    print_out(&format!("{}\n", documents.join("\n---\n")))
}

/// `rbac`: the objects each module's own identity needs, as YAML.
pub fn rbac_command(
    flavor: &Flavor,
    args: &ModuleArgs,
    namespace: &str,
    operator: &str,
    account_prefix: &str,
) -> Result<ExitCode> {
    let engine = engine()?;
    let modules = load_modules(&engine, flavor, args)?;
    let manifests: Vec<&crate::modules::Manifest> = modules.iter().map(|m| m.manifest()).collect();
    let objects = crate::authoring::rbac::rbac_objects(&manifests, namespace, operator, account_prefix)?;
    print_out(&crate::authoring::documents::to_yaml(&objects))
}

/// `manifest`: what each module says of itself, and its digest, as JSON.
pub fn manifest_command(flavor: &Flavor, args: &ModuleArgs) -> Result<ExitCode> {
    let engine = engine()?;
    let modules = load_modules(&engine, flavor, args)?;
    let kind = |k: &crate::modules::KindInfo| serde_json::json!({"group": k.group, "version": k.version, "kind": k.kind, "plural": k.plural, "namespaced": k.namespaced});
    let described: Vec<serde_json::Value> = modules
        .iter()
        .map(|module| {
            let m = module.manifest();
            serde_json::json!({
                "source": module.source().to_string(),
                "digest": module.digest(),
                "contract": module.contract(),
                "name": m.name,
                "version": m.version,
                "parent": kind(&m.parent),
                "owned": m.owned.iter().map(kind).collect::<Vec<_>>(),
                "reads": m.reads.iter().map(kind).collect::<Vec<_>>(),
                "fieldManager": m.field_manager,
                "eventReporter": m.event_reporter,
            })
        })
        .collect();
    print_out(&format!("{}\n", serde_json::to_string_pretty(&described).context("printing the manifests")?))
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
pub fn print_out(text: &str) -> Result<ExitCode> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error).context("writing to stdout"),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// `precompile`: the module compiled ahead of time for this binary and CPU.
pub fn precompile_command(flavor: &Flavor, args: &ModuleArgs, output: &std::path::Path) -> Result<ExitCode> {
    let engine = engine()?;
    let (source, bytes) = match args.modules.as_slice() {
        [] => {
            let builtin = flavor.builtin.context("no logic module: give one with --module PATH")?;
            (ModuleSource::BuiltIn(builtin.name), builtin.bytes.to_vec())
        }
        [path] => (
            ModuleSource::File(path.clone()),
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        more => bail!("precompile takes one --module, not {}", more.len()),
    };
    // Refuses what would not load: wrong contract, bad manifest.
    LogicModule::from_bytes(&engine, source.clone(), &bytes, false)?;
    let compiled = LogicModule::precompile(&engine, &source, &bytes)?;
    std::fs::write(output, compiled).with_context(|| format!("writing {}", output.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// `push`: the module at `reference`, its pinned reference printed.
pub fn push_command(file: &std::path::Path, reference: &str, registry: &RegistryArgs) -> Result<ExitCode> {
    let engine = engine()?;
    let module = LogicModule::from_file(&engine, file, false)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let registry = registry.registry()?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    let pinned = runtime.block_on(registry.push(bytes, reference))?;
    eprintln!("pushed {} {} ({})", module.name(), module.manifest().version, module.digest());
    print_out(&format!("{pinned}\n"))
}

/// `run`: every module, one controller each, until SIGTERM or Ctrl-C.
pub fn run_command(flavor: &Flavor, module_args: &ModuleArgs, args: RunArgs) -> Result<ExitCode> {
    crate::allocator::tune_for_a_long_running_process();
    init_logging(args.log_format);
    let engine = run_engine(&args)?;
    let modules = load_modules(&engine, flavor, module_args)?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    let flavor = *flavor;
    let allow_precompiled = module_args.allow_precompiled;
    // On a worker thread, not this one: the controllers' loops then hand
    // work to the reconciles (and back) within the worker pool, instead of
    // waking this thread, parked in `block_on`, for every step.
    runtime.block_on(async move {
        let operator = tokio::spawn(async move {
            run_operator(
                &flavor,
                modules,
                args,
                allow_precompiled,
                ModuleIdentityArg::ServiceAccount,
                shutdown_signal(),
            )
            .await
        });
        operator.await.context("the operator's task ended abnormally")?
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The engine `run` loads modules on: every compile in a child process.
pub fn run_engine(args: &RunArgs) -> Result<ModuleEngine> {
    let options = args.compile.options()?;
    match args.compile.compile_strategy {
        CompileStrategy::Tiered => ModuleEngine::compiling_in_tiers(options),
        CompileStrategy::Optimized => ModuleEngine::compiling_out_of_process(options),
    }
    .map_err(|e| anyhow::anyhow!("setting up wasmtime: {e:#}"))
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: not in a log file or a collector's pipe.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).init(),
        LogFormat::Text => builder.init(),
    }
}

/// `run`'s operator on `modules` until `shutdown` (`wasm-operator dev` runs
/// it too, with its own shutdown).
pub async fn run_operator(
    flavor: &Flavor,
    modules: Vec<LogicModule>,
    args: RunArgs,
    allow_precompiled: bool,
    default_identity: ModuleIdentityArg,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    if !args.metrics_secure && args.metrics_cert_dir.is_some() {
        bail!("--metrics-cert-dir needs --metrics-secure=true (plain HTTP uses no certificate)");
    }
    let metrics = Arc::new(Metrics::default());
    let config =
        kube::Config::infer().await.context("finding the cluster (in-cluster, KUBECONFIG or ~/.kube/config)")?;
    let client = kube::client::ClientBuilder::try_from(config)
        .context("building the API client")?
        .with_layer(&CountRequestsLayer::new(metrics.clone()))
        .build();
    let leader_election = args.leader_elect.then(|| {
        let namespace = args.leader_election_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
        let lease = args.leader_election_id.clone().unwrap_or_else(|| flavor.binary.to_owned());
        LeaderElectionOptions::new(namespace, lease, identity())
    });
    let options = Options {
        namespace: args.namespace,
        metrics_address: args.metrics_bind_address,
        metrics_secure: args
            .metrics_secure
            .then(|| SecureMetrics { cert_dir: args.metrics_cert_dir.clone(), review_cache: ReviewCache::default() }),
        health_address: args.health_probe_bind_address,
        leader_election,
        concurrency: args.concurrency,
        resync_period: args.resync_period,
        swap_policy: SwapPolicy {
            dry_run_failures_allowed: args.swap_dry_run_failures_allowed,
            rollback_failures_allowed: args.swap_rollback_failures_allowed,
            watch_window: args.swap_watch_window,
            rollout_per_second: args.swap_rollout_per_second,
            poll_interval: args.module_poll_interval,
            cache_sync_timeout: args.swap_cache_sync_timeout,
        },
        logic_modules: if args.logic_modules {
            Some(LogicModuleOptions {
                registry: Arc::new(args.registry.registry()?),
                poll_interval: args.registry_poll_interval,
            })
        } else {
            None
        },
        record_budget: args.record_budget,
        module_identity: match args.module_identity.unwrap_or(default_identity) {
            ModuleIdentityArg::Operator => ModuleIdentity::Operator,
            ModuleIdentityArg::ServiceAccount => ModuleIdentity::ServiceAccounts {
                namespace: args
                    .module_identity_namespace
                    .clone()
                    .unwrap_or_else(|| client.default_namespace().to_owned()),
                prefix: args.module_identity_prefix.clone(),
            },
        },
    };
    let slots = modules
        .into_iter()
        .map(|module| match module.source() {
            ModuleSource::File(path) if args.watch_modules => {
                let path = path.clone();
                ModuleSlot::watching(module, path, allow_precompiled)
            }
            _ => ModuleSlot::new(module),
        })
        .collect();
    operator::run(client, slots, metrics, options, shutdown).await.context("the operator stopped")
}

/// This replica's name in the Lease: the pod's name in a cluster, else
/// host and process, so two local processes differ too.
fn identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME") {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}_{}", std::process::id())
}

/// SIGTERM (kubelet) or SIGINT (a terminal).
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
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
