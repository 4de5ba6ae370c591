//! `references`: the Secrets a CR names, read from `spec.security` alone.

mod common;

use common::*;
use memcached_logic::exports;
use serde_json::{Value, json};

fn names(cr: &Value) -> Vec<String> {
    exports::references(&text(cr)).expect("references").into_iter().map(|r| r.name).collect()
}

/// Every golden fixture: the same names as the whole typed CR gives.
#[test]
fn references_agree_with_the_whole_cr_for_every_fixture() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut read = 0;
    for entry in std::fs::read_dir(&fixtures).expect("the fixtures") {
        let path = entry.expect("a fixture").path().join("memcached.yaml");
        let Ok(yaml) = std::fs::read_to_string(&path) else { continue };
        let cr: Value = serde_norway::from_str(&yaml).expect("a fixture parses");
        let whole: Vec<String> =
            memcached(cr.clone()).spec.referenced_secret_names().into_iter().map(String::from).collect();
        assert_eq!(names(&cr), whole, "{}", path.display());
        read += 1;
    }
    assert!(read >= 10, "only {read} fixtures read");
}

#[test]
fn references_name_each_enabled_secret_once_and_sorted() {
    let security = |sasl: bool, tls: bool| {
        cr_value(json!({ "security": {
            "sasl": { "enabled": sasl, "credentialsSecretRef": { "name": "shared" } },
            "tls": { "enabled": tls, "certificateSecretRef": { "name": "a-certs" } },
        }}))
    };
    assert_eq!(names(&security(true, true)), ["a-certs", "shared"]);
    assert_eq!(names(&security(true, false)), ["shared"]);
    assert!(names(&security(false, false)).is_empty());
    assert!(names(&cr_value(json!({}))).is_empty());
}

/// The rest of the CR is not read here: `desired` reports it, with every
/// path. The type and `spec.security` are still checked.
#[test]
fn references_read_only_the_type_and_the_security_section() {
    let mut cr = cr_value(json!({
        "replicas": "three",
        "security": { "sasl": { "enabled": true, "credentialsSecretRef": { "name": "creds" } } },
    }));
    cr["metadata"]["labels"] = json!(["not", "a", "map"]);
    assert_eq!(names(&cr), ["creds"]);
    assert!(exports::desired(&text(&cr), &[], &[]).is_err(), "desired refuses the same CR");

    let mut wrong_kind = cr.clone();
    wrong_kind["kind"] = json!("Deployment");
    let error = exports::references(&text(&wrong_kind)).unwrap_err();
    assert!(error.to_string().contains("kind"), "{error}");

    let mut wrong_version = cr.clone();
    wrong_version["apiVersion"] = json!("memcached.c5c3.io/v9");
    let error = exports::references(&text(&wrong_version)).unwrap_err();
    assert!(error.to_string().contains("apiVersion"), "{error}");

    let bad_security = cr_value(json!({ "security": { "tls": { "enabled": "yes" } } }));
    let error = exports::references(&text(&bad_security)).unwrap_err();
    assert!(error.to_string().contains("enabled"), "{error}");
}
