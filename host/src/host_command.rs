//! The commands every binary built on this host has: `run` the operator,
//! and what a module says of itself (`crd`, `manifest`, `rbac`), ahead of
//! time (`precompile`, `push`) and the compile child (`compile-module`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use crate::cli::args::{Flavor, ModuleArgs, ModuleIdentityArg, NoModules, RegistryArgs, RunArgs};
use crate::cli::loading::{engine, load_modules, run_engine};
use crate::cli::operator_process::{init_logging, run_operator, shutdown_signal};
use crate::cli::output::print_out;
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::{LogicModule, ModuleSource};

/// The commands every binary built on this host has.
#[derive(Subcommand)]
pub enum HostCommand {
    /// Run every module against the cluster kubectl would use (in-cluster
    /// config, else KUBECONFIG or ~/.kube/config).
    Run(Box<RunArgs>),
    /// Print each module's CustomResourceDefinition, as the module ships it.
    Crd,
    /// Print what each module says of itself (kinds, names) and its digest.
    Manifest,
    /// Print the RBAC each module's own identity needs under `run`'s
    /// --module-identity=service-account: its ServiceAccount, a ClusterRole
    /// with exactly what its manifest claims (what `run` checks at load and
    /// at swap), the binding, and the Role letting the operator impersonate it.
    Rbac {
        /// The namespace of the modules' ServiceAccounts and of the
        /// operator's own (`run`'s --module-identity-namespace).
        #[arg(long)]
        namespace: String,
        /// The operator's ServiceAccount, which may impersonate the modules'
        /// (default: the binary's name).
        #[arg(long, value_name = "NAME")]
        operator_service_account: Option<String>,
        /// Before each module's name in its ServiceAccount's (`run`'s
        /// --module-identity-prefix).
        #[arg(long, default_value = "", value_name = "PREFIX")]
        module_identity_prefix: String,
    },
    /// Compile a module ahead of time for this binary and CPU; load the
    /// result with `--module FILE --allow-precompiled` to start without compiling.
    Precompile {
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Compile one component into native code under a memory bound: what
    /// `run` starts in a child process for every new module version, so a
    /// compile never takes the operator's own memory.
    #[command(hide = true)]
    CompileModule {
        #[arg(long, value_name = "FILE")]
        input: PathBuf,
        #[arg(long, value_name = "FILE")]
        output: PathBuf,
        /// Bytes of data segment the compile may use (RLIMIT_DATA).
        #[arg(long, value_name = "BYTES")]
        memory_limit: Option<u64>,
        /// Compile threads (RAYON_NUM_THREADS sizes the pool beyond one).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Which code: baseline (Winch) or optimized (Cranelift).
        #[arg(long, default_value = "optimized")]
        tier: crate::runtime::compiler::Tier,
        /// A version already serves on baseline code: leave it the CPU.
        #[arg(long)]
        background: bool,
    },
    /// Publish a logic module to an OCI registry (CNCF wasm layout) and print
    /// its reference pinned by digest, for a LogicModule's spec.image.
    Push {
        /// The component (checked to be a logic module first).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Where to push: host[:port]/repository[:tag].
        #[arg(value_name = "REF")]
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        no_modules: NoModules,
    },
}

impl HostCommand {
    pub fn execute(self, flavor: &Flavor, modules: &ModuleArgs) -> Result<ExitCode> {
        match self {
            HostCommand::Run(args) => run_command(flavor, modules, *args),
            HostCommand::Crd => crd_command(flavor, modules),
            HostCommand::Manifest => manifest_command(flavor, modules),
            HostCommand::Rbac { namespace, operator_service_account, module_identity_prefix } => {
                let operator = operator_service_account.as_deref().unwrap_or(flavor.binary);
                rbac_command(flavor, modules, &namespace, operator, &module_identity_prefix)
            }
            HostCommand::Precompile { output } => precompile_command(flavor, modules, &output),
            HostCommand::Push { file, reference, registry, .. } => push_command(&file, &reference, &registry),
            HostCommand::CompileModule { input, output, memory_limit, threads, tier, background } => {
                crate::runtime::compiler::quiet_panics();
                if background {
                    crate::runtime::compiler::yield_cpu();
                }
                let engine = ModuleEngine::compile_only(threads, tier)
                    .map_err(|e| anyhow::anyhow!("setting up wasmtime: {e:#}"))?;
                crate::runtime::compiler::compile_in_this_process(&engine, &input, &output, memory_limit)?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// `crd`: each module's CustomResourceDefinition, as the module ships it.
pub fn crd_command(flavor: &Flavor, args: &ModuleArgs) -> Result<ExitCode> {
    let engine = engine()?;
    let modules = load_modules(&engine, flavor, args)?;
    let mut documents = Vec::new();
    for module in &modules {
        let crd = module.manifest().crd.trim_end();
        if crd.is_empty() {
            bail!("{} ships no CRD in its manifest", module.source());
        }
        documents.push(crd.trim_start_matches("---\n").to_owned());
    }
    print_out(&format!("{}\n", documents.join("\n---\n")))
}

/// `rbac`: the objects each module's own identity needs, as YAML.
pub fn rbac_command(
    flavor: &Flavor,
    args: &ModuleArgs,
    namespace: &str,
    operator: &str,
    account_prefix: &str,
) -> Result<ExitCode> {
    let engine = engine()?;
    let modules = load_modules(&engine, flavor, args)?;
    let described: Vec<_> = modules.iter().map(|m| (m.manifest(), m.write_model(), m.finalizes())).collect();
    let objects = crate::authoring::rbac::rbac_objects(&described, namespace, operator, account_prefix)?;
    print_out(&crate::authoring::documents::to_yaml(&objects))
}

/// `manifest`: what each module says of itself, and its digest, as JSON.
pub fn manifest_command(flavor: &Flavor, args: &ModuleArgs) -> Result<ExitCode> {
    let engine = engine()?;
    let modules = load_modules(&engine, flavor, args)?;
    let kind = |k: &crate::runtime::bindings::KindInfo| serde_json::json!({"group": k.group, "version": k.version, "kind": k.kind, "plural": k.plural, "namespaced": k.namespaced});
    let described: Vec<serde_json::Value> = modules
        .iter()
        .map(|module| {
            let m = module.manifest();
            serde_json::json!({
                "source": module.source().to_string(),
                "digest": module.digest(),
                "contract": module.contract(),
                "name": m.name,
                "version": m.version,
                "parent": kind(&m.parent),
                "owned": m.owned.iter().map(kind).collect::<Vec<_>>(),
                "reads": m.reads.iter().map(kind).collect::<Vec<_>>(),
                "fieldManager": m.field_manager,
                "eventReporter": m.event_reporter,
                "writes": match module.write_model() {
                    crate::runtime::bindings::WriteModel::Replace => "replace",
                    crate::runtime::bindings::WriteModel::Apply => "apply",
                },
                // None for a module built before contract 1.3.
                "reach": module.reach().map(|r| serde_json::json!({
                    "anyNamespace": r.any_namespace,
                    "selects": r.selects,
                    "finalizes": r.finalizes,
                    "parentLabelKeys": r.parent_label_keys,
                    "parentAnnotationKeys": r.parent_annotation_keys,
                    "decorates": r.decorates.as_ref().map(|d| serde_json::json!({
                        "labels": d.labels, "annotations": d.annotations, "writesStatus": d.writes_status,
                    })),
                })),
            })
        })
        .collect();
    print_out(&format!("{}\n", serde_json::to_string_pretty(&described).context("printing the manifests")?))
}

/// `precompile`: the module compiled ahead of time for this binary and CPU.
pub fn precompile_command(flavor: &Flavor, args: &ModuleArgs, output: &std::path::Path) -> Result<ExitCode> {
    let engine = engine()?;
    let (source, bytes) = match args.modules.as_slice() {
        [] => {
            let builtin = flavor.builtin.context("no logic module: give one with --module PATH")?;
            (ModuleSource::BuiltIn(builtin.name), builtin.bytes.to_vec())
        }
        [path] => (
            ModuleSource::File(path.clone()),
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        more => bail!("precompile takes one --module, not {}", more.len()),
    };
    // Refuses what would not load: wrong contract, bad manifest.
    LogicModule::from_bytes(&engine, source.clone(), &bytes, false)?;
    let compiled = LogicModule::precompile(&engine, &source, &bytes)?;
    std::fs::write(output, compiled).with_context(|| format!("writing {}", output.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// `push`: the module at `reference`, its pinned reference printed.
pub fn push_command(file: &std::path::Path, reference: &str, registry: &RegistryArgs) -> Result<ExitCode> {
    let engine = engine()?;
    let module = LogicModule::from_file(&engine, file, false)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let registry = registry.registry()?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    let pinned = runtime.block_on(registry.push(bytes, reference))?;
    eprintln!("pushed {} {} ({})", module.name(), module.manifest().version, module.digest());
    print_out(&format!("{pinned}\n"))
}

/// `run`: every module, one controller each, until SIGTERM or Ctrl-C.
pub fn run_command(flavor: &Flavor, module_args: &ModuleArgs, args: RunArgs) -> Result<ExitCode> {
    crate::memory::allocator::tune_for_a_long_running_process();
    init_logging(args.log_format);
    let engine = run_engine(&args)?;
    let modules = load_modules(&engine, flavor, module_args)?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    let flavor = *flavor;
    let allow_precompiled = module_args.allow_precompiled;
    // On a worker thread, not this one: the controllers' loops then hand
    // work to the reconciles (and back) within the worker pool, instead of
    // waking this thread, parked in `block_on`, for every step.
    runtime.block_on(async move {
        let operator = tokio::spawn(async move {
            run_operator(
                &flavor,
                modules,
                args,
                allow_precompiled,
                ModuleIdentityArg::ServiceAccount,
                shutdown_signal(),
            )
            .await
        });
        operator.await.context("the operator's task ended abnormally")?
    })?;
    Ok(ExitCode::SUCCESS)
}
