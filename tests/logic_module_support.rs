//! What the tests of LogicModule resources share: the test modules
//! `make test` builds, the LogicModule CRD, and waiting on its status.
//! Include it beside operator_support.rs.

#![allow(dead_code)]

use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use crate::operator_support::{condition, gvk};

/// A LogicModule is cluster-scoped and named after its module, so the
/// tests of one binary (one control plane) that create the `greeting` one
/// take turns: each holds this while its LogicModule exists.
pub static GREETING_LOGIC_MODULE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub const LOGIC_MODULE_CRD: &str = include_str!("../deploy/logic-modules/logicmodules.wasm-operator.c5c3.io.yaml");

/// A test module's bytes from target/ (`make test` builds them).
pub fn built(file: &str) -> Vec<u8> {
    let path = control_plane::repo_root().join("target").join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{} ({e}): `make test` builds it", path.display()))
}

fn logic_module_status(resource: &DynamicObject) -> Value {
    resource.data.get("status").cloned().unwrap_or(Value::Null)
}

/// The LogicModule `greeting` once its status describes its current spec
/// and satisfies `check`.
pub async fn wait_logic_module(api: &Api<DynamicObject>, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_logic_module_named(api, "greeting", what, Duration::from_secs(90), check).await
}

/// The LogicModule `name` once its status describes its current spec and
/// satisfies `check`, within `wait`.
pub async fn wait_logic_module_named(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    wait: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let last = std::sync::Mutex::new(Value::Null);
    let waited = tokio::time::timeout(wait, async {
        loop {
            if let Ok(resource) = api.get(name).await {
                let status = logic_module_status(&resource);
                let current = status["observedGeneration"].as_i64() == resource.metadata.generation;
                if current && check(&status) {
                    return status;
                }
                *last.lock().expect("unpoisoned") = status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    waited
        .unwrap_or_else(|_| panic!("timed out waiting for {what}; the status: {:#}", last.lock().expect("unpoisoned")))
}

/// Whether the status has condition `type_` with `state` and `reason`.
pub fn has(status: &Value, type_: &str, state: &str, reason: &str) -> bool {
    let condition = condition(status, type_);
    condition["status"] == state && condition["reason"] == reason
}

/// Warning or Normal events on a LogicModule (cluster-scoped objects'
/// events live in `default`), by reason: their notes.
pub async fn logic_module_events(client: &kube::Client, reason: &str) -> Vec<String> {
    let events: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &gvk("events.k8s.io", "v1", "Event", "events"));
    let list = events.list(&ListParams::default()).await.expect("listing events");
    list.items
        .iter()
        .filter(|e| e.data["regarding"]["kind"] == "LogicModule" && e.data["reason"] == reason)
        .filter_map(|e| e.data["note"].as_str().map(str::to_owned))
        .collect()
}
