//! `control-plane up [--dir DIR] [--pods] [--no-controller-manager] [--no-audit-log]`
//!
//! Starts etcd, kube-apiserver and kube-controller-manager on loopback (with
//! --pods also kube-scheduler, the workload controllers and kwok with fake
//! Nodes, so Pods start), writes `DIR/kubeconfig` (admin) and
//! `DIR/operator.kubeconfig` once everything is ready, prints `KUBECONFIG=...` lines, and runs until SIGINT or SIGTERM,
//! then stops everything and removes the kubeconfigs. Without --dir the
//! kubeconfigs stay in the control plane's temp dir.

use std::path::PathBuf;
use std::process::ExitCode;

use control_plane::{ControlPlane, Options, User};

const USAGE: &str = "usage: control-plane up [--dir DIR] [--pods] [--no-controller-manager] [--no-audit-log]";

struct Args {
    dir: Option<PathBuf>,
    options: Options,
}

/// What the command line asks for.
enum Command {
    Up(Args),
    /// `-h` or `--help`, anywhere: the usage, on stdout, and success.
    Help,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
    match args.next().as_deref() {
        Some("up") => {}
        Some("-h" | "--help") => return Ok(Command::Help),
        Some(other) => return Err(format!("unknown command {other:?}\n{USAGE}")),
        None => return Err(USAGE.into()),
    }
    let mut parsed = Args { dir: None, options: Options::default() };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--dir" => parsed.dir = Some(args.next().ok_or("--dir needs a folder")?.into()),
            "--pods" => parsed.options.pods = true,
            "--no-controller-manager" => parsed.options.controller_manager = false,
            "--no-audit-log" => parsed.options.audit_log = false,
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Command::Up(parsed))
}

fn main() -> ExitCode {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // kube logs every non-2xx answer at error level, and /readyz
                // answers 500 until the API server has finished starting.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client::client::builder=off")),
        )
        .init();
    let args = match parse(std::env::args().skip(1)) {
        Ok(Command::Up(args)) => args,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    // Signals are caught before starting, so a SIGTERM during start-up still
    // tears down cleanly once the plane is up.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let signals = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
    });
    let (mut interrupt, mut terminate) = signals.map_err(|e| format!("installing signal handlers: {e}"))?;

    let plane = ControlPlane::start_with(args.options).map_err(|e| e.to_string())?;
    let mut written = Vec::new();
    let mut outputs = Vec::new();
    for (user, variable) in [(User::Admin, "KUBECONFIG"), (User::Operator, "OPERATOR_KUBECONFIG")] {
        let source = plane.kubeconfig(user);
        let target = match &args.dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
                let file = source.file_name().map(PathBuf::from).unwrap_or_default();
                let target = dir.join(file);
                let partial = target.with_extension("partial");
                std::fs::copy(&source, &partial)
                    .and_then(|_| std::fs::rename(&partial, &target))
                    .map_err(|e| format!("writing {}: {e}", target.display()))?;
                written.push(target.clone());
                target
            }
            None => source,
        };
        let absolute = std::path::absolute(&target).unwrap_or(target);
        outputs.push(format!("{variable}={}", absolute.display()));
    }
    outputs.push(format!("KUBEBUILDER_ASSETS={}", plane.assets().display()));
    for line in outputs {
        println!("{line}");
    }
    tracing::info!(
        seconds = plane.startup_time().as_secs_f64(),
        server = %plane.server_url(),
        "control plane up; SIGINT or SIGTERM stops it"
    );

    runtime.block_on(async {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("SIGINT"),
            _ = terminate.recv() => tracing::info!("SIGTERM"),
        }
    });
    for file in written {
        let _ = std::fs::remove_file(file);
    }
    drop(plane);
    tracing::info!("control plane stopped");
    Ok(())
}
