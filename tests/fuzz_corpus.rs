//! The Memcached fuzz target's kept corpus (fuzz/corpus/memcached and the
//! crash reproducers in fuzz/regressions/memcached) through the component,
//! target/memcached.wasm in wasmtime as the operator runs it: `validate`,
//! `desired` and `status` never trap, and answer exactly what the same logic
//! answers natively (which the fuzz target checks for panics and
//! consistency on every input it tries).

use std::collections::BTreeMap;
use std::path::PathBuf;

use memcached_logic::exports;
use memcached_tests::{instance, reconciler, tests_dir};
use wasm_operator::runtime::call_error::{CallError, CallResult, FieldError, LogicError};

const NOW: &str = "2026-01-01T00:00:00Z";

/// Every kept input of the target, by path, as text (a WIT string is UTF-8:
/// the fuzz target skips any other input too).
fn inputs() -> Vec<(PathBuf, String)> {
    let root = tests_dir().join("../fuzz");
    let mut files = Vec::new();
    for dir in [root.join("corpus/memcached"), root.join("regressions/memcached")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        files.extend(entries.map(|entry| entry.expect("a readable corpus entry").path()));
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            String::from_utf8(bytes).ok().map(|text| (path, text))
        })
        .collect()
}

fn fields(errors: Vec<memcached_logic::FieldError>) -> Vec<FieldError> {
    errors.into_iter().map(|e| FieldError::new(e.path, e.message)).collect()
}

/// The native answer in the component's types.
fn native<T>(answer: Result<T, memcached_logic::Error>) -> CallResult<T> {
    answer.map_err(|error| {
        CallError::Logic(match error {
            memcached_logic::Error::Malformed(errors) => LogicError::Malformed(fields(errors)),
            memcached_logic::Error::Invalid(errors) => LogicError::Invalid(fields(errors)),
            memcached_logic::Error::Unsupported(message) => LogicError::Unsupported(message),
        })
    })
}

/// The component's answer, which must be the native one; what it was.
fn same<T: PartialEq + std::fmt::Debug>(
    call: &str,
    path: &std::path::Path,
    component: CallResult<T>,
    native: CallResult<T>,
) -> &'static str {
    let outcome = match (&component, &native) {
        (Ok(a), Ok(b)) if a == b => "answered",
        (Err(CallError::Logic(a)), Err(CallError::Logic(b))) if a == b => match a {
            LogicError::Malformed(_) => "malformed",
            LogicError::Invalid(_) => "invalid",
            LogicError::Unsupported(_) => "unsupported",
        },
        _ => panic!("{call} on {}: the component answered {component:?}, natively {native:?}", path.display()),
    };
    if let Err(CallError::Logic(error)) = &component {
        assert!(!error.field_errors().is_empty(), "{call} on {}: {error:?} names no field", path.display());
    }
    outcome
}

/// Each input through the three calls, in the component and natively; how
/// often each call gave each outcome.
fn replay(inputs: &[(PathBuf, String)]) -> BTreeMap<(&'static str, &'static str), usize> {
    let mut outcomes = BTreeMap::new();
    for (path, text) in inputs {
        let validated = same("validate", path, instance().validate(text), native(exports::validate(text).map(fields)));
        let desired =
            same("desired", path, reconciler().desired(text, &[], &[]), native(exports::desired(text, &[], &[])));
        let status = same(
            "status",
            path,
            reconciler().status(text, &[], &[], NOW, None),
            native(exports::status(text, &[], &[], NOW, None)),
        );
        for (call, outcome) in [("validate", validated), ("desired", desired), ("status", status)] {
            *outcomes.entry((call, outcome)).or_default() += 1;
        }
    }
    outcomes
}

#[test]
fn the_kept_corpus_answers_in_the_component_as_natively_and_never_traps() {
    let inputs = inputs();
    assert!(inputs.len() >= 20, "only {} inputs in fuzz/corpus/memcached", inputs.len());
    // Two threads, each with its own instances, as the operator's reconciles.
    let half = inputs.len().div_ceil(2);
    let mut outcomes: BTreeMap<_, usize> = BTreeMap::new();
    std::thread::scope(|scope| {
        let parts: Vec<_> = inputs.chunks(half).map(|part| scope.spawn(|| replay(part))).collect();
        for part in parts {
            for (key, count) in part.join().expect("a replay thread") {
                *outcomes.entry(key).or_default() += count;
            }
        }
    });
    // The corpus reaches both sides of the module: objects, refused specs, bad JSON.
    for wanted in [("desired", "answered"), ("desired", "invalid"), ("desired", "malformed"), ("status", "answered")] {
        assert!(outcomes.contains_key(&wanted), "no input gives {wanted:?}: {outcomes:?}");
    }
    eprintln!("{} inputs: {outcomes:?}", inputs.len());
}
