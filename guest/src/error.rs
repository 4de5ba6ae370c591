//! The module's failures. They mirror the WIT `errors` interface one to one,
//! so the component glue only converts and never decides.

use std::fmt;

/// One problem, located by a JSON field path such as
/// `spec.security.tls.certificateSecretRef.name`.
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

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not JSON, or not the expected shape.
    #[error("malformed input: {}", join(.0))]
    Malformed(Vec<FieldError>),
    /// Parsed, but breaks validation rules.
    #[error("invalid: {}", join(.0))]
    Invalid(Vec<FieldError>),
    /// A request outside what this module knows (e.g. an unknown child kind).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Error {
    pub fn malformed(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Malformed(vec![FieldError::new(path, message)])
    }

    /// Every field error this failure carries (none for `Unsupported`).
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            Error::Malformed(errors) | Error::Invalid(errors) => errors,
            Error::Unsupported(_) => &[],
        }
    }
}

fn join(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}
