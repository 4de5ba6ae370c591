//! Loading the modules a command names (or the binary's built-in one) on
//! the engine it needs.

use anyhow::{Context, Result, bail};

use crate::cli::args::{CompileStrategy, Flavor, ModuleArgs, RunArgs};
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::{LogicModule, ModuleSource};

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

/// The engine `run` loads modules on: every compile in a child process.
pub fn run_engine(args: &RunArgs) -> Result<ModuleEngine> {
    let options = args.compile.options()?;
    match args.compile.compile_strategy {
        CompileStrategy::Tiered => ModuleEngine::compiling_in_tiers(options),
        CompileStrategy::Optimized => ModuleEngine::compiling_out_of_process(options),
    }
    .map_err(|e| anyhow::anyhow!("setting up wasmtime: {e:#}"))
}
