//! `memcached-operator`: the operator binary. Every decision about desired
//! state comes from the logic component; this binary does the I/O.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use memcached_operator::module::{LogicModule, ModuleHandle};
use memcached_operator::operator::api_requests::CountRequestsLayer;
use memcached_operator::operator::leader::LeaderElectionOptions;
use memcached_operator::operator::metrics::Metrics;
use memcached_operator::operator::{self, Options};
use memcached_operator::{crd, render};

#[derive(Parser)]
#[command(name = "memcached-operator", version, about = "Kubernetes operator for Memcached, with its logic in a WebAssembly component")]
struct Cli {
    /// Logic component to load instead of the built-in one.
    #[arg(long, global = true, env = "MEMCACHED_MODULE", value_name = "PATH")]
    module: Option<PathBuf>,
    /// Accept a module precompiled by `precompile` (native code: only one you built).
    #[arg(long, global = true, env = "MEMCACHED_ALLOW_PRECOMPILED")]
    allow_precompiled: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every object the operator would own for the CRs in a file.
    Render {
        /// YAML or JSON with one or more Memcached CRs; `-` reads stdin.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
        output: Format,
    },
    /// Print the Memcached CustomResourceDefinition.
    Crd,
    /// Run the operator against the cluster kubectl would use (in-cluster
    /// config, else KUBECONFIG or ~/.kube/config).
    Run(RunArgs),
    /// Compile the logic module (--module, else the built-in one) ahead of
    /// time for this binary and CPU; load the result with
    /// `--module FILE --allow-precompiled` to start without compiling.
    Precompile {
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Watch only this namespace (default: every namespace).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Where Prometheus scrapes /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_bind_address: SocketAddr,
    /// Where kubelet probes /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_probe_bind_address: SocketAddr,
    /// Hold a coordination.k8s.io Lease so only one replica reconciles.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    leader_elect: bool,
    /// The Lease's namespace (default: POD_NAMESPACE, else the client's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long, default_value = "memcached-operator")]
    leader_election_id: String,
    /// Parents reconciled at once.
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
    /// How often every parent is reconciled even when nothing changed (e.g. 10m, 30s).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync_period: Duration,
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration: jiff::SignedDuration = text.parse().map_err(|e| format!("{text:?} is not a duration: {e}"))?;
    Duration::try_from(duration).map_err(|e| format!("{text:?}: {e}"))
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Crd => {
            print!("{}", crd::crd_yaml().context("serializing the CRD")?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Render { file, output } => {
            let module = load_module(cli.module.as_deref(), cli.allow_precompiled)?;
            render_command(&module, &file, output)
        }
        Command::Precompile { output } => {
            let bytes = match cli.module.as_deref() {
                Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
                None => memcached_operator::module::BUILTIN_COMPONENT.to_vec(),
            };
            let compiled = LogicModule::precompile(&bytes).context("precompiling the logic module")?;
            std::fs::write(&output, compiled).with_context(|| format!("writing {}", output.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            init_logging(args.log_format);
            let module = load_module(cli.module.as_deref(), cli.allow_precompiled)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            runtime.block_on(run_operator(module, args))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).init(),
        LogFormat::Text => builder.init(),
    }
}

async fn run_operator(module: LogicModule, args: RunArgs) -> Result<()> {
    let metrics = Arc::new(Metrics::default());
    let config = kube::Config::infer().await.context("finding the cluster (in-cluster, KUBECONFIG or ~/.kube/config)")?;
    let client = kube::client::ClientBuilder::try_from(config)
        .context("building the API client")?
        .with_layer(&CountRequestsLayer::new(metrics.clone()))
        .build();
    let leader_election = args.leader_elect.then(|| {
        let namespace = args.leader_election_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
        LeaderElectionOptions::new(namespace, args.leader_election_id.clone(), identity())
    });
    let options = Options {
        namespace: args.namespace,
        metrics_address: args.metrics_bind_address,
        health_address: args.health_probe_bind_address,
        leader_election,
        concurrency: args.concurrency,
        resync_period: args.resync_period,
        controller_name: "memcached-operator".to_owned(),
    };
    operator::run(client, ModuleHandle::new(module), metrics, options, shutdown_signal())
        .await
        .context("the operator stopped")
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
async fn shutdown_signal() {
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

fn load_module(path: Option<&std::path::Path>, allow_precompiled: bool) -> Result<LogicModule> {
    match path {
        Some(path) => LogicModule::from_file_allowing_precompiled(path, allow_precompiled)
            .with_context(|| format!("loading {}", path.display())),
        None => LogicModule::builtin().context("loading the built-in logic module"),
    }
}

fn render_command(module: &LogicModule, file: &std::path::Path, output: Format) -> Result<ExitCode> {
    let text = if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("reading stdin")?;
        text
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let source = file.display();
    let documents = match render::parse_documents(&text) {
        Ok(documents) => documents,
        Err(err) => {
            eprintln!("{source}: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut instance = module.instance().context("instantiating the logic module")?;
    let objects = match render::render_all(&mut instance, &documents) {
        Ok(objects) => objects,
        Err(errors) => {
            for err in errors {
                eprintln!("{source}: {err}");
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let printed = match output {
        Format::Json => render::as_json_list(objects),
        Format::Yaml => render::as_yaml(&mut instance, &objects).context("formatting YAML")?,
    };
    print!("{printed}");
    Ok(ExitCode::SUCCESS)
}
