//! `plan`: what a new version of a module would do differently from the
//! current one, for every parent, before it goes live. Both versions run
//! as the operator runs them (`offline::reconcile`: the calls, the answer
//! checks, the same `now`) on the same inputs, and the two outcomes are
//! compared object by object and field by field. Nothing is written: the
//! inputs are read from the cluster (list and get only) or from files.
//!
//! - `source`: where the versions come from (file, OCI reference, the
//!   version a LogicModule serves).
//! - `inputs`: the parents, their children and the related objects, from
//!   the cluster (listed once per kind and indexed) or from files.
//! - `compare`: one parent's two outcomes as object actions and a status
//!   change.
//! - `fields`: field-level differences, Secrets redacted.
//! - `report`: text and JSON, and the exit status.

pub mod inputs;
pub mod report;
pub mod source;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::Value;

use self::inputs::{Inputs, InputsError, Version};
use self::report::{Plan, VersionInfo};
use self::source::{SourceError, VersionSource};
use super::render::{self, InputError};
use crate::cli;
use crate::cli::args::{ModuleArgs, RegistryArgs};
use crate::planning::compare::{self, Side};
use crate::planning::given_objects::namespace_of;
use crate::planning::kinds::{KindError, Kinds};
use crate::planning::offline::{self, Given};
use crate::planning::parent_plan::ParentPlan;
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::oci::Registry;

#[derive(Args)]
pub struct PlanArgs {
    /// The current version: a component file or an OCI reference pinned by
    /// digest (registry/repository@sha256:...). Default: the version the
    /// LogicModule --logic-module serves (its status.activeReference).
    #[arg(long, value_name = "FILE|REFERENCE")]
    pub against: Option<String>,
    /// The cluster-scoped LogicModule whose serving version is the current
    /// one when --against is not given (default: the new version's name).
    #[arg(long, value_name = "NAME")]
    pub logic_module: Option<String>,
    /// Only the parents of this namespace (default: every namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The parents from a file instead of a cluster (YAML or JSON documents,
    /// or a List; `-` reads stdin); needs --against. As for `render`.
    #[arg(short = 'f', long = "filename", value_name = "PARENTS.yaml")]
    pub file: Option<PathBuf>,
    /// With -f: objects of the owned kinds that exist; each parent gets
    /// those it controls.
    #[arg(long, value_name = "FILE", requires = "file")]
    pub owned: Option<PathBuf>,
    /// With -f: objects of the read kinds that exist; each parent gets those
    /// its `references` answer names.
    #[arg(long, value_name = "FILE", requires = "file")]
    pub related: Option<PathBuf>,
    /// The time both versions' `status` is told (RFC 3339); default: now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// text: for people; json: one document (its members are documented in
    /// the README, "Plan a version before it goes live").
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Text)]
    pub output: PlanFormat,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no new version: give it with --module FILE|REFERENCE")]
    NoModule,
    #[error("plan takes one --module (the new version), not {0}")]
    TooManyModules(usize),
    #[error(
        "-f reads the parents from a file, with no cluster: give the current version with --against FILE|REFERENCE"
    )]
    FileWithoutAgainst,
    #[error(transparent)]
    Source(Box<SourceError>),
    #[error(transparent)]
    Inputs(Box<InputsError>),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("the {which} version's kinds: {error}")]
    Kinds { which: &'static str, error: KindError },
    #[error(
        "the versions reconcile different parent kinds: NEW {new}, CURRENT {current}; another parent kind is another module"
    )]
    ParentKindChanged { new: String, current: String },
    #[error(
        "the versions write as different field managers: NEW {new:?}, CURRENT {current:?}; a module keeps its field manager (a swap to NEW is refused)"
    )]
    FieldManagerChanged { new: String, current: String },
    #[error("finding the cluster (KUBECONFIG or ~/.kube/config; -f plans from files without one): {0}")]
    Connect(Box<kube::Error>),
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("setting up wasmtime: {0}")]
    Engine(String),
    #[error("registry credentials (--registry-credentials): {0}")]
    Registry(String),
    #[error("{0}")]
    Output(String),
}

impl From<SourceError> for PlanError {
    fn from(error: SourceError) -> Self {
        PlanError::Source(Box::new(error))
    }
}

impl From<InputsError> for PlanError {
    fn from(error: InputsError) -> Self {
        PlanError::Inputs(Box::new(error))
    }
}

/// `plan`'s work; the exit status is the plan's (0, 1 or 2).
pub fn plan_command(modules: &ModuleArgs, args: PlanArgs) -> Result<ExitCode, PlanError> {
    let new_text = match modules.modules.as_slice() {
        [] => return Err(PlanError::NoModule),
        [one] => one.to_string_lossy().into_owned(),
        more => return Err(PlanError::TooManyModules(more.len())),
    };
    if args.file.is_some() && args.against.is_none() {
        return Err(PlanError::FileWithoutAgainst);
    }
    let new_source = VersionSource::parse("--module", &new_text)?;
    let against = args.against.as_deref().map(|text| VersionSource::parse("--against", text)).transpose()?;
    let now = match &args.now {
        Some(text) => render::check_now(text)?,
        None => crate::planning::step::now(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(PlanError::Runtime)?;
    let engine = cli::loading::engine().map_err(|e| PlanError::Engine(format!("{e:#}")))?;
    let registry = args.registry.registry().map_err(|e| PlanError::Registry(format!("{e:#}")))?;
    let loader = Loader { engine: &engine, registry: &registry, allow_precompiled: modules.allow_precompiled };
    let plan = runtime.block_on(make_plan(&loader, &args, &new_source, against.as_ref(), &now))?;
    let text = match args.output {
        PlanFormat::Text => plan.text(),
        PlanFormat::Json => {
            let mut text = serde_json::to_string_pretty(&plan.json()).unwrap_or_default();
            text.push('\n');
            text
        }
    };
    cli::output::print_out(&text).map_err(|e| PlanError::Output(format!("{e:#}")))?;
    Ok(ExitCode::from(plan.exit_status()))
}

/// Loads versions on one engine.
struct Loader<'a> {
    engine: &'a ModuleEngine,
    registry: &'a Registry,
    allow_precompiled: bool,
}

impl Loader<'_> {
    async fn load(&self, flag: &'static str, source: &VersionSource) -> Result<LogicModule, SourceError> {
        source::load(self.engine, self.registry, flag, source, self.allow_precompiled).await
    }
}

async fn make_plan(
    loader: &Loader<'_>,
    args: &PlanArgs,
    new_source: &VersionSource,
    against: Option<&VersionSource>,
    now: &str,
) -> Result<Plan, PlanError> {
    let new = loader.load("--module", new_source).await?;
    let new_kinds = Kinds::from_manifest(new.manifest()).map_err(|error| PlanError::Kinds { which: "NEW", error })?;
    let new_version = Version { module: &new, kinds: &new_kinds };
    if let Some(file) = &args.file {
        let against = against.ok_or(PlanError::FileWithoutAgainst)?;
        let current = loader.load("--against", against).await?;
        let current_kinds = kinds_of(&current, &new_version)?;
        let inputs = inputs::from_files(&new_kinds.parent, file, args.owned.as_deref(), args.related.as_deref())?;
        let current_version = Version { module: &current, kinds: &current_kinds };
        return Ok(plan(current_version, new_version, &inputs, args.namespace.as_deref(), now));
    }
    let client = kube::Client::try_default().await.map_err(|error| PlanError::Connect(Box::new(error)))?;
    let current = match against {
        Some(against) => loader.load("--against", against).await?,
        None => {
            let name = args.logic_module.clone().unwrap_or_else(|| new.name().to_owned());
            let reference = source::serving_reference(&client, &name).await?;
            tracing::info!(logic_module = name, reference, "the current version: the one the LogicModule serves");
            loader.load("LogicModule status.activeReference", &VersionSource::Reference(reference)).await?
        }
    };
    let current_kinds = kinds_of(&current, &new_version)?;
    let current_version = Version { module: &current, kinds: &current_kinds };
    let inputs = inputs::from_cluster(&client, args.namespace.as_deref(), current_version, new_version).await?;
    Ok(plan(current_version, new_version, &inputs, args.namespace.as_deref(), now))
}

/// The current version's kinds, which must have the new one's parent kind;
/// the two must write as one field manager, as a swap requires.
fn kinds_of(current: &LogicModule, new: &Version<'_>) -> Result<Kinds, PlanError> {
    let kinds =
        Kinds::from_manifest(current.manifest()).map_err(|error| PlanError::Kinds { which: "CURRENT", error })?;
    let (new_manager, current_manager) = (&new.module.manifest().field_manager, &current.manifest().field_manager);
    if new_manager != current_manager {
        return Err(PlanError::FieldManagerChanged { new: new_manager.clone(), current: current_manager.clone() });
    }
    let (a, b) = (&new.kinds.parent.resource, &kinds.parent.resource);
    if a.group != b.group || a.kind != b.kind {
        return Err(PlanError::ParentKindChanged {
            new: format!("{} ({})", a.kind, a.api_version),
            current: format!("{} ({})", b.kind, b.api_version),
        });
    }
    Ok(kinds)
}

/// Both versions on every parent (of `namespace`, when given), compared.
pub fn plan(current: Version<'_>, new: Version<'_>, inputs: &Inputs, namespace: Option<&str>, now: &str) -> Plan {
    let owned_kinds = inputs::owned_kinds(current.kinds, new.kinds);
    let mut parents = Vec::with_capacity(inputs.parents.len());
    for (index, parent) in inputs.parents.iter().enumerate() {
        if namespace.is_some_and(|namespace| namespace_of(parent) != namespace) {
            continue;
        }
        let owned = inputs.owned_for(parent);
        let related = inputs.related_for(index);
        let given = Given {
            parent,
            owned,
            related: &related,
            now,
            problem: None,
            status_owned: None,
            schemas: Some(&inputs.schemas),
        };
        let before = offline::reconcile(current.module, current.kinds, &given);
        let after = offline::reconcile(new.module, new.kinds, &given);
        // The live objects the parent controls, of either version's kinds,
        // in its namespace.
        let live: Vec<Value> = owned
            .iter()
            .filter(|object| namespace_of(object) == namespace_of(parent))
            .filter(|object| {
                let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
                let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
                owned_kinds.iter().any(|k| k.is_group_kind_of(api_version, kind))
            })
            .cloned()
            .collect();
        let planned: ParentPlan = compare::compare(
            parent,
            &live,
            &Side { outcome: &before, kinds: current.kinds },
            &Side { outcome: &after, kinds: new.kinds },
        );
        tracing::debug!(
            parent = format!("{}/{}", planned.namespace, planned.name),
            changed = planned.changed(),
            fails = planned.fails(),
            "planned"
        );
        parents.push(planned);
    }
    Plan {
        new: VersionInfo::of(new.module),
        current: VersionInfo::of(current.module),
        parent_api_version: new.kinds.parent.resource.api_version.clone(),
        parent_kind: new.kinds.parent.name().to_owned(),
        parents,
    }
}
