//! The API: types, defaults and validation of `Memcached`, served as
//! v1alpha1 and v1beta1 (one schema) and stored as v1beta1.

pub mod defaults;
mod memcached;
pub mod validation;

pub use memcached::*;
use serde_json::{Value, json};

/// Every version the CRD serves, oldest first. They share one schema, so the
/// API server converts between them with no webhook (`None` strategy); the
/// last is the storage version, the one the types (and owner references) name.
pub const SERVED_VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// The CustomResourceDefinition generated from these types, as YAML in the
/// module's deterministic style: what `make manifests` writes to
/// `deploy/crd/`, and what the module's manifest carries (`exports::CRD_YAML`).
pub fn crd_yaml() -> String {
    use kube_core::CustomResourceExt;
    // A CRD always serializes (string keys, JSON values).
    let mut crd = serde_json::to_value(Memcached::crd()).unwrap_or_default();
    serve_every_version(&mut crd);
    default_the_spec(&mut crd);
    crate::yaml::document(&crd)
}

/// The one generated version, repeated for each served version; the last stores.
fn serve_every_version(crd: &mut Value) {
    let Some(generated) = crd.pointer("/spec/versions/0").cloned() else { return };
    let versions = SERVED_VERSIONS
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let mut version = generated.clone();
            version["name"] = json!(name);
            version["served"] = json!(true);
            version["storage"] = json!(index + 1 == SERVED_VERSIONS.len());
            version
        })
        .collect();
    crd["spec"]["versions"] = Value::Array(versions);
}

/// A CR may leave out `spec` (the Go operator's CRD allows it): it is stored
/// as `{}` with the nested defaults applied, instead of being refused.
fn default_the_spec(crd: &mut Value) {
    for version in crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema").and_then(Value::as_object_mut) else {
            continue;
        };
        schema.remove("required");
        if let Some(spec) = schema.get_mut("properties").and_then(|p| p.get_mut("spec")).and_then(Value::as_object_mut)
        {
            spec.insert("default".into(), json!({}));
        }
    }
}
