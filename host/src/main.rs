//! `wasm-operator`: the generic operator binary. Every decision about
//! desired state comes from the logic modules given with `--module`; this
//! binary does the I/O.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wasm_operator::cli::{self, Flavor, ModuleArgs, RunArgs};

const FLAVOR: Flavor = Flavor { binary: "wasm-operator", builtin: None };

#[derive(Parser)]
#[command(
    name = "wasm-operator",
    version,
    about = "A Kubernetes operator host whose logic is WebAssembly components (wasm-operator:controller)"
)]
struct Cli {
    #[command(flatten)]
    modules: ModuleArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every module against the cluster kubectl would use (in-cluster
    /// config, else KUBECONFIG or ~/.kube/config).
    Run(RunArgs),
    /// Print each module's CustomResourceDefinition, as the module ships it.
    Crd,
    /// Print what each module says of itself (kinds, names) and its digest.
    Manifest,
    /// Compile a module ahead of time for this binary and CPU; load the
    /// result with `--module FILE --allow-precompiled` to start without compiling.
    Precompile {
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::exit(match cli.command {
        Command::Run(args) => cli::run_command(&FLAVOR, &cli.modules, args),
        Command::Crd => cli::crd_command(&FLAVOR, &cli.modules),
        Command::Manifest => cli::manifest_command(&FLAVOR, &cli.modules),
        Command::Precompile { output } => cli::precompile_command(&FLAVOR, &cli.modules, &output),
    })
}
