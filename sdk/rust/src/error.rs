//! What a module answers when it cannot do what the host asks: the
//! contract's `error` variant, with every problem located by a field path.

use std::fmt;

/// One problem, at a field path such as `spec.replicas` (empty: the whole
/// object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

/// A module's refusal. `Invalid` is the one a module author returns most:
/// the host changes and deletes nothing for the parent and reports every
/// field error in its status (through `problem`) and a Warning event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is not JSON, or not the expected shape.
    #[error("malformed: {}", join(.0))]
    Malformed(Vec<FieldError>),
    /// The input parsed but breaks the module's rules.
    #[error("invalid: {}", join(.0))]
    Invalid(Vec<FieldError>),
    /// The host asked for something this module does not do.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

fn join(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

impl Error {
    /// `path` breaks a rule: `Error::invalid("spec.replicas", "must be at least 1")`.
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid(vec![FieldError { path: path.into(), message: message.into() }])
    }

    pub fn malformed(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Malformed(vec![FieldError { path: path.into(), message: message.into() }])
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Error::Unsupported(message.into())
    }

    /// One more problem of the same kind (an `Unsupported` stays as it is).
    #[must_use]
    pub fn and(mut self, path: impl Into<String>, message: impl Into<String>) -> Self {
        if let Error::Malformed(list) | Error::Invalid(list) = &mut self {
            list.push(FieldError { path: path.into(), message: message.into() });
        }
        self
    }

    /// Every field error it carries (none for `Unsupported`).
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            Error::Malformed(list) | Error::Invalid(list) => list,
            Error::Unsupported(_) => &[],
        }
    }
}

/// Collects invalid fields, so a module reports every broken rule at once.
///
/// ```
/// # use wasm_operator_sdk::{Error, Problems};
/// let mut problems = Problems::default();
/// problems.check(false, "spec.replicas", "must be at least 1");
/// problems.check(true, "spec.image", "must not be empty");
/// assert_eq!(problems.into_result(), Err(Error::invalid("spec.replicas", "must be at least 1")));
/// ```
#[derive(Debug, Default)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    /// Records `message` at `path` unless `ok`.
    pub fn check(&mut self, ok: bool, path: impl Into<String>, message: impl Into<String>) {
        if !ok {
            self.add(path, message);
        }
    }

    pub fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError { path: path.into(), message: message.into() });
    }

    pub fn into_result(self) -> Result<(), Error> {
        if self.0.is_empty() { Ok(()) } else { Err(Error::Invalid(self.0)) }
    }
}

/// A JSON text that does not parse as `what`, located at the failing field.
/// A missing field is located at itself (`spec.credentialsSecret:
/// required`, as the TypeScript and Python SDKs' `required` report it),
/// not at the object that lacks it, where serde's path ends.
pub(crate) fn parse_error(what: &str, error: serde_path_to_error::Error<serde_json::Error>) -> Error {
    let path = error.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let error = error.into_inner();
    match missing_field(&error.to_string()) {
        Some(field) if path.is_empty() => Error::malformed(field, "required"),
        Some(field) => Error::malformed(format!("{path}.{field}"), "required"),
        None => Error::malformed(path, format!("{what}: {error}")),
    }
}

/// The field of serde's "missing field `name`".
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split_once('`').map(|(field, _)| field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_the_host_prints_them() {
        let error = Error::invalid("spec.replicas", "must be at least 1").and("spec.image", "must not be empty");
        assert_eq!(error.to_string(), "invalid: spec.replicas: must be at least 1; spec.image: must not be empty");
        assert_eq!(error.field_errors().len(), 2);
        assert_eq!(Error::unsupported("no").and("x", "y"), Error::Unsupported("no".into()));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Parent {
        spec: Spec,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Spec {
        credentials_secret: String,
        #[serde(default)]
        ports: Vec<Port>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Port {
        port: u16,
    }

    fn parse(value: serde_json::Value) -> Error {
        serde_path_to_error::deserialize::<_, Parent>(value)
            .map(|_| ())
            .map_err(|e| parse_error("parent", e))
            .unwrap_err()
    }

    #[test]
    fn a_missing_field_is_named_by_its_own_path() {
        let missing = parse(serde_json::json!({"spec": {}}));
        assert_eq!(missing.to_string(), "malformed: spec.credentialsSecret: required");
        let in_a_list = parse(serde_json::json!({"spec": {"credentialsSecret": "s", "ports": [{"port": 1}, {}]}}));
        assert_eq!(in_a_list.to_string(), "malformed: spec.ports[1].port: required");
        assert_eq!(parse(serde_json::json!({})).to_string(), "malformed: spec: required");
        // Any other mismatch stays where serde found it.
        let wrong = parse(serde_json::json!({"spec": {"credentialsSecret": 7}}));
        assert_eq!(wrong.field_errors()[0].path, "spec.credentialsSecret");
        assert!(wrong.to_string().contains("parent: invalid type: integer `7`"), "{wrong}");
    }

    #[test]
    fn problems_collect_every_broken_rule() {
        let mut problems = Problems::default();
        problems.check(false, "a", "first");
        problems.check(false, "b", "second");
        let Err(Error::Invalid(list)) = problems.into_result() else { panic!("two problems") };
        assert_eq!(list.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(Problems::default().into_result(), Ok(()));
    }
}
