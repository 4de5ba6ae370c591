//! The golden-case format, as `wasm-operator test` reads it and the
//! operator's recorder writes it: plain YAML, one case per document, each
//! the inputs of one reconcile and what the module should answer
//! (`authoring/cases.rs` documents the fields and runs them). Here so that
//! the operator (`recording/export.rs`) and the authoring commands share
//! it without the operator depending on the commands.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::planning::outcome::{Outcome, OutcomeError};

/// The time a case without `now` runs at.
pub const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("reading {}: {error}", .path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("writing {}: {error}", .path.display())]
    Write { path: PathBuf, error: std::io::Error },
    #[error("{}: document {document}: {message}", .path.display())]
    Parse { path: PathBuf, document: usize, message: String },
    #[error("{}: {message}", .path.display())]
    Config { path: PathBuf, message: String },
    #[error("{} holds no case files (*.yaml)", .path.display())]
    NoCases { path: PathBuf },
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Value>,
    pub parent: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The objects `status` is given instead of the desired (resp. owned)
    /// ones: what a recorded reconcile's `status` call was given.
    #[serde(rename = "statusOwned", default, skip_serializing_if = "Option::is_none")]
    pub status_owned: Option<Vec<Value>>,
    #[serde(default)]
    pub expect: Expect,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExpectedError>,
    /// The timer the answer asks for (`30s`, `1m`), or `none`.
    #[serde(rename = "againAfter", default, skip_serializing_if = "Option::is_none")]
    pub again_after: Option<String>,
    /// For a parent being deleted (`metadata.deletionTimestamp`, holding
    /// its module's finalizer): whether the module is done finalizing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized: Option<bool>,
}

/// How a case writes "no timer".
pub const NO_TIMER: &str = "none";

/// The case's form of an answer's timer.
pub fn timer_text(timer: Option<std::time::Duration>) -> String {
    timer.map_or_else(|| NO_TIMER.to_owned(), crate::duration::format_duration)
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExpectedError {
    pub kind: ErrorKind,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The module answered `invalid` (a bad spec).
    Invalid,
    /// The module answered `malformed`.
    Malformed,
    /// The module answered `unsupported`.
    Unsupported,
    /// The operator would refuse the module's answer (`ModuleInvalidOutput`).
    Refused,
    /// The module failed: a trap, its deadline or memory limit.
    Failed,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "invalid",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Refused => "refused",
            ErrorKind::Failed => "failed",
        }
    }

    pub fn of(error: &OutcomeError) -> Self {
        match error.kind() {
            "invalid" => ErrorKind::Invalid,
            "malformed" => ErrorKind::Malformed,
            "unsupported" => ErrorKind::Unsupported,
            "refused" => ErrorKind::Refused,
            _ => ErrorKind::Failed,
        }
    }
}

/// The cases of one file, in document order.
pub struct CaseFile {
    pub path: PathBuf,
    pub cases: Vec<Case>,
}

impl CaseFile {
    pub fn read(path: &Path) -> Result<Self, CaseError> {
        let text = std::fs::read_to_string(path).map_err(|error| CaseError::Read { path: path.to_owned(), error })?;
        let mut cases = Vec::new();
        for (index, document) in serde_norway::Deserializer::from_str(&text).enumerate() {
            let parse_error =
                |message: String| CaseError::Parse { path: path.to_owned(), document: index + 1, message };
            let value: Value = Deserialize::deserialize(document).map_err(|e| parse_error(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let case: Case = serde_json::from_value(value).map_err(|e| parse_error(e.to_string()))?;
            if !case.parent.is_object() {
                return Err(parse_error("parent: a mapping (the parent object) is required".into()));
            }
            cases.push(case);
        }
        Ok(Self { path: path.to_owned(), cases })
    }

    /// The file's text: each case a YAML document.
    pub fn text(&self) -> String {
        // In the struct's order (the inputs, then the expectation).
        let documents: Vec<String> = self
            .cases
            .iter()
            .map(|case| serde_norway::to_string(case).unwrap_or_else(|error| format!("# not printable: {error}\n")))
            .collect();
        documents.join("---\n")
    }

    pub fn write(&self) -> Result<(), CaseError> {
        std::fs::write(&self.path, self.text()).map_err(|error| CaseError::Write { path: self.path.clone(), error })
    }

    /// The case's name: its own, else the file's (and its place in the file).
    pub fn case_name(&self, index: usize, root: &Path) -> String {
        let file = self.path.strip_prefix(root).unwrap_or(&self.path).display().to_string();
        match (&self.cases[index].name, self.cases.len()) {
            (Some(name), _) => format!("{file}: {name}"),
            (None, 1) => file,
            (None, _) => format!("{file}#{}", index + 1),
        }
    }
}

/// The expectation the outcome would pass, keeping the parts `previous`
/// checks (all of them when it checks none).
pub fn actual(previous: &Expect, outcome: &Outcome) -> Expect {
    let everything = previous.desired.is_none() && previous.status.is_none();
    let error = outcome.error.as_ref().map(expected_error);
    let desired =
        (outcome.error.is_none() && (everything || previous.desired.is_some())).then(|| outcome.desired.clone());
    let status = outcome.status.clone().filter(|_| everything || previous.status.is_some());
    let again_after = (previous.again_after.is_some() || (everything && outcome.again_after.is_some()))
        .then(|| timer_text(outcome.again_after));
    let finalized = outcome.finalized.filter(|_| everything || previous.finalized.is_some());
    Expect { desired, status, error, again_after, finalized }
}

/// The expectation an error passes: its kind, the fields it names and,
/// where it says more than its kind, its message.
pub fn expected_error(error: &OutcomeError) -> ExpectedError {
    let kind = ErrorKind::of(error);
    let message = match error {
        OutcomeError::Spec(crate::runtime::call_error::LogicError::Unsupported(message)) => Some(message.clone()),
        OutcomeError::Refused { problem } => Some(problem.clone()),
        _ => None,
    };
    ExpectedError { kind, fields: error.paths(), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_reads_and_writes_back_the_same() {
        let text = "name: hello\nparent:\n  apiVersion: example.c5c3.io/v1\n  kind: Greeting\n  metadata:\n    name: hello\n\
                    now: 2026-01-01T00:00:00Z\nexpect:\n  error:\n    kind: invalid\n    fields:\n    - spec.message\n";
        let case: Case = serde_norway::from_str(text).expect("a case");
        assert_eq!(case.expect.error.as_ref().map(|e| e.kind), Some(ErrorKind::Invalid));
        let file = CaseFile { path: PathBuf::from("x.yaml"), cases: vec![case.clone()] };
        let again: Case = serde_norway::from_str(&file.text()).expect("reads back");
        assert_eq!(again, case);
        let unknown = serde_norway::from_str::<Case>("parent: {}\nexpected: {}\n").expect_err("a typo");
        assert!(unknown.to_string().contains("unknown field `expected`"), "{unknown}");
    }
}
