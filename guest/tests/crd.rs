//! deploy/crd/ is what the API types generate, and what the module's
//! manifest hands a host (`memcached-operator crd` prints it).

use memcached_logic::{api, exports};

const COMMITTED: &str = "../deploy/crd/memcached.c5c3.io_memcacheds.yaml";

#[test]
fn deploy_crd_is_generated_from_the_api_types() {
    let committed = std::fs::read_to_string(COMMITTED).expect("deploy/crd exists");
    assert_eq!(api::crd_yaml(), committed, "deploy/crd is stale: run `make manifests`");
}

#[test]
fn the_manifest_carries_the_crd_of_its_parent_kind() {
    let manifest = exports::manifest();
    assert_eq!(manifest.crd, std::fs::read_to_string(COMMITTED).expect("deploy/crd exists"));
    let crd: serde_json::Value = serde_norway::from_str(manifest.crd).expect("the CRD is YAML");
    assert_eq!(crd["spec"]["group"], manifest.parent.group);
    assert_eq!(crd["spec"]["names"]["kind"], manifest.parent.kind);
    assert_eq!(crd["spec"]["names"]["plural"], manifest.parent.plural);
}

/// Both versions served with one schema (so the API server converts with no
/// webhook), printer columns and CEL rules on both; the parent kind the host
/// watches, and owner references name, is the one stored.
#[test]
fn the_crd_serves_both_versions_alike_and_stores_the_manifests() {
    let manifest = exports::manifest();
    let crd: serde_json::Value = serde_norway::from_str(manifest.crd).expect("the CRD is YAML");
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let names: Vec<&str> = versions.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(names, api::SERVED_VERSIONS);
    let stored: Vec<&str> =
        versions.iter().filter(|v| v["storage"] == true).filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(stored, [manifest.parent.version], "one storage version, the manifest's parent");
    assert!(versions.iter().all(|v| v["served"] == true));
    assert!(crd["spec"].get("conversion").is_none(), "no conversion webhook");
    for version in versions {
        assert_eq!(version["schema"], versions[0]["schema"], "{}: the same schema", version["name"]);
        assert_eq!(version["additionalPrinterColumns"].as_array().map(Vec::len), Some(3), "{}", version["name"]);
        assert_eq!(version["subresources"]["status"], serde_json::json!({}), "{}", version["name"]);
    }
    let rules = versions[0].pointer("/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations");
    assert!(rules.and_then(|r| r.as_array()).is_some_and(|r| r.len() == 4), "the spec's CEL rules: {rules:?}");
}
