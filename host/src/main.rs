//! `memcached-operator`: the operator binary. Every decision about desired
//! state comes from the logic component; this binary does the I/O.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use memcached_operator::module::LogicModule;
use memcached_operator::{crd, render};

#[derive(Parser)]
#[command(name = "memcached-operator", version, about = "Kubernetes operator for Memcached, with its logic in a WebAssembly component")]
struct Cli {
    /// Logic component to load instead of the built-in one.
    #[arg(long, global = true, env = "MEMCACHED_MODULE", value_name = "PATH")]
    module: Option<PathBuf>,
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
            let module = load_module(cli.module.as_deref())?;
            render_command(&module, &file, output)
        }
    }
}

fn load_module(path: Option<&std::path::Path>) -> Result<LogicModule> {
    match path {
        Some(path) => LogicModule::from_file(path).with_context(|| format!("loading {}", path.display())),
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
