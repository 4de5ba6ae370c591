//! `wasm-operator dev`: a module on a cluster while it is being written.
//! Against the cluster kubectl would use, it installs the module's CRD,
//! runs the host on the module file exactly as `run` does (the file is
//! watched: a rebuild that replaces it is verified and swapped in), applies
//! the samples and prints, as they change, the parents' status, the objects
//! they own, the events about them and the swaps.
//!
//! - `dev/cluster.rs`: the CRD and the samples, applied server-side.
//! - `dev/printer.rs`: what is printed, polled from the API server, and when
//!   `--once` stops.
//! - `dev/summary.rs`: an object in one line (or as YAML).
//! - `dev/swaps.rs`: the host's swap log lines, printed among the rest.

mod cluster;
mod printer;
mod summary;
mod swaps;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, ValueEnum};

use crate::cli;
use crate::cli::args::{Flavor, LogFormat, ModuleArgs, RunArgs};

/// The Lease name, should `--leader-elect=true` be asked for.
static FLAVOR: Flavor = Flavor { binary: "wasm-operator-dev", builtin: None };

/// The field manager of what `dev` applies (the CRD, the samples).
pub const FIELD_MANAGER: &str = "wasm-operator-dev";

#[derive(Args)]
// `run`'s flags, with the defaults of one local process: no Lease, plain
// HTTP on free ports, text logs, and a compile bound that holds a module
// with an interpreter inside (a CPython or SpiderMonkey component needs
// more than `run`'s 256Mi, which is sized for a pod).
#[command(
    mut_arg("compile_memory_limit", |arg| arg.default_value("1Gi")),
    mut_arg("leader_elect", |arg| arg.default_value("false")),
    mut_arg("metrics_secure", |arg| arg.default_value("false")),
    mut_arg("metrics_bind_address", |arg| arg.default_value("127.0.0.1:0")),
    mut_arg("health_probe_bind_address", |arg| arg.default_value("127.0.0.1:0")),
    mut_arg("log_format", |arg| arg.default_value("text")),
)]
pub struct DevArgs {
    /// Samples to apply once the operator runs: YAML or JSON files (several
    /// documents, or a List), or folders of them (*.yaml, *.yml, *.json,
    /// recursively); repeatable. One without a namespace goes to --namespace,
    /// else the kubeconfig's; a missing namespace is created.
    #[arg(short = 'f', long = "filename", value_name = "SAMPLES")]
    pub samples: Vec<PathBuf>,
    /// Exit once the samples' parents converged (a status whose
    /// observedGeneration, if it has one, is their generation, and nothing
    /// changed for 2 s) and everything was printed; exit 1 after --timeout.
    #[arg(long)]
    pub once: bool,
    /// How long --once waits for the samples to converge.
    #[arg(long, default_value = "2m", value_parser = crate::duration::parse_duration)]
    pub timeout: Duration,
    /// How often the parents, their objects and events are looked at.
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse_duration)]
    pub poll_interval: Duration,
    /// summary: an owned object in a line (a ConfigMap's data, else its spec
    /// and status, cut short); yaml: every changed object whole.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Summary)]
    pub output: Output,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Summary,
    Yaml,
}

/// The `dev` command: CRD, operator, samples, printing; until Ctrl-C or,
/// with --once, convergence.
pub fn dev_command(modules: &ModuleArgs, args: DevArgs) -> Result<ExitCode> {
    if modules.modules.len() != 1 {
        bail!("dev takes one --module (the file it watches), not {}", modules.modules.len());
    }
    crate::memory::allocator::tune_for_a_long_running_process();
    init_logging(args.run.log_format);
    let samples = cluster::read_samples(&args.samples)?;
    let engine = cli::loading::run_engine(&args.run)?;
    let module = cli::loading::load_one(&engine, &FLAVOR, modules)?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(dev(module, samples, args, modules.allow_precompiled))
}

async fn dev(
    module: crate::runtime::logic_module::LogicModule,
    samples: Vec<serde_json::Value>,
    args: DevArgs,
    allow_precompiled: bool,
) -> Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("finding the cluster (KUBECONFIG or ~/.kube/config, as kubectl does)")?;
    let manifest = module.manifest().clone();
    cluster::install_crd(&client, &manifest).await?;

    // Ctrl-C or SIGTERM stops both the operator and the printing; so does
    // --once, when the samples converged.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let signal_stop = stop.clone();
    tokio::spawn(async move {
        cli::operator_process::shutdown_signal().await;
        let _ = signal_stop.send(true);
    });
    let mut operator_stopped = stopped.clone();
    let shutdown = async move {
        let _ = operator_stopped.wait_for(|stop| *stop).await;
    };
    // A local loop acts as the developer (no ServiceAccount to set up) unless
    // --module-identity says otherwise.
    let identity = cli::args::ModuleIdentityArg::Operator;
    let operator = cli::operator_process::run_operator(
        &FLAVOR,
        vec![module],
        args.run.clone(),
        allow_precompiled,
        identity,
        shutdown,
    );
    let namespace = args.run.namespace.clone();
    let watcher = async {
        let applied = cluster::apply_samples(&client, &samples, namespace.as_deref()).await?;
        let options = printer::Options {
            namespace: namespace.clone(),
            output: args.output,
            poll_interval: args.poll_interval,
            once: args.once.then_some(args.timeout),
        };
        printer::print_until_stopped(&client, &manifest, &applied, options, stopped).await
    };
    tokio::pin!(operator, watcher);
    let outcome = tokio::select! {
        result = &mut operator => {
            result?;
            if !*stop.borrow() {
                bail!("the operator stopped");
            }
            // Ctrl-C stopped it before the printing saw it.
            return Ok(ExitCode::SUCCESS);
        }
        outcome = &mut watcher => outcome,
    };
    let _ = stop.send(true);
    operator.await?;
    match outcome? {
        printer::Outcome::Converged | printer::Outcome::Stopped => Ok(ExitCode::SUCCESS),
        printer::Outcome::TimedOut => Ok(ExitCode::FAILURE),
    }
}

/// Logs to stderr (the module's own lines among them, target
/// `wasm_operator::module`); the swaps also to stdout, among what is printed.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;

    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    };
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal());
    let logs = match format {
        LogFormat::Json => fmt.json().flatten_event(true).with_current_span(false).with_filter(filter()).boxed(),
        LogFormat::Text => fmt.with_filter(filter()).boxed(),
    };
    let _ = tracing_subscriber::registry().with(logs).with(swaps::layer()).try_init();
}
