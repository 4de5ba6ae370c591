//! Skip guards and which objects exist (seeds' skip logic; SPEC "Disabled
//! optional resources (deliberate change)").

mod common;

use common::*;
use memcached_logic::children::ChildKind;
use memcached_logic::{exports, guards};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const ALL_KINDS: [&str; 6] =
    ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"];

fn everything() -> Value {
    json!({
        "resources": { "requests": { "cpu": "1" } },
        "autoscaling": { "enabled": true, "maxReplicas": 5, "minReplicas": 3 },
        "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1 } },
        "monitoring": { "enabled": true, "serviceMonitor": {} },
        "security": { "networkPolicy": { "enabled": true } },
    })
}

/// Which objects a CR renders, in reconcile order, and every guard's answer.
#[test]
fn rendered_objects_follow_the_guards_in_reconcile_order() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("minimal", json!({}), vec!["Deployment", "Service"]),
        (
            "pdb",
            json!({ "replicas": 2, "highAvailability": { "podDisruptionBudget": { "enabled": true } } }),
            vec!["Deployment", "Service", "PodDisruptionBudget"],
        ),
        (
            "monitoring without serviceMonitor",
            json!({ "monitoring": { "enabled": true } }),
            vec!["Deployment", "Service"],
        ),
        (
            "serviceMonitor",
            json!({ "monitoring": { "enabled": true, "serviceMonitor": {} } }),
            vec!["Deployment", "Service", "ServiceMonitor"],
        ),
        (
            "networkPolicy",
            json!({ "security": { "networkPolicy": { "enabled": true } } }),
            vec!["Deployment", "Service", "NetworkPolicy"],
        ),
        (
            "hpa",
            json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 2 } }),
            vec!["Deployment", "Service", "HorizontalPodAutoscaler"],
        ),
        ("everything", everything(), ALL_KINDS.to_vec()),
    ];
    for (row, spec, want) in cases {
        let cr = cr_value(spec);
        assert_eq!(rendered_kinds(&cr), want, "{row}: render");
        let memcached = memcached(cr.clone());
        let guard_answers = [
            ("PodDisruptionBudget", guards::pdb_enabled(&memcached)),
            ("HorizontalPodAutoscaler", guards::hpa_enabled(&memcached)),
            ("ServiceMonitor", guards::service_monitor_enabled(&memcached)),
            ("NetworkPolicy", guards::network_policy_enabled(&memcached)),
        ];
        for (kind, answer) in guard_answers {
            assert_eq!(answer, want.contains(&kind), "{row}: guard of {kind}");
        }
        for kind in ALL_KINDS {
            assert_eq!(
                ChildKind::from_kind(kind).unwrap().wanted(&memcached),
                want.contains(&kind),
                "{row}: {kind} wanted"
            );
            assert_eq!(desired(kind, &cr, None, &[]).is_some(), want.contains(&kind), "{row}: desired {kind}");
        }
    }
}

/// Turning each feature off makes its object unwanted (SPEC deliberate
/// change: the host deletes one this CR controls), while the rest stay.
#[test]
fn turning_a_feature_off_makes_only_its_object_unwanted() {
    let on = cr_value(everything());
    let cases = [
        ("PodDisruptionBudget", json!({ "highAvailability": { "podDisruptionBudget": { "enabled": false } } })),
        ("PodDisruptionBudget", json!({ "highAvailability": null })),
        ("HorizontalPodAutoscaler", json!({ "autoscaling": { "enabled": false }, "replicas": 3 })),
        ("HorizontalPodAutoscaler", json!({ "autoscaling": null, "replicas": 3 })),
        ("ServiceMonitor", json!({ "monitoring": { "enabled": false } })),
        ("ServiceMonitor", json!({ "monitoring": { "serviceMonitor": null } })),
        ("ServiceMonitor", json!({ "monitoring": null })),
        ("NetworkPolicy", json!({ "security": { "networkPolicy": { "enabled": false } } })),
        ("NetworkPolicy", json!({ "security": null })),
    ];
    for (gone, change) in cases {
        let off = merge(on.clone(), json!({ "spec": change.clone() }));
        for kind in ALL_KINDS {
            let current = desired(kind, &on, None, &[]).expect("everything is wanted first");
            let now = desired(kind, &off, Some(&current), &[]);
            assert_eq!(now.is_none(), kind == gone, "{change}: {kind}");
        }
    }
}

#[test]
fn the_guard_exports_reject_malformed_input() {
    let bad = r#"{"apiVersion":"memcached.c5c3.io/v1alpha1","kind":"Memcached","metadata":{"name":"x"},"spec":{"monitoring":{"enabled":"yes"}}}"#;
    assert!(exports::service_monitor_enabled(bad).is_err());
    assert!(exports::network_policy_enabled("not json").is_err());
    assert!(exports::pdb_enabled("[]").is_err());
    assert!(exports::hpa_enabled("").is_err());
}

#[test]
fn owned_objects_that_are_not_json_are_malformed() {
    let cr = text(&cr_value(json!({})));
    assert!(matches!(exports::desired(&cr, &["{".into()], &[]), Err(memcached_logic::Error::Malformed(_))));
    // Objects of kinds it does not build are not its own: ignored, not built upon.
    let configmap = text(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "my-cache"}}));
    let answer = exports::desired(&cr, &[configmap], &[]).expect("desired");
    assert!(answer.iter().all(|o| !o.contains("\"ConfigMap\"")), "{answer:?}");
}

#[test]
fn labels_for_memcached_export() {
    let mut labels = exports::labels_for_memcached("my-cache");
    labels.sort();
    assert_eq!(
        labels,
        [
            ("app.kubernetes.io/instance".to_owned(), "my-cache".to_owned()),
            ("app.kubernetes.io/managed-by".to_owned(), "memcached-operator".to_owned()),
            ("app.kubernetes.io/name".to_owned(), "memcached".to_owned()),
        ]
    );
}
