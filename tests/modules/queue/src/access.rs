//! Peer discovery: the brokers' ServiceAccount, a Role reading Pods and
//! Endpoints, and the RoleBinding granting it.

use wasm_operator_sdk::k8s_openapi::api::core::v1::ServiceAccount;
use wasm_operator_sdk::k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use wasm_operator_sdk::prelude::*;

use crate::{Queue, metadata};

pub fn service_account(queue: &Queue) -> ServiceAccount {
    ServiceAccount { metadata: metadata(&queue.name_any(), queue), ..Default::default() }
}

pub fn role(queue: &Queue) -> Role {
    Role {
        metadata: metadata(&queue.name_any(), queue),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["endpoints".into(), "pods".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..Default::default()
        }]),
    }
}

pub fn role_binding(queue: &Queue) -> RoleBinding {
    let name = queue.name_any();
    RoleBinding {
        metadata: metadata(&name, queue),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name,
            namespace: queue.namespace(),
            ..Default::default()
        }]),
    }
}
