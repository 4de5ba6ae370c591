//! The `hostile` build: the real Greeting module, except that a message
//! `hostile:<answer>` makes `desired` or `status` answer what the host must
//! refuse (tests/hostile.rs), through `desired` and through `reach`'s
//! `answer` alike. It exports the contract itself, beside the SDK's export
//! (`export_reconciler!`), because the SDK would not build these answers:
//! every other message goes to the SDK as usual.
//!
//! Invalid UTF-8 cannot be a Rust `String`, and the contract's `string` is
//! what wit-bindgen lowers: the module hands wit-bindgen a `String` made
//! with `from_utf8_unchecked` over bytes that are not UTF-8. Nothing in
//! the module reads it; wit-bindgen copies its pointer and length into the
//! return area as they are, so the host sees exactly those bytes in the
//! module's memory (the lowest level a Rust component reaches).
//!
//! Its CRD declares the status's fields (the API server prunes others),
//! where the real Greeting's keeps whatever its status holds.

use wasm_operator_sdk::__private as sdk;
use wasm_operator_sdk::serde_json::{Value, json};

use crate::Greetings;

struct Export;

/// The hostile answer a parent's message asks for, if any.
fn hostile(parent: &str) -> Option<(String, Value)> {
    let parent: Value = wasm_operator_sdk::serde_json::from_str(parent).ok()?;
    let answer = parent["spec"]["message"].as_str()?.strip_prefix("hostile:")?.to_owned();
    Some((answer, parent))
}

/// A ConfigMap the parent controls, as a well-behaved module answers it.
fn configmap(parent: &Value, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": parent["metadata"]["namespace"],
                        "ownerReferences": [{"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                                             "name": parent["metadata"]["name"], "uid": parent["metadata"]["uid"],
                                             "controller": true, "blockOwnerDeletion": true}]},
           "data": {"message": "hostile"}})
}

/// `[[[...]]]` `depth` deep inside an object.
fn deep(depth: usize) -> String {
    format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth))
}

fn desired_answer(answer: &str, parent: &Value) -> Vec<String> {
    let name = parent["metadata"]["name"].as_str().unwrap_or("greeting").to_owned();
    let mut object = configmap(parent, &name);
    match answer {
        "other-namespace" => object["metadata"]["namespace"] = json!("kube-system"),
        "not-owned-kind" => object["kind"] = json!("Secret"),
        // A controller reference to some other parent.
        "other-owner" => {
            object["metadata"]["ownerReferences"][0]["uid"] = json!("6f0ba1d6-0000-4000-8000-000000000000")
        }
        // A cluster-scoped kind: never an owned kind.
        "cluster-scoped" => {
            object["kind"] = json!("Namespace");
            object["metadata"].as_object_mut().map(|m| m.remove("namespace"));
        }
        "100k-objects" => return vec![object.to_string(); 100_000],
        "100mib-string" => return vec!["a".repeat(100 << 20)],
        "deep" => return vec![deep(100_000)],
        "invalid-utf8" => {
            let bytes = b"{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\xff\xfe\"}".to_vec();
            // SAFETY: never read as a str here; wit-bindgen only copies its
            // pointer and length (see the module's doc).
            return vec![object.to_string(), unsafe { String::from_utf8_unchecked(bytes) }];
        }
        "duplicate" => return vec![object.to_string(), object.to_string()],
        // The `status` answers below: nothing to write.
        _ => return Vec::new(),
    }
    vec![object.to_string()]
}

fn status_answer(answer: &str) -> Option<String> {
    Some(
        match answer {
            "status-array" => "[]",
            "status-string" => "\"x\"",
            "status-number" => "42",
            "status-null" => "null",
            "status-deep" => return Some(deep(100_000)),
            // Careless rather than hostile: a status with a field the CRD's
            // schema does not have (the API server prunes it).
            "status-pruned" => r#"{"phase": "Pruned", "observedGeneration": 1, "unknownField": {"kept": false}}"#,
            _ => return None,
        }
        .to_owned(),
    )
}

/// `crd` with a status schema that names its fields (`conditions` for the
/// host's own `Stalled`): anything else in a status answer is pruned.
fn strict_status(crd: &str) -> String {
    let Ok(mut crd) = wasm_operator_sdk::serde_json::from_str::<Value>(crd) else { return crd.to_owned() };
    let status = json!({"type": "object", "nullable": true, "properties": {
        "observedGeneration": {"type": "integer"},
        "phase": {"type": "string"},
        "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
    }});
    if let Some(properties) = crd.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties") {
        properties["status"] = status;
    }
    crd.to_string()
}

impl sdk::Guest for Export {
    fn manifest() -> sdk::ModuleManifest {
        let mut manifest = sdk::manifest::<Greetings>();
        manifest.crd = strict_status(&manifest.crd);
        manifest
    }

    fn references(parent: String) -> Result<Vec<sdk::WitObjectRef>, sdk::WitError> {
        sdk::references::<Greetings>(&parent)
    }

    fn desired(parent: String, owned: Vec<String>, related: Vec<String>) -> Result<Vec<String>, sdk::WitError> {
        match hostile(&parent) {
            Some((answer, parent)) => Ok(desired_answer(&answer, &parent)),
            None => sdk::desired::<Greetings>(&parent, &owned, &related),
        }
    }

    fn status(
        parent: String,
        owned: Vec<String>,
        related: Vec<String>,
        now: String,
        problem: Option<String>,
    ) -> Result<String, sdk::WitError> {
        match hostile(&parent).and_then(|(answer, _)| status_answer(&answer)) {
            Some(answer) => Ok(answer),
            None => sdk::status::<Greetings>(&parent, &owned, &related, &now, problem.as_deref()),
        }
    }
}

impl sdk::WritesGuest for Export {
    fn model() -> sdk::WitWriteModel {
        sdk::write_model::<Greetings>()
    }
}

// Contract 1.3: the host asks `answer` where the module exports `reach`,
// so the hostile answers come through it as well as through `desired`.
impl sdk::ReachGuest for Export {
    fn manifest() -> sdk::WitReachManifest {
        sdk::reach_manifest::<Greetings>()
    }

    fn selections(_parent: String) -> Result<Vec<sdk::WitSelection>, sdk::WitError> {
        Ok(Vec::new())
    }

    fn answer(
        parent: String,
        owned: Vec<String>,
        related: Vec<String>,
        now: String,
    ) -> Result<sdk::WitDesiredState, sdk::WitError> {
        match hostile(&parent) {
            Some((answer, parent)) => Ok(sdk::WitDesiredState {
                objects: desired_answer(&answer, &parent),
                again_after_ms: None,
                parent_labels: Vec::new(),
                parent_annotations: Vec::new(),
            }),
            None => sdk::answer::<Greetings>(&parent, &owned, &related, &now),
        }
    }

    fn finalize(
        parent: String,
        owned: Vec<String>,
        related: Vec<String>,
        now: String,
    ) -> Result<sdk::WitFinalizing, sdk::WitError> {
        sdk::finalize::<Greetings>(&parent, &owned, &related, &now)
    }
}

impl sdk::AdmissionGuest for Export {
    fn takes_part() -> bool {
        false
    }

    fn review(
        _parent: String,
        _old: Option<String>,
        _operation: sdk::WitOperation,
    ) -> Result<Vec<String>, sdk::WitError> {
        Err(sdk::unsupported("takes no part in admission"))
    }
}

wasm_operator_sdk::bindings::__export_logic_module!(Export with_types_in wasm_operator_sdk::bindings);
