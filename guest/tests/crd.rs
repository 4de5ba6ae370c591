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
