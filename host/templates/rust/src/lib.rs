//! The {{kind}} module: a `{{group}}/{{version}}` {{kind}} owns a ConfigMap
//! named after it holding `spec.message`; its status has a `Ready`
//! condition. An empty message is invalid, reported at `spec.message`.
//!
//! `desired` answers only the fields the module sets; the SDK does the rest:
//! parsing, the namespace, the controller owner reference, the CRD from the
//! types below. The module writes by server-side apply
//! (`WriteModel::Apply`): the host applies each answer under the module's
//! field manager, so a field the module stops setting is removed, fields
//! others set stay, and an unchanged {{kind}} writes nothing.

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

    // Each answer is written by server-side apply: a data key the module no
    // longer answers is removed, what others set on the ConfigMap stays.
    const WRITES: WriteModel = WriteModel::Apply;

    fn manifest() -> Manifest {
        Manifest::new::<{{kind}}>("{{name}}", env!("CARGO_PKG_VERSION")).owns::<ConfigMap>()
    }

    fn desired(parent: &{{kind}}, _ctx: &Context) -> Result<Vec<Object>, Error> {
        if parent.spec.message.is_empty() {
            return Err(Error::invalid("spec.message", "must be a non-empty string"));
        }
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: parent.metadata.name.clone(),
                labels: Some([("app.kubernetes.io/managed-by".to_owned(), "{{name}}".to_owned())].into()),
                ..ObjectMeta::default()
            },
            data: Some([("message".to_owned(), parent.spec.message.clone())].into()),
            ..ConfigMap::default()
        };
        Ok(vec![Object::new(&config_map)])
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
    }

    #[test]
    fn writes_by_server_side_apply() {
        assert_eq!({{kind}}Module::WRITES, WriteModel::Apply);
    }

    #[test]
    fn the_answer_is_the_modules_fields_alone_whatever_the_server_has() {
        let answer = run::desired::<{{kind}}Module>(&parent("new"), &[], &[]).expect("objects");
        // The ConfigMap as the server has it: what it filled in, another
        // manager's label, and a key an earlier version applied.
        let mut server: Value = serde_json::from_str(&answer[0]).expect("JSON");
        server["metadata"]["uid"] = json!("cm-uid");
        server["metadata"]["resourceVersion"] = json!("41");
        server["metadata"]["labels"]["team"] = json!("blue");
        server["data"] = json!({"message": "old", "left": "by an earlier version"});
        // Nothing is merged: the answer is the same, and `left` is not in
        // it (the server removes it, as the module no longer applies it).
        let again = run::desired::<{{kind}}Module>(&parent("new"), &[server.to_string()], &[]).expect("objects");
        assert_eq!(again, answer);
        let config_map: Value = serde_json::from_str(&again[0]).expect("JSON");
        assert_eq!(config_map["data"], json!({"message": "new"}));
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
