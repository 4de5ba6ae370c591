//! The `Greeting` module, written with the Rust SDK: `example.c5c3.io/v1`
//! `Greeting` owns a ConfigMap named after it holding `spec.message`, and
//! one more ConfigMap per entry of `spec.audiences` (`<name>-<audience>`):
//! any number of objects of one kind per parent. It reads the Secret named
//! by `spec.signatureSecret` (the ConfigMaps say whether it exists). An
//! empty message means no ConfigMap at all.
//!
//! Its spec is not typed in the CRD (it keeps unknown fields), so that the
//! host's tests can send what the module itself must refuse, with the field.
//! The tests also need modules that misbehave, and this is a real module, so
//! it can: the message `trap` makes it panic, `loop` loop forever,
//! `allocate` allocate without bound, and `log` writes a line to the
//! operator's log; the `hostile` build answers `hostile:<answer>` messages
//! with what the host must refuse (`src/hostile.rs`). Nothing here knows of Memcached, and
//! the host knows nothing of Greetings.

#[cfg(all(
    target_arch = "wasm32",
    any(feature = "contract-v2", feature = "missing-functions", feature = "wrong-world")
))]
mod component;
#[cfg(all(target_arch = "wasm32", feature = "hostile"))]
mod hostile;

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use wasm_operator_sdk::k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasm_operator_sdk::serde_json::Value;
use wasm_operator_sdk::{Context, Error, Finalizing, Manifest, Object, ObjectRef, Reconciler};

/// The module's version. The swap tests build variants of this module by
/// cargo feature: `v2` stamps `revision: "2"` on every ConfigMap;
/// `v1-rebuilt` behaves exactly as the default build; `fail-on-later`
/// behaves as `v2` but panics for messages starting with `later`;
/// `service-account` behaves as `v2` and also owns a ServiceAccount named
/// after each Greeting (another owned kind, so other watches);
/// `v2-some` stamps v2's revision only on the ConfigMaps of Greetings whose
/// message starts with `s` (a version that changes some parents);
/// `trap-always` panics on every parent, `loop-always` loops and
/// `allocate-always` allocates without bound on every parent;
/// `owns-secret` also owns a Secret per Greeting (and reads none), for
/// the least-privilege tests.
pub const MODULE_VERSION: &str = if cfg!(feature = "service-account") {
    "0.4.0"
} else if cfg!(feature = "owns-secret") {
    "0.5.0-secret"
} else if cfg!(feature = "fail-on-later") {
    "0.3.0"
} else if cfg!(feature = "v2") {
    "0.2.0"
} else if cfg!(feature = "v2-some") {
    "0.2.0-some"
} else if cfg!(feature = "v1-rebuilt") {
    "0.1.0+rebuilt"
} else {
    env!("CARGO_PKG_VERSION")
};

/// What `v2` adds to every ConfigMap.
const REVISION: Option<&str> = if cfg!(feature = "v2") { Some("2") } else { None };

/// What this build adds to the ConfigMaps of a Greeting with `message`:
/// [`REVISION`], or with `v2-some` v2's revision for messages starting with `s`.
fn revision(message: &str) -> Option<&'static str> {
    if cfg!(feature = "v2-some") { message.starts_with('s').then_some("2") } else { REVISION }
}

/// Whether this build owns a ServiceAccount per Greeting.
const OWNS_SERVICE_ACCOUNTS: bool = cfg!(feature = "service-account");

/// Whether this build owns a Secret per Greeting (and reads no Secrets).
const OWNS_SECRETS: bool = cfg!(feature = "owns-secret");

/// The steps build: a controller written in steps (tests/steps.rs).
const IN_STEPS: bool = cfg!(feature = "steps");

/// The finalizing build: a Greeting being deleted keeps its message's
/// ConfigMap (its audiences' go) until it is annotated
/// `example.c5c3.io/release: "true"`.
const FINALIZES: bool = cfg!(feature = "finalizes");
const RELEASE: &str = "example.c5c3.io/release";

#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.c5c3.io",
    version = "v1",
    kind = "Greeting",
    plural = "greetings",
    namespaced,
    status = "GreetingStatus",
    crates(
        kube_core = "::wasm_operator_sdk::kube_core",
        k8s_openapi = "::wasm_operator_sdk::k8s_openapi",
        serde_json = "::wasm_operator_sdk::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(schema_with = "any_object")]
pub struct GreetingSpec {
    #[serde(default)]
    pub message: Value,
    #[serde(default)]
    pub audiences: Value,
    #[serde(default)]
    pub signature_secret: Value,
}

/// Kept whole by the API server (no pruning), like the spec: the host adds
/// its own `Stalled` condition to it when the module fails.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(schema_with = "any_object")]
pub struct GreetingStatus {
    pub observed_generation: i64,
    pub phase: String,
}

/// An object the API server keeps as it is sent.
fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

impl GreetingSpec {
    fn message(&self) -> Result<String, Error> {
        match &self.message {
            Value::Null => Ok(String::new()),
            Value::String(message) => Ok(message.clone()),
            _ => Err(Error::invalid("spec.message", "must be a string")),
        }
    }

    /// A list of names, each a ConfigMap name suffix.
    fn audiences(&self) -> Result<Vec<String>, Error> {
        let name = |(i, item): (usize, &Value)| match item.as_str() {
            Some(name) if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-') => {
                Ok(name.to_owned())
            }
            _ => Err(Error::invalid(format!("spec.audiences[{i}]"), "must be a lowercase name")),
        };
        match &self.audiences {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) => items.iter().enumerate().map(name).collect(),
            _ => Err(Error::invalid("spec.audiences", "must be a list")),
        }
    }

    fn signature_secret(&self) -> Result<Option<String>, Error> {
        match &self.signature_secret {
            Value::Null => Ok(None),
            Value::String(name) if !name.is_empty() => Ok(Some(name.clone())),
            _ => Err(Error::invalid("spec.signatureSecret", "must be a Secret name")),
        }
    }
}

/// What the tests ask the module to do wrong, by message (or by build).
fn misbehave(message: &str) {
    if cfg!(feature = "trap-always") {
        panic!("this build traps on every parent");
    }
    if cfg!(feature = "fail-on-later") && message.starts_with("later") {
        panic!("this build traps on messages starting with 'later'");
    }
    let message = if cfg!(feature = "loop-always") {
        "loop"
    } else if cfg!(feature = "allocate-always") {
        "allocate"
    } else {
        message
    };
    match message {
        "trap" => panic!("asked to trap"),
        "log" => wasm_operator_sdk::log::info("asked to log"),
        "loop" => {
            // Only the host's deadline ends this.
            let mut turns: u64 = 0;
            loop {
                turns = std::hint::black_box(turns.wrapping_add(1));
            }
        }
        "allocate" => {
            // Only the host's memory limit ends this (the allocation fails
            // and the module aborts).
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
            }
        }
        _ => {}
    }
}

fn metadata(name: &str, greeting: &str) -> ObjectMeta {
    let labels = [("app.kubernetes.io/managed-by", "greeting-operator"), ("example.c5c3.io/greeting", greeting)];
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()),
        ..ObjectMeta::default()
    }
}

pub struct Greetings;

impl Reconciler for Greetings {
    type Parent = Greeting;
    type Status = GreetingStatus;
    const FINALIZES: bool = FINALIZES;

    fn manifest() -> Manifest {
        let manifest = Manifest::new::<Greeting>("greeting", MODULE_VERSION).owns::<ConfigMap>();
        let manifest = if OWNS_SERVICE_ACCOUNTS { manifest.owns::<ServiceAccount>() } else { manifest };
        let manifest = if OWNS_SECRETS { manifest.owns::<Secret>() } else { manifest.reads::<Secret>() };
        if cfg!(feature = "wrong-crd") {
            // A CRD for another kind than the parent: refused at load.
            let crd = manifest.crd.replace("\"kind\":\"Greeting\"", "\"kind\":\"Salutation\"");
            return manifest.crd_text(&crd);
        }
        manifest
    }

    fn references(greeting: &Greeting) -> Result<Vec<ObjectRef>, Error> {
        Ok(greeting.spec.signature_secret()?.into_iter().map(ObjectRef::to::<Secret>).collect())
    }

    /// A ConfigMap for the message and one per audience.
    fn desired(greeting: &Greeting, ctx: &Context) -> Result<Vec<Object>, Error> {
        let message = greeting.spec.message()?;
        let audiences = greeting.spec.audiences()?;
        let secret = greeting.spec.signature_secret()?;
        if message.is_empty() {
            return Ok(Vec::new());
        }
        misbehave(&message);
        let name = greeting.metadata.name.as_deref().ok_or_else(|| Error::invalid("metadata.name", "required"))?;
        let signature = secret.map(|secret| match ctx.related::<Secret>(&secret) {
            Some(_) => format!("signed by {secret}"),
            None => "unsigned".to_owned(),
        });
        let configmap = |configmap: &str, text: String| {
            let mut data = BTreeMap::from([("message".to_owned(), text)]);
            data.extend(signature.clone().map(|s| ("signature".to_owned(), s)));
            data.extend(revision(&message).map(|r| ("revision".to_owned(), r.to_owned())));
            let object = ConfigMap { metadata: metadata(configmap, name), data: Some(data), ..ConfigMap::default() };
            Object::new(&object).replacing("/data")
        };
        let mut objects = vec![configmap(name, message.clone())];
        // The no-audiences build drops them: the operator deletes them.
        let mut before = name.to_owned();
        for audience in audiences.iter().filter(|_| !cfg!(feature = "no-audiences")) {
            // In steps: each audience's once the one before it exists.
            if IN_STEPS && ctx.owned::<ConfigMap>(&before).is_none() {
                break;
            }
            before = format!("{name}-{audience}");
            objects.push(configmap(&before, format!("{message}, {audience}")));
        }
        if IN_STEPS && message == "forever" {
            // Never settles: one more than it holds, at every step.
            let counter = format!("{name}-count");
            let held = ctx.owned::<ConfigMap>(&counter).and_then(|c| c.data?.get("count")?.parse::<u64>().ok());
            let data = BTreeMap::from([("count".to_owned(), (held.unwrap_or(0) + 1).to_string())]);
            let object = ConfigMap { metadata: metadata(&counter, name), data: Some(data), ..ConfigMap::default() };
            objects.push(Object::new(&object).replacing("/data"));
        }
        if OWNS_SERVICE_ACCOUNTS {
            objects.push(Object::new(&ServiceAccount { metadata: metadata(name, name), ..ServiceAccount::default() }));
        }
        if OWNS_SECRETS {
            let data = BTreeMap::from([("message".to_owned(), message.clone())]);
            let secret = Secret { metadata: metadata(name, name), string_data: Some(data), ..Secret::default() };
            objects.push(Object::new(&secret));
        }
        Ok(objects)
    }

    /// The message's ConfigMap stays until the Greeting is released.
    fn finalize(greeting: &Greeting, ctx: &Context) -> Result<Finalizing, Error> {
        let released = greeting.metadata.annotations.as_ref().and_then(|a| a.get(RELEASE)).map(String::as_str);
        if released == Some("true") {
            return Ok(Finalizing::done());
        }
        let mut objects = Self::desired(greeting, ctx)?;
        objects.truncate(1);
        Ok(Finalizing::keeping(objects))
    }

    fn status(greeting: &Greeting, ctx: &Context) -> Result<GreetingStatus, Error> {
        let mut published: Vec<String> =
            ctx.all_owned::<ConfigMap>().into_iter().filter_map(|configmap| configmap.metadata.name).collect();
        published.sort();
        let problem = greeting.spec.message().and_then(|_| greeting.spec.audiences()).err();
        let phase = match (problem.as_ref().and_then(|p| p.field_errors().first()), published.as_slice()) {
            (Some(invalid), _) => format!("Invalid: {} {}", invalid.path, invalid.message),
            (_, []) => "Nothing to publish".to_owned(),
            (_, names) => format!("Published in ConfigMap {}", names.join(", ")),
        };
        Ok(GreetingStatus { observed_generation: greeting.metadata.generation.unwrap_or(0), phase })
    }
}

#[cfg(not(any(feature = "contract-v2", feature = "missing-functions", feature = "wrong-world", feature = "hostile")))]
wasm_operator_sdk::export_reconciler!(Greetings);

#[cfg(test)]
mod tests {
    use wasm_operator_sdk::run;
    use wasm_operator_sdk::serde_json::{self, json};

    use super::*;

    fn greeting(spec: Value) -> String {
        json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
               "metadata": {"name": "hello", "namespace": "ns", "uid": "u-1", "generation": 2}, "spec": spec})
        .to_string()
    }

    fn objects(texts: Vec<String>) -> Vec<Value> {
        texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect()
    }

    fn desired(parent: &str, owned: &[String], related: &[String]) -> Result<Vec<String>, Error> {
        run::desired::<Greetings>(parent, owned, related)
    }

    fn invalid_at(result: Result<Vec<String>, Error>) -> String {
        result.expect_err("invalid").field_errors()[0].path.clone()
    }

    #[test]
    fn the_configmaps_follow_the_message_and_keep_server_fields() {
        let cr = greeting(json!({"message": "hi", "signatureSecret": "sig", "audiences": ["world", "moon"]}));
        let created = objects(desired(&cr, &[], &[]).unwrap());
        let names: Vec<&str> = created.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["hello", "hello-world", "hello-moon"]);
        assert_eq!(created[0]["data"], json!({"message": "hi", "signature": "unsigned"}));
        assert_eq!(created[2]["data"]["message"], "hi, moon");
        assert_eq!(created[0]["metadata"]["namespace"], "ns");
        assert!(created.iter().all(|o| o["metadata"]["ownerReferences"][0]["uid"] == "u-1"));

        let mut stored = created[1].clone();
        stored["metadata"]["resourceVersion"] = json!("7");
        stored["data"]["stale"] = json!("from an older version");
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sig"}}).to_string();
        let again = objects(desired(&cr, &[stored.to_string()], &[secret]).unwrap());
        assert_eq!(again[1]["metadata"]["resourceVersion"], "7");
        assert_eq!(again[0]["metadata"]["resourceVersion"], Value::Null);
        assert_eq!(again[1]["data"], json!({"message": "hi, world", "signature": "signed by sig"}));
        let references = run::references::<Greetings>(&cr).unwrap();
        assert_eq!((references[0].kind.as_str(), references[0].name.as_str()), ("Secret", "sig"));

        assert!(desired(&greeting(json!({})), &[], &[]).unwrap().is_empty());
        assert_eq!(invalid_at(desired(&greeting(json!({"message": 3})), &[], &[])), "spec.message");
        assert_eq!(
            invalid_at(desired(&greeting(json!({"message": "x", "audiences": ["Bad"]})), &[], &[])),
            "spec.audiences[0]"
        );
        let owned = [created[1].to_string(), created[0].to_string()];
        let status = run::status::<Greetings>(&cr, &owned, &[], "2026-11-25T10:00:00Z", None).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&status).unwrap(),
            json!({"observedGeneration": 2, "phase": "Published in ConfigMap hello, hello-world"})
        );
        let invalid = greeting(json!({"message": 42}));
        let status = run::status::<Greetings>(&invalid, &[], &[], "2026-11-25T10:00:00Z", Some("invalid")).unwrap();
        assert!(status.contains("Invalid: spec.message must be a string"), "{status}");
    }

    #[test]
    fn a_configmap_controlled_by_another_parent_is_refused() {
        let cr = greeting(json!({"message": "hi"}));
        let foreign = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hello", "ownerReferences": [{"apiVersion": "v1", "kind": "Greeting", "name": "x",
                                                               "uid": "other", "controller": true}]}});
        assert_eq!(invalid_at(desired(&cr, &[foreign.to_string()], &[])), "metadata.ownerReferences");
    }

    #[test]
    fn the_crd_is_generated_from_the_types() {
        let manifest = Greetings::manifest();
        let crd: Value = serde_json::from_str(&manifest.crd).unwrap();
        assert_eq!(crd["metadata"]["name"], "greetings.example.c5c3.io");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["subresources"]["status"], json!({}));
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["x-kubernetes-preserve-unknown-fields"], true, "{spec}");
        assert_eq!((manifest.owned.len(), manifest.reads[0].plural.as_str()), (1, "secrets"));
    }
}
