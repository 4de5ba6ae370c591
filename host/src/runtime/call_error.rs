//! How a call into a module ends when it does not answer: the module's own
//! error (the contract's `error` variant, with field paths), or the module
//! itself failing (a trap, its deadline, its memory limit, a refused answer).

use wasmtime::{Store, Trap};

use super::answer::RefusedAnswer;
use super::bindings::exports::wasm_operator::controller::reconciler as wit;
use super::call_state::CallState;
use super::engine::{DEADLINE, MEMORY_LIMIT_BYTES};

/// One problem the module found, at a field path in the parent (`spec.replicas`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

/// The module's own answer that it cannot do what was asked: the contract's
/// `error` variant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogicError {
    #[error("malformed input: {}", join(.0))]
    Malformed(Vec<FieldError>),
    #[error("invalid: {}", join(.0))]
    Invalid(Vec<FieldError>),
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl LogicError {
    /// Every field error it carries (none for `Unsupported`).
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            LogicError::Malformed(errors) | LogicError::Invalid(errors) => errors,
            LogicError::Unsupported(_) => &[],
        }
    }
}

fn join(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

pub fn field_errors(list: Vec<wit::FieldError>) -> Vec<FieldError> {
    list.into_iter().map(|e| FieldError { path: e.path, message: e.message }).collect()
}

impl From<wit::Error> for LogicError {
    fn from(error: wit::Error) -> Self {
        match error {
            wit::Error::Malformed(list) => LogicError::Malformed(field_errors(list)),
            wit::Error::Invalid(list) => LogicError::Invalid(field_errors(list)),
            wit::Error::Unsupported(message) => LogicError::Unsupported(message),
        }
    }
}

/// A failed call: the module's own answer, or the module itself failing.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Logic(#[from] LogicError),
    #[error("the logic module trapped: {0:#}")]
    Trapped(wasmtime::Error),
    /// A trap after the module wrote an `error` line: an SDK's panic hook
    /// or uncaught exception handler writes the message there first.
    #[error("the logic module panicked: {message}")]
    Panicked { message: String },
    #[error("the logic module ran past its {}-second deadline", DEADLINE.as_secs())]
    DeadlineExceeded,
    #[error("the logic module ran out of memory (limit {} MiB per call)", MEMORY_LIMIT_BYTES >> 20)]
    OutOfMemory,
    #[error("instantiating the logic module: {0:#}")]
    Instantiate(wasmtime::Error),
    /// An answer refused as it crossed the component boundary (too many
    /// objects, too large, not UTF-8): never copied whole into the host.
    #[error("the logic module answered something the host refuses: {0}")]
    Refused(RefusedAnswer),
}

impl CallError {
    /// A short, stable name for what went wrong (event reasons, conditions).
    pub fn reason(&self) -> &'static str {
        match self {
            CallError::Logic(_) => "ModuleRefused",
            CallError::Trapped(_) | CallError::Panicked { .. } => "ModuleTrapped",
            CallError::DeadlineExceeded => "ModuleDeadlineExceeded",
            CallError::OutOfMemory => "ModuleOutOfMemory",
            CallError::Instantiate(_) => "ModuleInstantiationFailed",
            CallError::Refused(_) => "ModuleInvalidOutput",
        }
    }

    /// A failure of the module itself, not an answer from it.
    pub fn is_module_failure(&self) -> bool {
        !matches!(self, CallError::Logic(_))
    }
}

pub type CallResult<T> = Result<T, CallError>;

/// What a failed call into the store was: the deadline, the memory limit,
/// a panic the module reported before trapping, or another trap. For hosts
/// binding more of a module's exports.
pub fn failure(store: &Store<CallState>, error: wasmtime::Error) -> CallError {
    if let Some(refused) = error.downcast_ref::<RefusedAnswer>() {
        CallError::Refused(refused.clone())
    } else if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        CallError::DeadlineExceeded
    } else if store.data().limits.refused_growth {
        CallError::OutOfMemory
    } else if let Some(message) = store.data().log.last_error() {
        CallError::Panicked { message: message.to_owned() }
    } else {
        CallError::Trapped(error)
    }
}
