//! The authoring commands' arguments and what they print: `render` and
//! `test`. The work is in `render.rs`, `cases.rs` and `offline.rs`; `dev`'s
//! in `dev.rs`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};

use super::cases::{self, Modules};
use super::documents;
use super::render::{self, read_objects};
use crate::cli;
use crate::cli::args::ModuleArgs;
use crate::planning::case::CaseFile;

/// Commands for writing a module: `render` and `test` need no cluster;
/// `dev` runs the module on one.
#[derive(Subcommand)]
pub enum AuthoringCommand {
    /// Print what the operator would write for each parent in a file: the
    /// objects it would create or update (in reconcile order, after the
    /// checks it applies to a module's answer), then the parent with the
    /// status it would write.
    ///
    /// A parent without metadata.namespace is rendered in `default`, and one
    /// without metadata.uid gets a uid derived from its namespace and name
    /// (a SHA-256, as a UUID), since every owned object must carry a
    /// controller owner reference with it; stderr says so. Each parent gets
    /// the objects of --owned it controls and those of --related its
    /// `references` answer names. An invalid parent is reported naming its
    /// fields, and the status the operator would still write for it (told
    /// `invalid: ...`) is printed; the exit status is then 1, as for an
    /// answer the operator would refuse or a failing module.
    #[command(
        verbatim_doc_comment,
        about = "Print what the operator would write for each parent in a file (objects, then the status); no cluster needed"
    )]
    Render(RenderArgs),
    /// Run golden cases against a module: ok or FAIL per case, a unified
    /// diff for each failure, a summary; exit 1 if any failed.
    ///
    /// Each YAML document in DIR (searched recursively; or DIR a single
    /// file) is one case: the inputs of one reconcile and what to expect.
    ///
    ///   name: hello publishes        # optional
    ///   module: greeting.wasm        # optional, relative to the file
    ///   parent: {apiVersion: ..., kind: ..., metadata: {name: hello}, spec: {...}}
    ///   owned: [...]                 # objects that exist (the parent's children are passed)
    ///   related: [...]               # objects that exist (those `references` names are passed)
    ///   now: "2026-01-01T00:00:00Z"  # optional; this is the default
    ///   problem: "..."               # optional: why the writes failed, for `status`
    ///   recorded: {...}              # optional, free-form: where a recorded reconcile came from
    ///   expect:
    ///     desired: [...]             # the objects the module answers, checked, in order
    ///     status: {...}              # the parent's new status
    ///     error:                     # or the reconcile fails:
    ///       kind: invalid            # invalid | malformed | unsupported | refused | failed
    ///       fields: [spec.message]   # every field path the error names
    ///       message: text            # a part of the error's message
    ///
    /// Null members are ignored when comparing, as the operator ignores
    /// them. The parent gets a namespace and uid as for `render`. The
    /// module: --module, else the case's `module:`, else `module:` in
    /// DIR/wasm-operator-test.yaml (relative to that file).
    #[command(
        verbatim_doc_comment,
        about = "Run golden cases (YAML: parent, objects, expected answer) against a module; a diff per failure"
    )]
    Test(TestArgs),
    /// Run a module on the cluster kubectl would use (KUBECONFIG), as you
    /// write it: install its CRD (server-side apply), run the host on the
    /// module file exactly as `run` does (the file is watched: a rebuild
    /// that replaces it is verified and swapped in), apply the samples, and
    /// print as they change the parents' status, the objects they own, the
    /// events about them and the swaps (`swap: ...`). The module's own log
    /// lines and the host's go to stderr. Until Ctrl-C; --once exits when
    /// the samples converged. Needs the kubeconfig user's rights to do all
    /// that (a local cluster's admin).
    ///
    ///   wasm-operator --module target/greeting.wasm dev -f samples/
    ///   make run MODULE=target/greeting.wasm SAMPLES=samples/  # on a local control plane
    ///
    /// Takes every `run` flag; the defaults differ for one local process:
    /// --leader-elect=false, --metrics-secure=false, metrics and probes on
    /// free ports of 127.0.0.1, --log-format text.
    #[command(
        verbatim_doc_comment,
        about = "Run a module on a (local) cluster with hot reload: CRD, samples, then status, objects and events as they change"
    )]
    Dev(Box<super::dev::DevArgs>),
    /// Show what a new version of a module would do differently from the
    /// current one, for every parent, before it goes live: the objects it
    /// would create, update (field by field) or delete, or leave unmanaged
    /// (a kind it no longer owns), the status it would write, and the
    /// parents it fails on. Both versions run as the operator runs them, on
    /// the same inputs and the same `now`; nothing is written.
    ///
    ///   wasm-operator plan --module greeting-v2.wasm --against greeting.wasm
    ///   wasm-operator plan --module REGISTRY/REPO@sha256:...      # against what the LogicModule serves
    ///   wasm-operator plan --module v2.wasm --against v1.wasm -f parents.yaml --owned children.yaml
    ///
    /// NEW (--module) and CURRENT (--against) are each a component file or
    /// an OCI reference pinned by digest. Without --against, CURRENT is the
    /// version the cluster-scoped LogicModule --logic-module (default: NEW's
    /// name) serves, its status.activeReference.
    ///
    /// From the cluster kubectl would use (KUBECONFIG), reading only (list
    /// and get): the parents (-n: one namespace; default all), the objects
    /// of each owned kind of either version, and the objects of read kinds
    /// the parents' `references` name. A Secret's data is never printed.
    /// With -f, from files instead, as for `render` (needs --against).
    ///
    /// Exit status: 0 NEW changes nothing; 2 it changes something; 1 it
    /// fails on a parent CURRENT reconciles (failures win over changes), or
    /// the plan could not be made (a flag, a file, the cluster: the message
    /// says which). Parents both versions fail on are listed, not counted.
    #[command(
        verbatim_doc_comment,
        about = "Show what a new module version would do differently from the current one, per parent (reads only)"
    )]
    Plan(Box<super::plan::PlanArgs>),
    /// Write a running operator's recorded reconciles of one module as a
    /// case file for `test`: per reconcile, the parent, the owned and related
    /// objects it was given, the time, and its answer (desired objects,
    /// status), Secret values redacted. One document per reconcile, newest
    /// last; `test` replays them on any version of the module.
    ///
    ///   kubectl -n my-operator-system port-forward deploy/my-operator 8443 &
    ///   wasm-operator record --module greeting --insecure-skip-tls-verify -o recorded.yaml
    ///   wasm-operator test --module v2.wasm recorded.yaml
    ///
    /// --module NAME is the module's manifest name (as /metrics labels it).
    /// The request goes to --address (the operator's metrics port) with a
    /// bearer token (--token-file, else the kubeconfig user's), which the API
    /// server must allow `get` on the non-resource URL /records (the
    /// records-reader ClusterRole of deploy/rbac/).
    #[command(
        verbatim_doc_comment,
        about = "Write a running operator's recorded reconciles of a module as test cases (GET /records on its metrics port)"
    )]
    Record(Box<super::record::RecordArgs>),
}

#[derive(Args)]
pub struct RenderArgs {
    /// The parents: YAML or JSON documents, or a List; `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "PARENTS.yaml")]
    pub file: PathBuf,
    /// Objects of the owned kinds that exist (say, `kubectl get -o yaml`);
    /// each parent gets those it controls.
    #[arg(long, value_name = "FILE")]
    pub owned: Option<PathBuf>,
    /// Objects of the kinds the module reads that exist; each parent gets
    /// those its `references` answer names.
    #[arg(long, value_name = "FILE")]
    pub related: Option<PathBuf>,
    /// The time `status` is told (RFC 3339); default: now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

#[derive(Args)]
pub struct TestArgs {
    /// A folder of case files (or one case file).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Write each failing case's actual answer into its expectation
    /// (desired and status, or error; the parts it checks, all when none).
    /// The file is rewritten: YAML comments in it are lost.
    #[arg(long)]
    pub update: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

impl AuthoringCommand {
    pub fn execute(self, modules: &ModuleArgs) -> Result<ExitCode> {
        match self {
            AuthoringCommand::Render(args) => {
                init_logging();
                render_command(modules, args)
            }
            AuthoringCommand::Test(args) => {
                init_logging();
                test_command(modules, args)
            }
            // Its own logging: the swaps are printed among the objects.
            AuthoringCommand::Dev(args) => super::dev::dev_command(modules, *args),
            AuthoringCommand::Plan(args) => {
                init_logging();
                Ok(super::plan::plan_command(modules, *args)?)
            }
            AuthoringCommand::Record(args) => {
                init_logging();
                super::record::record_command(modules, *args)
            }
        }
    }
}

/// Logs (the module's lines among them) to stderr, as text; RUST_LOG filters.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .try_init();
}

fn one_module(modules: &ModuleArgs) -> Result<Option<PathBuf>> {
    match modules.modules.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        more => bail!("this command takes one --module, not {}", more.len()),
    }
}

fn render_command(modules: &ModuleArgs, args: RenderArgs) -> Result<ExitCode> {
    let Some(path) = one_module(modules)? else { bail!("no logic module: give one with --module PATH") };
    let now = match &args.now {
        Some(text) => render::check_now(text)?,
        None => crate::planning::step::now(),
    };
    let parents = read_objects(&args.file)?;
    if parents.is_empty() {
        return Err(render::InputError::Empty { path: args.file.clone() }.into());
    }
    let owned = args.owned.as_deref().map(read_objects).transpose()?.unwrap_or_default();
    let related = args.related.as_deref().map(read_objects).transpose()?.unwrap_or_default();
    let engine = cli::loading::engine()?;
    let module = crate::runtime::logic_module::LogicModule::from_file(&engine, &path, modules.allow_precompiled)?;
    let rendered = render::render(&module, &parents, &owned, &related, &now)?;

    let mut printed = Vec::new();
    let mut failed = false;
    let source = args.file.display();
    for parent in &rendered {
        printed.extend(parent.printed());
        let (notes, parent_failed) = parent.notes();
        for note in notes {
            eprintln!("{source}: {note}");
        }
        failed |= parent_failed;
    }
    let text = match args.output {
        Format::Yaml => documents::to_yaml(&printed),
        Format::Json => documents::to_json_list(&printed),
    };
    cli::output::print_out(&text)?;
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn test_command(modules: &ModuleArgs, args: TestArgs) -> Result<ExitCode> {
    let cli_module = one_module(modules)?;
    let folder_module = cases::dir_module(&args.dir)?;
    let files = cases::case_files(&args.dir)?;
    let engine = cli::loading::engine()?;
    let mut loaded = Modules::new(&engine, modules.allow_precompiled);
    let root = if args.dir.is_dir() { args.dir.clone() } else { args.dir.parent().unwrap_or(&args.dir).to_owned() };
    let (mut passed, mut failed, mut updated) = (0usize, 0usize, 0usize);
    let mut out = String::new();
    for path in files {
        let mut file = match CaseFile::read(&path) {
            Ok(file) => file,
            Err(error) => {
                let _ = writeln!(out, "FAIL {}\n  {error}", path.strip_prefix(&root).unwrap_or(&path).display());
                failed += 1;
                continue;
            }
        };
        let mut changed = false;
        for index in 0..file.cases.len() {
            let name = file.case_name(index, &root);
            let case = &file.cases[index];
            let Some(module_path) = cases::module_for(cli_module.as_deref(), case, &path, folder_module.as_deref())
            else {
                let _ = writeln!(
                    out,
                    "FAIL {name}\n  no module: give --module, `module:` in the case or in {}",
                    cases::DIR_CONFIG
                );
                failed += 1;
                continue;
            };
            let (module, kinds) = match loaded.get(&module_path) {
                Ok(loaded) => loaded,
                Err(error) => {
                    let _ = writeln!(out, "FAIL {name}\n  {error}");
                    failed += 1;
                    continue;
                }
            };
            tracing::debug!(case = name, module = %module_path.display(), "running");
            let verdict = cases::run(module, kinds, case);
            if verdict.passed {
                passed += 1;
                let _ = writeln!(out, "ok   {name}");
                continue;
            }
            if args.update {
                file.cases[index].expect = verdict.actual;
                changed = true;
                updated += 1;
                let _ = writeln!(out, "updated {name}");
                continue;
            }
            failed += 1;
            let _ = writeln!(out, "FAIL {name}");
            for line in verdict.report.iter().flat_map(|entry| entry.lines()) {
                let _ = writeln!(out, "  {line}");
            }
        }
        if changed {
            file.write().with_context(|| format!("updating {}", path.display()))?;
        }
    }
    let _ = write!(out, "\n{passed} passed, {failed} failed");
    if args.update {
        let _ = write!(out, ", {updated} updated");
    }
    out.push('\n');
    cli::output::print_out(&out)?;
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
