//! The host's checks on a module's answer (host/src/runtime/answer.rs and
//! host/src/planning/answer_check.rs) on any answer: never a panic,
//! every refusal typed and pointing at an object of the answer, and every
//! object let through really in the parent's namespace, of an owned kind,
//! controlled by the parent and named once.
//!
//! The input is the answer's texts separated by 0x1E (record separator);
//! each text is UTF-8 (the boundary refuses anything else before these
//! checks), so bytes that are not are replaced.

#![no_main]

use std::collections::HashSet;

use kube::api::DynamicObject;
use serde_json::Value;
use wasm_operator::planning::answer_check::{Owner, check};
use wasm_operator::planning::kinds::Kind;
use wasm_operator::runtime::answer::{MAX_DEPTH, Refusal, check_bounds, check_status, parse};

const OWNER: Owner<'static> = Owner { namespace: "team", uid: "u-1" };

fn owned() -> &'static [Kind] {
    wasm_operator_fuzz::memcached_owned_kinds()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let texts: Vec<String> = data.split(|b| *b == 0x1e).map(|t| String::from_utf8_lossy(t).into_owned()).collect();
    for text in &texts {
        check_text(text);
    }
    check_answer(texts);
});

/// Nesting of a parsed value (it parsed, so it is at most serde_json's 128).
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// One text as `parse` and `check_status` see it, against serde_json.
fn check_text(text: &str) {
    let plain = serde_json::from_str::<Value>(text);
    let parsed = parse("object 0", text);
    match (&plain, &parsed) {
        (Ok(value), Ok(checked)) => {
            assert_eq!(value, checked);
            assert!(depth(value) <= MAX_DEPTH, "{} levels let through", depth(value));
        }
        (Ok(value), Err(refused)) => {
            assert_eq!(refused.reason, Refusal::TooDeep, "{refused:?}");
            assert!(depth(value) > MAX_DEPTH, "{} levels refused as too deep", depth(value));
        }
        (Err(_), Err(refused)) => {
            assert!(matches!(refused.reason, Refusal::NotJson | Refusal::TooDeep), "{refused:?}");
            assert!(refused.problem.starts_with("object 0: "), "{}", refused.problem);
        }
        (Err(error), Ok(_)) => panic!("parse accepted what serde_json refuses: {error}"),
    }
    // Within the depth limit serde_json's own recursion limit is never reached.
    if let (Err(error), Err(refused)) = (&plain, &parsed)
        && refused.reason == Refusal::NotJson
    {
        assert!(!error.to_string().contains("recursion limit"), "{error}");
    }
    match (check_status(text), parsed) {
        (Ok(status), Ok(value)) => assert!(status.is_object() && status == value),
        (Err(refused), Ok(value)) => {
            assert_eq!(refused.reason, Refusal::StatusNotObject, "{refused:?}");
            assert!(!value.is_object());
        }
        (Err(refused), Err(first)) => assert_eq!(refused.reason, first.reason),
        (Ok(status), Err(first)) => panic!("status {status} accepted, refused as an object: {first:?}"),
    }
}

fn check_answer(texts: Vec<String>) {
    let count = texts.len();
    let bounds = check_bounds(count, texts.iter().map(String::len));
    match check(owned(), &OWNER, texts.clone()) {
        Ok(objects) => {
            assert_eq!(bounds, Ok(()));
            assert_eq!(objects.len(), count);
            let mut seen = HashSet::new();
            for (object, text) in objects.iter().zip(&texts) {
                let kind = &owned()[object.kind_index].resource;
                let value = &object.value;
                assert_eq!(value["apiVersion"], kind.api_version.as_str(), "{text}");
                assert_eq!(value["kind"], kind.kind.as_str(), "{text}");
                assert!(!object.name.is_empty() && value["metadata"]["name"] == object.name.as_str(), "{text}");
                assert_eq!(value["metadata"]["namespace"], OWNER.namespace, "{text}");
                let references = value["metadata"]["ownerReferences"].as_array().expect("owner references");
                let controllers: Vec<&Value> =
                    references.iter().filter(|r| r["controller"] == Value::Bool(true)).collect();
                assert!(!controllers.is_empty() && controllers.iter().all(|r| r["uid"] == OWNER.uid), "{text}");
                assert!(seen.insert((object.kind_index, object.name.clone())), "answered twice: {text}");
                // As create_or_update decodes it for the write: an object, or
                // refused there (typed), never a panic.
                if let Ok(dynamic) = serde_json::from_value::<DynamicObject>(value.clone()) {
                    assert_eq!(dynamic.metadata.name.as_deref(), Some(object.name.as_str()));
                    assert_eq!(dynamic.metadata.namespace.as_deref(), Some(OWNER.namespace));
                }
            }
        }
        Err(refused) => {
            assert!(!refused.problem.is_empty());
            match refused.reason {
                Refusal::TooManyObjects | Refusal::TooLarge => {
                    assert_eq!(bounds.map_err(|b| b.reason), Err(refused.reason));
                }
                reason => {
                    assert_eq!(bounds, Ok(()), "{reason:?} although over the bounds");
                    let at = refused
                        .problem
                        .strip_prefix("object ")
                        .and_then(|rest| rest.split_once(':'))
                        .and_then(|(index, _)| index.parse::<usize>().ok())
                        .unwrap_or_else(|| panic!("{reason:?} names no object: {}", refused.problem));
                    assert!(at < count, "{}", refused.problem);
                    // The objects before it pass on their own.
                    assert!(check(owned(), &OWNER, texts[..at].to_vec()).is_ok(), "{}", refused.problem);
                    assert!(
                        !matches!(reason, Refusal::InvalidUtf8 | Refusal::StatusNotObject),
                        "{reason:?} from desired's checks"
                    );
                }
            }
        }
    }
}
