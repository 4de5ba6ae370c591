//! `render`: what the operator would write for each parent in a file,
//! without a cluster: the objects it would create or update, in reconcile
//! order, then the parent with the status it would write.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::documents::{self, DocumentError};
use super::parents::{self, Filled};
use crate::planning::given_objects;
use crate::planning::kinds::{Kind, KindError, Kinds};
use crate::planning::offline::{self, Given};
use crate::planning::outcome::{Outcome, OutcomeError};
use crate::runtime::logic_module::LogicModule;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("reading {}: {error}", .path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{}: {error}", .path.display())]
    Documents { path: PathBuf, error: DocumentError },
    #[error("{}: no objects in it", .path.display())]
    Empty { path: PathBuf },
    #[error("--now {text:?} is not an RFC 3339 time (such as 2026-01-01T00:00:00Z): {error}")]
    Now { text: String, error: String },
    #[error("the module's kinds: {0}")]
    Kinds(#[from] KindError),
}

/// The objects of a file (`-`: stdin).
pub fn read_objects(path: &Path) -> Result<Vec<Value>, InputError> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|error| InputError::Read { path: path.to_owned(), error })?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|error| InputError::Read { path: path.to_owned(), error })?
    };
    documents::objects(&text).map_err(|error| InputError::Documents { path: path.to_owned(), error })
}

/// `text` if it is an RFC 3339 time.
pub fn check_now(text: &str) -> Result<String, InputError> {
    text.parse::<jiff::Timestamp>()
        .map(|_| text.to_owned())
        .map_err(|error| InputError::Now { text: text.to_owned(), error: error.to_string() })
}

/// One parent of the file, rendered.
pub struct Rendered {
    /// `document 2 (Greeting default/hello)`.
    pub what: String,
    pub filled: Filled,
    /// The parent as the module saw it, with its new status when there is one.
    pub parent: Value,
    pub outcome: Result<Outcome, String>,
}

impl Rendered {
    /// What goes to stdout: the objects, then the parent with its status.
    pub fn printed(&self) -> Vec<Value> {
        let Ok(outcome) = &self.outcome else { return Vec::new() };
        let mut objects = outcome.desired.clone();
        if let Some(status) = &outcome.status {
            let mut parent = self.parent.clone();
            if let Some(map) = parent.as_object_mut() {
                map.insert("status".into(), status.clone());
            }
            objects.push(parent);
        }
        objects
    }

    /// What goes to stderr: the failure, what was filled in, what the
    /// operator would delete and the given objects it would not pass.
    pub fn notes(&self) -> (Vec<String>, bool) {
        let mut notes = Vec::new();
        let what = &self.what;
        let namespace = given_objects::namespace_of(&self.parent);
        let uid = self.parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        let outcome = match &self.outcome {
            Ok(outcome) => outcome,
            Err(problem) => {
                notes.push(format!("{what}: {problem}"));
                return (notes, true);
            }
        };
        if self.filled.namespace {
            notes.push(format!("{what}: no metadata.namespace; rendered in {namespace}"));
        }
        if self.filled.uid {
            notes.push(format!("{what}: no metadata.uid; rendered with uid {uid}"));
        }
        if outcome.deleting {
            notes.push(format!("{what}: being deleted (metadata.deletionTimestamp): the operator writes nothing"));
        }
        notes.extend(outcome.ignored.iter().map(|ignored| format!("{what}: ignored {ignored}")));
        notes.extend(outcome.pruned.iter().map(|field| pruned_note(what, field)));
        for object in &outcome.deleted {
            notes.push(format!("{what}: the operator would delete {}", documents::describe(object)));
        }
        match &outcome.error {
            None => {}
            Some(OutcomeError::Spec(error)) => {
                let fields: Vec<String> = error.field_errors().iter().map(|e| format!("\n  {e}")).collect();
                let message = if fields.is_empty() { error.to_string() } else { error_kind(error) + &fields.concat() };
                let status = match &outcome.status {
                    Some(_) => format!("the status it would write, told {:?}, is printed", error.to_string()),
                    None => "and no status".to_owned(),
                };
                notes.push(format!("{what}: {message}\nthe operator would change and delete nothing; {status}"));
            }
            Some(error) => notes.push(format!(
                "{what}: {error}\nnothing would be written; the parent would get Stalled=True ({})",
                error.stalled_reason()
            )),
        }
        (notes, outcome.error.is_some())
    }
}

fn error_kind(error: &crate::runtime::call_error::LogicError) -> String {
    match error {
        crate::runtime::call_error::LogicError::Malformed(_) => "malformed input:".to_owned(),
        _ => "invalid:".to_owned(),
    }
}

/// Renders every parent among `objects` (a file's documents); the owned
/// and related objects are shared by all (each parent gets those it
/// controls, resp. references).
/// Beside a parent, a document of a kind the module owns or reads is one
/// more given object (a parent written with the Secret it names renders as
/// in a cluster holding both); any other document is reported.
pub fn render(
    module: &LogicModule,
    objects: &[Value],
    owned: &[Value],
    related: &[Value],
    now: &str,
) -> Result<Vec<Rendered>, InputError> {
    let kinds = Kinds::from_manifest(module.manifest())?;
    let parent_kind = &kinds.parent;
    let is_parent = |object: &Value| is_of(std::slice::from_ref(parent_kind), object);
    let mut owned = owned.to_vec();
    let mut related = related.to_vec();
    let mut used = vec![false; objects.len()];
    if objects.iter().any(is_parent) {
        for (object, used) in objects.iter().zip(&mut used) {
            *used = !is_parent(object) && given(&kinds, object, &mut owned, &mut related);
        }
    }
    let rendered = objects
        .iter()
        .zip(used)
        .enumerate()
        .filter(|(_, (_, used))| !used)
        .map(|(index, (document, _))| {
            let (parent, filled) = parents::complete(document);
            let what = format!("document {} ({})", index + 1, documents::describe(&parent));
            let outcome = if is_parent(document) {
                tracing::debug!(parent = what, "rendering");
                Ok(offline::reconcile(
                    module,
                    &kinds,
                    &Given {
                        parent: &parent,
                        owned: &owned,
                        related: &related,
                        now,
                        problem: None,
                        status_owned: None,
                        schemas: None,
                    },
                ))
            } else {
                Err(format!(
                    "not a {} ({}), the module's parent kind",
                    parent_kind.name(),
                    parent_kind.resource.api_version
                ))
            };
            Rendered { what, filled, parent, outcome }
        })
        .collect();
    Ok(rendered)
}

/// Adds `object` to the given objects if the module owns or reads its
/// kind: to the owned ones when it owns it (and, if it reads it too, the
/// object has a controller); else to the related ones. Whether it did.
fn given(kinds: &Kinds, object: &Value, owned: &mut Vec<Value>, related: &mut Vec<Value>) -> bool {
    let (owns, reads) = (is_of(&kinds.owned, object), is_of(&kinds.reads, object));
    let controlled = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|references| references.iter().any(|r| r["controller"] == Value::Bool(true)));
    if owns && (controlled || !reads) {
        owned.push(object.clone());
    } else if reads {
        related.push(object.clone());
    }
    owns || reads
}

fn is_of(kinds: &[Kind], object: &Value) -> bool {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    kinds.iter().any(|k| k.is_group_kind_of(api_version, kind))
}

/// A status field the parent's CRD schema prunes: the API server drops it.
pub fn pruned_note(what: &str, field: &str) -> String {
    format!("{what}: {field} is not in the CRD's status schema: the API server prunes it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_must_be_rfc_3339() {
        assert_eq!(check_now("2026-01-01T00:00:00Z").ok().as_deref(), Some("2026-01-01T00:00:00Z"));
        let error = check_now("yesterday").expect_err("not a time");
        assert!(error.to_string().starts_with("--now \"yesterday\" is not an RFC 3339 time"), "{error}");
        assert!(check_now(&crate::planning::step::now()).is_ok());
    }
}
