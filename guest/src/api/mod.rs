//! The API: types, defaults and validation of `Memcached` v1alpha1.

pub mod defaults;
mod memcached;
pub mod validation;

pub use memcached::*;

/// The CustomResourceDefinition generated from these types, as YAML in the
/// module's deterministic style: what `make manifests` writes to
/// `deploy/crd/`, and what the module's manifest carries (`exports::CRD_YAML`).
pub fn crd_yaml() -> String {
    use kube_core::CustomResourceExt;
    // A CRD always serializes (string keys, JSON values).
    let value = serde_json::to_value(Memcached::crd()).unwrap_or_default();
    crate::yaml::document(&value)
}
