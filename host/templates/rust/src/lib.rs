//! The {{kind}} module: a `{{group}}/{{version}}` {{kind}} owns a ConfigMap
//! named after it holding `spec.message`; its status has a `Ready`
//! condition. An empty message is invalid, reported at `spec.message`.
//!
//! The SDK does the rest: parsing, the namespace, the controller owner
//! reference, merging onto the ConfigMap the server has (so an unchanged
//! {{kind}} writes nothing), the CRD from the types below.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use sdk::k8s_openapi::api::core::v1::ConfigMap;
use sdk::prelude::*;
use serde::{Deserialize, Serialize};
use wasm_operator_sdk as sdk;

/// What a {{kind}} asks for.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "{{group}}", version = "{{version}}", kind = "{{kind}}", plural = "{{plural}}")]
#[kube(namespaced, status = "{{kind}}Status")]
// kube-derive's generated code reaches these crates through the SDK.
#[kube(crates(kube_core = "sdk::kube_core", k8s_openapi = "sdk::k8s_openapi", serde_json = "sdk::serde_json"))]
pub struct {{kind}}Spec {
    /// What the ConfigMap holds.
    #[serde(default)]
    pub message: String,
}

/// What the module reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct {{kind}}Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, and the host's own `Stalled` when the module fails.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

pub struct {{kind}}Module;

impl Reconciler for {{kind}}Module {
    type Parent = {{kind}};
    type Status = {{kind}}Status;

    fn manifest() -> Manifest {
        Manifest::new::<{{kind}}>("{{name}}", env!("CARGO_PKG_VERSION")).owns::<ConfigMap>()
    }

    fn desired(parent: &{{kind}}, _ctx: &Context) -> Result<Vec<Object>, Error> {
        if parent.spec.message.is_empty() {
            return Err(Error::invalid("spec.message", "must not be empty"));
        }
        let config_map = ConfigMap {
            metadata: ObjectMeta { name: parent.metadata.name.clone(), ..ObjectMeta::default() },
            data: Some([("message".to_owned(), parent.spec.message.clone())].into()),
            ..ConfigMap::default()
        };
        // The module owns all of `data`: keys it no longer sets go.
        Ok(vec![Object::new(&config_map).replacing("/data")])
    }

    fn status(parent: &{{kind}}, ctx: &Context) -> Result<{{kind}}Status, Error> {
        let generation = parent.metadata.generation;
        let name = parent.metadata.name.as_deref().unwrap_or_default();
        // Only our own condition: the host's Stalled goes once we answer.
        let mut conditions: Vec<Condition> =
            parent.status.iter().flat_map(|s| s.conditions.clone()).filter(|c| c.type_ == "Ready").collect();
        let (ready, reason, message) = match (ctx.problem(), ctx.owned::<ConfigMap>(name)) {
            (Some(problem), _) => (false, "Invalid", problem.to_owned()),
            (None, Some(_)) => (true, "Published", format!("ConfigMap {name} holds the message")),
            (None, None) => (false, "Pending", "the ConfigMap is not there yet".to_owned()),
        };
        set_condition(&mut conditions, "Ready", ready, reason, message, generation, &ctx.now());
        Ok({{kind}}Status { observed_generation: generation, conditions })
    }
}

export_reconciler!({{kind}}Module);

#[cfg(test)]
mod tests {
    use wasm_operator_sdk::run;
    use wasm_operator_sdk::serde_json::{self, Value, json};

    use super::*;

    fn parent(message: &str) -> String {
        json!({"apiVersion": "{{group}}/{{version}}", "kind": "{{kind}}",
               "metadata": {"name": "hello", "namespace": "ns", "uid": "u-1", "generation": 1},
               "spec": {"message": message}})
        .to_string()
    }

    #[test]
    fn the_configmap_holds_the_message_and_is_owned() {
        let objects = run::desired::<{{kind}}Module>(&parent("hi"), &[], &[]).expect("objects");
        let config_map: Value = serde_json::from_str(&objects[0]).expect("JSON");
        assert_eq!(config_map["data"], json!({"message": "hi"}));
        assert_eq!(config_map["metadata"]["namespace"], "ns");
        assert_eq!(config_map["metadata"]["ownerReferences"][0]["uid"], "u-1");
        // Built again on the server's answer: nothing changes.
        let again = run::desired::<{{kind}}Module>(&parent("hi"), &objects, &[]).expect("objects");
        assert_eq!(serde_json::from_str::<Value>(&again[0]).expect("JSON"), config_map);
    }

    #[test]
    fn an_empty_message_is_invalid_at_its_field() {
        let error = run::desired::<{{kind}}Module>(&parent(""), &[], &[]).expect_err("invalid");
        assert_eq!(error.field_errors()[0].path, "spec.message");
        let status = run::status::<{{kind}}Module>(&parent(""), &[], &[], "2026-01-01T00:00:00Z", Some("invalid"))
            .expect("a status");
        assert!(status.contains("\"reason\":\"Invalid\""), "{status}");
    }
}
