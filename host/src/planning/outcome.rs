//! What the operator would do for a parent, reconciled offline
//! (`offline.rs`): the objects it would write and how, the children it would
//! delete, the parent's new status, or why the reconcile did not apply.

use serde_json::Value;

use crate::planning::applied::Change;
use crate::planning::step::{StepError, Write};
use crate::runtime::call_error::{CallError, LogicError};

/// What the operator would do for the parent.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The objects it would create or update, in order, checked (for a
    /// module that applies: as applied, without `status` and the metadata
    /// the server sets, and without the host's digest annotation).
    pub desired: Vec<Value>,
    /// The write each of `desired` needs (the same order).
    pub writes: Vec<ObjectWrite>,
    /// Owned objects the parent controls that `desired` left out: the
    /// operator would delete them.
    pub deleted: Vec<Value>,
    /// The parent's new status, when the reconcile got that far.
    pub status: Option<Value>,
    /// What `status` was told went wrong.
    pub problem: Option<String>,
    /// Why the reconcile did not apply.
    pub error: Option<OutcomeError>,
    /// Given objects the operator would not pass to the module, and why.
    pub ignored: Vec<String>,
    /// Fields of the status answer the parent's schema prunes (the API
    /// server drops them; `status` is the answer without them).
    pub pruned: Vec<String>,
    /// The parent is being deleted: the operator calls nothing and writes
    /// nothing (the garbage collector removes the children).
    pub deleting: bool,
    /// The timer the answer asked for (`reach`, 1.3): the operator would
    /// reconcile the parent again after this long with nothing changed.
    pub again_after: Option<std::time::Duration>,
    /// For a parent being deleted that its module finalizes: whether the
    /// module is done (the operator would then delete what remains and
    /// remove its finalizer).
    pub finalized: Option<bool>,
}

/// The write one desired object needs, and for an apply to an object that
/// exists, what it would change (`planning/applied.rs`): the decision the
/// operator makes, on the given objects.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectWrite {
    pub write: Write,
    pub changes: Vec<Change>,
}

#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// The module's own answer to `desired`: the spec is invalid (or
    /// malformed, or asks what it does not do). Nothing is written; the
    /// status is told.
    #[error("{0}")]
    Spec(LogicError),
    /// An answer the operator refuses (`ModuleInvalidOutput`): nothing is
    /// written and the parent gets `Stalled=True`.
    #[error("the operator would refuse the module's answer: {problem}")]
    Refused { problem: String },
    /// The module failed (a trap, its deadline or memory limit), or answered
    /// an error where the operator expects none.
    #[error("{function}: {error}")]
    Module { function: &'static str, error: CallError },
}

impl From<StepError> for OutcomeError {
    fn from(error: StepError) -> Self {
        match error {
            StepError::Module { function, source } => OutcomeError::Module { function, error: source },
            StepError::Refused(refused) => OutcomeError::Refused { problem: refused.to_string() },
        }
    }
}

impl OutcomeError {
    /// The short name a case's expectation uses: `invalid`, `malformed`,
    /// `unsupported`, `refused` or `failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            OutcomeError::Spec(LogicError::Invalid(_)) => "invalid",
            OutcomeError::Spec(LogicError::Malformed(_)) => "malformed",
            OutcomeError::Spec(LogicError::Unsupported(_)) => "unsupported",
            OutcomeError::Refused { .. } | OutcomeError::Module { error: CallError::Refused(_), .. } => "refused",
            OutcomeError::Module { .. } => "failed",
        }
    }

    /// The reason of the `Stalled` condition the operator would set: none
    /// for a spec error (the module's status reports it).
    pub fn stalled_reason(&self) -> &'static str {
        match self {
            OutcomeError::Spec(_) => "",
            OutcomeError::Refused { .. } => "ModuleInvalidOutput",
            OutcomeError::Module { error, .. } => error.reason(),
        }
    }

    /// The field paths it names.
    pub fn paths(&self) -> Vec<String> {
        match self {
            OutcomeError::Spec(error) => error.field_errors().iter().map(|e| e.path.clone()).collect(),
            _ => Vec::new(),
        }
    }
}
