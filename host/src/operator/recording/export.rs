//! Records as `wasm-operator test` cases (`planning/case.rs`), one YAML
//! document per record, oldest first. A case's inputs are what the module
//! was given (`statusOwned`: what `status` was given, the objects as the
//! writes left them); its `expect` is what the module answered, through the
//! host's checks, so a replay of the serving version passes.
//!
//! A record with Secrets redacted cannot expect the live answer: the module
//! saw the real values (the Memcached module hashes them into a pod
//! annotation). Its `expect` is the serving version's answer on the
//! redacted inputs, and `recorded` names the Secrets (`redacted`) and the
//! fields where that differs from the live answer (`liveAnswerDiffers`).

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::recorder::{Answer, Record};
use crate::planning::answer_check::{self, Owner};
use crate::planning::case::{self as cases, Case, CaseFile, Expect};
use crate::planning::kinds::{KindError, Kinds};
use crate::planning::offline::{self, Given};
use crate::planning::outcome::{Outcome, OutcomeError};
use crate::runtime::logic_module::LogicModule;

/// At most this many differing fields are named per record.
const MAX_DIFFERING_PATHS: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the serving version's kinds: {0}")]
    Kinds(#[from] KindError),
}

/// The records as a case file's text (YAML documents), replayed where
/// needed on `serving`, the version serving now.
pub fn export(records: &[std::sync::Arc<Record>], serving: &LogicModule) -> Result<String, ExportError> {
    let kinds = Kinds::from_manifest(serving.manifest())?;
    let cases = records.iter().map(|record| case_of(record, serving, &kinds)).collect();
    Ok(CaseFile { path: PathBuf::new(), cases }.text())
}

/// One record as a case.
pub fn case_of(record: &Record, serving: &LogicModule, kinds: &Kinds) -> Case {
    let parent = parse(&record.parent);
    let owned: Vec<Value> = record.owned.iter().map(|t| parse(t)).collect();
    let related: Vec<Value> = record.related.iter().map(|t| parse(t)).collect();
    let status_owned: Option<Vec<Value>> = record.status_owned.as_ref().map(|o| o.iter().map(|t| parse(t)).collect());
    let live = live_expect(record, kinds, &parent);
    let mut recorded = Map::new();
    recorded.insert("module".into(), json!(serving.name()));
    recorded.insert("version".into(), json!(record.version));
    recorded.insert("digest".into(), json!(record.digest));
    recorded.insert("at".into(), json!(record.at));
    let expect = if record.redacted.is_empty() {
        live
    } else {
        recorded.insert("redacted".into(), json!(record.redacted));
        if record.digest == serving.digest() {
            let given = Given {
                parent: &parent,
                owned: &owned,
                related: &related,
                now: &record.now,
                problem: record.problem.as_deref(),
                status_owned: status_owned.as_deref(),
                schemas: None,
            };
            let replayed = cases::actual(&Expect::default(), &offline::reconcile(serving, kinds, &given));
            let differs = differing_paths(&expect_value(&live), &expect_value(&replayed));
            if !differs.is_empty() {
                recorded.insert("liveAnswerDiffers".into(), json!(differs));
            }
            replayed
        } else {
            recorded.insert(
                "notReplayed".into(),
                json!(format!(
                    "version {} ({}) no longer serves: expect is the live answer, made from the Secrets' real values",
                    record.version, record.digest
                )),
            );
            live
        }
    };
    Case {
        name: Some(format!("{}/{} at {}", record.namespace, record.name, record.at)),
        module: None,
        recorded: Some(Value::Object(recorded)),
        parent,
        owned,
        related,
        now: Some(record.now.clone()),
        problem: record.problem.clone(),
        status_owned,
        expect,
    }
}

/// What the module answered live, as a case expects it: the desired
/// objects through the host's checks (the namespace filled in), the status.
fn live_expect(record: &Record, kinds: &Kinds, parent: &Value) -> Expect {
    let status = Some(parse(&record.status));
    let outcome = match &record.answer {
        Answer::Desired(texts) => {
            let str_at = |pointer| parent.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
            let owner = Owner { namespace: str_at("/metadata/namespace"), uid: str_at("/metadata/uid") };
            let desired = match answer_check::check(&kinds.owned, &owner, texts.clone()) {
                Ok(checked) => checked.into_iter().map(|object| object.value).collect(),
                // Another version's kinds: as answered.
                Err(_) => texts.iter().map(|t| parse(t)).collect(),
            };
            Outcome { desired, status, ..Outcome::default() }
        }
        Answer::Invalid(error) => {
            Outcome { error: Some(OutcomeError::Spec(error.clone())), status, ..Outcome::default() }
        }
    };
    cases::actual(&Expect::default(), &outcome)
}

fn parse(text: &str) -> Value {
    // The host's own JSON texts: they parse.
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn expect_value(expect: &Expect) -> Value {
    serde_json::to_value(expect).unwrap_or(Value::Null)
}

/// The field paths where `a` and `b` differ (`desired[0].data.revision`),
/// null members ignored as the comparison of a case ignores them.
pub fn differing_paths(a: &Value, b: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    walk("", a, b, &mut paths);
    paths
}

fn walk(path: &str, a: &Value, b: &Value, paths: &mut Vec<String>) {
    if paths.len() >= MAX_DIFFERING_PATHS {
        return;
    }
    let empty = Map::new();
    match (a, b) {
        // An object against nothing: each of its members differs.
        (Value::Object(_) | Value::Null, Value::Object(_) | Value::Null) if !(a.is_null() && b.is_null()) => {
            let (a, b) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                walk(&child, a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null), paths);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for index in 0..a.len().max(b.len()) {
                let child = format!("{path}[{index}]");
                walk(&child, a.get(index).unwrap_or(&Value::Null), b.get(index).unwrap_or(&Value::Null), paths);
            }
        }
        (a, b) if a == b => {}
        _ => paths.push(path.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_paths_name_each_leaf_and_ignore_nulls() {
        let a = json!({"desired": [{"data": {"revision": "1", "same": "x"}}], "status": {"phase": "ok", "gone": null}});
        let b = json!({"desired": [{"data": {"revision": "2", "same": "x"}}, {"kind": "Extra"}], "status": {"phase": "ok"}});
        assert_eq!(differing_paths(&a, &b), ["desired[0].data.revision", "desired[1].kind"]);
        assert!(differing_paths(&a, &a).is_empty());
    }
}
