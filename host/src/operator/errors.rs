//! Why a reconcile failed (and whether that counts against a new module
//! version), and why the operator could not start.

use crate::operator::endpoints::http;
use crate::operator::leader::LeaderError;
use crate::planning::kinds::KindError;
use crate::planning::step::StepError;
use crate::runtime::answer::{Refusal, RefusedAnswer};
use crate::runtime::call_error::{CallError, LogicError};

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the logic module failed in {function}: {source}")]
    Module { function: &'static str, source: CallError },
    #[error("the logic module answered something the host refuses: {0}")]
    InvalidOutput(RefusedAnswer),
    #[error("{verb} {kind} {namespace}/{name}: {source}")]
    Api { verb: &'static str, kind: String, namespace: String, name: String, source: Box<kube::Error> },
    #[error("{kind} {namespace}/{name}: {source}")]
    Refused { kind: String, namespace: String, name: String, source: LogicError },
    #[error("{kind} {namespace}/{name}: still conflicting after {attempts} attempts")]
    Conflict { kind: String, namespace: String, name: String, attempts: u32 },
    #[error("the module no longer wants the {kind} {name} it asked for a moment ago")]
    Vanished { kind: String, name: String },
    #[error("the parent has no namespace or uid")]
    MissingMetadata,
    /// `kind`: the kind, or the kinds read together, as `A, B`.
    #[error("reading how the API server merges {kind}: {source}")]
    Schema { kind: String, source: crate::operator::watching::kind_schemas::KindSchemaError },
}

impl From<StepError> for ReconcileError {
    fn from(error: StepError) -> Self {
        match error {
            StepError::Module { function, source } => ReconcileError::Module { function, source },
            StepError::Refused(refused) => ReconcileError::InvalidOutput(refused),
        }
    }
}

impl ReconcileError {
    /// Whether this failure is the module's doing, which counts against a
    /// newly swapped-in version: the module failing, or the API server
    /// refusing what it produced (400, 422). Conflicts and outages do not.
    pub fn counts_against_the_module(&self) -> bool {
        match self {
            ReconcileError::Api { verb, source, .. } => {
                matches!(**source, kube::Error::Api(ref status) if matches!(*verb, "create" | "update" | "apply") && (status.code == 400 || status.code == 422))
            }
            other => other.module_failure().is_some(),
        }
    }

    /// Why the module itself failed, if it did: a trap, its deadline, its
    /// memory limit, or output the host cannot use.
    pub fn module_failure(&self) -> Option<&'static str> {
        match self {
            ReconcileError::Module { source, .. } if source.is_module_failure() => Some(source.reason()),
            ReconcileError::InvalidOutput(_) => Some("ModuleInvalidOutput"),
            _ => None,
        }
    }

    /// Why the host refused the module's answer, if it did: as it crossed
    /// the component boundary, or when checked.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            ReconcileError::InvalidOutput(refused)
            | ReconcileError::Module { source: CallError::Refused(refused), .. } => Some(refused.reason),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The cause is the source, not repeated in this text (a `{:#}` chain
    /// prints both).
    #[error("module {module} cannot be run")]
    Kinds { module: String, source: KindError },
    #[error("modules {first} and {second} both reconcile {kind}; one controller per parent kind")]
    SameParent { kind: String, first: String, second: String },
    #[error(transparent)]
    Identity(#[from] crate::operator::identity::IdentityError),
    #[error("module {module} is refused")]
    Access { module: String, source: crate::operator::identity::AccessError },
    #[error("no module to run")]
    NoModules,
    #[error(transparent)]
    Serve(#[from] http::ServeError),
    #[error(transparent)]
    Leadership(#[from] LeaderError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_whose_kinds_cannot_be_served_names_its_cause_once() {
        let error = OperatorError::Kinds { module: "greeting".into(), source: KindError::NothingOwned };
        let chain = format!("{:#}", anyhow::Error::new(error).context("the operator stopped"));
        assert_eq!(
            chain,
            "the operator stopped: module greeting cannot be run: the module manifest names no owned kinds"
        );
    }
}
