//! The controller owner reference (seeds' "Owner Reference" tables), set by
//! `exports::render` and `exports::desired`; builders set none.

mod common;

use common::*;
use memcached_logic::owner::set_controller_reference;
use memcached_logic::{Error, exports};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

fn everything() -> Value {
    json!({
        "resources": { "requests": { "cpu": "1" } },
        "autoscaling": { "enabled": true, "maxReplicas": 5, "minReplicas": 3 },
        "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1 } },
        "monitoring": { "enabled": true, "serviceMonitor": {} },
        "security": { "networkPolicy": { "enabled": true } },
    })
}

fn with_uid(cr: Value, uid: &str) -> Value {
    merge(cr, json!({ "metadata": { "uid": uid } }))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn every_rendered_object_has_one_controller_reference() {
    let objects = render(&cr_value(everything()));
    assert_eq!(objects.len(), 6);
    for o in objects {
        assert_eq!(o["metadata"]["ownerReferences"], json!([owner_reference("my-cache")]), "{}", o["kind"]);
        assert_eq!(o["metadata"]["name"], "my-cache", "{}", o["kind"]);
        assert_eq!(o["metadata"]["namespace"], "default", "{}", o["kind"]);
    }
}

#[test]
fn desired_objects_carry_the_crs_uid() {
    // Either served version: the reference names the storage version, v1beta1.
    for api_version in ["memcached.c5c3.io/v1beta1", "memcached.c5c3.io/v1alpha1"] {
        let mut cr = with_uid(cr_value(everything()), "3f1e0c5a-uid");
        cr["apiVersion"] = json!(api_version);
        for kind in memcached_logic::children::ChildKind::ALL.map(|k| k.info().kind) {
            let got = desired(kind, &cr, None, &[]).unwrap();
            assert_eq!(
                got["metadata"]["ownerReferences"],
                json!([{
                    "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached", "name": "my-cache",
                    "uid": "3f1e0c5a-uid", "controller": true, "blockOwnerDeletion": true,
                }]),
                "{api_version} {kind}"
            );
        }
    }
}

/// A child an earlier release owned through v1alpha1 is taken over in place:
/// its reference moves to v1beta1, no second controller reference appears.
#[test]
fn a_v1alpha1_owner_reference_moves_to_v1beta1() {
    let cr = with_uid(cr_value(json!({})), "u-1");
    let current = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "my-cache", "namespace": "default",
        "ownerReferences": [{ "apiVersion": "memcached.c5c3.io/v1alpha1", "kind": "Memcached", "name": "my-cache",
                              "uid": "u-1", "controller": true, "blockOwnerDeletion": true }] } });
    let got = desired("Service", &cr, Some(&current), &[]).unwrap();
    let references = got["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(references.len(), 1, "{references:?}");
    assert_eq!(references[0]["apiVersion"], "memcached.c5c3.io/v1beta1");
}

#[test]
fn the_construct_export_sets_no_owner_reference() {
    use memcached_logic::children::ChildKind;
    let cr = text(&with_uid(cr_value(everything()), "u"));
    for kind in ChildKind::ALL {
        let got: Value = serde_json::from_str(&exports::construct(kind, &cr, None, &[]).unwrap()).unwrap();
        assert!(got["metadata"].get("ownerReferences").is_none(), "{kind:?}");
    }
}

#[test]
fn a_render_without_namespace_goes_to_default() {
    let cr = json!({ "apiVersion": API_VERSION, "kind": "Memcached", "metadata": { "name": "my-cache" }, "spec": { "replicas": 3 } });
    for o in render(&cr) {
        assert_eq!(o["metadata"]["namespace"], "default", "{}", o["kind"]);
    }
}

#[test]
fn references_are_merged_with_what_the_object_has() {
    let cr = memcached(with_uid(cr_value(json!({})), "new-uid"));
    let ours = merge(owner_reference("my-cache"), json!({ "uid": "new-uid" }));
    let other_owner = json!({ "apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "cm" });
    let not_controlling =
        json!({ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "rs", "controller": false });
    let cases: Vec<(&str, Value, Value)> = vec![
        ("none yet", json!({}), json!([ours.clone()])),
        ("null", json!({ "ownerReferences": null }), json!([ours.clone()])),
        (
            "a stale reference to this CR is replaced",
            json!({ "ownerReferences": [merge(owner_reference("my-cache"), json!({ "uid": "old-uid" }))] }),
            json!([ours.clone()]),
        ),
        (
            "another apiVersion of the same CR is replaced",
            json!({ "ownerReferences": [merge(owner_reference("my-cache"), json!({ "apiVersion": "memcached.c5c3.io/v1beta1" }))] }),
            json!([ours.clone()]),
        ),
        (
            "other owners are kept",
            json!({ "ownerReferences": [other_owner.clone(), not_controlling.clone()] }),
            json!([other_owner.clone(), not_controlling.clone(), ours.clone()]),
        ),
        (
            "a Memcached of another name is another owner",
            json!({ "ownerReferences": [merge(owner_reference("other"), json!({ "controller": false }))] }),
            json!([merge(owner_reference("other"), json!({ "controller": false })), ours.clone()]),
        ),
    ];
    for (row, metadata, want) in cases {
        let mut target = object(json!({ "metadata": metadata }));
        set_controller_reference(&mut target, &cr).unwrap_or_else(|e| panic!("{row}: {e}"));
        assert_eq!(target["metadata"]["ownerReferences"], want, "{row}");
        // Setting it again changes nothing.
        let again = target.clone();
        set_controller_reference(&mut target, &cr).unwrap();
        assert_eq!(target, again, "{row}: idempotent");
    }
}

#[test]
fn an_object_controlled_by_someone_else_is_not_taken_over() {
    let cr = memcached(cr_value(json!({})));
    for controller in [
        json!({ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true }),
        merge(owner_reference("another-cache"), json!({ "uid": "u2" })),
    ] {
        let mut target = object(json!({ "metadata": { "ownerReferences": [controller.clone()] } }));
        match set_controller_reference(&mut target, &cr) {
            Err(Error::Invalid(errors)) => assert_eq!(errors[0].path, "metadata.ownerReferences", "{controller}"),
            other => panic!("{controller}: expected Invalid, got {other:?}"),
        }
        // Through desired too: the host gets an error, not an object to write.
        let current = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "my-cache", "ownerReferences": [controller] } });
        assert!(exports::desired(&text(&cr_value(json!({}))), &[text(&current)], &[]).is_err());
    }
}

#[test]
fn malformed_metadata_is_an_error() {
    let cr = memcached(cr_value(json!({})));
    for (value, path) in [
        (json!({ "metadata": "x" }), "metadata"),
        (json!({ "metadata": { "ownerReferences": {} } }), "metadata.ownerReferences"),
    ] {
        match set_controller_reference(&mut object(value.clone()), &cr) {
            Err(Error::Malformed(errors)) => assert_eq!(errors[0].path, path, "{value}"),
            other => panic!("{value}: expected Malformed, got {other:?}"),
        }
    }
}
