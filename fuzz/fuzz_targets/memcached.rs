//! The Memcached module's logic (guest/src/exports.rs: `desired`, `status`,
//! `validate`) natively, on any Memcached CR JSON. Never a panic (overflow
//! checks on); `desired` answers owned objects of the manifest's kinds in
//! the CR's namespace, or an `invalid` error naming fields, exactly the
//! problems `validate` reports (besides unknown fields, which the reconcile
//! path skips), or `malformed` where `validate` says so too; `status` is an
//! object, also for an invalid CR; feeding `desired`'s answer back as the
//! owned objects gives the same answer. tests/fuzz_corpus.rs replays the kept
//! corpus through the component (target/memcached.wasm) and compares.
//!
//! Structure-aware: besides libFuzzer's byte mutations, a mutator that
//! parses the input as JSON and changes one value (a number at a bound, a
//! field name the CRD knows, another part of the CR), so most inputs get past
//! the JSON parser to the rules.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use memcached_logic::{Error, FieldError, exports};
use serde_json::{Map, Value, json};

const NOW: &str = "2026-01-01T00:00:00Z";

fuzz_target!(|data: &[u8]| {
    // A WIT string is UTF-8: nothing else reaches the module.
    let Ok(text) = std::str::from_utf8(data) else { return };
    check(text);
});

fn check(text: &str) {
    let validated = exports::validate(text);
    let desired = exports::desired(text, &[], &[]);
    let status = exports::status(text, &[], &[], NOW, None);

    let rules: Option<Vec<FieldError>> = match &validated {
        Ok(problems) => {
            for problem in problems {
                assert!(!problem.path.is_empty() && !problem.message.is_empty(), "validate: {problem:?}");
            }
            Some(problems.iter().filter(|p| p.message != "unknown field").cloned().collect())
        }
        Err(Error::Malformed(errors)) => {
            assert!(!errors.is_empty() && errors.iter().all(|e| !e.message.is_empty()), "validate: {errors:?}");
            None
        }
        Err(other) => panic!("validate answered {other:?}"),
    };

    match (&desired, &rules) {
        (Ok(objects), Some(rules)) => {
            assert!(rules.is_empty(), "desired answered objects for a CR breaking {rules:?}");
            check_objects(text, objects);
            // The objects it answered, as the current ones: the same answer.
            let again = exports::desired(text, objects, &[]);
            assert_eq!(again.as_ref(), Ok(objects), "desired with its own answer as the owned objects");
            let status = exports::status(text, objects, &[], NOW, None);
            assert!(status.is_ok_and(|s| is_object(&s)), "status with the owned objects");
        }
        (Err(Error::Invalid(problems)), Some(rules)) => {
            assert!(!problems.is_empty(), "invalid without a field");
            assert_eq!(problems, rules, "desired's problems are validate's");
        }
        (Err(Error::Malformed(_)), None) => {}
        (answer, rules) => panic!("desired answered {answer:?}; validate's rules: {rules:?}"),
    }

    match (&status, &rules) {
        (Ok(status), Some(_)) => assert!(is_object(status), "status is not an object: {status}"),
        (Err(Error::Malformed(_)), None) => {}
        (answer, rules) => panic!("status answered {answer:?}; validate's rules: {rules:?}"),
    }
}

fn is_object(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object())
}

/// Each desired object: of an owned kind, named, in the CR's namespace, and
/// controlled by the CR when it has a uid.
fn check_objects(parent: &str, objects: &[String]) {
    let manifest = exports::manifest();
    // As the module reads it (serde_json's Value may refuse what the module
    // skips unread, such as a number beyond f64 in an unknown field).
    let parent = exports::parse_memcached(parent).expect("a CR desired answered for");
    let namespace = parent.metadata.namespace.as_deref();
    let uid = parent.metadata.uid.as_deref().filter(|uid| !uid.is_empty());
    for text in objects {
        let object: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        let (api_version, kind) = (&object["apiVersion"], &object["kind"]);
        assert!(
            manifest.owned.iter().any(|k| *api_version == k.api_version().as_str() && *kind == k.kind),
            "{api_version}/{kind} is not an owned kind"
        );
        assert!(object.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| !n.is_empty()), "{text}");
        if let Some(namespace) = namespace {
            assert_eq!(object.pointer("/metadata/namespace").and_then(Value::as_str), Some(namespace), "{text}");
        }
        if let Some(uid) = uid {
            let references = object.pointer("/metadata/ownerReferences").and_then(Value::as_array);
            let controller = references.into_iter().flatten().find(|r| r["controller"] == true);
            assert_eq!(controller.map(|r| &r["uid"]), Some(&json!(uid)), "{text}");
        }
    }
}

// ---- the structure-aware mutator ----

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut rng = Rng(u64::from(seed) | 1);
    if rng.below(3) == 0 {
        return fuzzer_mutate(data, size, max_size);
    }
    let Some(mut value) = std::str::from_utf8(&data[..size]).ok().and_then(|t| serde_json::from_str::<Value>(t).ok())
    else {
        return fuzzer_mutate(data, size, max_size);
    };
    let donor = value.clone();
    mutate(&mut value, &donor, &mut rng);
    let text = value.to_string();
    if text.len() > max_size {
        return fuzzer_mutate(data, size, max_size);
    }
    data[..text.len()].copy_from_slice(text.as_bytes());
    text.len()
});

/// xorshift: the mutation is a function of libFuzzer's seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n.max(1) as u64).unwrap_or(0)
    }
}

/// Changes one value somewhere in `value`.
fn mutate(value: &mut Value, donor: &Value, rng: &mut Rng) {
    let mut paths = Vec::new();
    collect(value, &mut Vec::new(), &mut paths);
    let path = &paths[rng.below(paths.len())];
    let Some(slot) = value.pointer_mut(path) else { return };
    match rng.below(6) {
        0 | 1 => *slot = interesting(rng),
        2 => {
            // Another part of the CR here (a spec in a field, a list in a map).
            let mut parts = Vec::new();
            collect(donor, &mut Vec::new(), &mut parts);
            if let Some(part) = donor.pointer(&parts[rng.below(parts.len())]) {
                *slot = part.clone();
            }
        }
        3 => match slot {
            Value::Object(members) => {
                let name = field_names()[rng.below(field_names().len())].clone();
                members.insert(name, interesting(rng));
            }
            Value::Array(items) if !items.is_empty() => {
                let item = items[rng.below(items.len())].clone();
                items.push(item);
            }
            other => *other = interesting(rng),
        },
        4 => match slot {
            Value::Object(members) if !members.is_empty() => {
                let key = members.keys().nth(rng.below(members.len())).cloned().unwrap_or_default();
                members.remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                items.remove(rng.below(items.len()));
            }
            other => *other = Value::Null,
        },
        _ => {
            if let Value::String(text) = slot {
                let mut bytes = text.clone().into_bytes();
                let len = bytes.len();
                bytes.resize(len * 2 + 8, 0);
                let new_len = fuzzer_mutate(&mut bytes, len, len * 2 + 8);
                bytes.truncate(new_len);
                *text = String::from_utf8_lossy(&bytes).into_owned();
            } else {
                *slot = interesting(rng);
            }
        }
    }
}

/// JSON pointers to every value in `value`, the root included.
fn collect(value: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
    out.push(path.iter().map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1"))).collect());
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                path.push(key.clone());
                collect(member, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(index.to_string());
                collect(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Values at the edges of what the CRD and the types take.
fn interesting(rng: &mut Rng) -> Value {
    let values = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(1),
        json!(64),
        json!(65),
        json!(65535),
        json!(65536),
        json!(2147483647),
        json!(2147483648_i64),
        json!(-2147483649_i64),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(0.5),
        json!(1e300),
        json!(""),
        json!("x"),
        json!("128Mi"),
        json!("1e99"),
        json!("0.000000001"),
        json!("-1"),
        json!("a.b-c"),
        json!("UPPER"),
        json!("1s"),
        json!("x".repeat(300)),
        json!("soft"),
        json!("hard"),
        json!("memcached.c5c3.io/v1alpha1"),
        json!({}),
        json!([]),
        json!(["a"]),
        json!({"name": "x"}),
        Value::Object(Map::new()),
    ];
    values[rng.below(values.len())].clone()
}

/// Every property name in the CRD's schema (and its keywords: harmless).
fn field_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = exports::CRD_YAML
            .lines()
            .filter_map(|line| line.trim().strip_suffix(':'))
            .filter(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()))
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        names
    })
}
