//! `memcached-operator`: the generic host with the Memcached logic component
//! built in. Every decision about desired state comes from the component;
//! this binary does the I/O.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use memcached_operator::typed::MemcachedModule;
use memcached_operator::{FLAVOR, render};
use wasm_operator::cli;
use wasm_operator::cli::args::ModuleArgs;
use wasm_operator::host_command::HostCommand;

#[derive(Parser)]
#[command(
    name = "memcached-operator",
    version,
    about = "Kubernetes operator for Memcached, with its logic in a WebAssembly component"
)]
struct Cli {
    #[command(flatten)]
    modules: ModuleArgs,
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
    /// The generic host's commands: run, crd, manifest, precompile (with the
    /// built-in module unless --module names others).
    #[command(flatten)]
    Host(HostCommand),
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::output::exit(match cli.command {
        Command::Render { file, output } => render_command(&cli.modules, &file, output),
        Command::Host(command) => command.execute(&FLAVOR, &cli.modules),
    })
}

fn render_command(modules: &ModuleArgs, file: &Path, output: Format) -> Result<ExitCode> {
    let engine = cli::loading::engine()?;
    let module = MemcachedModule::new(cli::loading::load_one(&engine, &FLAVOR, modules)?)?;
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
    cli::output::print_out(&printed)
}
