//! What the Queue keeps: its settings (a ConfigMap), a claim for backups
//! and a credentials Secret.

use std::collections::BTreeMap;

use wasm_operator_sdk::k8s_openapi::ByteString;
use wasm_operator_sdk::k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, PersistentVolumeClaimSpec, Secret, VolumeResourceRequirements,
};
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasm_operator_sdk::prelude::*;

use crate::{Queue, V2, metadata};

/// The settings key the consumers read their prefetch count from (before v2).
pub const PREFETCH_KEY: &str = "prefetch";

pub fn settings_name(queue: &Queue) -> String {
    format!("{}-settings", queue.name_any())
}

/// The spec's settings, and the consumers' prefetch count when there are
/// consumers (before v2).
pub fn settings(queue: &Queue) -> ConfigMap {
    let mut data = queue.spec.settings.clone();
    if queue.spec.consumers.is_some() && !V2 {
        data.insert(PREFETCH_KEY.into(), "10".into());
    }
    ConfigMap { metadata: metadata(&settings_name(queue), queue), data: Some(data), ..Default::default() }
}

pub fn backup_claim(queue: &Queue, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: metadata(&format!("{}-backup", queue.name_any()), queue),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_owned(), Quantity(size.to_owned()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn credentials(queue: &Queue, username: &str) -> Secret {
    Secret {
        metadata: metadata(&format!("{}-credentials", queue.name_any()), queue),
        type_: Some("kubernetes.io/basic-auth".into()),
        data: Some(BTreeMap::from([("username".to_owned(), ByteString(username.as_bytes().to_vec()))])),
        ..Default::default()
    }
}
