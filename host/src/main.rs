//! `wasm-operator`: the generic operator binary. Every decision about
//! desired state comes from the logic modules given with `--module`; this
//! binary does the I/O.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wasm_operator::authoring::{AuthoringCommand, ProjectCommand};
use wasm_operator::cli;
use wasm_operator::cli::args::{Flavor, ModuleArgs};
use wasm_operator::host_command::HostCommand;

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
    #[command(flatten)]
    Host(HostCommand),
    /// Writing a module: render and test (no cluster needed), dev (a cluster, hot reload).
    #[command(flatten)]
    Authoring(AuthoringCommand),
    /// Starting and building a module project: new, componentize.
    #[command(flatten)]
    Project(ProjectCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::output::exit(match cli.command {
        Command::Host(command) => command.execute(&FLAVOR, &cli.modules),
        Command::Authoring(command) => command.execute(&cli.modules),
        Command::Project(command) => command.execute(),
    })
}
