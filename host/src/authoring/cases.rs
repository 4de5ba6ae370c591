//! Golden cases for `wasm-operator test`: plain YAML files, one case per
//! document, each the inputs of one reconcile (the parent, the owned and
//! related objects that exist, the time, and optionally why the writes
//! failed) and what the module should answer (the desired objects and/or
//! the status, or an error). A reconcile the operator recorded has the same
//! shape, with where it was recorded in `recorded` and the objects its
//! `status` call was given in `statusOwned` (`wasm-operator record`).
//!
//! ```yaml
//! name: hello publishes its message      # optional: the file name (and #n)
//! module: ../target/greeting.wasm        # optional, relative to this file
//! parent: {apiVersion: example.c5c3.io/v1, kind: Greeting, metadata: {name: hello}, spec: {message: hi}}
//! owned: []                              # objects that exist; the parent's children are passed
//! related: []                            # objects that exist; those `references` names are passed
//! now: "2026-01-01T00:00:00Z"            # optional (this is the default)
//! problem: null                          # optional: a refused write, for `status`
//! recorded: {}                           # optional, free-form: where a recorded reconcile comes from
//! statusOwned: [...]                     # optional: the objects `status` is given (a recorded
//!                                        # reconcile's: as the writes left them); default: the
//!                                        # desired objects, checked (invalid spec: the owned ones)
//! expect:
//!   desired: [...]                       # the objects, in order (null members ignored)
//!   status: {...}                        # the parent's new status
//!   againAfter: 30s                      # the timer the answer asks for (1.3), or none
//!   finalized: false                     # a parent being deleted: whether its module is done (1.3)
//!   error:                               # or: the reconcile fails
//!     kind: invalid                      # invalid | malformed | unsupported | refused | failed
//!     fields: [spec.message]             # every field path the error names
//!     message: must be a string          # a part of its message
//! ```
//!
//! The format itself (its types, reading and writing a file, the
//! expectation an outcome passes) is `planning/case.rs`, which the
//! operator's recorder shares; this file finds the cases and runs them.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::diff;
use super::parents;
use crate::planning::case::{
    Case, CaseError, DEFAULT_NOW, ErrorKind, Expect, ExpectedError, NO_TIMER, actual, timer_text,
};
use crate::planning::kinds::Kinds;
use crate::planning::offline::{self, Given};
use crate::planning::outcome::{Outcome, OutcomeError};
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::LogicModule;

/// The file in a case folder that names the module its cases run against.
pub const DIR_CONFIG: &str = "wasm-operator-test.yaml";
/// `wasm-operator-test.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirConfig {
    /// The module, relative to the folder.
    pub module: PathBuf,
}

/// The case files under `root` (a folder, searched recursively, or one
/// file), sorted; the folder's `wasm-operator-test.yaml` is not one.
pub fn case_files(root: &Path) -> Result<Vec<PathBuf>, CaseError> {
    if root.is_file() {
        return Ok(vec![root.to_owned()]);
    }
    let mut files = Vec::new();
    let mut folders = vec![root.to_owned()];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|error| CaseError::Read { path: folder.clone(), error })?;
        for entry in entries {
            let path = entry.map_err(|error| CaseError::Read { path: folder.clone(), error })?.path();
            let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
            if path.is_dir() {
                folders.push(path);
            } else if yaml && path.file_name().is_none_or(|name| name != DIR_CONFIG) {
                files.push(path);
            }
        }
    }
    if files.is_empty() {
        return Err(CaseError::NoCases { path: root.to_owned() });
    }
    files.sort();
    Ok(files)
}

/// The module a folder's `wasm-operator-test.yaml` names, if it has one.
pub fn dir_module(root: &Path) -> Result<Option<PathBuf>, CaseError> {
    let path = if root.is_dir() { root.join(DIR_CONFIG) } else { root.with_file_name(DIR_CONFIG) };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(CaseError::Read { path, error }),
    };
    let config: DirConfig =
        serde_norway::from_str(&text).map_err(|e| CaseError::Config { path: path.clone(), message: e.to_string() })?;
    Ok(Some(relative_to(&path, &config.module)))
}

fn relative_to(file: &Path, path: &Path) -> PathBuf {
    match file.parent() {
        Some(folder) if path.is_relative() => folder.join(path),
        _ => path.to_owned(),
    }
}

/// Which module a case runs against: `--module`, else the case's
/// `module:` (relative to its file), else the folder's.
pub fn module_for(cli: Option<&Path>, case: &Case, file: &Path, folder: Option<&Path>) -> Option<PathBuf> {
    cli.map(Path::to_owned)
        .or_else(|| case.module.as_deref().map(|m| relative_to(file, m)))
        .or(folder.map(Path::to_owned))
}

/// Modules loaded once each, by path.
pub struct Modules<'e> {
    engine: &'e ModuleEngine,
    allow_precompiled: bool,
    loaded: HashMap<PathBuf, Result<(LogicModule, Kinds), String>>,
}

impl<'e> Modules<'e> {
    pub fn new(engine: &'e ModuleEngine, allow_precompiled: bool) -> Self {
        Self { engine, allow_precompiled, loaded: HashMap::new() }
    }

    pub fn get(&mut self, path: &Path) -> Result<&(LogicModule, Kinds), String> {
        let (engine, allow_precompiled) = (self.engine, self.allow_precompiled);
        self.loaded
            .entry(path.to_owned())
            .or_insert_with(|| {
                let module = LogicModule::from_file(engine, path, allow_precompiled).map_err(|e| e.to_string())?;
                let kinds = Kinds::from_manifest(module.manifest()).map_err(|e| format!("{}: {e}", path.display()))?;
                Ok((module, kinds))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// One case, run: whether it passed, the report of a failure, and the
/// expectation the actual answer gives (for `--update`).
pub struct Verdict {
    pub passed: bool,
    pub report: Vec<String>,
    pub actual: Expect,
}

/// Runs `case` as the operator would reconcile its parent.
pub fn run(module: &LogicModule, kinds: &Kinds, case: &Case) -> Verdict {
    let (parent, _) = parents::complete(&case.parent);
    let now = case.now.as_deref().unwrap_or(DEFAULT_NOW);
    let given = Given {
        parent: &parent,
        owned: &case.owned,
        related: &case.related,
        now,
        problem: case.problem.as_deref(),
        status_owned: case.status_owned.as_deref(),
        schemas: None,
    };
    let outcome = offline::reconcile(module, kinds, &given);
    let mut report = compare(&case.expect, &outcome);
    if !report.is_empty() {
        report.extend(outcome.ignored.iter().map(|ignored| format!("note: ignored {ignored}")));
        report.extend(outcome.pruned.iter().map(|field| crate::authoring::render::pruned_note("note", field)));
    }
    Verdict { passed: report.is_empty(), report, actual: actual(&case.expect, &outcome) }
}

/// What differs between `expect` and `outcome`; empty when it passes.
pub fn compare(expect: &Expect, outcome: &Outcome) -> Vec<String> {
    let mut report = Vec::new();
    let checks_nothing = expect.desired.is_none()
        && expect.status.is_none()
        && expect.error.is_none()
        && expect.again_after.is_none()
        && expect.finalized.is_none();
    if checks_nothing {
        report.push(
            "the case expects nothing: give expect.desired, expect.status, expect.error, expect.againAfter or expect.finalized (or run with --update)"
                .to_owned(),
        );
        return report;
    }
    if let Some(expected) = &expect.again_after {
        report.extend(compare_timer(expected, outcome.again_after));
    }
    if let Some(expected) = expect.finalized
        && outcome.finalized != Some(expected)
    {
        report.push(match outcome.finalized {
            Some(done) => format!("expected the module to answer finalized: {expected}, it answered {done}"),
            None => format!(
                "expected finalized: {expected}, but the module was not asked to finalize (the parent is not being deleted, it lacks the module's finalizer, or the module does not finalize)"
            ),
        });
    }
    match (&expect.error, &outcome.error) {
        (None, Some(error)) => report.push(format!("expected no error, got {}: {error}", error.kind())),
        (Some(expected), None) => {
            report.push(format!("expected a {} error, but the reconcile succeeded", expected.kind.name()));
        }
        (Some(expected), Some(error)) => report.extend(compare_error(expected, error)),
        (None, None) => {}
    }
    if let Some(expected) = &expect.desired {
        let expected = Value::Array(expected.clone());
        let actual = Value::Array(outcome.desired.clone());
        if !diff::same(&expected, &actual) {
            report.push(format!("desired objects differ:\n{}", diff::unified(&expected, &actual)));
        }
    }
    if let Some(expected) = &expect.status {
        match &outcome.status {
            Some(actual) if diff::same(expected, actual) => {}
            Some(actual) => report.push(format!("status differs:\n{}", diff::unified(expected, actual))),
            None => report.push("expected a status, but none was computed".to_owned()),
        }
    }
    report
}

/// The timer a case expects (a duration, or `none`) against the answer's.
fn compare_timer(expected: &str, actual: Option<std::time::Duration>) -> Option<String> {
    let wanted = if expected == NO_TIMER {
        None
    } else {
        match crate::duration::parse_duration(expected) {
            Ok(duration) => Some(duration),
            Err(problem) => return Some(format!("expect.againAfter: {problem} (a duration such as 30s, or none)")),
        }
    };
    (wanted != actual)
        .then(|| format!("expected the answer to ask for a timer of {expected}, it asks for {}", timer_text(actual)))
}

fn compare_error(expected: &ExpectedError, error: &OutcomeError) -> Vec<String> {
    let mut report = Vec::new();
    let kind = ErrorKind::of(error);
    if kind != expected.kind {
        report.push(format!("expected a {} error, got {}: {error}", expected.kind.name(), kind.name()));
    }
    let paths: BTreeSet<String> = error.paths().into_iter().collect();
    let wanted: BTreeSet<String> = expected.fields.iter().cloned().collect();
    if !expected.fields.is_empty() && paths != wanted {
        report.push(format!(
            "expected the error to name {}, it names {}: {error}",
            list(&wanted),
            if paths.is_empty() { "no field".to_owned() } else { list(&paths) }
        ));
    }
    if let Some(message) = &expected.message
        && !error.to_string().contains(message.as_str())
    {
        report.push(format!("expected the error's message to contain {message:?}, it is: {error}"));
    }
    report
}

fn list(paths: &BTreeSet<String>) -> String {
    paths.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::call_error::{FieldError, LogicError};

    fn invalid(paths: &[&str]) -> OutcomeError {
        OutcomeError::Spec(LogicError::Invalid(paths.iter().map(|p| FieldError::new(*p, "is wrong")).collect()))
    }

    #[test]
    fn an_expected_error_matches_by_kind_fields_and_message() {
        let expected = ExpectedError { kind: ErrorKind::Invalid, fields: vec!["spec.a".into()], message: None };
        assert!(compare_error(&expected, &invalid(&["spec.a"])).is_empty());
        assert_eq!(compare_error(&expected, &invalid(&["spec.a", "spec.b"])).len(), 1);
        let refused = OutcomeError::Refused { problem: "object 1: ConfigMap c is answered twice".into() };
        assert_eq!(compare_error(&expected, &refused).len(), 2, "kind and fields");
        let by_message =
            ExpectedError { kind: ErrorKind::Refused, fields: Vec::new(), message: Some("answered twice".into()) };
        assert!(compare_error(&by_message, &refused).is_empty());
    }

    #[test]
    fn the_outcome_is_compared_ignoring_nulls_and_updates_what_the_case_checks() {
        let outcome = Outcome {
            desired: vec![json!({"kind": "ConfigMap", "data": {"a": "1"}})],
            status: Some(json!({"phase": "ok"})),
            ..Outcome::default()
        };
        let expect = Expect { status: Some(json!({"phase": "ok", "gone": null})), ..Expect::default() };
        assert!(compare(&expect, &outcome).is_empty());
        let wrong = Expect { status: Some(json!({"phase": "not ok"})), ..Expect::default() };
        let report = compare(&wrong, &outcome);
        assert!(report[0].contains("-phase: not ok\n+phase: ok"), "{report:?}");
        assert_eq!(actual(&wrong, &outcome), Expect { status: outcome.status.clone(), ..Expect::default() });
        let everything = actual(&Expect::default(), &outcome);
        assert_eq!(everything.desired.as_ref(), Some(&outcome.desired));
        assert!(compare(&Expect::default(), &outcome)[0].contains("expects nothing"));
    }

    #[test]
    fn the_module_comes_from_the_command_line_then_the_case_then_the_folder() {
        let case: Case = serde_norway::from_str("module: m.wasm\nparent: {}\n").expect("a case");
        let file = Path::new("cases/sub/a.yaml");
        let folder = Some(Path::new("cases/dir.wasm"));
        assert_eq!(module_for(Some(Path::new("cli.wasm")), &case, file, folder), Some(PathBuf::from("cli.wasm")));
        assert_eq!(module_for(None, &case, file, folder), Some(PathBuf::from("cases/sub/m.wasm")));
        let bare: Case = serde_norway::from_str("parent: {}\n").expect("a case");
        assert_eq!(module_for(None, &bare, file, folder), Some(PathBuf::from("cases/dir.wasm")));
        assert_eq!(module_for(None, &bare, file, None), None);
    }
}
