//! The CRD a manifest ships must describe the manifest's parent kind: the
//! host installs nothing, but `wasm-operator crd` prints it for the user to
//! apply, and a CRD for another group, kind or version (or without the
//! status subresource the host writes through) would fail only later, on
//! the cluster, with a less clear message.
//!
//! - `schema`: its schemas held to the API server's structural rules;
//! - `validation`: a value under a schema, defaulted and validated as the
//!   API server does it (each `default` of a CRD; a status answer).

pub mod schema;
pub mod validation;

use serde_json::Value;

use super::bindings::KindInfo;

/// What is wrong with `crd` (YAML or JSON) for `parent`, if anything. An
/// empty text (a module that ships no CRD) passes.
pub fn check(crd: &str, parent: &KindInfo) -> Result<(), String> {
    if crd.trim().is_empty() {
        return Ok(());
    }
    let crd: Value = serde_norway::from_str(crd).map_err(|e| format!("crd: not YAML or JSON: {e}"))?;
    let text = |pointer: &str| crd.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    if text("/kind") != "CustomResourceDefinition" {
        return Err(format!("crd: kind is {:?}, not CustomResourceDefinition", text("/kind")));
    }
    let field = |name: &str, found: &str, wanted: &str| {
        if found == wanted {
            Ok(())
        } else {
            Err(format!("crd: spec.{name} is {found:?}, but the manifest's parent has {wanted:?}"))
        }
    };
    field("group", text("/spec/group"), &parent.group)?;
    field("names.kind", text("/spec/names/kind"), &parent.kind)?;
    field("names.plural", text("/spec/names/plural"), &parent.plural)?;
    let scope = if parent.namespaced { "Namespaced" } else { "Cluster" };
    field("scope", text("/spec/scope"), scope)?;
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(version) = versions.iter().find(|v| v["name"] == parent.version.as_str()) else {
        let names: Vec<&str> = versions.iter().filter_map(|v| v["name"].as_str()).collect();
        return Err(format!(
            "crd: spec.versions has no {:?} (it has {}), the manifest's parent version",
            parent.version,
            names.join(", ")
        ));
    };
    if version["served"] != Value::Bool(true) {
        return Err(format!("crd: version {} is not served", parent.version));
    }
    if version.pointer("/subresources/status").is_none() {
        return Err(format!(
            "crd: version {} has no status subresource (spec.versions[].subresources.status); the host writes status through it",
            parent.version
        ));
    }
    schema::check(&crd)
}

/// The schema of `parent`'s `status` in `crd` (its served version's), for
/// comparing a status answer as the API server stores it; none when the
/// module ships no CRD or it says nothing of the status.
pub fn status_schema(crd: &str, parent: &KindInfo) -> Option<Value> {
    let crd: Value = serde_norway::from_str(crd).ok()?;
    let versions = crd.pointer("/spec/versions")?.as_array()?;
    let version = versions.iter().find(|v| v["name"] == parent.version.as_str())?;
    version.pointer("/schema/openAPIV3Schema/properties/status").cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> KindInfo {
        KindInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Site".into(),
            plural: "sites".into(),
            namespaced: true,
        }
    }

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sites.example.com}
spec:
  group: example.com
  names: {kind: Site, plural: sites}
  scope: Namespaced
  versions:
    - {name: v1, served: true, storage: true, subresources: {status: {}}}
";

    #[test]
    fn a_matching_crd_passes_and_each_mismatch_is_named() {
        assert_eq!(check(CRD, &parent()), Ok(()));
        assert_eq!(check("", &parent()), Ok(()));
        let cases = [
            ("group: example.com", "group: other.com", "spec.group"),
            ("kind: Site,", "kind: Page,", "spec.names.kind"),
            ("plural: sites", "plural: site", "spec.names.plural"),
            ("Namespaced", "Cluster", "spec.scope"),
            ("name: v1,", "name: v2,", "no \"v1\" (it has v2)"),
            ("served: true", "served: false", "not served"),
            ("subresources: {status: {}}", "subresources: {}", "no status subresource"),
        ];
        for (from, to, says) in cases {
            let error = check(&CRD.replace(from, to), &parent()).expect_err(to);
            assert!(error.contains(says), "{to}: {error}");
        }
        assert!(check("{not yaml", &parent()).is_err());
    }
}
