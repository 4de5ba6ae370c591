//! The PodDisruptionBudget (seed 002's constructPDB example, SPEC "PodDisruptionBudget").

mod common;

use common::*;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use memcached_logic::guards;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn pdb_spec(pdb: Value) -> Value {
    json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": merge(json!({ "enabled": true }), pdb) } })
}

fn pdb(spec: Value, current: Option<&Value>) -> Value {
    let memcached = cr(spec);
    build_json(current, |c: Option<PodDisruptionBudget>| build_pdb(&memcached, c))
}

/// Seed 002: labels, minAvailable 1, selector on the standard labels.
#[test]
fn seed_construct_pdb_example() {
    let got = rendered(&cr_value(pdb_spec(json!({}))), "PodDisruptionBudget").expect("rendered");
    assert_eq!(
        got,
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": "my-cache",
                "namespace": "default",
                "labels": standard_labels("my-cache"),
                "ownerReferences": [owner_reference("my-cache")],
            },
            "spec": {
                "minAvailable": 1,
                "selector": { "matchLabels": standard_labels("my-cache") },
            },
        })
    );
}

/// SPEC: minAvailable if set (maxUnavailable cleared), else maxUnavailable
/// if set (minAvailable cleared), else minAvailable 1. Each row is built on a
/// new PDB and on one that had the opposite field set.
#[test]
fn min_available_and_max_unavailable_precedence() {
    let cases = [
        ("neither: minAvailable 1", json!({}), json!(1), Value::Null),
        ("minAvailable int", json!({ "minAvailable": 2 }), json!(2), Value::Null),
        ("minAvailable percent", json!({ "minAvailable": "50%" }), json!("50%"), Value::Null),
        ("minAvailable 0", json!({ "minAvailable": 0 }), json!(0), Value::Null),
        ("maxUnavailable int", json!({ "maxUnavailable": 1 }), Value::Null, json!(1)),
        ("maxUnavailable percent", json!({ "maxUnavailable": "25%" }), Value::Null, json!("25%")),
        ("both: minAvailable wins", json!({ "minAvailable": 2, "maxUnavailable": 1 }), json!(2), Value::Null),
    ];
    let stale = [
        json!({ "spec": { "minAvailable": 7, "maxUnavailable": "90%" } }),
        json!({ "spec": { "maxUnavailable": 5 } }),
        json!({ "spec": { "minAvailable": "10%" } }),
    ];
    for (row, settings, min, max) in cases {
        let fresh = pdb(pdb_spec(settings.clone()), None);
        assert_eq!(at(&fresh, "/spec/minAvailable"), &min, "{row}: minAvailable");
        assert_eq!(at(&fresh, "/spec/maxUnavailable"), &max, "{row}: maxUnavailable");
        for drift in &stale {
            let current = merge(fresh.clone(), drift.clone());
            let updated = pdb(pdb_spec(settings.clone()), Some(&current));
            assert_eq!(updated, fresh, "{row}: from {drift}");
        }
    }
}

#[test]
fn labels_and_selector_follow_the_cr() {
    let memcached = memcached(json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "sessions", "namespace": "prod" },
        "spec": pdb_spec(json!({})),
    }));
    let got = to_value(&build_pdb(&memcached, None));
    assert_eq!(got["metadata"]["name"], "sessions");
    assert_eq!(got["metadata"]["namespace"], "prod");
    assert_eq!(got["metadata"]["labels"], standard_labels("sessions"));
    assert_eq!(got["spec"]["selector"], json!({ "matchLabels": standard_labels("sessions") }));
}

#[test]
fn guard_follows_highavailability_poddisruptionbudget_enabled() {
    let cases = [
        ("highAvailability nil", json!({ "replicas": 3 }), false),
        ("podDisruptionBudget nil", json!({ "replicas": 3, "highAvailability": {} }), false),
        (
            "enabled omitted",
            json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "minAvailable": 1 } } }),
            false,
        ),
        (
            "enabled false",
            json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "enabled": false } } }),
            false,
        ),
        ("enabled true", pdb_spec(json!({})), true),
    ];
    for (row, spec, want) in cases {
        let cr = cr_value(spec);
        assert_eq!(guards::pdb_enabled(&memcached(cr.clone())), want, "{row}: guard");
        assert_eq!(memcached_logic::exports::pdb_enabled(&text(&cr)).unwrap(), want, "{row}: export");
        assert_eq!(desired("PodDisruptionBudget", &cr, None, &[]).is_some(), want, "{row}: desired");
        assert_eq!(rendered_kinds(&cr).contains(&"PodDisruptionBudget".to_owned()), want, "{row}: render");
    }
}

#[test]
fn disabling_makes_the_pdb_unwanted() {
    let on = cr_value(pdb_spec(json!({ "minAvailable": 2 })));
    let current = desired("PodDisruptionBudget", &on, None, &[]).expect("wanted");
    assert_eq!(current["metadata"]["ownerReferences"], json!([owner_reference("my-cache")]));
    let off = merge(on, json!({ "spec": { "highAvailability": { "podDisruptionBudget": { "enabled": false } } } }));
    assert_eq!(desired("PodDisruptionBudget", &off, Some(&current), &[]), None);
}

#[test]
fn reconciling_twice_with_the_same_spec_changes_nothing() {
    for settings in [json!({}), json!({ "minAvailable": "50%" }), json!({ "maxUnavailable": 1 })] {
        let memcached = cr(pdb_spec(settings));
        assert_idempotent(|c| build_pdb(&memcached, c));
    }
}

#[test]
fn external_drift_is_corrected() {
    let spec = pdb_spec(json!({ "maxUnavailable": 1 }));
    let want = pdb(spec.clone(), None);
    for (row, drift) in [
        ("selector edited", json!({ "spec": { "selector": { "matchLabels": { "app": "x" } } } })),
        ("minAvailable added", json!({ "spec": { "minAvailable": 3 } })),
        ("maxUnavailable edited", json!({ "spec": { "maxUnavailable": "50%" } })),
        ("label edited", json!({ "metadata": { "labels": { "app.kubernetes.io/instance": "x" } } })),
    ] {
        let drifted = merge(want.clone(), drift);
        assert_ne!(drifted, want, "{row}");
        assert_eq!(pdb(spec.clone(), Some(&drifted)), want, "{row}");
    }
}

#[test]
fn server_filled_fields_survive_and_the_result_is_a_fixed_point() {
    let spec = pdb_spec(json!({}));
    let server = merge(
        pdb(spec.clone(), None),
        json!({
            "metadata": { "uid": "u", "resourceVersion": "3", "generation": 1, "creationTimestamp": "2024-01-01T00:00:00Z" },
            "spec": { "unhealthyPodEvictionPolicy": "AlwaysAllow" },
            "status": {
                "currentHealthy": 3, "desiredHealthy": 1, "disruptionsAllowed": 2,
                "expectedPods": 3, "observedGeneration": 1,
            },
        }),
    );
    let built = pdb(spec.clone(), Some(&server));
    assert_eq!(built, server);
    assert_eq!(pdb(spec, Some(&built)), built);
}
