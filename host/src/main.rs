//! `wasm-operator`: the generic operator binary. Every decision about
//! desired state comes from the logic modules given with `--module`; this
//! binary does the I/O.

use std::process::ExitCode;

use clap::Parser;
use wasm_operator::cli::{self, Flavor, HostCommand, ModuleArgs};

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
    command: HostCommand,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::exit(cli.command.execute(&FLAVOR, &cli.modules))
}
