//! Shared helpers for the integration tests: CRs from JSON, one call per
//! builder, JSON merge patches for variants and drift, subset assertions for
//! the seeds' "Produces:" YAML, and the render/desired exports as JSON values.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memcached_logic::Memcached;
use memcached_logic::builders;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

pub const NAME: &str = "my-cache";
pub const NAMESPACE: &str = "default";
pub const API_VERSION: &str = "memcached.c5c3.io/v1beta1";

// ---- CRs ----

/// A complete Memcached object `my-cache` in `default` with this spec.
pub fn cr_value(spec: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "Memcached",
        "metadata": { "name": NAME, "namespace": NAMESPACE },
        "spec": spec,
    })
}

/// The typed CR for `cr_value(spec)`.
pub fn cr(spec: Value) -> Memcached {
    memcached(cr_value(spec))
}

/// A typed CR from any Memcached JSON object.
pub fn memcached(value: Value) -> Memcached {
    from_value(value)
}

pub fn text(value: &Value) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

pub fn to_value<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("serializes")
}

pub fn from_value<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|err| panic!("does not deserialize: {err}"))
}

/// RFC 7386 JSON merge patch: objects merge, `null` deletes, anything else replaces.
pub fn merge(mut base: Value, patch: Value) -> Value {
    merge_into(&mut base, patch);
    base
}

fn merge_into(base: &mut Value, patch: Value) {
    match patch {
        Value::Object(patch) => {
            if !base.is_object() {
                *base = Value::Object(Map::new());
            }
            let target = base.as_object_mut().expect("just made an object");
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge_into(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        other => *base = other,
    }
}

// ---- expected fragments ----

pub fn standard_labels(name: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "memcached",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "memcached-operator",
    })
}

/// The controller owner reference the seeds show (a CR without uid gives none).
pub fn owner_reference(name: &str) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "Memcached",
        "name": name,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

// ---- builders, each on a new object or on `current` ----

pub fn build_deployment(memcached: &Memcached, current: Option<Deployment>, secrets: &[Secret]) -> Deployment {
    let mut deployment = current.unwrap_or_default();
    builders::construct_deployment(memcached, &mut deployment, secrets);
    deployment
}

pub fn build_service(memcached: &Memcached, current: Option<Service>) -> Service {
    let mut service = current.unwrap_or_default();
    builders::construct_service(memcached, &mut service);
    service
}

pub fn build_pdb(memcached: &Memcached, current: Option<PodDisruptionBudget>) -> PodDisruptionBudget {
    let mut pdb = current.unwrap_or_default();
    builders::construct_pdb(memcached, &mut pdb);
    pdb
}

pub fn build_hpa(memcached: &Memcached, current: Option<HorizontalPodAutoscaler>) -> HorizontalPodAutoscaler {
    let mut hpa = current.unwrap_or_default();
    builders::construct_hpa(memcached, &mut hpa);
    hpa
}

pub fn build_network_policy(memcached: &Memcached, current: Option<NetworkPolicy>) -> NetworkPolicy {
    let mut policy = current.unwrap_or_default();
    builders::construct_network_policy(memcached, &mut policy);
    policy
}

pub fn build_service_monitor(memcached: &Memcached, current: Option<Value>) -> Value {
    let mut monitor = match current {
        Some(Value::Object(map)) => map,
        Some(other) => panic!("a ServiceMonitor must be an object, got {other}"),
        None => Map::new(),
    };
    builders::construct_service_monitor(memcached, &mut monitor);
    Value::Object(monitor)
}

/// Builds on `current` as JSON (the way a host passes what the server returned).
pub fn build_json<T: Serialize + DeserializeOwned>(
    current: Option<&Value>,
    build: impl FnOnce(Option<T>) -> T,
) -> Value {
    to_value(&build(current.cloned().map(from_value)))
}

/// Builds once from nothing and again from the first result: the second
/// build must change nothing ("reconcile twice with same spec → no change").
pub fn assert_idempotent<T: Clone + PartialEq + std::fmt::Debug>(build: impl Fn(Option<T>) -> T) -> T {
    let first = build(None);
    let second = build(Some(first.clone()));
    pretty_assertions::assert_eq!(first, second, "building from the built object changed it");
    first
}

// ---- Secrets ----

pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(NAMESPACE.into()), ..Default::default() },
        data: (!data.is_empty()).then(|| {
            data.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec()))).collect::<BTreeMap<_, _>>()
        }),
        ..Default::default()
    }
}

pub fn secret_json(name: &str, data: &[(&str, &str)]) -> String {
    text(&to_value(&secret(name, data)))
}

// ---- exports ----

/// `exports::render` as JSON values, in reconcile order.
pub fn render(cr: &Value) -> Vec<Value> {
    memcached_logic::exports::render(&text(cr))
        .unwrap_or_else(|err| panic!("render failed: {err}"))
        .iter()
        .map(|o| serde_json::from_str(o).expect("render answers JSON"))
        .collect()
}

pub fn rendered_kinds(cr: &Value) -> Vec<String> {
    render(cr).iter().map(|o| o["kind"].as_str().expect("kind").to_owned()).collect()
}

/// The one rendered object of `kind`, if rendered.
pub fn rendered(cr: &Value, kind: &str) -> Option<Value> {
    render(cr).into_iter().find(|o| o["kind"] == kind)
}

/// The object of `kind` in `exports::desired`'s answer, as a JSON value,
/// given `current` as the one object the CR controls now.
pub fn desired(kind: &str, cr: &Value, current: Option<&Value>, related: &[String]) -> Option<Value> {
    let owned: Vec<String> = current.map(text).into_iter().collect();
    memcached_logic::exports::desired(&text(cr), &owned, related)
        .unwrap_or_else(|err| panic!("desired {kind} failed: {err}"))
        .into_iter()
        .map(|o| serde_json::from_str::<Value>(&o).expect("desired answers JSON"))
        .find(|o| o["kind"] == kind)
}

// ---- assertions ----

/// Every key of `expected` is in `actual` with an equal value (recursively);
/// lists must have the same length and match item by item. This is how a
/// seed's "Produces:" YAML is checked "for the fields shown".
#[track_caller]
pub fn assert_subset(actual: &Value, expected: &Value) {
    if let Err(problem) = subset(actual, expected, "") {
        panic!(
            "{problem}\n--- actual ---\n{}\n--- expected (subset) ---\n{}",
            serde_json::to_string_pretty(actual).unwrap(),
            serde_json::to_string_pretty(expected).unwrap()
        );
    }
}

fn subset(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => {
            for (key, want) in expected {
                let here = format!("{path}.{key}");
                let have = actual.get(key).ok_or_else(|| format!("{here} is missing"))?;
                subset(have, want, &here)?;
            }
            Ok(())
        }
        (Value::Array(actual), Value::Array(expected)) => {
            if actual.len() != expected.len() {
                return Err(format!("{path} has {} items, expected {}", actual.len(), expected.len()));
            }
            for (i, (have, want)) in actual.iter().zip(expected).enumerate() {
                subset(have, want, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (have, want) if have == want => Ok(()),
        (have, want) => Err(format!("{path} is {have}, expected {want}")),
    }
}

/// The value at a JSON pointer, or null.
pub fn at<'a>(value: &'a Value, pointer: &str) -> &'a Value {
    value.pointer(pointer).unwrap_or(&Value::Null)
}

/// A list of strings from a JSON array of strings.
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected a list, got {value}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_else(|| panic!("expected a string, got {v}")).to_owned())
        .collect()
}
