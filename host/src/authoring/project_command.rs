//! The commands that start and build a module project: `new` (a project
//! from the templates, in Rust, TypeScript or Python) and `componentize`
//! (a Rust module's core wasm into a component).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use super::componentize::{Allowed, componentize};
use super::function_order::function_list;
use super::scaffold::{Language, Scaffold};
use crate::cli::args::NoModules;

#[derive(Subcommand)]
pub enum ProjectCommand {
    /// Start a module project: the module (a parent owning a ConfigMap, a
    /// Ready condition, an invalid-spec error), a sample, golden cases for
    /// `wasm-operator test`, unit tests, a README and a Makefile whose one
    /// command, `make`, installs what the build needs, builds the component
    /// and tests it. The SDK is vendored under vendor/, so the project
    /// builds outside this repository.
    #[command(
        verbatim_doc_comment,
        about = "Start a module project in Rust, TypeScript or Python (builds and tests with `make`)"
    )]
    New(NewArgs),
    /// Wrap the core wasm a Rust module's build produced (wit-bindgen's
    /// component type inside) into a component; refused if it imports
    /// anything but the contract's log (with --no-imports: anything).
    #[command(about = "Turn a Rust module's core wasm into a component (the projects' Makefile runs it)")]
    Componentize(ComponentizeArgs),
}

#[derive(Args)]
pub struct NewArgs {
    /// The module's name (a-z, 0-9, -): the folder, the package, the
    /// manifest's name.
    pub name: String,
    #[arg(long, value_enum)]
    pub lang: Language,
    /// The parent's API group, such as sites.example.com.
    #[arg(long)]
    pub group: String,
    /// The parent's kind, such as StaticSite.
    #[arg(long)]
    pub kind: String,
    /// The parent's API version.
    #[arg(long, default_value = "v1")]
    pub version: String,
    /// The parent's resource name (default: the kind in lower case, plus s).
    #[arg(long)]
    pub plural: Option<String>,
    /// Where to write it (default: ./NAME); must not exist or be empty.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub no_modules: NoModules,
}

#[derive(Args)]
pub struct ComponentizeArgs {
    /// The core module (target/wasm32-unknown-unknown/release/NAME.wasm).
    pub core: PathBuf,
    /// The component to write.
    pub out: PathBuf,
    /// Refuse every import, the log too.
    #[arg(long)]
    pub no_imports: bool,
    /// A file of function names (one per line, as the core module's name
    /// section has them): those functions are laid out first, in that
    /// order, so that the code a reconcile runs sits together and faults in
    /// fewer pages of the compiled module. Names the module lacks are
    /// skipped.
    #[arg(long)]
    pub function_order: Option<PathBuf>,
    #[command(flatten)]
    pub no_modules: NoModules,
}

impl ProjectCommand {
    pub fn execute(self) -> Result<ExitCode> {
        match self {
            ProjectCommand::New(args) => new_project(args),
            ProjectCommand::Componentize(args) => {
                let allowed = if args.no_imports { Allowed::Nothing } else { Allowed::Log };
                let order = match &args.function_order {
                    Some(path) => Some(function_list(
                        &std::fs::read_to_string(path)
                            .with_context(|| format!("reading the function order {}", path.display()))?,
                    )),
                    None => None,
                };
                let done = componentize(&args.core, &args.out, allowed, order.as_deref())?;
                let imports = if done.imports.is_empty() { "nothing".to_owned() } else { done.imports.join(", ") };
                eprintln!("componentize: wrote {} (imports {imports})", args.out.display());
                if let Some((moved, unknown)) = done.ordered {
                    eprintln!(
                        "componentize: {moved} functions laid out first; {unknown} listed names not in the module"
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

fn new_project(args: NewArgs) -> Result<ExitCode> {
    let plural = args.plural.unwrap_or_else(|| format!("{}s", args.kind.to_lowercase()));
    let scaffold = Scaffold {
        name: args.name.clone(),
        language: args.lang,
        group: args.group,
        version: args.version,
        kind: args.kind,
        plural,
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let files = scaffold.write(&dir).with_context(|| format!("creating the project in {}", dir.display()))?;
    println!("created {} ({} files): cd {} && make", dir.display(), files.len(), dir.display());
    Ok(ExitCode::SUCCESS)
}
