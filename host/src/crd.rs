//! The CustomResourceDefinition, generated from the API types: OpenAPI
//! ranges, enums and defaults from the schema attributes, CEL rules for the
//! cross-field checks, the status subresource and printer columns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_core::CustomResourceExt;
use memcached_logic::Memcached;

pub fn custom_resource_definition() -> CustomResourceDefinition {
    Memcached::crd()
}

/// The CRD as YAML, in the module's deterministic style (`deploy/crd/`).
pub fn crd_yaml() -> Result<String, serde_json::Error> {
    let value = serde_json::to_value(custom_resource_definition())?;
    Ok(memcached_logic::yaml::document(&value))
}
